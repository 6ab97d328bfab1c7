//! `stapel-conformance`: a wire-level conformance kit for the Stapel hub↔runner protocol
//! (seed 000 and this project's extensions), in the manner of the Autobahn|Testsuite.
//!
//! * `stapel-conformance runner --report DIR [--case GLOB] [--jobs N] -- COMMAND [ARGS…]`:
//!   the kit is the hub; it starts COMMAND (the runner under test) with `STAPEL_HUB_URL`,
//!   `STAPEL_TOKEN_FILE` and `STAPEL_STATE_DIR` set, and restarts it where a case says so
//!   (`--jobs N`: N cases at once, each on its own listener).
//! * `stapel-conformance runner --url ws://HOST:PORT/ --token-file F --report DIR
//!   [--case GLOB]`: the kit is the hub of a runner someone else started: it listens on
//!   HOST:PORT (port 0: any free port, printed) and accepts the token in F; the cases
//!   that restart the runner are not applicable.
//! * `stapel-conformance hub --url URL --token-file F --report DIR [--case GLOB]
//!   [--status-file S]`: the kit is a runner of the hub under test (`S`: the hub's
//!   optional status hook, the JSON lines of what its application received).
//! * `stapel-conformance index --out DIR REPORT_DIR…`: one page comparing runs.
//!
//! The cases are data (`conformance/scenarios/`); every frame of the peer is judged by
//! the core's session machines. Exit status: 0 when every required case passed, 1 when
//! one failed, 2 on a usage or setup error.

mod driver;
mod hub_mode;
mod report;
mod runner_mode;
mod scenario;
mod socket;
mod steps;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use clap::{Parser, Subcommand};

use crate::steps::CaseResult;

#[derive(Parser, Debug)]
#[command(
    name = "stapel-conformance",
    version,
    about = "Wire-level conformance kit for Stapel hubs and runners"
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

/// The options both modes take: where the report goes and which cases run.
#[derive(clap::Args, Debug)]
struct CaseArgs {
    /// Where to write report.json and index.html.
    #[arg(long)]
    report: PathBuf,
    /// Only the cases whose id (or file stem) matches this glob.
    #[arg(long)]
    case: Option<String>,
    /// The scenario folder (default: conformance/scenarios of this tree, or
    /// $STAPEL_CONFORMANCE_SCENARIOS).
    #[arg(long)]
    scenarios: Option<PathBuf>,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// The kit is the hub: test a runner (started by the kit).
    Runner {
        #[command(flatten)]
        cases: CaseArgs,
        /// The `invocation` object of every task.assign (JSON).
        #[arg(
            long,
            default_value = r#"{"backend":"subprocess","model":"conformance"}"#
        )]
        invocation: String,
        /// The implementation's name in the report (default: the command's file name).
        #[arg(long)]
        name: Option<String>,
        /// Cases run at once, each with its own listener (port), token and state
        /// directory, and its own runner process.
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=64))]
        jobs: u16,
        /// A runner started outside the kit: the WebSocket URL the kit's hub listens on
        /// (`ws://HOST:PORT/`; port 0: any free port, printed on stderr), instead of a
        /// command.
        #[arg(long, requires = "token_file", conflicts_with_all = ["command", "jobs"])]
        url: Option<String>,
        /// With `--url`: a file holding the bearer token the runner presents.
        #[arg(long, requires = "url")]
        token_file: Option<PathBuf>,
        /// The runner under test and its arguments (the kit starts it).
        #[arg(last = true, required_unless_present = "url")]
        command: Vec<String>,
    },
    /// The kit is a runner: test a running hub.
    Hub {
        /// The hub's WebSocket URL.
        #[arg(long)]
        url: String,
        /// A file holding the bearer token the hub accepts.
        #[arg(long)]
        token_file: PathBuf,
        /// The hub's status hook (optional): a file of JSON lines the hub appends as
        /// its application receives sequenced frames, one object per line with a member
        /// `{task_id, seq, …}` (e.g. `{"progress": {…}}` or `{"received": <message>}`).
        /// Without it the cases that read it are not applicable.
        #[arg(long)]
        status_file: Option<PathBuf>,
        #[command(flatten)]
        cases: CaseArgs,
        /// The implementation's name in the report (default: the URL).
        #[arg(long)]
        name: Option<String>,
    },
    /// Compare several runs' reports on one page.
    Index {
        /// Where to write index.html.
        #[arg(long)]
        out: PathBuf,
        /// Report directories (each holding a report.json).
        #[arg(required = true)]
        reports: Vec<PathBuf>,
    },
}

