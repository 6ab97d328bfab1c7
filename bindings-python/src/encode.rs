//! `encode` of a `TaskProgress`, written straight from its Python objects — or, for a
//! decoded message whose payload nobody has read, from the payload's validated text: no
//! core values are built first.
//!
//! The core stays the one source of the frame's form. The layout of a `task.progress`
//! frame (which keys, in which order, what is always present) is learned once from the
//! core's own encoder ([`wire::try_encode`] on a probe message with marker values, see
//! [`Template::learn`]) and checked against it on a second message before it is used;
//! values are written with `serde_json`, the writer the core uses, so the bytes are the
//! core's. The fast path takes only the plain case — no `extra` fields, a payload of exact
//! `dict`/`list`/`str`/`int`/`float`/`bool`/`None` objects nested at most [`FAST_DEPTH`]
//! levels — and answers `None` for anything else, which then takes the core's path
//! (conversion, `try_encode` and its checks, and the errors). `FAST_DEPTH` is far below
//! the core's nesting limit, so no frame the core would refuse comes out of here.
//!
//! A payload still held as the validated text of the frame it was decoded from (never
//! read, so never changed: reading it makes it a `dict`, which is then written as
//! above) is copied as it is when the text is exactly what the core's encoder writes for
//! the value it holds ([`encoder_form`]: compact, no escapes, integers only — as every
//! frame this project's encoders send); any other text takes the core's path. The
//! message's other fields are written from their current values, so a field set after
//! decoding is honoured.
//!
//! The `abi3` build (stable ABI) reads `str`, `list` and `float` objects through the
//! limited API's functions instead of CPython's inline accessors.

use std::cell::Cell;
use std::ptr;
use std::sync::OnceLock;

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyString;
use stapel_runner_protocol::json::{Object, Value, MAX_DEPTH};
use stapel_runner_protocol::wire::{self, Message, TaskProgress};

/// Deepest payload nesting the fast path writes (the payload object itself is level 1);
/// deeper payloads take the core's path.
pub const FAST_DEPTH: usize = 32;
const _: () = assert!(FAST_DEPTH + 2 < MAX_DEPTH);

/// A field of the frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Slot {
    SchemaVersion,
    TaskId,
    Seq,
    Kind,
    Attempt,
    Payload,
}

/// A piece of the frame: literal bytes or a field.
#[derive(Debug)]
enum Part {
    Lit(Box<[u8]>),
    Field(Slot),
}

/// The core's layout of a `task.progress` frame without `extra` fields.
#[derive(Debug)]
pub struct Template {
    parts: Vec<Part>,
}

/// The values to write.
pub struct Fields<'a, 'py> {
    /// `schema_version`.
    pub schema_version: u64,
    /// `task_id`.
    pub task_id: &'a str,
    /// `seq`.
    pub seq: u64,
    /// `kind`.
    pub kind: &'a str,
    /// `attempt`.
    pub attempt: u64,
    /// `payload`.
    pub payload: Body<'a, 'py>,
    /// The interpreter.
    pub py: Python<'py>,
}

/// The payload to write.
pub enum Body<'a, 'py> {
    /// Any object; [`Template::write`] answers `None` unless the fast path can write it.
    Object(&'a Bound<'py, PyAny>),
    /// JSON text the core validated (a decoded payload nobody has read); written as it is
    /// when it is in the encoder's form, else [`Template::write`] answers `None`.
    Text(&'a str),
}

impl Template {
    /// The template, learned on first use; `None` when the core's frame could not be
    /// taken apart (then every message takes the core's path).
    pub fn get() -> Option<&'static Template> {
        static TEMPLATE: OnceLock<Option<Template>> = OnceLock::new();
        TEMPLATE.get_or_init(Template::learn).as_ref()
    }

