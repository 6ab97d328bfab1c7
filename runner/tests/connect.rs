//! `stapel-runner connect` end to end: real runner processes, a Rust hub over the core's
//! HubSession on 127.0.0.1, and (in the fault tests) a TCP proxy between them.
//!
//! Every runner of a test carries a marker in its environment (`STAPEL_TEST_MARK`) and
//! passes it to its harnesses (`--allow-env`), so "no process left behind" is a scan of
//! every process on the machine (`/proc/*/environ`), which also sees escapees that left
//! the runner's process tree.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

mod common;
use common::marked;
use serde_json::{json, Value};
use stapel_runner::testhub::{HubLog, TestHub};
use stapel_runner_protocol::sequencing::ConnectionState;
use stapel_runner_protocol::session::SessionConfig;

const TOKEN: &str = "test-token-7f3a";
const MARK_VAR: &str = "STAPEL_TEST_MARK";

fn fast_session() -> SessionConfig {
    SessionConfig::from_value(
        &json!({"ping_interval_ms": 200, "peer_timeout_ms": 1500, "ack_delay_ms": 20}),
    )
    .unwrap()
}

static DIRS: AtomicUsize = AtomicUsize::new(0);

fn tmpdir(name: &str) -> PathBuf {
    let n = DIRS.fetch_add(1, Ordering::SeqCst);
    let d = std::env::temp_dir().join(format!("stapel-connect-{}-{n}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

// ---- processes -----------------------------------------------------------------

/// `marked(needle)` minus `except`, waited for up to `secs` to become empty; what is left.
fn left_behind(needle: &str, except: &[i32], secs: u64) -> Vec<(i32, String)> {
    let until = Instant::now() + Duration::from_secs(secs);
    loop {
        let left: Vec<_> = marked(needle)
            .into_iter()
            .filter(|(p, _)| !except.contains(p))
            .collect();
        if left.is_empty() || Instant::now() >= until {
            return left;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
}

fn kill_all(found: &[(i32, String)]) {
    for (p, _) in found {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(*p),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

/// Whether harnesses get their own PID namespace on this machine.
fn pid_namespaces() -> bool {
    let out = Command::new(env!("CARGO_BIN_EXE_stapel-runner"))
        .args(["harness-exec", "--probe", "--parent", "0", "--", "true"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim() == "pid-namespace: yes"
}

static MARKS: AtomicUsize = AtomicUsize::new(0);

/// A runner process. Dropping it SIGKILLs it (and anything carrying its marker), so a
/// failed assertion leaves nothing running.
struct Runner {
    child: Option<Child>,
    mark: String,
    url: String,
    dir: PathBuf,
    args: Vec<String>,
    env: Vec<(String, String)>,
    stderr: Arc<Mutex<String>>,
    pids: Vec<i32>,
}

impl Runner {
    fn start(url: &str, dir: &Path, extra: &[&str]) -> Self {
        let token = dir.join("token");
        if !token.exists() {
            std::fs::write(&token, TOKEN).unwrap();
        }
        let mut args = vec!["--token-file".to_string(), token.display().to_string()];
        args.extend(extra.iter().map(|s| s.to_string()));
        Self::launch(url, dir, args, Vec::new())
    }

    fn launch(url: &str, dir: &Path, args: Vec<String>, env: Vec<(String, String)>) -> Self {
        let mark = format!(
            "{}-{}",
            std::process::id(),
            MARKS.fetch_add(1, Ordering::SeqCst)
        );
        let mut r = Self {
            child: None,
            mark,
            url: url.to_string(),
            dir: dir.to_path_buf(),
            args,
            env,
            stderr: Arc::new(Mutex::new(String::new())),
            pids: Vec::new(),
        };
        r.spawn();
        r
    }

    fn spawn(&mut self) {
        let defaults = [
            (
                "--session-config",
                r#"{"ping_interval_ms":200,"peer_timeout_ms":1500,"ack_delay_ms":20}"#,
            ),
            ("--backoff-initial-ms", "50"),
            ("--backoff-max-ms", "400"),
            ("--delay-ms", "5"),
        ];
        let mut args: Vec<String> = Vec::new();
        for (flag, value) in defaults {
            if !self.args.iter().any(|a| a == flag) {
                args.extend([flag.to_string(), value.to_string()]);
            }
        }
        let mut child = Command::new(env!("CARGO_BIN_EXE_stapel-runner"))
            .args(["connect", "--url", &self.url])
            .arg("--state-dir")
            .arg(self.dir.join("state"))
            .args(["--allow-env", MARK_VAR])
            .args(&args)
            .args(&self.args)
            .env(MARK_VAR, &self.mark)
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .current_dir(&self.dir)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        self.pids.push(child.id() as i32);
        let mut err = child.stderr.take().unwrap();
        let sink = self.stderr.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = err.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        self.child = Some(child);
    }

    fn pid(&self) -> i32 {
        self.child.as_ref().map_or(0, |c| c.id() as i32)
    }

    fn needle(&self) -> String {
        format!("{MARK_VAR}={}", self.mark)
    }

    /// Every process of this runner's harnesses (all lifetimes), the runners excluded.
    fn harness_processes(&self) -> Vec<(i32, String)> {
        marked(&self.needle())
            .into_iter()
            .filter(|(p, _)| !self.pids.contains(p))
            .collect()
    }

    fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// SIGTERM and wait (the runner stops its tasks and reports them).
    fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(c.id() as i32),
                nix::sys::signal::Signal::SIGTERM,
            );
            let _ = c.wait();
        }
        std::thread::sleep(Duration::from_millis(30));
    }

    fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// After `stop` or `kill9`: nothing carrying the marker may be left, anywhere.
    fn assert_nothing_left(&self, what: &str) {
        let left = left_behind(&self.needle(), &[], 5);
        kill_all(&left);
        assert!(left.is_empty(), "{what}: processes left behind: {left:?}");
    }
}

impl Drop for Runner {
    fn drop(&mut self) {
        self.kill9();
        kill_all(&marked(&self.needle()));
    }
}

// ---- the oracle ----------------------------------------------------------------

/// Progress seqs 1..=n applied once each in order, then exactly one report with seq n+1.
/// Returns `(n, report)`.
fn check_task(
    log: &HubLog,
    task: &str,
    attempt: u64,
) -> Result<(usize, serde_json::Value), String> {
    let key = (task.to_string(), attempt);
    let seqs = log.progress.get(&key).cloned().unwrap_or_default();
    let expect: Vec<u64> = (1..=seqs.len() as u64).collect();
    if seqs != expect {
        return Err(format!("{task}: progress seqs {seqs:?}"));
    }
    let reports = log.reports.get(&key).cloned().unwrap_or_default();
    match reports.as_slice() {
        [(seq, r)] if *seq == seqs.len() as u64 + 1 => Ok((
            seqs.len(),
            serde_json::Value::from(stapel_runner_protocol::json::Value::Object(r.clone())),
        )),
        other => Err(format!(
            "{task}: reports at seqs {:?} after {} progress",
            other.iter().map(|(s, _)| s).collect::<Vec<_>>(),
            seqs.len()
        )),
    }
}

fn reported(log: &HubLog, tasks: &[String]) -> bool {
    tasks
        .iter()
        .all(|t| log.reports.contains_key(&(t.clone(), 1)))
}

/// Wait (at most 20 s) until the hub applied progress of `task` (attempt 1).
fn progressed(hub: &TestHub, task: &str) -> (bool, HubLog) {
    hub.wait_for(Duration::from_secs(20), |l| {
        l.progress.contains_key(&(task.to_string(), 1))
    })
}

fn failure_type(r: &serde_json::Value) -> &str {
    r["failure_type"].as_str().unwrap_or("")
}

// ---- harnesses -----------------------------------------------------------------

fn script(dir: &Path, name: &str, body: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
    let _ = Command::new("chmod").arg("+x").arg(&p).status();
    p.display().to_string()
}

/// One JSONL harness whose behaviour the prompt chooses: `KIND N TASK`.
///
/// * `count N` — N progress lines cycling state/tool/usage/controls, then a result;
/// * `slow N` — a state line, N×100 ms of silence, a state line, a result;
/// * `hang` — a state line, then silence until stopped;
/// * `escapee` — starts `setsid sleep 600` (marked `STAPEL_ESC=TASK`), a state line, a
///   result;
/// * `crash` — two state lines, then exit 3 before any result.
const MULTI: &str = r#"read line
set -- $(printf '%s' "$line" | sed 's/.*"prompt":"\([^"]*\)".*/\1/')
kind=$1; n=$2; task=$3
case $kind in
count)
  i=0
  while [ $i -lt $n ]; do
    case $((i % 4)) in
      0) echo '{"type":"state","state":"working"}';;
      1) echo '{"type":"tool","name":"bash"}';;
      2) echo '{"type":"usage","usage":{"input_tokens":2,"output_tokens":1}}';;
      3) echo '{"type":"controls"}';;
    esac
    i=$((i+1))
  done
  echo '{"type":"result","text":"ok","usage":{"input_tokens":3,"output_tokens":1}}'
  read more;;
slow)
  echo '{"type":"state","state":"start"}'
  sleep $(( n / 10 )).$(( n % 10 ))
  echo '{"type":"state","state":"end"}'
  echo '{"type":"result","text":"ok","usage":{"input_tokens":1,"output_tokens":1}}'
  read more;;
