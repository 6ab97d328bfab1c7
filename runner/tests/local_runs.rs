//! End-to-end runs of the real `stapel-runner` binary with real harness processes: the
//! fake harness's seven scripts, process-group cleanup, escaped grandchildren, bounds and
//! the credential boundary.

mod common;
use common::{marked, running};
use serde_json::Value;
use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

const RUNNER: &str = env!("CARGO_BIN_EXE_stapel-runner");
const FAKE: &str = env!("CARGO_BIN_EXE_fake-harness");
/// The variable that marks one runner's harness processes (passed with `--allow-env`).
const MARK_VAR: &str = "STAPEL_TEST_MARK";

/// The two ways a harness is started: in its own user + PID namespace (where the machine
/// allows it) and through the wrapper's fallback (`--no-pid-namespace`).
const NAMESPACE_MODES: [&[&str]; 2] = [&[], &["--no-pid-namespace"]];

static MARKS: AtomicUsize = AtomicUsize::new(0);

/// A fresh `STAPEL_TEST_MARK` value: `(value, "NAME=value")`.
fn new_mark() -> (String, String) {
    let v = format!(
        "local-{}-{}",
        std::process::id(),
        MARKS.fetch_add(1, Ordering::SeqCst)
    );
    let needle = format!("{MARK_VAR}={v}");
    (v, needle)
}

