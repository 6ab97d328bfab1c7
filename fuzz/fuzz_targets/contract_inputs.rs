//! Contract models and gateway inputs: every strict model parser and the gateway's JSON
//! input form on arbitrary JSON (never a panic; canonical output re-parses to itself),
//! the gateway machine driven by a sequence of arbitrary inputs (at most one result,
//! nothing after it, evidence always parses as its strict model), the secret detector
//! (spans in bounds, sorted, disjoint, on character boundaries; redaction replaces
//! exactly them; `looks_like_credential` agrees) and the production paths that redact
//! free text (a report's summary, progress fields). Campaigns run it with
//! `-max_len=1024` (the detector is linear; `contract_secret_corpus` has the long
//! pathological inputs).
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::{json, Value};
use stapel_runner_protocol::contract::{
    parse_model, safety, Catalog, ExecutionEvidence, Gateway, GatewayConfig, GatewayInput,
    GatewayOutput, MODEL_NAMES,
};
use stapel_runner_protocol::runner_task;

fn catalog() -> Catalog {
    Catalog::from_value(&json!({
        "profiles": [{
            "contract_version": "1.0", "profile_id": "p", "rein": "r", "model": "m",
            "sandbox_profile": "s", "tool_policy": {"allowed_tools": ["t"]}
        }],
        "reins": [{"rein_id": "r", "contract_version": "1.0", "tool_event_visibility": "partial"}]
    }))
    .expect("catalog")
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    // The secret detector on the raw text.
    let spans = safety::find_secrets(&text);
    let mut end = 0;
    for r in &spans {
        assert!(
            r.start >= end && r.start < r.end && r.end <= text.len(),
            "span {r:?}"
        );
        assert!(text.is_char_boundary(r.start) && text.is_char_boundary(r.end));
        end = r.end;
    }
    let (redacted, n) = safety::redact_secrets(&text);
    assert_eq!(n, spans.len());
    // `looks_like_credential` is another full scan: checked on short texts only (the
    // campaign's executions go to the paths below).
    if text.len() <= 256 {
        assert_eq!(
            safety::looks_like_credential(&text),
            !spans.is_empty() || (text.contains("-----BEGIN") && text.contains("PRIVATE KEY"))
        );
    }
    // The production paths that redact free text: a report whose cancel reason is the
    // text, progress whose copied fields are the text (never an error, never a panic;
    // what they carry is the redacted text), on the first 256 characters.
    let short: String = text.chars().take(256).collect();
    let report = runner_task::call(
        &json!({"report": {"task_id": "T", "outcome": {"type": "cancelled", "reason": &short}}}),
    )
    .expect("a report call");
    let summary = report["summary_business"]
        .as_str()
        .expect("a summary")
        .to_owned();
    assert!(summary.starts_with("cancelled by the hub: "));
    let progress =
        runner_task::call(&json!({"harness_event": {"type": "status", "state": &short}}))
            .expect("a progress call");
    assert!(progress["payload"]["state"].is_string());
    let _ = redacted;

    let values: Vec<Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .collect();
    for v in &values {
        for name in MODEL_NAMES {
            if let Ok(canonical) = parse_model(name, v) {
                assert_eq!(
                    parse_model(name, &canonical).ok(),
                    Some(canonical.clone()),
                    "{name} canonical form"
                );
            }
        }
    }
    let mut gw = Gateway::new(GatewayConfig::new(catalog()));
    let mut results = 0;
    for (now, v) in values.iter().enumerate() {
        let Ok(input) = GatewayInput::from_value(v) else {
            continue;
        };
        let _ = gw.handle_input(now as u64, input);
        while let Some(out) = gw.poll_output() {
            assert_eq!(results, 0, "output after the result");
            if let GatewayOutput::Result(r) = out {
                results += 1;
                let ev = r.evidence.to_value();
                assert_eq!(
                    ExecutionEvidence::from_value(&ev)
                        .map(|e| e.to_value())
                        .ok(),
                    Some(ev)
                );
            }
        }
    }
});
