//! Helpers shared by the real-process supervision tests.

use stapel_runner::supervisor::{alive, SpawnSpec};
use std::time::{Duration, Instant};

/// `/bin/sh -c script` in a new process group with exactly `env`.
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
