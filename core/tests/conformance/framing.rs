//! Area `framing`: the bounded JSONL line framer.

use serde_json::{json, Value};
use stapel_runner_protocol::framing::{FramerConfig, LineFramer, LineResult};

use crate::common::{bytes_of, same, steps};

fn item_json(item: LineResult) -> Value {
    match item {
        Ok(line) => json!({ "line": line }),
        Err(e) => json!({ "error": e.code(), "line_number": e.line_number() }),
    }
}

fn drain(f: &mut LineFramer, out: &mut Vec<Value>) {
    while let Some(item) = f.poll_line() {
        out.push(item_json(item));
    }
}

fn usize_of(cfg: &Value, key: &str) -> Result<Option<usize>, String> {
    cfg.get(key)
        .map(|v| {
            v.as_u64()
                .and_then(|n| usize::try_from(n).ok())
                .ok_or_else(|| format!("config {key} is not a size: {v}"))
        })
        .transpose()
}

/// The framer's bounds hold after every push.
fn check_bounds(i: usize, f: &LineFramer) -> Result<(), String> {
    let c = f.config();
    if f.buffered_bytes() > c.max_line_bytes {
        return Err(format!(
            "step {i}: framer buffered {} > {}",
            f.buffered_bytes(),
            c.max_line_bytes
        ));
    }
    if f.ready_len() > c.max_ready_lines {
        return Err(format!(
            "step {i}: {} lines ready > {}",
            f.ready_len(),
            c.max_ready_lines
        ));
    }
    Ok(())
}

pub fn run(vector: &Value) -> Result<(), String> {
    let cfg = &vector["config"];
    let mut config = FramerConfig::default();
    if let Some(n) = usize_of(cfg, "max_line_bytes")? {
        config.max_line_bytes = n;
    }
    if let Some(b) = cfg.get("skip_empty_lines").and_then(Value::as_bool) {
        config.skip_empty_lines = b;
    }
    if let Some(n) = usize_of(cfg, "max_ready_lines")? {
        config.max_ready_lines = n;
    }
    if let Some(n) = usize_of(cfg, "max_ready_bytes")? {
        config.max_ready_bytes = n;
    }
    let mut framer = LineFramer::new(config);
    for (i, input, expect) in steps(vector) {
        let mut output = Vec::new();
        let mut error = Value::Null;
        let mut accepted = Value::Null;
        let drain_after = input.get("drain").and_then(Value::as_bool).unwrap_or(true);
        if let Some(data) = bytes_of(input, "push")? {
            if !drain_after {
                // One push, nothing pulled: what the bounded queue takes.
                match framer.push(&data) {
                    Ok(n) => accepted = json!(n),
                    Err(e) => error = json!(e.code()),
                }
                check_bounds(i, &framer)?;
            } else {
                let chunk = input.get("chunk_size").and_then(Value::as_u64).unwrap_or(0) as usize;
                let chunk = if chunk == 0 { data.len().max(1) } else { chunk };
                'chunks: for piece in data.chunks(chunk) {
                    let mut rest = piece;
                    loop {
                        let n = match framer.push(rest) {
                            Ok(n) => n,
                            Err(e) => {
                                error = json!(e.code());
                                break 'chunks;
                            }
                        };
                        check_bounds(i, &framer)?;
                        drain(&mut framer, &mut output);
                        rest = &rest[n..];
                        if rest.is_empty() {
                            break;
                        }
                        if n == 0 {
                            return Err(format!(
                                "step {i}: push into a drained framer took nothing"
                            ));
                        }
                    }
                }
            }
        } else if let Some(data) = bytes_of(input, "push_all")? {
            if let Err(e) = framer.push_all(&data, |item| output.push(item_json(item))) {
                error = json!(e.code());
            }
        } else if input.get("pull").is_some() {
            drain(&mut framer, &mut output);
        } else if input.get("finish").is_some() {
            framer.finish();
            drain(&mut framer, &mut output);
        } else {
            return Err(format!("step {i}: unknown input {input}"));
        }
        same(
            i,
            "output",
            &Value::Array(output),
            expect.get("output").unwrap_or(&json!([])),
        )?;
        same(
            i,
            "error",
            &error,
            expect.get("error").unwrap_or(&Value::Null),
        )?;
        if let Some(a) = expect.get("accepted") {
            same(i, "accepted", &accepted, a)?;
        }
        if let Some(r) = expect.get("ready") {
            same(i, "ready", &json!(framer.ready_len()), r)?;
        }
        if let Some(b) = expect.get("buffered_bytes") {
            same(i, "buffered_bytes", &json!(framer.buffered_bytes()), b)?;
        }
    }
    Ok(())
}