hang)
  echo '{"type":"state","state":"waiting"}'
  exec sleep 600;;
escapee)
  STAPEL_ESC=$task setsid sleep 600 </dev/null >/dev/null 2>&1 &
  echo '{"type":"state","state":"forked"}'
  echo '{"type":"result","text":"ok","usage":{"input_tokens":1,"output_tokens":1}}'
  read more;;
crash)
  echo '{"type":"state","state":"a"}'
  echo '{"type":"state","state":"b"}'
  exit 3;;
esac"#;

/// The kinds `count N` produces, in order.
fn count_kinds(n: usize) -> Vec<String> {
    (0..n)
        .map(|i| ["state", "tool", "usage", "controls"][i % 4].to_string())
        .collect()
}

// ---- plain end-to-end tests ----------------------------------------------------

#[test]
fn a_task_runs_through_the_fake_harness_and_reports_done() {
    let hub = TestHub::start(TOKEN, fast_session());
    let dir = tmpdir("happy");
    let mut runner = Runner::start(&hub.url(), &dir, &[]);
    hub.assign("T-1", 1, json!({"backend": "fake", "model": "m"}));
    let (ok, log) = hub.wait_for(Duration::from_secs(20), |l| reported(l, &["T-1".into()]));
    runner.stop();
    let err = runner.stderr();
    assert!(ok, "no report: {log:?}\n{err}");
    let (_, r) = check_task(&log, "T-1", 1).unwrap();
    assert_eq!(r["status"], "done");
    let kinds: BTreeSet<_> = log.kinds[&("T-1".to_string(), 1)].iter().cloned().collect();
    assert!(
        kinds.contains("state") && kinds.contains("tool"),
        "{kinds:?}"
    );
    assert!(!err.contains(TOKEN), "the token leaked into the log");
    // The hello: the defaults, the crate's version, the reins this runner drives (no
    // --jsonl-harness: local-run only), nothing to resume.
    let hello = log.first_hello.as_ref().expect("a hello");
    assert_eq!(hello.project_id, "local-project");
    assert_eq!(hello.runner_version, env!("CARGO_PKG_VERSION"));
    assert_eq!(hello.capabilities, ["local-run"]);
    assert!(hello.resume.is_empty(), "{:?}", hello.resume);
    runner.assert_nothing_left("after a done task");
    // The per-task working directory is removed with the task.
    let work: Vec<_> = std::fs::read_dir(dir.join("state/work")).unwrap().collect();
    assert!(work.is_empty(), "sandboxes left: {work:?}");
}

#[test]
fn refusals_busy_and_cancel_are_answered_with_reports() {
    let hub = TestHub::start(TOKEN, fast_session());
    let dir = tmpdir("answers");
    let mut runner = Runner::start(
        &hub.url(),
        &dir,
        &["--max-tasks", "1", "--delay-ms", "5000"],
    );
    hub.assign("T-slow", 1, json!({"backend": "fake"}));
    let (ok, _) = progressed(&hub, "T-slow");
    assert!(ok);
    hub.assign("T-busy", 1, json!({"backend": "fake"}));
    // The same attempt again while it runs is ignored (one report per attempt); another
    // attempt is answered attempt_in_progress.
    hub.assign("T-slow", 1, json!({"backend": "fake"}));
    hub.assign("T-slow", 2, json!({"backend": "fake"}));
    hub.cancel("T-slow", "operator");
    let (ok, log) = hub.wait_for(Duration::from_secs(20), |l| {
        reported(l, &["T-slow".into(), "T-busy".into()])
            && l.reports.contains_key(&("T-slow".into(), 2))
    });
    assert!(ok, "{log:?}\n{}", runner.stderr());
    // With the slot free again, a refused profile is reported as such.
    hub.assign("T-nope", 1, json!({"backend": "no-such-profile"}));
    let (ok, log) = hub.wait_for(Duration::from_secs(20), |l| reported(l, &["T-nope".into()]));
    runner.stop();
    assert!(ok, "{log:?}\n{}", runner.stderr());
    let (_, slow) = check_task(&log, "T-slow", 1).unwrap();
    assert_eq!(
        (slow["status"].as_str(), failure_type(&slow)),
        (Some("failed"), "cancelled"),
        "{slow}"
    );
    assert_eq!(slow["summary_business"], "cancelled by the hub: operator");
    assert_eq!(slow["failure_stage"], "execution");
    let (_, busy) = check_task(&log, "T-busy", 1).unwrap();
    assert_eq!(failure_type(&busy), "runner_busy");
    let (_, dup) = check_task(&log, "T-slow", 2).unwrap();
    assert_eq!(failure_type(&dup), "attempt_in_progress");
    let (_, nope) = check_task(&log, "T-nope", 1).unwrap();
    assert_eq!(failure_type(&nope), "profile_refused");
    assert_eq!(nope["failure_stage"], "resolution");
    assert!(runner
        .stderr()
        .contains("running already; assignment ignored"));
    runner.assert_nothing_left("after cancel, busy and refusal");
}

/// The task ids with live streams in the session snapshot saved under `state` (read back
/// with the core's `ConnectionState::restore`), or `None` while the file is absent or
/// unreadable.
fn live_session_tasks(state: &Path) -> Option<BTreeSet<String>> {
    let file: Value = serde_json::from_str(&std::fs::read_to_string(state).ok()?).ok()?;
    let saved = ConnectionState::restore(file["snapshot"].as_str()?.as_bytes()).ok()?;
    Some(saved.tasks().map(|(task, _)| task.to_owned()).collect())
}

