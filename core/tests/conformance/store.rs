//! Area `lease`: the [`Lease`] timing machine through its public API. (Area `store`, the
//! rows and writes of a hub session, runs in the session runner.)

use serde_json::{json, Value};
use stapel_runner_protocol::store::{Lease, LeaseConfig, LeaseInput};

use crate::common::{check_config, same, steps};

pub fn run_lease(vector: &Value) -> Result<(), String> {
    let config = LeaseConfig::from_value(&vector["config"]);
    if check_config(vector, config.as_ref().err().map(|e| (e.code(), e.key())))? {
        return Ok(());
    }
    let config = config.map_err(|e| e.to_string())?;
    let mut lease = Lease::new(config);
    let mut now = 0u64;
    for (i, input, expect) in steps(vector) {
        if let Some(t) = input.get("now").and_then(Value::as_u64) {
            now = t;
        }
        if let Some(t) = input.get("renewed").and_then(Value::as_u64) {
            lease.handle_input(now, LeaseInput::Renewed { started_at: t });
        } else if input.get("renew_failed").is_some() {
            lease.handle_input(now, LeaseInput::RenewFailed);
        } else if input.get("tick").is_some() {
            lease.handle_input(now, LeaseInput::Timeout);
        } else if input.get("config").is_none() && input.get("start").is_none() {
            return Err(format!("step {i}: unknown input {input}"));
        }
        // Every output until `None`, then the timer as the last entry.
        let mut outputs = Vec::new();
        while let Some(o) = lease.poll_output() {
            outputs.push(json!(o.name()));
        }
        outputs.push(json!({ "timeout": lease.poll_timeout() }));
        if let Some(want) = expect.get("outputs") {
            same(i, "outputs", &Value::Array(outputs), want)?;
        }
        if let Some(want) = expect.get("held") {
            same(i, "held", &json!(lease.is_held(now)), want)?;
        }
        if let Some(want) = expect.get("config") {
            same(i, "config", &lease.config().to_value(), want)?;
        }
    }
    Ok(())
}
