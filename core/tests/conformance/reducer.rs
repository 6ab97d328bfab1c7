//! Area `reducer`: the session reducer. Vocabulary: `conformance/README.md`.

use serde_json::{json, Value};
use stapel_runner_protocol::reducer::{replay, ReduceError, ReducerConfig, SessionReducer};

use crate::common::{same, steps};

pub fn run(vector: &Value) -> Result<(), String> {
    let config = ReducerConfig::from_value(vector.get("config").unwrap_or(&json!({})));
    if crate::common::check_config(vector, config.as_ref().err().map(|e| (e.code(), e.key())))? {
        return Ok(());
    }
    let config = config.map_err(|e| e.to_string())?;
    let mut reducer = SessionReducer::new(config.clone());
    // Every event the live steps fed, in order (a `line` parsed from its text).
    let mut recorded: Vec<Value> = Vec::new();
    for (i, input, expect) in steps(vector) {
        let mut outcome = Value::Null;
        let mut error = Value::Null;
        let mut error_detail = Value::Null;
        let mut equals_live = Value::Null;
        let mut record = |r: Result<
            stapel_runner_protocol::reducer::Outcome,
            stapel_runner_protocol::reducer::ReduceError,
        >| match r {
            Ok(o) => outcome = json!(o.code()),
            Err(e) => {
                error = json!(e.code());
                error_detail = json!(e.detail_code());
            }
        };
        if let Some(ev) = input.get("event") {
            recorded.push(ev.clone());
            record(reducer.apply(ev));
        } else if let Some(line) = input.get("line") {
            let line = line
                .as_str()
                .ok_or(format!("step {i}: line must be a string"))?;
            if let Ok(v) = serde_json::from_str::<Value>(line) {
                recorded.push(v);
            }
            record(reducer.apply_line(line));
        } else if let Some(list) = input.get("replay") {
            let list = match list {
                Value::String(s) if s == "recorded" => recorded.clone(),
                Value::Array(list) => list.clone(),
                _ => return Err(format!("step {i}: replay must be an array or \"recorded\"")),
            };
            // A replay that rejects an event is the step's error (the vector fails unless it
            // expects it); else the public replay is compared with the live fold.
            let mut fresh = SessionReducer::new(config.clone());
            match list.iter().map(|e| fresh.apply(e)).find_map(Result::err) {
                Some(e) => record(Err::<stapel_runner_protocol::reducer::Outcome, ReduceError>(e)),
                None => {
                    let replayed = replay(config.clone(), &list);
                    if replayed != fresh.snapshot() {
                        return Err(format!("step {i}: replay() differs from a strict fold"));
                    }
                    equals_live = json!(replayed == reducer.snapshot());
                }
            }
        } else {
            return Err(format!("step {i}: unknown input {input}"));
        }
        same(
            i,
            "error",
            &error,
            expect.get("error").unwrap_or(&Value::Null),
        )?;
        if let Some(want) = expect.get("error_detail") {
            same(i, "error_detail", &error_detail, want)?;
        }
        if let Some(want) = expect.get("outcome") {
            same(i, "outcome", &outcome, want)?;
        }
        if let Some(want) = expect.get("equals_live") {
            same(i, "equals_live", &equals_live, want)?;
        }
        let snapshot = reducer.snapshot();
        if let Some(want) = expect.get("snapshot") {
            same(i, "snapshot", &snapshot, want)?;
        }
        if let Some(at) = expect.get("at") {
            let at = at
                .as_object()
                .ok_or(format!("step {i}: at must be an object"))?;
            for (ptr, want) in at {
                let got = snapshot
                    .pointer(ptr)
                    .cloned()
                    .ok_or(format!("step {i}: snapshot has no {ptr}"))?;
                same(i, &format!("snapshot {ptr}"), &got, want)?;
            }
        }
        if let Some(want) = expect.get("delivery") {
            same(i, "delivery", &reducer.delivery(), want)?;
        }
        if expect.as_object().is_none_or(|o| o.is_empty()) {
            return Err(format!("step {i}: expect checks nothing"));
        }
    }
    Ok(())
}