#[test]
fn busy_answers_beyond_the_stream_bound_do_not_leak_session_state() {
    // The runner keeps at most 16 streams per direction; 48 assignments answered
    // runner_busy (in waves of 8, each sent once the one before was forgotten) only fit
    // if each one is forgotten once its report is acknowledged.
    let hub = TestHub::start(TOKEN, fast_session());
    let dir = tmpdir("busy-leak");
    let mut runner = Runner::start(
        &hub.url(),
        &dir,
        &[
            "--max-tasks",
            "1",
            "--jsonl-harness",
            &script(&dir, "multi", MULTI),
            "--session-config",
            r#"{"ping_interval_ms":200,"peer_timeout_ms":1500,"ack_delay_ms":20,"sequencing":{"max_streams":16}}"#,
        ],
    );
    hub.assign_goal(
        "T-hold",
        1,
        json!({"backend": "subprocess"}),
        "hang 0 T-hold",
    );
    let (ok, _) = progressed(&hub, "T-hold");
    assert!(ok, "{}", runner.stderr());
    let mut all = Vec::new();
    for wave in 0..6 {
        let ids: Vec<String> = (0..8).map(|i| format!("B-{wave}-{i}")).collect();
        for id in &ids {
            hub.assign(id, 1, json!({"backend": "fake"}));
        }
        let (ok, log) = hub.wait_for(Duration::from_secs(20), |l| reported(l, &ids));
        assert!(
            ok,
            "wave {wave}: {} reports\n{}",
            log.reports.len(),
            runner.stderr()
        );
        // The next wave fits only once the runner has forgotten this one, which takes
        // the hub's acknowledgement of the reports: wait for it (under load it can lag
        // behind the reports) rather than race it.
        let state = dir.join("state").join("runner-state.json");
        let deadline = Instant::now() + Duration::from_secs(20);
        while live_session_tasks(&state)
            .map(|live| ids.iter().any(|id| live.contains(id)))
            .unwrap_or(true)
        {
            assert!(
                Instant::now() < deadline,
                "wave {wave} was never forgotten\n{}",
                runner.stderr()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        // The wait reads real streams: the running task's are there.
        let live = live_session_tasks(&state).unwrap_or_default();
        assert!(live.contains("T-hold"), "wave {wave}: {live:?}");
        all.extend(ids);
    }
    hub.cancel("T-hold", "done");
    let (ok, log) = hub.wait_for(Duration::from_secs(20), |l| reported(l, &["T-hold".into()]));
    assert!(ok);
    runner.stop();
    for id in &all {
        let (_, r) = check_task(&log, id, 1).unwrap();
        assert_eq!(failure_type(&r), "runner_busy");
    }
    let err = runner.stderr();
    assert!(
        !err.contains("too_many_streams") && !err.contains("refused"),
        "{err}"
    );
    runner.assert_nothing_left("after the busy waves");
}

#[test]
fn a_bad_token_is_refused_before_the_upgrade_and_retried_with_backoff() {
    let hub = TestHub::start("the-right-token", fast_session());
    let dir = tmpdir("token");
    std::fs::write(dir.join("token"), "a-wrong-token").unwrap();
    let mut runner = Runner::start(&hub.url(), &dir, &[]);
    // Count from the first refusal (the runner's start-up time varies with load).
    let (ok, _) = hub.wait_for(Duration::from_secs(20), |l| l.rejected >= 1);
    assert!(ok, "{}", runner.stderr());
    let first = hub.log().rejected;
    std::thread::sleep(Duration::from_millis(1500));
    let refused = hub.log().rejected - first;
    // Backoff 50 ms doubling to 400 ms, jittered in the upper half: at most ~10 tries in
    // 1.5 s; a tight loop would make thousands.
    assert!((1..=12).contains(&refused), "{refused} refused upgrades");
    assert_eq!(hub.log().accepted, 0);
    // The token file is re-read on every reconnect: a rotated token is used.
    std::fs::write(dir.join("token"), "the-right-token").unwrap();
    let (ok, _) = hub.wait_for(Duration::from_secs(5), |l| l.hellos >= 1);
    assert!(ok, "{}", runner.stderr());
    // The token expires: the hub accepts only a new one and drops the connection. The
    // runner is refused, backs off, and picks up the rotated file.
    hub.set_token("the-next-token");
    hub.drop_connection();
    let before = hub.log().rejected;
    std::thread::sleep(Duration::from_millis(800));
    let (refused_again, hellos) = (hub.log().rejected - before, hub.log().hellos);
    assert!((1..=10).contains(&refused_again), "{refused_again}");
    std::fs::write(dir.join("token"), "the-next-token").unwrap();
    let (ok, _) = hub.wait_for(Duration::from_secs(5), |l| l.hellos > hellos);
    runner.stop();
    let err = runner.stderr();
    assert!(ok, "{err}");
    for t in ["a-wrong-token", "the-right-token", "the-next-token"] {
        assert!(!err.contains(t), "{t} leaked: {err}");
    }
    assert!(err.contains("HTTP 401"), "{err}");
}

/// What the token-hunting harness does: it reads the path of its findings file from its
/// prompt, then looks for the token in
///
/// * `own` places — its own environment (`env`, `/proc/self/environ`), its working
///   directory (`./token`, `../token`, every file below `.`): none of these
///   may ever hold the token, with or without namespaces;
/// * `other` places — every other process's `/proc/PID/environ`, `cmdline` and
///   `cwd/token` it can read: closed to it by its own user namespace, or (without one) by
///   the runner being non-dumpable as long as the harness is not root.
///
/// The token to look for is read from the file `pattern` next to the script (`grep -F -f`),
/// so that no `grep` command line holds it. Each finding is a line `own PLACE` or
/// `other PLACE`; `checked own=yes others=N` ends a
/// complete hunt (N: how many other processes' environments it could read at all).
const HUNT: &str = r#"read line
out=$(printf '%s' "$line" | sed 's/.*"prompt":"\([^"]*\)".*/\1/')
pat="$(dirname "$0")/pattern"
: > "$out"
if env | grep -qF -f "$pat"; then echo "own env" >> "$out"; fi
if grep -qF -f "$pat" /proc/self/environ 2>/dev/null; then echo "own /proc/self/environ" >> "$out"; fi
grep -q PATH= /proc/self/environ 2>/dev/null || echo "own-unreadable /proc/self/environ" >> "$out"
for f in ./token ../token; do
  if [ -f "$f" ] && grep -qF -f "$pat" "$f" 2>/dev/null; then echo "own $f" >> "$out"; fi
done
for f in $(grep -rlF -f "$pat" . 2>/dev/null); do echo "own $f" >> "$out"; done
readable=0
for f in /proc/[0-9]*/environ; do
  if [ -r "$f" ] && cat "$f" >/dev/null 2>&1; then readable=$((readable+1)); fi
done
for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline /proc/[0-9]*/cwd/token; do
  if grep -qF -f "$pat" "$f" 2>/dev/null; then echo "other $f" >> "$out"; fi
done
echo "checked own=yes others=$readable" >> "$out"
echo '{"type":"state","state":"hunted"}'
echo '{"type":"result","text":"ok","usage":{"input_tokens":1,"output_tokens":1}}'
read more"#;

/// The token from an environment variable (read once, removed from the runner's
/// environment) and from a file in the runner's directory: a harness that hunts for it
/// (see [`HUNT`]) finds nothing.
///
/// The `own` places are checked everywhere, also without namespaces and with
/// `--no-pid-namespace` (the same wrapper fallback a machine without user namespaces
/// gets). The `other` places are only closed to a harness running as root by its own user
/// namespace: without one (as root) that part is skipped and says so; with `CI` set, a
/// machine without user namespaces fails the test (the project's CI machine has them).
#[test]
fn a_harness_cannot_find_the_token() {
    let namespaces = pid_namespaces();
    let root = nix::unistd::geteuid().is_root();
    if !namespaces && std::env::var_os("CI").is_some() {
        panic!(
            "CI is set but harnesses get no user/PID namespace here: the hunt across other \
             processes' /proc entries cannot be checked (CI must have namespaces)"
        );
    }
    let hub = TestHub::start(TOKEN, fast_session());
    let harness_dir = tmpdir("token-hunt-harness");
    std::fs::write(harness_dir.join("pattern"), TOKEN).unwrap();
    let harness = script(&harness_dir, "hunt", HUNT);
    let mut skipped = Vec::new();
    // The machine's own mode (a namespace when it has them), then the fallback.
    for no_ns in [false, true] {
        let isolated = namespaces && !no_ns;
        let others_closed = isolated || !root;
        let mode = if isolated {
            "own user namespace"
        } else if no_ns {
            "--no-pid-namespace"
        } else {
            "no namespace available"
        };
        let dir = tmpdir("token-hunt");
        let findings = |task: &str| dir.join(format!("findings-{task}"));
        let mut extra = vec!["--jsonl-harness".to_string(), harness.clone()];
        if no_ns {
            extra.push("--no-pid-namespace".into());
        }
        // From the environment variable (no --token-file); a token file lies in the
        // runner's directory all the same.
        std::fs::write(dir.join("token"), TOKEN).unwrap();
        let mut runner = Runner::launch(
            &hub.url(),
            &dir,
            extra.clone(),
            vec![("STAPEL_RUNNER_TOKEN".into(), TOKEN.into())],
        );
        let env_task = format!("T-env-{no_ns}");
        let goal = findings(&env_task).display().to_string();
        hub.assign_goal(&env_task, 1, json!({"backend": "subprocess"}), &goal);
        let (ok, log) = hub.wait_for(Duration::from_secs(20), |l| {
            reported(l, std::slice::from_ref(&env_task))
        });
        assert!(ok, "{mode}: {log:?}\n{}", runner.stderr());
        assert_eq!(check_task(&log, &env_task, 1).unwrap().1["status"], "done");
        // An environment token cannot rotate: the connection survives a drop with it.
        hub.drop_connection();
        let hellos = hub.log().hellos;
        let (ok, _) = hub.wait_for(Duration::from_secs(5), |l| l.hellos > hellos);
        assert!(
            ok,
            "{mode}: reconnect with the env token: {}",
            runner.stderr()
        );
        runner.stop();
        assert!(!runner.stderr().contains(TOKEN));
        // From a token file in the runner's own directory (as the README demo does).
        let mut args = vec![
            "--token-file".to_string(),
            dir.join("token").display().to_string(),
        ];
        args.extend(extra);
        let mut runner = Runner::launch(&hub.url(), &dir, args, Vec::new());
        let file_task = format!("T-file-{no_ns}");
        let goal = findings(&file_task).display().to_string();
        hub.assign_goal(&file_task, 1, json!({"backend": "subprocess"}), &goal);
        let (ok, log) = hub.wait_for(Duration::from_secs(20), |l| {
            reported(l, std::slice::from_ref(&file_task))
        });
        runner.stop();
        assert!(ok, "{mode}: {log:?}\n{}", runner.stderr());
        assert_eq!(check_task(&log, &file_task, 1).unwrap().1["status"], "done");
        for task in [&env_task, &file_task] {
            let text = std::fs::read_to_string(findings(task))
                .unwrap_or_else(|e| panic!("{mode}: {task}: no findings file: {e}"));
            let last = text.lines().last().unwrap_or("");
            assert!(
                last.starts_with("checked own=yes"),
                "{mode}: {task}: the hunt did not complete: {text}"
            );
            let own: Vec<&str> = text.lines().filter(|l| l.starts_with("own")).collect();
            assert!(
                own.is_empty(),
                "{mode}: {task}: the harness found the token in its own reach: {own:?}"
            );
            let other: Vec<&str> = text.lines().filter(|l| l.starts_with("other ")).collect();
            if others_closed {
                assert!(
                    other.is_empty(),
                    "{mode}: {task}: the harness read the token from another process: {other:?}"
                );
            } else {
                skipped.push(format!(
                    "{mode}, {task}: the harness runs as root without a user namespace, so other \
                     processes' /proc entries are open to it (found the token in {} place(s): \
                     {other:?}; documented in the runner README); that part is not asserted",
                    other.len()
                ));
            }
            eprintln!("{mode}: {task}: {last}");
        }
    }
    for s in &skipped {
        eprintln!("SKIPPED: {s}");
    }
    if !namespaces {
        eprintln!(
            "SKIPPED: no user/PID namespaces on this machine: the hunt ran only without one \
             (set CI to make this a failure)"
        );
    }
}

#[test]
fn a_sigkilled_runner_takes_its_harness_along_and_resumes_from_its_state_dir() {
    let hub = TestHub::start(TOKEN, fast_session());
    let dir = tmpdir("sigkill");
    let mut runner = Runner::start(&hub.url(), &dir, &["--delay-ms", "20000"]);
    hub.assign("T-k", 1, json!({"backend": "fake"}));
    let (ok, _) = hub.wait_for(Duration::from_secs(20), |l| {
        l.progress
            .get(&("T-k".into(), 1))
            .is_some_and(|p| p.len() >= 3)
    });
    assert!(ok);
    let harness = runner.harness_processes();
    assert!(!harness.is_empty(), "the harness should be running");
    runner.kill9();
    let left = left_behind(&runner.needle(), &[], 5);
    assert!(
        left.is_empty(),
        "harness processes survived the runner: {left:?}"
    );
    // Restart from the same state directory: the task is reported, nothing applied twice.
    runner.spawn();
    let (ok, log) = hub.wait_for(Duration::from_secs(20), |l| reported(l, &["T-k".into()]));
    runner.stop();
    assert!(ok, "{log:?}\n{}", runner.stderr());
    let (_, r) = check_task(&log, "T-k", 1).unwrap();
    assert_eq!(failure_type(&r), "runner_restarted");
    assert_eq!(log.gaps, 0);
    runner.assert_nothing_left("after the restart");
}

#[test]
fn a_second_runner_on_the_same_state_dir_refuses_to_start() {
    let hub = TestHub::start(TOKEN, fast_session());
    let dir = tmpdir("lock");
    let _first = Runner::start(&hub.url(), &dir, &[]);
    let (ok, _) = hub.wait_for(Duration::from_secs(10), |l| l.hellos >= 1);
    assert!(ok);
    let out = Command::new(env!("CARGO_BIN_EXE_stapel-runner"))
        .args(["connect", "--url", &hub.url(), "--token-file"])
        .arg(dir.join("token"))
        .arg("--state-dir")
        .arg(dir.join("state"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("another runner uses the state directory"),
        "{err}"
    );
}

#[test]
fn subprocess_jsonl_harnesses_finish_crash_flood_and_hang() {
    let dir = tmpdir("jsonl");
    let multi = script(&dir, "multi", MULTI);
    let cases = [
        ("count 8", "done", None, Some(8)),
        ("crash 0", "failed", Some("unexpected_eof"), Some(2)),
        ("count 300", "done", None, Some(300)),
        ("hang 0", "failed", Some("cancelled"), Some(1)),
    ];
    for (goal, status, failure, progress) in cases {
        let hub = TestHub::start(TOKEN, fast_session());
        let sub = tmpdir("jsonl-case");
        let mut runner = Runner::start(
            &hub.url(),
            &sub,
            &[
                "--jsonl-harness",
                &multi,
                "--grace-ms",
                "200",
                "--cancel-boundary-ms",
                "300",
            ],
        );
        hub.assign_goal("T-j", 1, json!({"backend": "subprocess"}), goal);
        if goal.starts_with("hang") {
            let (ok, _) = progressed(&hub, "T-j");
            assert!(ok);
            hub.cancel("T-j", "stop");
        }
        let (ok, log) = hub.wait_for(Duration::from_secs(20), |l| reported(l, &["T-j".into()]));
        assert!(ok, "{goal}: {log:?}\n{}", runner.stderr());
        let left = left_behind(&runner.needle(), &[runner.pid()], 5);
        runner.stop();
        let (n, r) = check_task(&log, "T-j", 1).unwrap();
        assert_eq!(r["status"].as_str(), Some(status), "{goal}: {r}");
        assert_eq!(r["failure_type"].as_str(), failure, "{goal}: {r}");
        assert_eq!(Some(n), progress, "{goal}");
        if goal.starts_with("count") {
            assert_eq!(r["usage"]["fresh_input"].as_u64(), Some(3));
            // Every progress kind made it end to end, in order.
            assert_eq!(log.kinds[&("T-j".to_string(), 1)], count_kinds(n), "{goal}");
        }
        assert!(
            left.is_empty(),
            "{goal}: processes left after the report: {left:?}"
        );
    }
}

/// The hello carries the given project id, the derived and the given capabilities, and
/// after a cut connection the resume map of the task streams the hub wrote.
#[test]
fn the_hello_names_the_project_the_capabilities_and_what_to_resume() {
    let dir = tmpdir("hello");
    let multi = script(&dir, "multi", MULTI);
    let hub = TestHub::start(TOKEN, fast_session());
    let mut runner = Runner::start(
        &hub.url(),
        &dir,
        &[
            "--project-id",
            "proj-7",
            "--capability",
            "gpu",
            "--capability",
            "subprocess",
            "--jsonl-harness",
            &multi,
            "--grace-ms",
            "200",
            "--cancel-boundary-ms",
            "300",
        ],
    );
    hub.assign_goal("T-h", 1, json!({"backend": "subprocess"}), "hang 0");
    let (ok, log) = progressed(&hub, "T-h");
    assert!(ok, "{log:?}\n{}", runner.stderr());
    let first = log.first_hello.clone().expect("a hello");
    assert_eq!(first.project_id, "proj-7");
    assert_eq!(first.runner_version, env!("CARGO_PKG_VERSION"));
    // Derived from the default catalog and --jsonl-harness, then the given ones, once.
    assert_eq!(first.capabilities, ["local-run", "subprocess", "gpu"]);
    assert!(first.resume.is_empty(), "{:?}", first.resume);
    hub.drop_connection();
    let (ok, log) = hub.wait_for(Duration::from_secs(20), |l| l.hellos >= 2);
    assert!(ok, "no second hello: {log:?}\n{}", runner.stderr());
    let again = log.last_hello.clone().expect("a hello");
    assert_eq!(again.capabilities, first.capabilities);
    // The hub wrote one frame on T-h's stream (the assignment): resume from it.
    assert_eq!(
        again
            .resume
            .iter()
            .map(|(k, v)| (k.as_str(), *v))
            .collect::<Vec<_>>(),
        [("T-h", 1)]
    );
    hub.cancel("T-h", "stop");
    let (ok, log) = hub.wait_for(Duration::from_secs(20), |l| reported(l, &["T-h".into()]));
    assert!(ok, "{log:?}\n{}", runner.stderr());
    runner.stop();
    let (_, r) = check_task(&log, "T-h", 1).unwrap();
    assert_eq!(failure_type(&r), "cancelled", "{r}");
    runner.assert_nothing_left("after the hello test");
}

/// Backpressure: while the hub is unreachable, a harness that floods progress (8,000
/// lines of ~230 bytes, 1.8 MB) fills the session's kept log (bounded by
/// `max_outbox_frames`), then the runner's queue (taken below `max_queued_messages`, at
/// most `max_event_batch` at a time: ≤ 64 + 256 messages) and event channel (1,024),
/// then the pipes (at most 8 chunks of 64 KiB read ahead, and the kernel's pipe) —
/// about 4,600 lines in all — and blocks, instead of the runner buffering without bound.
/// Once the hub accepts the runner again every frame arrives, once each and in order.
#[test]
fn a_flooding_harness_blocks_while_the_hub_is_away_and_nothing_is_lost() {
    const LINES: usize = 8_000;
    let dir = tmpdir("backpressure");
    let mark = dir.join("wrote-everything");
    let go = dir.join("go");
    // One progress line, then (once the test has sent the hub away) the flood.
    let flood = script(
        &dir,
        "flood",
        &format!(
            "read line\necho '{{\"type\":\"state\",\"state\":\"start\"}}'\nwhile [ ! -e '{go}' ]; do sleep 0.05; done\ni=0\nwhile [ $i -lt {LINES} ]; do echo '{{\"type\":\"state\",\"state\":\"{pad}\"}}'; i=$((i+1)); done\n: > '{mark}'\necho '{{\"type\":\"result\",\"text\":\"ok\",\"usage\":{{\"input_tokens\":1,\"output_tokens\":1}}}}'\nread more\n",
            go = go.display(),
            pad = "w".repeat(200),
            mark = mark.display()
        ),
    );
    let hub = TestHub::start(TOKEN, fast_session());
    let mut runner = Runner::start(
        &hub.url(),
        &dir,
        &[
            "--jsonl-harness",
            &flood,
            "--session-config",
            r#"{"ping_interval_ms":200,"peer_timeout_ms":1500,"ack_delay_ms":20,"sequencing":{"max_outbox_frames":64}}"#,
        ],
    );
    hub.assign("T-b", 1, json!({"backend": "subprocess"}));
    let (ok, log) = progressed(&hub, "T-b");
    assert!(ok, "{log:?}\n{}", runner.stderr());
    // The hub goes away: the connection drops and every reconnect is refused. Then the
    // harness floods.
    hub.set_token("not-the-runner's");
    hub.drop_connection();
    std::thread::sleep(Duration::from_millis(300));
    std::fs::write(&go, "").unwrap();
    // The harness ends up blocked in a write to its stdout pipe, and stays there. Where
    // the kernel does not say what a process waits in (`/proc/PID/wchan` reads `0` for
    // every sleeping process), the mark file alone tells.
    let wchan = |pid: i32| std::fs::read_to_string(format!("/proc/{pid}/wchan")).ok();
    let blocked_in_write = |pid: i32| wchan(pid).is_some_and(|w| w.contains("pipe_write"));
    let start = std::time::Instant::now();
    let mut wchan_works = false;
    let blocked = loop {
        let procs: Vec<i32> = runner
            .harness_processes()
            .into_iter()
            .map(|(p, _)| p)
            .collect();
        wchan_works |= procs
            .iter()
            .filter_map(|p| wchan(*p))
            .any(|w| !w.trim().is_empty() && w.trim() != "0");
        let found = procs.into_iter().find(|p| blocked_in_write(*p));
        let waited = start.elapsed();
        if found.is_some()
            || mark.exists()
            || waited > Duration::from_secs(20)
            || (!wchan_works && waited > Duration::from_secs(5))
        {
            break found;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let held = hub.log().progress[&("T-b".to_string(), 1)].len();
    match blocked {
        Some(pid) => {
            std::thread::sleep(Duration::from_secs(1));
            assert!(blocked_in_write(pid), "the harness went on writing");
        }
        None if !wchan_works => {
            eprintln!(
                "/proc/PID/wchan says nothing here: backpressure checked by the mark file only"
            );
        }
        None => panic!(
            "the harness never blocked on its pipe ({held} frames delivered, all written: {})",
            mark.exists()
        ),
    }
    assert!(
        !mark.exists(),
        "the harness wrote all {LINES} lines while the hub was away ({held} delivered): no backpressure"
    );
    assert_eq!(
        hub.log().progress[&("T-b".to_string(), 1)].len(),
        held,
        "frames reached the hub while it refused the runner"
    );
    hub.set_token(TOKEN);
    let (ok, log) = hub.wait_for(Duration::from_secs(120), |l| reported(l, &["T-b".into()]));
    assert!(ok, "no report after the hub came back\n{}", runner.stderr());
    runner.stop();
    let (n, r) = check_task(&log, "T-b", 1).unwrap();
    assert_eq!(r["status"], "done", "{r}");
    assert_eq!(n, LINES + 1, "every progress frame, once, in order");
    assert!(mark.exists());
    assert!(log.rejected > 0, "the hub refused the runner meanwhile");
    runner.assert_nothing_left("after the flood");
}

/// The runner's shutdown stops a running task and says so.
#[test]
fn a_runner_shutdown_reports_its_running_task_as_runner_shutdown() {
    let hub = TestHub::start(TOKEN, fast_session());
    let dir = tmpdir("shutdown");
    let multi = script(&dir, "multi", MULTI);
    let mut runner = Runner::start(
        &hub.url(),
        &dir,
        &[
            "--jsonl-harness",
            &multi,
            "--grace-ms",
            "100",
            "--cancel-boundary-ms",
            "200",
        ],
    );
    hub.assign_goal("T-s", 1, json!({"backend": "subprocess"}), "hang 0 T-s");
    let (ok, _) = progressed(&hub, "T-s");
    assert!(ok);
    runner.stop();
    let (ok, log) = hub.wait_for(Duration::from_secs(5), |l| reported(l, &["T-s".into()]));
    assert!(ok, "{log:?}\n{}", runner.stderr());
    let (_, r) = check_task(&log, "T-s", 1).unwrap();
    assert_eq!(failure_type(&r), "runner_shutdown", "{r}");
    assert_eq!(
        r["summary_business"],
        "the runner shut down while the task ran"
    );
    runner.assert_nothing_left("after the shutdown");
}

/// `--profiles`: a custom profile runs (its rein, its working directory from metadata),
/// a disabled one is refused end to end with the reason, and the default profiles are
/// gone.
#[test]
fn profiles_from_a_file_and_a_refusal_end_to_end() {
    let hub = TestHub::start(TOKEN, fast_session());
    let dir = tmpdir("profiles");
    let wd = dir.join("repo");
    std::fs::create_dir_all(&wd).unwrap();
    let pwd = script(
        &dir,
        "pwd-harness",
        r#"read line
echo "{\"type\":\"state\",\"state\":\"$(pwd)\"}" > /dev/null
case "$(pwd)" in */repo) ;; *) exit 4;; esac
echo '{"type":"result","text":"ok","usage":{"input_tokens":1,"output_tokens":1}}'
read more"#,
    );
    let catalog = json!({
        "profiles": [
            {"contract_version": "1.0", "profile_id": "coder-default", "rein": "subprocess",
             "model": "m1", "sandbox_profile": "dir", "tool_policy": {"allowed_tools": ["run_task"]},
             "metadata": {"working_directory": wd.display().to_string()}},
            {"contract_version": "1.0", "profile_id": "retired", "rein": "subprocess", "enabled": false,
             "model": "m1", "sandbox_profile": "dir", "tool_policy": {"allowed_tools": ["run_task"]}}
        ],
        "reins": [{"rein_id": "subprocess", "contract_version": "1.0"}]
    });
    let file = dir.join("profiles.json");
    std::fs::write(&file, catalog.to_string()).unwrap();
    let mut runner = Runner::start(
        &hub.url(),
        &dir,
        &[
            "--profiles",
            &file.display().to_string(),
            "--jsonl-harness",
            &pwd,
        ],
    );
    hub.assign(
        "T-custom",
        1,
        json!({"harness_profile_ref": "coder-default", "backend": "x"}),
    );
    hub.assign("T-retired", 1, json!({"backend": "retired"}));
    hub.assign("T-fake", 1, json!({"backend": "fake"}));
    let tasks: Vec<String> = ["T-custom", "T-retired", "T-fake"]
        .map(String::from)
        .to_vec();
    let (ok, log) = hub.wait_for(Duration::from_secs(20), |l| reported(l, &tasks));
    runner.stop();
    assert!(ok, "{log:?}\n{}", runner.stderr());
    let (_, custom) = check_task(&log, "T-custom", 1).unwrap();
    assert_eq!(custom["status"], "done", "{custom}");
    let (_, retired) = check_task(&log, "T-retired", 1).unwrap();
    assert_eq!(failure_type(&retired), "profile_refused");
    assert_eq!(retired["failure_stage"], "resolution");
    assert!(
        retired["summary_business"]
            .as_str()
            .unwrap()
            .contains("disabled"),
        "{retired}"
    );
    let (_, fake) = check_task(&log, "T-fake", 1).unwrap();
    assert_eq!(failure_type(&fake), "profile_refused");
}

/// Escapees (`setsid`, double fork) of a finished task die at the task's end, while the
/// runner lives; escapees of a running task die with a SIGKILLed runner (its own PID
/// namespace). Without namespaces (`--no-pid-namespace`) the per-task cleanup still
/// works; what survives a SIGKILL there is printed.
#[test]
fn escapees_die_with_their_task_and_with_a_sigkilled_runner() {
    let namespaces = pid_namespaces();
    for no_ns in [false, true] {
        let hub = TestHub::start(TOKEN, fast_session());
        let dir = tmpdir("escapee");
        let escapee = script(
            &dir,
            "escapee",
            r#"read line
task=$(printf '%s' "$line" | sed 's/.*"prompt":"\([^"]*\)".*/\1/')
STAPEL_ESC=$task setsid sh -c 'sleep 600 & sleep 601' </dev/null >/dev/null 2>&1 &
echo '{"type":"state","state":"forked"}'
case $task in hold*) exec sleep 600;; esac
echo '{"type":"result","text":"ok","usage":{"input_tokens":1,"output_tokens":1}}'
read more"#,
        );
        let mut args = vec!["--jsonl-harness", &escapee, "--grace-ms", "100"];
        if no_ns {
            args.push("--no-pid-namespace");
        }
        let mut runner = Runner::start(&hub.url(), &dir, &args);
        hub.assign_goal("T-e", 1, json!({"backend": "subprocess"}), "done-e");
        let (ok, log) = hub.wait_for(Duration::from_secs(20), |l| reported(l, &["T-e".into()]));
        assert!(ok, "{log:?}\n{}", runner.stderr());
        assert_eq!(check_task(&log, "T-e", 1).unwrap().1["status"], "done");
        let left = left_behind("STAPEL_ESC=done-e", &[], 5);
        kill_all(&left);
        assert!(
            left.is_empty(),
            "no_ns={no_ns}: escapees of a finished task: {left:?}"
        );
        // A running task's escapees and a SIGKILLed runner.
        hub.assign_goal("T-h", 1, json!({"backend": "subprocess"}), "hold-h");
        let until = Instant::now() + Duration::from_secs(10);
        while marked("STAPEL_ESC=hold-h").len() < 2 && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(
            marked("STAPEL_ESC=hold-h").len() >= 2,
            "the escapees should run"
        );
        runner.kill9();
        let left = left_behind("STAPEL_ESC=hold-h", &[], 3);
        kill_all(&left);
        if !no_ns && namespaces {
            assert!(
                left.is_empty(),
                "escapees survived a SIGKILLed runner: {left:?}"
            );
        } else {
            eprintln!(
                "without a PID namespace, {} escapee process(es) survived the SIGKILLed runner (documented)",
                left.len()
            );
        }
        kill_all(&runner.harness_processes());
    }
}

/// A harness that never writes (so no SIGPIPE would ever stop it) dies with a SIGKILLed
/// runner: the kernel's death signals and the PID namespace, not the pipes.
#[test]
fn a_silent_harness_dies_with_a_sigkilled_runner() {
    let hub = TestHub::start(TOKEN, fast_session());
    let dir = tmpdir("pdeathsig");
    let path = script(&dir, "silent", "read line\nexec sleep 600");
    let mut runner = Runner::start(&hub.url(), &dir, &["--jsonl-harness", &path]);
    hub.assign("T-s", 1, json!({"backend": "subprocess"}));
    let until = Instant::now() + Duration::from_secs(10);
    let mut harness = Vec::new();
    while harness.is_empty() && Instant::now() < until {
        harness = runner
            .harness_processes()
            .into_iter()
            .filter(|(_, c)| c.starts_with("sleep"))
            .collect();
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(harness.len(), 1, "the harness should run as `sleep`");
    runner.kill9();
    let left = left_behind(&runner.needle(), &[], 5);
    assert!(
        left.is_empty(),
        "the harness outlived the SIGKILLed runner: {left:?}"
    );
}

/// `wss://` with rustls: a hub certificate signed by a test CA is accepted with
/// `--ca-file`, refused against the system roots.
#[test]
fn wss_with_a_given_ca_file() {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec!["localhost".to_string()])
        .unwrap()
        .signed_by(&key, &ca, &ca_key)
        .unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let server = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone()],
            rustls_pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
        )
        .unwrap();
    let hub = TestHub::start_with(TOKEN, fast_session(), Some(Arc::new(server)));
    let url = format!("wss://localhost:{}/", hub.addr.port());
    let dir = tmpdir("wss");
    std::fs::write(dir.join("ca.pem"), ca.pem()).unwrap();

    // Against the system roots the hub's certificate is not trusted.
    let untrusted = tmpdir("wss-untrusted");
    let mut runner = Runner::start(&url, &untrusted, &[]);
    // Wait for the first refused handshake (not a fixed time: under load the first
    // attempt can take well over a second).
    let deadline = Instant::now() + Duration::from_secs(20);
    while !runner.stderr().contains("TLS handshake failed") && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    runner.stop();
    assert!(
        runner.stderr().contains("TLS handshake failed"),
        "{}",
        runner.stderr()
    );
    assert_eq!(hub.log().hellos, 0);

    let ca_file = dir.join("ca.pem").display().to_string();
    let mut runner = Runner::start(&url, &dir, &["--ca-file", &ca_file]);
    hub.assign("T-tls", 1, json!({"backend": "fake"}));
    let (ok, log) = hub.wait_for(Duration::from_secs(20), |l| reported(l, &["T-tls".into()]));
    runner.stop();
    assert!(ok, "{log:?}\n{}", runner.stderr());
    assert_eq!(check_task(&log, "T-tls", 1).unwrap().1["status"], "done");
}

