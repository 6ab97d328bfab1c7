//! Helpers shared by the area runners.
#![allow(dead_code)]

use serde_json::Value;

/// Iterate the steps of a vector as (index, input, expect).
pub fn steps(vector: &Value) -> impl Iterator<Item = (usize, &Value, &Value)> {
    vector["steps"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(i, s)| (i, &s["input"], &s["expect"]))
}

/// Compare two JSON values; on mismatch, an error naming the step and both values.
pub fn same(step: usize, what: &str, got: &Value, want: &Value) -> Result<(), String> {
    if got == want {
        Ok(())
    } else {
        Err(format!(
            "step {step}: {what} mismatch\n  got:  {got}\n  want: {want}"
        ))
    }
}

/// Decode a hex string into bytes.
pub fn hex(s: &str) -> Result<Vec<u8>, String> {
    if s.len() % 2 != 0 {
        return Err(format!("odd-length hex {s:?}"));
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).map_err(|e| format!("bad hex {s:?}: {e}")))
        .collect()
}

/// The bytes of an input that has either `key` (UTF-8 text) or `key_hex` (hex bytes).
pub fn bytes_of(input: &Value, key: &str) -> Result<Option<Vec<u8>>, String> {
    if let Some(s) = input.get(key).and_then(Value::as_str) {
        return Ok(Some(s.as_bytes().to_vec()));
    }
    if let Some(s) = input.get(format!("{key}_hex")).and_then(Value::as_str) {
        return hex(s).map(Some);
    }
    Ok(None)
}

/// The configuration outcome every area runner checks before its steps (see
/// conformance/README.md, "Configuration errors"): `refused` is the `(code, key)` of the
/// core's `ConfigError` when building the machine from `config` failed. A vector whose
/// first step expects `config_error` must be refused with exactly that; any other vector
/// must be accepted. `Ok(true)`: the vector is done (it was a refusal, as expected).
pub fn check_config(vector: &Value, refused: Option<(&str, &str)>) -> Result<bool, String> {
    let want = vector["steps"]
        .get(0)
        .and_then(|s| s.get("expect"))
        .and_then(|e| e.get("config_error"));
    match (refused, want) {
        (None, None) => Ok(false),
        (Some((code, key)), Some(want)) => {
            same(
                0,
                "config_error",
                &serde_json::json!({"code": code, "key": key}),
                want,
            )?;
            Ok(true)
        }
        (Some((code, key)), None) => Err(format!("config refused: {code} (key {key:?})")),
        (None, Some(want)) => Err(format!("config accepted, expected config_error {want}")),
    }
}

/// The `expect` keys each area's runner checks (`config_error` is checked for the
/// machine areas by [`check_config`]).
pub fn expect_keys(area: &str) -> Option<&'static [&'static str]> {
    Some(match area {
        "adapter" => &[
            "error",
            "lifecycle",
            "outputs",
            "result_line",
            "state",
            "system_prompt",
            "timeout",
            "total_tokens",
            "value",
        ],
        "admission" => &[
            "config",
            "config_error",
            "error",
            "outputs",
            "pending",
            "runs",
            "timeout",
            "value",
        ],
        "contract" => &[
            "error",
            "finished",
            "outputs",
            "refusal",
            "resolved",
            "stage",
            "tool_calls",
            "usage",
            "value",
        ],
        "errors" => &["class", "classes"],
        "framing" => &["accepted", "buffered_bytes", "error", "output", "ready"],
        "host" => &[
            "config",
            "config_error",
            "error",
            "outputs",
            "pending",
            "runners",
            "state",
            "timeout",
            "value",
        ],
        "link" => &[
            "config",
            "config_error",
            "error",
            "outbox_frames",
            "outputs",
            "phase",
            "queued_events",
            "stats",
        ],
        "local" => &["config_error", "error", "outputs", "timeout"],
        "reducer" => &[
            "at",
            "config_error",
            "delivery",
            "equals_live",
            "error",
            "error_detail",
            "outcome",
            "snapshot",
        ],
        "runner_task" => &["error", "result"],
        "sequencing" => &[
            "arrival",
            "arrivals",
            "channel",
            "confirmed",
            "dropped",
            "error",
            "frame",
            "frames",
            "gap",
            "known",
            "last_seq",
            "outbox",
            "positions",
            "replay",
            "results",
            "resume_map",
            "streams",
            "value",
        ],
        "session" => &[
            "config_error",
            "error",
            "outbox_frames",
            "outputs",
            "resume_map",
        ],
        "store" => &[
            "close",
            "config_error",
            "error",
            "outbox_frames",
            "outputs",
            "resume_map",
            "rows",
            "writes",
        ],
        "lease" => &["config", "config_error", "held", "outputs"],
        "wire" => &["encoded", "error", "message", "type"],
        _ => return None,
    })
}

/// Fails on a step whose `expect` has a key the area's runner does not check.
pub fn check_expect_keys(area: &str, vector: &Value) -> Result<(), String> {
    let known = expect_keys(area).ok_or(format!("no expect keys known for area {area:?}"))?;
    for (i, _, expect) in steps(vector) {
        if let Some(k) = expect
            .as_object()
            .into_iter()
            .flat_map(|o| o.keys())
            .find(|k| !known.contains(&k.as_str()))
        {
            return Err(format!("step {i}: unknown expect key {k:?}"));
        }
    }
    Ok(())
}
