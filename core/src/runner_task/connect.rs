//! The connected runner's connection policy, sans-IO: its bounds and timings
//! ([`ConnectConfig`]), its reconnect counter ([`Reconnect`]) and what a restart does
//! ([`restart_plan`]).

use std::collections::BTreeMap;

use serde_json::{json, Value as JsonValue};

use super::{report_object, Backoff, TaskOutcome};
use crate::config::{ConfigError, ConfigReader};
use crate::json::Object;
use crate::wire::UsageSplit;

/// Default [`ConnectConfig::max_tasks`]: 4.
pub const DEFAULT_MAX_TASKS: usize = 4;
/// Default [`ConnectConfig::connect_timeout_ms`]: the link's, 10 s.
pub use crate::link::DEFAULT_CONNECT_TIMEOUT_MS;
/// Default [`ConnectConfig::shutdown_grace_ms`]: 5 s.
pub const DEFAULT_SHUTDOWN_GRACE_MS: u64 = 5_000;
/// Default [`ConnectConfig::close_timeout_ms`]: the core's one close bound, 2 s.
pub use crate::host::DEFAULT_CLOSE_TIMEOUT_MS;
/// Default [`ConnectConfig::max_queued_messages`]: 64.
pub const DEFAULT_MAX_QUEUED_MESSAGES: usize = 64;
/// Default [`ConnectConfig::max_event_batch`]: 256.
pub const DEFAULT_MAX_EVENT_BATCH: usize = 256;
/// Smallest write timeout derived from the dead-peer timeout: 1 s.
pub const MIN_DERIVED_WRITE_TIMEOUT_MS: u64 = 1_000;
/// Largest write timeout derived from the dead-peer timeout (and the one used when the
/// dead-peer timeout is off): 30 s.
pub const MAX_DERIVED_WRITE_TIMEOUT_MS: u64 = 30_000;

/// Bounds and timings of `stapel-runner connect` (besides the session's own,
/// [`SessionConfig`](crate::session::SessionConfig)). Every field has a documented
/// default.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConnectConfig {
    /// Most tasks running at once; further assignments are answered `runner_busy`.
    /// Default [`DEFAULT_MAX_TASKS`] (0 acts as 1).
    pub max_tasks: usize,
    /// Longest TCP + TLS + upgrade time of one connect, ms. Default
    /// [`DEFAULT_CONNECT_TIMEOUT_MS`].
    pub connect_timeout_ms: u64,
    /// Longest time one batch of frames may take to reach the socket before the
    /// connection counts as dead, ms; `None` derives it from the dead-peer timeout (see
    /// [`write_timeout_ms`](Self::write_timeout_ms)).
    pub write_timeout_ms: Option<u64>,
    /// On SIGTERM/SIGINT: the longest the runner waits for its cancelled tasks' reports
    /// to be acknowledged before it exits, ms. Default [`DEFAULT_SHUTDOWN_GRACE_MS`].
    pub shutdown_grace_ms: u64,
    /// Longest wait for a WebSocket close handshake, ms (then the socket is aborted; the
    /// runner does not wait for it). Default [`DEFAULT_CLOSE_TIMEOUT_MS`].
    pub close_timeout_ms: u64,
    /// Most task messages (progress, reports) queued for the session while its kept log
    /// is full; beyond it the runner stops taking task events (the harnesses then block
    /// on their pipes: backpressure). Default [`DEFAULT_MAX_QUEUED_MESSAGES`].
    pub max_queued_messages: usize,
    /// Most task events taken in one turn of the loop (one durable save covers them
    /// all). Default [`DEFAULT_MAX_EVENT_BATCH`] (0 acts as 1).
    pub max_event_batch: usize,
    /// The reconnect schedule.
    pub backoff: Backoff,
    /// The tasks' configuration (the cancel boundary wait).
    pub task: super::TaskRunConfig,
}

impl Default for ConnectConfig {
    fn default() -> Self {
        Self {
            max_tasks: DEFAULT_MAX_TASKS,
            connect_timeout_ms: DEFAULT_CONNECT_TIMEOUT_MS,
            write_timeout_ms: None,
            shutdown_grace_ms: DEFAULT_SHUTDOWN_GRACE_MS,
            close_timeout_ms: DEFAULT_CLOSE_TIMEOUT_MS,
            max_queued_messages: DEFAULT_MAX_QUEUED_MESSAGES,
            max_event_batch: DEFAULT_MAX_EVENT_BATCH,
            backoff: Backoff::default(),
            task: super::TaskRunConfig::default(),
        }
    }
}

impl ConnectConfig {
    /// The keys of the JSON form (`backoff_initial_ms` / `backoff_max_ms` for
    /// [`backoff`](Self::backoff), `cancel_boundary_ms` for [`task`](Self::task)).
    pub const KEYS: [&'static str; 10] = [
        "max_tasks",
        "connect_timeout_ms",
        "write_timeout_ms",
        "shutdown_grace_ms",
        "close_timeout_ms",
        "max_queued_messages",
        "max_event_batch",
        "backoff_initial_ms",
        "backoff_max_ms",
        "cancel_boundary_ms",
    ];