/// Local-protocol harnesses that fail before a result: one never says ready (the ready
/// deadline ends it) and one exits at once. Each task ends in exactly one failed report
/// naming the violation, and no process is left behind.
#[test]
fn local_harnesses_that_hang_before_ready_or_exit_early_are_reported_failed() {
    let cases = [
        ("never-ready", "sleep 600", "1000", "harness_ready_timeout"),
        (
            "exits-early",
            "exit 0",
            "5000",
            "harness_exited_before_ready",
        ),
    ];
    for (name, body, ready_ms, why) in cases {
        let hub = TestHub::start(TOKEN, fast_session());
        let dir = tmpdir(&format!("local-{name}"));
        let mut runner = Runner::start(
            &hub.url(),
            &dir,
            &[
                "--harness",
                "/bin/sh",
                "--harness-arg",
                "-c",
                "--harness-arg",
                body,
                "--ready-timeout-ms",
                ready_ms,
                "--grace-ms",
                "200",
            ],
        );
        hub.assign("T-l", 1, json!({"backend": "fake"}));
        let (ok, log) = hub.wait_for(Duration::from_secs(20), |l| reported(l, &["T-l".into()]));
        assert!(ok, "{name}: no report: {log:?}\n{}", runner.stderr());
        let left = left_behind(&runner.needle(), &[runner.pid()], 5);
        runner.stop();
        let (_, r) = check_task(&log, "T-l", 1).unwrap();
        assert_eq!(r["status"], "failed", "{name}");
        // The report names the violation that ended the run.
        assert_eq!(r["failure_type"], why, "{name}: {r}");
        assert!(left.is_empty(), "{name}: processes left: {left:?}");
    }
}

