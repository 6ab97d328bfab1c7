//! Evidence hygiene and lifecycle invariants of the gateway, by property testing.
//!
//! A simulated host drives the gateway through random lifecycles (every failure stage,
//! random tool calls — allowed or not, successful or not —, random aborts). Markers are
//! planted in **every** field of every input, half of the cases through the JSON input
//! path (`GatewayInput::from_value`) and half as Rust values:
//!
//! * the catalog: profile id, rein id, model, sandbox profile, allowed tool names,
//!   credential refs, profile and rein metadata;
//! * the request: every identifier (`harness_profile_ref`, `repository`, the correlation
//!   refs) and every content field (title, description, rein inputs);
//! * the tool calls (ids, names of tools the policy does not list, arguments), the
//!   sandbox handle (`sandbox_id`, metadata), the session map, tool outputs and errors,
//!   `*_failed` messages, and the summary (`resolved_model`, `commit`, `artifacts`,
//!   metadata).
//!
//! Three kinds of marker:
//!
//! * **free text** (`… says MF<tok><n>Z here`) — must never appear in evidence;
//! * **credential-shaped** (`hf_…`, `npm_…`, `pypi-…`, `sk-ant-…`, `ghp_…`,
//!   `github_pat_…`, `xoxb-…`, `AKIA…`, a JWT, a random-looking token, a URL with a
//!   password or a token in its query, a `Bearer` header) carrying `MC<tok><n>Z` — must
//!   never appear in evidence, even where the value is otherwise well-shaped;
//! * **single words** (`MW<tok><n>Z`) — a well-shaped identifier. Planted in an
//!   identifier field it links evidence to its record, so it *may* appear in evidence,
//!   but only in the evidence field it was planted in; planted anywhere else (content,
//!   metadata, credential refs, sandbox profile, call ids, denied tool names) it must
//!   never appear.

use proptest::prelude::*;
use serde_json::{json, Map, Value};
use stapel_runner_protocol::contract::{
    Catalog, ExecutionRequest, ExecutionSummary, Gateway, GatewayAction, GatewayConfig,
    GatewayInput, GatewayOutput, GatewayResult, Outcome, SandboxHandle, SessionEndStatus,
    StringMap, TeardownStatus, ToolCall, ToolEventVisibility, ToolResult,
};
use stapel_runner_protocol::wire::UsageSplit;

/// What is planted in one identifier slot.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Mark {
    Clean,
    FreeText,
    Word,
    Credential(u8),
}

const CREDENTIAL_KINDS: u8 = 13;

fn mark() -> impl Strategy<Value = Mark> {
    prop_oneof![
        4 => Just(Mark::Clean),
        2 => Just(Mark::FreeText),
        3 => Just(Mark::Word),
        3 => (0..CREDENTIAL_KINDS).prop_map(Mark::Credential),
    ]
}

/// A mark for a catalog slot of a catalog that must resolve: no credential material.
fn safe_mark() -> impl Strategy<Value = Mark> {
    prop_oneof![
        4 => Just(Mark::Clean),
        2 => Just(Mark::FreeText),
        3 => Just(Mark::Word),
    ]
}

/// Where the host makes the lifecycle fail, if anywhere.
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
    /// Abort instead of answering the n-th action (0-based), if any.
    abort_at: Option<usize>,
    /// (tool: 0 = run_task, 1 = the marked allowed tool, 2 = a tool the policy does not
    /// list; result ok) per call.
    calls: Vec<(u8, bool)>,
    /// Drive through `GatewayInput::from_value` instead of Rust values.
    json: bool,
    /// Identifier slots: repository, assignment, role, duty, goal×2, envelope, sandbox,
    /// resolved model, commit, artifact×2, profile id, rein id, model, allowed tool.
    ids: Vec<Mark>,
    /// Catalog slots that are never evidence: sandbox profile, credential ref, profile
    /// metadata, rein metadata.
    catalog: Vec<Mark>,
}

