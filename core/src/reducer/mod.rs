//! The session reducer: folds canonical `paperclip.prp.event.v1` events into a snapshot
//! of one run and its session (run, harness, session, turns, items with their deltas,
//! pending and answered runtime requests, the log summary, diagnostics, the terminal).
//!
//! # Rules
//!
//! * **Binding first.** An event that is not a valid `paperclip.prp.event.v1` (unknown
//!   schema id, `schemaVersion` ≠ 1, unknown `eventType`/`sourceKind`/`priority`, missing
//!   fields) or that names another `runId` or `normalizedSessionId` is rejected with a
//!   [`ReduceError`] before reduction; the snapshot is unchanged.
//! * **Ordering** is per `(sourceKind, sourceInstanceId)` by `sourceSeq`. A repeated
//!   `sourceEventId` has no second effect ([`Outcome::Duplicate`]). An event at or behind
//!   the cursor is not applied and is recorded as out of order ([`Outcome::OutOfOrder`]).
//!   An event past the next expected `sourceSeq` is applied and the gap is recorded in the
//!   snapshot (`gaps`): missing events are never invented. The first expected `sourceSeq`
//!   of a source is 1, so a source whose first event is `sourceSeq` 5 records the gap
//!   1 → 5.
//! * **Live equals replay.** The snapshot depends only on the events applied, in order;
//!   delivery anomalies (duplicates, out-of-order deliveries) are reported separately by
//!   [`SessionReducer::delivery`], so reducing a live stream with retransmissions gives the
//!   same snapshot as reducing the clean list at the end.
//! * Event types the reducer does not interpret are counted (`eventCounts`) and otherwise
//!   ignored.
//!
//! # Bounds
//!
//! Every collection has a bound in [`ReducerConfig`]; past it new entries are not kept
//! and a counter in the snapshot's `limits` object says how many were dropped. The set of
//! seen `sourceEventId`s keeps the newest `max_tracked_event_ids` (evicting the oldest in
//! O(1): a hash set plus a queue in arrival order); an older id repeated after eviction is
//! still behind its cursor and therefore reported out of order, never applied twice.

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, HashSet, VecDeque};

use crate::local::{parse_json, RunTerminalState};
use crate::local::{CanonicalEvent, ModelError};

/// Why an event was rejected before reduction.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReduceError {
    /// Not a valid canonical event (remote violation). Code `invalid_event`; the inner
    /// [`ModelError::code`] says why.
    #[error("invalid event: {0}")]
    InvalidEvent(ModelError),
    /// `runId` differs from the bound run. Code `run_id_mismatch`.
    #[error("event belongs to run {found:?}, not {expected:?}")]
    RunIdMismatch {
        /// The reducer's run.
        expected: String,
        /// The event's run.
        found: String,
    },
    /// Local misuse: a [`ReducerConfig`] JSON object could not be read. Code
    /// `invalid_config`.
    #[error("invalid reducer config: {0}")]
    InvalidConfig(String),
    /// `normalizedSessionId` differs from the bound session. Code `session_id_mismatch`.
    #[error("event belongs to session {found:?}, not {expected:?}")]
    SessionIdMismatch {
        /// The reducer's session.
        expected: String,
        /// The event's session.
        found: String,
    },
}

impl ReduceError {
    /// Stable snake_case code.
    pub fn code(&self) -> &'static str {
        match self {
            ReduceError::InvalidEvent(_) => "invalid_event",
            ReduceError::RunIdMismatch { .. } => "run_id_mismatch",
            ReduceError::SessionIdMismatch { .. } => "session_id_mismatch",
            ReduceError::InvalidConfig(_) => "invalid_config",
        }
    }

    /// For `invalid_event`, the code of the underlying model error.
    pub fn detail_code(&self) -> Option<&'static str> {
        match self {
            ReduceError::InvalidEvent(e) => Some(e.code()),
            _ => None,
        }
    }
}