// ---- fault injection -------------------------------------------------------------

/// A tiny deterministic generator (splitmix64) for the schedules.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Which way bytes flow through the proxy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dir {
    /// Runner → hub.
    Up,
    /// Hub → runner.
    Down,
}

/// One connection's fault; each triggers after `after` bytes went through in either
/// direction (counted together), usually in the middle of a frame.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Fault {
    /// Forward the part of the chunk that fits, then close both sides (FIN both ways):
    /// a frame cut in the middle.
    Cut { after: u64 },
    /// Stop forwarding for `ms` (bytes are held), then deliver them and go on: a stall
    /// that resumes (shorter than the dead-peer timeout it survives; longer, the
    /// keepalive ends the connection). A connection that survived it is cut 1,500 bytes
    /// later, so that the schedule moves on to its next fault.
    Stall { after: u64, ms: u64 },
    /// Half-close: shut one direction down with a FIN (the other side of it sees EOF)
    /// while the other direction keeps flowing.
    HalfClose { after: u64, dir: Dir },
    /// The peer vanishes without a FIN: nothing is forwarded any more in either
    /// direction and nothing is closed; only the keepalive can tell.
    BlackHole { after: u64 },
    /// Forward everything.
    Clean,
}

impl Fault {
    fn after(self) -> u64 {
        match self {
            Fault::Cut { after }
            | Fault::Stall { after, .. }
            | Fault::HalfClose { after, .. }
            | Fault::BlackHole { after } => after,
            Fault::Clean => u64::MAX,
        }
    }
    fn name(self) -> &'static str {
        match self {
            Fault::Cut { .. } => "cut",
            Fault::Stall { .. } => "stall",
            Fault::HalfClose { dir: Dir::Up, .. } => "half-close-up",
            Fault::HalfClose { dir: Dir::Down, .. } => "half-close-down",
            Fault::BlackHole { .. } => "black-hole",
            Fault::Clean => "clean",
        }
    }
}

