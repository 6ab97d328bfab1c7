//! Evidence hygiene and lifecycle invariants of the gateway, by property testing.
//!
//! A simulated host drives the gateway through random lifecycles (every failure stage,
//! random tool calls, allowed or not, successful or not). Marker strings are planted in
//! every content field of every input — title, description, rein inputs (keys and
//! values), tool-call ids, names of tools the policy does not list, arguments, session
//! maps, tool outputs and errors, every metadata object — and, as free text, in every
//! identifier field. The serialized evidence must contain no marker, while clean
//! identifiers must reach it (evidence still links to its records).

use proptest::prelude::*;
use serde_json::{json, Map, Value};
use stapel_runner_protocol::contract::{
    Catalog, ExecutionRequest, ExecutionSummary, Gateway, GatewayAction, GatewayConfig,
    GatewayInput, GatewayOutput, GatewayResult, Outcome, SandboxHandle, StringMap, ToolCall,
    ToolEventVisibility, ToolResult,
};
use stapel_runner_protocol::wire::UsageSplit;

fn catalog() -> Catalog {
    Catalog::from_value(&json!({
        "profiles": [{"contract_version": "1.0", "profile_id": "coder-default", "rein": "fake",
                      "model": "claude-sonnet-4-5", "sandbox_profile": "repo-rw",
                      "tool_policy": {"allowed_tools": ["run_task", "read_file"]},
                      "credential_refs": ["env:ANTHROPIC_API_KEY"]}],
        "reins": [{"rein_id": "fake", "contract_version": "1.0", "tool_event_visibility": "complete"}]
    }))
    .unwrap()
}

/// Where the lifecycle fails, if anywhere.
#[derive(Debug, Clone, Copy, PartialEq)]
enum FailAt {
    Nowhere,
    Resolution,
    SandboxCreate,
    SessionStart,
    ToolDispatch,
    SessionEnd,
    Teardown,
}

#[derive(Debug, Clone)]
struct Plan {
    token: String,
    fail_at: FailAt,
    /// (allowed, result ok) per call.
    calls: Vec<(bool, bool)>,
    /// Identifier fields get free text with a marker instead of a clean value.
    dirty_identifiers: bool,
}

fn plan() -> impl Strategy<Value = Plan> {
    (
        "[A-Z]{6}",
        prop_oneof![
            Just(FailAt::Nowhere),
            Just(FailAt::Resolution),
            Just(FailAt::SandboxCreate),
            Just(FailAt::SessionStart),
            Just(FailAt::ToolDispatch),
            Just(FailAt::SessionEnd),
            Just(FailAt::Teardown),
        ],
        prop::collection::vec(
            (prop::bool::weighted(0.85), prop::bool::weighted(0.8)),
            0..5,
        ),
        any::<bool>(),
    )
        .prop_map(|(token, fail_at, calls, dirty_identifiers)| Plan {
            token,
            fail_at,
            calls,
            dirty_identifiers,
        })
}

struct Markers {
    token: String,
    n: usize,
}

impl Markers {
    /// A fresh marker: free text (with spaces) containing the token.
    fn next(&mut self, what: &str) -> String {
        self.n += 1;
        format!("{what} says MK{}{}MK here", self.token, self.n)
    }
    /// A marker without whitespace (for keys and names).
    fn word(&mut self) -> String {
        self.n += 1;
        format!("MK{}{}MK", self.token, self.n)
    }
    fn needle(&self) -> String {
        format!("MK{}", self.token)
    }
}

fn metadata(m: &mut Markers) -> Map<String, Value> {
    let mut map = Map::new();
    map.insert(m.word(), json!(m.next("metadata value")));
    map.insert("nested".into(), json!({"deep": [m.next("nested")]}));
    map
}

fn string_map(m: &mut Markers) -> StringMap {
    let mut s = StringMap::new();
    s.insert(m.word(), m.next("map value"));
    s.insert("prompt".into(), m.next("prompt"));
    s
}

