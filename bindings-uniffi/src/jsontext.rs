//! JSON text at the boundary, for the genuinely open values only (payloads, `extra`,
//! invocations, metadata, tool arguments and outputs, budgets): the wire decoder's
//! strict parser in (duplicate keys refused, key order kept), the core's encoding out.

use stapel_runner_protocol::json::{Object, Value};
use stapel_runner_protocol::wire::{self, DecodeError};

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

/// Parses JSON object text into a `serde_json` map; anything but an object is the
/// decoder's `not_object`.
pub(crate) fn object_serde(
    text: &str,
) -> Result<serde_json::Map<String, serde_json::Value>, ProtocolError> {
    match parse_serde(text)? {
        serde_json::Value::Object(m) => Ok(m),
        other => Err(DecodeError::NotObject {
            found: Value::from(other).type_name(),
        }
        .into()),
    }
}

/// An optional JSON value given as text.
pub(crate) fn optional_value_serde(
    text: Option<&str>,
) -> Result<Option<serde_json::Value>, ProtocolError> {
    text.map(parse_serde).transpose()
}

/// An object as compact JSON text (the core's encoding).
pub(crate) fn object_text(o: &Object) -> String {
    Value::Object(o.clone()).to_string()
}

/// A `serde_json` object as compact JSON text (key order kept).
pub(crate) fn serde_object_text(o: &serde_json::Map<String, serde_json::Value>) -> String {
    let mut out = String::from("{");
    for (i, (k, v)) in o.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&serde_json::Value::String(k.clone()).to_string());
        out.push(':');
        out.push_str(&v.to_string());
    }
    out.push('}');
    out
}
