//! Canonical `paperclip.prp.event.v1` events: deterministic ids, sequence numbers and
//! timestamps, and a reader for consumers (the [reducer](crate::reducer)).
//!
//! The runner numbers its events from 1 (`sourceSeq`) and names them
//! `event_<runId>_<seq:03>` (`sourceEventId`; at least three digits, zero-padded).
//! `emittedAt` comes from an injected [`EventClock`]: `start_ms + (sourceSeq − 1) ×
//! step_ms`, formatted as RFC 3339 UTC with milliseconds. No clock is ever read, so a run
//! replays bit for bit.

use serde_json::{Map, Value};

use super::error::ModelError;
use super::models::{
    check_id, check_schema, event_priority, is_known_event_type, req_id, validate_run_result,
    validate_terminal, EVENT_SCHEMA,
};
use crate::fields::{object as as_object, opt_str, req, req_object, req_str, req_u64};

/// Default clock start: 2026-01-01T00:00:00.000Z.
pub(crate) const DEFAULT_CLOCK_START_MS: u64 = 1_767_225_600_000;
/// Default clock step between two events: 1 ms.
pub(crate) const DEFAULT_CLOCK_STEP_MS: u64 = 1;

/// The injected clock of `emittedAt`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventClock {
    /// Unix time in ms of the first event.
    pub start_ms: u64,
    /// Milliseconds added per event.
    pub step_ms: u64,
}

impl Default for EventClock {
    fn default() -> Self {
        Self {
            start_ms: DEFAULT_CLOCK_START_MS,
            step_ms: DEFAULT_CLOCK_STEP_MS,
        }
    }
}

impl EventClock {
    /// `emittedAt` of the event with this `sourceSeq` (saturating arithmetic).
    pub fn emitted_at(&self, source_seq: u64) -> String {
        format_rfc3339_ms(
            self.start_ms
                .saturating_add(source_seq.saturating_sub(1).saturating_mul(self.step_ms)),
        )
    }
}

/// Format Unix milliseconds as `YYYY-MM-DDTHH:MM:SS.mmmZ` (years past 9999 are clamped
/// to 9999-12-31T23:59:59.999Z).
pub(crate) fn format_rfc3339_ms(unix_ms: u64) -> String {
    const MAX_MS: u64 = 253_402_300_799_999; // 9999-12-31T23:59:59.999Z
    let ms = unix_ms.min(MAX_MS);
    let secs = ms / 1000;
    let days = secs / 86_400;
    let rem = secs % 86_400;
    // Civil-from-days (proleptic Gregorian), Howard Hinnant's algorithm. Every value is
    // non-negative and far below u64::MAX for the clamped range, so the saturating
    // operations never saturate.
    let z = days.saturating_add(719_468);
    let era = z / 146_097;
    let doe = z.saturating_sub(era.saturating_mul(146_097));
    let yoe = doe
        .saturating_sub(doe / 1460)
        .saturating_add(doe / 36_524)
        .saturating_sub(doe / 146_096)
        / 365;
    let doy = doe.saturating_sub(
        yoe.saturating_mul(365)
            .saturating_add(yoe / 4)
            .saturating_sub(yoe / 100),
    );
    let mp = doy.saturating_mul(5).saturating_add(2) / 153;
    let day = doy
        .saturating_sub(mp.saturating_mul(153).saturating_add(2) / 5)
        .saturating_add(1);
    let month = if mp < 10 {
        mp.saturating_add(3)
    } else {
        mp.saturating_sub(9)
    };
    let year = yoe
        .saturating_add(era.saturating_mul(400))
        .saturating_add(u64::from(month <= 2));
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60,
        ms % 1000
    )
}

/// Builds the runner's canonical events in order.
#[derive(Debug, Clone)]
pub struct EventFactory {
    run_id: String,
    normalized_session_id: String,
    source_instance_id: String,
    clock: EventClock,
    next_seq: u64,
}

impl EventFactory {
    /// A factory whose first event gets `sourceSeq` 1.
    pub fn new(
        run_id: impl Into<String>,
        normalized_session_id: impl Into<String>,
        source_instance_id: impl Into<String>,
        clock: EventClock,
    ) -> Self {
        Self {
            run_id: run_id.into(),
            normalized_session_id: normalized_session_id.into(),
            source_instance_id: source_instance_id.into(),
            clock,
            next_seq: 1,
        }
    }

    /// `sourceEventId` of the event with this seq: `event_<runId>_<seq:03>`.
    pub fn source_event_id(&self, seq: u64) -> String {
        format!("event_{}_{seq:03}", self.run_id)
    }

