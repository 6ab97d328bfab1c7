//! Area `reducer`: folds canonical events into a run/session snapshot for UIs, exactly
//! the core's fold (`reducer::SessionReducer`). Events and snapshots cross as JSON text.

use napi_derive::napi;
use serde_json::{json, Value};
use stapel_runner_protocol::reducer::{self, Outcome, ReduceError, ReducerConfig, SessionReducer};

use crate::errors::{bad_argument, config_error, fail, guard, parse_arg};

fn reduce_error(e: &ReduceError) -> napi::Error {
    fail(
        "ReducerError",
        e.code(),
        e,
        json!({ "detail_code": e.detail_code() }),
    )
}

fn outcome_json(o: &Outcome) -> Value {
    match o {
        Outcome::AppliedAfterGap { expected, received } => {
            json!({"kind": o.code(), "expected": expected, "received": received})
        }
        Outcome::OutOfOrder { cursor } => json!({"kind": o.code(), "cursor": cursor}),
        _ => json!({"kind": o.code()}),
    }
}

/// The reducer configuration from JSON text (absent: the core's defaults).
pub fn reducer_config(config: Option<&str>) -> napi::Result<ReducerConfig> {
    let v = match config {
        Some(t) => parse_arg("config", t)?,
        None => json!({}),
    };
    ReducerConfig::from_value(&v).map_err(|e| config_error(&e))
}

/// Folds canonical events (`paperclip.prp.event.v1`) into a snapshot; live == replay.
#[napi]
pub struct NativeSessionReducer {
    reducer: SessionReducer,
}

#[napi]
impl NativeSessionReducer {
    /// `config`: the JSON text of the reducer configuration.
    #[napi(constructor)]
    pub fn new(config: Option<String>) -> napi::Result<Self> {
        guard(|| {
            Ok(Self {
                reducer: SessionReducer::new(reducer_config(config.as_deref())?),
            })
        })
    }

    /// Apply one event (JSON text); the outcome as JSON text (`kind` and its fields).
    #[napi]
    pub fn apply(&mut self, event: String) -> napi::Result<String> {
        guard(|| {
            let v = parse_arg("event", &event)?;
            let o = self.reducer.apply(&v).map_err(|e| reduce_error(&e))?;
            Ok(outcome_json(&o).to_string())
        })
    }

    /// Apply one JSONL line of an event log; the outcome as JSON text.
    #[napi]
    pub fn apply_line(&mut self, line: String) -> napi::Result<String> {
        guard(|| {
            let o = self
                .reducer
                .apply_line(&line)
                .map_err(|e| reduce_error(&e))?;
            Ok(outcome_json(&o).to_string())
        })
    }

    /// Apply every event of a JSON array (text); how many were applied before the
    /// first error (which is thrown).
    #[napi]
    pub fn apply_all(&mut self, events: String) -> napi::Result<f64> {
        guard(|| {
            let v = parse_arg("events", &events)?;
            let list = v
                .as_array()
                .ok_or_else(|| bad_argument("events", "not an array"))?;
            let mut n = 0u64;
            for e in list {
                self.reducer.apply(e).map_err(|e| reduce_error(&e))?;
                n = n.saturating_add(1);
            }
            Ok(crate::session::num(n))
        })
    }

    /// The snapshot as JSON text.
    #[napi]
    pub fn snapshot(&self) -> napi::Result<String> {
        guard(|| Ok(self.reducer.snapshot().to_string()))
    }

    /// The delivery report as JSON text.
    #[napi]
    pub fn delivery(&self) -> napi::Result<String> {
        guard(|| Ok(self.reducer.delivery().to_string()))
    }
}

/// The snapshot of a fresh reducer after `events` (JSON text of an array), applied
/// leniently (`reducer::replay`), as JSON text.
#[napi]
pub fn reducer_replay(config: Option<String>, events: String) -> napi::Result<String> {
    guard(|| {
        let config = reducer_config(config.as_deref())?;
        let v = parse_arg("events", &events)?;
        let list = v
            .as_array()
            .ok_or_else(|| bad_argument("events", "not an array"))?;
        Ok(reducer::replay(config, list).to_string())
    })
}
