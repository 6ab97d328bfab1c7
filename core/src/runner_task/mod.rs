//! The connected runner's task policy (seed 000 end to end), sans-IO.
//!
//! A connected runner takes `task.assign` frames from a hub, runs each through a harness
//! and answers with `task.progress` frames and one `task.report`. The I/O (the socket,
//! the processes, the files) belongs to the host; the decisions every host must make the
//! same way live here:
//!
//! * [`Backoff`] — the reconnect schedule: capped exponential with "equal jitter" (half
//!   the capped delay fixed, half drawn from the host's randomness, which the host passes
//!   in as a number: the core has no randomness);
//! * [`admit`] — whether an assignment starts, or is answered at once because the runner
//!   is at its `max_tasks` bound or the task already runs;
//! * [`progress_from_local_event`] / [`progress_from_harness_event`] — which harness
//!   event becomes which `task.progress` (`kind`, `payload`), and which is not forwarded.
//!   Progress carries the shape of the work, never its content (no prompt, no output
//!   text);
//! * [`TaskOutcome`] and [`report_object`] — the end of a task as one TaskReport
//!   (`status` `done`, `blocked` or `failed`, a `failure_type` naming why, strict
//!   five-component usage), with [`outcome_from_local_terminal`] / [`local_outcome`]
//!   for a local-run `run.terminal` payload (and [`local_violation`], the violation that
//!   ended it);
//! * [`capabilities`] — the `hello.capabilities` a runner advertises: the reins of its
//!   catalog it can drive;
//! * [`TaskRun`] — one task from its assignment to its report: the gateway lifecycle,
//!   the per-task sandbox, the cancel rule, the failure codes (module [`run`]);
//! * [`default_catalog`] — the profiles a runner offers without `--profiles`;
//! * [`ConnectConfig`], [`Reconnect`], [`restart_plan`] — the connection's bounds and
//!   timings, the reconnect counter, and what a restarted runner reports (module
//!   [`connect`]).

use serde_json::Value as JsonValue;

pub mod connect;
pub mod run;

pub use connect::{
    restart_plan, ConnectConfig, Reconnect, RestartPlan, SavedSnapshot, DEFAULT_CLOSE_TIMEOUT_MS,
    DEFAULT_CONNECT_TIMEOUT_MS, DEFAULT_MAX_EVENT_BATCH, DEFAULT_MAX_QUEUED_MESSAGES,
    DEFAULT_MAX_TASKS, DEFAULT_SHUTDOWN_GRACE_MS,
};
pub use run::{
    execution_request, outcome_of_end, sandbox_name, settle, task_goal, tool_result_for,
    HarnessEnd, HarnessPlan, Rein, TaskRun, TaskRunConfig, TaskRunInput, TaskRunOutput,
    DEFAULT_CANCEL_BOUNDARY_MS, FAILURE_STAGE_KEY, HARNESS_LOST, HOST_ERROR_PREFIX,
    UNSUPPORTED_REIN, WORKING_DIRECTORY_KEY,
};

/// The tool the gateway dispatches for a task: run the harness on it.
pub const RUN_TASK_TOOL: &str = "run_task";
/// The rein of a harness that speaks the local-runner protocol (seed 002).
pub const REIN_LOCAL_RUN: &str = "local-run";
/// The rein of a seed-000 subprocess JSONL harness.
pub const REIN_SUBPROCESS: &str = "subprocess";

/// The JSON form of [`default_catalog`]: profile `fake` (rein `local-run`) and profile
/// `subprocess` (rein `subprocess`), both contract 1.0, model `local`, sandbox template
/// `process-group`, each allowed only the [`RUN_TASK_TOOL`] tool; and the two rein
/// descriptors.
pub fn default_catalog_value() -> JsonValue {
    let profile = |id: &str, rein: &str| {
        serde_json::json!({"contract_version": "1.0", "profile_id": id, "rein": rein,
            "model": "local", "sandbox_profile": "process-group",
            "tool_policy": {"allowed_tools": [RUN_TASK_TOOL]}})
    };
    serde_json::json!({
        "profiles": [profile("fake", REIN_LOCAL_RUN), profile("subprocess", REIN_SUBPROCESS)],
        "reins": [{"rein_id": REIN_LOCAL_RUN, "contract_version": "1.0"},
                  {"rein_id": REIN_SUBPROCESS, "contract_version": "1.0"}],
    })
}

/// The catalog a connected runner uses without `--profiles` (see
/// [`default_catalog_value`]).
pub fn default_catalog() -> crate::contract::Catalog {
    // The table above is a valid catalog (a unit test parses it).
    crate::contract::Catalog::from_value(&default_catalog_value()).unwrap_or_default()
}

use crate::json::Object;
use crate::wire::{progress_kind, report_status, UsageSplit, SCHEMA_VERSION};

/// Default first reconnect delay (before jitter): 250 ms.
pub const DEFAULT_BACKOFF_INITIAL_MS: u64 = 250;
/// Default longest reconnect delay (before jitter): 30 s.
pub const DEFAULT_BACKOFF_MAX_MS: u64 = 30_000;

/// The reconnect schedule: after the `n`-th consecutive failure (0-based) the capped
/// delay is `min(max_ms, initial_ms · 2ⁿ)`; the host waits half of it plus a random part
/// of the other half ("equal jitter"), so a fleet of runners cut at once does not return
/// at once, and no runner retries sooner than half the capped delay (no tight loop, even
/// when every attempt is refused at once, e.g. a bad token).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// First capped delay, ms (values below 1 act as 1).
    pub initial_ms: u64,
    /// Largest capped delay, ms.
    pub max_ms: u64,
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            initial_ms: DEFAULT_BACKOFF_INITIAL_MS,
            max_ms: DEFAULT_BACKOFF_MAX_MS,
        }
    }
}

