//! The JSON Schemas in `conformance/schema/` and the Rust model/validator must not drift.
//!
//! 1. Each message schema declares exactly the message's keys, in the encoder's order.
//! 2. An independent JSON Schema validator (the `jsonschema` crate) and
//!    `decode(frame, validate = true)` agree on valid/invalid for every frame of the wire
//!    vectors and for thousands of mutations of valid frames (keys removed, values
//!    replaced by values of other types or out of range), at the top level and inside the
//!    embedded artifacts. Two documented rules lie outside JSON Schema and are excluded:
//!    `mismatch` (task_id vs task.id / report.task_id) and integer-valued floats such as
//!    `1.0`, which the protocol rejects as integers (the mutations never produce them).

use serde_json::{json, Map, Value};
use stapel_runner_protocol::wire::{decode, MessageType, Rule};
use std::path::{Path, PathBuf};

const BASE: &str = "https://schemas.stapel.dev/runner-protocol/";

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../conformance")
}

fn schema_file(t: MessageType) -> String {
    format!("{}.v1.json", t.as_str().replace('.', "_"))
}

fn load(rel: &str) -> Value {
    let text = std::fs::read_to_string(root().join("schema").join(rel))
        .unwrap_or_else(|e| panic!("{rel}: {e}"));
    serde_json::from_str(&text).unwrap()
}

struct Validators {
    by_type: Vec<(MessageType, jsonschema::Validator)>,
}

impl Validators {
    fn new() -> Self {
        let mut registry = jsonschema::Registry::new();
        for rel in [
            "artifacts/usage_split.v1.json",
            "artifacts/task_spec.v1.json",
            "artifacts/task_report.v1.json",
        ] {
            registry = registry.add(format!("{BASE}{rel}"), load(rel)).unwrap();
        }
        let registry = registry.prepare().unwrap();
        let by_type = MessageType::ALL
            .iter()
            .map(|t| {
                let schema = load(&schema_file(*t));
                let v = jsonschema::options()
                    .with_draft(jsonschema::Draft::Draft202012)
                    .with_registry(&registry)
                    .build(&schema)
                    .unwrap_or_else(|e| panic!("{}: {e}", t.as_str()));
                (*t, v)
            })
            .collect();
        Self { by_type }
    }

    fn schema_valid(&self, frame: &Value) -> Option<bool> {
        let t = MessageType::from_wire(frame.get("type")?.as_str()?)?;
        let (_, v) = self.by_type.iter().find(|(tt, _)| *tt == t)?;
        Some(v.is_valid(frame))
    }
}

/// `Some(verdict)` of the Rust validator, `None` when the frame falls under a documented
/// exclusion.
fn rust_valid(frame: &Value) -> Option<bool> {
    if has_integral_float(frame) {
        return None;
    }
    match decode(frame.to_string().as_bytes(), true) {
        Ok(_) => Some(true),
        Err(e) if e.code() == "schema_violation" => {
            if e.violations().iter().any(|v| v.rule == Rule::Mismatch) {
                None
            } else {
                Some(false)
            }
        }
        Err(_) => None,
    }
}

fn has_integral_float(v: &Value) -> bool {
    match v {
        Value::Number(n) => n.is_f64() && n.as_f64().is_some_and(|f| f.fract() == 0.0),
        Value::Array(a) => a.iter().any(has_integral_float),
        Value::Object(m) => m.values().any(has_integral_float),
        _ => false,
    }
}

#[test]
fn schemas_declare_the_encoder_keys_in_order() {
    for t in MessageType::ALL {
        let schema = load(&schema_file(t));
        let keys: Vec<&str> = schema["properties"]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(keys, t.keys(), "{}", t.as_str());
        assert_eq!(schema["properties"]["type"]["const"], json!(t.as_str()));
        assert_eq!(schema["$id"], json!(format!("{BASE}{}", schema_file(t))));
    }
}

