//! JSON text at the boundary: the core's strict parser in, the core's encoding out.

use stapel_runner_protocol::json::{Object, Value};
use stapel_runner_protocol::wire;

use crate::errors::ProtocolError;

/// Parses JSON text with the wire decoder's rules (duplicate keys refused, order kept).
pub(crate) fn parse(text: &str) -> Result<Value, ProtocolError> {
    Ok(wire::parse_value(text.as_bytes())?.into())
}

/// Parses JSON text into a `serde_json::Value` (for the core's `from_value` readers that
/// take one), with the same strict parser.
pub(crate) fn parse_serde(text: &str) -> Result<serde_json::Value, ProtocolError> {
    Ok(wire::parse_value(text.as_bytes())?)
}

/// An object as compact JSON text (the core's encoding).
pub(crate) fn object_text(o: &Object) -> String {
    Value::Object(o.clone()).to_string()
}