impl Backoff {
    /// The capped delay after `failures` consecutive failures (0 = the first one).
    pub fn capped_ms(&self, failures: u32) -> u64 {
        let initial = self.initial_ms.max(1);
        let factor = 1u64.checked_shl(failures.min(63)).unwrap_or(u64::MAX);
        initial.saturating_mul(factor).min(self.max_ms.max(initial))
    }

    /// The delay to wait after `failures` consecutive failures: `capped/2 + random mod
    /// (capped − capped/2 + 1)`. `random` is any number from the host's random source.
    pub fn delay_ms(&self, failures: u32, random: u64) -> u64 {
        let capped = self.capped_ms(failures);
        let half = capped / 2;
        let span = capped.saturating_sub(half).saturating_add(1);
        half.saturating_add(random.checked_rem(span).unwrap_or(0))
    }
}

/// What the runner does with a new assignment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Start it.
    Start,
    /// Answer at once with a `failed` report (`failure_type` `runner_busy`): the runner
    /// already runs `max_tasks` tasks.
    Busy,
    /// Answer at once with a `failed` report (`failure_type` `attempt_in_progress`):
    /// another attempt of the same task is still running.
    Duplicate,
    /// Do nothing: the same attempt of the task is running already (a second report on
    /// its stream would make two); the running one reports.
    Ignore,
}

/// Decide on an assignment: `running` tasks run now, at most `max_tasks` at once (0 acts
/// as 1); `already_running` when an attempt of the same task id still runs. A duplicate
/// is checked first. See [`admit_attempt`] for the same attempt.
pub fn admit(running: usize, max_tasks: usize, already_running: bool) -> Admission {
    if already_running {
        Admission::Duplicate
    } else if running >= max_tasks.max(1) {
        Admission::Busy
    } else {
        Admission::Start
    }
}

/// [`admit`] knowing the attempts: `running_attempt` is the attempt of the same task id
/// that runs now, if any; the same attempt again is [`Admission::Ignore`].
pub fn admit_attempt(
    running: usize,
    max_tasks: usize,
    running_attempt: Option<u64>,
    attempt: u64,
) -> Admission {
    match running_attempt {
        Some(a) if a == attempt => Admission::Ignore,
        Some(_) => Admission::Duplicate,
        None => admit(running, max_tasks, false),
    }
}

/// A progress frame's `kind` and `payload`, before the session stamps it.
#[derive(Debug, Clone, PartialEq)]
pub struct ProgressItem {
    /// `state`, `tool`, `usage` or `controls` (open strings; only these are produced).
    pub kind: String,
    /// The payload.
    pub payload: Object,
}

fn item(kind: &str, payload: Object) -> ProgressItem {
    ProgressItem {
        kind: kind.to_owned(),
        payload,
    }
}

/// Copy a string field, with any secret it carries redacted
/// ([`redact_secrets`](crate::contract::safety::redact_secrets)): progress goes to the
/// hub, and harness output may paste a token anywhere.
fn copy_str(into: &mut Object, key: &str, from: &JsonValue, src: &str) {
    if let Some(s) = from.get(src).and_then(JsonValue::as_str) {
        into.insert(key, crate::contract::safety::redact_secrets(s).0);
    }
}

/// The progress for one `paperclip.runner.stream.v1` line of a local run (the message
/// object of the line, `{"kind": …, "event": …}`), or `None` when it is not forwarded.
///
/// | stream message | progress |
/// |---|---|
/// | not an `event` (receipts, diagnostics), or `run.terminal` (the report says it) | none |
/// | `item.delta` (content) | none |
/// | `item.*` | `tool` `{event, item_id?, item_kind?}` |
/// | `runtime_request.*` | `controls` `{event, request_type?}` |
/// | a payload with a `usage` object that maps onto a [`UsageSplit`] | `usage` `{event, usage}` |
/// | any other event | `state` `{event, phase?}` |
///
/// `event` is the canonical `eventType`; the other fields are copied from the event only
/// when they are strings (`itemId`, `payload.kind`, `payload.request.type`,
/// `payload.phase`), with any secret in them redacted. No text content is copied.
pub fn progress_from_local_event(message: &JsonValue) -> Option<ProgressItem> {
    if message.get("kind").and_then(JsonValue::as_str) != Some("event") {
        return None;
    }
    let event = message.get("event")?;
    let event_type = event.get("eventType").and_then(JsonValue::as_str)?;
    if event_type == "run.terminal" || event_type == "item.delta" {
        return None;
    }
    let empty = JsonValue::Null;
    let payload = event.get("payload").unwrap_or(&empty);
    let mut out = Object::new();
    out.insert(
        "event",
        crate::contract::safety::redact_secrets(event_type).0,
    );
    if event_type.starts_with("item.") {
        copy_str(&mut out, "item_id", event, "itemId");
        copy_str(&mut out, "item_kind", payload, "kind");
        return Some(item(progress_kind::TOOL, out));
    }
    if event_type.starts_with("runtime_request.") {
        if let Some(request) = payload.get("request") {
            copy_str(&mut out, "request_type", request, "type");
        }
        return Some(item(progress_kind::CONTROLS, out));
    }
    if let Some(split) = payload
        .get("usage")
        .and_then(|u| crate::adapter::usage_from_mapping(u).ok())
    {
        out.insert("usage", split.to_value());
        return Some(item(progress_kind::USAGE, out));
    }
    copy_str(&mut out, "phase", payload, "phase");
    Some(item(progress_kind::STATE, out))
}