    /// Defaults overridden by the keys present in `value`.
    ///
    /// # Errors
    /// `not_an_object`, `unknown_key`, `wrong_type`, `out_of_range`.
    pub fn from_value(value: &JsonValue) -> Result<Self, ConfigError> {
        let r = ConfigReader::new(value, &Self::KEYS)?;
        let d = Self::default();
        Ok(Self {
            max_tasks: r.usize("max_tasks")?.unwrap_or(d.max_tasks),
            connect_timeout_ms: r.u64("connect_timeout_ms")?.unwrap_or(d.connect_timeout_ms),
            write_timeout_ms: r.u64("write_timeout_ms")?.or(d.write_timeout_ms),
            shutdown_grace_ms: r.u64("shutdown_grace_ms")?.unwrap_or(d.shutdown_grace_ms),
            close_timeout_ms: r.u64("close_timeout_ms")?.unwrap_or(d.close_timeout_ms),
            max_queued_messages: r
                .usize("max_queued_messages")?
                .unwrap_or(d.max_queued_messages),
            max_event_batch: r.usize("max_event_batch")?.unwrap_or(d.max_event_batch),
            backoff: Backoff {
                initial_ms: r.u64("backoff_initial_ms")?.unwrap_or(d.backoff.initial_ms),
                max_ms: r.u64("backoff_max_ms")?.unwrap_or(d.backoff.max_ms),
            },
            task: super::TaskRunConfig {
                cancel_boundary_ms: r
                    .u64("cancel_boundary_ms")?
                    .unwrap_or(d.task.cancel_boundary_ms),
            },
        })
    }

    /// The JSON form with every value resolved (`write_timeout_ms` for a session whose
    /// dead-peer timeout is `peer_timeout_ms`).
    pub fn to_value(&self, peer_timeout_ms: u64) -> JsonValue {
        json!({
            "max_tasks": self.max_tasks.max(1),
            "connect_timeout_ms": self.connect_timeout_ms,
            "write_timeout_ms": self.write_timeout_ms(peer_timeout_ms),
            "shutdown_grace_ms": self.shutdown_grace_ms,
            "close_timeout_ms": self.close_timeout_ms,
            "max_queued_messages": self.max_queued_messages,
            "max_event_batch": self.max_event_batch.max(1),
            "backoff_initial_ms": self.backoff.initial_ms,
            "backoff_max_ms": self.backoff.max_ms,
            "cancel_boundary_ms": self.task.cancel_boundary_ms,
        })
    }

    /// The [`LinkConfig`](crate::link::LinkConfig) of the runner's connection: this
    /// config's connect and close timeouts and backoff over `session`, the link's
    /// defaults for the rest.
    pub fn link_config(&self, session: crate::session::SessionConfig) -> crate::link::LinkConfig {
        crate::link::LinkConfig {
            session,
            connect_timeout_ms: self.connect_timeout_ms,
            close_timeout_ms: self.close_timeout_ms,
            backoff: self.backoff,
            ..crate::link::LinkConfig::default()
        }
    }

    /// The write timeout in force: the configured one, else the session's dead-peer
    /// timeout clamped to [[`MIN_DERIVED_WRITE_TIMEOUT_MS`],
    /// [`MAX_DERIVED_WRITE_TIMEOUT_MS`]] (a write stuck longer than the peer may stay
    /// silent means the peer is gone; while the loop writes, no timer runs), or
    /// [`MAX_DERIVED_WRITE_TIMEOUT_MS`] when the dead-peer timeout is off (0).
    pub fn write_timeout_ms(&self, peer_timeout_ms: u64) -> u64 {
        match (self.write_timeout_ms, peer_timeout_ms) {
            (Some(ms), _) => ms,
            (None, 0) => MAX_DERIVED_WRITE_TIMEOUT_MS,
            (None, p) => p.clamp(MIN_DERIVED_WRITE_TIMEOUT_MS, MAX_DERIVED_WRITE_TIMEOUT_MS),
        }
    }
}

/// The reconnect counter over a [`Backoff`]: consecutive failures since the last
/// connection that delivered a frame.
///
/// A connect that fails (refused, timed out, the upgrade rejected — a bad token
/// included) counts one more failure. A connection that is lost counts one more too,
/// unless it delivered at least one frame from the hub: then the count starts again at
/// 0 (the link worked; a new cut is a new incident). So a hub that accepts the upgrade
/// and drops every connection before saying anything still backs off exponentially.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reconnect {
    backoff: Backoff,
    failures: u32,
}

impl Reconnect {
    /// A counter at 0 failures.
    pub fn new(backoff: Backoff) -> Self {
        Self {
            backoff,
            failures: 0,
        }
    }

    /// Consecutive failures counted so far.
    pub fn failures(&self) -> u32 {
        self.failures
    }

    /// A connect failed: the delay before the next attempt (`random` from the host).
    pub fn connect_failed(&mut self, random: u64) -> u64 {
        self.next(random)
    }

