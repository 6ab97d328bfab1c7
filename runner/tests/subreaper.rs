//! The subreaper test runs in its own test binary: becoming a subreaper and killing every
//! adopted child affects the whole process, so no other test may share it.

use nix::sys::signal::Signal;
use stapel_runner::supervisor::*;
use std::time::Duration;
use tokio::io::AsyncReadExt;

mod common;
use common::{sh, wait_gone};

#[tokio::test]
async fn setsid_escapee_is_adopted_and_killed() {
    become_subreaper().unwrap();
    // The grandchild leaves the harness's process group (and session) with setsid.
    let mut s = spawn(&sh(
        "setsid sleep 1000 & echo $!; wait",
        &[("PATH", "/usr/bin:/bin")],
    ))
    .unwrap();
    let mut stdout = s.child.stdout.take().unwrap();
    let mut buf = [0u8; 32];
    let n = stdout.read(&mut buf).await.unwrap();
    let escapee: i32 = std::str::from_utf8(&buf[..n])
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // Wait until setsid has run, then kill the harness's group: the escapee survives it.
    tokio::time::sleep(Duration::from_millis(200)).await;
    signal_group(s.pid, Signal::SIGKILL).unwrap();
    s.child.wait().await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        alive(escapee),
        "the escapee should have survived the group kill"
    );
    let adopted = adopted_children(&[]);
    assert!(
        adopted.contains(&escapee),
        "escapee {escapee} not adopted: {adopted:?}"
    );
    let killed = kill_adopted(&[], 8);
    assert!(killed.contains(&escapee));
    assert!(
        wait_gone(escapee).await,
        "escapee {escapee} survived teardown"
    );
}