fn plan() -> impl Strategy<Value = Plan> {
    let catalog_dirty = any::<bool>();
    (
        "[A-Z]{6}",
        prop_oneof![
            3 => Just(FailAt::Nowhere),
            1 => Just(FailAt::Resolution),
            1 => Just(FailAt::SandboxCreate),
            1 => Just(FailAt::SessionStart),
            1 => Just(FailAt::ToolDispatch),
            1 => Just(FailAt::SessionEnd),
            1 => Just(FailAt::Teardown),
        ],
        proptest::option::weighted(0.25, 0usize..7),
        prop::collection::vec(
            (
                prop_oneof![4 => Just(0u8), 2 => Just(1u8), 1 => Just(2u8)],
                prop::bool::weighted(0.85),
            ),
            0..5,
        ),
        any::<bool>(),
        prop::collection::vec(mark(), 12),
        catalog_dirty.prop_flat_map(|dirty| {
            if dirty {
                (
                    prop::collection::vec(mark(), 4),
                    prop::collection::vec(mark(), 4),
                )
                    .boxed()
            } else {
                (
                    prop::collection::vec(safe_mark(), 4),
                    prop::collection::vec(safe_mark(), 4),
                )
                    .boxed()
            }
        }),
    )
        .prop_map(
            |(token, fail_at, abort_at, calls, json, mut ids, (catalog_ids, catalog))| {
                ids.extend(catalog_ids);
                Plan {
                    token,
                    fail_at,
                    abort_at,
                    calls,
                    json,
                    ids,
                    catalog,
                }
            },
        )
}

/// Planted markers: the needle and, for a word planted in an identifier field, the one
/// evidence field it may appear in.
struct Markers {
    token: String,
    n: usize,
    planted: Vec<(String, Option<&'static str>)>,
}

impl Markers {
    fn needle(&mut self, kind: char, field: Option<&'static str>) -> String {
        self.n += 1;
        let needle = format!("M{kind}{}{}Z", self.token, self.n);
        self.planted.push((needle.clone(), field));
        needle
    }

    /// Free text (with spaces) containing a fresh needle.
    fn free(&mut self, what: &str) -> String {
        format!("{what} says {} here", self.needle('F', None))
    }

    /// A single well-shaped word; may appear in evidence field `field` only.
    fn word(&mut self, field: Option<&'static str>) -> String {
        self.needle('W', field)
    }

    /// Credential material of kind `k`, carrying a fresh needle.
    fn credential(&mut self, k: u8) -> String {
        let n = self.needle('C', None);
        match k % CREDENTIAL_KINDS {
            0 => format!("hf_{n}abcdefghijklmnop"),
            1 => format!("npm_{n}AbCdEfGhIjKlMnOp0123456789"),
            2 => format!("pypi-AgEIcHlwaS5vcmc{n}"),
            3 => format!("sk-ant-api03-{n}xyz"),
            4 => format!("ghp_{n}abcdefghijklmnopqrstuvwxyz"),
            5 => format!("github_pat_11{n}abcdefghijklmnopqrst"),
            6 => format!("xoxb-123456789-{n}"),
            7 => format!("AKIA{n}ABCDEFGHIJKLMNOP"),
            8 => format!("eyJhbGciOiJIUzI1NiJ9.eyJ{n}fQ.c2lnbmF0dXJl"),
            9 => format!("q7fZ2kLmN8pR4sT1vW6xY9aB{n}"),
            10 => format!("https://bot:{n}@github.com/acme/widgets.git"),
            11 => format!("https://github.com/acme/widgets.git?access_token={n}"),
            _ => format!("Bearer {n}abcdefgh"),
        }
    }

    /// The value of an identifier slot planted with `m` (`clean` when clean).
    fn ident(&mut self, m: Mark, field: Option<&'static str>, clean: &str) -> String {
        match m {
            Mark::Clean => clean.to_owned(),
            Mark::FreeText => self.free("identifier"),
            Mark::Word => self.word(field),
            Mark::Credential(k) => self.credential(k),
        }
    }

    /// A metadata object with every kind of marker (credentials only when allowed: the
    /// JSON path rejects them in runtime metadata, by design).
    fn metadata(&mut self, credentials: bool) -> Map<String, Value> {
        let mut map = Map::new();
        map.insert(self.word(None), json!(self.free("metadata value")));
        map.insert(
            "nested".into(),
            json!({"deep": [self.free("nested"), self.word(None)]}),
        );
        if credentials {
            map.insert("note".into(), json!(self.credential(self.n as u8)));
        }
        map
    }

    /// Content: free text, a word and a credential.
    fn content(&mut self, what: &str) -> String {
        let f = self.free(what);
        let w = self.word(None);
        let c = self.credential(self.n as u8);
        format!("{f} {w} {c}")
    }

