//! Canonical JSON: object keys sorted recursively, arrays kept in order, compact.
//!
//! The command ledger compares commands by their canonical text, so two encodings of the
//! same command (different key order, different whitespace) are the same command.
//! Keys are sorted by their UTF-8 bytes (which equals code-point order). Strings are
//! written as `serde_json` writes them (no ASCII escaping); numbers as parsed.

use serde_json::Value;

/// The canonical text of a JSON value: `{"z": [2, 1], "a": {"b": true}}` is
/// `{"a":{"b":true},"z":[2,1]}`. The command ledger compares
/// [`CommandEnvelope::ledger_value`](super::CommandEnvelope::ledger_value) in this form.
///
/// ```
/// use stapel_runner_protocol::local::canonical_json;
///
/// let v = serde_json::json!({"z": [2, 1], "a": {"b": true}});
/// assert_eq!(canonical_json(&v), r#"{"a":{"b":true},"z":[2,1]}"#);
/// ```
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (key, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_canonical(item, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn sorts_nested_keys_and_keeps_array_order() {
        let v = json!({"z": [{"y": 1, "x": 2}, 1], "a": {"c": null, "b": "é"}});
        assert_eq!(
            canonical_json(&v),
            r#"{"a":{"b":"é","c":null},"z":[{"x":2,"y":1},1]}"#
        );
    }
}
