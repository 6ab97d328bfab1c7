//! The release runner against a hub written with stapel-runner-protocol 0.1.1's public
//! names only (`conformance/peers/seed_only_hub.py`): no acknowledgements, plain pongs,
//! replay from `hello.resume`, duplicates dropped by `ConnectionState.receive`. Run
//! against the published 0.1.1 package and against this project's Python package, with
//! more than ten times the kept-log bound in frames, cuts, and the runner SIGKILLed and
//! restarted from its state directory: every task reports exactly once and every progress
//! seq is applied once and in order (the hub script checks it and exits 0 only then).
//!
//! These tests need a Python with `websockets` and `stapel-taskspecs` (and this project's
//! package for the "ours" case): `STAPEL_SEED_PYTHON` names it, and `STAPEL_011_PATH`
//! the unpacked published 0.1.1 wheel (`bindings-python/scripts/diff-011-api` downloads
//! it). They are `#[ignore]`d so that a plain `cargo test` does not need Python;
//! `scripts/test-all` runs them with `-- --ignored` after the Python package is built,
//! where a missing variable fails them.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

mod common;
use common::marked;

const MARK_VAR: &str = "STAPEL_TEST_MARK";

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("stapel-seed-only-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| {
        panic!("{name} is not set (see the module docs: scripts/test-all sets it)")
    })
}

/// The seed-only hub process: its port, its output lines, its exit.
struct SeedHub {
    child: Child,
    lines: Arc<Mutex<Vec<Value>>>,
    port: u16,
}

impl SeedHub {
    fn start(dir: &Path, published_011: bool, args: &[&str]) -> Self {
        let script =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../conformance/peers/seed_only_hub.py");
        let mut cmd = Command::new(env("STAPEL_SEED_PYTHON"));
        cmd.arg(&script)
            .args(["--token-file", "token", "--backend", "subprocess"])
            .args(args)
            .current_dir(dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        if published_011 {
            cmd.env("PYTHONPATH", env("STAPEL_011_PATH"));
        } else {
            cmd.env_remove("PYTHONPATH");
        }
        let mut child = cmd.spawn().expect("start the seed-only hub");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let out = child.stdout.take().unwrap();
        let sink = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if let Ok(v) = serde_json::from_str::<Value>(&line) {
                    sink.lock().unwrap().push(v);
                }
            }
        });
        let until = Instant::now() + Duration::from_secs(60);
        let port = loop {
            let first = lines.lock().unwrap().first().cloned();
            if let Some(v) = first {
                let url = v["listening"].as_str().expect("listening line").to_owned();
                break url
                    .trim_end_matches('/')
                    .rsplit(':')
                    .next()
                    .unwrap()
                    .parse()
                    .unwrap();
            }
            assert!(Instant::now() < until, "the seed-only hub did not start");
            std::thread::sleep(Duration::from_millis(50));
        };
        Self { child, lines, port }
    }

    fn reports(&self) -> usize {
        self.lines
            .lock()
            .unwrap()
            .iter()
            .filter(|v| v.get("report").is_some())
            .count()
    }

    /// Wait for the hub's exit (it exits once every task reported); its summary line.
    fn finish(&mut self, timeout: Duration) -> (Option<i32>, Value) {
        let until = Instant::now() + timeout;
        let status = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break s.code();
            }
            if Instant::now() >= until {
                let _ = self.child.kill();
                break None;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        std::thread::sleep(Duration::from_millis(100));
        let done = self
            .lines
            .lock()
            .unwrap()
            .iter()
            .find_map(|v| v.get("done").cloned())
            .unwrap_or(Value::Null);
        (status, done)
    }
}

impl Drop for SeedHub {
    fn drop(&mut self) {
        let _ = self.child.kill();
    }
}

/// A runner process on `dir`'s state directory (restartable).
struct Runner {
    child: Option<Child>,
    args: Vec<String>,
    dir: PathBuf,
    mark: String,
    stderr: Arc<Mutex<String>>,
}

impl Runner {
    fn start(dir: &Path, port: u16, harness: &str) -> Self {
        Self::start_with(
            dir,
            port,
            harness,
            r#"{"ping_interval_ms":500,"peer_timeout_ms":5000}"#,
        )
    }

    fn start_with(dir: &Path, port: u16, harness: &str, session: &str) -> Self {
        let mark = format!("seed-only-{}-{}", std::process::id(), port);
        let args = vec![
            "connect".into(),
            "--url".into(),
            format!("ws://127.0.0.1:{port}/"),
            "--token-file".into(),
            dir.join("token").display().to_string(),
            "--state-dir".into(),
            dir.join("state").display().to_string(),
            "--jsonl-harness".into(),
            harness.into(),
            "--allow-env".into(),
            MARK_VAR.into(),
            "--backoff-initial-ms".into(),
            "50".into(),
            "--backoff-max-ms".into(),
            "400".into(),
            "--session-config".into(),
            session.into(),
        ];
        let mut r = Self {
            child: None,
            args,
            dir: dir.to_path_buf(),
            mark,
            stderr: Arc::new(Mutex::new(String::new())),
        };
        r.spawn();
        r
    }

