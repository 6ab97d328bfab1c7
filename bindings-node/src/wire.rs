//! Area `wire`: decode, encode, build and check the seven hub messages. Messages cross
//! the boundary as JSON text of their wire object (`wire::to_object`).

use napi::bindgen_prelude::Uint8Array;
use napi_derive::napi;
use stapel_runner_protocol::json::{Value as CoreValue, MAX_DEPTH};
use stapel_runner_protocol::wire::{self, DecodeError, Message, MessageType};

use crate::errors::{bad_argument, decode_error, guard};

/// The message as the JSON text of its wire object (declared fields, then unknown ones).
pub fn message_text(msg: &Message) -> napi::Result<String> {
    // The canonical frame is the JSON text of the wire object (`to_object`): declared
    // fields by the encoding rules, then unknown ones.
    Ok(wire::encode(msg))
}

/// Build a message from the JSON text of an object, tolerant unless `validate`, then
/// refuse it when it could not be encoded (`try_encode`).
pub fn message_from_text(text: &str, validate: bool) -> napi::Result<Message> {
    let msg = wire::decode_str(text, validate).map_err(|e| value_error(text, &e))?;
    wire::check_depth(&msg).map_err(|e| decode_error(&e))?;
    Ok(msg)
}

/// Decode a text frame. `null` when the frame is a plain, valid `task.progress` frame
/// (the core's validating fast path `peek_progress` accepted it, so its own text is its
/// wire object and the caller parses it); otherwise the decoded message's JSON text.
#[napi]
pub fn decode_text(frame: String, validate: bool) -> napi::Result<Option<String>> {
    guard(|| {
        if fast_path_ok(&frame) {
            return Ok(None);
        }
        let msg = wire::decode_str(&frame, validate).map_err(|e| decode_error(&e))?;
        decoded_text(&msg).map(Some)
    })
}

/// [`decode_text`] for the bytes of a frame (`Buffer` or `Uint8Array`): `null` when the
/// bytes are UTF-8 and the fast path accepted them.
#[napi]
pub fn decode_bytes(frame: Uint8Array, validate: bool) -> napi::Result<Option<String>> {
    guard(|| {
        let bytes: &[u8] = &frame;
        if let Ok(text) = std::str::from_utf8(bytes) {
            if fast_path_ok(text) {
                return Ok(None);
            }
        }
        let msg = wire::decode(bytes, validate).map_err(|e| decode_error(&e))?;
        decoded_text(&msg).map(Some)
    })
}

/// The fast path applies when `peek_progress` accepts the frame and the frame's own
/// object equals the wire object of its message (an absent `attempt` is emitted as 0
/// by `to_object`, so such a frame goes through the full path).
fn fast_path_ok(frame: &str) -> bool {
    wire::peek_progress(frame).is_some_and(|view| !lossy_in_js(view.payload))
}

/// Marks a decoded message whose numbers a JS number cannot hold exactly (see
/// [`decoded_text`]).
const LOSSY: char = '\u{2}';

/// A decoded message for the TS layer: its JSON text, or, when a number in it would
/// change in a JS number (an integer beyond ±(2^53 − 1), an integral float such as
/// `1e5` that the core writes as `100000.0`), the marker [`LOSSY`], the message's
/// canonical frame, a newline and its JSON text: the TS layer keeps the frame with the
/// object and encodes the object as that frame while the object is unchanged.
fn decoded_text(msg: &Message) -> napi::Result<String> {
    let text = message_text(msg)?;
    if !lossy_in_js(&text) {
        return Ok(text);
    }
    let frame = wire::try_encode(msg).map_err(|e| decode_error(&e))?;
    Ok(format!("{LOSSY}{frame}\n{text}"))
}

/// Whether well-formed JSON `text` holds a number that would not survive a round trip
/// through a JS number and back into the core's encoding: an integer beyond
/// ±(2^53 − 1), or a number written with a fraction or exponent whose value is integral
/// and below 1e21 (JS writes it as an integer literal, which the core then reads as an
/// integer, not the float it decoded). One pass over the bytes, strings skipped.
fn lossy_in_js(text: &str) -> bool {
    let bytes = text.as_bytes();
    let mut i = 0usize;
    while let Some(&b) = bytes.get(i) {
        match b {
            b'"' => {
                // Skip the string (the text is well-formed: it ends).
                i = i.saturating_add(1);
                while let Some(&c) = bytes.get(i) {
                    i = i.saturating_add(if c == b'\\' { 2 } else { 1 });
                    if c == b'"' {
                        break;
                    }
                }
            }
            b'-' | b'0'..=b'9' => {
                let start = i;
                let mut float = false;
                while let Some(&c) = bytes.get(i) {
                    match c {
                        b'0'..=b'9' | b'-' | b'+' => {}
                        b'.' | b'e' | b'E' => float = true,
                        _ => break,
                    }
                    i = i.saturating_add(1);
                }
                let token = text.get(start..i).unwrap_or_default();
                if number_is_lossy(token, float) {
                    return true;
                }
            }
            _ => i = i.saturating_add(1),
        }
    }
    false
}

