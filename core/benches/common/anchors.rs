//! The anchors the codec and ingest benchmarks are compared with: a plain typed-struct
//! decode of the same `usage` progress frame with `serde_json` and with `sonic-rs`
//! (owned `String`s, no validation beyond the types: the obvious alternative a Rust hub
//! would write without this crate).

#![allow(dead_code)]

use serde::Deserialize;

/// `payload.usage`.
#[derive(Deserialize)]
pub struct Usage {
    pub cache_read: u64,
    pub cache_write: u64,
    pub fresh_input: u64,
    pub output: u64,
    pub thinking: u64,
}

/// The payload of the wire bench's frame.
#[derive(Deserialize)]
pub struct WirePayload {
    pub usage: Usage,
    pub model: String,
    pub call_id: String,
    pub turn: u64,
}

/// The payload of the ingest bench's frames.
#[derive(Deserialize)]
pub struct IngestPayload {
    pub usage: Usage,
    pub model: String,
    pub turn: u64,
}

/// A `task.progress` frame as a typed struct.
#[derive(Deserialize)]
pub struct Progress<P> {
    pub schema_version: u64,
    #[serde(rename = "type")]
    pub message_type: String,
    pub task_id: String,
    pub seq: u64,
    pub kind: String,
    pub attempt: u64,
    pub payload: P,
}

/// `serde_json` typed decode.
pub fn serde_typed<P: for<'de> Deserialize<'de>>(frame: &str) -> Progress<P> {
    serde_json::from_str(frame).expect("anchor frame decodes")
}

/// `sonic-rs` typed decode.
pub fn sonic_typed<P: for<'de> Deserialize<'de>>(frame: &str) -> Progress<P> {
    sonic_rs::from_str(frame).expect("anchor frame decodes")
}