/// What happened to an accepted (well-formed, correctly bound) event.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Outcome {
    /// Applied; it was the next expected `sourceSeq` (or the first of its source).
    Applied,
    /// Applied after a forward gap, which was recorded.
    AppliedAfterGap {
        /// The `sourceSeq` that was expected.
        expected: u64,
        /// The `sourceSeq` received.
        received: u64,
    },
    /// Same `sourceEventId` seen before: no effect.
    Duplicate,
    /// At or behind the cursor: not applied, recorded.
    OutOfOrder {
        /// The source's cursor (last applied `sourceSeq`).
        cursor: u64,
    },
}

impl Outcome {
    /// Stable snake_case code: `applied`, `applied_after_gap`, `duplicate`, `out_of_order`.
    pub fn code(&self) -> &'static str {
        match self {
            Outcome::Applied => "applied",
            Outcome::AppliedAfterGap { .. } => "applied_after_gap",
            Outcome::Duplicate => "duplicate",
            Outcome::OutOfOrder { .. } => "out_of_order",
        }
    }
}

/// Configuration of a [`SessionReducer`] (JSON keys as the field names; unknown keys are
/// an error).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct ReducerConfig {
    /// The run this reducer is bound to (required in practice). Default `run_local`.
    pub run_id: String,
    /// The session this reducer is bound to; `None` binds to the first event's
    /// `normalizedSessionId`. Default `None`.
    pub normalized_session_id: Option<String>,
    /// Turns kept. Default 256.
    pub max_turns: usize,
    /// Items kept. Default 4,096.
    pub max_items: usize,
    /// Deltas kept per item. Default 4,096.
    pub max_deltas_per_item: usize,
    /// Requests kept (pending plus answered). Default 1,024.
    pub max_requests: usize,
    /// Diagnostics kept. Default 256.
    pub max_diagnostics: usize,
    /// Gaps kept. Default 256.
    pub max_gaps: usize,
    /// Out-of-order deliveries kept in the delivery report. Default 256.
    pub max_out_of_order_records: usize,
    /// `sourceEventId`s remembered for duplicate detection. Default 65,536.
    pub max_tracked_event_ids: usize,
}

impl Default for ReducerConfig {
    fn default() -> Self {
        Self {
            run_id: "run_local".into(),
            normalized_session_id: None,
            max_turns: 256,
            max_items: 4096,
            max_deltas_per_item: 4096,
            max_requests: 1024,
            max_diagnostics: 256,
            max_gaps: 256,
            max_out_of_order_records: 256,
            max_tracked_event_ids: 65_536,
        }
    }
}

impl ReducerConfig {
    /// Read from a JSON object with the crate's one config reader ([`crate::config`]).
    ///
    /// # Errors
    /// [`ConfigError`](crate::config::ConfigError): `not_an_object`, `unknown_key`,
    /// `wrong_type`, `out_of_range`.
    pub fn from_value(v: &Value) -> Result<Self, crate::config::ConfigError> {
        crate::config::from_serde(v)
    }