/// Whether one JSON number token is lossy in JS (see [`lossy_in_js`]).
fn number_is_lossy(token: &str, float: bool) -> bool {
    if float {
        return token
            .parse::<f64>()
            .map_or(true, |v| v.fract() == 0.0 && v.abs() < 1e21);
    }
    let digits = token.trim_start_matches('-');
    if digits.len() < 16 {
        return false;
    }
    digits.parse::<u64>().map_or(true, |v| v > JS_MAX_SAFE)
}

/// Largest integer a JS number holds exactly: 2^53 − 1.
const JS_MAX_SAFE: u64 = (1 << 53) - 1;

/// The error for JSON text the TS layer made from a JS value: the core's, except that
/// text nesting deeper than the decoder reads is the core's `too_deep` error, as for a
/// value built in code (JSON text of a JS value is always well-formed, so a parse
/// failure of deep text is its depth).
fn value_error(text: &str, e: &DecodeError) -> napi::Error {
    if e.code() == "not_json" && deeper_than(text, MAX_DEPTH) {
        return decode_error(&DecodeError::too_deep());
    }
    decode_error(e)
}

/// Whether arrays and objects in well-formed JSON `text` nest deeper than `limit`.
fn deeper_than(text: &str, limit: usize) -> bool {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for b in text.bytes() {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth = depth.saturating_add(1);
                if depth > limit {
                    return true;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    false
}

/// Throw the core's error for text that is not valid Unicode (a JS string with a lone
/// surrogate has no UTF-8 form).
#[napi]
pub fn not_unicode_error() -> napi::Result<()> {
    guard(|| Err(decode_error(&DecodeError::not_unicode())))
}

/// Encode the message given as JSON text of its object: built with the decoding rules
/// (tolerant unless `validate`), then encoded (`try_encode`).
#[napi]
pub fn encode(message: String, validate: bool) -> napi::Result<String> {
    guard(|| {
        let msg = message_from_text(&message, validate)?;
        wire::try_encode(&msg).map_err(|e| decode_error(&e))
    })
}

/// Build a message from the JSON text of `fields` (decoding rules, tolerant unless
/// `validate`), set its unknown fields from the JSON text of `extra` (an unknown field
/// never overrides a declared one), and return its wire object as JSON text.
#[napi]
pub fn from_object(fields: String, validate: bool, extra: Option<String>) -> napi::Result<String> {
    guard(|| {
        let mut msg = wire::decode_str(&fields, validate).map_err(|e| value_error(&fields, &e))?;
        if let Some(extra) = extra {
            let parsed: CoreValue = wire::parse_value(extra.as_bytes())
                .map_err(|e| value_error(&extra, &e))?
                .into();
            match parsed {
                CoreValue::Object(more) => msg.extra_mut().extend(more),
                _ => return Err(bad_argument("extra", "not an object")),
            }
        }
        wire::check_depth(&msg).map_err(|e| decode_error(&e))?;
        message_text(&msg)
    })
}

/// Check a JSON value (as text) against every rule of message type `type_name`; the
/// message's wire object as JSON text when it passes.
#[napi]
pub fn check_as(value: String, type_name: String) -> napi::Result<String> {
    guard(|| {
        let mt = MessageType::from_wire(&type_name)
            .ok_or_else(|| bad_argument("type", format!("unknown message type {type_name:?}")))?;
        let v = wire::parse_value(value.as_bytes()).map_err(|e| value_error(&value, &e))?;
        let msg = wire::check_as(v.into(), mt).map_err(|e| decode_error(&e))?;
        message_text(&msg)
    })
}

/// The seven message type names, in the order of the protocol.
#[napi]
pub fn message_types() -> napi::Result<Vec<String>> {
    guard(|| {
        Ok(MessageType::ALL
            .iter()
            .map(|t| t.as_str().to_owned())
            .collect())
    })
}

/// Whether the message named `name` belongs to a per-task sequence.
#[napi]
pub fn is_sequenced(name: String) -> napi::Result<bool> {
    guard(|| Ok(wire::is_sequenced_name(&name)))
}

/// The wire schema version (1).
#[napi]
pub fn schema_version() -> napi::Result<u32> {
    guard(|| Ok(u32::try_from(wire::SCHEMA_VERSION).unwrap_or(u32::MAX)))
}

/// The wire protocol version this core speaks (1).
#[napi]
pub fn protocol_version() -> napi::Result<u32> {
    guard(|| Ok(u32::try_from(wire::PROTOCOL_VERSION).unwrap_or(u32::MAX)))
}