    fn string_map(&mut self) -> StringMap {
        let mut s = StringMap::new();
        s.insert(self.word(None), self.content("map value"));
        s.insert("prompt".into(), self.content("prompt"));
        s
    }
}

struct Run {
    result: GatewayResult,
    actions: Vec<GatewayAction>,
    /// Inputs the host reported, by type.
    reported: Vec<&'static str>,
    /// The stage of the first failure the host caused or the plan implies.
    first_failure: Option<&'static str>,
    /// The stage that was aborted, if any.
    aborted: Option<&'static str>,
    planted: Vec<(String, Option<&'static str>)>,
    end_ms: u64,
    clean_request_ids: Vec<String>,
}

fn note(first: &mut Option<&'static str>, stage: &'static str) {
    if first.is_none() {
        *first = Some(stage);
    }
}

fn feed(gw: &mut Gateway, now: u64, input: GatewayInput, json_value: Value, via_json: bool) {
    let input = if via_json {
        GatewayInput::from_value(&json_value)
            .unwrap_or_else(|e| panic!("JSON input rejected ({}): {e}: {json_value}", e.code()))
    } else {
        input
    };
    gw.handle_input(now, input).unwrap();
}

fn map_value(m: &StringMap) -> Value {
    Value::Object(
        m.iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect(),
    )
}

fn drive(plan: &Plan) -> Run {
    let mut m = Markers {
        token: plan.token.clone(),
        n: 0,
        planted: Vec::new(),
    };
    let id = |i: usize| plan.ids[i];
    // Catalog.
    let profile_id = m.ident(id(12), Some("harness_profile_ref"), "coder-default");
    let rein_id = m.ident(id(13), Some("rein_id"), "fake-rein");
    let model = m.ident(id(14), Some("model"), "claude-sonnet-4-5");
    let marked_tool = m.ident(id(15), Some("tools_used"), "read_file");
    let sandbox_profile = m.ident(plan.catalog[0], None, "repo-rw");
    let credential_ref = match plan.catalog[1] {
        Mark::Clean => "env:ANTHROPIC_API_KEY".to_owned(),
        Mark::Word => format!("env:{}", m.word(None)),
        other => m.ident(other, None, ""),
    };
    let mut profile_meta = Map::new();
    if plan.catalog[2] != Mark::Clean {
        let v = m.ident(plan.catalog[2], None, "");
        profile_meta.insert(m.word(None), json!(v));
        profile_meta.insert("description".into(), json!(m.free("profile")));
    }
    let mut rein_meta = Map::new();
    if plan.catalog[3] != Mark::Clean {
        let v = m.ident(plan.catalog[3], None, "");
        rein_meta.insert(m.word(None), json!({"v": v}));
    }
    let catalog = Catalog::from_value(&json!({
        "profiles": [{"contract_version": "1.0", "profile_id": profile_id, "rein": rein_id,
                      "model": model, "sandbox_profile": sandbox_profile,
                      "tool_policy": {"allowed_tools": ["run_task", marked_tool]},
                      "credential_refs": [credential_ref], "metadata": profile_meta}],
        "reins": [{"rein_id": rein_id, "contract_version": "1.0",
                   "tool_event_visibility": "complete", "metadata": rein_meta}]
    }))
    .unwrap();

    // Request.
    let mut clean_request_ids = Vec::new();
    let mut rid = |m: &mut Markers, i: usize, field: &'static str, clean: &str| {
        let v = m.ident(id(i), Some(field), clean);
        if id(i) == Mark::Clean {
            clean_request_ids.push(clean.to_owned());
        }
        v
    };
    let profile_ref = if plan.fail_at == FailAt::Resolution {
        m.word(Some("harness_profile_ref"))
    } else {
        profile_id.clone()
    };
    let mut request = ExecutionRequest::new(
        profile_ref,
        rid(&mut m, 0, "repository", "github.com/acme/widgets"),
        m.content("title"),
        m.content("description"),
    );
    request.assignment_ref = Some(rid(&mut m, 1, "assignment_ref", "asg-17"));
    request.role_ref = Some(rid(&mut m, 2, "role_ref", "role:coder"));
    request.duty_ref = Some(rid(&mut m, 3, "duty_ref", "duty:tests"));
    request.goal_refs = vec![
        rid(&mut m, 4, "goal_refs", "goal:green"),
        rid(&mut m, 5, "goal_refs", "goal:fast"),
    ];
    request.resource_envelope_refs = vec![rid(&mut m, 6, "resource_envelope_refs", "env:small")];
    let tool_calls: Vec<ToolCall> = plan
        .calls
        .iter()
        .map(|(tool, _)| {
            let mut c = ToolCall::new(match tool {
                0 => "run_task".to_owned(),
                1 => marked_tool.clone(),
                _ => m.word(None),
            });
            c.call_id = Some(m.word(None));
            c.arguments
                .insert(m.word(None), json!(m.content("argument")));
            c
        })
        .collect();
    let inputs = m.string_map();
    let runtime_credentials = !plan.json;
    let summary = ExecutionSummary {
        tokens: Some(UsageSplit {
            cache_read: 1,
            cache_write: 2,
            fresh_input: 3,
            output: 4,
            thinking: 5,
        }),
        duration_ms: Some(10),
        resolved_model: Some(m.ident(id(8), Some("resolved_model"), "claude-sonnet-4-5-20250929")),
        commit: Some(m.ident(id(9), Some("commit"), "3f2a9c1")),
        artifacts: Some(vec![
            m.ident(id(10), Some("artifacts"), "artifact://diff.patch"),
            m.ident(id(11), Some("artifacts"), "out/report.html"),
        ]),
        tool_event_visibility: ToolEventVisibility::Partial,
        tool_event_count: Some(3),
        metadata: m.metadata(runtime_credentials),
    };
    let sandbox = SandboxHandle {
        sandbox_id: m.ident(id(7), Some("sandbox_id"), "sb-1"),
        metadata: m.metadata(runtime_credentials),
    };