/// The progress for one progress event of a subprocess JSONL harness (a stdout line whose
/// `type` is not `result` or `error`, as the turn machine passes it on).
///
/// | event `type` | progress |
/// |---|---|
/// | `tool` | `tool` `{event: "tool", name?}` |
/// | `usage` with a `usage` object that maps onto a [`UsageSplit`] | `usage` `{event: "usage", usage}` |
/// | `controls` | `controls` `{event: "controls"}` |
/// | anything else | `state` `{event: <type>, state?}` |
///
/// Only `name` (tool) and `state` (state) are copied, only when they are strings, and
/// with any secret in them redacted.
pub fn progress_from_harness_event(event: &JsonValue) -> ProgressItem {
    let ty = event
        .get("type")
        .and_then(JsonValue::as_str)
        .unwrap_or("event");
    let mut out = Object::new();
    out.insert("event", crate::contract::safety::redact_secrets(ty).0);
    match ty {
        "tool" => {
            copy_str(&mut out, "name", event, "name");
            item(progress_kind::TOOL, out)
        }
        "usage" => match event
            .get("usage")
            .and_then(|u| crate::adapter::usage_from_mapping(u).ok())
        {
            Some(split) => {
                out.insert("usage", split.to_value());
                item(progress_kind::USAGE, out)
            }
            None => item(progress_kind::STATE, out),
        },
        "controls" => item(progress_kind::CONTROLS, out),
        _ => {
            copy_str(&mut out, "state", event, "state");
            item(progress_kind::STATE, out)
        }
    }
}

/// How a task ended, as the runner knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TaskOutcome {
    /// The harness finished the work. Status `done`.
    Done,
    /// The harness stopped and needs an answer. Status `blocked`.
    Blocked,
    /// The harness run failed; `failure_type` names how (a stable code). Status `failed`.
    Failed {
        /// Stable code, e.g. `harness_failed`, `unexpected_eof`, `ready_timeout`.
        failure_type: String,
    },
    /// The hub cancelled the task. Status `failed`, `failure_type` `cancelled`.
    Cancelled {
        /// The cancel's reason.
        reason: String,
    },
    /// The harness profile was refused (resolution). Status `failed`, `failure_type`
    /// `profile_refused`.
    Refused {
        /// The refusal kind's code (`unknown`, `disabled`, …).
        code: String,
        /// The refusal's reasons.
        reasons: Vec<String>,
    },
    /// The assignment could not be read (`RoleSpec`, task). Status `failed`,
    /// `failure_type` `invalid_assignment`.
    InvalidAssignment {
        /// The error's stable code.
        code: String,
    },
    /// See [`Admission::Busy`]. Status `failed`, `failure_type` `runner_busy`.
    Busy {
        /// The runner's bound.
        max_tasks: usize,
    },
    /// See [`Admission::Duplicate`]. Status `failed`, `failure_type`
    /// `attempt_in_progress`.
    Duplicate,
    /// The runner restarted while the task ran (its harness died with it). Status
    /// `failed`, `failure_type` `runner_restarted`.
    RunnerRestarted,
    /// The runner shut down (SIGTERM/SIGINT) while the task ran. Status `failed`,
    /// `failure_type` `runner_shutdown`.
    Shutdown,
}

impl TaskOutcome {
    /// The report `status`: `done`, `blocked` or `failed`.
    pub fn status(&self) -> &'static str {
        match self {
            TaskOutcome::Done => report_status::DONE,
            TaskOutcome::Blocked => report_status::BLOCKED,
            _ => report_status::FAILED,
        }
    }

    /// The report `failure_type` (`None` for `done` and `blocked`).
    pub fn failure_type(&self) -> Option<&str> {
        Some(match self {
            TaskOutcome::Done | TaskOutcome::Blocked => return None,
            TaskOutcome::Failed { failure_type } => failure_type,
            TaskOutcome::Cancelled { .. } => "cancelled",
            TaskOutcome::Refused { .. } => "profile_refused",
            TaskOutcome::InvalidAssignment { .. } => "invalid_assignment",
            TaskOutcome::Busy { .. } => "runner_busy",
            TaskOutcome::Duplicate => "attempt_in_progress",
            TaskOutcome::RunnerRestarted => "runner_restarted",
            TaskOutcome::Shutdown => "runner_shutdown",
        })
    }

    /// One sentence for `summary_business` saying why (never content).
    pub fn summary(&self) -> String {
        match self {
            TaskOutcome::Done => "the harness finished the task".into(),
            TaskOutcome::Blocked => "the harness stopped and needs an answer".into(),
            TaskOutcome::Failed { failure_type } => {
                format!("the harness run failed ({failure_type})")
            }
            TaskOutcome::Cancelled { reason } => format!("cancelled by the hub: {reason}"),
            TaskOutcome::Refused { code, reasons } => {
                format!("harness profile refused ({code}): {}", reasons.join(", "))
            }
            TaskOutcome::InvalidAssignment { code } => {
                format!("the assignment could not be read ({code})")
            }
            TaskOutcome::Busy { max_tasks } => {
                format!("the runner already runs its maximum of {max_tasks} tasks")
            }
            TaskOutcome::Duplicate => "an attempt of this task is still running".into(),
            TaskOutcome::RunnerRestarted => {
                "the runner restarted while the task ran; its harness did not survive".into()
            }
            TaskOutcome::Shutdown => "the runner shut down while the task ran".into(),
        }
    }
}