/// Shared state of one proxied connection.
struct Link {
    fault: Fault,
    /// Bytes forwarded so far (both directions).
    moved: Mutex<u64>,
    /// When set, forwarding is held until then (a stall).
    held_until: Mutex<Option<Instant>>,
    /// Set once the fault fired.
    fired: AtomicBool,
    /// A black hole swallows from now on, both ways.
    dead: AtomicBool,
    /// After a stall that resumed: cut once this many bytes went through.
    cut_at: Mutex<Option<u64>>,
    /// Half-closed directions (index: Up 0, Down 1) swallow from now on.
    shut: [AtomicBool; 2],
    /// The receiving socket of each direction (Up: the hub's, Down: the runner's).
    sinks: [TcpStream; 2],
}

fn slot(d: Dir) -> usize {
    match d {
        Dir::Up => 0,
        Dir::Down => 1,
    }
}

/// A TCP proxy 127.0.0.1:port → `upstream` whose n-th connection gets `faults[n]`
/// (then `Clean`). Returns the port, the number of connections seen and the names of
/// the faults that fired.
fn proxy(
    upstream: SocketAddr,
    faults: Vec<Fault>,
) -> (u16, Arc<AtomicUsize>, Arc<Mutex<Vec<&'static str>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let count = Arc::new(AtomicUsize::new(0));
    let fired = Arc::new(Mutex::new(Vec::new()));
    let (c, f) = (count.clone(), fired.clone());
    std::thread::spawn(move || {
        for (n, client) in listener.incoming().enumerate() {
            let Ok(client) = client else { continue };
            c.store(n + 1, Ordering::SeqCst);
            let fault = faults.get(n).copied().unwrap_or(Fault::Clean);
            let Ok(server) = TcpStream::connect(upstream) else {
                continue;
            };
            let _ = client.set_nodelay(true);
            let _ = server.set_nodelay(true);
            let link = Arc::new(Link {
                fault,
                moved: Mutex::new(0),
                held_until: Mutex::new(None),
                fired: AtomicBool::new(false),
                dead: AtomicBool::new(false),
                cut_at: Mutex::new(None),
                shut: [AtomicBool::new(false), AtomicBool::new(false)],
                sinks: [server.try_clone().unwrap(), client.try_clone().unwrap()],
            });
            for (dir, from, to) in [
                (
                    Dir::Up,
                    client.try_clone().unwrap(),
                    server.try_clone().unwrap(),
                ),
                (
                    Dir::Down,
                    server.try_clone().unwrap(),
                    client.try_clone().unwrap(),
                ),
            ] {
                let (link, f) = (link.clone(), f.clone());
                std::thread::spawn(move || pump(dir, from, to, &link, &f));
            }
        }
    });
    (port, count, fired)
}