    let mut gw = Gateway::new(GatewayConfig::new(catalog));
    let mut now = 1000;
    let mut actions = Vec::new();
    let mut reported = Vec::new();
    let mut first_failure: Option<&'static str> = None;
    let mut aborted = None;
    let execute_json = json!({
        "type": "execute", "request": request.to_value(), "inputs": map_value(&inputs),
        "tool_calls": tool_calls.iter().map(ToolCall::to_value).collect::<Vec<_>>(),
    });
    feed(
        &mut gw,
        now,
        GatewayInput::Execute {
            request,
            inputs,
            tool_calls,
        },
        execute_json,
        plan.json,
    );
    let mut next_call = 0usize;
    let mut dispatch_index = 0usize;
    // After a session start or a successful result, the gateway moves to the next call:
    // a denied one fails the execution stage.
    let advance = |next_call: usize, first_failure: &mut Option<&'static str>| {
        if plan
            .calls
            .get(next_call)
            .is_some_and(|(tool, _)| *tool == 2)
        {
            note(first_failure, "execution");
        }
    };
    loop {
        now += 7;
        let Some(out) = gw.poll_output() else {
            panic!("gateway waits without an outstanding action")
        };
        let (input, value): (GatewayInput, Value) = match out {
            GatewayOutput::Result(r) => {
                assert_eq!(gw.poll_output(), None);
                if gw.handle_input(now, GatewayInput::SandboxDestroyed).is_ok() {
                    panic!("input accepted after the result");
                }
                return Run {
                    result: *r,
                    actions,
                    reported,
                    first_failure,
                    aborted,
                    planted: m.planted,
                    end_ms: now - 7,
                    clean_request_ids,
                };
            }
            GatewayOutput::Action(a) => {
                let index = actions.len();
                actions.push(a.clone());
                let stage = match &a {
                    GatewayAction::CreateSandbox { .. } => "sandbox_create",
                    GatewayAction::StartSession { .. } => "session_start",
                    GatewayAction::DispatchTool { .. } => "execution",
                    GatewayAction::EndSession { .. } => "session_end",
                    GatewayAction::DestroySandbox { .. } => "teardown",
                    other => panic!("unknown action {other:?}"),
                };
                if plan.abort_at == Some(index) {
                    aborted = Some(stage);
                    note(&mut first_failure, stage);
                    let code = "deadline_exceeded".to_owned();
                    (
                        GatewayInput::Abort { code: code.clone() },
                        json!({"type": "abort", "code": code}),
                    )
                } else {
                    let msg = Some(m.content("host failure message"));
                    match a {
                        GatewayAction::CreateSandbox { .. } => {
                            if plan.fail_at == FailAt::SandboxCreate {
                                note(&mut first_failure, "sandbox_create");
                                (
                                    GatewayInput::SandboxCreateFailed {
                                        message: msg.clone(),
                                    },
                                    json!({"type": "sandbox_create_failed", "message": msg}),
                                )
                            } else {
                                (
                                    GatewayInput::SandboxCreated {
                                        sandbox: sandbox.clone(),
                                    },
                                    json!({"type": "sandbox_created", "sandbox": sandbox.to_value()}),
                                )
                            }
                        }
                        GatewayAction::StartSession { .. } => {
                            if plan.fail_at == FailAt::SessionStart {
                                note(&mut first_failure, "session_start");
                                (
                                    GatewayInput::SessionStartFailed {
                                        message: msg.clone(),
                                    },
                                    json!({"type": "session_start_failed", "message": msg}),
                                )
                            } else {
                                advance(next_call, &mut first_failure);
                                let session = m.string_map();
                                let v = json!({"type": "session_started", "session": map_value(&session)});
                                (GatewayInput::SessionStarted { session }, v)
                            }
                        }
                        GatewayAction::DispatchTool { .. } => {
                            dispatch_index += 1;
                            let ok = plan.calls[next_call].1;
                            next_call += 1;
                            if plan.fail_at == FailAt::ToolDispatch && dispatch_index == 1 {
                                note(&mut first_failure, "execution");
                                (
                                    GatewayInput::ToolDispatchFailed {
                                        message: msg.clone(),
                                    },
                                    json!({"type": "tool_dispatch_failed", "message": msg}),
                                )
                            } else {
                                let mut r = if ok {
                                    advance(next_call, &mut first_failure);
                                    ToolResult::success(json!({"text": m.content("tool output")}))
                                } else {
                                    note(&mut first_failure, "execution");
                                    ToolResult::failure(m.content("tool error"))
                                };
                                r.metadata = m.metadata(runtime_credentials);
                                let v = json!({"type": "tool_dispatched", "result": r.to_value()});
                                (GatewayInput::ToolDispatched { result: r }, v)
                            }
                        }
                        GatewayAction::EndSession { .. } => {
                            if plan.fail_at == FailAt::SessionEnd {
                                note(&mut first_failure, "session_end");
                                (
                                    GatewayInput::SessionEndFailed {
                                        message: msg.clone(),
                                    },
                                    json!({"type": "session_end_failed", "message": msg}),
                                )
                            } else {
                                (
                                    GatewayInput::SessionEnded {
                                        summary: summary.clone(),
                                    },
                                    json!({"type": "session_ended", "summary": summary.to_value()}),
                                )
                            }
                        }
                        GatewayAction::DestroySandbox { .. } => {
                            if plan.fail_at == FailAt::Teardown {
                                note(&mut first_failure, "teardown");
                                (
                                    GatewayInput::SandboxDestroyFailed {
                                        message: msg.clone(),
                                    },
                                    json!({"type": "sandbox_destroy_failed", "message": msg}),
                                )
                            } else {
                                (
                                    GatewayInput::SandboxDestroyed,
                                    json!({"type": "sandbox_destroyed"}),
                                )
                            }
                        }
                        other => panic!("unknown action {other:?}"),
                    }
                }
            }
            other => panic!("unknown output {other:?}"),
        };
        assert_eq!(gw.poll_output(), None, "one action at a time");
        reported.push(input.type_name());
        feed(&mut gw, now, input, value, plan.json);
    }
}

