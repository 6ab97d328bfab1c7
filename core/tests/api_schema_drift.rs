//! The API JSON Schemas in `conformance/schema/api/` must describe the JSON forms the core
//! accepts and emits. They are the single source of every binding's typed shapes (the
//! Python `TypedDict`s are generated from them by `conformance/tools/gen_python_types.py`),
//! so a core change that alters a shape fails here until the schema is updated (and the
//! bindings' types regenerated).
//!
//! The test drives the core through the conformance vectors of the `contract`, `local`,
//! `reducer`, `sequencing`, `session` and `adapter` areas and validates, with an
//! independent JSON Schema validator (the `jsonschema` crate), against its `$defs` entry:
//!
//! * every JSON value the core emitted: canonical models (`to_value` of every model a
//!   `parse` step accepted — parsing itself is lenient where the canonical form is not:
//!   an absent optional key and `null` are the same on input), gateway outputs with their
//!   evidence, local-run events, reducer snapshots and delivery reports, configurations
//!   as the core serializes them (every key);
//! * every JSON value the core accepted where the schema is the input form: gateway
//!   inputs, configuration objects, canonical events, positions.
//!
//! The few shapes whose JSON form a binding assembles from a core struct (replay reports,
//! resync notices, peer errors, spawn/signal actions, role specs) are built here from an
//! exhaustive destructuring of that struct, so adding or removing a field fails to
//! compile or to validate. Every `$defs` entry must be exercised, and every key a schema
//! declares must be carried by some checked value (a key the core stopped emitting
//! fails too).

use indexmap::IndexMap;
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use stapel_runner_protocol::adapter::RoleSpec;
use stapel_runner_protocol::contract::{
    self, Catalog, ExecutionEvidence, Gateway, GatewayConfig, GatewayInput, GatewayResult,
};
use stapel_runner_protocol::local::{self, LocalConfig, LocalRun, SpawnRequest};
use stapel_runner_protocol::reducer::{ReducerConfig, SessionReducer};
use stapel_runner_protocol::sequencing::{
    ConnectionState, Position, Replay, Resync, Role, SequencingConfig, StreamReplay,
};
use stapel_runner_protocol::session::{
    self, Event, HubSession, Machine, RunnerSession, SessionConfig,
};
use stapel_runner_protocol::wire::{self, Hello, Message};

const BASE: &str = "https://schemas.stapel.dev/runner-protocol/api/";

fn conformance() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../conformance")
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path:?}: {e}"))
}

fn sorted_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{dir:?}: {e}"))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    files
}

fn vectors(area: &str) -> Vec<(String, Value)> {
    sorted_files(&conformance().join("vectors").join(area))
        .into_iter()
        .map(|p| {
            let name = format!("{area}/{}", p.file_name().unwrap().to_string_lossy());
            (name, read_json(&p))
        })
        .collect()
}

fn steps(vector: &Value) -> impl Iterator<Item = (usize, &Value, &Value)> {
    vector["steps"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(i, s)| (i, &s["input"], &s["expect"]))
}

/// One validator per `$defs` entry of every API schema file, and what it has seen.
struct Api {
    validators: BTreeMap<String, (String, jsonschema::Validator)>,
    /// The declared properties of each object `$defs` entry.
    properties: BTreeMap<String, BTreeSet<String>>,
    /// The keys of each entry that some checked value carried.
    seen_keys: BTreeMap<String, BTreeSet<String>>,
    hits: BTreeMap<String, usize>,
    /// Distinct violations (schema entry and errors) → the first value's origin and
    /// text, and how many values had them.
    failures: IndexMap<String, (String, usize)>,
}