fn vector_frames() -> Vec<Value> {
    let dir = root().join("vectors/wire");
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let v: Value =
            serde_json::from_str(&std::fs::read_to_string(entry.unwrap().path()).unwrap()).unwrap();
        for step in v["steps"].as_array().unwrap() {
            let input = &step["input"];
            let frame = input
                .get("decode")
                .and_then(Value::as_str)
                .and_then(|s| serde_json::from_str::<Value>(s).ok())
                .or_else(|| input.get("encode").cloned());
            if let Some(f) = frame.filter(Value::is_object) {
                out.push(f);
            }
        }
    }
    out
}

fn replacements() -> Vec<Value> {
    vec![
        Value::Null,
        json!("x"),
        json!(""),
        json!(-1),
        json!(0),
        json!(9_007_199_254_740_992u64),
        json!(1.5),
        json!(true),
        json!([]),
        json!(["a"]),
        json!({}),
    ]
}

/// Every object reachable from `v` (not through arrays deeper than one level), by path.
fn object_paths(v: &Value, path: Vec<String>, out: &mut Vec<Vec<String>>) {
    match v {
        Value::Object(m) => {
            out.push(path.clone());
            for (k, child) in m {
                let mut p = path.clone();
                p.push(k.clone());
                object_paths(child, p, out);
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate().take(2) {
                let mut p = path.clone();
                p.push(i.to_string());
                object_paths(child, p, out);
            }
        }
        _ => {}
    }
}

fn at_mut<'a>(v: &'a mut Value, path: &[String]) -> Option<&'a mut Map<String, Value>> {
    let mut cur = v;
    for p in path {
        cur = match cur {
            Value::Object(m) => m.get_mut(p)?,
            Value::Array(a) => a.get_mut(p.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    cur.as_object_mut()
}

#[test]
fn schema_and_validator_agree() {
    let validators = Validators::new();
    let mut checked = 0usize;
    let mut disagreements = Vec::new();
    let mut check = |frame: &Value| {
        let (Some(s), Some(r)) = (validators.schema_valid(frame), rust_valid(frame)) else {
            return;
        };
        checked += 1;
        if s != r {
            disagreements.push(format!("schema says {s}, decode says {r}: {frame}"));
        }
    };
    let frames = vector_frames();
    assert!(frames.len() > 50, "too few vector frames: {}", frames.len());
    for base in &frames {
        check(base);
        if rust_valid(base) != Some(true) {
            continue;
        }
        let mut paths = Vec::new();
        object_paths(base, Vec::new(), &mut paths);
        for path in paths {
            let keys: Vec<String> = at_mut(&mut base.clone(), &path)
                .unwrap()
                .keys()
                .cloned()
                .collect();
            for key in keys {
                if path.is_empty() && key == "type" {
                    continue;
                }
                let mut removed = base.clone();
                at_mut(&mut removed, &path).unwrap().shift_remove(&key);
                check(&removed);
                for r in replacements() {
                    let mut replaced = base.clone();
                    at_mut(&mut replaced, &path).unwrap().insert(key.clone(), r);
                    check(&replaced);
                }
            }
        }
    }
    assert!(
        disagreements.is_empty(),
        "{} disagreements:\n{}",
        disagreements.len(),
        disagreements.join("\n")
    );
    assert!(checked > 3000, "only {checked} frames compared");
    println!("schema and validator agree on {checked} frames");
}

/// Every vector file is valid against the vector format's own schema.
#[test]
fn vectors_follow_the_vector_format() {
    let text = std::fs::read_to_string(root().join("vector.schema.json")).unwrap();
    let schema: Value = serde_json::from_str(&text).unwrap();
    let validator = jsonschema::draft202012::new(&schema).unwrap();
    let mut stack = vec![root().join("vectors")];
    let mut n = 0;
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
            let errors: Vec<String> = validator
                .iter_errors(&v)
                .map(|e| format!("{} at {}", e, e.instance_path()))
                .collect();
            assert!(
                errors.is_empty(),
                "{}: {}",
                path.display(),
                errors.join("; ")
            );
            n += 1;
        }
    }
    assert!(n >= 60, "only {n} vectors");
}