/// The TaskReport object (taskspecs `task_report.v1`) for `outcome`: `schema_version`,
/// `task_id`, `status`, `summary_business`, `failure_type` (when failed) and `usage`.
/// Secrets in the text fields (a cancel reason, refusal reasons, a failure code) are
/// redacted with [`redact_secrets`](crate::contract::safety::redact_secrets), the key
/// staying readable (`cancelled by the hub: token=[redacted]`).
pub fn report_object(task_id: &str, outcome: &TaskOutcome, usage: &UsageSplit) -> Object {
    let mut o = Object::new();
    o.insert("schema_version", SCHEMA_VERSION);
    o.insert("task_id", task_id);
    o.insert("status", outcome.status());
    // The texts come from outside (a cancel's reason from the hub, a refusal's reasons,
    // a failure code a harness named): any secret in them is redacted.
    let redact = |t: &str| crate::contract::safety::redact_secrets(t).0;
    o.insert("summary_business", redact(&outcome.summary()));
    if let Some(f) = outcome.failure_type() {
        o.insert("failure_type", redact(f));
    }
    o.insert("usage", usage.to_value());
    o
}

/// The `reconciliation.reason`s of a failed local run (seed 002) that a report names as
/// its `failure_type`: the local run's own
/// [`FAILED_RUN_REASONS`](crate::local::FAILED_RUN_REASONS).
pub const LOCAL_FAILURE_REASONS: [&str; 4] = crate::local::FAILED_RUN_REASONS;

/// The outcome of a local run from its `run.terminal` payload (`runTerminalState`,
/// `reportedWorkDisposition`, `reconciliation.reason`): `succeeded` with `done` or
/// `needs_review` → done; `succeeded` with `blocked` or `yielded` → blocked; `cancelled`
/// → failed `run_cancelled`; `failed` or anything else → failed, the `failure_type`
/// being the reconciliation's reason when it is one of [`LOCAL_FAILURE_REASONS`], else
/// `harness_failed`.
pub fn outcome_from_local_terminal(payload: &JsonValue) -> TaskOutcome {
    local_outcome(payload, None)
}

/// The harness-violation code a local run's stream message carries, if it is one: a
/// `runner.diagnostic` event at level `error` whose `code` is one of
/// [`HARNESS_VIOLATION_CODES`](crate::local::HARNESS_VIOLATION_CODES) (`harness_ready_timeout`,
/// `harness_exited_before_ready`, …). A host keeps the first one it sees and passes it
/// with the terminal ([`HarnessEnd::LocalTerminal`]), so the report says exactly why.
pub fn local_violation(message: &JsonValue) -> Option<&'static str> {
    if message.get("kind").and_then(JsonValue::as_str) != Some("event") {
        return None;
    }
    let event = message.get("event")?;
    if event.get("eventType").and_then(JsonValue::as_str) != Some("runner.diagnostic") {
        return None;
    }
    let payload = event.get("payload")?;
    if payload.get("level").and_then(JsonValue::as_str) != Some("error") {
        return None;
    }
    let code = payload.get("code").and_then(JsonValue::as_str)?;
    crate::local::HARNESS_VIOLATION_CODES
        .iter()
        .copied()
        .find(|c| *c == code)
}

/// [`outcome_from_local_terminal`], with the run's harness violation (see
/// [`local_violation`]): a failed run whose reason is `harness_protocol_violation` (or
/// absent) with a violation names the violation as its `failure_type` (a violation code
/// that is not one of
/// [`HARNESS_VIOLATION_CODES`](crate::local::HARNESS_VIOLATION_CODES) is ignored).
pub fn local_outcome(payload: &JsonValue, violation: Option<&str>) -> TaskOutcome {
    let run = payload.get("runTerminalState").and_then(JsonValue::as_str);
    let disposition = payload
        .get("reportedWorkDisposition")
        .and_then(JsonValue::as_str);
    match (run, disposition) {
        (Some("succeeded"), Some("blocked" | "yielded")) => TaskOutcome::Blocked,
        (Some("succeeded"), _) => TaskOutcome::Done,
        (Some("cancelled"), _) => TaskOutcome::Failed {
            failure_type: "run_cancelled".into(),
        },
        _ => {
            let known = |list: &[&str], code: &str| list.contains(&code);
            let reason = payload
                .get("reconciliation")
                .and_then(|r| r.get("reason"))
                .and_then(JsonValue::as_str)
                .filter(|r| known(&LOCAL_FAILURE_REASONS, r));
            // The violation says why only a run that ended as a protocol violation (or
            // whose reason is unknown) failed.
            let violation = violation
                .filter(|v| known(&crate::local::HARNESS_VIOLATION_CODES, v))
                .filter(|_| reason.is_none_or(|r| r == crate::local::REASON_PROTOCOL_VIOLATION));
            TaskOutcome::Failed {
                failure_type: violation.or(reason).unwrap_or("harness_failed").into(),
            }
        }
    }
}

/// The `hello.capabilities` of a connected runner: the rein ids of the catalog's
/// profiles that this host can drive (`drivable`), each once, in the catalog's order.
/// A profile whose rein the host cannot drive is not advertised, so a hub that routes by
/// capability does not send its tasks here (one sent anyway fails: `unsupported_rein` for
/// a rein the core does not know; `stapel-runner connect` without `--jsonl-harness`
/// reports a `subprocess` task `no_command`).
pub fn capabilities(catalog: &crate::contract::Catalog, drivable: &[Rein]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for p in &catalog.profiles {
        let ok = Rein::from_id(&p.rein).is_some_and(|r| drivable.contains(&r));
        if ok && !out.contains(&p.rein) {
            out.push(p.rein.clone());
        }
    }
    out
}

