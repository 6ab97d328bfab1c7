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

/// Abuse test (`abuse_memory_bound`): a harness event nested at the decoders' limit was
/// re-emitted one level deeper, as a stream line the runner's own reader (and every
/// consumer with the same bound) refuses. A harness message may now nest 124 levels
/// (`MAX_DEPTH - 3`); deeper is a protocol violation, and every line the runner writes
/// parses again.
#[test]
fn harness_content_is_refused_before_it_cannot_be_re_emitted() {
    use serde_json::json;
    use stapel_runner_protocol::json::MAX_DEPTH;
    use stapel_runner_protocol::local::{Input, LocalConfig, LocalRun, Output, StreamMessage};

    let run_with = |levels: usize| {
        let mut run = LocalRun::new(LocalConfig::default()).unwrap();
        let prepare = json!({"schema": "paperclip.prp.command.v1", "commandId": "c1", "controllerSeq": 1,
            "type": "run.prepare", "issuedAt": "t", "payload": {}});
        run.handle_input(
            0,
            Input::ControllerBytes(format!("{prepare}\n").into_bytes()),
        )
        .unwrap();
        run.handle_input(0, Input::HarnessSpawned { pid: 7 })
            .unwrap();
        let ready = json!({"schema": "paperclip.fake_harness.message.v1", "messageSeq": 1, "type": "ready", "payload": {}});
        run.handle_input(0, Input::HarnessStdout(format!("{ready}\n").into_bytes()))
            .unwrap();
        while run.poll_output().is_some() {}
        // Message (1), payload (2), event payload (3), then arrays.
        let arrays = levels - 3;
        let deep = format!("{}1{}", "[".repeat(arrays), "]".repeat(arrays));
        let line = format!(
            r#"{{"schema":"paperclip.fake_harness.message.v1","messageSeq":2,"type":"event","payload":{{"eventType":"item.delta","turnId":"t1","itemId":"i1","payload":{{"deep":{deep}}}}}}}"#
        );
        run.handle_input(1, Input::HarnessStdout(format!("{line}\n").into_bytes()))
            .unwrap();
        let mut codes = Vec::new();
        while let Some(out) = run.poll_output() {
            if let Output::ToController(l) = out {
                let msg = StreamMessage::parse(&l).expect("every line the runner writes parses");
                if let StreamMessage::Event(e) = msg {
                    codes.push(e["eventType"].as_str().unwrap_or_default().to_owned());
                }
            }
        }
        codes
    };
    assert_eq!(run_with(MAX_DEPTH - 3), ["item.delta"]);
    assert_eq!(run_with(MAX_DEPTH - 2), ["runner.diagnostic"]);
}