impl Api {
    fn new() -> Self {
        let dir = conformance().join("schema").join("api");
        let files: Vec<(String, Value)> = sorted_files(&dir)
            .into_iter()
            .map(|p| {
                (
                    p.file_name().unwrap().to_string_lossy().into_owned(),
                    read_json(&p),
                )
            })
            .collect();
        assert!(!files.is_empty(), "no API schemas in {dir:?}");
        let mut registry = jsonschema::Registry::new();
        for (file, doc) in &files {
            assert_eq!(doc["$id"], json!(format!("{BASE}{file}")), "{file}: $id");
            assert_eq!(
                doc["$schema"],
                json!("https://json-schema.org/draft/2020-12/schema"),
                "{file}: $schema"
            );
            registry = registry.add(format!("{BASE}{file}"), doc.clone()).unwrap();
        }
        let registry = registry.prepare().unwrap();
        let mut validators = BTreeMap::new();
        let mut properties = BTreeMap::new();
        for (file, doc) in &files {
            let defs = doc["$defs"]
                .as_object()
                .unwrap_or_else(|| panic!("{file}: $defs"));
            for (name, def) in defs {
                assert_eq!(def["title"], json!(name), "{file}#/$defs/{name}: title");
                assert!(
                    def["description"].as_str().is_some_and(|d| !d.is_empty()),
                    "{file}#/$defs/{name}: description"
                );
                if let Some(props) = def.get("properties").and_then(Value::as_object) {
                    properties.insert(name.clone(), props.keys().cloned().collect());
                    assert!(
                        def.get("additionalProperties").is_some(),
                        "{file}#/$defs/{name}: say whether other keys are allowed"
                    );
                }
                let schema = json!({"$ref": format!("{BASE}{file}#/$defs/{name}")});
                let v = jsonschema::options()
                    .with_draft(jsonschema::Draft::Draft202012)
                    .with_registry(&registry)
                    .build(&schema)
                    .unwrap_or_else(|e| panic!("{file}#/$defs/{name}: {e}"));
                let previous = validators.insert(name.clone(), (file.clone(), v));
                assert!(previous.is_none(), "{name} is defined twice");
            }
        }
        Self {
            validators,
            properties,
            seen_keys: BTreeMap::new(),
            hits: BTreeMap::new(),
            failures: IndexMap::new(),
        }
    }

    /// Validate `value` (from `origin`) against `def`.
    fn check(&mut self, def: &str, value: &Value, origin: &str) {
        let Some((file, v)) = self.validators.get(def) else {
            panic!("no $defs entry {def} in conformance/schema/api/");
        };
        *self.hits.entry(def.to_owned()).or_default() += 1;
        if let Some(o) = value.as_object() {
            self.seen_keys
                .entry(def.to_owned())
                .or_default()
                .extend(o.keys().cloned());
        }
        let errors: Vec<String> = v
            .iter_errors(value)
            .take(5)
            .map(|e| format!("{} at {:?}", e, e.instance_path().to_string()))
            .collect();
        if !errors.is_empty() {
            let mut shown = value.to_string();
            if shown.len() > 600 {
                shown.truncate(600);
                shown.push('…');
            }
            let key = format!(
                "conformance/schema/api/{file}#/$defs/{def} rejects:\n    {}",
                errors.join("\n    ")
            );
            self.fail(key, format!("first from {origin}: {shown}"));
        }
    }

    fn fail(&mut self, key: String, first: String) {
        self.failures.entry(key).or_insert((first, 0)).1 += 1;
    }

