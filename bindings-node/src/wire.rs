//! Area `wire`: decode, encode, build and check the seven hub messages. Messages cross
//! the boundary as JSON text of their wire object (`wire::encode`); a plain, valid
//! `task.progress` frame (the core's fast path, `wire::peek_progress`) crosses as
//! numbers in the scratch (see [`write_view`]) and the TypeScript layer builds it from
//! its own string.

use napi_derive::napi;
use serde_json::json;
use stapel_runner_protocol::framing::DEFAULT_MAX_LINE_BYTES;
use stapel_runner_protocol::json::Value as CoreValue;
use stapel_runner_protocol::wire::{
    self, DecodeError, Message, MessageType, Pong, ProgressView, SCHEMA_FILES,
};

use crate::boundary::{utf16_offsets, Out, Text};
use crate::errors::{bad_argument, decode_error, guard};

/// Numbers [`write_view`] writes into the scratch for one fast-path frame.
pub const VIEW_LEN: usize = 9;

/// A fast-path frame's fields as the numbers the scratch carries: `seq`, `attempt`, the
/// JS string offsets (UTF-16) of `task_id`, `kind` and `payload` (start and end of
/// each), and `1` when the payload's numbers are exact in a JS number
/// (`ProgressView::payload_f64_exact`), else `0`.
pub fn view_numbers(frame: &str, view: &ProgressView<'_>) -> [f64; VIEW_LEN] {
    let base = frame.as_ptr() as usize;
    let span = |s: &str| {
        let start = (s.as_ptr() as usize).wrapping_sub(base);
        [start, start.wrapping_add(s.len())]
    };
    let [ts, te] = span(view.task_id);
    let [ks, ke] = span(view.kind);
    let [ps, pe] = span(view.payload);
    // The spans appear in frame order, which is any order of the three keys.
    let mut order = [(ts, 0usize), (te, 1), (ks, 2), (ke, 3), (ps, 4), (pe, 5)];
    order.sort_unstable();
    let units = utf16_offsets(frame, order.map(|(p, _)| p));
    let mut out = [0f64; VIEW_LEN];
    out[0] = num(view.seq);
    out[1] = num(view.attempt);
    for ((_, slot), u) in order.iter().zip(units) {
        if let Some(o) = out.get_mut(2 + *slot) {
            *o = num(u as u64);
        }
    }
    out[8] = if view.payload_f64_exact { 1.0 } else { 0.0 };
    out
}

/// Write [`view_numbers`] at `at` in the scratch.
pub fn put_view(out: &Out, at: usize, numbers: &[f64; VIEW_LEN]) {
    for (k, v) in numbers.iter().enumerate() {
        out.put(at + k, *v);
    }
}

/// A `u64` for JS: exact below 2^53, which every protocol integer is.
#[allow(clippy::cast_precision_loss)]
pub fn num(n: u64) -> f64 {
    n as f64
}

/// Build a message from the JSON text of an object (made by the TS layer from a JS
/// value), tolerant unless `validate`, refusing one the decoder could not read back
/// (`check_depth`): the core's errors, as they are.
pub fn message_from_text(text: &str, validate: bool) -> napi::Result<Message> {
    let msg = wire::decode_str(text, validate).map_err(|e| decode_error(&e))?;
    wire::check_depth(&msg).map_err(|e| decode_error(&e))?;
    Ok(msg)
}

/// Marks a decoded message whose numbers a JS number cannot hold exactly (see
/// [`decoded_text`]).
const LOSSY: char = '\u{2}';

/// A decoded message for the TS layer: its JSON text, or, when a number in it would
/// change in a JS number (an integer beyond ±(2^53 − 1), an integral float such as
/// `1e5` that the core writes as `100000.0`), the marker [`LOSSY`], the message's
/// canonical frame, a newline and its JSON text: the TS layer keeps the frame with the
/// object and encodes the object as that frame while the object is unchanged.
pub fn decoded_text(msg: &Message) -> napi::Result<String> {
    let text = wire::encode(msg);
    if !lossy_in_js(&text) {
        return Ok(text);
    }
    let frame = wire::try_encode(msg).map_err(|e| decode_error(&e))?;
    Ok(format!("{LOSSY}{frame}\n{text}"))
}

/// Decode a text frame. A plain, valid `task.progress` frame (the core's validating fast
/// path, when `fast`) leaves its fields in the scratch ([`view_numbers`]) and returns
/// `null`; any other frame returns the decoded message's JSON text ([`decoded_text`]).
#[napi(ts_args_type = "frame: string, validate: boolean, fast: boolean")]
pub fn decode_text(frame: Text, validate: bool, fast: bool) -> napi::Result<Option<String>> {
    guard(|| {
        frame.with(|text| {
            if fast {
                if let Some(view) = wire::peek_progress(text) {
                    put_view(&Out::new(), 0, &view_numbers(text, &view));
                    return Ok(None);
                }
            }
            let msg = wire::decode_full(text, validate).map_err(|e| decode_error(&e))?;
            decoded_text(&msg).map(Some)
        })?
    })
}

/// [`decode_text`] for the bytes of a frame (`Buffer` or `Uint8Array`, borrowed): the
/// scratch offsets are those of the bytes decoded as a JS string.
#[napi]
pub fn decode_bytes(frame: &[u8], validate: bool, fast: bool) -> napi::Result<Option<String>> {
    guard(|| {
        if fast {
            if let Ok(text) = std::str::from_utf8(frame) {
                if let Some(view) = wire::peek_progress(text) {
                    put_view(&Out::new(), 0, &view_numbers(text, &view));
                    return Ok(None);
                }
            }
        }
        let msg = match std::str::from_utf8(frame) {
            Ok(text) => wire::decode_full(text, validate),
            Err(_) => wire::decode(frame, validate),
        }
        .map_err(|e| decode_error(&e))?;
        decoded_text(&msg).map(Some)
    })
}

