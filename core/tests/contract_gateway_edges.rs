//! Gateway edge cases only reachable through Rust values (the JSON path validates them
//! away): unvalidated summaries, integers beyond 2^53 − 1, and abort codes.

use serde_json::{json, Value};
use stapel_runner_protocol::contract::{
    Catalog, ExecutionEvidence, ExecutionRequest, ExecutionSummary, Gateway, GatewayConfig,
    GatewayInput, GatewayOutput, GatewayResult, SandboxHandle, StringMap, ToolCall,
    ToolEventVisibility, ToolResult,
};
use stapel_runner_protocol::wire::{UsageSplit, MAX_SAFE_INTEGER};

fn catalog(visibility: &str) -> Catalog {
    Catalog::from_value(&json!({
        "profiles": [{"contract_version": "1.0", "profile_id": "p", "rein": "r",
                      "model": "m", "sandbox_profile": "s",
                      "tool_policy": {"allowed_tools": ["run_task"]}}],
        "reins": [{"rein_id": "r", "contract_version": "1.0", "tool_event_visibility": visibility}]
    }))
    .unwrap()
}

fn drain(gw: &mut Gateway) -> Vec<GatewayOutput> {
    let mut out = Vec::new();
    loop {
        match gw.poll_output() {
            None => return out,
            Some(o) => out.push(o),
        }
    }
}

/// Run a lifecycle with no tool calls and `summary`; return the result.
fn run_with_summary(summary: ExecutionSummary, end_ms: u64) -> GatewayResult {
    let mut gw = Gateway::new(GatewayConfig::new(catalog("complete")));
    let request = ExecutionRequest::new("p", "github.com/o/r", "t", "d");
    gw.handle_input(
        0,
        GatewayInput::Execute {
            request,
            inputs: StringMap::new(),
            tool_calls: vec![],
        },
    )
    .unwrap();
    drain(&mut gw);
    gw.handle_input(
        1,
        GatewayInput::SandboxCreated {
            sandbox: SandboxHandle::new("sb-1"),
        },
    )
    .unwrap();
    drain(&mut gw);
    gw.handle_input(
        2,
        GatewayInput::SessionStarted {
            session: StringMap::new(),
        },
    )
    .unwrap();
    drain(&mut gw);
    gw.handle_input(3, GatewayInput::SessionEnded { summary })
        .unwrap();
    drain(&mut gw);
    gw.handle_input(end_ms, GatewayInput::SandboxDestroyed)
        .unwrap();
    match drain(&mut gw).pop() {
        Some(GatewayOutput::Result(r)) => *r,
        other => panic!("no result: {other:?}"),
    }
}

fn reparses(result: &GatewayResult) {
    let back = GatewayResult::from_value(&result.to_value())
        .unwrap_or_else(|e| panic!("evidence does not parse ({}): {e}", e.code()));
    assert_eq!(&back, result);
    assert_eq!(
        ExecutionEvidence::from_value(&result.evidence.to_value()).unwrap(),
        result.evidence
    );
}

#[test]
fn complete_claim_without_count_is_downgraded() {
    let summary = ExecutionSummary {
        tool_event_visibility: ToolEventVisibility::Complete,
        tool_event_count: None,
        ..ExecutionSummary::default()
    };
    let r = run_with_summary(summary, 10);
    assert_eq!(
        r.evidence.tool_event_visibility,
        ToolEventVisibility::Unavailable
    );
    assert_eq!(r.evidence.tool_event_count, None);
    reparses(&r);
}

#[test]
fn unavailable_claim_drops_its_count() {
    let summary = ExecutionSummary {
        tool_event_visibility: ToolEventVisibility::Unavailable,
        tool_event_count: Some(7),
        ..ExecutionSummary::default()
    };
    let r = run_with_summary(summary, 10);
    assert_eq!(r.evidence.tool_event_count, None);
    reparses(&r);
}

#[test]
fn evidence_integers_saturate() {
    let summary = ExecutionSummary {
        tokens: Some(UsageSplit {
            cache_read: u64::MAX,
            cache_write: MAX_SAFE_INTEGER + 1,
            fresh_input: MAX_SAFE_INTEGER,
            output: 1,
            thinking: u64::MAX,
        }),
        duration_ms: Some(u64::MAX),
        tool_event_visibility: ToolEventVisibility::Partial,
        tool_event_count: Some(u64::MAX),
        ..ExecutionSummary::default()
    };
    let r = run_with_summary(summary, u64::MAX);
    let ev = &r.evidence;
    assert_eq!(ev.duration_ms, MAX_SAFE_INTEGER);
    assert_eq!(ev.rein_duration_ms, Some(MAX_SAFE_INTEGER));
    assert_eq!(ev.tool_event_count, Some(MAX_SAFE_INTEGER));
    assert_eq!(
        ev.tokens,
        Some(UsageSplit {
            cache_read: MAX_SAFE_INTEGER,
            cache_write: MAX_SAFE_INTEGER,
            fresh_input: MAX_SAFE_INTEGER,
            output: 1,
            thinking: MAX_SAFE_INTEGER,
        })
    );
    reparses(&r);
}