    /// `check`, then the nested shapes that have their own `$defs` entry.
    fn deep(&mut self, def: &str, value: &Value, origin: &str) {
        self.check(def, value, origin);
        let each = |api: &mut Self, d: &str, v: &Value| {
            for x in v.as_array().into_iter().flatten() {
                api.deep(d, x, origin);
            }
        };
        let opt = |api: &mut Self, d: &str, v: &Value| {
            if !v.is_null() {
                api.deep(d, v, origin);
            }
        };
        match def {
            "ReplayReport" => {
                each(self, "StreamReplay", &value["streams"]);
                each(self, "Resync", &value["resync"]);
                each(self, "Position", &value["peer_ahead"]);
            }
            "HarnessProfile" => self.deep("ToolPolicy", &value["tool_policy"], origin),
            "ReinDescriptor" | "ExecutionSummary" => {
                if let Some(t) = value.get("tool_event_visibility") {
                    self.deep("ToolEventVisibility", t, origin);
                }
                if let Some(t) = value.get("tokens") {
                    opt(self, "UsageSplitDict", t);
                }
            }
            "ExecutionEvidence" => {
                self.deep("ToolCallCounts", &value["tool_calls"], origin);
                self.deep(
                    "ToolEventVisibility",
                    &value["tool_event_visibility"],
                    origin,
                );
                opt(self, "UsageSplitDict", &value["tokens"]);
            }
            "GatewayResultDict" => self.deep("ExecutionEvidence", &value["evidence"], origin),
            "Catalog" => {
                each(self, "HarnessProfile", &value["profiles"]);
                each(self, "ReinDescriptor", &value["reins"]);
            }
            "Resolution" => {
                self.deep("HarnessProfile", &value["profile"], origin);
                self.deep("ReinDescriptor", &value["rein"], origin);
            }
            "ExecuteInput" => {
                self.deep("ExecutionRequest", &value["request"], origin);
                each(self, "ToolCall", &value["tool_calls"]);
            }
            "SandboxCreatedInput" => self.deep("SandboxHandle", &value["sandbox"], origin),
            "ToolDispatchedInput" => self.deep("ToolResult", &value["result"], origin),
            "SessionEndedInput" => self.deep("ExecutionSummary", &value["summary"], origin),
            "StartSessionAction" => {
                self.deep("HarnessProfile", &value["profile"], origin);
                self.deep("SandboxHandle", &value["sandbox"], origin);
            }
            "DispatchToolAction" => self.deep("ToolCall", &value["call"], origin),
            "DestroySandboxAction" => self.deep("SandboxHandle", &value["sandbox"], origin),
            "ResultOutput" => self.deep("GatewayResultDict", &value["result"], origin),
            "ReducerSnapshot" => {
                each(self, "ReducerCursor", &value["cursors"]);
                each(self, "ReducerGap", &value["gaps"]);
                self.deep("RunView", &value["run"], origin);
                self.deep("SessionView", &value["session"], origin);
                each(self, "ReducerTurn", &value["turns"]);
                each(self, "ReducerItem", &value["items"]);
                each(self, "ReducerRequest", &value["pendingRequests"]);
                each(self, "ReducerRequest", &value["answeredRequests"]);
                self.deep("ReducerLimits", &value["limits"], origin);
            }
            "DeliveryReport" => each(self, "OutOfOrderRecord", &value["outOfOrder"]),
            _ => {}
        }
    }

    /// A gateway input or output: its own `$defs` entry (by `type`) and the unions.
    fn gateway(&mut self, value: &Value, input: bool, origin: &str) {
        let t = value["type"].as_str().unwrap_or("?");
        let def = match t {
            "execute" => "ExecuteInput",
            "sandbox_created" => "SandboxCreatedInput",
            "session_started" => "SessionStartedInput",
            "tool_dispatched" => "ToolDispatchedInput",
            "session_ended" => "SessionEndedInput",
            "sandbox_create_failed"
            | "session_start_failed"
            | "tool_dispatch_failed"
            | "session_end_failed"
            | "sandbox_destroy_failed" => "StageFailedInput",
            "sandbox_destroyed" => "SandboxDestroyedInput",
            "abort" => "AbortInput",
            "answer" => "AnswerInput",
            "answer_invalid" => "AnswerInvalidInput",
            "action_failed" => "ActionFailedInput",
            "create_sandbox" => "CreateSandboxAction",
            "start_session" => "StartSessionAction",
            "dispatch_tool" => "DispatchToolAction",
            "end_session" => "EndSessionAction",
            "destroy_sandbox" => "DestroySandboxAction",
            "discard_sandbox" => "DiscardSandboxAction",
            "result" => "ResultOutput",
            other => {
                self.fail(
                    format!("gateway value of unknown type {other:?}"),
                    format!("first from {origin}: {value}"),
                );
                return;
            }
        };
        self.deep(def, value, origin);
        if input {
            self.check("GatewayInput", value, origin);
        } else {
            self.check("GatewayOutput", value, origin);
            if t != "result" {
                self.check("GatewayAction", value, origin);
            }
        }
    }

