//! `stapel-runner connect` end to end: real runner processes, a Rust hub over the core's
//! HubSession on 127.0.0.1, and (in the fault tests) a TCP proxy between them.

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use stapel_runner::testhub::{HubLog, TestHub};
use stapel_runner_protocol::session::SessionConfig;

const TOKEN: &str = "test-token-7f3a";

fn fast_session() -> SessionConfig {
    SessionConfig::from_value(
        &json!({"ping_interval_ms": 200, "peer_timeout_ms": 1500, "ack_delay_ms": 20}),
    )
    .unwrap()
}

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("stapel-connect-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

struct Runner {
    child: Child,
}

impl Runner {
    fn start(url: &str, dir: &Path, extra: &[&str]) -> Self {
        let token = dir.join("token");
        if !token.exists() {
            std::fs::write(&token, TOKEN).unwrap();
        }
        let defaults = [
            (
                "--session-config",
                r#"{"ping_interval_ms":200,"peer_timeout_ms":1500,"ack_delay_ms":20}"#,
            ),
            ("--backoff-initial-ms", "50"),
            ("--backoff-max-ms", "400"),
            ("--delay-ms", "5"),
        ];
        let mut args: Vec<&str> = Vec::new();
        for (flag, value) in defaults {
            if !extra.contains(&flag) {
                args.extend([flag, value]);
            }
        }
        let child = Command::new(env!("CARGO_BIN_EXE_stapel-runner"))
            .args(["connect", "--url", url, "--token-file"])
            .arg(&token)
            .arg("--state-dir")
            .arg(dir.join("state"))
            .args(&args)
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        Self { child }
    }

    fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// SIGTERM and wait; the stderr text.
    fn stop(mut self) -> String {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.pid()),
            nix::sys::signal::Signal::SIGTERM,
        );
        let _ = self.child.wait();
        let mut s = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            let _ = e.read_to_string(&mut s);
        }
        s
    }

    fn kill9(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Every process whose parent is `pid`, recursively (from /proc).
fn descendants(pid: i32) -> Vec<i32> {
    let mut out = Vec::new();
    let mut frontier = vec![pid];
    while let Some(p) = frontier.pop() {
        for e in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(c) = e.file_name().to_string_lossy().parse::<i32>() else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{c}/stat")) else {
                continue;
            };
            let Some(after) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
                continue;
            };
            let mut f = after.split_whitespace();
            let state = f.next().unwrap_or("");
            if f.next().and_then(|x| x.parse::<i32>().ok()) == Some(p) && state != "Z" {
                out.push(c);
                frontier.push(c);
            }
        }
    }
    out
}

fn gone(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(s) => s
            .rfind(')')
            .map(|i| s[i + 1..].trim_start().starts_with('Z'))
            .unwrap_or(true),
    }
}