    /// A config bound to `run_id` with the default bounds.
    pub fn for_run(run_id: impl Into<String>) -> Self {
        Self {
            run_id: run_id.into(),
            ..Self::default()
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
struct Turn {
    turn_id: Option<String>,
    state: String,
    text: Option<String>,
    reason: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
struct Item {
    item_id: String,
    turn_id: Option<String>,
    kind: Option<String>,
    state: String,
    text: Option<String>,
    message: Option<String>,
    deltas: Vec<Value>,
    dropped_deltas: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
struct Request {
    request_id: String,
    status: String,
    #[serde(rename = "type")]
    request_type: Option<String>,
    prompt: Option<String>,
    response: Value,
    request: Value,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
struct Gap {
    source_kind: String,
    source_instance_id: String,
    expected_source_seq: u64,
    received_source_seq: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
struct Limits {
    dropped_turns: u64,
    dropped_items: u64,
    dropped_requests: u64,
    dropped_diagnostics: u64,
    dropped_gaps: u64,
}

/// The reducer. Call [`apply`](Self::apply) (or [`apply_line`](Self::apply_line)) per
/// event; read [`snapshot`](Self::snapshot) any time.
#[derive(Debug, Clone)]
pub struct SessionReducer {
    config: ReducerConfig,
    session_id: Option<String>,
    cursors: IndexMap<(String, String), u64>,
    seen: HashSet<String>,
    /// The ids of `seen`, oldest first (each once).
    seen_order: VecDeque<String>,
    applied: u64,
    event_counts: BTreeMap<String, u64>,
    gaps: Vec<Gap>,
    run_phase: Option<String>,
    workspace_ready: bool,
    run_state: String,
    result: Value,
    terminal: Value,
    harness: Map<String, Value>,
    session_state: String,
    driver_session_id: Option<String>,
    turns: Vec<Turn>,
    items: IndexMap<String, Item>,
    requests: IndexMap<String, Request>,
    logs: Value,
    diagnostics: Vec<Value>,
    limits: Limits,
    duplicates: u64,
    out_of_order: Vec<Value>,
    out_of_order_count: u64,
    rejected: u64,
}

impl SessionReducer {
    /// An empty reducer bound to `config.run_id`.
    pub fn new(config: ReducerConfig) -> Self {
        let mut harness = Map::new();
        harness.insert("state".into(), "not_started".into());
        for k in [
            "driverKind",
            "driverVersion",
            "transport",
            "processExit",
            "semanticResultObserved",
        ] {
            harness.insert(k.into(), Value::Null);
        }
        Self {
            session_id: config.normalized_session_id.clone(),
            config,
            cursors: IndexMap::new(),
            seen: HashSet::new(),
            seen_order: VecDeque::new(),
            applied: 0,
            event_counts: BTreeMap::new(),
            gaps: Vec::new(),
            run_phase: None,
            workspace_ready: false,
            run_state: "idle".into(),
            result: Value::Null,
            terminal: Value::Null,
            harness,
            session_state: "not_started".into(),
            driver_session_id: None,
            turns: Vec::new(),
            items: IndexMap::new(),
            requests: IndexMap::new(),
            logs: Value::Null,
            diagnostics: Vec::new(),
            limits: Limits::default(),
            duplicates: 0,
            out_of_order: Vec::new(),
            out_of_order_count: 0,
            rejected: 0,
        }
    }

    /// Parse one JSON line and [`apply`](Self::apply) it.
    pub fn apply_line(&mut self, line: &str) -> Result<Outcome, ReduceError> {
        match parse_json(line.as_bytes()) {
            Ok(v) => self.apply(&v),
            Err(e) => {
                self.rejected = self.rejected.saturating_add(1);
                Err(ReduceError::InvalidEvent(e))
            }
        }
    }

    /// Validate, bind-check and fold one event.
    pub fn apply(&mut self, event: &Value) -> Result<Outcome, ReduceError> {
        let ev = match self.check(event) {
            Ok(ev) => ev,
            Err(e) => {
                self.rejected = self.rejected.saturating_add(1);
                return Err(e);
            }
        };
        if self.seen.contains(&ev.source_event_id) {
            self.duplicates = self.duplicates.saturating_add(1);
            return Ok(Outcome::Duplicate);
        }
        let key = (ev.source_kind.clone(), ev.source_instance_id.clone());
        let cursor = self.cursors.get(&key).copied();
        if let Some(c) = cursor {
            if ev.source_seq <= c {
                self.out_of_order_count = self.out_of_order_count.saturating_add(1);
                if self.out_of_order.len() < self.config.max_out_of_order_records {
                    self.out_of_order.push(json!({"sourceEventId": ev.source_event_id, "sourceSeq": ev.source_seq, "cursor": c}));
                }
                return Ok(Outcome::OutOfOrder { cursor: c });
            }
        }
        let expected = cursor.map_or(1, |c| c.saturating_add(1));
        let outcome = if ev.source_seq > expected {
            if self.gaps.len() < self.config.max_gaps {
                self.gaps.push(Gap {
                    source_kind: key.0.clone(),
                    source_instance_id: key.1.clone(),
                    expected_source_seq: expected,
                    received_source_seq: ev.source_seq,
                });
            } else {
                self.limits.dropped_gaps = self.limits.dropped_gaps.saturating_add(1);
            }
            Outcome::AppliedAfterGap {
                expected,
                received: ev.source_seq,
            }
        } else {
            Outcome::Applied
        };
        self.cursors.insert(key, ev.source_seq);
        while self.seen_order.len() >= self.config.max_tracked_event_ids.max(1) {
            match self.seen_order.pop_front() {
                Some(old) => {
                    self.seen.remove(&old);
                }
                None => break,
            }
        }
        self.seen.insert(ev.source_event_id.clone());
        self.seen_order.push_back(ev.source_event_id.clone());
        if self.session_id.is_none() {
            self.session_id = ev.normalized_session_id.clone();
        }
        self.fold(&ev);
        Ok(outcome)
    }

    fn check(&self, event: &Value) -> Result<CanonicalEvent, ReduceError> {
        let ev = CanonicalEvent::from_value(event).map_err(ReduceError::InvalidEvent)?;
        if ev.run_id != self.config.run_id {
            return Err(ReduceError::RunIdMismatch {
                expected: self.config.run_id.clone(),
                found: ev.run_id,
            });
        }
        if let (Some(bound), Some(found)) = (&self.session_id, &ev.normalized_session_id) {
            if bound != found {
                return Err(ReduceError::SessionIdMismatch {
                    expected: bound.clone(),
                    found: found.clone(),
                });
            }
        }
        Ok(ev)
    }

    fn turn_mut(&mut self, turn_id: Option<&str>, create: bool) -> Option<&mut Turn> {
        let idx = match turn_id {
            Some(id) => match self
                .turns
                .iter()
                .position(|t| t.turn_id.as_deref() == Some(id))
            {
                Some(i) => Some(i),
                None => {
                    let last = self.turns.len().checked_sub(1);
                    match self.turns.last_mut() {
                        // A turn submitted without an id adopts the first id reported for it.
                        Some(t) if t.turn_id.is_none() => {
                            t.turn_id = Some(id.to_owned());
                            last
                        }
                        _ => None,
                    }
                }
            },
            None => self.turns.len().checked_sub(1),
        };
        match idx {
            Some(i) => self.turns.get_mut(i),
            None if create => {
                if self.turns.len() >= self.config.max_turns {
                    self.limits.dropped_turns = self.limits.dropped_turns.saturating_add(1);
                    return None;
                }
                self.turns.push(Turn {
                    turn_id: turn_id.map(str::to_owned),
                    state: "submitted".into(),
                    ..Turn::default()
                });
                self.turns.last_mut()
            }
            None => None,
        }
    }

    fn item_mut(&mut self, ev: &CanonicalEvent) -> Option<&mut Item> {
        let id = ev.item_id.clone()?;
        if !self.items.contains_key(&id) {
            if self.items.len() >= self.config.max_items {
                self.limits.dropped_items = self.limits.dropped_items.saturating_add(1);
                return None;
            }
            self.items.insert(
                id.clone(),
                Item {
                    item_id: id.clone(),
                    turn_id: ev.turn_id.clone(),
                    state: "started".into(),
                    ..Item::default()
                },
            );
        }
        self.items.get_mut(&id)
    }

    fn fold(&mut self, ev: &CanonicalEvent) {
        self.applied = self.applied.saturating_add(1);
        let count = self.event_counts.entry(ev.event_type.clone()).or_default();
        *count = count.saturating_add(1);
        if self.run_state == "idle" {
            self.run_state = "active".into();
        }
        let p = &ev.payload;
        let s = |k: &str| p.get(k).and_then(Value::as_str).map(str::to_owned);
        let et = ev.event_type.as_str();
        match et {
            "runtime.phase.changed" => self.run_phase = s("phase"),
            "workspace.ready" => self.workspace_ready = true,
            "harness.starting" | "harness.ready" | "harness.exited" => {
                self.harness
                    .insert("state".into(), et.trim_start_matches("harness.").into());
                for k in [
                    "driverKind",
                    "driverVersion",
                    "transport",
                    "processExit",
                    "semanticResultObserved",
                ] {
                    if let Some(v) = p.get(k) {
                        self.harness.insert(k.into(), v.clone());
                    }
                }
                if et == "harness.exited" {
                    self.logs = p.get("logs").cloned().unwrap_or(Value::Null);
                }
            }
            "harness.diagnostic" | "runner.diagnostic" => {
                if self.diagnostics.len() < self.config.max_diagnostics {
                    self.diagnostics.push(json!({"eventType": et, "code": p.get("code"), "message": p.get("message")}));
                } else {
                    self.limits.dropped_diagnostics =
                        self.limits.dropped_diagnostics.saturating_add(1);
                }
            }
            _ if et.starts_with("session.") => {
                self.session_state = et.trim_start_matches("session.").into();
                if let Some(d) = s("driverSessionId") {
                    self.driver_session_id = Some(d);
                }
            }
            _ if et.starts_with("turn.") => {
                let state = et.trim_start_matches("turn.").to_owned();
                let create = et == "turn.submitted" || et == "turn.started";
                let (text, reason) = (s("text"), s("reason"));
                if let Some(t) = self.turn_mut(ev.turn_id.as_deref(), create) {
                    t.state = state;
                    if text.is_some() {
                        t.text = text;
                    }
                    if reason.is_some() {
                        t.reason = reason;
                    }
                }
            }
            "item.started" | "item.delta" | "item.completed" | "item.failed" => {
                let max_deltas = self.config.max_deltas_per_item;
                let payload = Value::Object(p.clone());
                let (kind, text, message) = (s("kind"), s("text"), s("message"));
                if let Some(item) = self.item_mut(ev) {
                    if item.turn_id.is_none() {
                        item.turn_id = ev.turn_id.clone();
                    }
                    if kind.is_some() {
                        item.kind = kind;
                    }
                    match et {
                        "item.delta" => {
                            if item.state == "started" {
                                item.state = "streaming".into();
                            }
                            if item.deltas.len() < max_deltas {
                                item.deltas.push(payload);
                            } else {
                                item.dropped_deltas = item.dropped_deltas.saturating_add(1);
                            }
                        }
                        _ => {
                            item.state = et.trim_start_matches("item.").into();
                            if text.is_some() {
                                item.text = text;
                            }
                            if message.is_some() {
                                item.message = message;
                            }
                        }
                    }
                }
            }
            "runtime_request.created" => {
                let req = p.get("request").cloned().unwrap_or(Value::Null);
                if let Some(id) = req.get("requestId").and_then(Value::as_str) {
                    if !self.requests.contains_key(id)
                        && self.requests.len() >= self.config.max_requests
                    {
                        self.limits.dropped_requests =
                            self.limits.dropped_requests.saturating_add(1);
                    } else {
                        let r = Request {
                            request_id: id.to_owned(),
                            status: "pending".into(),
                            request_type: req
                                .get("type")
                                .and_then(Value::as_str)
                                .map(str::to_owned),
                            prompt: req.get("prompt").and_then(Value::as_str).map(str::to_owned),
                            response: Value::Null,
                            request: req.clone(),
                        };
                        self.requests.insert(id.to_owned(), r);
                    }
                }
            }
            "runtime_request.resolved"
            | "runtime_request.expired"
            | "runtime_request.cancelled" => {
                if let Some(r) = s("requestId").and_then(|id| self.requests.get_mut(&id)) {
                    r.status = et.trim_start_matches("runtime_request.").into();
                    if let Some(resp) = p.get("response") {
                        r.response = resp.clone();
                    }
                }
            }
            "run.result.proposed" => self.result = Value::Object(p.clone()),
            "run.terminal" => {
                self.terminal = Value::Object(p.clone());
                if let Some(st) = p
                    .get("runTerminalState")
                    .and_then(Value::as_str)
                    .and_then(RunTerminalState::from_str)
                {
                    self.run_state = st.as_str().into();
                }
            }
            _ => {}
        }
    }

    /// The snapshot as JSON (shape documented in `conformance/README.md`).
    pub fn snapshot(&self) -> Value {
        let pending: Vec<&Request> = self
            .requests
            .values()
            .filter(|r| r.status == "pending")
            .collect();
        let answered: Vec<&Request> = self
            .requests
            .values()
            .filter(|r| r.status != "pending")
            .collect();
        json!({
            "runId": self.config.run_id,
            "normalizedSessionId": self.session_id,
            "appliedEvents": self.applied,
            "eventCounts": self.event_counts,
            "cursors": self.cursors.iter().map(|((k, i), s)| json!({"sourceKind": k, "sourceInstanceId": i, "lastSourceSeq": s})).collect::<Vec<_>>(),
            "gaps": self.gaps,
            "run": {
                "state": self.run_state,
                "phase": self.run_phase,
                "workspaceReady": self.workspace_ready,
                "result": self.result,
            },
            "harness": Value::Object(self.harness.clone()),
            "session": {"state": self.session_state, "driverSessionId": self.driver_session_id},
            "turns": self.turns,
            "items": self.items.values().collect::<Vec<_>>(),
            "pendingRequests": pending,
            "answeredRequests": answered,
            "logs": self.logs,
            "diagnostics": self.diagnostics,
            "terminal": self.terminal,
            "limits": self.limits,
        })
    }

    /// Delivery anomalies, which do not affect the snapshot:
    /// `{duplicates, outOfOrderCount, outOfOrder: [{sourceEventId, sourceSeq, cursor}],
    /// rejected}`.
    pub fn delivery(&self) -> Value {
        json!({
            "duplicates": self.duplicates,
            "outOfOrderCount": self.out_of_order_count,
            "outOfOrder": self.out_of_order,
            "rejected": self.rejected,
        })
    }

    /// The configuration in force.
    pub fn config(&self) -> &ReducerConfig {
        &self.config
    }
}

/// Reduce a complete list of events with a fresh reducer (replay), ignoring rejected
/// ones; the result equals the live snapshot of the same accepted events.
pub fn replay(config: ReducerConfig, events: &[Value]) -> Value {
    let mut r = SessionReducer::new(config);
    for e in events {
        let _ = r.apply(e);
    }
    r.snapshot()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::local::{EventClock, EventFactory};

    #[test]
    fn gap_duplicate_and_out_of_order() {
        let mut f = EventFactory::new("r", "s", "i", EventClock::default());
        let evs: Vec<Value> = (0..4)
            .map(|_| f.next("workspace.ready", json!({}), None, None))
            .collect();
        let mut r = SessionReducer::new(ReducerConfig::for_run("r"));
        assert_eq!(r.apply(&evs[0]).unwrap(), Outcome::Applied);
        assert_eq!(
            r.apply(&evs[2]).unwrap(),
            Outcome::AppliedAfterGap {
                expected: 2,
                received: 3
            }
        );
        assert_eq!(r.apply(&evs[2]).unwrap(), Outcome::Duplicate);
        assert_eq!(r.apply(&evs[1]).unwrap(), Outcome::OutOfOrder { cursor: 3 });
        assert_eq!(r.snapshot()["appliedEvents"], 2);
        assert_eq!(r.snapshot()["gaps"][0]["expectedSourceSeq"], 2);
        let mut late = SessionReducer::new(ReducerConfig::for_run("r"));
        assert_eq!(
            late.apply(&evs[3]).unwrap(),
            Outcome::AppliedAfterGap {
                expected: 1,
                received: 4
            }
        );
        assert_eq!(late.snapshot()["gaps"][0]["expectedSourceSeq"], 1);
        let mut other = evs[3].clone();
        other["runId"] = json!("x");
        assert_eq!(r.apply(&other).unwrap_err().code(), "run_id_mismatch");
    }
}