    /// Build the next event. Field order: `schema, sourceEventId, sourceSeq,
    /// sourceInstanceId, sourceKind, runId, normalizedSessionId, eventType, schemaVersion,
    /// priority, emittedAt, payload`, then `turnId` and `itemId` when present.
    pub fn next(
        &mut self,
        event_type: &str,
        payload: Value,
        turn_id: Option<&str>,
        item_id: Option<&str>,
    ) -> Value {
        let seq = self.next_seq;
        self.next_seq = self.next_seq.saturating_add(1);
        let mut m = Map::new();
        m.insert("schema".into(), EVENT_SCHEMA.into());
        m.insert("sourceEventId".into(), self.source_event_id(seq).into());
        m.insert("sourceSeq".into(), seq.into());
        m.insert(
            "sourceInstanceId".into(),
            self.source_instance_id.clone().into(),
        );
        m.insert("sourceKind".into(), "runner".into());
        m.insert("runId".into(), self.run_id.clone().into());
        m.insert(
            "normalizedSessionId".into(),
            self.normalized_session_id.clone().into(),
        );
        m.insert("eventType".into(), event_type.into());
        m.insert("schemaVersion".into(), 1.into());
        m.insert("priority".into(), event_priority(event_type).into());
        m.insert("emittedAt".into(), self.clock.emitted_at(seq).into());
        m.insert("payload".into(), payload);
        if let Some(t) = turn_id {
            m.insert("turnId".into(), t.into());
        }
        if let Some(i) = item_id {
            m.insert("itemId".into(), i.into());
        }
        Value::Object(m)
    }
}

/// A canonical event as read by a consumer. Unknown optional fields are kept in `extra`.
#[derive(Debug, Clone, PartialEq)]
pub struct CanonicalEvent {
    /// `sourceEventId`.
    pub source_event_id: String,
    /// `sourceSeq` (≥ 1).
    pub source_seq: u64,
    /// `sourceInstanceId`.
    pub source_instance_id: String,
    /// `sourceKind`: `runner` or `control_plane`.
    pub source_kind: String,
    /// `runId`.
    pub run_id: String,
    /// `normalizedSessionId` (optional in the schema).
    pub normalized_session_id: Option<String>,
    /// `eventType` (one of the seed's event types).
    pub event_type: String,
    /// `priority` (0, 1 or 2).
    pub priority: u8,
    /// `emittedAt`.
    pub emitted_at: String,
    /// `payload`.
    pub payload: Map<String, Value>,
    /// `turnId`.
    pub turn_id: Option<String>,
    /// `itemId`.
    pub item_id: Option<String>,
    /// Other fields (`observedAt`, `debug`, unknown ones) in arrival order.
    pub extra: Map<String, Value>,
}

