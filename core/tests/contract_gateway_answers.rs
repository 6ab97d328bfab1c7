//! The gateway driven the way a binding drives it — every action answered with the
//! generic inputs (`answer` with the callback's value, `answer_invalid`, `action_failed`,
//! `abort`) — against an independent reference model of seed 001's lifecycle, written
//! here as straight-line code (no state machine), plus properties that need no model:
//!
//! * exactly one result, and it is the last output;
//! * at most one action is outstanding at a time;
//! * a sandbox the host created (a valid handle) is destroyed exactly once, with that
//!   handle; an invalid handle is discarded exactly once; nothing else is torn down;
//! * after the first failure only cleanup actions follow (`end_session`,
//!   `destroy_sandbox`, `discard_sandbox`);
//! * the evidence's failure stage and code are those of the first failing step.

use proptest::prelude::*;
use serde_json::{json, Value};
use stapel_runner_protocol::contract::{
    Catalog, ExecutionRequest, Gateway, GatewayAction, GatewayConfig, GatewayInput, GatewayOutput,
    GatewayResult, StringMap, ToolCall,
};

/// How the host answers one action.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Reply {
    /// `answer` with a valid value for the action.
    Ok,
    /// `answer` with a valid tool result that says `ok: false` (other actions: as `Ok`).
    Unsuccessful,
    /// `answer` with a value that is not the action's model.
    Invalid,
    /// `answer_invalid`.
    NotJson,
    /// `action_failed`.
    Raised,
    /// `abort`.
    Abort,
}

fn reply() -> impl Strategy<Value = Reply> {
    prop_oneof![
        6 => Just(Reply::Ok),
        1 => Just(Reply::Unsuccessful),
        1 => Just(Reply::Invalid),
        1 => Just(Reply::NotJson),
        1 => Just(Reply::Raised),
        1 => Just(Reply::Abort),
    ]
}

/// What the reference model expects.
#[derive(Debug, Default, PartialEq)]
struct Expected {
    actions: Vec<&'static str>,
    failure: Option<(&'static str, &'static str)>,
    session_end: &'static str,
    teardown: &'static str,
}

/// Seed 001's lifecycle as straight-line code. `calls[i]` is whether call `i`'s tool is
/// allowed; `replies` answers the actions in order.
fn model(calls: &[bool], replies: &[Reply]) -> Expected {
    let mut e = Expected {
        session_end: "not_attempted",
        teardown: "not_needed",
        ..Expected::default()
    };
    let mut next = replies.iter().copied();
    let fail = |e: &mut Expected, stage, code| {
        if e.failure.is_none() {
            e.failure = Some((stage, code));
        }
    };
    // create
    e.actions.push("create_sandbox");
    match next.next().unwrap_or(Reply::Ok) {
        Reply::Ok | Reply::Unsuccessful => {}
        Reply::Invalid | Reply::NotJson => {
            fail(&mut e, "sandbox_create", "aborted");
            e.teardown = "abandoned";
            e.actions.push("discard_sandbox");
            e.actions.push("result");
            return e;
        }
        Reply::Raised => {
            fail(&mut e, "sandbox_create", "sandbox_create_failed");
            e.actions.push("result");
            return e;
        }
        Reply::Abort => {
            fail(&mut e, "sandbox_create", "aborted");
            e.teardown = "abandoned";
            e.actions.push("result");
            return e;
        }
    }
    // start
    e.actions.push("start_session");
    let started = match next.next().unwrap_or(Reply::Ok) {
        Reply::Ok | Reply::Unsuccessful => true,
        Reply::Invalid | Reply::NotJson | Reply::Raised => {
            fail(&mut e, "session_start", "session_start_failed");
            false
        }
        Reply::Abort => {
            fail(&mut e, "session_start", "aborted");
            false
        }
    };
    if started {
        for &allowed in calls {
            if !allowed {
                fail(&mut e, "execution", "tool_not_allowed");
                break;
            }
            e.actions.push("dispatch_tool");
            let code = match next.next().unwrap_or(Reply::Ok) {
                Reply::Ok => continue,
                Reply::Unsuccessful => "rein_reported_failure",
                Reply::Invalid | Reply::NotJson | Reply::Raised => "tool_dispatch_failed",
                Reply::Abort => "aborted",
            };
            fail(&mut e, "execution", code);
            break;
        }
        e.actions.push("end_session");
        e.session_end = match next.next().unwrap_or(Reply::Ok) {
            Reply::Ok | Reply::Unsuccessful => "ended",
            Reply::Invalid | Reply::NotJson | Reply::Raised => {
                fail(&mut e, "session_end", "session_end_failed");
                "failed"
            }
            Reply::Abort => {
                fail(&mut e, "session_end", "aborted");
                "abandoned"
            }
        };
    }
    e.actions.push("destroy_sandbox");
    // Any `answer` value is a successful destroy (the callback returns nothing).
    e.teardown = match next.next().unwrap_or(Reply::Ok) {
        Reply::Ok | Reply::Unsuccessful | Reply::Invalid => "destroyed",
        Reply::NotJson | Reply::Raised => {
            fail(&mut e, "teardown", "teardown_failed");
            "failed"
        }
        Reply::Abort => {
            fail(&mut e, "teardown", "aborted");
            "abandoned"
        }
    };
    e.actions.push("result");
    e
}

