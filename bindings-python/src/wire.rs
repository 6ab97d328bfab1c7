//! Module-level wire functions: `encode`, `decode`, `validate`, `is_valid`, `iter_errors`,
//! `message_types`.

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyDict, PyString};
use stapel_runner_protocol::wire::{self, DecodeError, Decoded, MessageType};

use crate::errors::{decode_error, raise};
use crate::json::{py_to_jvalue, py_to_object, type_name};
use crate::messages::{message_from_py, message_to_py, progress_from_view, with_message};

/// Encode a message (or a dict, built with the tolerant rules) as one compact JSON frame:
/// the core's deterministic, byte-stable encoding. The module's `encode` is
/// [`crate::fastcall`]'s vectorcall function around this.
pub fn encode<'py>(message: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyString>> {
    if let Some(frame) = crate::messages::encode_fast(message) {
        return Ok(frame);
    }
    let py = message.py();
    with_message(message, |m| (wire::try_encode(&m), m))?
        .map(|frame| crate::pyobj::new_str(py, &frame))
        .map_err(|e| decode_error(py, &e))
}

/// Decode one frame (`str`, `bytes`, `bytearray` or an already-parsed `dict`) into its
/// message class. `validate=True` checks every schema rule.
///
/// The module's `decode` is [`crate::fastcall`]'s vectorcall function, which reads a
/// `str` itself and calls this for other frames.
pub fn decode<'py>(frame: &Bound<'py, PyAny>, validate: bool) -> PyResult<Bound<'py, PyAny>> {
    let py = frame.py();
    let result = if let Ok(s) = frame.cast::<PyString>() {
        let text = s.to_str().map_err(|_| not_utf8(py))?;
        // SAFETY: `text` is the UTF-8 view of the immutable `str` `frame`.
        return unsafe { decode_text(py, text, validate, Some(frame)) };
    } else if let Ok(b) = frame.cast::<PyBytes>() {
        // SAFETY: the buffer of the immutable `bytes` `frame`.
        return unsafe { decode_bytes(py, b.as_bytes(), validate, Some(frame)) };
    } else if let Ok(b) = frame.cast::<PyByteArray>() {
        // SAFETY: no owner: a bytearray can change, so the message copies its text.
        return unsafe { decode_bytes(py, &b.to_vec(), validate, None) };
    } else if frame.cast::<PyDict>().is_ok() {
        wire::from_object(py_to_object(frame)?, validate)
    } else {
        return Err(PyTypeError::new_err(format!(
            "frame must be str, bytes, bytearray or dict, not {}",
            type_name(frame)
        )));
    };
    match result {
        Ok(m) => message_to_py(py, m),
        Err(e) => Err(decode_error(py, &e)),
    }
}

/// The error for a `str` frame with lone surrogates (it has no UTF-8 form).
pub fn not_utf8(py: Python<'_>) -> PyErr {
    decode_error(py, &DecodeError::not_unicode())
}

/// Decode a frame's bytes with the core's choice of path (`wire::decode_view`).
///
/// # Safety
/// With `owner`, `bytes` is the buffer of that immutable object (see
/// [`progress_from_view`]).
unsafe fn decode_bytes<'py>(
    py: Python<'py>,
    bytes: &[u8],
    validate: bool,
    owner: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    // SAFETY: the caller's contract.
    unsafe { decoded_to_py(py, wire::decode_view(bytes, validate), owner) }
}

/// Decode a text frame with the core's choice of path (`wire::decode_str_view`): a
/// plain, valid `task.progress` frame as the fast view (its payload kept as text until
/// read), any other as the full message.
///
/// # Safety
/// With `owner`, `text` is the UTF-8 buffer of that immutable `str` or `bytes` object,
/// which the message may then borrow from (see [`progress_from_view`]).
pub unsafe fn decode_text<'py>(
    py: Python<'py>,
    text: &str,
    validate: bool,
    owner: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    // SAFETY: the caller's contract.
    unsafe { decoded_to_py(py, wire::decode_str_view(text, validate), owner) }
}