    /// Encode a probe message whose every field holds a marker, and cut the frame at the
    /// markers. Each marker must occur exactly once; the result must then reproduce the
    /// core's frame of a second, ordinary message byte for byte.
    fn learn() -> Option<Template> {
        const SV: u64 = 9_000_000_000_000_001;
        const SEQ: u64 = 9_000_000_000_000_002;
        const ATTEMPT: u64 = 9_000_000_000_000_003;
        let mut payload = Object::new();
        payload.insert("\u{1}payload", Value::Null);
        let mut probe = TaskProgress::new("\u{1}task", "\u{1}kind", payload.clone());
        (probe.schema_version, probe.seq, probe.attempt) = (SV, SEQ, ATTEMPT);
        let frame = wire::try_encode(&Message::TaskProgress(probe)).ok()?;
        let markers = [
            (SV.to_string(), Slot::SchemaVersion),
            (serde_json::to_string("\u{1}task").ok()?, Slot::TaskId),
            (SEQ.to_string(), Slot::Seq),
            (serde_json::to_string("\u{1}kind").ok()?, Slot::Kind),
            (ATTEMPT.to_string(), Slot::Attempt),
            (serde_json::to_string(&payload).ok()?, Slot::Payload),
        ];
        let mut found = Vec::new();
        for (marker, slot) in &markers {
            let mut hits = frame.match_indices(marker.as_str());
            let (at, _) = hits.next()?;
            if hits.next().is_some() {
                return None;
            }
            found.push((at, marker.len(), *slot));
        }
        found.sort_unstable_by_key(|(at, _, _)| *at);
        let mut parts = Vec::new();
        let mut pos = 0;
        for (at, len, slot) in found {
            let lit = frame.as_bytes().get(pos..at)?;
            if !lit.is_empty() {
                parts.push(Part::Lit(lit.into()));
            }
            parts.push(Part::Field(slot));
            pos = at.checked_add(len)?;
        }
        let tail = frame.as_bytes().get(pos..)?;
        if !tail.is_empty() {
            parts.push(Part::Lit(tail.into()));
        }
        if !frame.is_ascii() {
            return None;
        }
        let template = Template { parts };
        template.agrees_with_core().then_some(template)
    }

    /// The template fills in an ordinary message exactly as the core encodes it.
    fn agrees_with_core(&self) -> bool {
        let mut payload = Object::new();
        payload.insert("state", "running \"x\"\n é");
        payload.insert("n", Value::from(-3));
        let mut m = TaskProgress::new("T-1", "state", payload);
        (m.seq, m.attempt) = (12, 0);
        let Ok(want) = wire::try_encode(&Message::TaskProgress(m.clone())) else {
            return false;
        };
        let mut buf = Vec::new();
        for part in &self.parts {
            match part {
                Part::Lit(b) => buf.extend_from_slice(b),
                Part::Field(Slot::SchemaVersion) => write_u64(&mut buf, m.schema_version),
                Part::Field(Slot::TaskId) => write_str(&mut buf, &m.task_id),
                Part::Field(Slot::Seq) => write_u64(&mut buf, m.seq),
                Part::Field(Slot::Kind) => write_str(&mut buf, &m.kind),
                Part::Field(Slot::Attempt) => write_u64(&mut buf, m.attempt),
                Part::Field(Slot::Payload) => {
                    if serde_json::to_writer(&mut buf, &m.payload).is_err() {
                        return false;
                    }
                }
            }
        }
        buf == want.as_bytes()
    }

    /// The frame of `f` as a new `str`, or `None` when the payload needs the core's path.
    pub fn write<'py>(&self, f: &Fields<'_, 'py>) -> Option<Bound<'py, PyString>> {
        // A text payload is checked before anything is written.
        let text_ascii = match f.payload {
            Body::Text(text) => encoder_form(text.as_bytes())?,
            Body::Object(_) => true,
        };
        /// A buffer reused between calls, taken while in use (so a re-entrant call finds
        /// it empty and allocates its own). Only touched with the GIL held (see
        /// `pyobj::KEYS`).
        struct Reused(Cell<Vec<u8>>);
        // SAFETY: only used with the GIL held; the module declares `gil_used = true`.
        unsafe impl Sync for Reused {}
        static BUF: Reused = Reused(Cell::new(Vec::new()));
        let mut buf = BUF.0.take();
        buf.clear();
        let frame = self.fill(&mut buf, f, text_ascii);
        if buf.capacity() <= 1 << 16 {
            BUF.0.set(buf);
        }
        frame
    }

