//! Figures of `stapel-runner connect` on loopback with the built-in fake harness:
//!
//! 1. tasks/s and progress frames/s through runner → TCP proxy → hub (the Rust test hub
//!    over `HubSession`), `BENCH_TASKS` tasks (default 300), `--max-tasks 16`,
//!    `--delay-ms 0`; each harness in its own PID namespace (the default), and the same
//!    with `--no-pid-namespace` (the cost of the namespace, in the same run);
//! 2. time from a cut connection to the next progress frame applied by the hub, while a
//!    slow task streams progress (`BENCH_CUTS` cuts, default 20; the runner's default
//!    backoff, 250 ms capped first delay, and a fast one, 10 ms);
//! 3. the runner's RSS (VmRSS, VmHWM) with 100 concurrent tasks.
//!
//! `cargo bench -p stapel-runner --bench connect`. Figures are printed, not asserted.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;
use stapel_runner::testhub::TestHub;
use stapel_runner_protocol::session::SessionConfig;

const RUNNER: &str = env!("CARGO_BIN_EXE_stapel-runner");
const TOKEN: &str = "bench-token";

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A plain forwarding proxy; `cut()` closes every live connection.
struct Proxy {
    port: u16,
    live: Arc<Mutex<Vec<TcpStream>>>,
}

impl Proxy {
    fn start(upstream: std::net::SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let live = Arc::new(Mutex::new(Vec::new()));
        let l = live.clone();
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let Ok(server) = TcpStream::connect(upstream) else {
                    continue;
                };
                let _ = client.set_nodelay(true);
                let _ = server.set_nodelay(true);
                l.lock().unwrap().push(client.try_clone().unwrap());
                for (mut from, mut to) in [
                    (client.try_clone().unwrap(), server.try_clone().unwrap()),
                    (server, client),
                ] {
                    std::thread::spawn(move || {
                        let mut buf = [0u8; 64 * 1024];
                        while let Ok(n) = from.read(&mut buf) {
                            if n == 0 || to.write_all(&buf[..n]).is_err() {
                                break;
                            }
                        }
                        let _ = to.shutdown(Shutdown::Both);
                        let _ = from.shutdown(Shutdown::Both);
                    });
                }
            }
        });
        Self { port, live }
    }

    fn cut(&self) {
        for s in self.live.lock().unwrap().drain(..) {
            let _ = s.shutdown(Shutdown::Both);
        }
    }
}

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("stapel-bench-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join("token"), TOKEN).unwrap();
    d
}