fn catalog() -> Catalog {
    Catalog::from_value(&json!({
        "profiles": [{"contract_version": "1.0", "profile_id": "p", "rein": "r", "model": "m",
                      "sandbox_profile": "s", "tool_policy": {"allowed_tools": ["ok_tool"]}}],
        "reins": [{"rein_id": "r", "contract_version": "1.0", "tool_event_visibility": "complete"}],
    }))
    .unwrap()
}

/// The input a host sends for `reply` to `action`.
fn input(action: &GatewayAction, reply: Reply) -> GatewayInput {
    let answer = |value: Value| GatewayInput::Answer { value };
    match (reply, action) {
        (Reply::NotJson, _) => GatewayInput::AnswerInvalid {
            message: Some("not JSON".into()),
        },
        (Reply::Raised, _) => GatewayInput::ActionFailed {
            message: Some("raised".into()),
        },
        (Reply::Abort, _) => GatewayInput::Abort {
            code: "cancelled".into(),
        },
        (_, GatewayAction::CreateSandbox { .. }) if reply == Reply::Invalid => {
            answer(json!({"sandbox_id": 5}))
        }
        (_, GatewayAction::CreateSandbox { .. }) => answer(json!({"sandbox_id": "sb-9"})),
        (_, GatewayAction::StartSession { .. }) if reply == Reply::Invalid => {
            answer(json!({"k": 1}))
        }
        (_, GatewayAction::StartSession { .. }) => answer(json!({"k": "v"})),
        (Reply::Invalid, GatewayAction::DispatchTool { .. }) => answer(json!({"ok": "yes"})),
        (Reply::Unsuccessful, GatewayAction::DispatchTool { .. }) => {
            answer(json!({"ok": false, "error": "no"}))
        }
        (_, GatewayAction::DispatchTool { .. }) => answer(json!({"ok": true, "output": 1})),
        (Reply::Invalid, GatewayAction::EndSession { .. }) => answer(json!({"nonsense": 1})),
        (_, GatewayAction::EndSession { .. }) => answer(json!({"duration_ms": 3})),
        (Reply::Invalid, _) => answer(json!(["anything"])),
        _ => answer(Value::Null),
    }
}

fn name(action: &GatewayAction) -> &'static str {
    match action {
        GatewayAction::CreateSandbox { .. } => "create_sandbox",
        GatewayAction::StartSession { .. } => "start_session",
        GatewayAction::DispatchTool { .. } => "dispatch_tool",
        GatewayAction::EndSession { .. } => "end_session",
        GatewayAction::DestroySandbox { .. } => "destroy_sandbox",
        GatewayAction::DiscardSandbox => "discard_sandbox",
        _ => "unknown",
    }
}