    fn fill<'py>(
        &self,
        buf: &mut Vec<u8>,
        f: &Fields<'_, 'py>,
        text_ascii: bool,
    ) -> Option<Bound<'py, PyString>> {
        let mut ascii = text_ascii;
        let buf = &mut *buf;
        for part in &self.parts {
            match part {
                Part::Lit(b) => put(buf, b),
                Part::Field(Slot::SchemaVersion) => write_u64(buf, f.schema_version),
                Part::Field(Slot::TaskId) => {
                    ascii &= f.task_id.is_ascii();
                    write_str(buf, f.task_id)
                }
                Part::Field(Slot::Seq) => write_u64(buf, f.seq),
                Part::Field(Slot::Kind) => {
                    ascii &= f.kind.is_ascii();
                    write_str(buf, f.kind)
                }
                Part::Field(Slot::Attempt) => write_u64(buf, f.attempt),
                Part::Field(Slot::Payload) => match f.payload {
                    // Checked by `write` (`encoder_form`).
                    Body::Text(text) => buf.extend_from_slice(text.as_bytes()),
                    Body::Object(payload) => {
                        let payload = payload.as_ptr();
                        // SAFETY: the GIL is held (`payload` is bound); a type check reads
                        // the object's type only.
                        if unsafe { ffi::PyDict_CheckExact(payload) } == 0 {
                            return None;
                        }
                        // SAFETY: as above; `payload` is a valid dict.
                        unsafe { write_value(buf, payload, 1, &mut ascii) }?;
                    }
                },
            }
        }
        // SAFETY: everything written is UTF-8: pieces of the core's frame cut at ASCII
        // marker boundaries, ASCII punctuation and digits, `serde_json` strings, and
        // whole `&str`s.
        let text = unsafe { std::str::from_utf8_unchecked(buf) };
        let py = f.py;
        Some(if ascii {
            // Every piece was ASCII (the literals were checked when learned).
            crate::pyobj::new_ascii_str(py, text)
        } else {
            crate::pyobj::new_str(py, text)
        })
    }
}

/// Decimal digits of `v`, as `serde_json` (and the core) writes an unsigned integer.
#[inline]
fn write_u64(buf: &mut Vec<u8>, mut v: u64) {
    /// "00" to "99".
    const LUT: [[u8; 2]; 100] = {
        let mut t = [[0u8; 2]; 100];
        let mut i = 0;
        while i < 100 {
            t[i] = [b'0' + (i / 10) as u8, b'0' + (i % 10) as u8];
            i += 1;
        }
        t
    };
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    while v >= 100 {
        let pair = LUT[(v % 100) as usize];
        v /= 100;
        i -= 2;
        digits[i] = pair[0];
        digits[i + 1] = pair[1];
    }
    if v >= 10 {
        let pair = LUT[v as usize];
        i -= 2;
        digits[i] = pair[0];
        digits[i + 1] = pair[1];
    } else {
        i -= 1;
        digits[i] = b'0' + v as u8;
    }
    put(buf, &digits[i..]);
}

/// Append `bytes`: a run of up to 16 bytes with two overlapping fixed-size copies
/// instead of a `memcpy` call.
#[inline(always)]
fn put(buf: &mut Vec<u8>, bytes: &[u8]) {
    let n = bytes.len();
    if !(4..=16).contains(&n) {
        buf.extend_from_slice(bytes);
        return;
    }
    buf.reserve(n);
    let len = buf.len();
    // SAFETY: `n` bytes are reserved after `len`; the copies read `bytes[..k]` and
    // `bytes[n - k..]` with `k <= n` and write inside `len..len + n`, which is then
    // initialised, so the new length is valid.
    unsafe {
        let src = bytes.as_ptr();
        let dst = buf.as_mut_ptr().add(len);
        if n >= 8 {
            ptr::copy_nonoverlapping(src, dst, 8);
            ptr::copy_nonoverlapping(src.add(n - 8), dst.add(n - 8), 8);
        } else {
            ptr::copy_nonoverlapping(src, dst, 4);
            ptr::copy_nonoverlapping(src.add(n - 4), dst.add(n - 4), 4);
        }
        buf.set_len(len + n);
    }
}

/// A signed integer, as `serde_json` writes it.
#[inline]
fn write_i64(buf: &mut Vec<u8>, v: i64) {
    if v < 0 {
        buf.push(b'-');
    }
    write_u64(buf, v.unsigned_abs());
}