fn wait_gone(pids: &[i32]) -> bool {
    let until = std::time::Instant::now() + Duration::from_secs(5);
    while std::time::Instant::now() < until {
        if pids.iter().all(|p| gone(*p)) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// The oracle: progress seqs 1..=n applied once each in order, then exactly one report
/// with seq n+1.
fn check_task(log: &HubLog, task: &str, attempt: u64) -> Result<String, String> {
    let key = (task.to_string(), attempt);
    let seqs = log.progress.get(&key).cloned().unwrap_or_default();
    let expect: Vec<u64> = (1..=seqs.len() as u64).collect();
    if seqs != expect {
        return Err(format!("{task}: progress seqs {seqs:?}"));
    }
    let reports = log.reports.get(&key).cloned().unwrap_or_default();
    match reports.as_slice() {
        [(seq, r)] if *seq == seqs.len() as u64 + 1 => {
            Ok(r["status"].as_str().unwrap_or("").to_string())
        }
        other => Err(format!(
            "{task}: reports {:?}",
            other.iter().map(|(s, _)| s).collect::<Vec<_>>()
        )),
    }
}

fn reported(log: &HubLog, tasks: &[String]) -> bool {
    tasks
        .iter()
        .all(|t| log.reports.contains_key(&(t.clone(), 1)))
}

#[test]
fn a_task_runs_through_the_fake_harness_and_reports_done() {
    let hub = TestHub::start(TOKEN, fast_session());
    let dir = tmpdir("happy");
    let runner = Runner::start(&hub.url(), &dir, &[]);
    hub.assign("T-1", 1, json!({"backend": "fake", "model": "m"}));
    let (ok, log) = hub.wait_for(Duration::from_secs(20), |l| reported(l, &["T-1".into()]));
    let pid = runner.pid();
    let err = runner.stop();
    assert!(ok, "no report: {log:?}\n{err}");
    assert_eq!(check_task(&log, "T-1", 1).unwrap(), "done");
    let kinds: BTreeSet<_> = log.kinds[&("T-1".to_string(), 1)].iter().cloned().collect();
    assert!(
        kinds.contains("state") && kinds.contains("tool"),
        "{kinds:?}"
    );
    assert!(!err.contains(TOKEN), "the token leaked into the log");
    assert!(descendants(pid).is_empty());
}

#[test]
fn refusals_busy_and_cancel_are_answered_with_reports() {
    let hub = TestHub::start(TOKEN, fast_session());
    let dir = tmpdir("answers");
    let runner = Runner::start(&hub.url(), &dir, &["--max-tasks", "1", "--delay-ms", "300"]);
    hub.assign("T-slow", 1, json!({"backend": "fake"}));
    let (ok, _) = hub.wait_for(Duration::from_secs(20), |l| {
        l.progress.contains_key(&("T-slow".into(), 1))
    });
    assert!(ok);
    hub.assign("T-busy", 1, json!({"backend": "fake"}));
    hub.assign("T-nope", 1, json!({"backend": "no-such-profile"}));
    hub.cancel("T-slow", "operator");
    let tasks: Vec<String> = ["T-slow", "T-busy", "T-nope"].map(String::from).to_vec();
    let (ok, log) = hub.wait_for(Duration::from_secs(20), |l| reported(l, &tasks));
    let pid = runner.pid();
    let err = runner.stop();
    assert!(ok, "{log:?}\n{err}");
    for t in &tasks {
        assert_eq!(check_task(&log, t, 1).unwrap(), "failed", "{t}");
    }
    let ft = |t: &str| {
        log.reports[&(t.to_string(), 1)][0].1["failure_type"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(ft("T-slow"), "cancelled");
    assert_eq!(ft("T-busy"), "runner_busy");
    // T-nope arrived while T-slow still ran (busy) or after the cancel (refused).
    assert!(["profile_refused", "runner_busy"].contains(&ft("T-nope").as_str()));
    assert!(descendants(pid).is_empty());
}

#[test]
fn a_bad_token_is_refused_before_the_upgrade_and_retried_with_backoff() {
    let hub = TestHub::start("the-right-token", fast_session());
    let dir = tmpdir("token");
    std::fs::write(dir.join("token"), "a-wrong-token").unwrap();
    let runner = Runner::start(&hub.url(), &dir, &[]);
    std::thread::sleep(Duration::from_millis(1500));
    let refused = hub.log().rejected;
    // Backoff 50 ms doubling to 400 ms, jittered in the upper half: at most ~10 tries in
    // 1.5 s; a tight loop would make thousands.
    assert!((2..=12).contains(&refused), "{refused} refused upgrades");
    assert_eq!(hub.log().accepted, 0);
    // The token is re-read on every reconnect: a rotated token is used.
    std::fs::write(dir.join("token"), "the-right-token").unwrap();
    let (ok, _) = hub.wait_for(Duration::from_secs(5), |l| l.hellos >= 1);
    let err = runner.stop();
    assert!(ok, "{err}");
    assert!(!err.contains("a-wrong-token") && !err.contains("the-right-token"));
    assert!(err.contains("HTTP 401"), "{err}");
}

#[test]
fn a_sigkilled_runner_takes_its_harness_along_and_resumes_from_its_state_dir() {
    let hub = TestHub::start(TOKEN, fast_session());
    let dir = tmpdir("sigkill");
    let runner = Runner::start(&hub.url(), &dir, &["--delay-ms", "400"]);
    hub.assign("T-k", 1, json!({"backend": "fake"}));
    let (ok, _) = hub.wait_for(Duration::from_secs(20), |l| {
        l.progress
            .get(&("T-k".into(), 1))
            .is_some_and(|p| p.len() >= 3)
    });
    assert!(ok);
    let harness = descendants(runner.pid());
    assert!(!harness.is_empty(), "the harness should be running");
    runner.kill9();
    assert!(
        wait_gone(&harness),
        "harness processes survived the runner: {harness:?}"
    );
    // Restart from the same state directory: the task is reported, nothing applied twice.
    let runner = Runner::start(&hub.url(), &dir, &[]);
    let (ok, log) = hub.wait_for(Duration::from_secs(20), |l| reported(l, &["T-k".into()]));
    let err = runner.stop();
    assert!(ok, "{log:?}\n{err}");
    assert_eq!(check_task(&log, "T-k", 1).unwrap(), "failed");
    assert_eq!(
        log.reports[&("T-k".to_string(), 1)][0].1["failure_type"],
        "runner_restarted"
    );
    assert_eq!(log.gaps, 0);
}

fn jsonl_harness(dir: &Path, name: &str, body: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
    let _ = Command::new("chmod").arg("+x").arg(&p).status();
    p.display().to_string()
}

#[test]
fn subprocess_jsonl_harnesses_finish_crash_flood_and_hang() {
    let dir = tmpdir("jsonl");
    let cases = [
        ("ok", "read line\necho '{\"type\":\"tool\",\"name\":\"bash\"}'\necho '{\"type\":\"result\",\"text\":\"ok\",\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}'\nread more", "done", None),
        ("crash", "read line\necho '{\"type\":\"state\",\"state\":\"x\"}'\nexit 3", "failed", Some("unexpected_eof")),
        ("flood", "read line\ni=0\nwhile [ $i -lt 300 ]; do echo '{\"type\":\"state\",\"state\":\"busy\"}'; i=$((i+1)); done\necho '{\"type\":\"result\",\"text\":\"ok\",\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}'", "done", None),
        ("hang", "read line\nsleep 600", "failed", Some("cancelled")),
    ];
    for (name, body, status, failure) in cases {
        let hub = TestHub::start(TOKEN, fast_session());
        let path = jsonl_harness(&dir, name, body);
        let sub = tmpdir(&format!("jsonl-{name}"));
        let runner = Runner::start(
            &hub.url(),
            &sub,
            &["--jsonl-harness", &path, "--grace-ms", "200"],
        );
        hub.assign("T-j", 1, json!({"backend": "subprocess"}));
        if name == "hang" {
            std::thread::sleep(Duration::from_millis(500));
            hub.cancel("T-j", "stop");
        }
        let (ok, log) = hub.wait_for(Duration::from_secs(20), |l| reported(l, &["T-j".into()]));
        let pid = runner.pid();
        let left = descendants(pid);
        let err = runner.stop();
        assert!(ok, "{name}: {log:?}\n{err}");
        assert_eq!(check_task(&log, "T-j", 1).unwrap(), status, "{name}");
        let r = &log.reports[&("T-j".to_string(), 1)][0].1;
        assert_eq!(r["failure_type"].as_str(), failure, "{name}: {r:?}");
        if name == "ok" {
            assert_eq!(r["usage"]["fresh_input"].as_u64(), Some(3));
        }
        if name == "flood" {
            assert_eq!(log.progress[&("T-j".to_string(), 1)].len(), 300);
        }
        assert!(
            left.is_empty(),
            "{name}: processes left after the report: {left:?}"
        );
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

/// One connection's fault.
#[derive(Debug, Clone, Copy)]
enum Fault {
    /// Forward this many bytes (either direction, counted together), then cut both ways
    /// (usually mid-frame).
    CutAfter(u64),
    /// Forward this many bytes, then stop forwarding (the connection stays open: a
    /// half-open link that only the keepalive detects).
    StallAfter(u64),
    /// Forward everything.
    Clean,
}

/// A TCP proxy 127.0.0.1:port → `upstream` whose n-th connection gets `faults[n]`
/// (then `Clean`). Returns the port and the number of connections seen.
fn proxy(
    upstream: std::net::SocketAddr,
    faults: Vec<Fault>,
) -> (u16, Arc<std::sync::atomic::AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let count = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let c = count.clone();
    std::thread::spawn(move || {
        for (n, client) in listener.incoming().enumerate() {
            let Ok(client) = client else { continue };
            c.store(n + 1, Ordering::SeqCst);
            let fault = faults.get(n).copied().unwrap_or(Fault::Clean);
            let Ok(server) = TcpStream::connect(upstream) else {
                continue;
            };
            let budget = Arc::new(std::sync::atomic::AtomicI64::new(match fault {
                Fault::CutAfter(b) | Fault::StallAfter(b) => b as i64,
                Fault::Clean => i64::MAX,
            }));
            let stalled = Arc::new(AtomicBool::new(false));
            for (mut from, mut to) in [
                (client.try_clone().unwrap(), server.try_clone().unwrap()),
                (server.try_clone().unwrap(), client.try_clone().unwrap()),
            ] {
                let (budget, stalled) = (budget.clone(), stalled.clone());
                std::thread::spawn(move || {
                    let mut buf = [0u8; 4096];
                    loop {
                        let n = match from.read(&mut buf) {
                            Ok(0) | Err(_) => break,
                            Ok(n) => n,
                        };
                        if stalled.load(Ordering::SeqCst) {
                            continue; // swallow: half-open
                        }
                        let left = budget.fetch_sub(n as i64, Ordering::SeqCst);
                        let take = left.clamp(0, n as i64) as usize;
                        if take > 0 && to.write_all(&buf[..take]).is_err() {
                            break;
                        }
                        if (take as i64) < n as i64
                            || left - n as i64 <= 0 && !matches!(fault, Fault::Clean)
                        {
                            match fault {
                                Fault::CutAfter(_) => {
                                    let _ = from.shutdown(Shutdown::Both);
                                    let _ = to.shutdown(Shutdown::Both);
                                    break;
                                }
                                Fault::StallAfter(_) => stalled.store(true, Ordering::SeqCst),
                                Fault::Clean => {}
                            }
                        }
                    }
                    let _ = to.shutdown(Shutdown::Both);
                });
            }
        }
    });
    (port, count)
}

fn schedule(seed: u64, connections: usize) -> Vec<Fault> {
    let mut rng = Rng(seed);
    (0..connections)
        .map(|_| match rng.below(20) {
            0..=15 => Fault::CutAfter(100 + rng.below(5000)),
            16..=17 => Fault::StallAfter(100 + rng.below(5000)),
            _ => Fault::CutAfter(20_000 + rng.below(40_000)),
        })
        .collect()
}

const FAULT_SESSION: &str = r#"{"ping_interval_ms":100,"peer_timeout_ms":400,"ack_delay_ms":10}"#;

/// One runner lifetime behind a proxy whose n-th connection gets the n-th seeded fault:
/// batches of tasks (some cancelled at random) until every fault was used, with one
/// SIGKILL of the runner and a restart from its state directory at a seeded moment, and
/// one restart of the hub from a snapshot of its state.
/// Checks the oracle for every task and that no process is left behind. Returns the
/// number of connections.
fn run_schedule(seed: u64, faults: Vec<Fault>) -> usize {
    let hub = TestHub::start(
        TOKEN,
        SessionConfig::from_value(&serde_json::from_str(FAULT_SESSION).unwrap()).unwrap(),
    );
    let n_faults = faults.len();
    let (port, seen) = proxy(hub.addr, faults);
    let dir = tmpdir(&format!("faults-{seed}"));
    let url = format!("ws://127.0.0.1:{port}/");
    let args = [
        "--max-tasks",
        "8",
        "--delay-ms",
        "2",
        "--session-config",
        FAULT_SESSION,
    ];
    let mut runner = Runner::start(&url, &dir, &args);
    let mut rng = Rng(seed ^ 0xC0FFEE);
    let mut ids: Vec<String> = Vec::new();
    let mut batch = 0;
    let mut killed = false;
    let started = std::time::Instant::now();
    while (seen.load(Ordering::SeqCst) < n_faults || batch < 3) && batch < 40 {
        let new: Vec<String> = (0..16).map(|i| format!("T-{seed}-{batch}-{i}")).collect();
        for id in &new {
            hub.assign(id, 1, json!({"backend": "fake"}));
        }
        for id in &new {
            if rng.below(8) == 0 {
                hub.cancel(id, "seeded");
            }
        }
        ids.extend(new);
        if !killed && batch == 1 {
            std::thread::sleep(Duration::from_millis(rng.below(400)));
            let tree = descendants(runner.pid());
            runner.kill9();
            assert!(
                wait_gone(
                    &tree
                        .iter()
                        .copied()
                        .filter(|p| is_leader(*p))
                        .collect::<Vec<_>>()
                ),
                "seed {seed}: harness leaders survived a SIGKILLed runner"
            );
            runner = Runner::start(&url, &dir, &args);
            killed = true;
        }
        if batch == 2 {
            // The hub restarts from a snapshot of its state, mid-stream.
            std::thread::sleep(Duration::from_millis(rng.below(300)));
            hub.restart();
        }
        let (ok, log) = hub.wait_for(Duration::from_secs(60), |l| reported(l, &ids));
        assert!(
            ok,
            "seed {seed}: not every task reported ({} of {}); {} connections",
            log.reports.len(),
            ids.len(),
            seen.load(Ordering::SeqCst)
        );
        batch += 1;
        if std::env::var_os("STAPEL_FAULT_TRACE").is_some() {
            eprintln!(
                "seed {seed} batch {batch}: {} connections, {} tasks, {:?}",
                seen.load(Ordering::SeqCst),
                ids.len(),
                started.elapsed()
            );
        }
    }
    let log = hub.log();
    let pid = runner.pid();
    let left = descendants(pid);
    let _ = runner.stop();
    for id in &ids {
        let status = check_task(&log, id, 1).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        let r = &log.reports[&(id.clone(), 1)][0].1;
        let ft = r["failure_type"].as_str().unwrap_or("");
        assert!(
            status == "done" || ["runner_busy", "cancelled", "runner_restarted"].contains(&ft),
            "seed {seed} {id}: {r:?}"
        );
    }
    assert_eq!(log.gaps, 0, "seed {seed}: the hub was told of lost frames");
    assert!(
        left.is_empty() || wait_gone(&left),
        "seed {seed}: processes left: {left:?}"
    );
    let n = seen.load(Ordering::SeqCst);
    assert!(
        n >= n_faults,
        "seed {seed}: only {n} of {n_faults} faults exercised"
    );
    n
}

/// `true` when `pid` leads its process group (a harness leader).
fn is_leader(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            let after = s[s.rfind(')')? + 1..].to_string();
            let f: Vec<&str> = after.split_whitespace().collect();
            Some(f.get(2)?.parse::<i32>().ok()? == pid)
        })
        .unwrap_or(false)
}

/// Seeded fault schedules (default 4 runner lifetimes × 60 connection faults = 240; set
/// STAPEL_FAULT_RUNS / STAPEL_FAULT_SEED for a soak): every connection gets a fault from
/// the seed (cut mid-frame, half-open stall, a longer life then a cut), tasks are
/// cancelled at random, the runner is SIGKILLed and restarted once per lifetime, and the
/// oracle is checked per task.
#[test]
fn seeded_fault_schedules_lose_nothing_and_apply_nothing_twice() {
    let base: u64 = std::env::var("STAPEL_FAULT_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let runs: u64 = std::env::var("STAPEL_FAULT_RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(4);
    let per_run = 60;
    // The lifetimes are independent (own hub, proxy, runner, state directory): run them
    // side by side; each mostly waits on sockets and timers.
    let mut connections = 0;
    for chunk in (0..runs).collect::<Vec<_>>().chunks(4) {
        let lifetimes: Vec<_> = chunk
            .iter()
            .map(|r| {
                let seed = base.wrapping_add(*r);
                std::thread::spawn(move || run_schedule(seed, schedule(seed, per_run)))
            })
            .collect();
        for t in lifetimes {
            connections += t.join().expect("a fault schedule failed");
        }
    }
    eprintln!("fault schedules: {} seeded connection faults over {runs} runner lifetimes ({connections} connections)", per_run * runs as usize);
}

/// A harness that never writes (so no SIGPIPE would ever stop it) is killed by the kernel
/// when the runner is SIGKILLed: `harness-exec` set `PR_SET_PDEATHSIG` before exec.
#[test]
fn a_silent_harness_dies_with_a_sigkilled_runner() {
    let hub = TestHub::start(TOKEN, fast_session());
    let dir = tmpdir("pdeathsig");
    let path = jsonl_harness(&dir, "silent", "read line\nexec sleep 600");
    let runner = Runner::start(&hub.url(), &dir, &["--jsonl-harness", &path]);
    hub.assign("T-s", 1, json!({"backend": "subprocess"}));
    let until = std::time::Instant::now() + Duration::from_secs(10);
    let mut harness = Vec::new();
    while harness.is_empty() && std::time::Instant::now() < until {
        harness = descendants(runner.pid())
            .into_iter()
            .filter(|p| {
                std::fs::read_to_string(format!("/proc/{p}/cmdline"))
                    .is_ok_and(|c| c.starts_with("sleep"))
            })
            .collect();
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(harness.len(), 1, "the harness should run as `sleep`");
    assert!(is_leader(harness[0]), "the harness leads its process group");
    runner.kill9();
    assert!(
        wait_gone(&harness),
        "the harness outlived the SIGKILLed runner"
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
    let runner = Runner::start(&url, &untrusted, &[]);
    std::thread::sleep(Duration::from_millis(800));
    let err = runner.stop();
    assert!(err.contains("TLS handshake failed"), "{err}");
    assert_eq!(hub.log().hellos, 0);

    let ca_file = dir.join("ca.pem").display().to_string();
    let runner = Runner::start(&url, &dir, &["--ca-file", &ca_file]);
    hub.assign("T-tls", 1, json!({"backend": "fake"}));
    let (ok, log) = hub.wait_for(Duration::from_secs(20), |l| reported(l, &["T-tls".into()]));
    let err = runner.stop();
    assert!(ok, "{log:?}\n{err}");
    assert_eq!(check_task(&log, "T-tls", 1).unwrap(), "done");
}

/// Local-protocol harnesses that fail before a result: one never says ready (the ready
/// deadline ends it) and one exits at once. Each task ends in exactly one failed report
/// and no process is left behind.
#[test]
fn local_harnesses_that_hang_before_ready_or_exit_early_are_reported_failed() {
    let cases = [
        ("never-ready", "sleep 600", "1000"),
        ("exits-early", "exit 0", "5000"),
    ];
    for (name, script, ready_ms) in cases {
        let hub = TestHub::start(TOKEN, fast_session());
        let dir = tmpdir(&format!("local-{name}"));
        let runner = Runner::start(
            &hub.url(),
            &dir,
            &[
                "--harness",
                "/bin/sh",
                "--harness-arg",
                "-c",
                "--harness-arg",
                script,
                "--ready-timeout-ms",
                ready_ms,
                "--grace-ms",
                "200",
            ],
        );
        hub.assign("T-l", 1, json!({"backend": "fake"}));
        let (ok, log) = hub.wait_for(Duration::from_secs(20), |l| reported(l, &["T-l".into()]));
        let pid = runner.pid();
        let left = descendants(pid);
        let err = runner.stop();
        assert!(ok, "{name}: no report: {log:?}\n{err}");
        assert_eq!(check_task(&log, "T-l", 1).unwrap(), "failed", "{name}");
        let r = &log.reports[&("T-l".to_string(), 1)][0].1;
        assert_eq!(
            r["failure_type"].as_str(),
            Some("harness_failed"),
            "{name}: {r:?}"
        );
        assert!(left.is_empty(), "{name}: processes left: {left:?}");
    }
}
