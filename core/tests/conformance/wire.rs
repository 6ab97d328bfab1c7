//! Area `wire`: decode / validate / encode of hub-protocol frames.

use serde_json::Value;

pub fn run(_vector: &Value) -> Result<(), String> {
    Err("wire runner not written yet".into())
}