/// Run one lifecycle; returns the result, the actions seen, and the clean identifiers
/// that should appear in evidence.
fn drive(plan: &Plan) -> (GatewayResult, Vec<GatewayAction>, Vec<String>, String) {
    let mut m = Markers {
        token: plan.token.clone(),
        n: 0,
    };
    let mut clean = Vec::new();
    let mut ident = |m: &mut Markers, clean_value: &str| {
        if plan.dirty_identifiers {
            m.next("identifier")
        } else {
            clean.push(clean_value.to_owned());
            clean_value.to_owned()
        }
    };
    let profile_ref = if plan.fail_at == FailAt::Resolution {
        m.next("profile ref")
    } else {
        "coder-default".to_owned()
    };
    let mut request = ExecutionRequest::new(
        profile_ref,
        ident(&mut m, "github.com/acme/widgets"),
        m.next("title"),
        m.next("description"),
    );
    request.assignment_ref = Some(ident(&mut m, "asg-17"));
    request.role_ref = Some(ident(&mut m, "role:coder"));
    request.duty_ref = Some(ident(&mut m, "duty:tests"));
    request.goal_refs = vec![ident(&mut m, "goal:green")];
    request.resource_envelope_refs = vec![ident(&mut m, "env:small")];
    let tool_calls: Vec<ToolCall> = plan
        .calls
        .iter()
        .map(|(allowed, _)| {
            let mut c = ToolCall::new(if *allowed {
                "run_task".to_owned()
            } else {
                m.word()
            });
            c.call_id = Some(m.word());
            c.arguments.insert(m.word(), json!(m.next("argument")));
            c
        })
        .collect();
    let summary = ExecutionSummary {
        tokens: Some(UsageSplit {
            cache_read: 1,
            cache_write: 2,
            fresh_input: 3,
            output: 4,
            thinking: 5,
        }),
        duration_ms: Some(10),
        resolved_model: Some(ident(&mut m, "claude-sonnet-4-5-20250929")),
        commit: Some(ident(&mut m, "3f2a9c1")),
        artifacts: Some(vec![ident(&mut m, "artifact://diff.patch")]),
        tool_event_visibility: ToolEventVisibility::Partial,
        tool_event_count: Some(3),
        metadata: metadata(&mut m),
    };

    let mut gw = Gateway::new(GatewayConfig::new(catalog()));
    let mut now = 1000;
    let mut actions = Vec::new();
    gw.handle_input(
        now,
        GatewayInput::Execute {
            request,
            inputs: string_map(&mut m),
            tool_calls,
        },
    )
    .unwrap();
    let mut dispatch_index = 0usize;
    loop {
        now += 7;
        let out = gw.poll_output();
        let input = match out {
            GatewayOutput::Waiting => panic!("gateway waits without an outstanding action"),
            GatewayOutput::Result(r) => {
                assert_eq!(gw.poll_output(), GatewayOutput::Waiting);
                return (*r, actions, clean, m.needle());
            }
            GatewayOutput::Action(a) => {
                actions.push(a.clone());
                match a {
                    GatewayAction::CreateSandbox { .. } => {
                        if plan.fail_at == FailAt::SandboxCreate {
                            GatewayInput::SandboxCreateFailed
                        } else {
                            GatewayInput::SandboxCreated {
                                sandbox: SandboxHandle {
                                    sandbox_id: "sb-1".into(),
                                    metadata: metadata(&mut m),
                                },
                            }
                        }
                    }
                    GatewayAction::StartSession { .. } => {
                        if plan.fail_at == FailAt::SessionStart {
                            GatewayInput::SessionStartFailed
                        } else {
                            GatewayInput::SessionStarted {
                                session: string_map(&mut m),
                            }
                        }
                    }
                    GatewayAction::DispatchTool { .. } => {
                        dispatch_index += 1;
                        let ok = plan.calls[..]
                            .iter()
                            .filter(|(allowed, _)| *allowed)
                            .nth(dispatch_index - 1)
                            .map(|(_, ok)| *ok)
                            .unwrap_or(true);
                        if plan.fail_at == FailAt::ToolDispatch && dispatch_index == 1 {
                            GatewayInput::ToolDispatchFailed
                        } else {
                            let mut r = if ok {
                                ToolResult::success(json!({"text": m.next("tool output")}))
                            } else {
                                ToolResult::failure(m.next("tool error"))
                            };
                            r.metadata = metadata(&mut m);
                            GatewayInput::ToolDispatched { result: r }
                        }
                    }
                    GatewayAction::EndSession { .. } => {
                        if plan.fail_at == FailAt::SessionEnd {
                            GatewayInput::SessionEndFailed
                        } else {
                            GatewayInput::SessionEnded {
                                summary: summary.clone(),
                            }
                        }
                    }
                    GatewayAction::DestroySandbox { .. } => {
                        if plan.fail_at == FailAt::Teardown {
                            GatewayInput::SandboxDestroyFailed
                        } else {
                            GatewayInput::SandboxDestroyed
                        }
                    }
                    other => panic!("unknown action {other:?}"),
                }
            }
            other => panic!("unknown output {other:?}"),
        };
        assert_eq!(
            gw.poll_output(),
            GatewayOutput::Waiting,
            "one action at a time"
        );
        gw.handle_input(now, input).unwrap();
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn evidence_never_carries_content(plan in plan()) {
        let (result, _actions, clean, needle) = drive(&plan);
        let evidence = result.evidence.to_json();
        // The evidence JSON is itself a strict contract model and round-trips.
        let reparsed = GatewayResult::from_value(&result.to_value()).unwrap();
        prop_assert_eq!(&reparsed, &result);
        prop_assert!(!evidence.contains(&needle), "marker leaked into evidence: {evidence}");
        prop_assert!(!evidence.contains("says"), "free text leaked into evidence: {evidence}");
        for id in &clean {
            // Identifiers that are only set once execution proceeds far enough are
            // checked by the lifecycle property; request identifiers always appear.
            let request_level = ["github.com/acme/widgets", "asg-17", "role:coder", "duty:tests", "goal:green", "env:small"];
            if request_level.contains(&id.as_str()) {
                prop_assert!(evidence.contains(id.as_str()), "identifier {id} missing: {evidence}");
            }
        }
        if plan.dirty_identifiers {
            prop_assert!(!result.evidence.redacted_fields.is_empty());
        }
    }

    #[test]
    fn lifecycle_invariants(plan in plan()) {
        let (result, actions, _clean, _needle) = drive(&plan);
        let ev = &result.evidence;
        prop_assert_eq!(result.ok, ev.outcome == Outcome::Succeeded);
        let created = actions.iter().any(|a| matches!(a, GatewayAction::CreateSandbox { .. }));
        let destroys = actions.iter().filter(|a| matches!(a, GatewayAction::DestroySandbox { .. })).count();
        // Resolution before any sandbox; refused exactly when nothing was created.
        prop_assert_eq!(plan.fail_at == FailAt::Resolution, !created);
        prop_assert_eq!(ev.outcome == Outcome::Refused, !created);
        if !created {
            prop_assert!(actions.is_empty());
            prop_assert_eq!(ev.failure_stage.map(|s| s.as_str()), Some("resolution"));
        }
        // Once a sandbox exists, teardown is attempted exactly once on every path.
        let sandbox_exists = created && plan.fail_at != FailAt::SandboxCreate;
        prop_assert_eq!(destroys, usize::from(sandbox_exists));
        prop_assert_eq!(ev.sandbox_id.is_some(), sandbox_exists);
        // Failure stage naming.
        let unsuccessful = plan.calls.iter().any(|(allowed, ok)| !allowed || !ok);
        let expected_stage = match plan.fail_at {
            FailAt::Resolution => Some("resolution"),
            FailAt::SandboxCreate => Some("sandbox_create"),
            FailAt::SessionStart => Some("session_start"),
            FailAt::ToolDispatch if plan.calls.first().is_some_and(|c| c.0) => Some("execution"),
            _ if unsuccessful => Some("execution"),
            FailAt::SessionEnd => Some("session_end"),
            FailAt::Teardown => Some("teardown"),
            _ => None,
        };
        prop_assert_eq!(ev.failure_stage.map(|s| s.as_str()), expected_stage);
        prop_assert_eq!(ev.outcome == Outcome::Failed, expected_stage.is_some() && created);
        // Counts add up.
        let c = ev.tool_calls;
        prop_assert_eq!(c.requested, plan.calls.len() as u64);
        prop_assert_eq!(c.dispatched, c.succeeded + c.unsuccessful + c.dispatch_failed);
        if sandbox_exists && plan.fail_at != FailAt::SessionStart {
            prop_assert_eq!(c.requested, c.dispatched + c.denied + c.skipped);
        }
        // Duration comes from the host's clock only.
        prop_assert_eq!(ev.duration_ms, 7 * (actions.len() as u64));
    }
}
