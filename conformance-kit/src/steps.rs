//! Inputs both modes share, message builders, and one case's result.

use serde_json::{json, Value};
use stapel_runner_protocol::session::Machine;
use stapel_runner_protocol::wire::{self, Message};

use crate::driver::{unhex, Driver, Pings};
use crate::scenario::{Scenario, Strictness};

/// A message from its JSON form, with every schema rule of the core's decoder.
/// A sequenced message without `seq` is checked as if it had one (the kit's session
/// stamps it when it is sent).
pub fn message(v: Value) -> Result<Message, String> {
    let mut checked = v.clone();
    let unstamped = checked.get("seq").is_none();
    if unstamped {
        checked["seq"] = json!(1);
    }
    let m = wire::from_value(stapel_runner_protocol::json::Value::from(checked), true).map_err(
        |e| {
            format!(
                "the scenario's message {v} is not valid: {} {:?}",
                e.code(),
                e.lines()
            )
        },
    )?;
    if unstamped && m.message_type().is_sequenced() {
        return wire::from_value(stapel_runner_protocol::json::Value::from(v.clone()), false)
            .map_err(|e| format!("the scenario's message {v} is not valid: {}", e.code()));
    }
    Ok(m)
}

/// A `task.assign` of `task_id` whose TaskSpec `goal` names the workload (see
/// `conformance/scenarios/README.md`: `conformance quick N`, `conformance hold`).
pub fn assign(spec: &Value, invocation: &Value) -> Result<Message, String> {
    let task_id = spec["task_id"].as_str().ok_or("assign without task_id")?;
    let goal = spec["goal"].as_str().unwrap_or("conformance quick 3");
    let attempt = spec["attempt"].as_u64().unwrap_or(1);
    message(json!({
        "schema_version": 1, "type": "task.assign", "task_id": task_id,
        "task": {"schema_version": 1, "id": task_id, "type": "code", "goal": goal,
                 "criteria": [{"id": "c1", "text": goal}], "budget": {"iterations": 1}},
        "role": "coder", "invocation": invocation, "attempt": attempt,
    }))
}

/// A `task.cancel`.
pub fn cancel(spec: &Value) -> Result<Message, String> {
    message(json!({
        "schema_version": 1, "type": "task.cancel",
        "task_id": spec["task_id"].as_str().ok_or("cancel without task_id")?,
        "reason": spec["reason"].as_str().unwrap_or("conformance"),
    }))
}

/// Perform one of the inputs both modes know (`None`: not one of them).
pub async fn common<M: Machine>(
    d: &mut Driver<M>,
    key: &str,
    v: &Value,
) -> Option<Result<(), String>> {
    Some(match key {
        "observe" => Ok(()),
        "wait" => {
            d.wait(v["ms"].as_u64().unwrap_or(0)).await;
            Ok(())
        }
        "cut" => {
            d.drop_conn(true, "cut by the kit (no close handshake)");
            Ok(())
        }
        "close" => {
            d.drop_conn(false, "closed by the kit");
            Ok(())
        }
        "pings" => match v.as_str() {
            Some("session") => {
                d.pings = Pings::Session;
                Ok(())
            }
            Some("ignore") => {
                d.pings = Pings::Ignore;
                Ok(())
            }
            Some("plain") => {
                d.pings = Pings::Plain;
                Ok(())
            }
            _ => Err(format!("pings: {v}")),
        },
        "ping" => {
            let mut p = json!({"schema_version": 1, "type": "ping", "nonce": v["nonce"].clone()});
            if let Some(extra) = v.get("extra").and_then(Value::as_object) {
                for (k, x) in extra {
                    p[k] = x.clone();
                }
            }
            d.send_text(p.to_string());
            Ok(())
        }
        "repeat_last" => match d.last_sequenced_out.clone() {
            Some(f) => {
                d.send_text(f);
                Ok(())
            }
            None => Err("repeat_last: nothing sequenced was sent yet".into()),
        },
        "raw" => {
            if let Some(t) = v.get("text").and_then(Value::as_str) {
                d.send_text(t.to_string());
                Ok(())
            } else if let Some(h) = v.get("binary_hex").and_then(Value::as_str) {
                match unhex(h) {
                    Some(b) => {
                        d.send_binary(b);
                        Ok(())
                    }
                    None => Err("raw.binary_hex is not hex".into()),
                }
            } else if let Some(n) = v.get("oversized_bytes").and_then(Value::as_u64) {
                // A well-formed ping padded beyond `n` bytes: too long for the core's
                // default 64 KiB line bound, not malformed otherwise.
                let pad = "x".repeat(n as usize);
                let nonce = v.get("nonce").cloned().unwrap_or(json!(1));
                d.send_text(
                    json!({"schema_version": 1, "type": "ping", "nonce": nonce, "pad": pad})
                        .to_string(),
                );
                Ok(())
            } else {
                Err(format!("raw: {v}"))
            }
        }
        "send" => match message(v.clone()) {
            Ok(m) => d.send_message(m),
            Err(e) => Err(e),
        },
        _ => return None,
    })
}