    fn finish(self) {
        let total: usize = self.hits.values().sum();
        eprintln!(
            "api_schema_drift: {total} values checked against {} $defs: {:?}",
            self.validators.len(),
            self.hits
        );
        let unused: Vec<&String> = self
            .validators
            .keys()
            .filter(|k| !self.hits.contains_key(*k))
            .collect();
        let mut report = String::new();
        for (def, declared) in &self.properties {
            let seen = self.seen_keys.get(def).cloned().unwrap_or_default();
            let never: Vec<&String> = declared.difference(&seen).collect();
            if !never.is_empty() {
                let file = &self.validators[def].0;
                report.push_str(&format!(
                    "conformance/schema/api/{file}#/$defs/{def} declares keys no core value \
                     carried (dropped by the core, or missing from the vectors): {never:?}\n"
                ));
            }
        }
        for (what, (first, n)) in self.failures.iter().take(20) {
            report.push_str(&format!("{what}\n    ({n} values; {first})\n"));
        }
        if self.failures.len() > 20 {
            report.push_str(&format!("… and {} more\n", self.failures.len() - 20));
        }
        if !unused.is_empty() {
            report.push_str(&format!(
                "$defs entries no core value exercised (add a source to this test): {unused:?}\n"
            ));
        }
        assert!(
            report.is_empty(),
            "the API schemas and the core's JSON forms drifted apart — update \
             conformance/schema/api/ and run `python3 conformance/tools/gen_python_types.py`:\n{report}"
        );
    }
}

// ------------------------------------------------------------------------ the bindings'
// forms of core structs, built from exhaustive destructurings.

fn stream_replay_json(s: &StreamReplay) -> Value {
    let StreamReplay {
        task_id,
        attempt,
        frames,
    } = s;
    let mut m = Map::new();
    m.insert("task_id".into(), json!(task_id));
    if let Some(a) = attempt {
        m.insert("attempt".into(), json!(a));
    }
    let frames: Vec<&str> = frames.iter().map(|f| f.frame.as_str()).collect();
    m.insert("frames".into(), json!(frames));
    Value::Object(m)
}

fn resync_json(r: &Resync) -> Value {
    let Resync {
        task_id,
        attempt,
        declared,
        missing_from,
        missing_to,
    } = r;
    let mut m = Map::new();
    m.insert("task_id".into(), json!(task_id));
    if let Some(a) = attempt {
        m.insert("attempt".into(), json!(a));
    }
    m.insert("declared".into(), json!(declared));
    m.insert("missing_from".into(), json!(missing_from));
    m.insert("missing_to".into(), json!(missing_to));
    Value::Object(m)
}

fn position_json(p: &Position) -> Value {
    serde_json::from_str(&p.to_value().to_string()).unwrap()
}

fn replay_json(r: &Replay) -> Value {
    let Replay {
        streams,
        resync,
        peer_ahead,
        unknown,
        // Not part of the report's JSON form: a binding raises the first one
        // (`restamp_failed`) instead of returning a report.
        failed: _,
    } = r;
    json!({
        "streams": streams.iter().map(stream_replay_json).collect::<Vec<_>>(),
        "resync": resync.iter().map(resync_json).collect::<Vec<_>>(),
        "peer_ahead": peer_ahead.iter().map(position_json).collect::<Vec<_>>(),
        "unknown": unknown,
    })
}

fn spawn_json(s: &SpawnRequest) -> Value {
    let SpawnRequest {
        program,
        args,
        env,
        new_process_group,
    } = s;
    json!({"program": program, "args": args, "env": env, "new_process_group": new_process_group})
}

fn role_spec_json(r: &RoleSpec) -> Value {
    let RoleSpec {
        role,
        backend,
        model,
        session,
        system_prompt_ref,
        allowed_tools,
        llm_base_url,
        budget,
        extra,
    } = r;
    json!({
        "role": role, "backend": backend, "model": model, "session": session,
        "system_prompt_ref": system_prompt_ref, "allowed_tools": allowed_tools,
        "llm_base_url": llm_base_url, "budget": budget, "extra": extra,
    })
}

// ------------------------------------------------------------------------------ sources

