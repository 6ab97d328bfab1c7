//! Regression tests for the findings of the fuzz campaigns (issue 17; `fuzz/README.md`
//! lists them with the target and the input that found each).

use stapel_runner_protocol::session::{
    CloseReason, Input, Machine, Output, RunnerSession, SessionConfig,
};
use stapel_runner_protocol::wire::Hello;

/// `session_runner`: a `Connected` while connected is refused (`already_connected`); the
/// timers still run after that input, as after every input (and as on the hub), so no
/// deadline at or before `now` is left behind for the host to spin on.
#[test]
fn runner_refused_connect_runs_the_timers() {
    let mut runner = RunnerSession::new(Hello::new("p", "0.1.0"), SessionConfig::default());
    runner.handle_input(0, Input::Connected).unwrap();
    while runner.poll_output().is_some() {}
    assert_eq!(runner.poll_timeout(), Some(15_000));
    let err = runner.handle_input(201_552, Input::Connected).unwrap_err();
    assert_eq!(err.code(), "already_connected");
    // The dead-peer timer (45 s without bytes) was due: the refused input acted on it.
    let mut closed = false;
    while let Some(out) = runner.poll_output() {
        closed |= matches!(out, Output::Close(CloseReason::PeerTimeout));
    }
    assert!(closed, "the due dead-peer timer was not run");
    if let Some(next) = runner.poll_timeout() {
        assert!(next > 201_552, "deadline {next} is in the past");
    }
}