/// A mode's own inputs (beyond [`common`]): what one step's `input` does.
pub trait Inputs<M: Machine> {
    /// Perform `input` (one key) on the driver.
    async fn input(&mut self, d: &mut Driver<M>, input: &Value) -> Result<(), String>;
}

/// Run the steps of `sc` in order: each step's input, then its expectations; the first
/// step that fails ends the case. Returns the failures (each prefixed with its step
/// number; empty: passed) and whether that step said `otherwise: not_applicable`.
pub async fn run_steps<M: Machine, I: Inputs<M>>(
    inputs: &mut I,
    d: &mut Driver<M>,
    sc: &Scenario,
) -> (Vec<String>, bool) {
    for (i, step) in sc.steps.iter().enumerate() {
        let from = d.log.len();
        let dup_base = d.machine.stats().duplicates;
        let failures = match inputs.input(d, &step.input).await {
            Ok(()) => d.check(from, &step.expect, dup_base).await,
            Err(e) => vec![e],
        };
        if !failures.is_empty() {
            let failures = failures
                .into_iter()
                .map(|x| format!("step {}: {x}", i + 1))
                .collect();
            return (failures, step.otherwise == "not_applicable");
        }
    }
    (Vec::new(), false)
}

/// The outcome of one case.
#[derive(Debug, Clone)]
pub struct CaseResult {
    /// Scenario id.
    pub id: String,
    /// Scenario description.
    pub description: String,
    /// Where the rule comes from.
    pub source: String,
    /// Scenario strictness.
    pub strictness: Strictness,
    /// `pass`, `fail`, `non-strict` or `not-applicable`.
    pub outcome: &'static str,
    /// Why it did not pass (empty on pass).
    pub reason: String,
    /// Wall time of the case.
    pub duration_ms: u64,
    /// The transcript entries as JSON.
    pub transcript: Vec<Value>,
}

impl CaseResult {
    /// The result of `sc` given its failures (`na`: the failing step said
    /// `otherwise: not_applicable`).
    pub fn of(
        sc: &Scenario,
        failures: &[String],
        na: bool,
        duration_ms: u64,
        transcript: Vec<Value>,
    ) -> Self {
        let outcome = if failures.is_empty() {
            "pass"
        } else if na {
            "not-applicable"
        } else if sc.strictness == Strictness::Required {
            "fail"
        } else {
            "non-strict"
        };
        Self {
            id: sc.id.clone(),
            description: sc.description.clone(),
            source: sc.source.clone(),
            strictness: sc.strictness,
            outcome,
            reason: failures.join("; "),
            duration_ms,
            transcript,
        }
    }

    /// The result of a case that ran from `started`, with its transcript `log`.
    pub fn finish(
        sc: &Scenario,
        failures: &[String],
        na: bool,
        started: std::time::Instant,
        log: &[crate::driver::Entry],
    ) -> Self {
        let transcript = log.iter().map(|e| e.to_json()).collect();
        Self::of(
            sc,
            failures,
            na,
            started.elapsed().as_millis() as u64,
            transcript,
        )
    }

    /// The JSON form in `report.json`.
    pub fn to_json(&self) -> Value {
        json!({
            "id": self.id, "description": self.description, "source": self.source,
            "strictness": self.strictness.as_str(), "outcome": self.outcome,
            "reason": self.reason, "duration_ms": self.duration_ms,
            "transcript": self.transcript,
        })
    }
}