/// A JSON string as `serde_json` (and so the core) writes it: a run without `"`, `\` or
/// control characters is copied as is, anything else goes through `serde_json`.
fn write_str(buf: &mut Vec<u8>, s: &str) {
    if is_plain(s.as_bytes()) {
        buf.reserve(s.len() + 2);
        buf.push(b'"');
        put(buf, s.as_bytes());
        buf.push(b'"');
    } else {
        let _ = serde_json::to_writer(&mut *buf, s);
    }
}

/// `true` when `bytes` has no `"`, `\\` or control character (eight bytes at a time).
#[inline]
fn is_plain(bytes: &[u8]) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let special = |x: u64| {
        let quote = x ^ (ONES * u64::from(b'"'));
        let backslash = x ^ (ONES * u64::from(b'\\'));
        let quote = quote.wrapping_sub(ONES) & !quote;
        let backslash = backslash.wrapping_sub(ONES) & !backslash;
        let control = x.wrapping_sub(ONES * 0x20) & !x;
        (quote | backslash | control) & HIGHS
    };
    let mut chunks = bytes.chunks_exact(8);
    for chunk in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(chunk);
        if special(u64::from_le_bytes(w)) != 0 {
            return false;
        }
    }
    // The rest (under eight bytes) as one word, padded with a plain byte.
    let rest = chunks.remainder();
    let mut w = [b'a'; 8];
    if let Some(head) = w.get_mut(..rest.len()) {
        head.copy_from_slice(rest);
    }
    special(u64::from_le_bytes(w)) == 0
}

/// `Some(ascii)` when validated JSON `text` is exactly what the core's encoder writes for
/// the value it holds, so that copying the text is encoding the value; `ascii`: the text
/// is ASCII. The rule: no whitespace between tokens; no escape in any string (the
/// encoder writes every character raw except `"`, `\` and control characters, which
/// validated text cannot hold raw); numbers only as integers of at most 18 digits, and
/// not `-0` (a fraction, an exponent, `-0` or a wider integer may be written back in
/// another form). Keys and strings keep their bytes and objects their member order in
/// the core's values (validated text has no repeated key), so such text re-encodes to
/// itself. Conservative: `None` only costs the core's path.
pub fn encoder_form(text: &[u8]) -> Option<bool> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    // Every byte of validated text outside strings is ASCII, so the text is ASCII when
    // the bytes of its strings are; whole words read while scanning strings are OR-ed in
    // (their bytes past a closing quote are punctuation or the next string's, which is
    // read as well).
    let mut high = 0u64;
    let mut i = 0;
    while let Some(&c) = text.get(i) {
        match c {
            b'"' => {
                i += 1;
                loop {
                    if let Some(chunk) = text.get(i..i + 8) {
                        let mut w = [0u8; 8];
                        w.copy_from_slice(chunk);
                        let w = u64::from_le_bytes(w);
                        high |= w;
                        let m = quote_or_backslash(w);
                        if m == 0 {
                            i += 8;
                            continue;
                        }
                        i += (m.trailing_zeros() / 8) as usize;
                    } else {
                        while let Some(&b) = text.get(i) {
                            if b == b'"' || b == b'\\' {
                                break;
                            }
                            high |= u64::from(b);
                            i += 1;
                        }
                    }
                    break;
                }
                if text.get(i) != Some(&b'"') {
                    // An escape (or the end: not validated text).
                    return None;
                }
                i += 1;
            }
            b'-' | b'0'..=b'9' => {
                let from = i + usize::from(c == b'-');
                i = from;
                while text.get(i).is_some_and(u8::is_ascii_digit) {
                    i += 1;
                }
                if i - from > 18
                    || i == from
                    || matches!(text.get(i), Some(b'.' | b'e' | b'E'))
                    || (c == b'-' && text.get(from) == Some(&b'0'))
                {
                    return None;
                }
            }
            b't' | b'n' => i += 4,
            b'f' => i += 5,
            b'{' | b'}' | b'[' | b']' | b':' | b',' => i += 1,
            // Whitespace (or anything else).
            _ => return None,
        }
    }
    Some(high & (ONES << 7) == 0)
}

