//! `fake-harness`: plays a fake-harness script over stdin/stdout JSONL.
//!
//! ```text
//! fake-harness --script happy-path [--delay-ms N]
//! fake-harness --script ./my-script.json
//! ```

use clap::Parser;
use stapel_runner::fake::{self, FakeArgs};

#[derive(Parser, Debug)]
#[command(version, about = "Plays a fake-harness script over stdin/stdout JSONL")]
struct Cli {
    #[command(flatten)]
    args: FakeArgs,
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let cli = Cli::parse();
    std::process::exit(fake::run(cli.args, &[]).await);
}
