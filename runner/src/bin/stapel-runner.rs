//! `stapel-runner`: the local runner of seed 002.
//!
//! ```text
//! stapel-runner run   [--script NAME|PATH] [--pretty|--jsonl] …   # built-in controller, one whole run
//! stapel-runner serve [--script NAME|PATH] …                      # controller on stdin/stdout JSONL
//! ```
//!
//! `serve` speaks the controller protocol: `paperclip.prp.command.v1` lines on stdin,
//! `paperclip.runner.stream.v1` lines on stdout. `run` drives itself with a built-in
//! controller (prepare, open a session, start a turn, answer requests, interrupt when the
//! script waits for it) and shows the canonical event stream. Diagnostics go to stderr.

use clap::{Args, Parser, Subcommand};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Duration;

use stapel_runner::controller::{AutoController, OperatorPlan};
use stapel_runner::host::{self, Controller, HostOptions, View};
use stapel_runner::{scripts, supervisor};
use stapel_runner_protocol::local::LocalConfig;

#[derive(Parser, Debug)]
#[command(
    version,
    about = "The Stapel local runner (seed 002): supervises a harness and streams canonical events"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run one whole local run with the built-in controller and show its event stream.
    Run {
        #[command(flatten)]
        common: Common,
        /// Readable output for a person (the default on a terminal).
        #[arg(long, conflicts_with = "jsonl")]
        pretty: bool,
        /// `paperclip.runner.stream.v1` JSONL (the default when stdout is not a terminal).
        #[arg(long)]
        jsonl: bool,
        /// Interrupt the turn after the first event of this type. Default: `item.started`
        /// for scripts that wait for an interrupt, never otherwise.
        #[arg(long, value_name = "EVENT_TYPE")]
        interrupt_after: Option<String>,
    },
    /// Serve one local run to a controller on stdin/stdout JSONL.
    Serve {
        #[command(flatten)]
        common: Common,
    },
    /// Be the fake harness (the runner's default harness re-invokes itself this way).
    #[command(hide = true)]
    FakeHarness(stapel_runner::fake::FakeArgs),
}

#[derive(Args, Debug)]
struct Common {
    /// Fake-harness script: a built-in name (happy-path, permission-input, interrupted,
    /// error, duplicate-terminal, linger, oversized-line) or a path.
    #[arg(long, default_value = "happy-path")]
    script: String,
    /// Override every script delay (milliseconds).
    #[arg(long)]
    delay_ms: Option<u64>,
    /// Harness program (default: this executable's built-in fake harness, given --script).
    #[arg(long)]
    harness: Option<PathBuf>,
    /// Argument for --harness (repeatable).
    #[arg(long = "harness-arg", value_name = "ARG", allow_hyphen_values = true)]
    harness_args: Vec<String>,
    /// Pass this variable of the runner's environment to the harness (repeatable). Only
    /// PATH and these reach it; the rest of the environment is cleared.
    #[arg(long = "allow-env", value_name = "NAME")]
    allow_env: Vec<String>,
    /// Local-run machine configuration as a JSON object (see LocalConfig); the flags
    /// above override it.
    #[arg(long, value_name = "JSON")]
    config: Option<String>,
    /// Grace between TERM and KILL of the harness group, ms.
    #[arg(long)]
    grace_ms: Option<u64>,
    /// Bound on one harness stdout/stderr line, bytes.
    #[arg(long)]
    max_line_bytes: Option<usize>,
    /// Log-tail lines kept.
    #[arg(long)]
    log_max_lines: Option<usize>,
    /// Log-tail bytes kept.
    #[arg(long)]
    log_max_bytes: Option<usize>,
    /// Harness ready deadline, ms.
    #[arg(long)]
    ready_timeout_ms: Option<u64>,
}

fn fail(msg: impl std::fmt::Display) -> ! {
    eprintln!("stapel-runner: {msg}");
    std::process::exit(2);
}

fn build_config(c: &Common) -> LocalConfig {
    let mut config = match &c.config {
        Some(json) => serde_json::from_str(json)
            .map_err(|e| e.to_string())
            .and_then(|v| LocalConfig::from_value(&v).map_err(|e| e.to_string()))
            .unwrap_or_else(|e| fail(format!("--config: {e}"))),
        None => LocalConfig::default(),
    };
    match &c.harness {
        Some(program) => {
            config.harness_program = program.display().to_string();
            config.harness_args = c.harness_args.clone();
        }
        None => {
            let me = std::env::current_exe()
                .unwrap_or_else(|e| fail(format!("cannot locate this executable: {e}")));
            config.harness_program = me.display().to_string();
            config.harness_args = vec!["fake-harness".into(), "--script".into(), c.script.clone()];
            if let Some(ms) = c.delay_ms {
                config
                    .harness_args
                    .extend(["--delay-ms".into(), ms.to_string()]);
            }
        }
    }
    for name in std::iter::once(&"PATH".to_string()).chain(c.allow_env.iter()) {
        if !config.env_allow.contains(name) {
            config.env_allow.push(name.clone());
        }
        if let Ok(v) = std::env::var(name) {
            config.harness_env.insert(name.clone(), v);
        }
    }
    if config.working_directory.is_none() {
        // The harness inherits the runner's working directory.
        config.working_directory = std::env::current_dir()
            .ok()
            .map(|d| d.display().to_string());
    }
    if let Some(v) = c.grace_ms {
        config.shutdown_grace_ms = v;
    }
    if let Some(v) = c.max_line_bytes {
        config.max_line_bytes = v;
    }
    if let Some(v) = c.log_max_lines {
        config.log_max_lines = v;
    }
    if let Some(v) = c.log_max_bytes {
        config.log_max_bytes = v;
    }
    if let Some(v) = c.ready_timeout_ms {
        config.ready_timeout_ms = v;
    }
    config
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let cli = Cli::parse();
    let (config, controller, view) = match &cli.command {
        Command::Serve { common } => (build_config(common), Controller::Stdio, View::Jsonl),
        Command::FakeHarness(args) => {
            std::process::exit(stapel_runner::fake::run(args.clone(), &["fake-harness"]).await)
        }
        Command::Run {
            common,
            pretty,
            jsonl,
            interrupt_after,
        } => {
            let script = scripts::load(&common.script).unwrap_or_else(|e| fail(e));
            let interrupt_after = interrupt_after
                .clone()
                .or_else(|| scripts::awaits_interrupt(&script).then(|| "item.started".to_string()));
            let plan = OperatorPlan {
                interrupt_after,
                ..OperatorPlan::default()
            };
            let view = if *jsonl || (!*pretty && !std::io::stdout().is_terminal()) {
                View::Jsonl
            } else {
                View::Pretty
            };
            (
                build_config(common),
                Controller::Auto(AutoController::new(plan)),
                view,
            )
        }
    };
    if let Err(e) = supervisor::become_subreaper() {
        eprintln!("stapel-runner: cannot become a child subreaper ({e}); escaped grandchildren may survive");
    }
    let opts = HostOptions {
        config,
        controller,
        view,
        drain_after_exit: Duration::from_millis(250),
        controller_stall: Duration::from_secs(10),
    };
    match host::run(opts).await {
        Ok(code) => std::process::exit(code),
        Err(e) => fail(e),
    }
}