impl CanonicalEvent {
    /// Read and validate an event: schema id, `schemaVersion: 1`, closed `sourceKind`,
    /// `eventType` and `priority`, required fields, and the payload of `run.terminal`
    /// (terminal schema) and `run.result.proposed` (result schema).
    pub fn from_value(v: &Value) -> Result<Self, ModelError> {
        let obj = as_object(v)?;
        check_schema(obj, EVENT_SCHEMA)?;
        let version = req(obj, "schemaVersion")?;
        if version.as_u64() != Some(1) {
            return Err(ModelError::unknown("schemaVersion", version));
        }
        let source_event_id = req_id(obj, "sourceEventId")?.to_owned();
        let source_seq = req_u64(obj, "sourceSeq")?;
        if source_seq == 0 {
            return Err(ModelError::invalid("sourceSeq", "must be at least 1"));
        }
        let source_instance_id = req_id(obj, "sourceInstanceId")?.to_owned();
        let kind = req(obj, "sourceKind")?;
        let source_kind = match kind.as_str() {
            Some(k @ ("runner" | "control_plane")) => k.to_owned(),
            _ => return Err(ModelError::unknown("sourceKind", kind)),
        };
        let run_id = req_id(obj, "runId")?.to_owned();
        let normalized_session_id = opt_str(obj, "normalizedSessionId")?.map(str::to_owned);
        if let Some(s) = &normalized_session_id {
            check_id("normalizedSessionId", s)?;
        }
        let et = req(obj, "eventType")?;
        let event_type = match et.as_str() {
            Some(t) if is_known_event_type(t) => t.to_owned(),
            _ => return Err(ModelError::unknown("eventType", et)),
        };
        let pr = req(obj, "priority")?;
        let priority = match pr.as_u64() {
            Some(p @ 0..=2) => p as u8,
            _ => return Err(ModelError::unknown("priority", pr)),
        };
        let emitted_at = req_str(obj, "emittedAt")?.to_owned();
        let payload = req_object(obj, "payload")?.clone();
        // The event schema ties these payloads to the terminal and result schemas.
        let nested = |e: ModelError| match e {
            ModelError::MissingField { field } => ModelError::MissingField {
                field: format!("payload/{field}"),
            },
            ModelError::InvalidField { field, message } => ModelError::InvalidField {
                field: format!("payload/{field}"),
                message,
            },
            ModelError::UnknownValue { field, value } => ModelError::UnknownValue {
                field: format!("payload/{field}"),
                value,
            },
            other => other,
        };
        match event_type.as_str() {
            "run.terminal" => validate_terminal(&obj["payload"]).map_err(nested)?,
            "run.result.proposed" => {
                validate_run_result(&obj["payload"]).map_err(nested)?;
            }
            _ => {}
        }
        let turn_id = opt_str(obj, "turnId")?.map(str::to_owned);
        let item_id = opt_str(obj, "itemId")?.map(str::to_owned);
        for (f, v) in [("turnId", &turn_id), ("itemId", &item_id)] {
            if let Some(s) = v {
                check_id(f, s)?;
            }
        }
        const DECLARED: &[&str] = &[
            "schema",
            "sourceEventId",
            "sourceSeq",
            "sourceInstanceId",
            "sourceKind",
            "runId",
            "normalizedSessionId",
            "eventType",
            "schemaVersion",
            "priority",
            "emittedAt",
            "payload",
            "turnId",
            "itemId",
        ];
        let extra = obj
            .iter()
            .filter(|(k, _)| !DECLARED.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        Ok(Self {
            source_event_id,
            source_seq,
            source_instance_id,
            source_kind,
            run_id,
            normalized_session_id,
            event_type,
            priority,
            emitted_at,
            payload,
            turn_id,
            item_id,
            extra,
        })
    }
}

impl CanonicalEvent {
    /// The event's JSON form, in the field order of [`EventFactory::next`] (`schema`,
    /// `sourceEventId`, `sourceSeq`, `sourceInstanceId`, `sourceKind`, `runId`,
    /// `normalizedSessionId` when present, `eventType`, `schemaVersion: 1`, `priority`,
    /// `emittedAt`, `payload`, then `turnId` and `itemId` when present), then `extra` in
    /// its order. For an event read by [`from_value`](Self::from_value), reading this form
    /// again gives the same event.
    pub fn to_value(&self) -> Value {
        let mut m = Map::new();
        m.insert("schema".into(), EVENT_SCHEMA.into());
        m.insert("sourceEventId".into(), self.source_event_id.clone().into());
        m.insert("sourceSeq".into(), self.source_seq.into());
        m.insert(
            "sourceInstanceId".into(),
            self.source_instance_id.clone().into(),
        );
        m.insert("sourceKind".into(), self.source_kind.clone().into());
        m.insert("runId".into(), self.run_id.clone().into());
        if let Some(s) = &self.normalized_session_id {
            m.insert("normalizedSessionId".into(), s.clone().into());
        }
        m.insert("eventType".into(), self.event_type.clone().into());
        m.insert("schemaVersion".into(), 1.into());
        m.insert("priority".into(), self.priority.into());
        m.insert("emittedAt".into(), self.emitted_at.clone().into());
        m.insert("payload".into(), Value::Object(self.payload.clone()));
        if let Some(t) = &self.turn_id {
            m.insert("turnId".into(), t.clone().into());
        }
        if let Some(i) = &self.item_id {
            m.insert("itemId".into(), i.clone().into());
        }
        for (k, v) in &self.extra {
            if !m.contains_key(k) {
                m.insert(k.clone(), v.clone());
            }
        }
        Value::Object(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn rfc3339_formatting() {
        assert_eq!(format_rfc3339_ms(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            format_rfc3339_ms(DEFAULT_CLOCK_START_MS),
            "2026-01-01T00:00:00.000Z"
        );
        assert_eq!(
            format_rfc3339_ms(951_782_400_123),
            "2000-02-29T00:00:00.123Z"
        );
        assert_eq!(format_rfc3339_ms(u64::MAX), "9999-12-31T23:59:59.999Z");
    }

    #[test]
    fn factory_builds_valid_events() {
        let mut f = EventFactory::new(
            "run_1",
            "sess_1",
            "runner_1",
            EventClock {
                start_ms: 0,
                step_ms: 250,
            },
        );
        f.next("workspace.ready", json!({}), None, None);
        let e = f.next("item.delta", json!({"text": "x"}), Some("t"), Some("i"));
        assert_eq!(e["sourceEventId"], "event_run_1_002");
        assert_eq!(e["emittedAt"], "1970-01-01T00:00:00.250Z");
        assert_eq!(e["priority"], 2);
        let parsed = CanonicalEvent::from_value(&e).unwrap();
        assert_eq!(parsed.item_id.as_deref(), Some("i"));
        assert_eq!(parsed.to_value(), e);
        let mut with_extra = e.clone();
        with_extra["observedAt"] = json!("2026-01-01T00:00:00.000Z");
        let again = CanonicalEvent::from_value(&with_extra).unwrap();
        assert_eq!(again.to_value(), with_extra);
        let mut bad = e.clone();
        bad["schemaVersion"] = json!(2);
        assert_eq!(
            CanonicalEvent::from_value(&bad).unwrap_err().code(),
            "unknown_value"
        );
    }
}