/// Set in a byte of the result for each byte of `x` that is `"` or `\` (the lowest
/// flagged byte is exact).
#[inline(always)]
fn quote_or_backslash(x: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let q = x ^ (ONES * u64::from(b'"'));
    let b = x ^ (ONES * u64::from(b'\\'));
    ((q.wrapping_sub(ONES) & !q) | (b.wrapping_sub(ONES) & !b)) & HIGHS
}

/// Slots of the encoded-key cache (a power of two).
const ENCODED_KEY_SLOTS: usize = 256;
/// Longest encoded key (`"key":`) the cache holds.
const MAX_ENCODED_KEY: usize = 46;

/// A key `str` object (a strong reference, so its address cannot be reused while cached)
/// and its encoded form `"key":`.
#[derive(Clone, Copy)]
struct EncodedKey {
    obj: *mut ffi::PyObject,
    len: usize,
    bytes: [u8; MAX_ENCODED_KEY],
}

const NO_KEY: EncodedKey = EncodedKey {
    obj: ptr::null_mut(),
    len: 0,
    bytes: [0; MAX_ENCODED_KEY],
};

/// The encoded forms of recently written ASCII keys, by key object: payload dicts built in
/// Python use the same key objects (the program's constants) over and over.
struct EncodedKeys(std::cell::UnsafeCell<[EncodedKey; ENCODED_KEY_SLOTS]>);
// SAFETY: only touched with the GIL held; the module declares `gil_used = true`.
unsafe impl Sync for EncodedKeys {}
static ENCODED_KEYS: EncodedKeys =
    EncodedKeys(std::cell::UnsafeCell::new([NO_KEY; ENCODED_KEY_SLOTS]));

/// Write `"key":` for an exact `str` key.
///
/// # Safety
/// The GIL is held and `key` is a valid exact `str`.
#[inline]
unsafe fn write_key(
    buf: &mut Vec<u8>,
    key_obj: *mut ffi::PyObject,
    ascii: &mut bool,
) -> Option<()> {
    let addr = key_obj as usize;
    let index = ((addr >> 4) ^ (addr >> 12)) & (ENCODED_KEY_SLOTS - 1);
    // SAFETY: the caller's contract; the GIL guards the cache, and no reference into it is
    // held across a call that could run Python code (a replaced key's decref runs no
    // finaliser: it is a `str`).
    unsafe {
        let slot = ENCODED_KEYS.0.get().cast::<EncodedKey>().add(index);
        if (*slot).obj == key_obj {
            put(buf, (*slot).bytes.get(..(*slot).len)?);
            return Some(());
        }
        let key = utf8(key_obj)?;
        let key_ascii = key.is_ascii();
        *ascii &= key_ascii;
        let start = buf.len();
        write_str(buf, key);
        buf.push(b':');
        let written = buf.get(start..)?;
        if key_ascii && written.len() <= MAX_ENCODED_KEY {
            let mut entry = EncodedKey {
                obj: key_obj,
                len: written.len(),
                bytes: [0; MAX_ENCODED_KEY],
            };
            entry
                .bytes
                .get_mut(..written.len())?
                .copy_from_slice(written);
            ffi::Py_INCREF(key_obj);
            let old = std::mem::replace(&mut *slot, entry);
            if !old.obj.is_null() {
                ffi::Py_DECREF(old.obj);
            }
        }
        Some(())
    }
}

/// The UTF-8 of a `str` object, borrowed from it; `None` for a `str` with lone
/// surrogates.
///
/// # Safety
/// The GIL is held and `obj` is a valid `str` that outlives the result.
#[inline]
unsafe fn utf8<'a>(obj: *mut ffi::PyObject) -> Option<&'a str> {
    let mut len: ffi::Py_ssize_t = 0;
    // SAFETY: the caller's contract; the view lives as long as the str. A compact ASCII
    // str's data is its UTF-8.
    unsafe {
        #[cfg(not(feature = "abi3"))]
        if ffi::PyUnicode_IS_COMPACT_ASCII(obj) != 0 {
            let n = usize::try_from(ffi::PyUnicode_GET_LENGTH(obj)).ok()?;
            let data = ffi::PyUnicode_DATA(obj).cast::<u8>();
            return Some(std::str::from_utf8_unchecked(std::slice::from_raw_parts(
                data, n,
            )));
        }
        let data = ffi::PyUnicode_AsUTF8AndSize(obj, &mut len);
        if data.is_null() {
            ffi::PyErr_Clear();
            return None;
        }
        Some(std::str::from_utf8_unchecked(std::slice::from_raw_parts(
            data.cast::<u8>(),
            usize::try_from(len).ok()?,
        )))
    }
}

