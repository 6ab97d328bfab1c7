//! A readable rendering of the `paperclip.runner.stream.v1` stream for a person at a
//! terminal. Programs should read the JSONL stream instead.

use serde_json::Value;

/// Escape control characters (terminal escape sequences included) so that text from the
/// harness cannot drive the terminal.
fn printable(s: String) -> String {
    if !s.chars().any(char::is_control) {
        return s;
    }
    s.chars()
        .flat_map(|c| {
            let escaped: Vec<char> = if c.is_control() {
                c.escape_default().collect()
            } else {
                vec![c]
            };
            escaped
        })
        .collect()
}

/// One stream line rendered as one human-readable line (no trailing newline, control
/// characters escaped). Lines that are not stream messages are shown as they are.
pub fn render(stream_line: &str) -> String {
    printable(render_raw(stream_line))
}

fn render_raw(stream_line: &str) -> String {
    let Ok(v) = serde_json::from_str::<Value>(stream_line) else {
        return format!("? {stream_line}");
    };
    let msg = &v["message"];
    match msg["kind"].as_str() {
        Some("event") => render_event(&msg["event"]),
        Some("command_receipt") => format!(
            "      ← receipt #{} {} ({}): {}",
            msg["controllerSeq"],
            msg["status"].as_str().unwrap_or("?"),
            msg["commandId"].as_str().unwrap_or("?"),
            msg["detail"].as_str().unwrap_or("")
        ),
        Some("diagnostic") => format!(
            "      ! {}: {}",
            msg["level"].as_str().unwrap_or("?"),
            msg["message"].as_str().unwrap_or("")
        ),
        _ => format!("? {stream_line}"),
    }
}

/// A command the built-in controller sent, rendered for a person.
pub fn render_command(command_line: &str) -> String {
    printable(render_command_raw(command_line.trim_end()))
}

fn render_command_raw(command_line: &str) -> String {
    let Ok(v) = serde_json::from_str::<Value>(command_line) else {
        return format!("→ ? {command_line}");
    };
    let payload = &v["payload"];
    let detail = if payload.as_object().is_some_and(|p| !p.is_empty()) {
        format!(" {payload}")
    } else {
        String::new()
    };
    format!(
        "      → #{} {}{}",
        v["controllerSeq"],
        v["type"].as_str().unwrap_or("?"),
        detail
    )
}

fn render_event(e: &Value) -> String {
    let seq = e["sourceSeq"].as_u64().unwrap_or(0);
    let t = e["eventType"].as_str().unwrap_or("?");
    let p = &e["payload"];
    let s = |v: &Value| {
        v.as_str()
            .map(str::to_owned)
            .unwrap_or_else(|| v.to_string())
    };
    let detail = match t {
        "runtime.phase.changed" => format!("phase={}", s(&p["phase"])),
        "harness.starting" | "harness.ready" => {
            format!(
                "driver={} transport={}",
                s(&p["driverKind"]),
                s(&p["transport"])
            )
        }
        "turn.submitted" => format!("{:?}", s(&p["text"])),
        "item.started" | "item.completed" | "item.failed" => format!(
            "{} [{}] {}",
            e["itemId"].as_str().unwrap_or("-"),
            s(&p["kind"]),
            s(&p["text"])
        ),
        "item.delta" => format!(
            "{} +{:?}",
            e["itemId"].as_str().unwrap_or("-"),
            s(&p["text"])
        ),
        "runtime_request.created" => format!(
            "{} {}: {}",
            s(&p["request"]["type"]),
            s(&p["request"]["requestId"]),
            s(&p["request"]["prompt"])
        ),
        "runtime_request.resolved" => format!("{} → {}", s(&p["requestId"]), p["response"]),
        "run.result.proposed" => {
            let r = if p["result"].is_object() {
                &p["result"]
            } else {
                p
            };
            format!(
                "disposition={} {}",
                s(&r["reportedWorkDisposition"]),
                r["summary"].as_str().unwrap_or("")
            )
        }
        "harness.exited" => {
            let x = &p["processExit"];
            let logs = &p["logs"];
            format!(
                "exit={} signal={} result={} logs: {} kept ({} bytes), {} dropped",
                x["exitCode"],
                x["signal"],
                p["semanticResultObserved"],
                logs["lines"].as_array().map_or(0, Vec::len),
                logs["retainedBytes"],
                logs["droppedLines"]
            )
        }
        "run.terminal" => {
            let r = &p["reconciliation"];
            format!(
                "turn={} run={} work={} reason={} proposal valid={} contradicted={}",
                s(&p["turnTerminalState"]),
                s(&p["runTerminalState"]),
                s(&p["reportedWorkDisposition"]),
                s(&r["reason"]),
                r["proposalValid"],
                r["proposalContradicted"]
            )
        }
        "harness.diagnostic" | "runner.diagnostic" => {
            format!("{} {}", s(&p["code"]), p["message"].as_str().unwrap_or(""))
        }
        _ => {
            let text = p.to_string();
            if text == "{}" || text == "null" {
                String::new()
            } else {
                text
            }
        }
    };
    format!("{seq:>4}  {t:<26} {detail}").trim_end().to_owned()
}

#[cfg(test)]
mod tests {
    #[test]
    fn harness_text_cannot_emit_terminal_escapes() {
        let line = r#"{"schema":"paperclip.runner.stream.v1","message":{"kind":"diagnostic","level":"warning","message":"\u001b[2Jboom\nnext"}}"#;
        let shown = super::render(line);
        assert!(!shown.chars().any(char::is_control), "{shown:?}");
        assert!(shown.contains("\\u{1b}[2Jboom\\nnext"), "{shown}");
    }
}