    /// A connection was lost; `received_frame`: it delivered at least one frame. The
    /// delay before the next attempt.
    pub fn connection_lost(&mut self, received_frame: bool, random: u64) -> u64 {
        if received_frame {
            self.failures = 0;
        }
        self.next(random)
    }

    fn next(&mut self, random: u64) -> u64 {
        let delay = self.backoff.delay_ms(self.failures, random);
        self.failures = self.failures.saturating_add(1);
        delay
    }
}

/// What the saved session state looked like at a restart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SavedSnapshot {
    /// No state was saved (a first start).
    Absent,
    /// The snapshot restores.
    Readable,
    /// The snapshot does not restore (corrupt, or from an incompatible version).
    Unreadable,
}

/// What a runner restarted from its state directory does.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct RestartPlan {
    /// Start with a fresh sequencing state (the saved one is unreadable or absent). A
    /// fresh state is unconfirmed like any restored one: the session's barrier re-stamps
    /// what the hub has not seen, so nothing is applied twice.
    pub fresh_state: bool,
    /// The reports to send at once: every task that was started and not reported ran in
    /// the old process, whose harness died with it — each becomes a `failed` report
    /// (`runner_restarted`), `(task_id, attempt, report)`.
    pub reports: Vec<(String, u64, Object)>,
}

/// The restart plan for a saved snapshot and the saved started-and-unreported tasks
/// (task id → attempt).
pub fn restart_plan(snapshot: SavedSnapshot, tasks: &BTreeMap<String, u64>) -> RestartPlan {
    RestartPlan {
        fresh_state: snapshot != SavedSnapshot::Readable,
        reports: tasks
            .iter()
            .map(|(t, a)| {
                (
                    t.clone(),
                    *a,
                    report_object(t, &TaskOutcome::RunnerRestarted, &UsageSplit::default()),
                )
            })
            .collect(),
    }
}

/// The `reconnect` call: `{"backoff"?: {"initial_ms"?, "max_ms"?}, "events":
/// [{"connect_failed": {"random"}} | {"lost": {"received_frame", "random"}}…]}` →
/// `[{"delay_ms", "failures"}…]` (the failures counted after each event).
///
/// # Errors
/// A text naming the bad field.
pub fn reconnect_call(arg: &JsonValue) -> Result<JsonValue, String> {
    let d = Backoff::default();
    let b = arg.get("backoff");
    let get = |k: &str, dflt: u64| {
        b.and_then(|b| b.get(k))
            .and_then(JsonValue::as_u64)
            .unwrap_or(dflt)
    };
    let mut r = Reconnect::new(Backoff {
        initial_ms: get("initial_ms", d.initial_ms),
        max_ms: get("max_ms", d.max_ms),
    });
    let events = arg
        .get("events")
        .and_then(JsonValue::as_array)
        .ok_or("reconnect.events must be an array")?;
    let mut out = Vec::new();
    for e in events {
        let random = |v: &JsonValue| {
            v.get("random")
                .and_then(JsonValue::as_u64)
                .ok_or("reconnect event random must be a non-negative integer")
        };
        let delay = if let Some(v) = e.get("connect_failed") {
            r.connect_failed(random(v)?)
        } else if let Some(v) = e.get("lost") {
            let got = v
                .get("received_frame")
                .and_then(JsonValue::as_bool)
                .ok_or("reconnect lost.received_frame must be a boolean")?;
            r.connection_lost(got, random(v)?)
        } else {
            return Err("a reconnect event is {\"connect_failed\"} or {\"lost\"}".into());
        };
        out.push(json!({"delay_ms": delay, "failures": r.failures()}));
    }
    Ok(JsonValue::Array(out))
}

/// The `restart` call: `{"snapshot": "absent" | "readable" | "unreadable", "tasks":
/// {task_id: attempt}}` → `{"fresh_state", "reports": [{"task_id", "attempt",
/// "report"}…]}`.
///
/// # Errors
/// A text naming the bad field.
pub fn restart_call(arg: &JsonValue) -> Result<JsonValue, String> {
    let snapshot = match arg.get("snapshot").and_then(JsonValue::as_str) {
        Some("absent") => SavedSnapshot::Absent,
        Some("readable") => SavedSnapshot::Readable,
        Some("unreadable") => SavedSnapshot::Unreadable,
        _ => return Err("restart.snapshot must be absent, readable or unreadable".into()),
    };
    let mut tasks = BTreeMap::new();
    for (k, v) in arg
        .get("tasks")
        .and_then(JsonValue::as_object)
        .ok_or("restart.tasks must be an object")?
    {
        tasks.insert(
            k.clone(),
            v.as_u64()
                .ok_or("restart.tasks values must be non-negative integers")?,
        );
    }
    let plan = restart_plan(snapshot, &tasks);
    Ok(json!({
        "fresh_state": plan.fresh_state,
        "reports": plan.reports.into_iter().map(|(t, a, r)| json!({"task_id": t, "attempt": a,
            "report": JsonValue::from(crate::json::Value::Object(r))})).collect::<Vec<_>>(),
    }))
}