/// Drive a gateway; return the action names (plus `result`), the destroyed handles and
/// the result.
fn drive(calls: &[bool], replies: &[Reply]) -> (Vec<&'static str>, Vec<String>, GatewayResult) {
    let mut gw = Gateway::new(GatewayConfig::new(catalog()));
    let tool_calls = calls
        .iter()
        .map(|&ok| ToolCall::new(if ok { "ok_tool" } else { "other_tool" }))
        .collect();
    gw.handle_input(
        0,
        GatewayInput::Execute {
            request: ExecutionRequest::new("p", "github.com/o/r", "t", "d"),
            inputs: StringMap::new(),
            tool_calls,
        },
    )
    .unwrap();
    let mut names = Vec::new();
    let mut destroyed = Vec::new();
    let mut replies = replies.iter().copied();
    let mut now = 0;
    loop {
        now += 1;
        let out = gw.poll_output().expect("an output after every input");
        assert_eq!(gw.poll_output(), None, "one output at a time");
        assert_eq!(gw.poll_timeout(), None);
        match out {
            GatewayOutput::Result(r) => {
                names.push("result");
                assert!(gw.is_finished());
                assert!(gw
                    .handle_input(now, GatewayInput::Answer { value: Value::Null })
                    .is_err());
                assert_eq!(gw.poll_output(), None);
                return (names, destroyed, *r);
            }
            GatewayOutput::Action(action) => {
                names.push(name(&action));
                if let GatewayAction::DestroySandbox { sandbox } = &action {
                    destroyed.push(sandbox.sandbox_id.clone());
                }
                let reply = replies.next().unwrap_or(Reply::Ok);
                gw.handle_input(now, input(&action, reply)).unwrap();
            }
            other => panic!("unknown output {other:?}"),
        }
        assert!(names.len() < 32, "the gateway does not finish");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn generic_answers_follow_the_reference_model(
        calls in prop::collection::vec(prop::bool::weighted(0.85), 0..4),
        replies in prop::collection::vec(reply(), 10),
    ) {
        let want = model(&calls, &replies);
        let (names, destroyed, result) = drive(&calls, &replies);
        prop_assert_eq!(&names, &want.actions);
        let ev = &result.evidence;
        let got_failure = ev.failure_stage.map(|s| {
            (serde_json::to_value(s).unwrap(), ev.failure_code.clone().unwrap_or_default())
        });
        let want_failure = want.failure.map(|(s, c)| (json!(s), c.to_owned()));
        prop_assert_eq!(got_failure, want_failure);
        prop_assert_eq!(result.ok, want.failure.is_none());
        prop_assert_eq!(serde_json::to_value(ev.session_end).unwrap(), json!(want.session_end));
        prop_assert_eq!(serde_json::to_value(ev.teardown).unwrap(), json!(want.teardown));

        // Exactly one result, last.
        prop_assert_eq!(names.iter().filter(|n| **n == "result").count(), 1);
        prop_assert_eq!(names.last().copied(), Some("result"));
        // A valid handle is destroyed exactly once, with that handle; an invalid one is
        // discarded exactly once; nothing else is torn down.
        let created_valid = names.contains(&"start_session")
            || (names.contains(&"destroy_sandbox") && !names.contains(&"discard_sandbox"));
        let discards = names.iter().filter(|n| **n == "discard_sandbox").count();
        if created_valid {
            prop_assert_eq!(destroyed, vec!["sb-9".to_owned()]);
            prop_assert_eq!(discards, 0);
        } else {
            prop_assert!(destroyed.is_empty());
            prop_assert!(discards <= 1);
        }
        // After the first failing reply (or a denied call), only cleanup follows.
        if let Some(first_bad) = first_failure_index(&names, &calls, &replies) {
            for n in names.iter().skip(first_bad + 1) {
                prop_assert!(
                    matches!(*n, "end_session" | "destroy_sandbox" | "discard_sandbox" | "result"),
                    "{} after a failure in {:?}", n, names
                );
            }
        }
    }
}

/// Index in `names` of the action whose answer was the first failure (for a denied call:
/// the last action before the denial), computed from the replies alone.
fn first_failure_index(names: &[&str], calls: &[bool], replies: &[Reply]) -> Option<usize> {
    let mut call = 0;
    for (i, n) in names.iter().enumerate() {
        let reply = replies.get(i).copied().unwrap_or(Reply::Ok);
        let bad = match *n {
            "dispatch_tool" => {
                call += 1;
                reply != Reply::Ok
            }
            "destroy_sandbox" | "discard_sandbox" | "result" => return None,
            _ => !matches!(reply, Reply::Ok | Reply::Unsuccessful),
        };
        if bad {
            return Some(i);
        }
        // A denied next call fails right after this action's answer.
        let starts_calls = *n == "start_session" || *n == "dispatch_tool";
        if starts_calls && calls.get(call) == Some(&false) {
            return Some(i);
        }
    }
    None
}