    fn spawn(&mut self) {
        let mut child = Command::new(env!("CARGO_BIN_EXE_stapel-runner"))
            .args(&self.args)
            .env(MARK_VAR, &self.mark)
            .current_dir(&self.dir)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
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

    /// SIGKILL (no goodbye), then start again from the state directory.
    fn kill_and_restart(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        self.spawn();
    }

    fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }
}

impl Drop for Runner {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        for (p, _) in marked(&format!("{MARK_VAR}={}", self.mark)) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(p),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

/// A JSONL harness that writes `lines` progress lines and a result for its one turn.
fn harness(dir: &Path, lines: usize) -> String {
    let path = dir.join("harness.sh");
    std::fs::write(
        &path,
        format!(
            "#!/bin/sh\nread line\ni=0\nwhile [ $i -lt {lines} ]; do echo '{{\"type\":\"state\",\"state\":\"step\"}}'; i=$((i+1)); done\necho '{{\"type\":\"result\",\"text\":\"ok\",\"usage\":{{\"input_tokens\":1,\"output_tokens\":1}}}}'\nread more\n"
        ),
    )
    .unwrap();
    let mut perms = std::fs::metadata(&path).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&path, perms).unwrap();
    path.display().to_string()
}

/// Run `tasks` tasks of `lines` progress lines each through the seed-only hub, with cuts
/// every `cut_every` applied frames and the runner SIGKILLed at the given report counts.
fn drive(name: &str, published_011: bool, tasks: usize, lines: usize, kills: &[usize]) {
    let dir = tmpdir(name);
    std::fs::write(dir.join("token"), "seed-only-token").unwrap();
    let mut hub = SeedHub::start(
        &dir,
        published_011,
        &[
            "--tasks",
            &tasks.to_string(),
            "--cut-every",
            "7919",
            "--cut-limit",
            "4",
        ],
    );
    let mut runner = Runner::start(&dir, hub.port, &harness(&dir, lines));
    let started = Instant::now();
    for &at in kills {
        let until = Instant::now() + Duration::from_secs(240);
        while hub.reports() < at {
            assert!(
                Instant::now() < until,
                "no progress to {at} reports\n{}",
                runner.stderr()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        runner.kill_and_restart();
    }
    let (status, done) = hub.finish(Duration::from_secs(300));
    let secs = started.elapsed().as_secs_f64();
    let err = runner.stderr();
    assert_eq!(status, Some(0), "hub summary {done}\n{err}");
    assert_eq!(done["reports"], tasks, "{done}");
    assert_eq!(done["gaps"], 0, "{done}");
    // Every task is done, but those running when the runner was killed: their harness
    // died with it, and the restarted runner reports them failed (`runner_restarted`);
    // at most the hub's four in flight per kill.
    let reports: Vec<Value> = hub
        .lines
        .lock()
        .unwrap()
        .iter()
        .filter_map(|v| v.get("report").cloned())
        .collect();
    let restarted = reports
        .iter()
        .filter(|r| r["status"] != "done")
        .inspect(|r| assert_eq!(r["failure_type"], "runner_restarted", "{r}\n{err}"))
        .count();
    assert!(restarted <= 4 * kills.len(), "{restarted} tasks not done");
    let frames = done["progress"].as_u64().unwrap() + done["reports"].as_u64().unwrap();
    let least = (tasks - restarted) * (lines + 1);
    assert!(
        frames as usize >= least,
        "{frames} frames, expected at least {least}"
    );
    println!(
        "{name}: {tasks} tasks ({restarted} failed by a runner kill), {frames} frames applied once each, {} cuts, {} duplicates dropped, {} runner kills, {secs:.1} s",
        done["cuts"],
        done["duplicates"],
        kills.len()
    );
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
#[ignore = "needs Python with the seed-only hub's packages: run by scripts/test-all"]
fn a_seed_only_hub_on_the_published_0_1_1_package_drives_the_runner() {
    // 90 tasks × 501 frames = 45,090 frames: eleven times the kept-log bound (4,096),
    // through four cuts and two SIGKILLs of the runner.
    drive("published", true, 90, 500, &[20, 60]);
}

#[test]
#[ignore = "needs Python with this project's package: run by scripts/test-all"]
fn a_seed_only_hub_on_this_package_drives_the_runner() {
    drive("ours", false, 30, 500, &[15]);
}

/// The seed-only runner (`conformance/peers/seed_only_runner.py`, 0.1.1's names) as a
/// process.
struct SeedRunner {
    child: Child,
}

impl SeedRunner {
    fn start(dir: &Path, url: &str, published_011: bool, exit_after: usize) -> Self {
        let script =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../conformance/peers/seed_only_runner.py");
        let mut cmd = Command::new(env("STAPEL_SEED_PYTHON"));
        cmd.arg(&script)
            .args(["--url", url, "--token-file", "token", "--progress", "3"])
            .args(["--exit-after", &exit_after.to_string()])
            .current_dir(dir)
            .stdout(std::fs::File::create(dir.join("seed-runner.out")).unwrap())
            .stderr(Stdio::inherit());
        if published_011 {
            cmd.env("PYTHONPATH", env("STAPEL_011_PATH"));
        } else {
            cmd.env_remove("PYTHONPATH");
        }
        Self {
            child: cmd.spawn().expect("start the seed-only runner"),
        }
    }
}

impl Drop for SeedRunner {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
#[ignore = "needs Python with the seed-only runner's packages: run by scripts/test-all"]
fn the_test_hub_serves_a_seed_only_runner_to_the_end() {
    use stapel_runner::testhub::TestHub;
    use stapel_runner_protocol::session::SessionConfig;
    // A runner on the published 0.1.1 package: no attempt on its frames, no acks, plain
    // pongs. The hub matches every report to its assignment (attempt 1), and its kept
    // command log stays short (the runner's pongs acknowledge what preceded the pings)
    // through cuts.
    const TASKS: usize = 120;
    let dir = tmpdir("testhub");
    std::fs::write(dir.join("token"), "seed-only-token").unwrap();
    let config = SessionConfig::from_value(
        &serde_json::json!({"ping_interval_ms": 200, "peer_timeout_ms": 5000}),
    )
    .unwrap();
    let hub = TestHub::start("seed-only-token", config);
    let _runner = SeedRunner::start(&dir, &hub.url(), true, TASKS);
    let mut most_kept = 0;
    for i in 0..TASKS {
        hub.assign(&format!("Q-{i}"), 1, serde_json::json!({"backend": "fake"}));
        if i % 40 == 20 {
            // A cut: the runner reconnects, declares its resume, re-sends its progress.
            // (Never after the last assignment: this runner exits once it has reported
            // every task and lost its connection, and a hub that never hears a pong
            // after its last commands rightly keeps them.)
            let (ok, _) = hub.wait_for(Duration::from_secs(60), |l| l.reports.len() > i / 2);
            assert!(ok);
            hub.drop_connection();
        }
        most_kept = most_kept.max(hub.log().kept_commands);
    }
    let (ok, log) = hub.wait_for(Duration::from_secs(120), |l| l.reports.len() == TASKS);
    let missing: Vec<String> = (0..TASKS)
        .map(|i| format!("Q-{i}"))
        .filter(|t| !log.reports.contains_key(&(t.clone(), 1)))
        .collect();
    assert!(
        ok,
        "{} of {TASKS} reports; missing {missing:?}; peer errors {:?}; their progress {:?}; gaps {}",
        log.reports.len(),
        log.peer_errors,
        missing
            .iter()
            .map(|t| log.progress.iter().filter(|((k, _), _)| k == t).collect::<Vec<_>>())
            .collect::<Vec<_>>(),
        log.gaps
    );
    for i in 0..TASKS {
        let task = format!("Q-{i}");
        assert_eq!(log.status(&task, 1).as_deref(), Some("done"), "{task}");
        assert_eq!(log.progress[&(task.clone(), 1)], vec![1, 2, 3], "{task}");
        assert!(!log.reports.contains_key(&(task, 0)));
    }
    // The pongs of the runner trimmed the commands it had handled.
    let (ok, log) = hub.wait_for(Duration::from_secs(10), |l| l.kept_commands == 0);
    assert!(ok, "{} commands still kept", log.kept_commands);
    println!(
        "testhub: {TASKS} tasks of a seed-only runner matched to attempt 1; at most {most_kept} commands kept at once"
    );
}

#[test]
#[ignore = "needs Python with the seed-only hub's packages: run by scripts/test-all"]
fn a_hub_that_answers_no_pings_stalls_the_runner_visibly_and_loses_nothing() {
    // A kept log of 64 frames and a hub that answers no ping for 3 s: the runner has no
    // proof of receipt, its log fills, it says so once (the bound and what the hub must
    // do) and waits; once pongs come, it goes on, and every frame arrives once.
    let dir = tmpdir("silent");
    std::fs::write(dir.join("token"), "seed-only-token").unwrap();
    let mut hub = SeedHub::start(&dir, true, &["--tasks", "2", "--silent-for", "3"]);
    let runner = Runner::start_with(
        &dir,
        hub.port,
        &harness(&dir, 400),
        r#"{"ping_interval_ms":500,"peer_timeout_ms":10000,"sequencing":{"max_outbox_frames":64}}"#,
    );
    let (status, done) = hub.finish(Duration::from_secs(120));
    let err = runner.stderr();
    assert_eq!(status, Some(0), "{done}\n{err}");
    assert_eq!(done["progress"], 800, "{done}");
    let waits = err.matches("waiting: the kept log is full").count();
    assert!(waits >= 1, "the runner never said why it waited:\n{err}");
    assert!(err.contains("bound max_outbox_frames = 64"), "{err}");
    assert!(err.contains("answer pings in order"), "{err}");
    assert!(err.contains("the kept log has room again"), "{err}");
    println!("silent: the runner stalled visibly {waits} time(s) and lost nothing");
}