/// Whether well-formed JSON `text` holds a number that would not survive a round trip
/// through a JS number and back into the core's encoding: an integer beyond
/// ±(2^53 − 1), or a number written with a fraction or exponent whose value is integral
/// and below 1e21 (JS writes it as an integer literal, which the core then reads as an
/// integer, not the float it decoded). One pass over the bytes, strings skipped. Only
/// the full decode path needs it (the fast path's scanner says the same of a payload in
/// its one pass: `ProgressView::payload_f64_exact`).
pub fn lossy_in_js(text: &str) -> bool {
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

/// Throw the core's error for text that is not valid Unicode (a JS string with a lone
/// surrogate has no UTF-8 form).
#[napi]
pub fn not_unicode_error() -> napi::Result<()> {
    guard(|| Err(decode_error(&DecodeError::not_unicode())))
}

/// Encode the message given as JSON text of its object: built with the decoding rules
/// (tolerant unless `validate`), then encoded (`try_encode`).
#[napi(ts_args_type = "message: string, validate: boolean")]
pub fn encode(message: Text, validate: bool) -> napi::Result<String> {
    guard(|| {
        message.with(|text| {
            let msg = message_from_text(text, validate)?;
            wire::try_encode(&msg).map_err(|e| decode_error(&e))
        })?
    })
}

/// Build a message from the JSON text of `fields` (decoding rules, tolerant unless
/// `validate`), set its unknown fields from the JSON text of `extra` (an unknown field
/// never overrides a declared one), and return its wire object as JSON text.
#[napi]
pub fn from_object(fields: String, validate: bool, extra: Option<String>) -> napi::Result<String> {
    guard(|| {
        let mut msg = wire::decode_str(&fields, validate).map_err(|e| decode_error(&e))?;
        if let Some(extra) = extra {
            let parsed: CoreValue = wire::parse_value(extra.as_bytes())
                .map_err(|e| decode_error(&e))?
                .into();
            match parsed {
                CoreValue::Object(more) => msg.extra_mut().extend(more),
                _ => return Err(bad_argument("extra", "not an object")),
            }
        }
        wire::check_depth(&msg).map_err(|e| decode_error(&e))?;
        Ok(wire::encode(&msg))
    })
}

/// Check a JSON value (as text) against every rule of message type `type_name`; the
/// message's wire object as JSON text when it passes.
#[napi]
pub fn check_as(value: String, type_name: String) -> napi::Result<String> {
    guard(|| {
        let mt = MessageType::from_wire(&type_name)
            .ok_or_else(|| bad_argument("type", format!("unknown message type {type_name:?}")))?;
        let v = wire::parse_value(value.as_bytes()).map_err(|e| decode_error(&e))?;
        let msg = wire::check_as(v.into(), mt).map_err(|e| decode_error(&e))?;
        Ok(wire::encode(&msg))
    })
}

/// The pong answering a ping (given as JSON text of its object, tolerant): the pong's
/// wire object as JSON text (the core's `Pong::answering`: it echoes the nonce).
#[napi]
pub fn answer_ping(ping: String) -> napi::Result<String> {
    guard(|| match message_from_text(&ping, false)? {
        Message::Ping(p) => Ok(wire::encode(&Message::Pong(Pong::answering(&p)))),
        other => Err(bad_argument(
            "ping",
            format!("a {} message is not a ping", other.message_type().as_str()),
        )),
    })
}

/// The wire constants as JSON text: `schema_version`, `protocol_version`,
/// `message_types` (the protocol's order), `sequenced_types`, `schema_files` (type →
/// schema file name, the core's manifest) and `default_max_line_bytes`.
#[napi]
pub fn wire_constants() -> napi::Result<String> {
    guard(|| {
        let types: Vec<&str> = MessageType::ALL.iter().map(|t| t.as_str()).collect();
        let sequenced: Vec<&str> = MessageType::ALL
            .iter()
            .filter(|t| t.is_sequenced())
            .map(|t| t.as_str())
            .collect();
        let files: serde_json::Map<String, serde_json::Value> = SCHEMA_FILES
            .iter()
            .map(|(t, f)| (t.as_str().to_owned(), json!(f)))
            .collect();
        Ok(json!({
            "schema_version": wire::SCHEMA_VERSION,
            "protocol_version": wire::PROTOCOL_VERSION,
            "message_types": types,
            "sequenced_types": sequenced,
            "schema_files": files,
            "default_max_line_bytes": DEFAULT_MAX_LINE_BYTES,
        })
        .to_string())
    })
}

/// The package's version: the crates' (one version for everything).
#[napi]
pub fn version() -> napi::Result<String> {
    guard(|| Ok(env!("CARGO_PKG_VERSION").to_owned()))
}

/// The schema file name of message type `type_name` (the core's manifest); an unknown
/// type throws the core's `unknown_type` decode error.
#[napi]
pub fn schema_file(type_name: String) -> napi::Result<String> {
    guard(|| {
        MessageType::from_wire(&type_name)
            .and_then(|mt| SCHEMA_FILES.iter().find(|(t, _)| *t == mt))
            .map(|(_, f)| (*f).to_owned())
            .ok_or_else(|| {
                decode_error(&DecodeError::UnknownType {
                    type_name: Some(type_name.clone()),
                })
            })
    })
}

/// Whether the message named `name` belongs to a per-task sequence.
#[napi]
pub fn is_sequenced(name: String) -> napi::Result<bool> {
    guard(|| Ok(wire::is_sequenced_name(&name)))
}
