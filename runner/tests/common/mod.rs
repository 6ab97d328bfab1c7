//! Helpers shared by the real-process supervision tests.

use stapel_runner::supervisor::{alive, SpawnSpec};
use std::time::{Duration, Instant};

/// `/bin/sh -c script` in a new process group with exactly `env`.
#[allow(dead_code)]
pub fn sh(script: &str, env: &[(&str, &str)]) -> SpawnSpec {
    SpawnSpec {
        program: "/bin/sh".into(),
        args: vec!["-c".into(), script.into()],
        env: env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        new_process_group: true,
        cwd: None,
    }
}

/// Wait up to 5 s for `pid` to be gone (a zombie counts as gone); `false` on timeout.
#[allow(dead_code)]
pub async fn wait_gone(pid: i32) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if !alive(pid) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    false
}

/// Whether `pid` runs: it exists and is not a zombie (a zombie still answers `kill(0)`).
#[allow(dead_code)]
pub fn running(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| Some(s[s.rfind(')')? + 1..].trim_start().starts_with('Z')))
        .is_some_and(|zombie| !zombie)
}

/// Every running process (zombies excluded) whose environment holds `needle`
/// (`NAME=value`), with its command line — a scan of the whole machine, so it also sees
/// processes in other PID namespaces and escapees that left the runner's tree (pids a
/// harness prints from inside its own PID namespace would not name host processes).
#[allow(dead_code)]
pub fn marked(needle: &str) -> Vec<(i32, String)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        if !env.split(|b| *b == 0).any(|v| v == needle.as_bytes()) || !running(pid) {
            continue;
        }
        let cmd = std::fs::read(format!("/proc/{pid}/cmdline"))
            .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
            .unwrap_or_default();
        out.push((pid, cmd));
    }
    out
}