fn runner(port: u16, d: &std::path::Path, extra: &[&str]) -> Child {
    Command::new(RUNNER)
        .args([
            "connect",
            "--url",
            &format!("ws://127.0.0.1:{port}/"),
            "--token-file",
        ])
        .arg(d.join("token"))
        .arg("--state-dir")
        .arg(d.join("state"))
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

fn stop(mut c: Child) {
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(c.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
    let _ = c.wait();
}

fn status_kb(pid: u32, key: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(0)
}

fn throughput(label: &str, extra: &[&str]) {
    let n = env_or("BENCH_TASKS", 300);
    let hub = TestHub::start(TOKEN, SessionConfig::default());
    let proxy = Proxy::start(hub.addr);
    let d = dir(&format!("throughput-{}", extra.len()));
    let mut args = vec!["--max-tasks", "16", "--delay-ms", "0"];
    args.extend_from_slice(extra);
    let r = runner(proxy.port, &d, &args);
    // Warm up: one task, so the connection is up before the clock starts.
    hub.assign("warm", 1, json!({"backend": "fake"}));
    hub.wait_for(Duration::from_secs(30), |l| {
        l.reports.contains_key(&("warm".into(), 1))
    });
    // Keep at most 16 tasks outstanding (the runner's --max-tasks): more would be
    // answered at once as runner_busy, which is not the figure wanted here.
    let t0 = Instant::now();
    let mut assigned = 0;
    let deadline = Instant::now() + Duration::from_secs(600);
    let mut log = hub.log();
    while log.reports.len() < n + 1 && Instant::now() < deadline {
        let done = log.reports.len() - 1;
        while assigned < n && assigned - done < 16 {
            hub.assign(&format!("T-{assigned}"), 1, json!({"backend": "fake"}));
            assigned += 1;
        }
        std::thread::sleep(Duration::from_millis(1));
        log = hub.log();
    }
    let ok = log.reports.len() == n + 1;
    let secs = t0.elapsed().as_secs_f64();
    stop(r);
    let frames: usize = log
        .progress
        .iter()
        .filter(|(k, _)| k.0 != "warm")
        .map(|(_, v)| v.len())
        .sum();
    assert!(ok, "not every task reported");
    let done = (0..n)
        .filter(|i| log.status(&format!("T-{i}"), 1).as_deref() == Some("done"))
        .count();
    assert_eq!(done, n, "every task should be done");
    println!(
        "throughput ({label}): {n} tasks in {secs:.2} s = {:.1} tasks/s; {frames} progress frames = {:.0} frames/s (+{n} reports)",
        n as f64 / secs,
        frames as f64 / secs
    );
}

fn reconnect(label: &str, backoff: &[&str]) {
    let cuts = env_or("BENCH_CUTS", 20);
    let hub = TestHub::start(TOKEN, SessionConfig::default());
    let proxy = Proxy::start(hub.addr);
    let d = dir(&format!("reconnect-{label}"));
    let mut args = vec!["--delay-ms", "20", "--script", "happy-path"];
    args.extend_from_slice(backoff);
    let r = runner(proxy.port, &d, &args);
    let mut samples = Vec::new();
    let mut task = 0;
    while samples.len() < cuts {
        task += 1;
        let id = format!("R-{task}");
        hub.assign(&id, 1, json!({"backend": "fake"}));
        let key = (id.clone(), 1);
        if !hub
            .wait_for(Duration::from_secs(30), |l| {
                l.progress.get(&key).is_some_and(|p| p.len() >= 2)
            })
            .0
        {
            continue;
        }
        let before = hub.log().progress.get(&key).map_or(0, Vec::len);
        let t0 = Instant::now();
        proxy.cut();
        let (ok, _) = hub.wait_for(Duration::from_secs(30), |l| {
            l.progress.get(&key).map_or(0, Vec::len) > before
        });
        if ok {
            samples.push(t0.elapsed());
        }
        hub.wait_for(Duration::from_secs(30), |l| l.reports.contains_key(&key));
    }
    stop(r);
    samples.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "cut → resumed progress ({label}): median {:.0} ms, p90 {:.0} ms, max {:.0} ms over {} cuts (wait_for polls every 20 ms)",
        ms(samples[samples.len() / 2]),
        ms(samples[samples.len() * 9 / 10]),
        ms(*samples.last().unwrap()),
        samples.len()
    );
}

fn rss() {
    let hub = TestHub::start(TOKEN, SessionConfig::default());
    let d = dir("rss");
    let r = runner(
        hub.addr.port(),
        &d,
        &["--max-tasks", "100", "--delay-ms", "400"],
    );
    let pid = r.id();
    let ids: Vec<String> = (0..100).map(|i| format!("M-{i}")).collect();
    for id in &ids {
        hub.assign(id, 1, json!({"backend": "fake"}));
    }
    let (ok, _) = hub.wait_for(Duration::from_secs(120), |l| {
        ids.iter()
            .all(|id| l.progress.contains_key(&(id.clone(), 1)))
    });
    let running = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| {
            std::fs::read_to_string(e.path().join("stat")).is_ok_and(|s| {
                s.rfind(')')
                    .and_then(|i| s[i + 1..].split_whitespace().nth(1)?.parse::<u32>().ok())
                    == Some(pid)
            })
        })
        .count();
    let (rss, hwm) = (status_kb(pid, "VmRSS:"), status_kb(pid, "VmHWM:"));
    stop(r);
    println!(
        "RSS with 100 concurrent tasks ({running} harness wrappers running, all streaming: {ok}): runner VmRSS {:.1} MiB, VmHWM {:.1} MiB",
        rss as f64 / 1024.0,
        hwm as f64 / 1024.0
    );
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    throughput("PID namespace per harness", &[]);
    throughput("--no-pid-namespace", &["--no-pid-namespace"]);
    reconnect("default backoff", &[]);
    reconnect(
        "10 ms backoff",
        &["--backoff-initial-ms", "10", "--backoff-max-ms", "100"],
    );
    rss();
}
