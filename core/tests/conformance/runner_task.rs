//! Area `runner_task`: the connected runner's task policy through
//! `runner_task::call` (one call per step; `expect.result` or `expect.error`).

use serde_json::Value;
use stapel_runner_protocol::runner_task;

use crate::common::{same, steps};

pub fn run(vector: &Value) -> Result<(), String> {
    for (i, input, expect) in steps(vector) {
        match (
            runner_task::call(input),
            expect.get("result"),
            expect.get("error"),
        ) {
            (Ok(got), Some(want), None) => same(i, "result", &got, want)?,
            (Err(e), None, Some(want)) => same(i, "error", &Value::from(e.code()), want)?,
            (got, _, _) => {
                return Err(format!(
                    "step {i}: got {got:?}, expected {expect} (exactly one of result/error)"
                ))
            }
        }
    }
    Ok(())
}