fn contract_values(api: &mut Api) {
    for (name, vector) in vectors("contract") {
        let cfg = &vector["config"];
        let catalog_value = cfg.get("catalog").cloned().unwrap_or(json!({}));
        let catalog = Catalog::from_value(&catalog_value).ok();
        if catalog.is_some() {
            api.deep("Catalog", &catalog_value, &name);
        }
        let mut gateway: Option<Gateway> = None;
        for (i, input, _) in steps(&vector) {
            let origin = format!("{name} step {i}");
            if let Some(p) = input.get("parse") {
                let (model, v) = (p["model"].as_str().unwrap_or("?"), &p["value"]);
                if !contract::MODEL_NAMES.contains(&model) {
                    continue; // an unknown-name vector: nothing to check the shape of
                }
                let out = contract::parse_model(model, v);
                let def = if model == "GatewayResult" {
                    "GatewayResultDict"
                } else {
                    model
                };
                // Only the canonical output: parsing is lenient where the canonical form
                // is not (an absent optional key and `null` are the same on input).
                if let Ok(out) = out {
                    api.deep(def, &out, &format!("{origin} (to_value)"));
                }
            } else if let Some(c) = input.get("parse_catalog") {
                if let Ok(cat) = Catalog::from_value(c) {
                    api.deep("Catalog", c, &origin);
                    for p in &cat.profiles {
                        api.deep("HarnessProfile", &p.to_value(), &origin);
                    }
                    for r in &cat.reins {
                        api.deep("ReinDescriptor", &r.to_value(), &origin);
                    }
                    let counts = json!({"profiles": cat.profiles.len(), "reins": cat.reins.len()});
                    api.check("CatalogCounts", &counts, &origin);
                }
            } else if let Some(r) = input.get("resolve") {
                let Some(cat) = &catalog else { continue };
                if let Ok(ok) = contract::resolve(r.as_str().unwrap_or_default(), cat) {
                    let v = json!({"profile": ok.profile.to_value(), "rein": ok.rein.to_value()});
                    api.deep("Resolution", &v, &origin);
                }
            } else if let Some(g) = input.get("gateway") {
                let Some(cat) = &catalog else { continue };
                let gw =
                    gateway.get_or_insert_with(|| Gateway::new(GatewayConfig::new(cat.clone())));
                let now = input.get("now_ms").and_then(Value::as_u64).unwrap_or(0);
                if let Ok(parsed) = GatewayInput::from_value(g) {
                    api.gateway(g, true, &format!("{origin} (accepted input)"));
                    let _ = gw.handle_input(now, parsed);
                }
                for out in drain_gateway(gw) {
                    api.gateway(&out, false, &format!("{origin} (output)"));
                }
            }
        }
    }
}

/// Every output the gateway has queued, in JSON form.
fn drain_gateway(gw: &mut Gateway) -> Vec<Value> {
    std::iter::from_fn(|| gw.poll_output())
        .map(|o| o.to_value())
        .collect()
}

/// Every output the local-run machine has queued.
fn drain_local(run: &mut LocalRun) -> Vec<local::Output> {
    std::iter::from_fn(|| run.poll_output()).collect()
}