#[test]
fn empty_identifiers_from_rust_values_are_redacted_not_unparseable() {
    let summary = ExecutionSummary {
        resolved_model: Some(String::new()),
        commit: Some(String::new()),
        artifacts: Some(vec![String::new()]),
        ..ExecutionSummary::default()
    };
    let r = run_with_summary(summary, 10);
    assert_eq!(r.evidence.resolved_model.as_deref(), Some("[redacted]"));
    assert_eq!(r.evidence.artifacts, Some(vec!["[redacted]".to_owned()]));
    reparses(&r);

    // An empty profile ref is refused, and the evidence still parses.
    let mut gw = Gateway::new(GatewayConfig::new(catalog("complete")));
    gw.handle_input(
        0,
        GatewayInput::Execute {
            request: ExecutionRequest::new("", "", "", ""),
            inputs: StringMap::new(),
            tool_calls: vec![],
        },
    )
    .unwrap();
    let Some(GatewayOutput::Result(r)) = drain(&mut gw).pop() else {
        panic!("no result")
    };
    assert_eq!(r.evidence.harness_profile_ref, "[redacted]");
    reparses(&r);
}

#[test]
fn abort_code_is_checked_on_the_rust_path_too() {
    let mut gw = Gateway::new(GatewayConfig::new(catalog("complete")));
    gw.handle_input(
        0,
        GatewayInput::Execute {
            request: ExecutionRequest::new("p", "github.com/o/r", "t", "d"),
            inputs: StringMap::new(),
            tool_calls: vec![ToolCall::new("run_task")],
        },
    )
    .unwrap();
    drain(&mut gw);
    for bad in ["", "Cancelled", "free text", "x-y", &"a".repeat(65)] {
        let e = gw
            .handle_input(
                1,
                GatewayInput::Abort {
                    code: bad.to_owned(),
                },
            )
            .unwrap_err();
        assert_eq!(e.code(), "invalid_input", "{bad:?}");
        assert!(drain(&mut gw).is_empty());
        assert!(!gw.is_finished());
    }
    gw.handle_input(
        1,
        GatewayInput::Abort {
            code: "cancelled".into(),
        },
    )
    .unwrap();
    let Some(GatewayOutput::Result(r)) = drain(&mut gw).pop() else {
        panic!("no result")
    };
    assert_eq!(r.evidence.failure_code.as_deref(), Some("aborted"));
    assert_eq!(r.evidence.failure_reasons, vec!["cancelled".to_owned()]);
    reparses(&r);
}

#[test]
fn denial_clears_the_previous_output_and_messages_stay_out_of_evidence() {
    let mut gw = Gateway::new(GatewayConfig::new(catalog("complete")));
    gw.handle_input(
        0,
        GatewayInput::Execute {
            request: ExecutionRequest::new("p", "github.com/o/r", "t", "d"),
            inputs: StringMap::new(),
            tool_calls: vec![ToolCall::new("run_task"), ToolCall::new("rm_rf")],
        },
    )
    .unwrap();
    drain(&mut gw);
    gw.handle_input(
        1,
        GatewayInput::SandboxCreated {
            sandbox: SandboxHandle::new("sb-1"),
        },
    )
    .unwrap();
    drain(&mut gw);
    gw.handle_input(
        2,
        GatewayInput::SessionStarted {
            session: StringMap::new(),
        },
    )
    .unwrap();
    drain(&mut gw);
    gw.handle_input(
        3,
        GatewayInput::ToolDispatched {
            result: ToolResult::success(json!("first call's output")),
        },
    )
    .unwrap();
    drain(&mut gw);
    gw.handle_input(
        4,
        GatewayInput::SessionEndFailed {
            message: Some("rein crashed: secret-ish text".into()),
        },
    )
    .unwrap();
    drain(&mut gw);
    gw.handle_input(5, GatewayInput::SandboxDestroyed).unwrap();
    let Some(GatewayOutput::Result(r)) = drain(&mut gw).pop() else {
        panic!("no result")
    };
    assert_eq!(r.evidence.tool_calls.denied, 1);
    assert_eq!(r.tool_output, Value::Null);
    assert_eq!(
        r.tool_error.as_deref(),
        Some("rein crashed: secret-ish text")
    );
    assert_eq!(
        r.evidence.failure_stage.map(|s| s.as_str()),
        Some("execution")
    );
    assert_eq!(r.evidence.session_end.as_str(), "failed");
    assert!(!r.evidence.to_json().contains("rein crashed"));
    assert!(!r.evidence.to_json().contains("first call"));
}
