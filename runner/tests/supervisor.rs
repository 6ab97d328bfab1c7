//! Real-process tests of the supervision primitives.

use nix::sys::signal::Signal;
use stapel_runner::supervisor::*;
use tokio::io::AsyncReadExt;

mod common;
use common::{sh, wait_gone};

#[tokio::test]
async fn child_environment_is_exactly_the_allow_list() {
    std::env::set_var("OPENAI_API_KEY", "sk-must-not-leak");
    let mut s = spawn(&sh(
        "tr '\\0' '\\n' < /proc/$$/environ",
        &[("PATH", "/usr/bin:/bin"), ("KEEP", "1")],
    ))
    .unwrap();
    let mut out = String::new();
    s.child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .await
        .unwrap();
    s.child.wait().await.unwrap();
    let mut vars: Vec<&str> = out.lines().filter(|l| !l.is_empty()).collect();
    vars.sort_unstable();
    assert_eq!(vars, ["KEEP=1", "PATH=/usr/bin:/bin"]);
}

#[tokio::test]
async fn group_signal_reaches_workers() {
    let mut s = spawn(&sh(
        "sleep 1000 & echo $!; wait",
        &[("PATH", "/usr/bin:/bin")],
    ))
    .unwrap();
    let mut stdout = s.child.stdout.take().unwrap();
    let mut buf = [0u8; 32];
    let n = stdout.read(&mut buf).await.unwrap();
    let worker: i32 = std::str::from_utf8(&buf[..n])
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(alive(worker));
    signal_group(s.pid, Signal::SIGTERM).unwrap();
    s.child.wait().await.unwrap();
    assert!(
        wait_gone(worker).await,
        "worker {worker} survived the group signal"
    );
}