/// `marked(needle)` waited for up to `secs` to become empty; what is left (then killed).
fn left_behind(needle: &str, secs: u64) -> Vec<(i32, String)> {
    let until = Instant::now() + Duration::from_secs(secs);
    loop {
        let left = marked(needle);
        if left.is_empty() || Instant::now() >= until {
            for (p, _) in &left {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(*p),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
            return left;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
}

struct Run {
    lines: Vec<Value>,
    code: Option<i32>,
}

impl Run {
    fn events(&self) -> Vec<&Value> {
        self.lines
            .iter()
            .filter(|l| l["message"]["kind"] == "event")
            .map(|l| &l["message"]["event"])
            .collect()
    }
    fn types(&self) -> Vec<String> {
        self.events()
            .iter()
            .map(|e| e["eventType"].as_str().unwrap().to_owned())
            .collect()
    }
    fn count(&self, t: &str) -> usize {
        self.types().iter().filter(|x| *x == t).count()
    }
    fn first(&self, t: &str) -> &Value {
        self.events()
            .into_iter()
            .find(|e| e["eventType"] == t)
            .unwrap_or_else(|| panic!("no {t} event in {:?}", self.types()))
    }
    fn index(&self, t: &str) -> usize {
        self.types()
            .iter()
            .position(|x| x == t)
            .unwrap_or_else(|| panic!("no {t}"))
    }
    fn receipts(&self, status: &str) -> usize {
        self.lines
            .iter()
            .filter(|l| {
                l["message"]["kind"] == "command_receipt" && l["message"]["status"] == status
            })
            .count()
    }
}

fn parse(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|l| {
            serde_json::from_str(l)
                .unwrap_or_else(|e| panic!("runner wrote a non-JSON line {l:?}: {e}"))
        })
        .collect()
}

/// `stapel-runner run --jsonl` with the fake harness.
fn run_script(script: &str, extra: &[&str]) -> Run {
    run_script_env(script, extra, &[])
}

/// [`run_script`] with these variables in the runner's environment.
fn run_script_env(script: &str, extra: &[&str], env: &[(&str, &str)]) -> Run {
    let out = Command::new(RUNNER)
        .args([
            "run",
            "--jsonl",
            "--script",
            script,
            "--delay-ms",
            "1",
            "--grace-ms",
            "300",
        ])
        .args(extra)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    Run {
        lines: parse(&String::from_utf8(out.stdout).unwrap()),
        code: out.status.code(),
    }
}

fn command(seq: u64, kind: &str, payload: &str) -> String {
    format!(
        r#"{{"schema":"paperclip.prp.command.v1","commandId":"c{seq}","controllerSeq":{seq},"type":"{kind}","issuedAt":"2026-01-01T00:00:00Z","payload":{payload}}}"#
    ) + "\n"
}

/// `stapel-runner serve` fed `input`; stdin (the controller) is closed `then` after the
/// first stdout line containing `marker` (or after 30 s if it never comes), and the rest of
/// the stream is read to the runner's exit. Waiting for a marker rather than a fixed time
/// keeps these real-process tests independent of the machine's load.
fn serve(args: &[&str], input: &str, marker: &str, then: Duration, env: &[(&str, &str)]) -> Run {
    use std::io::BufRead;
    let mut child = Command::new(RUNNER)
        .arg("serve")
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input.as_bytes()).unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut lines = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut stdin = Some(stdin);
    loop {
        match rx.recv_timeout(Duration::from_millis(50)) {
            Ok(line) => {
                let hit = line.contains(marker);
                lines.push(line);
                if hit && stdin.is_some() {
                    std::thread::sleep(then);
                    drop(stdin.take());
                }
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                if Instant::now() > deadline {
                    drop(stdin.take());
                }
            }
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    drop(stdin);
    reader.join().unwrap();
    let status = child.wait().unwrap();
    Run {
        lines: lines
            .iter()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("non-JSON line {l:?}: {e}")))
            .collect(),
        code: status.code(),
    }
}

fn terminal(run: &Run) -> &Value {
    assert_eq!(
        run.count("run.terminal"),
        1,
        "exactly one run.terminal: {:?}",
        run.types()
    );
    assert_eq!(
        run.types().last().map(String::as_str),
        Some("run.terminal"),
        "nothing after run.terminal"
    );
    &run.first("run.terminal")["payload"]
}

#[test]
fn happy_path() {
    let run = run_script(
        "happy-path",
        &["--log-max-lines", "3", "--log-max-bytes", "256"],
    );
    assert_eq!(run.code, Some(0));
    let t = terminal(&run);
    assert_eq!(t["turnTerminalState"], "completed");
    assert_eq!(t["runTerminalState"], "succeeded");
    assert_eq!(t["reportedWorkDisposition"], "done");
    assert!(run.index("run.result.proposed") < run.index("harness.exited"));
    assert!(run.index("harness.exited") < run.index("run.terminal"));
    assert!(run.count("harness.ready") == 1 && run.count("item.completed") >= 1);
    let exited = &run.first("harness.exited")["payload"];
    assert_eq!(
        exited["processExit"],
        serde_json::json!({"exitCode": 0, "success": true, "signal": null})
    );
    assert_eq!(exited["logs"]["lines"].as_array().unwrap().len(), 3);
    assert_eq!(exited["logs"]["droppedLines"], 2);
    assert!(exited["logs"]["retainedBytes"].as_u64().unwrap() <= 256);
    // session.started < runtime.phase.changed{executing} < turn.started
    let exec = run
        .events()
        .iter()
        .position(|e| {
            e["eventType"] == "runtime.phase.changed" && e["payload"]["phase"] == "executing"
        })
        .unwrap();
    assert!(run.index("session.started") < exec && exec < run.index("turn.started"));
    // Deterministic ids: event_<runId>_<seq:03>.
    for (i, e) in run.events().iter().enumerate() {
        assert_eq!(e["sourceEventId"], format!("event_run_local_{:03}", i + 1));
    }
}

#[test]
fn permission_input() {
    let run = run_script("permission-input", &[]);
    assert_eq!(run.count("runtime_request.created"), 2);
    assert_eq!(run.count("runtime_request.resolved"), 2);
    let kinds: Vec<&str> = run
        .events()
        .iter()
        .filter(|e| e["eventType"] == "runtime_request.created")
        .map(|e| e["payload"]["request"]["type"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["permission", "input"]);
    assert_eq!(terminal(&run)["runTerminalState"], "succeeded");
}

#[test]
fn interrupted() {
    let run = run_script("interrupted", &[]);
    assert_eq!(run.count("turn.interrupted"), 1);
    assert_eq!(run.count("run.result.proposed"), 1);
    assert_eq!(
        run.first("harness.exited")["payload"]["processExit"]["exitCode"],
        130
    );
    let t = terminal(&run);
    assert_eq!(t["runTerminalState"], "cancelled");
    assert_eq!(t["reportedWorkDisposition"], "yielded");
}

#[test]
fn error_exit_fails_the_run() {
    let run = run_script("error", &[]);
    let exit = &run.first("harness.exited")["payload"]["processExit"];
    assert_eq!(
        *exit,
        serde_json::json!({"exitCode": 7, "success": false, "signal": null})
    );
    assert_eq!(terminal(&run)["runTerminalState"], "failed");
    assert_eq!(
        run.count("run.result.proposed"),
        1,
        "the yielded result stays a separate fact"
    );
}

#[test]
fn duplicate_terminal() {
    let run = run_script("duplicate-terminal", &[]);
    terminal(&run);
    assert!(run
        .events()
        .iter()
        .any(|e| e["eventType"] == "harness.diagnostic"
            && e["payload"]["code"] == "duplicate_terminal_ignored"));
}

/// The script's lingering worker is gone after the run, in both namespace modes (found by
/// its marker: the `workerPid` it reports is its pid inside the harness's namespace).
#[test]
fn linger_worker_is_gone_after_the_run() {
    for mode in NAMESPACE_MODES {
        let (mark, needle) = new_mark();
        let mut args = vec!["--allow-env", MARK_VAR];
        args.extend(mode);
        let run = run_script_env("linger", &args, &[(MARK_VAR, &mark)]);
        terminal(&run);
        let logs = run.first("harness.exited")["payload"]["logs"]["lines"].to_string();
        assert!(
            logs.contains("workerPid"),
            "{mode:?}: no worker started: {logs}"
        );
        let left = left_behind(&needle, 3);
        assert!(left.is_empty(), "{mode:?}: outlived the run: {left:?}");
    }
}

#[test]
fn oversized_stdout_line_fails_the_run() {
    let run = run_script("oversized-line", &["--max-line-bytes", "512"]);
    let logs = run.first("harness.exited")["payload"]["logs"].to_string();
    assert!(logs.contains("exceeded 512 bytes"), "{logs}");
    let t = terminal(&run);
    assert_eq!(t["runTerminalState"], "failed");
    assert_eq!(t["reconciliation"]["reason"], "harness_protocol_violation");
}

#[test]
fn duplicate_turn_start_gets_one_duplicate_receipt() {
    let input = [
        command(1, "run.prepare", "{}"),
        command(2, "session.open", "{}"),
        command(3, "turn.start", r#"{"turnId":"t1","text":"go"}"#),
        command(3, "turn.start", r#"{"turnId":"t1","text":"go"}"#),
    ]
    .concat();
    let harness_args = ["--script", "happy-path", "--delay-ms", "1"];
    let mut args = vec!["--harness", FAKE];
    for a in harness_args {
        args.extend(["--harness-arg", a]);
    }
    let run = serve(&args, &input, "\"run.terminal\"", Duration::ZERO, &[]);
    assert_eq!(run.receipts("duplicate"), 1);
    assert_eq!(run.count("turn.started"), 1);
    assert_eq!(run.count("run.result.proposed"), 1);
    terminal(&run);
}

/// A harness written in sh that says `ready` and then does `body`.
fn sh_harness(body: &str) -> Vec<String> {
    let ready = r#"{"schema":"paperclip.fake_harness.message.v1","messageSeq":1,"type":"ready","payload":{"version":"1.0.0","script":"sh"}}"#;
    let script = format!("printf '%s\\n' '{ready}'; {body}");
    [
        "--harness",
        "/bin/sh",
        "--harness-arg",
        "-c",
        "--harness-arg",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain(std::iter::once(script))
    .collect()
}

#[test]
fn controller_eof_mid_turn_terms_then_kills_the_group() {
    // The harness ignores TERM, so only the KILL after the grace ends it.
    let args = sh_harness("trap '' TERM; while :; do sleep 0.05; done");
    let args: Vec<&str> = args
        .iter()
        .map(String::as_str)
        .chain(["--grace-ms", "200"])
        .collect();
    let input = [
        command(1, "run.prepare", "{}"),
        command(2, "session.open", "{}"),
    ]
    .concat();
    let started = Instant::now();
    let run = serve(
        &args,
        &input,
        "\"harness.ready\"",
        Duration::from_millis(100),
        &[],
    );
    let exit = &run.first("harness.exited")["payload"]["processExit"];
    assert_eq!(exit["signal"], 9, "the group needed a KILL: {exit}");
    let t = terminal(&run);
    assert_eq!(t["reconciliation"]["reason"], "controller_closed");
    assert_eq!(t["runTerminalState"], "cancelled");
    assert_eq!(run.code, Some(0));
    assert!(started.elapsed() < Duration::from_secs(10));
}

/// A `setsid` escapee is killed at teardown, in both namespace modes: with a namespace it
/// dies with the namespace's init, without one the wrapper (a subreaper) kills it.
#[test]
fn setsid_escaped_grandchild_is_killed_at_teardown() {
    for mode in NAMESPACE_MODES {
        let (mark, needle) = new_mark();
        let args =
            sh_harness("setsid sleep 1000 & echo \"escapee=$!\" >&2; while :; do sleep 0.05; done");
        let args: Vec<&str> = args
            .iter()
            .map(String::as_str)
            .chain(["--grace-ms", "100", "--allow-env", MARK_VAR])
            .chain(mode.iter().copied())
            .collect();
        // Close after `ready` plus time for the harness to start its escapee.
        let run = serve(
            &args,
            &command(1, "run.prepare", "{}"),
            "\"harness.ready\"",
            Duration::from_millis(300),
            &[(MARK_VAR, &mark)],
        );
        let logs = run.first("harness.exited")["payload"]["logs"]["lines"].to_string();
        assert!(
            logs.contains("escapee="),
            "{mode:?}: no escapee started: {logs}"
        );
        terminal(&run);
        let left = left_behind(&needle, 3);
        assert!(left.is_empty(), "{mode:?}: survived the runner: {left:?}");
    }
}

/// A harness that never writes, with a `setsid` escapee, and a `stapel-runner run` — or a
/// `stapel-runner serve` whose controller prepared the run and stays connected — killed
/// with SIGKILL (no teardown at all): the harness dies with the runner in both namespace
/// modes (the wrapper's death signals); its escapee too where the harness has its own PID
/// namespace (without one it survives: documented in the README, printed here).
#[test]
fn a_silent_harness_dies_with_a_sigkilled_run_or_serve() {
    let namespaces = Command::new(RUNNER)
        .args(["harness-exec", "--probe", "--parent", "0", "--", "true"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "pid-namespace: yes")
        .unwrap_or(false);
    for (sub, mode) in ["run", "serve"]
        .into_iter()
        .flat_map(|sub| NAMESPACE_MODES.iter().map(move |m| (sub, *m)))
    {
        let (mark, needle) = new_mark();
        let mut child = Command::new(RUNNER)
            .arg(sub)
            .args(if sub == "run" {
                &["--jsonl"][..]
            } else {
                &[][..]
            })
            .args(["--harness", "/bin/sh", "--harness-arg", "-c"])
            .args([
                "--harness-arg",
                "setsid sleep 601 </dev/null >/dev/null 2>&1 & exec sleep 600",
            ])
            .args(["--ready-timeout-ms", "600000", "--allow-env", MARK_VAR])
            .args(mode)
            .env(MARK_VAR, &mark)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // `serve` starts the harness on the controller's run.prepare; the controller
        // stays connected (its stdin open) until the runner is killed.
        let mut controller = child.stdin.take().unwrap();
        if sub == "serve" {
            controller
                .write_all(command(1, "run.prepare", "{}").as_bytes())
                .unwrap();
        }
        let runner = child.id() as i32;
        let until = Instant::now() + Duration::from_secs(10);
        let sleeping = |procs: &[(i32, String)], what: &str| {
            procs.iter().filter(|(_, c)| c.starts_with(what)).count()
        };
        let mut procs = Vec::new();
        while Instant::now() < until {
            procs = marked(&needle);
            procs.retain(|(p, _)| *p != runner);
            if sleeping(&procs, "sleep 600") == 1 && sleeping(&procs, "sleep 601") == 1 {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(
            (sleeping(&procs, "sleep 600"), sleeping(&procs, "sleep 601")),
            (1, 1),
            "{sub} {mode:?}: the harness and its escapee should run: {procs:?}"
        );
        child.kill().unwrap();
        child.wait().unwrap();
        drop(controller);
        let left = left_behind(&needle, 5);
        let harness_left: Vec<_> = left
            .iter()
            .filter(|(_, c)| c.starts_with("sleep 600"))
            .collect();
        assert!(
            harness_left.is_empty(),
            "{sub} {mode:?}: the harness outlived the SIGKILLed runner: {left:?}"
        );
        if mode.is_empty() && namespaces {
            assert!(
                left.is_empty(),
                "{sub} {mode:?}: survived the SIGKILLed runner: {left:?}"
            );
        } else {
            eprintln!(
                "{sub} {mode:?} without a PID namespace: {} escapee process(es) survived the SIGKILLed runner (documented)",
                left.len()
            );
        }
    }
}

#[test]
fn credentials_in_the_runner_environment_do_not_reach_the_harness() {
    // `/proc/self`, not `/proc/$$`: inside the harness's PID namespace `$$` is not its
    // pid in the host's `/proc`.
    let args = sh_harness("tr '\\0' ' ' < /proc/self/environ >&2; echo >&2; exit 0");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let secrets = [
        ("OPENAI_API_KEY", "sk-test-openai"),
        ("ANTHROPIC_API_KEY", "sk-ant-test"),
        ("PAPERCLIP_API_KEY", "pc-test"),
        ("EMAIL_AGENTMAIL_GENERAL_API_KEY", "am-test"),
    ];
    let run = serve(
        &args,
        &command(1, "run.prepare", "{}"),
        "\"harness.exited\"",
        Duration::ZERO,
        &secrets,
    );
    let logs = run.first("harness.exited")["payload"]["logs"]["lines"].to_string();
    assert!(
        logs.contains("PATH="),
        "the harness environ was not captured: {logs}"
    );
    for (name, value) in secrets {
        assert!(
            !logs.contains(name) && !logs.contains(value),
            "{name} leaked: {logs}"
        );
    }
}

#[test]
fn hundred_mib_of_stderr_without_newline_keeps_runner_memory_bounded() {
    let args = sh_harness("head -c 104857600 /dev/zero >&2; echo >&2; echo done >&2; exit 0");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut child = Command::new(RUNNER)
        .arg("serve")
        .args(&args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    child
        .stdin
        .as_mut()
        .unwrap()
        .write_all(command(1, "run.prepare", "{}").as_bytes())
        .unwrap();
    let mut peak_kib = 0u64;
    let reader = {
        let mut stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            let mut s = String::new();
            stdout.read_to_string(&mut s).unwrap();
            s
        })
    };
    while !reader.is_finished() {
        if let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) {
            if let Some(kib) = status
                .lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<u64>().ok())
            {
                peak_kib = peak_kib.max(kib);
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    drop(child.stdin.take());
    let run = Run {
        lines: parse(&reader.join().unwrap()),
        code: child.wait().unwrap().code(),
    };
    let logs = run.first("harness.exited")["payload"]["logs"].to_string();
    assert!(logs.contains("stderr frame exceeded"), "{logs}");
    assert!(
        logs.contains("done"),
        "the line after the oversized one was read: {logs}"
    );
    println!("runner peak RSS while draining 100 MiB of stderr: {peak_kib} KiB");
    assert!(peak_kib > 0, "RSS was never sampled");
    assert!(
        peak_kib < 32 * 1024,
        "runner peak RSS {peak_kib} KiB is not bounded"
    );
    terminal(&run);
}

/// Every process below `root` in the process tree, from `/proc`.
fn descendants(root: i32) -> Vec<i32> {
    let parent = |pid: i32| -> Option<i32> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        stat[stat.rfind(')')? + 1..]
            .split_whitespace()
            .nth(1)?
            .parse()
            .ok()
    };
    let pids: Vec<i32> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    let mut out = vec![root];
    let mut grew = true;
    while grew {
        grew = false;
        for &p in &pids {
            if !out.contains(&p) && parent(p).is_some_and(|pp| out.contains(&pp)) {
                out.push(p);
                grew = true;
            }
        }
    }
    out.retain(|p| *p != root);
    out
}

#[test]
fn sigterm_to_the_runner_ends_the_run_and_its_processes() {
    use std::io::BufRead;
    let mut child = Command::new(RUNNER)
        .args(["serve", "--script", "linger", "--grace-ms", "200"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let input = [
        command(1, "run.prepare", "{}"),
        command(2, "session.open", "{}"),
        command(3, "turn.start", r#"{"turnId":"t1","text":"go"}"#),
    ]
    .concat();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input.as_bytes()).unwrap();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let mut seen = Vec::new();
    for line in lines.by_ref() {
        let line = line.unwrap();
        let started = line.contains("\"item.started\"");
        seen.push(line);
        if started {
            break;
        }
    }
    // The harness and its lingering worker are running now.
    let below = descendants(child.id() as i32);
    assert!(
        below.len() >= 2,
        "expected harness and worker below the runner, got {below:?}"
    );
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    seen.extend(lines.map(|l| l.unwrap()));
    let status = child.wait().unwrap();
    drop(stdin);
    let run = Run {
        lines: seen
            .iter()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect(),
        code: status.code(),
    };
    let t = terminal(&run);
    assert_eq!(t["reconciliation"]["reason"], "controller_closed");
    assert_eq!(run.code, Some(0));
    for pid in below {
        assert!(!running(pid), "process {pid} outlived a SIGTERM'd runner");
    }
}