/// The invocation key naming the harness profile explicitly.
pub const PROFILE_REF_KEY: &str = "harness_profile_ref";

/// The harness profile a role runs under: the invocation's `harness_profile_ref` (kept in
/// [`RoleSpec::extra`](crate::adapter::RoleSpec)) when it is a string, else its
/// `backend`, else `""` (which resolution refuses as `unknown`).
pub fn profile_ref(role: &crate::adapter::RoleSpec) -> &str {
    role.extra
        .get(PROFILE_REF_KEY)
        .and_then(JsonValue::as_str)
        .or(role.backend.as_deref())
        .unwrap_or("")
}

/// The task's outcome from the gateway's result and, when the harness ran, the harness's
/// own outcome: a refused resolution → [`TaskOutcome::Refused`] (code and reasons from
/// the evidence); a harness outcome, when there is one, wins over the gateway's (it says
/// why: cancelled, failed, blocked); a failed lifecycle without one (or after a harness
/// that finished, e.g. a failed teardown) →
/// [`TaskOutcome::Failed`] with the evidence's `failure_code`; success → done.
pub fn outcome_from_gateway(
    result: &crate::contract::GatewayResult,
    harness: Option<TaskOutcome>,
) -> TaskOutcome {
    use crate::contract::Outcome;
    let ev = &result.evidence;
    match (ev.outcome, harness) {
        (Outcome::Refused, _) => TaskOutcome::Refused {
            code: ev.failure_code.clone().unwrap_or_default(),
            reasons: ev.failure_reasons.clone(),
        },
        (_, Some(h)) if h != TaskOutcome::Done => h,
        (Outcome::Succeeded, _) => TaskOutcome::Done,
        _ => TaskOutcome::Failed {
            failure_type: ev
                .failure_code
                .clone()
                .unwrap_or_else(|| "gateway_failed".into()),
        },
    }
}

/// `true` when `value` is the JSON form of a usage progress payload this module builds
/// (a helper for hosts that check a payload before sending it).
pub fn is_usage_payload(payload: &Object) -> bool {
    payload
        .get("usage")
        .is_some_and(|u| UsageSplit::from_value(u).is_ok())
}

impl From<ProgressItem> for (String, Object) {
    fn from(p: ProgressItem) -> Self {
        (p.kind, p.payload)
    }
}

impl Admission {
    /// `start`, `busy`, `duplicate` or `ignore`.
    pub fn as_str(self) -> &'static str {
        match self {
            Admission::Start => "start",
            Admission::Busy => "busy",
            Admission::Duplicate => "duplicate",
            Admission::Ignore => "ignore",
        }
    }
}

impl ProgressItem {
    /// `{"kind": …, "payload": {…}}`.
    pub fn to_value(&self) -> JsonValue {
        serde_json::json!({"kind": self.kind, "payload": JsonValue::from(crate::json::Value::Object(self.payload.clone()))})
    }
}

impl TaskOutcome {
    /// JSON form: `{"type": "done" | "blocked" | "failed" | "cancelled" | "refused" |
    /// "invalid_assignment" | "busy" | "duplicate" | "runner_restarted" | "shutdown", …}` with the
    /// variant's fields (`failure_type`; `reason`; `code`, `reasons`; `code`;
    /// `max_tasks`).
    pub fn to_value(&self) -> JsonValue {
        use serde_json::json;
        match self {
            TaskOutcome::Done => json!({"type": "done"}),
            TaskOutcome::Blocked => json!({"type": "blocked"}),
            TaskOutcome::Failed { failure_type } => {
                json!({"type": "failed", "failure_type": failure_type})
            }
            TaskOutcome::Cancelled { reason } => json!({"type": "cancelled", "reason": reason}),
            TaskOutcome::Refused { code, reasons } => {
                json!({"type": "refused", "code": code, "reasons": reasons})
            }
            TaskOutcome::InvalidAssignment { code } => {
                json!({"type": "invalid_assignment", "code": code})
            }
            TaskOutcome::Busy { max_tasks } => json!({"type": "busy", "max_tasks": max_tasks}),
            TaskOutcome::Duplicate => json!({"type": "duplicate"}),
            TaskOutcome::RunnerRestarted => json!({"type": "runner_restarted"}),
            TaskOutcome::Shutdown => json!({"type": "shutdown"}),
        }
    }

    /// Parse the JSON form of [`to_value`](Self::to_value).
    ///
    /// # Errors
    /// `invalid_call` naming the bad field.
    pub fn from_value(v: &JsonValue) -> Result<Self, RunnerTaskError> {
        let s = |k: &str| -> Result<String, RunnerTaskError> {
            v.get(k)
                .and_then(JsonValue::as_str)
                .map(str::to_owned)
                .ok_or_else(|| invalid(format!("outcome.{k} must be a string")))
        };
        Ok(match v.get("type").and_then(JsonValue::as_str) {
            Some("done") => TaskOutcome::Done,
            Some("blocked") => TaskOutcome::Blocked,
            Some("failed") => TaskOutcome::Failed {
                failure_type: s("failure_type")?,
            },
            Some("cancelled") => TaskOutcome::Cancelled {
                reason: s("reason")?,
            },
            Some("refused") => TaskOutcome::Refused {
                code: s("code")?,
                reasons: strings(v.get("reasons"))
                    .ok_or_else(|| invalid("outcome.reasons must be an array of strings"))?,
            },
            Some("invalid_assignment") => TaskOutcome::InvalidAssignment { code: s("code")? },
            Some("busy") => TaskOutcome::Busy {
                max_tasks: v
                    .get("max_tasks")
                    .and_then(JsonValue::as_u64)
                    .and_then(|n| usize::try_from(n).ok())
                    .ok_or_else(|| invalid("outcome.max_tasks must be an integer"))?,
            },
            Some("duplicate") => TaskOutcome::Duplicate,
            Some("runner_restarted") => TaskOutcome::RunnerRestarted,
            Some("shutdown") => TaskOutcome::Shutdown,
            _ => return Err(invalid("outcome.type is not a known outcome")),
        })
    }
}

