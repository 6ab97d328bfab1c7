//! Area `framing`: the bounded JSONL line framer.

use serde_json::{json, Value};
use stapel_runner_protocol::framing::{FramerConfig, LineFramer};

use crate::common::{bytes_of, same, steps};

pub fn run(vector: &Value) -> Result<(), String> {
    let cfg = &vector["config"];
    let mut config = FramerConfig::default();
    if let Some(n) = cfg.get("max_line_bytes").and_then(Value::as_u64) {
        config.max_line_bytes = n as usize;
    }
    if let Some(b) = cfg.get("skip_empty_lines").and_then(Value::as_bool) {
        config.skip_empty_lines = b;
    }
    let max = config.max_line_bytes;
    let mut framer = LineFramer::new(config);
    for (i, input, expect) in steps(vector) {
        let mut output = Vec::new();
        let mut error = Value::Null;
        let drain = |f: &mut LineFramer, out: &mut Vec<Value>| {
            while let Some(item) = f.poll_line() {
                out.push(match item {
                    Ok(line) => json!({ "line": line }),
                    Err(e) => json!({ "error": e.code(), "line_number": line_number(&e) }),
                });
            }
        };
        if let Some(data) = bytes_of(input, "push")? {
            let chunk = input.get("chunk_size").and_then(Value::as_u64).unwrap_or(0) as usize;
            let chunk = if chunk == 0 { data.len().max(1) } else { chunk };
            for piece in data.chunks(chunk) {
                if let Err(e) = framer.push(piece) {
                    error = json!(e.code());
                    break;
                }
                if framer.buffered_bytes() > max {
                    return Err(format!(
                        "step {i}: framer buffered {} > {max}",
                        framer.buffered_bytes()
                    ));
                }
                drain(&mut framer, &mut output);
            }
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
        if let Some(b) = expect.get("buffered_bytes") {
            same(i, "buffered_bytes", &json!(framer.buffered_bytes()), b)?;
        }
    }
    Ok(())
}

fn line_number(e: &stapel_runner_protocol::framing::FramingError) -> Value {
    use stapel_runner_protocol::framing::FramingError as F;
    match e {
        F::LineTooLong { line_number, .. } | F::InvalidUtf8 { line_number, .. } => {
            json!(line_number)
        }
        _ => Value::Null,
    }
}
