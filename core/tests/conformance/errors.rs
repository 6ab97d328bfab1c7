//! Area `errors`: the one error table (`errors::error_class`, `errors::ERROR_CLASSES`).

use serde_json::{json, Value};
use stapel_runner_protocol::errors::{error_class, ERROR_CLASSES};

use crate::common::{same, steps};

pub fn run(vector: &Value) -> Result<(), String> {
    for (i, input, expect) in steps(vector) {
        if let Some(q) = input.get("class_of") {
            let kind = q
                .get("kind")
                .and_then(Value::as_str)
                .ok_or("class_of.kind")?;
            let code = q
                .get("code")
                .and_then(Value::as_str)
                .ok_or("class_of.code")?;
            let got = json!(error_class(kind, code));
            same(i, "class", &got, expect.get("class").ok_or("expect.class")?)?;
        } else if input.get("classes").is_some() {
            let got: Vec<Value> = ERROR_CLASSES
                .iter()
                .map(|c| json!({"name": c.name, "parent": c.parent}))
                .collect();
            same(
                i,
                "classes",
                &Value::Array(got),
                expect.get("classes").ok_or("expect.classes")?,
            )?;
        } else {
            return Err(format!("step {i}: unknown input {input}"));
        }
    }
    Ok(())
}