/// Forward one direction of a link, applying its fault when the byte count reaches it.
fn pump(
    dir: Dir,
    mut from: TcpStream,
    mut to: TcpStream,
    link: &Link,
    fired: &Mutex<Vec<&'static str>>,
) {
    let mut buf = [0u8; 2048];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if link.dead.load(Ordering::SeqCst) || link.shut[slot(dir)].load(Ordering::SeqCst) {
            continue; // swallowed
        }
        // How much of this chunk goes before the fault fires.
        let (take, moved_now) = {
            let mut moved = link.moved.lock().unwrap();
            let left = link.fault.after().saturating_sub(*moved);
            *moved = moved.saturating_add(n as u64);
            ((n as u64).min(left) as usize, *moved)
        };
        if link.cut_at.lock().unwrap().is_some_and(|c| moved_now >= c) {
            let _ = from.shutdown(Shutdown::Both);
            let _ = to.shutdown(Shutdown::Both);
            break;
        }
        let fire = take < n && !link.fired.swap(true, Ordering::SeqCst);
        let hold = *link.held_until.lock().unwrap();
        if let Some(t) = hold {
            let now = Instant::now();
            if t > now {
                std::thread::sleep(t - now);
            }
        }
        if take > 0 && to.write_all(&buf[..take]).is_err() {
            break;
        }
        if !fire {
            if take < n && to.write_all(&buf[take..n]).is_err() {
                break;
            }
            continue;
        }
        fired.lock().unwrap().push(link.fault.name());
        match link.fault {
            Fault::Cut { .. } => {
                let _ = from.shutdown(Shutdown::Both);
                let _ = to.shutdown(Shutdown::Both);
                break;
            }
            Fault::Stall { ms, .. } => {
                let until = Instant::now() + Duration::from_millis(ms);
                *link.held_until.lock().unwrap() = Some(until);
                std::thread::sleep(Duration::from_millis(ms));
                *link.cut_at.lock().unwrap() = Some(moved_now + 1500);
                if to.write_all(&buf[take..n]).is_err() {
                    break;
                }
            }
            Fault::HalfClose { dir: d, .. } => {
                // A FIN to the receiver of direction `d`; from now on that direction
                // swallows, the other one keeps flowing.
                link.shut[slot(d)].store(true, Ordering::SeqCst);
                let _ = link.sinks[slot(d)].shutdown(Shutdown::Write);
                if d != dir && to.write_all(&buf[take..n]).is_err() {
                    break;
                }
            }
            Fault::BlackHole { .. } => link.dead.store(true, Ordering::SeqCst),
            Fault::Clean => {}
        }
    }
    // The source is gone: pass the FIN on (a black hole passes nothing).
    if !link.dead.load(Ordering::SeqCst) {
        let _ = to.shutdown(Shutdown::Write);
    }
}

fn schedule_faults(rng: &mut Rng, connections: usize) -> Vec<Fault> {
    (0..connections)
        .map(|_| {
            let after = 200 + rng.below(6000);
            match rng.below(10) {
                0..=3 => Fault::Cut { after },
                4..=5 => Fault::Stall {
                    after,
                    // Below and above the 400 ms dead-peer timeout.
                    ms: 50 + rng.below(700),
                },
                6..=7 => Fault::HalfClose {
                    after,
                    dir: if rng.below(2) == 0 {
                        Dir::Up
                    } else {
                        Dir::Down
                    },
                },
                _ => Fault::BlackHole { after },
            }
        })
        .collect()
}

const FAULT_SESSION: &str = r#"{"ping_interval_ms":100,"peer_timeout_ms":400,"ack_delay_ms":10}"#;

/// The kind of one task of a schedule, and what it must end as.
#[derive(Debug, Clone)]
enum Kind {
    /// The built-in fake harness (local-run): done with the baseline's progress.
    Fake,
    /// `count N`: done with exactly N progress frames of the cycling kinds.
    Count(usize),
    /// `slow N`: done with 2 frames.
    Slow(usize),
    /// `hang`, not cancelled before the SIGKILL phase is over: the task a SIGKILL lands
    /// on (`runner_restarted`), else cancelled.
    Hold,
    /// `hang`, cancelled by the hub once its first frame is applied: cancelled.
    Hang,
    /// `escapee`: done; its escapee is gone once it reported.
    Escapee,
    /// `crash`: failed `unexpected_eof` after 2 frames.
    Crash,
}

struct Outcome {
    schedule: u64,
    connections: usize,
    faults: Vec<&'static str>,
    killed: bool,
    restarted_tasks: usize,
    hub_restarts: u64,
    tasks: usize,
}