fn finish(
    report_dir: &std::path::Path,
    name: &str,
    mode: &str,
    target: &str,
    results: &[CaseResult],
    started: Instant,
) -> ExitCode {
    let ms = started.elapsed().as_millis() as u64;
    for r in results {
        println!(
            "{:<48} {:<12} {:<15} {:>6} ms{}",
            r.id,
            r.strictness.as_str(),
            r.outcome,
            r.duration_ms,
            if r.reason.is_empty() {
                String::new()
            } else {
                format!("  {}", r.reason)
            }
        );
    }
    match report::write(report_dir, name, mode, target, results, ms) {
        Ok(p) => println!("report: {} ({} cases, {ms} ms)", p.display(), results.len()),
        Err(e) => {
            eprintln!("stapel-conformance: cannot write the report: {e}");
            return ExitCode::from(2);
        }
    }
    if results.iter().any(|r| r.outcome == "fail") {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

/// The cases of one mode matching `glob` from the scenario folder (the default one unless
/// given); none, or a folder that cannot be read, is a usage error (exit 2), said on stderr.
fn load_cases(
    scenarios: Option<PathBuf>,
    mode: &str,
    glob: Option<&str>,
) -> Result<Vec<scenario::Scenario>, ExitCode> {
    let dir = scenarios.unwrap_or_else(scenario::default_dir);
    match scenario::load(&dir, mode, glob) {
        Ok(c) if !c.is_empty() => Ok(c),
        Ok(_) => {
            eprintln!("stapel-conformance: no {mode} case matches");
            Err(ExitCode::from(2))
        }
        Err(e) => {
            eprintln!("stapel-conformance: {e}");
            Err(ExitCode::from(2))
        }
    }
}

/// The token in `file` (trimmed); `None` (said on stderr) when it cannot be read or is
/// empty.
fn read_token(file: &std::path::Path) -> Option<String> {
    match std::fs::read_to_string(file) {
        Ok(t) if !t.trim().is_empty() => Some(t.trim().to_string()),
        _ => {
            eprintln!(
                "stapel-conformance: cannot read a token from {}",
                file.display()
            );
            None
        }
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Cmd::Runner {
            cases:
                CaseArgs {
                    report,
                    case,
                    scenarios,
                },
            invocation,
            name,
            jobs,
            url,
            token_file,
            command,
        } => {
            let cases = match load_cases(scenarios, "runner", case.as_deref()) {
                Ok(c) => c,
                Err(code) => return code,
            };
            let invocation: serde_json::Value = match serde_json::from_str(&invocation) {
                Ok(v @ serde_json::Value::Object(_)) => v,
                _ => {
                    eprintln!("stapel-conformance: --invocation must be a JSON object");
                    return ExitCode::from(2);
                }
            };
            let (listen, external) = match (&url, &token_file) {
                (Some(url), Some(file)) => {
                    let Some(addr) = url
                        .strip_prefix("ws://")
                        .and_then(|rest| rest.split('/').next())
                        .filter(|a| !a.is_empty())
                    else {
                        eprintln!("stapel-conformance: --url must be ws://HOST:PORT/");
                        return ExitCode::from(2);
                    };
                    let Some(token) = read_token(file) else {
                        return ExitCode::from(2);
                    };
                    (addr.to_string(), Some(token))
                }
                _ => ("127.0.0.1:0".to_string(), None),
            };
            let target = match &url {
                Some(u) => format!("a runner started outside the kit, connecting to {u}"),
                None => command.join(" "),
            };
            let name = name.unwrap_or_else(|| match command.first() {
                Some(c) => std::path::Path::new(c)
                    .file_name()
                    .map_or_else(|| c.clone(), |f| f.to_string_lossy().into_owned()),
                None => "external-runner".to_string(),
            });
            let work = report.join("work");
            let started = Instant::now();
            let mut modes = Vec::new();
            let jobs = if external.is_some() { 1 } else { jobs };
            for _ in 0..jobs.min(cases.len() as u16) {
                match runner_mode::RunnerMode::start(
                    &listen,
                    command.clone(),
                    external.clone().map(runner_mode::External::new),
                    invocation.clone(),
                    work.clone(),
                )
                .await
                {
                    Ok(m) => modes.push(m),
                    Err(e) => {
                        eprintln!("stapel-conformance: cannot listen: {e}");
                        return ExitCode::from(2);
                    }
                }
            }
            for m in &modes {
                eprintln!("stapel-conformance: the kit's hub listens on {}", m.url());
            }
            // Each listener takes the next case when it is free.
            let queue =
                std::cell::RefCell::new(cases.iter().collect::<std::collections::VecDeque<_>>());
            let workers = modes.iter().map(|mode| {
                let queue = &queue;
                async move {
                    let mut done = Vec::new();
                    loop {
                        let next = queue.borrow_mut().pop_front();
                        let Some(sc) = next else { break };
                        done.push(mode.run_case(sc).await);
                    }
                    done
                }
            });
            let mut results: Vec<CaseResult> = futures_util::future::join_all(workers)
                .await
                .into_iter()
                .flatten()
                .collect();
            results.sort_by(|a, b| a.id.cmp(&b.id));
            finish(&report, &name, "runner", &target, &results, started)
        }
        Cmd::Hub {
            url,
            token_file,
            status_file,
            cases:
                CaseArgs {
                    report,
                    case,
                    scenarios,
                },
            name,
        } => {
            let cases = match load_cases(scenarios, "hub", case.as_deref()) {
                Ok(c) => c,
                Err(code) => return code,
            };
            let Some(token) = read_token(&token_file) else {
                return ExitCode::from(2);
            };
            let started = Instant::now();
            let mut mode = hub_mode::HubMode::new(url.clone(), token, status_file);
            let mut results = Vec::new();
            for sc in &cases {
                results.push(mode.run_case(sc).await);
            }
            finish(
                &report,
                name.as_deref().unwrap_or(&url),
                "hub",
                &url,
                &results,
                started,
            )
        }
        Cmd::Index { out, reports } => match report::index(&out, &reports) {
            Ok(p) => {
                println!("index: {}", p.display());
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("stapel-conformance: {e}");
                ExitCode::from(2)
            }
        },
    }
}
