//! The session reducer: folds canonical local-runner events into a snapshot for UIs.

use std::sync::{Mutex, MutexGuard};

use stapel_runner_protocol::reducer::{self as core_reducer, ReduceError, ReducerConfig};

use crate::errors::ProtocolError;
use crate::events::CanonicalEvent;
use crate::jsontext::parse_serde;

impl From<ReduceError> for ProtocolError {
    fn from(e: ReduceError) -> Self {
        ProtocolError::Reduce {
            code: e.code().to_owned(),
            kind: "reducer".to_owned(),
            detail_code: e.detail_code().map(str::to_owned),
            detail: e.to_string(),
        }
    }
}

fn config(config_json: Option<String>) -> Result<ReducerConfig, ProtocolError> {
    let v = match config_json {
        Some(t) => parse_serde(&t)?,
        None => serde_json::Value::Object(serde_json::Map::new()),
    };
    Ok(ReducerConfig::from_value(&v)?)
}

/// Folds canonical events (JSON text) into a session snapshot; live fold == replay fold.
#[derive(uniffi::Object)]
pub struct SessionReducer {
    inner: Mutex<core_reducer::SessionReducer>,
}

impl SessionReducer {
    fn lock(&self) -> MutexGuard<'_, core_reducer::SessionReducer> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[uniffi::export]
impl SessionReducer {
    /// A reducer; `config_json` is the core's reducer configuration (`None`: defaults).
    ///
    /// # Errors
    /// `ProtocolError::Config`.
    #[uniffi::constructor(default(config_json = None))]
    pub fn new(config_json: Option<String>) -> Result<Self, ProtocolError> {
        Ok(Self {
            inner: Mutex::new(core_reducer::SessionReducer::new(config(config_json)?)),
        })
    }

    /// Applies one canonical event; returns the outcome's stable code (`applied`,
    /// `applied_after_gap`, `duplicate`, `out_of_order`).
    ///
    /// # Errors
    /// `ProtocolError::Reduce` (with the detail code of an event the core refuses, or
    /// one bound to another run); `Decode` when `payload` or `extra` is not JSON object
    /// text (nothing is applied).
    pub fn apply(&self, event: CanonicalEvent) -> Result<String, ProtocolError> {
        let v = event.to_json()?;
        Ok(self.lock().apply(&v)?.code().to_owned())
    }

    /// Applies one event given as JSON text (an untyped value as a consumer read it,
    /// valid or not); returns the outcome's code.
    ///
    /// # Errors
    /// `ProtocolError::Reduce` (with the detail code of an invalid event), or `Decode`
    /// for text that is not JSON.
    pub fn apply_json(&self, event_json: String) -> Result<String, ProtocolError> {
        let v = parse_serde(&event_json)?;
        Ok(self.lock().apply(&v)?.code().to_owned())
    }

    /// Applies one JSONL line as the core reads it; returns the outcome's code.
    ///
    /// # Errors
    /// `ProtocolError::Reduce`.
    pub fn apply_line(&self, line: String) -> Result<String, ProtocolError> {
        Ok(self.lock().apply_line(&line)?.code().to_owned())
    }

    /// The snapshot (JSON text).
    pub fn snapshot(&self) -> String {
        self.lock().snapshot().to_string()
    }

    /// The delivery report (JSON text).
    pub fn delivery(&self) -> String {
        self.lock().delivery().to_string()
    }
}

/// The snapshot (JSON text) of a replay of these events with this config.
///
/// # Errors
/// `ProtocolError::Config`; `Decode` for an event whose open fields are not JSON objects.
#[uniffi::export(default(config_json = None))]
pub fn reducer_replay(
    events: Vec<CanonicalEvent>,
    config_json: Option<String>,
) -> Result<String, ProtocolError> {
    let c = config(config_json)?;
    let events = events
        .iter()
        .map(CanonicalEvent::to_json)
        .collect::<Result<Vec<_>, _>>()?;
    Ok(core_reducer::replay(c, &events).to_string())
}

/// [`reducer_replay`] of events given as JSON texts (as read from a log).
///
/// # Errors
/// `ProtocolError::Config`, or `Decode` for text that is not JSON.
#[uniffi::export(default(config_json = None))]
pub fn reducer_replay_json(
    events_json: Vec<String>,
    config_json: Option<String>,
) -> Result<String, ProtocolError> {
    let c = config(config_json)?;
    let events = events_json
        .iter()
        .map(|t| parse_serde(t))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(core_reducer::replay(c, &events).to_string())
}