fn local_input(input: &Value) -> Option<local::Input> {
    let bytes = |key: &str| -> Option<Vec<u8>> {
        if let Some(v) = input.get(key) {
            return Some(format!("{v}\n").into_bytes());
        }
        if let Some(s) = input.get(format!("{key}_text")).and_then(Value::as_str) {
            return Some(s.as_bytes().to_vec());
        }
        let hex = input.get(format!("{key}_hex")).and_then(Value::as_str)?;
        (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
            .collect()
    };
    let int = |v: &Value, k: &str| {
        v.get(k)
            .and_then(Value::as_i64)
            .and_then(|n| i32::try_from(n).ok())
    };
    if let Some(b) = bytes("controller") {
        return Some(local::Input::ControllerBytes(b));
    }
    if input.get("controller_eof").is_some() {
        return Some(local::Input::ControllerEof);
    }
    if let Some(b) = bytes("harness") {
        return Some(local::Input::HarnessStdout(b));
    }
    if let Some(b) = bytes("stderr") {
        return Some(local::Input::HarnessStderr(b));
    }
    if let Some(s) = input.get("harness_spawned") {
        let pid = u32::try_from(s.get("pid")?.as_u64()?).ok()?;
        return Some(local::Input::HarnessSpawned { pid });
    }
    if let Some(s) = input.get("harness_spawn_failed") {
        let message = s.get("message")?.as_str()?.to_owned();
        return Some(local::Input::HarnessSpawnFailed { message });
    }
    if let Some(e) = input.get("harness_exited") {
        return Some(local::Input::HarnessExited {
            code: int(e, "code"),
            signal: int(e, "signal"),
        });
    }
    if input.get("timeout").is_some() {
        return Some(local::Input::Timeout);
    }
    None
}

fn local_values(api: &mut Api) {
    for (name, vector) in vectors("local") {
        let config_value = vector.get("config").cloned().unwrap_or(json!({}));
        let Ok(config) = LocalConfig::from_value(&config_value) else {
            continue;
        };
        let run_id = config.run_id.clone();
        let Ok(mut run) = LocalRun::new(config.clone()) else {
            continue;
        };
        api.check("LocalConfig", &config_value, &format!("{name} config"));
        let full = serde_json::to_value(&config).unwrap();
        api.check("LocalConfig", &full, &format!("{name} config (serialized)"));
        let mut reducer = SessionReducer::new(ReducerConfig::for_run(run_id));
        let mut now = 0;
        for (i, input, _) in steps(&vector) {
            let origin = format!("{name} step {i}");
            now = input.get("now_ms").and_then(Value::as_u64).unwrap_or(now);
            if let Some(parsed) = local_input(input) {
                let _ = run.handle_input(now, parsed);
            }
            for out in drain_local(&mut run) {
                match out {
                    local::Output::Spawn(s) => api.check("SpawnAction", &spawn_json(&s), &origin),
                    local::Output::Signal { group, signal } => {
                        let v = json!({"group": group, "signal": signal.as_str()});
                        api.check("SignalAction", &v, &origin);
                    }
                    local::Output::ToController(line) => {
                        let msg: Value = serde_json::from_str(&line).unwrap();
                        if msg["message"]["kind"] == "event" {
                            let event = &msg["message"]["event"];
                            api.check("CanonicalEvent", event, &format!("{origin} (event)"));
                            if let Ok(o) = reducer.apply(event) {
                                api.check("ReduceOutcome", &json!(o.code()), &origin);
                            }
                            // The optional keys a consumer may meet (kept by the core).
                            let mut with_extra = event.clone();
                            with_extra["observedAt"] = json!("2026-01-01T00:00:00.000Z");
                            with_extra["debug"] = json!({"note": "x"});
                            let mut fresh = SessionReducer::new(ReducerConfig::for_run(
                                event["runId"].as_str().unwrap_or_default(),
                            ));
                            if fresh.apply(&with_extra).is_ok() {
                                let o = format!("{origin} (event with observedAt, debug)");
                                api.check("CanonicalEvent", &with_extra, &o);
                            }
                        }
                    }
                    _ => {}
                }
            }
        }
        api.deep(
            "ReducerSnapshot",
            &reducer.snapshot(),
            &format!("{name} (reduced)"),
        );
        api.deep(
            "DeliveryReport",
            &reducer.delivery(),
            &format!("{name} (reduced)"),
        );
    }
}

fn reducer_values(api: &mut Api) {
    for (name, vector) in vectors("reducer") {
        let config_value = vector.get("config").cloned().unwrap_or(json!({}));
        let Ok(config) = ReducerConfig::from_value(&config_value) else {
            continue;
        };
        api.check("ReducerConfig", &config_value, &format!("{name} config"));
        let full = serde_json::to_value(&config).unwrap();
        api.check(
            "ReducerConfig",
            &full,
            &format!("{name} config (serialized)"),
        );
        let mut reducer = SessionReducer::new(config);
        for (i, input, _) in steps(&vector) {
            let origin = format!("{name} step {i}");
            let mut events: Vec<&Value> = input.get("event").into_iter().collect();
            events.extend(
                input
                    .get("replay")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten(),
            );
            for event in events {
                if let Ok(o) = reducer.apply(event) {
                    api.check(
                        "CanonicalEvent",
                        event,
                        &format!("{origin} (accepted event)"),
                    );
                    api.check("ReduceOutcome", &json!(o.code()), &origin);
                }
            }
            if let Some(line) = input.get("line").and_then(Value::as_str) {
                if let Ok(o) = reducer.apply_line(line) {
                    let event: Value = serde_json::from_str(line).unwrap();
                    api.check(
                        "CanonicalEvent",
                        &event,
                        &format!("{origin} (accepted line)"),
                    );
                    api.check("ReduceOutcome", &json!(o.code()), &origin);
                }
            }
            api.deep("ReducerSnapshot", &reducer.snapshot(), &origin);
            api.deep("DeliveryReport", &reducer.delivery(), &origin);
        }
    }
}

fn sequencing_values(api: &mut Api) {
    for (name, vector) in vectors("sequencing") {
        let cfg = vector["config"].as_object().cloned().unwrap_or_default();
        let role = cfg
            .get("role")
            .and_then(Value::as_str)
            .and_then(Role::from_name);
        // `role` picks the machine; it is not a config key (unknown keys are refused).
        let mut given = cfg.clone();
        given.remove("role");
        let (Some(role), Ok(config)) = (role, SequencingConfig::from_object(&given)) else {
            continue;
        };
        api.check(
            "SequencingConfig",
            &Value::Object(given),
            &format!("{name} config"),
        );
        api.check(
            "SequencingConfig",
            &config.to_value(),
            &format!("{name} (to_value)"),
        );
        let mut state = ConnectionState::with_config(role, config);
        for (i, input, _) in steps(&vector) {
            let origin = format!("{name} step {i}");
            let message = |k: &str| {
                input
                    .get(k)
                    .and_then(|v| wire::from_value(v.into(), false).ok())
            };
            if let Some(m) = message("emit") {
                let _ = state.emit(m);
            } else if let Some(m) = message("receive") {
                let _ = state.receive(&m);
            } else if let Some(p) = input
                .get("ack")
                .and_then(|v| Position::from_value(&v.into()).ok())
            {
                api.check(
                    "Position",
                    &input["ack"],
                    &format!("{origin} (accepted ack)"),
                );
                // A vector may pin an ack that fails; the shapes are what this test checks.
                let _ = state.ack(&p.task_id, p.attempt, p.seq);
            } else if let Some(v) = input.get("replay_for") {
                if let Ok(resume) = serde_json::from_value::<IndexMap<String, u64>>(v.clone()) {
                    api.deep(
                        "ReplayReport",
                        &replay_json(&state.replay_for(&resume)),
                        &origin,
                    );
                }
            } else if let Some(v) = input.get("replay_positions") {
                if let Ok(list) = Position::list_from_value(&v.into()) {
                    for p in v.as_array().into_iter().flatten() {
                        api.check("Position", p, &format!("{origin} (accepted position)"));
                    }
                    api.deep(
                        "ReplayReport",
                        &replay_json(&state.replay_positions(&list)),
                        &origin,
                    );
                }
            }
            for p in state.replay_from() {
                api.check(
                    "Position",
                    &position_json(&p),
                    &format!("{origin} (replay_from)"),
                );
            }
        }
    }
}

enum Side {
    Hub(Box<HubSession>),
    Runner(Box<RunnerSession>),
}

fn session_values(api: &mut Api) {
    for (name, vector) in vectors("session") {
        let cfg = &vector["config"];
        let mut config = SessionConfig::default();
        if let Some(s) = cfg.get("sequencing").and_then(Value::as_object) {
            if let Ok(c) = SequencingConfig::from_object(s) {
                config.sequencing = c;
            }
        }
        let mut side = match cfg["side"].as_str() {
            Some("hub") => Side::Hub(Box::new(HubSession::new(config))),
            _ => {
                let hello = match cfg.get("hello").map(|h| wire::from_value(h.into(), false)) {
                    Some(Ok(Message::Hello(h))) => h,
                    _ => Hello::new("p-1", "0.1.0"),
                };
                Side::Runner(Box::new(RunnerSession::new(hello, config)))
            }
        };
        let mut now = 0;
        for (i, input, _) in steps(&vector) {
            let origin = format!("{name} step {i}");
            now = input.get("now").and_then(Value::as_u64).unwrap_or(now);
            let parsed = if input.get("connected").is_some() {
                Some(session::Input::Connected)
            } else if input.get("disconnected").is_some() {
                Some(session::Input::Disconnected)
            } else if input.get("tick").is_some() {
                Some(session::Input::Timeout)
            } else if let Some(f) = input.get("frame").and_then(Value::as_str) {
                Some(session::Input::Frame(f.to_owned()))
            } else if let Some(b) = input.get("bytes").and_then(Value::as_str) {
                Some(session::Input::Bytes(b.as_bytes().to_vec()))
            } else {
                input
                    .get("send")
                    .and_then(|m| wire::from_value(m.into(), false).ok())
                    .map(session::Input::Send)
            };
            let Some(parsed) = parsed else { continue };
            let _ = match &mut side {
                Side::Hub(h) => h.handle_input(now, parsed),
                Side::Runner(r) => r.handle_input(now, parsed),
            };
            for event in drain_session_events(&mut side) {
                match event {
                    Event::PeerError { code, detail } => {
                        let v = json!({"code": code, "detail": detail});
                        api.check("PeerError", &v, &origin);
                    }
                    Event::InboundGap(r) | Event::OutboundResync(r) => {
                        api.check("Resync", &resync_json(&r), &origin);
                    }
                    _ => {}
                }
            }
        }
    }
}

/// Every event the session has queued (other outputs dropped).
fn drain_session_events(side: &mut Side) -> Vec<Event> {
    let poll = |side: &mut Side| match side {
        Side::Hub(h) => h.poll_output(),
        Side::Runner(r) => r.poll_output(),
    };
    std::iter::from_fn(|| poll(side))
        .filter_map(|o| match o {
            session::Output::Event(e) => Some(e),
            _ => None,
        })
        .collect()
}

fn adapter_values(api: &mut Api) {
    for (name, vector) in vectors("adapter") {
        for (i, input, _) in steps(&vector) {
            let Some(r) = input.get("role_spec") else {
                continue;
            };
            let Some(inv) = r.get("invocation").and_then(Value::as_object) else {
                continue;
            };
            if let Ok(spec) = RoleSpec::from_invocation(inv, r.get("role").and_then(Value::as_str))
            {
                api.check(
                    "RoleSpecDict",
                    &role_spec_json(&spec),
                    &format!("{name} step {i}"),
                );
            }
        }
    }
}

#[test]
fn api_schemas_describe_the_core_json_forms() {
    let mut api = Api::new();
    contract_values(&mut api);
    local_values(&mut api);
    reducer_values(&mut api);
    sequencing_values(&mut api);
    session_values(&mut api);
    adapter_values(&mut api);
    api.finish();
}

/// The schemas are strict where the core is: a value with an unknown key, a missing
/// required key or a value of the wrong type is rejected (so the drift test above can
/// fail).
#[test]
fn api_schemas_reject_drifted_values() {
    let mut api = Api::new();
    let evidence = GatewayResult::from_value(&json!({
        "ok": false, "tool_output": null, "tool_error": null,
        "evidence": ExecutionEvidence::from_value(&minimal_evidence()).unwrap().to_value(),
    }))
    .unwrap()
    .to_value();
    api.deep("GatewayResultDict", &evidence, "a valid result");
    assert!(api.failures.is_empty(), "{:?}", api.failures);
    let mut extra = evidence.clone();
    extra["evidence"]["waiting"] = json!(true);
    let mut missing = evidence.clone();
    missing["evidence"]
        .as_object_mut()
        .unwrap()
        .remove("teardown");
    let mut wrong = evidence.clone();
    wrong["evidence"]["duration_ms"] = json!("12");
    for (what, v) in [("extra", extra), ("missing", missing), ("wrong", wrong)] {
        let before = api.failures.len();
        api.check("GatewayResultDict", &v, what);
        assert_eq!(api.failures.len(), before + 1, "{what} was accepted");
    }
    let msg = api.failures.keys().next().unwrap();
    assert!(
        msg.contains("contract.json#/$defs/GatewayResultDict"),
        "{msg}"
    );
}

fn minimal_evidence() -> Value {
    let catalog = Catalog::default();
    let mut gw = Gateway::new(GatewayConfig::new(catalog));
    let request = json!({"type": "execute", "request": {
        "harness_profile_ref": "p", "repository": "r", "title": "t", "description": "d"}});
    gw.handle_input(0, GatewayInput::from_value(&request).unwrap())
        .unwrap();
    let outputs = drain_gateway(&mut gw);
    outputs.last().unwrap()["result"]["evidence"].clone()
}