/// One seeded schedule, checked by the oracle: a durable hub, a proxy whose n-th
/// connection gets the n-th seeded fault, a runner; two batches of seeded tasks (fake,
/// JSONL count/slow/hang/escapee/crash), hang tasks cancelled; in most schedules a
/// SIGKILL of the runner while its hold task runs (then a restart from its state directory)
/// and a crash + restart of the hub from its persisted state.
///
/// Oracle per task: progress seqs 1..n applied exactly once each, in order, then exactly
/// one report at seq n+1; the outcome its kind must have (a task the SIGKILLed runner's
/// state file lists as running is `runner_restarted`, and only those are); for a task
/// that finished, n and the kinds equal what its harness emitted; a cancelled hang task
/// is `cancelled`; no gap; and no process with the schedule's marker left anywhere.
fn run_schedule(
    seed: u64,
    base: &Path,
    local_baseline: &[String],
    multi: &str,
    ns: bool,
) -> Outcome {
    let mut rng = Rng(seed.wrapping_mul(0x2545_F491_4F6C_DD1D) ^ 0xC0FFEE);
    let dir = base.join(format!("s{seed}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let session = SessionConfig::from_value(&serde_json::from_str(FAULT_SESSION).unwrap()).unwrap();
    let hub = TestHub::start_durable(TOKEN, session, dir.join("hub-state.json"));
    let n_faults = 2 + rng.below(4) as usize;
    let faults = schedule_faults(&mut rng, n_faults);
    let (port, seen, fired) = proxy(hub.addr, faults.clone());
    let url = format!("ws://127.0.0.1:{port}/");
    let args = vec![
        "--max-tasks",
        "16",
        "--delay-ms",
        "2",
        "--session-config",
        FAULT_SESSION,
        "--backoff-initial-ms",
        "20",
        "--backoff-max-ms",
        "200",
        "--jsonl-harness",
        multi,
        "--grace-ms",
        "100",
        "--cancel-boundary-ms",
        "200",
    ];
    let mut runner = Runner::start(&url, &dir, &args);
    let mut kinds: BTreeMap<String, Kind> = BTreeMap::new();
    let kill = rng.below(10) < 8;
    let restart_hub = rng.below(10) < 8;
    let assign = |hub: &TestHub, id: &str, kind: &Kind| match kind {
        Kind::Fake => hub.assign(id, 1, json!({"backend": "fake"})),
        Kind::Count(n) => hub.assign_goal(
            id,
            1,
            json!({"backend": "subprocess"}),
            &format!("count {n} {id}"),
        ),
        Kind::Slow(n) => hub.assign_goal(
            id,
            1,
            json!({"backend": "subprocess"}),
            &format!("slow {n} {id}"),
        ),
        Kind::Hang | Kind::Hold => hub.assign_goal(
            id,
            1,
            json!({"backend": "subprocess"}),
            &format!("hang 0 {id}"),
        ),
        Kind::Escapee => hub.assign_goal(
            id,
            1,
            json!({"backend": "subprocess"}),
            &format!("escapee 0 {id}"),
        ),
        Kind::Crash => hub.assign_goal(
            id,
            1,
            json!({"backend": "subprocess"}),
            &format!("crash 0 {id}"),
        ),
    };
    let pick = |rng: &mut Rng| match rng.below(12) {
        0..=2 => Kind::Fake,
        3..=5 => {
            let most = if rng.below(20) == 0 { 300 } else { 24 };
            Kind::Count(1 + rng.below(most) as usize)
        }
        6..=7 => Kind::Hang,
        8 => Kind::Escapee,
        9 => Kind::Crash,
        _ => Kind::Slow(3 + rng.below(8) as usize),
    };
    // Batch 1, with one task that runs until the SIGKILL (or a cancel).
    let hold = format!("S{seed}-hold");
    let mut batch: Vec<(String, Kind)> = vec![(hold.clone(), Kind::Hold)];
    for i in 0..(2 + rng.below(3)) {
        batch.push((format!("S{seed}-a{i}"), pick(&mut rng)));
    }
    for (id, k) in &batch {
        assign(&hub, id, k);
        kinds.insert(id.clone(), k.clone());
    }
    let mut cancelled: BTreeSet<String> = BTreeSet::new();
    let cancel_hangs =
        |hub: &TestHub, cancelled: &mut BTreeSet<String>, kinds: &BTreeMap<String, Kind>| {
            let log = hub.log();
            for (id, k) in kinds {
                if matches!(k, Kind::Hang | Kind::Hold)
                    && !cancelled.contains(id)
                    && log.progress.contains_key(&(id.clone(), 1))
                {
                    hub.cancel(id, "seeded");
                    cancelled.insert(id.clone());
                }
            }
        };
    let mut restarted: BTreeSet<String> = BTreeSet::new();
    let mut killed = false;
    if kill {
        // Wait until the hold task runs — its first frame applied: the runner saved it
        // as started before sending that frame, and it cannot end by itself — then
        // SIGKILL.
        let key = (hold.clone(), 1);
        let (ok, _) = hub.wait_for(Duration::from_secs(30), |l| l.progress.contains_key(&key));
        assert!(
            ok,
            "seed {seed}: the hold task never ran\n{}",
            runner.stderr()
        );
        std::thread::sleep(Duration::from_millis(rng.below(150)));
        runner.kill9();
        killed = true;
        // Everything of the dead runner dies with it (its harnesses' PID namespaces).
        let left = left_behind(&runner.needle(), &[], 3);
        if ns {
            kill_all(&left);
            assert!(
                left.is_empty(),
                "seed {seed}: survived the SIGKILL: {left:?}"
            );
        } else {
            kill_all(&left);
        }
        // The tasks the dead runner had started and not reported, as it saved them.
        let state: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("state/runner-state.json")).unwrap())
                .unwrap();
        restarted = state["tasks"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        assert!(
            restarted.contains(&hold),
            "seed {seed}: the SIGKILL should land while the hold task runs: {restarted:?}"
        );
        runner.spawn();
    }
    if restart_hub {
        std::thread::sleep(Duration::from_millis(rng.below(250)));
        hub.restart();
    }
    cancel_hangs(&hub, &mut cancelled, &kinds);
    // Batch 2, and more fake tasks while faults are left unused.
    let mut round = 0;
    loop {
        let mut batch = Vec::new();
        for i in 0..(1 + rng.below(3)) {
            batch.push((
                format!("S{seed}-b{round}-{i}"),
                if round == 0 {
                    pick(&mut rng)
                } else {
                    Kind::Fake
                },
            ));
        }
        for (id, k) in &batch {
            assign(&hub, id, k);
            kinds.insert(id.clone(), k.clone());
        }
        let ids: Vec<String> = kinds.keys().cloned().collect();
        let until = Instant::now() + Duration::from_secs(60);
        loop {
            cancel_hangs(&hub, &mut cancelled, &kinds);
            let log = hub.log();
            if reported(&log, &ids) {
                break;
            }
            assert!(
                Instant::now() < until,
                "seed {seed}: not every task reported ({} of {}), {} connections, faults {faults:?} fired {:?}\n{}",
                log.reports.len(),
                ids.len(),
                seen.load(Ordering::SeqCst),
                fired.lock().unwrap(),
                runner.stderr()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        round += 1;
        if seen.load(Ordering::SeqCst) > n_faults || round >= 40 {
            break;
        }
    }
    let log = hub.log();
    runner.stop();
    // The oracle.
    for (id, kind) in &kinds {
        let (n, r) = check_task(&log, id, 1).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        let ft = failure_type(&r);
        let status = r["status"].as_str().unwrap_or("");
        if restarted.contains(id) {
            assert_eq!(
                ft, "runner_restarted",
                "seed {seed} {id} ({kind:?}) was running at the SIGKILL: {r}"
            );
            continue;
        }
        assert_ne!(
            ft, "runner_restarted",
            "seed {seed} {id}: not running at the SIGKILL: {r}"
        );
        let got_kinds = log.kinds.get(&(id.clone(), 1)).cloned().unwrap_or_default();
        match kind {
            Kind::Fake => {
                assert_eq!(status, "done", "seed {seed} {id}: {r}");
                assert_eq!(
                    &got_kinds, local_baseline,
                    "seed {seed} {id}: progress differs from the harness's"
                );
            }
            Kind::Count(k) => {
                assert_eq!(status, "done", "seed {seed} {id}: {r}");
                assert_eq!(got_kinds, count_kinds(*k), "seed {seed} {id}");
            }
            Kind::Slow(_) | Kind::Escapee => {
                assert_eq!(status, "done", "seed {seed} {id}: {r}");
                assert_eq!(
                    n,
                    if matches!(kind, Kind::Slow(_)) { 2 } else { 1 },
                    "seed {seed} {id}"
                );
            }
            Kind::Hang | Kind::Hold => {
                assert!(cancelled.contains(id), "seed {seed} {id}: never cancelled");
                assert_eq!(
                    (status, ft),
                    ("failed", "cancelled"),
                    "seed {seed} {id}: the cancel was not honoured: {r}"
                );
                assert_eq!(n, 1, "seed {seed} {id}");
            }
            Kind::Crash => {
                assert_eq!(ft, "unexpected_eof", "seed {seed} {id}: {r}");
                assert_eq!(n, 2, "seed {seed} {id}");
            }
        }
        if matches!(kind, Kind::Escapee) {
            let left = left_behind(&format!("STAPEL_ESC={id}"), &[], 2);
            kill_all(&left);
            assert!(
                left.is_empty(),
                "seed {seed} {id}: its escapee outlived it: {left:?}"
            );
        }
    }
    assert_eq!(log.gaps, 0, "seed {seed}: the hub was told of lost frames");
    let left = left_behind(&runner.needle(), &[], 5);
    kill_all(&left);
    assert!(left.is_empty(), "seed {seed}: processes left: {left:?}");
    let connections = seen.load(Ordering::SeqCst);
    assert!(
        connections > n_faults,
        "seed {seed}: only {connections} connections for {n_faults} faults"
    );
    drop(hub);
    let _ = std::fs::remove_dir_all(&dir);
    let fired = fired.lock().unwrap().clone();
    Outcome {
        schedule: seed,
        connections,
        faults: fired,
        killed,
        restarted_tasks: restarted.len(),
        hub_restarts: log.restarts,
        tasks: kinds.len(),
    }
}

/// The progress kinds of one fake-harness task on a clean connection (the baseline the
/// schedules compare finished fake tasks with).
fn local_baseline(dir: &Path) -> Vec<String> {
    std::fs::create_dir_all(dir).unwrap();
    let hub = TestHub::start(TOKEN, fast_session());
    let mut runner = Runner::start(&hub.url(), dir, &["--delay-ms", "2"]);
    hub.assign("T-base", 1, json!({"backend": "fake"}));
    let (ok, log) = hub.wait_for(Duration::from_secs(20), |l| reported(l, &["T-base".into()]));
    runner.stop();
    assert!(ok, "baseline: {}", runner.stderr());
    let (_, r) = check_task(&log, "T-base", 1).unwrap();
    assert_eq!(r["status"], "done");
    log.kinds[&("T-base".to_string(), 1)].clone()
}

/// Seeded fault schedules: `STAPEL_SCHEDULES` (default 200) full schedules, each checked
/// by the oracle of [`run_schedule`], `STAPEL_SCHEDULE_PARALLEL` (default 8) at a time,
/// from seed `STAPEL_SCHEDULE_SEED` (default 1). `STAPEL_SOAK_SCHEDULES` overrides the
/// count for a soak.
#[test]
fn seeded_fault_schedules_lose_nothing_and_apply_nothing_twice() {
    let env = |k: &str, d: u64| {
        std::env::var(k)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(d)
    };
    let count = std::env::var("STAPEL_SOAK_SCHEDULES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| env("STAPEL_SCHEDULES", 200));
    let base_seed = env("STAPEL_SCHEDULE_SEED", 1);
    let parallel = env("STAPEL_SCHEDULE_PARALLEL", 8).max(1);
    let base = tmpdir("schedules");
    let multi = script(&base, "multi", MULTI);
    let baseline = Arc::new(local_baseline(&base.join("baseline")));
    let ns = pid_namespaces();
    let next = Arc::new(AtomicUsize::new(0));
    let results = Arc::new(Mutex::new(Vec::new()));
    let failed = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let workers: Vec<_> = (0..parallel)
        .map(|_| {
            let (next, results, failed, base, multi, baseline) = (
                next.clone(),
                results.clone(),
                failed.clone(),
                base.clone(),
                multi.clone(),
                baseline.clone(),
            );
            std::thread::spawn(move || loop {
                let i = next.fetch_add(1, Ordering::SeqCst) as u64;
                if i >= count || failed.load(Ordering::SeqCst) {
                    return;
                }
                let seed = base_seed + i;
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    run_schedule(seed, &base, &baseline, &multi, ns)
                }));
                match r {
                    Ok(o) => results.lock().unwrap().push(o),
                    Err(e) => {
                        failed.store(true, Ordering::SeqCst);
                        std::panic::resume_unwind(e);
                    }
                }
            })
        })
        .collect();
    let mut panics = Vec::new();
    for w in workers {
        if let Err(e) = w.join() {
            panics.push(
                e.downcast_ref::<String>()
                    .cloned()
                    .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default(),
            );
        }
    }
    assert!(panics.is_empty(), "schedules failed: {panics:#?}");
    let results = results.lock().unwrap();
    assert_eq!(results.len() as u64, count);
    let mut by_fault: BTreeMap<&str, usize> = BTreeMap::new();
    for r in results.iter() {
        for f in &r.faults {
            *by_fault.entry(f).or_default() += 1;
        }
    }
    let killed = results.iter().filter(|r| r.killed).count();
    let hub_restarts = results.iter().filter(|r| r.hub_restarts > 0).count();
    let restarted: usize = results.iter().map(|r| r.restarted_tasks).sum();
    let tasks: usize = results.iter().map(|r| r.tasks).sum();
    let connections: usize = results.iter().map(|r| r.connections).sum();
    eprintln!(
        "fault schedules: {count} passed in {:.1} s (seeds {base_seed}..{}): {tasks} tasks, {connections} connections, faults fired {by_fault:?}, runner SIGKILLed in {killed} ({restarted} tasks reported runner_restarted), hub restarted in {hub_restarts}",
        started.elapsed().as_secs_f64(),
        base_seed + count - 1,
    );
    // Every schedule kind of event happened, many times.
    if count >= 50 {
        assert!(killed * 2 >= count as usize, "{killed} SIGKILLs");
        assert!(
            hub_restarts * 2 >= count as usize,
            "{hub_restarts} hub restarts"
        );
        for kind in [
            "cut",
            "stall",
            "half-close-up",
            "half-close-down",
            "black-hole",
        ] {
            assert!(
                by_fault.get(kind).copied().unwrap_or(0) >= 5,
                "{kind}: {by_fault:?}"
            );
        }
    }
    let _ = results.iter().map(|r| r.schedule).max();
    let _ = std::fs::remove_dir_all(&base);
}
