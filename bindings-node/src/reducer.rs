//! Area `reducer`: folds canonical events into a run/session snapshot for UIs, exactly
//! the core's fold (`reducer::SessionReducer`), held in an `External` handle. Events
//! and snapshots cross as JSON text.

use napi::bindgen_prelude::External;
use napi_derive::napi;
use serde_json::{json, Value};
use stapel_runner_protocol::reducer::{self, Outcome, ReduceError, ReducerConfig, SessionReducer};

use crate::boundary::Text;
use crate::errors::{bad_argument, config_error, fail, guard, parse_arg};
use crate::wire::num;

fn reduce_error(e: &ReduceError) -> napi::Error {
    fail(
        "reducer",
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
pub struct ReducerHandle {
    reducer: SessionReducer,
}

type Reducer = External<ReducerHandle>;

/// A fresh reducer; `config` the JSON text of the reducer configuration.
#[napi(ts_return_type = "ExternalObject<'Reducer'>")]
pub fn reducer_new(config: Option<String>) -> napi::Result<Reducer> {
    guard(|| {
        Ok(External::new(ReducerHandle {
            reducer: SessionReducer::new(reducer_config(config.as_deref())?),
        }))
    })
}

/// Apply one event (its JSON text, e.g. a JSONL line of an event log); the outcome as
/// JSON text (`kind` and its fields).
#[napi(ts_args_type = "reducer: ExternalObject<'Reducer'>, event: string")]
pub fn reducer_apply_line(reducer: &mut Reducer, event: Text) -> napi::Result<String> {
    guard(|| {
        let o = event
            .with(|line| reducer.reducer.apply_line(line))?
            .map_err(|e| reduce_error(&e))?;
        Ok(outcome_json(&o).to_string())
    })
}

/// Apply every event of a JSON array (text) or JSONL text (`lines`), in one call; how
/// many were applied before the first refusal (which is thrown).
#[napi(ts_args_type = "reducer: ExternalObject<'Reducer'>, events: string, lines: boolean")]
pub fn reducer_apply_all(reducer: &mut Reducer, events: Text, lines: bool) -> napi::Result<f64> {
    guard(|| {
        events.with(|text| {
            let mut n = 0u64;
            if lines {
                for line in text.split('\n').filter(|l| !l.trim().is_empty()) {
                    reducer
                        .reducer
                        .apply_line(line)
                        .map_err(|e| reduce_error(&e))?;
                    n = n.saturating_add(1);
                }
            } else {
                let v = parse_arg("events", text)?;
                let list = v
                    .as_array()
                    .ok_or_else(|| bad_argument("events", "not an array"))?;
                for e in list {
                    reducer.reducer.apply(e).map_err(|e| reduce_error(&e))?;
                    n = n.saturating_add(1);
                }
            }
            Ok(num(n))
        })?
    })
}

/// The snapshot as JSON text.
#[napi(ts_args_type = "reducer: ExternalObject<'Reducer'>")]
pub fn reducer_snapshot(reducer: &Reducer) -> napi::Result<String> {
    guard(|| Ok(reducer.reducer.snapshot().to_string()))
}

/// The delivery report as JSON text.
#[napi(ts_args_type = "reducer: ExternalObject<'Reducer'>")]
pub fn reducer_delivery(reducer: &Reducer) -> napi::Result<String> {
    guard(|| Ok(reducer.reducer.delivery().to_string()))
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