/// The JSON text of each top-level evidence field.
fn evidence_fields(result: &GatewayResult) -> Vec<(String, String)> {
    match result.evidence.to_value() {
        Value::Object(m) => m.into_iter().map(|(k, v)| (k, v.to_string())).collect(),
        other => panic!("evidence is not an object: {other}"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn evidence_never_carries_content(plan in plan()) {
        let run = drive(&plan);
        let result = &run.result;
        let evidence = result.evidence.to_json();
        // The evidence JSON is itself a strict contract model and round-trips.
        let reparsed = GatewayResult::from_value(&result.to_value()).unwrap();
        prop_assert_eq!(&reparsed, result);
        prop_assert!(!evidence.contains(" says "), "free text leaked into evidence: {evidence}");
        let fields = evidence_fields(result);
        for (needle, allowed) in &run.planted {
            match allowed {
                None => prop_assert!(!evidence.contains(needle.as_str()),
                    "marker {needle} leaked into evidence: {evidence}"),
                Some(field) => {
                    for (name, text) in &fields {
                        if name != field {
                            prop_assert!(!text.contains(needle.as_str()),
                                "identifier {needle} planted in {field} appears in {name}: {evidence}");
                        }
                    }
                }
            }
        }
        // Clean request identifiers always reach evidence: it links to its records.
        for id in &run.clean_request_ids {
            prop_assert!(evidence.contains(id.as_str()), "identifier {id} missing: {evidence}");
        }
        // Anything redacted is named.
        if evidence.contains("[redacted]") {
            prop_assert!(!result.evidence.redacted_fields.is_empty());
        }
    }

    #[test]
    fn lifecycle_invariants(plan in plan()) {
        let run = drive(&plan);
        let ev = &run.result.evidence;
        let has = |t: &str| run.reported.contains(&t);
        prop_assert_eq!(run.result.ok, ev.outcome == Outcome::Succeeded);
        let created = run.actions.iter().any(|a| matches!(a, GatewayAction::CreateSandbox { .. }));
        let destroys = run.actions.iter().filter(|a| matches!(a, GatewayAction::DestroySandbox { .. })).count();
        let ends = run.actions.iter().filter(|a| matches!(a, GatewayAction::EndSession { .. })).count();
        // Resolution before any sandbox; refused exactly when nothing was created.
        prop_assert_eq!(ev.outcome == Outcome::Refused, !created);
        if !created {
            prop_assert!(run.actions.is_empty());
            prop_assert_eq!(ev.failure_stage.map(|s| s.as_str()), Some("resolution"));
            prop_assert_eq!(ev.session_end, SessionEndStatus::NotAttempted);
            prop_assert_eq!(ev.teardown, TeardownStatus::NotNeeded);
            if plan.fail_at != FailAt::Resolution {
                // Only credential material in the catalog refuses a known profile.
                prop_assert_eq!(ev.failure_code.as_deref(), Some("unsafe"));
            }
        }
        if plan.fail_at == FailAt::Resolution {
            prop_assert!(!created);
        }
        // Once a sandbox exists, teardown is attempted exactly once on every path.
        let sandbox_exists = has("sandbox_created");
        prop_assert_eq!(destroys, usize::from(sandbox_exists));
        prop_assert_eq!(ev.sandbox_id.is_some(), sandbox_exists);
        let expected_teardown = if run.aborted == Some("sandbox_create") || run.aborted == Some("teardown") {
            TeardownStatus::Abandoned
        } else if has("sandbox_destroyed") {
            TeardownStatus::Destroyed
        } else if has("sandbox_destroy_failed") {
            TeardownStatus::Failed
        } else {
            TeardownStatus::NotNeeded
        };
        prop_assert_eq!(ev.teardown, expected_teardown);
        // A started session is ended (or its end abandoned) exactly once; no other session end.
        prop_assert_eq!(ends, usize::from(has("session_started")));
        let expected_end = if run.aborted == Some("session_end") {
            SessionEndStatus::Abandoned
        } else if has("session_ended") {
            SessionEndStatus::Ended
        } else if has("session_end_failed") {
            SessionEndStatus::Failed
        } else {
            SessionEndStatus::NotAttempted
        };
        prop_assert_eq!(ev.session_end, expected_end);
        // The first failure is the failure stage; any failure after resolution is failed.
        if created {
            prop_assert_eq!(ev.failure_stage.map(|s| s.as_str()), run.first_failure);
            prop_assert_eq!(ev.outcome == Outcome::Failed, run.first_failure.is_some());
        }
        if run.aborted.is_some() && run.aborted == run.first_failure {
            prop_assert_eq!(ev.failure_code.as_deref(), Some("aborted"));
            prop_assert_eq!(&ev.failure_reasons, &vec!["deadline_exceeded".to_owned()]);
        }
        // Counts add up.
        let c = ev.tool_calls;
        prop_assert_eq!(c.requested, plan.calls.len() as u64);
        prop_assert_eq!(c.dispatched, c.succeeded + c.unsuccessful + c.dispatch_failed + c.abandoned);
        prop_assert_eq!(c.abandoned, u64::from(run.aborted == Some("execution")));
        if has("session_started") {
            prop_assert_eq!(c.requested, c.dispatched + c.denied + c.skipped);
        } else {
            prop_assert_eq!(c.dispatched + c.denied + c.skipped, 0);
        }
        // A denied, failed or abandoned last call leaves no tool output to the caller.
        if c.denied > 0 || c.dispatch_failed > 0 || c.abandoned > 0 {
            prop_assert_eq!(&run.result.tool_output, &Value::Null);
        }
        // Duration comes from the host's clock only.
        prop_assert_eq!(ev.duration_ms, run.end_ms - 1000);
    }
}