fn strings(v: Option<&JsonValue>) -> Option<Vec<String>> {
    v?.as_array()?
        .iter()
        .map(|x| x.as_str().map(str::to_owned))
        .collect()
}

/// A call of [`call`] that cannot be evaluated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RunnerTaskError {
    /// The call object is malformed. Code `invalid_call`.
    #[error("invalid call: {0}")]
    InvalidCall(String),
}

impl RunnerTaskError {
    /// Stable snake_case code.
    pub fn code(&self) -> &'static str {
        match self {
            RunnerTaskError::InvalidCall(_) => "invalid_call",
        }
    }
}

fn invalid(msg: impl Into<String>) -> RunnerTaskError {
    RunnerTaskError::InvalidCall(msg.into())
}

/// Every decision of this module in JSON form, so that a binding exposes the whole policy
/// through one function (and conformance vectors exercise it). The call object has
/// exactly one key:
///
/// | call | result |
/// |---|---|
/// | `{"backoff": {"initial_ms"?, "max_ms"?, "failures", "random"}}` | `{"capped_ms", "delay_ms"}` (absent bounds: the defaults) |
/// | `{"admit": {"running", "max_tasks", "already_running", "same_attempt"?}}` | `"start"`, `"busy"`, `"duplicate"` or (the same attempt running) `"ignore"` |
/// | `{"local_event": <stream message>}` | `{"kind","payload"}` or `null` |
/// | `{"harness_event": <event>}` | `{"kind","payload"}` |
/// | `{"report": {"task_id", "outcome": <outcome>, "usage"?: <UsageSplit>}}` | the TaskReport object |
/// | `{"local_terminal": <run.terminal payload>}` | an outcome |
/// | `{"local_end": {"payload": <run.terminal payload>, "violation"?}}` | an outcome ([`local_outcome`]) |
/// | `{"local_violation": <stream message>}` | a violation code or `null` ([`local_violation`]) |
/// | `{"capabilities": {"catalog"?, "drivable": [rein id…]}}` | the capability strings ([`capabilities`]; absent catalog: the default) |
/// | `{"profile_ref": {"invocation": {…}, "role"?}}` | a string |
/// | `{"gateway_outcome": {"result": <GatewayResult>, "harness"?: <outcome> or null}}` | an outcome |
/// | `{"task_run": {"assign", "catalog"?, "config"?, "inputs"}}` | the [`TaskRun`] scenario's outputs (see [`run::scenario`]) |
/// | `{"default_catalog": {}}` | the catalog JSON of [`default_catalog_value`] |
/// | `{"sandbox_name": {"task_id", "attempt"}}` | a string ([`sandbox_name`]) |
/// | `{"tool_result": <outcome>}` | the `run_task` ToolResult ([`tool_result_for`]) |
/// | `{"connect_config": {"config": {…}, "peer_timeout_ms"}}` | the resolved [`ConnectConfig`] |
/// | `{"reconnect": {"backoff"?, "events"}}` | the delays ([`connect::reconnect_call`]) |
/// | `{"restart": {"snapshot", "tasks"}}` | the [`RestartPlan`] ([`connect::restart_call`]) |
///
/// # Errors
/// `invalid_call` for a malformed call (a `RoleSpec` or `GatewayResult` error keeps its
/// own code in the text).
pub fn call(input: &JsonValue) -> Result<JsonValue, RunnerTaskError> {
    let obj = input
        .as_object()
        .filter(|o| o.len() == 1)
        .ok_or_else(|| invalid("a call is an object with exactly one key"))?;
    let Some((name, arg)) = obj.iter().next() else {
        return Err(invalid("empty call"));
    };
    let u64_at = |k: &str| -> Result<u64, RunnerTaskError> {
        arg.get(k)
            .and_then(JsonValue::as_u64)
            .ok_or_else(|| invalid(format!("{name}.{k} must be a non-negative integer")))
    };
    match name.as_str() {
        "backoff" => {
            let d = Backoff::default();
            let b = Backoff {
                initial_ms: arg
                    .get("initial_ms")
                    .and_then(JsonValue::as_u64)
                    .unwrap_or(d.initial_ms),
                max_ms: arg
                    .get("max_ms")
                    .and_then(JsonValue::as_u64)
                    .unwrap_or(d.max_ms),
            };
            let failures = u32::try_from(u64_at("failures")?).unwrap_or(u32::MAX);
            let random = u64_at("random")?;
            Ok(
                serde_json::json!({"capped_ms": b.capped_ms(failures), "delay_ms": b.delay_ms(failures, random)}),
            )
        }
        "admit" => {
            let n = |k: &str| u64_at(k).map(|v| usize::try_from(v).unwrap_or(usize::MAX));
            let dup = arg
                .get("already_running")
                .and_then(JsonValue::as_bool)
                .ok_or_else(|| invalid("admit.already_running must be a boolean"))?;
            let same = match arg.get("same_attempt") {
                None => false,
                Some(v) => v
                    .as_bool()
                    .ok_or_else(|| invalid("admit.same_attempt must be a boolean"))?,
            };
            let running_attempt = match (dup, same) {
                (false, _) => None,
                (true, true) => Some(1),
                (true, false) => Some(0),
            };
            Ok(JsonValue::from(
                admit_attempt(n("running")?, n("max_tasks")?, running_attempt, 1).as_str(),
            ))
        }
        "local_event" => {
            Ok(progress_from_local_event(arg).map_or(JsonValue::Null, |p| p.to_value()))
        }
        "harness_event" => Ok(progress_from_harness_event(arg).to_value()),
        "report" => {
            let task_id = arg
                .get("task_id")
                .and_then(JsonValue::as_str)
                .ok_or_else(|| invalid("report.task_id must be a string"))?;
            let outcome = TaskOutcome::from_value(arg.get("outcome").unwrap_or(&JsonValue::Null))?;
            let usage = match arg.get("usage") {
                None => UsageSplit::default(),
                Some(u) => UsageSplit::from_value(&crate::json::Value::from(u))
                    .map_err(|e| invalid(format!("report.usage: {e}")))?,
            };
            Ok(JsonValue::from(crate::json::Value::Object(report_object(
                task_id, &outcome, &usage,
            ))))
        }
        "local_terminal" => Ok(outcome_from_local_terminal(arg).to_value()),
        "local_end" => {
            let violation = match arg.get("violation") {
                None | Some(JsonValue::Null) => None,
                Some(v) => Some(
                    v.as_str()
                        .ok_or_else(|| invalid("local_end.violation must be a string"))?,
                ),
            };
            let payload = arg
                .get("payload")
                .ok_or_else(|| invalid("local_end.payload is required"))?;
            Ok(local_outcome(payload, violation).to_value())
        }
        "local_violation" => Ok(local_violation(arg).map_or(JsonValue::Null, JsonValue::from)),
        "capabilities" => {
            let catalog = match arg.get("catalog") {
                None => default_catalog(),
                Some(c) => crate::contract::Catalog::from_value(c)
                    .map_err(|e| invalid(format!("{}: {e}", e.code())))?,
            };
            let drivable = arg
                .get("drivable")
                .and_then(JsonValue::as_array)
                .ok_or_else(|| invalid("capabilities.drivable must be an array"))?
                .iter()
                .map(|r| {
                    r.as_str().and_then(Rein::from_id).ok_or_else(|| {
                        invalid("capabilities.drivable holds rein ids (local-run, subprocess)")
                    })
                })
                .collect::<Result<Vec<_>, _>>()?;
            Ok(JsonValue::from(capabilities(&catalog, &drivable)))
        }
        "profile_ref" => {
            let inv = arg
                .get("invocation")
                .and_then(JsonValue::as_object)
                .ok_or_else(|| invalid("profile_ref.invocation must be an object"))?;
            let role = arg.get("role").and_then(JsonValue::as_str);
            let spec = crate::adapter::RoleSpec::from_invocation(inv, role)
                .map_err(|e| invalid(format!("{}: {e}", e.code())))?;
            Ok(JsonValue::from(profile_ref(&spec)))
        }
        "gateway_outcome" => {
            let result = crate::contract::GatewayResult::from_value(
                arg.get("result").unwrap_or(&JsonValue::Null),
            )
            .map_err(|e| invalid(format!("{}: {e}", e.code())))?;
            let harness = match arg.get("harness") {
                None | Some(JsonValue::Null) => None,
                Some(h) => Some(TaskOutcome::from_value(h)?),
            };
            Ok(outcome_from_gateway(&result, harness).to_value())
        }
        "task_run" => run::scenario(arg).map_err(invalid),
        "default_catalog" => Ok(default_catalog_value()),
        "sandbox_name" => {
            let task_id = arg
                .get("task_id")
                .and_then(JsonValue::as_str)
                .ok_or_else(|| invalid("sandbox_name.task_id must be a string"))?;
            Ok(JsonValue::from(sandbox_name(task_id, u64_at("attempt")?)))
        }
        "tool_result" => Ok(tool_result_for(&TaskOutcome::from_value(arg)?).to_value()),
        "connect_config" => {
            let cfg = ConnectConfig::from_value(arg.get("config").unwrap_or(&JsonValue::Null))
                .map_err(|e| invalid(format!("{}: {e}", e.code())))?;
            Ok(cfg.to_value(u64_at("peer_timeout_ms")?))
        }
        "reconnect" => connect::reconnect_call(arg).map_err(invalid),
        "restart" => connect::restart_call(arg).map_err(invalid),
        other => Err(invalid(format!("unknown call {other:?}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::Value;
    use serde_json::json;

    #[test]
    fn the_default_catalog_table_is_a_valid_catalog() {
        let c = default_catalog();
        let ids: Vec<_> = c.profiles.iter().map(|p| p.profile_id.as_str()).collect();
        assert_eq!(ids, ["fake", "subprocess"]);
        assert_eq!(c.reins.len(), 2);
    }

    #[test]
    fn a_task_run_reports_exactly_once_and_ignores_inputs_after_it() {
        let mut a = crate::wire::TaskAssign::new(
            Object::new(),
            "coder",
            match Value::from(json!({"backend": "fake"})) {
                Value::Object(o) => o,
                _ => Object::new(),
            },
        );
        a.task_id = "T-1".into();
        a.attempt = 1;
        let mut run = TaskRun::new(0, TaskRunConfig::default(), default_catalog(), &a);
        let mut reports = 0;
        let inputs = [
            TaskRunInput::SandboxCreated { path: "/w".into() },
            TaskRunInput::HarnessEnded(HarnessEnd::Lost),
            TaskRunInput::SandboxDestroyed,
            TaskRunInput::Cancel {
                reason: "late".into(),
            },
            TaskRunInput::HarnessEnded(HarnessEnd::Lost),
            TaskRunInput::SandboxDestroyed,
        ];
        for (t, i) in inputs.into_iter().enumerate() {
            run.handle_input(t as u64, i);
            while let Some(o) = run.poll_output() {
                if let TaskRunOutput::Report { outcome, .. } = o {
                    reports += 1;
                    assert_eq!(outcome.failure_type(), Some(HARNESS_LOST));
                }
            }
        }
        assert_eq!(reports, 1);
        assert!(run.is_finished());
        assert_eq!(run.poll_timeout(), None);
    }

    #[test]
    fn backoff_doubles_caps_and_jitters_within_the_upper_half() {
        let b = Backoff {
            initial_ms: 100,
            max_ms: 1_000,
        };
        assert_eq!(
            (0..6).map(|n| b.capped_ms(n)).collect::<Vec<_>>(),
            [100, 200, 400, 800, 1000, 1000]
        );
        assert_eq!(b.capped_ms(400), 1000);
        for n in 0..8 {
            let c = b.capped_ms(n);
            for r in [0, 1, 7, 999, u64::MAX] {
                let d = b.delay_ms(n, r);
                assert!(d >= c / 2 && d <= c, "{n} {r} {d}");
            }
        }
        assert_eq!(b.delay_ms(0, 0), 50);
        assert_eq!(b.delay_ms(0, 50), 100);
        assert_eq!(b.delay_ms(0, 51), 50);
    }

    #[test]
    fn admission_checks_duplicates_then_the_bound() {
        assert_eq!(admit(0, 2, false), Admission::Start);
        assert_eq!(admit(2, 2, false), Admission::Busy);
        assert_eq!(admit(0, 2, true), Admission::Duplicate);
        assert_eq!(admit(0, 0, false), Admission::Start);
        assert_eq!(admit(1, 0, false), Admission::Busy);
    }

    #[test]
    fn local_events_map_to_progress_without_content() {
        let ev = |t: &str, payload: JsonValue| json!({"kind": "event", "event": {"eventType": t, "itemId": "i1", "payload": payload}});
        let p = progress_from_local_event(&ev(
            "item.started",
            json!({"kind": "command", "text": "secret"}),
        ))
        .unwrap();
        assert_eq!(p.kind, "tool");
        assert_eq!(
            JsonValue::from(Value::Object(p.payload)),
            json!({"event": "item.started", "item_id": "i1", "item_kind": "command"})
        );
        assert!(progress_from_local_event(&ev("item.delta", json!({"text": "x"}))).is_none());
        assert!(progress_from_local_event(&ev("run.terminal", json!({}))).is_none());
        assert!(progress_from_local_event(&json!({"kind": "command_receipt"})).is_none());
        let p =
            progress_from_local_event(&ev("runtime.phase.changed", json!({"phase": "running"})))
                .unwrap();
        assert_eq!(
            (
                p.kind.as_str(),
                p.payload.get("phase").and_then(Value::as_str)
            ),
            ("state", Some("running"))
        );
        let p = progress_from_local_event(&ev(
            "runtime_request.created",
            json!({"request": {"type": "permission"}}),
        ))
        .unwrap();
        assert_eq!(p.kind, "controls");
        let p = progress_from_local_event(&ev(
            "x.usage",
            json!({"usage": {"input_tokens": 3, "output_tokens": 1}}),
        ))
        .unwrap();
        assert_eq!(p.kind, "usage");
        assert!(is_usage_payload(&p.payload));
    }

    #[test]
    fn harness_events_map_to_progress() {
        assert_eq!(
            progress_from_harness_event(&json!({"type": "tool", "name": "bash", "args": "x"})).kind,
            "tool"
        );
        let u =
            progress_from_harness_event(&json!({"type": "usage", "usage": {"input_tokens": 1}}));
        assert_eq!(u.kind, "usage");
        assert!(is_usage_payload(&u.payload));
        assert_eq!(
            progress_from_harness_event(&json!({"type": "usage", "usage": 3})).kind,
            "state"
        );
        let s = progress_from_harness_event(&json!({"type": "thinking", "state": "planning"}));
        assert_eq!((s.kind.as_str(), s.payload.len()), ("state", 2));
    }

    #[test]
    fn reports_are_valid_task_reports() {
        let usage = UsageSplit::default();
        for (o, status) in [
            (TaskOutcome::Done, "done"),
            (TaskOutcome::Blocked, "blocked"),
            (TaskOutcome::Busy { max_tasks: 2 }, "failed"),
            (TaskOutcome::Cancelled { reason: "r".into() }, "failed"),
            (
                TaskOutcome::Refused {
                    code: "unknown".into(),
                    reasons: vec!["profile_not_found".into()],
                },
                "failed",
            ),
        ] {
            let r = report_object("T-1", &o, &usage);
            let typed = crate::wire::TaskReport::from_object(&r).unwrap();
            assert_eq!(typed.status, status);
            assert_eq!(typed.failure_type.as_deref(), o.failure_type());
        }
    }

    #[test]
    fn local_terminal_outcomes() {
        let t = |r: &str, d: &str| {
            outcome_from_local_terminal(
                &json!({"runTerminalState": r, "reportedWorkDisposition": d}),
            )
        };
        assert_eq!(t("succeeded", "done"), TaskOutcome::Done);
        assert_eq!(t("succeeded", "needs_review"), TaskOutcome::Done);
        assert_eq!(t("succeeded", "blocked"), TaskOutcome::Blocked);
        assert_eq!(t("failed", "done").status(), "failed");
        assert_eq!(t("cancelled", "done").failure_type(), Some("run_cancelled"));
    }
}