/// # Safety
/// As [`decode_text`].
#[inline]
unsafe fn decoded_to_py<'py>(
    py: Python<'py>,
    decoded: Result<Decoded<'_>, DecodeError>,
    owner: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    match decoded {
        // SAFETY: the caller's contract: the view borrows from `owner`'s buffer.
        Ok(Decoded::Progress(view)) => unsafe { progress_from_view(py, &view, owner) },
        Ok(Decoded::Message(m)) => message_to_py(py, m),
        Err(e) => Err(decode_error(py, &e)),
    }
}

fn message_type(py: Python<'_>, name: &str) -> PyResult<MessageType> {
    MessageType::from_wire(name).ok_or_else(|| {
        raise(
            py,
            "decode",
            format!(
                "unknown message type {name:?}; known: {:?}",
                MessageType::ALL.map(MessageType::as_str)
            ),
            "unknown_type",
        )
    })
}

/// Check `instance` (a dict, or a message object) against the rules of message `name`
/// (the core's `wire::check_as` / `wire::check_message_as`).
fn check(instance: &Bound<'_, PyAny>, name: &str) -> PyResult<Result<(), DecodeError>> {
    let py = instance.py();
    let mt = message_type(py, name)?;
    if instance.cast::<PyDict>().is_err() {
        if let Ok(m) = message_from_py(instance) {
            return Ok(wire::check_message_as(&m, mt));
        }
    }
    Ok(wire::check_as(py_to_jvalue(instance)?, mt).map(|_| ()))
}

/// One human-readable line per violation of message `name`'s rules (`"location: message
/// (rule)"`, sorted by location; the core's `DecodeError::lines`); empty when valid.
#[pyfunction]
pub fn iter_errors(instance: &Bound<'_, PyAny>, name: &str) -> PyResult<Vec<String>> {
    Ok(match check(instance, name)? {
        Ok(()) => Vec::new(),
        Err(e) => e.lines(),
    })
}

/// `True` when `instance` satisfies every rule of message `name`.
#[pyfunction]
pub fn is_valid(instance: &Bound<'_, PyAny>, name: &str) -> PyResult<bool> {
    Ok(check(instance, name)?.is_ok())
}

/// Raise `SchemaValidationError` unless `instance` satisfies every rule of message `name`.
#[pyfunction]
pub fn validate(instance: &Bound<'_, PyAny>, name: &str) -> PyResult<()> {
    let py = instance.py();
    match check(instance, name)? {
        Ok(()) => Ok(()),
        Err(e @ DecodeError::Schema { .. }) => Err(decode_error(py, &e)),
        Err(e) => Err(raise(py, "schema", e.to_string(), e.code())),
    }
}

/// The seven wire message types, in the seed's order.
#[pyfunction]
pub fn message_types() -> Vec<&'static str> {
    MessageType::ALL.map(MessageType::as_str).to_vec()
}

/// The schema manifest, `(wire type, schema file name)` in the seed's order (the core's
/// `wire::SCHEMA_FILES`).
#[pyfunction]
pub fn schema_files() -> Vec<(&'static str, &'static str)> {
    wire::SCHEMA_FILES
        .iter()
        .map(|(t, f)| (t.as_str(), *f))
        .collect()
}

/// Whether a message (object or wire type name) belongs to a per-task sequence.
#[pyfunction]
pub fn is_sequenced(message: &Bound<'_, PyAny>) -> PyResult<bool> {
    if let Ok(s) = message.cast::<PyString>() {
        return Ok(wire::is_sequenced_name(&s.to_cow()?));
    }
    if message.cast::<PyDict>().is_ok() {
        return Ok(false);
    }
    Ok(message_from_py(message)
        .map(|m| m.message_type().is_sequenced())
        .unwrap_or(false))
}
