//! `stapel-runner`: the local runner of seed 002 (`run`, `serve`) and the connected
//! runner of seed 000 (`connect`).
//!
//! ```text
//! stapel-runner run     [--script NAME|PATH] [--pretty|--jsonl] …   # built-in controller, one whole run
//! stapel-runner serve   [--script NAME|PATH] …                      # controller on stdin/stdout JSONL
//! stapel-runner connect --url WS_URL --state-dir DIR [--token-file F] …  # tasks from a hub
//! stapel-runner live    [--port N] [--script NAME|PATH] …          # the browser live view on 127.0.0.1
//! ```
//!
//! `live` serves seed 002's live page on 127.0.0.1 (first stdout line
//! `{"url": "http://127.0.0.1:PORT/"}`): a person starts runs, watches their events
//! (validated and reduced in the page by the core's browser build) and answers requests;
//! every request passes the core's admission machine first (see the library's `live`
//! module).
//!
//! `connect` keeps an outbound WebSocket to a hub and runs the tasks it assigns (see the
//! library's `connect` module). Every harness, of all three, starts through the hidden
//! `harness-exec` wrapper (`harness-init` is its PID namespace's init), so that it dies
//! with the runner.
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
    about = "The Stapel runner: run/serve supervise one local harness run and stream canonical events (seed 002); connect runs a hub's tasks over an outbound WebSocket (seed 000)"
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
    /// Serve the live view on 127.0.0.1: a page that starts runs, streams and validates
    /// their events and lets a person answer requests (first stdout line: the URL).
    Live {
        #[command(flatten)]
        common: Common,
        /// Port on 127.0.0.1 (0: a free one; the first stdout line says which).
        #[arg(long, default_value_t = 0)]
        port: u16,
        /// The live server's admission bounds as a JSON object (AdmissionConfig keys,
        /// e.g. max_active_runs, max_stream_clients, max_body_bytes).
        #[arg(long, value_name = "JSON")]
        admission_config: Option<String>,
    },
    /// Be the fake harness (the runner's default harness re-invokes itself this way).
    #[command(hide = true)]
    FakeHarness(stapel_runner::fake::FakeArgs),
    /// Connect to a hub (seed 000) and run the tasks it assigns.
    Connect {
        #[command(flatten)]
        connect: Box<ConnectArgs>,
        #[command(flatten)]
        common: Common,
    },
    /// Start a harness so that it dies with its task and with the runner (every harness
    /// of `run`, `serve` and `connect` starts through it; see the `exec` module).
    #[command(hide = true)]
    HarnessExec {
        /// The runner's pid.
        #[arg(long)]
        parent: i32,
        /// Do not try a PID namespace.
        #[arg(long)]
        no_pid_namespace: bool,
        /// Be the leaf: set the death signal and exec the command.
        #[arg(long)]
        leaf: bool,
        /// Only say whether a PID namespace is available.
        #[arg(long)]
        probe: bool,
        /// The harness command.
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
    /// The init of a harness's PID namespace (started by `harness-exec`).
    #[command(hide = true)]
    HarnessInit {
        /// The wrapper's pid.
        #[arg(long)]
        parent: i32,
        /// The descriptor to write the harness's end to.
        #[arg(long)]
        status_fd: i32,
        /// The harness command.
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
}

#[derive(Args, Debug)]
struct ConnectArgs {
    /// Hub URL, ws:// or wss://.
    #[arg(long)]
    url: String,
    /// File holding the bearer token (re-read on every reconnect, so it can rotate).
    #[arg(long)]
    token_file: Option<PathBuf>,
    /// Environment variable holding the bearer token, used without --token-file. It is
    /// read once at startup and removed from the runner's environment (it cannot
    /// rotate; use --token-file for that).
    #[arg(long, default_value = "STAPEL_RUNNER_TOKEN")]
    token_env: String,
    /// PEM file of the CA certificates to trust for wss:// (default: the system roots).
    #[arg(long)]
    ca_file: Option<PathBuf>,
    /// hello.project_id.
    #[arg(long, default_value = "local-project")]
    project_id: String,
    /// State directory (session snapshot and running tasks, saved atomically; locked
    /// while this runner runs).
    #[arg(long)]
    state_dir: PathBuf,
    /// Where the per-task working directories are made (default: STATE_DIR/work).
    #[arg(long)]
    work_dir: Option<PathBuf>,
    /// Most tasks at once; further assignments are answered with a runner_busy report.
    #[arg(long)]
    max_tasks: Option<usize>,
    /// The connection's bounds and timings as a JSON object (ConnectConfig keys, e.g.
    /// shutdown_grace_ms, cancel_boundary_ms); the flags override it.
    #[arg(long, value_name = "JSON")]
    connect_config: Option<String>,
    /// After a cancel, how long a harness may take to reach its next boundary, ms.
    #[arg(long)]
    cancel_boundary_ms: Option<u64>,
    /// Harness profiles and reins (a contract Catalog JSON file). Default: profiles
    /// `fake` (local-run) and `subprocess` (JSONL).
    #[arg(long)]
    profiles: Option<PathBuf>,
    /// Session configuration as a JSON object (SessionConfig keys, e.g. ping_interval_ms).
    #[arg(long, value_name = "JSON")]
    session_config: Option<String>,
    /// The seed-000 JSONL harness command for the `subprocess` rein (repeat for args).
    #[arg(long = "jsonl-harness", value_name = "ARG", allow_hyphen_values = true)]
    jsonl_harness: Vec<String>,
    /// First reconnect delay, ms (capped exponential backoff with jitter).
    #[arg(long)]
    backoff_initial_ms: Option<u64>,
    /// Largest reconnect delay, ms.
    #[arg(long)]
    backoff_max_ms: Option<u64>,
    /// A further hello.capabilities string (repeatable; open strings). The runner always
    /// advertises the reins of its profiles it can drive: local-run, and subprocess when
    /// --jsonl-harness is given.
    #[arg(long = "capability", value_name = "NAME")]
    capabilities: Vec<String>,
}

#[derive(Args, Debug, Clone)]
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
    /// Do not run the harness in its own user + PID namespace (it still dies with a
    /// SIGKILLed runner, but its escapees can survive it).
    #[arg(long)]
    no_pid_namespace: bool,
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

fn main() {
    let cli = Cli::parse();
    // The harness wrappers run before any runtime exists: `unshare(CLONE_NEWUSER)` needs
    // a single-threaded process.
    match &cli.command {
        Command::HarnessExec {
            parent,
            no_pid_namespace,
            leaf,
            probe,
            command,
        } => {
            if *probe {
                std::process::exit(stapel_runner::exec::probe());
            }
            let opts = stapel_runner::exec::ExecOptions {
                parent: *parent,
                no_pid_namespace: *no_pid_namespace,
                leaf: *leaf,
                command: command.clone(),
            };
            std::process::exit(stapel_runner::exec::run(&opts));
        }
        Command::HarnessInit {
            parent,
            status_fd,
            command,
        } => std::process::exit(stapel_runner::exec::init(*parent, *status_fd, command)),
        _ => {}
    }
    // Connect: the token variable is read and removed while this is the only thread.
    let token = match &cli.command {
        Command::Connect { connect, .. } => Some(read_token(connect)),
        _ => None,
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| fail(format!("cannot start the runtime: {e}")));
    std::process::exit(rt.block_on(async_main(cli, token)));
}

fn read_token(a: &ConnectArgs) -> stapel_runner::ws::TokenSource {
    use stapel_runner::ws::TokenSource;
    // A harness of the same user must not read this process's environment or memory
    // (/proc/PID/environ still holds the variable's initial value).
    if let Err(e) = nix::sys::prctl::set_dumpable(false) {
        eprintln!("stapel-runner: PR_SET_DUMPABLE failed ({e}); /proc/PID/environ stays readable");
    }
    match &a.token_file {
        Some(p) => TokenSource::File(p.clone()),
        None => TokenSource::from_env(&a.token_env)
            .unwrap_or_else(|e| fail(format!("{e} (and no --token-file was given)"))),
    }
}

async fn async_main(cli: Cli, token: Option<stapel_runner::ws::TokenSource>) -> i32 {
    if let (Command::Connect { connect, common }, Some(token)) = (&cli.command, token) {
        return run_connect(connect, common, token).await;
    }
    if let Command::Live {
        common,
        port,
        admission_config,
    } = &cli.command
    {
        return run_live(common, *port, admission_config.as_deref()).await;
    }
    let (config, controller, view) = match &cli.command {
        Command::Serve { common } => (build_config(common), Controller::Stdio, View::Jsonl),
        Command::FakeHarness(args) => {
            return stapel_runner::fake::run(args.clone(), &["fake-harness"]).await;
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
        Command::Connect { .. }
        | Command::Live { .. }
        | Command::HarnessExec { .. }
        | Command::HarnessInit { .. } => return 2,
    };
    if let Err(e) = supervisor::become_subreaper() {
        eprintln!("stapel-runner: cannot become a child subreaper ({e}); escaped grandchildren may survive");
    }
    let common = match &cli.command {
        Command::Run { common, .. } | Command::Serve { common } => common,
        _ => return 2,
    };
    let wrapper = harness_wrapper(common.no_pid_namespace, "stapel-runner", false);
    let opts = HostOptions {
        config,
        controller,
        view,
        drain_after_exit: Duration::from_millis(250),
        controller_stall: Duration::from_secs(10),
        wrapper,
        task: None,
    };
    match host::run(opts).await {
        Ok(code) => code,
        Err(e) => fail(e),
    }
}

/// The `harness-exec` prefix every harness of this runner starts through (`run`, `serve`
/// and `connect` alike), after saying on stderr whether harnesses get their own PID
/// namespace here (`tell_yes`: also when they do; otherwise only when they do not).
fn harness_wrapper(no_pid_namespace: bool, who: &str, tell_yes: bool) -> Vec<String> {
    let wrapper = stapel_runner::exec::wrapper(no_pid_namespace)
        .unwrap_or_else(|e| fail(format!("cannot locate this executable: {e}")));
    if !no_pid_namespace {
        match stapel_runner::exec::probe_pid_namespace() {
            Ok(()) if tell_yes => eprintln!("{who}: harnesses run in their own PID namespace"),
            Ok(()) => {}
            Err(why) => eprintln!(
                "{who}: no PID namespace for harnesses ({why}): an escapee of a SIGKILLed runner can survive it"
            ),
        }
    }
    wrapper
}

async fn run_live(common: &Common, port: u16, admission_config: Option<&str>) -> i32 {
    use stapel_runner::live::{self, LiveOptions};
    use stapel_runner_protocol::admission::AdmissionConfig;
    // The scripts a run may play: the built-in ones, and --script when it names a file
    // (offered under the name inside it; a request can only name, never give a path).
    let mut scripts: Vec<String> = scripts::BUILT_IN
        .iter()
        .map(|(n, _)| (*n).to_owned())
        .collect();
    let default_script = match scripts::load(&common.script) {
        Ok(s) => s.name,
        Err(e) => fail(e),
    };
    let custom = (!scripts.contains(&default_script)).then(|| common.script.clone());
    if custom.is_some() {
        scripts.push(default_script.clone());
    }
    let admission = match admission_config {
        Some(j) => serde_json::from_str(j)
            .map_err(|e| e.to_string())
            .and_then(|v| AdmissionConfig::from_value(&v).map_err(|e| e.to_string()))
            .unwrap_or_else(|e| fail(format!("--admission-config: {e}"))),
        None => AdmissionConfig::default(),
    };
    let base = common.clone();
    let custom_name = default_script.clone();
    let make_config = move |script: &str, run: &str, session: &str| {
        let mut c = base.clone();
        c.script = match &custom {
            Some(path) if script == custom_name => path.clone(),
            _ => script.to_owned(),
        };
        let mut config = build_config(&c);
        config.run_id = run.to_owned();
        config.normalized_session_id = session.to_owned();
        config
    };
    if let Err(e) = supervisor::become_subreaper() {
        eprintln!("stapel-runner: cannot become a child subreaper ({e}); escaped grandchildren may survive");
    }
    let grace = Duration::from_millis(build_config(common).shutdown_grace_ms);
    let opts = LiveOptions {
        port,
        scripts,
        default_script,
        admission,
        make_config: Box::new(make_config),
        wrapper: harness_wrapper(common.no_pid_namespace, "stapel-runner live", false),
        shutdown_grace: grace,
    };
    match live::serve(opts).await {
        Ok(code) => code,
        Err(e) => fail(format!("live: {e}")),
    }
}

async fn run_connect(
    a: &ConnectArgs,
    common: &Common,
    token: stapel_runner::ws::TokenSource,
) -> i32 {
    use stapel_runner::connect::{self, ConnectOptions};
    use stapel_runner::ws::Trust;
    use stapel_runner_protocol::contract::Catalog;
    use stapel_runner_protocol::runner_task::{ConnectConfig, Rein};
    use stapel_runner_protocol::session::SessionConfig;
    if common.allow_env.contains(&a.token_env) {
        fail("--allow-env must not pass the token variable to the harness");
    }
    let catalog = match &a.profiles {
        Some(p) => std::fs::read(p)
            .map_err(|e| e.to_string())
            .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
            .and_then(|v| Catalog::from_value(&v).map_err(|e| e.to_string()))
            .unwrap_or_else(|e| fail(format!("--profiles: {e}"))),
        None => stapel_runner_protocol::runner_task::default_catalog(),
    };
    let session = match &a.session_config {
        Some(j) => serde_json::from_str(j)
            .map_err(|e| e.to_string())
            .and_then(|v| SessionConfig::from_value(&v).map_err(|e| e.to_string()))
            .unwrap_or_else(|e| fail(format!("--session-config: {e}"))),
        None => SessionConfig::default(),
    };
    let mut config = match &a.connect_config {
        Some(j) => serde_json::from_str(j)
            .map_err(|e| e.to_string())
            .and_then(|v| ConnectConfig::from_value(&v).map_err(|e| e.to_string()))
            .unwrap_or_else(|e| fail(format!("--connect-config: {e}"))),
        None => ConnectConfig::default(),
    };
    if let Some(v) = a.max_tasks {
        config.max_tasks = v;
    }
    if let Some(v) = a.backoff_initial_ms {
        config.backoff.initial_ms = v;
    }
    if let Some(v) = a.backoff_max_ms {
        config.backoff.max_ms = v;
    }
    if let Some(v) = a.cancel_boundary_ms {
        config.task.cancel_boundary_ms = v;
    }
    let mut drivable = vec![Rein::LocalRun];
    if !a.jsonl_harness.is_empty() {
        drivable.push(Rein::Subprocess);
    }
    let mut capabilities = stapel_runner_protocol::runner_task::capabilities(&catalog, &drivable);
    for c in &a.capabilities {
        if c.is_empty() {
            fail("--capability must not be empty");
        }
        if Rein::from_id(c).is_some_and(|r| !drivable.contains(&r)) {
            fail(format!(
                "--capability {c}: this runner cannot drive that rein (give --jsonl-harness)"
            ));
        }
        if !capabilities.contains(c) {
            capabilities.push(c.clone());
        }
    }
    let wrapper = harness_wrapper(common.no_pid_namespace, "stapel-runner connect", true);
    let local = build_config(common);
    let jsonl_env: Vec<(String, String)> = common
        .allow_env
        .iter()
        .filter_map(|n| std::env::var(n).ok().map(|v| (n.clone(), v)))
        .collect();
    let opts = ConnectOptions {
        url: a.url.clone(),
        token,
        trust: match &a.ca_file {
            Some(p) => Trust::CaFile(p.clone()),
            None => Trust::System,
        },
        project_id: a.project_id.clone(),
        capabilities,
        state_dir: a.state_dir.clone(),
        session,
        config,
        catalog,
        harnesses: stapel_runner::task::Harnesses {
            path: std::env::var("PATH").unwrap_or_default(),
            grace_ms: local.shutdown_grace_ms,
            local,
            jsonl: a.jsonl_harness.clone(),
            jsonl_env,
            wrapper,
            work_root: a
                .work_dir
                .clone()
                .unwrap_or_else(|| a.state_dir.join("work")),
        },
    };
    if let Err(e) = supervisor::become_subreaper() {
        eprintln!("stapel-runner: cannot become a child subreaper ({e})");
    }
    match connect::run(opts).await {
        Ok(code) => code,
        Err(e) => fail(e),
    }
}