/// Write one Python value as JSON at nesting `depth` (containers count); `None` for
/// anything the fast path leaves to the core's path.
///
/// # Safety
/// The GIL is held and `obj` is a valid object. Nothing here runs Python code (only
/// type checks and reads of exact built-in types), so nothing can change `obj` meanwhile.
unsafe fn write_value(
    buf: &mut Vec<u8>,
    obj: *mut ffi::PyObject,
    depth: usize,
    ascii: &mut bool,
) -> Option<()> {
    // SAFETY: the caller's contract throughout; every accessor below is used on an
    // object whose exact type was just checked.
    unsafe {
        let ty = ffi::Py_TYPE(obj);
        if ty == std::ptr::addr_of_mut!(ffi::PyUnicode_Type) {
            let s = utf8(obj)?;
            #[cfg(not(feature = "abi3"))]
            {
                *ascii &= ffi::PyUnicode_IS_ASCII(obj) != 0;
            }
            // (The abi3 build creates every `str` the same way: `ascii` is not used.)
            #[cfg(feature = "abi3")]
            {
                *ascii = false;
            }
            write_str(buf, s);
        } else if ty == std::ptr::addr_of_mut!(ffi::PyLong_Type) {
            let mut overflow = 0;
            let v = ffi::PyLong_AsLongLongAndOverflow(obj, &mut overflow);
            if overflow != 0 {
                // Beyond i64: the core's path decides (u64, or a double).
                return None;
            }
            write_i64(buf, v);
        } else if ty == std::ptr::addr_of_mut!(ffi::PyDict_Type) {
            if depth > FAST_DEPTH {
                return None;
            }
            buf.push(b'{');
            let mut pos: ffi::Py_ssize_t = 0;
            let mut key: *mut ffi::PyObject = std::ptr::null_mut();
            let mut value: *mut ffi::PyObject = std::ptr::null_mut();
            let mut first = true;
            while ffi::PyDict_Next(obj, &mut pos, &mut key, &mut value) != 0 {
                if ffi::PyUnicode_CheckExact(key) == 0 {
                    return None;
                }
                if !first {
                    buf.push(b',');
                }
                first = false;
                write_key(buf, key, ascii)?;
                write_value(buf, value, depth + 1, ascii)?;
            }
            buf.push(b'}');
        } else if ty == std::ptr::addr_of_mut!(ffi::PyList_Type) {
            if depth > FAST_DEPTH {
                return None;
            }
            buf.push(b'[');
            #[cfg(not(feature = "abi3"))]
            let (n, item) = (ffi::PyList_GET_SIZE(obj), |i| ffi::PyList_GET_ITEM(obj, i));
            // Borrowed items; nothing here runs Python code, so the list cannot change.
            #[cfg(feature = "abi3")]
            let (n, item) = (ffi::PyList_Size(obj), |i| ffi::PyList_GetItem(obj, i));
            for i in 0..n {
                if i > 0 {
                    buf.push(b',');
                }
                write_value(buf, item(i), depth + 1, ascii)?;
            }
            buf.push(b']');
        } else if ty == std::ptr::addr_of_mut!(ffi::PyFloat_Type) {
            #[cfg(not(feature = "abi3"))]
            let v = ffi::PyFloat_AS_DOUBLE(obj);
            // An exact float: the read cannot fail.
            #[cfg(feature = "abi3")]
            let v = ffi::PyFloat_AsDouble(obj);
            if !v.is_finite() {
                return None;
            }
            let _ = serde_json::to_writer(&mut *buf, &v);
        } else if obj == ffi::Py_True() {
            buf.extend_from_slice(b"true");
        } else if obj == ffi::Py_False() {
            buf.extend_from_slice(b"false");
        } else if obj == ffi::Py_None() {
            buf.extend_from_slice(b"null");
        } else {
            return None;
        }
    }
    Some(())
}
