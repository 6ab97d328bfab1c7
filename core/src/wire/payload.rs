//! [`Payload`]: the open `payload` object of a `task.progress`, kept as the validated JSON
//! text it arrived in until something reads it.
//!
//! A hub ingests progress from thousands of runners, and most of it is counted, routed or
//! stored without anyone looking inside the payload. So a decoded progress frame that
//! passed the one-pass validating scanner ([`peek_progress`](super::peek_progress)) keeps
//! its payload as a span of the frame's text: no value tree is built, no key or string is
//! copied, and for a frame handed over as an owned `String` (a WebSocket text message,
//! [`decode_owned`](super::decode_owned)) not even the text is copied. The first read
//! ([`Payload::object`], or any [`Object`] method through `Deref`) builds the object once
//! and keeps it; [`Payload::to_mut`] turns the payload into a plain, editable object.
//!
//! The two forms are one value: equality, `Debug`, [`encode`](super::encode) and
//! [`to_object`](super::to_object) see the object either way. A text payload in the
//! encoder's own form (compact, no escapes, integers only) is re-encoded by copying its
//! text; any other text is built and encoded, so `encode` stays byte-stable.

use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::OnceLock;

use compact_str::CompactString;

use crate::json::{walk, Object, Sink, Value};

/// The `payload` of a [`TaskProgress`](super::TaskProgress): an [`Object`], possibly still
/// held as the validated JSON text of the frame it was decoded from (see the module docs).
///
/// Read it like an [`Object`] (it derefs to one); editing it (through `DerefMut` or
/// [`to_mut`](Self::to_mut)) makes it a plain object.
///
/// ```
/// use stapel_runner_protocol::wire::{decode_owned, Message};
///
/// let frame = r#"{"schema_version":1,"type":"task.progress","task_id":"T-1","seq":3,"kind":"state","payload":{"state":"running"}}"#;
/// let Message::TaskProgress(mut p) = decode_owned(frame.to_owned(), true).unwrap() else { unreachable!() };
/// assert_eq!(p.payload.text(), Some(r#"{"state":"running"}"#)); // nothing built yet
/// assert_eq!(p.payload["state"].as_str(), Some("running"));    // built on first read
/// p.payload.to_mut().insert("step", 4u64);                      // now a plain object
/// assert_eq!(p.payload.text(), None);
/// ```
#[derive(Clone)]
pub struct Payload {
    /// The object of a payload built (or edited) as one; `None` for a text payload.
    built: Option<Object>,
    /// The validated text of a payload decoded from a frame, until it is edited.
    text: Option<TextPayload>,
}

/// The payload of no text and no object: `{}`.
static EMPTY: Object = Object::new();

#[derive(Clone)]
struct TextPayload {
    /// The text that holds the payload (the whole frame, or just the payload).
    buf: String,
    /// Byte span of the payload's object text in `buf`.
    start: usize,
    end: usize,
    built: OnceLock<Object>,
}

impl TextPayload {
    fn text(&self) -> &str {
        self.buf.get(self.start..self.end).unwrap_or("{}")
    }

    fn object(&self) -> &Object {
        self.built.get_or_init(|| build_object(self.text()))
    }

    fn into_object(self) -> Object {
        match self.built.into_inner() {
            Some(o) => o,
            None => build_object(self.buf.get(self.start..self.end).unwrap_or("{}")),
        }
    }
}

impl Payload {
    /// An empty payload (`{}`).
    #[must_use]
    pub const fn new() -> Self {
        Self {
            built: None,
            text: None,
        }
    }

    /// A payload held as text: `buf[start..end]` is the JSON text of an object that the
    /// wire rules already accepted (well-formed, no duplicate keys, nesting within
    /// bounds).
    pub(crate) fn from_validated(buf: String, start: usize, end: usize) -> Self {
        if buf.get(start..end).is_none() {
            // Not a span of `buf` (never, from the scanner): an empty object.
            return Self::new();
        }
        Self {
            built: None,
            text: Some(TextPayload {
                buf,
                start,
                end,
                built: OnceLock::new(),
            }),
        }
    }

    /// The payload as an object, built from the text on first use (then kept).
    #[must_use]
    pub fn object(&self) -> &Object {
        match (&self.built, &self.text) {
            (Some(o), _) => o,
            (None, Some(t)) => t.object(),
            (None, None) => &EMPTY,
        }
    }

    /// The payload as an editable object. A payload held as text is built (if it was not
    /// yet) and becomes a plain object: [`text`](Self::text) is `None` afterwards.
    pub fn to_mut(&mut self) -> &mut Object {
        let object = match (self.built.take(), self.text.take()) {
            (Some(o), _) => o,
            (None, Some(t)) => t.into_object(),
            (None, None) => Object::new(),
        };
        self.built.insert(object)
    }

    /// The payload as an owned object (built from the text when needed).
    #[must_use]
    pub fn into_object(self) -> Object {
        match (self.built, self.text) {
            (Some(o), _) => o,
            (None, Some(t)) => t.into_object(),
            (None, None) => Object::new(),
        }
    }

    /// The validated JSON text the payload was decoded from, exactly as it arrived, while
    /// the payload has not been edited; `None` for a payload built as an object. A binding
    /// hands this text to its own language's parser (or to [`json::walk`](crate::json::walk))
    /// instead of converting the [`Object`].
    #[must_use]
    pub fn text(&self) -> Option<&str> {
        match (&self.built, &self.text) {
            (None, Some(t)) => Some(t.text()),
            _ => None,
        }
    }

    /// `true` while the payload is held as text and nothing has read it as an object yet
    /// (nothing was built).
    #[must_use]
    pub fn is_unbuilt(&self) -> bool {
        matches!((&self.built, &self.text), (None, Some(t)) if t.built.get().is_none())
    }

    /// The text to write for this payload when it is exactly the encoder's form (see
    /// [`is_encoder_form`]).
    pub(crate) fn canonical_text(&self) -> Option<&str> {
        match (&self.built, &self.text) {
            (None, Some(t)) => Some(t.text()).filter(|text| is_encoder_form(text)),
            _ => None,
        }
    }
}

impl Default for Payload {
    fn default() -> Self {
        Self::new()
    }
}

impl From<Object> for Payload {
    fn from(object: Object) -> Self {
        Self {
            built: Some(object),
            text: None,
        }
    }
}

impl From<Payload> for Object {
    fn from(p: Payload) -> Self {
        p.into_object()
    }
}

impl Deref for Payload {
    type Target = Object;
    fn deref(&self) -> &Object {
        self.object()
    }
}

/// Mutable access is [`to_mut`](Payload::to_mut): a payload held as text becomes a plain
/// object first.
impl DerefMut for Payload {
    fn deref_mut(&mut self) -> &mut Object {
        self.to_mut()
    }
}

impl PartialEq for Payload {
    fn eq(&self, other: &Self) -> bool {
        if let (Some(a), Some(b)) = (self.text(), other.text()) {
            if a == b {
                return true;
            }
        }
        self.object() == other.object()
    }
}

impl PartialEq<Object> for Payload {
    fn eq(&self, other: &Object) -> bool {
        self.object() == other
    }
}

impl PartialEq<Payload> for Object {
    fn eq(&self, other: &Payload) -> bool {
        self == other.object()
    }
}

impl fmt::Debug for Payload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.object().fmt(f)
    }
}

impl serde::Serialize for Payload {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.object().serialize(s)
    }
}

/// Whether validated JSON `text` is exactly what the encoder writes for the value it
/// holds: no whitespace between tokens, no escapes in strings (serde_json writes every
/// character raw except `"`, `\\` and control characters, which must be escaped), and
/// numbers only as integers of at most 18 digits other than `-0` (a fraction, an exponent,
/// `-0` or a wider integer may be written back differently). Keys and strings keep their
/// bytes, and objects their member order, so such text re-encodes to itself. Conservative:
/// `false` only costs a build and an encode.
pub(crate) fn is_encoder_form(text: &str) -> bool {
    let b = text.as_bytes();
    let mut i = 0;
    while let Some(&c) = b.get(i) {
        match c {
            b'"' => {
                // A string: no escape before its closing quote.
                i = i.saturating_add(1);
                match memchr::memchr2(b'"', b'\\', b.get(i..).unwrap_or_default()) {
                    Some(n) if b.get(i.saturating_add(n)) == Some(&b'"') => {
                        i = i.saturating_add(n).saturating_add(1);
                    }
                    _ => return false,
                }
            }
            b'-' | b'0'..=b'9' => {
                let start = i;
                let digits_from = start.saturating_add(usize::from(c == b'-'));
                i = digits_from;
                while b.get(i).is_some_and(u8::is_ascii_digit) {
                    i = i.saturating_add(1);
                }
                let digits = i.saturating_sub(digits_from);
                if digits > 18
                    || matches!(b.get(i), Some(b'.' | b'e' | b'E'))
                    || (c == b'-' && b.get(digits_from) == Some(&b'0'))
                {
                    return false;
                }
            }
            b't' | b'n' => i = i.saturating_add(4),
            b'f' => i = i.saturating_add(5),
            b'{' | b'}' | b'[' | b']' | b':' | b',' => i = i.saturating_add(1),
            // Whitespace (or anything else).
            _ => return false,
        }
    }
    true
}

/// Build the object of validated text. The wire rules accepted the text, so it parses;
/// should it ever not, the result is an empty object rather than a panic.
fn build_object(text: &str) -> Object {
    match walk(text, &mut Builder) {
        Ok(Value::Object(o)) => o,
        _ => Object::new(),
    }
}

/// A [`Sink`] building [`Value`]s. Members are pushed without a duplicate check: the
/// text it reads was validated, duplicates included.
struct Builder;

impl Sink for Builder {
    type Value = Value;
    type Object = Object;
    type Array = Vec<Value>;
    type Error = std::convert::Infallible;

    fn null(&mut self) -> Result<Value, Self::Error> {
        Ok(Value::Null)
    }
    fn boolean(&mut self, value: bool) -> Result<Value, Self::Error> {
        Ok(Value::Bool(value))
    }
    fn unsigned(&mut self, value: u64) -> Result<Value, Self::Error> {
        Ok(Value::Number(value.into()))
    }
    fn signed(&mut self, value: i64) -> Result<Value, Self::Error> {
        Ok(Value::Number(value.into()))
    }
    fn float(&mut self, value: f64) -> Result<Value, Self::Error> {
        Ok(serde_json::Number::from_f64(value).map_or(Value::Null, Value::Number))
    }
    fn string(&mut self, value: &str) -> Result<Value, Self::Error> {
        Ok(Value::String(CompactString::from(value)))
    }
    fn object(&mut self) -> Result<Object, Self::Error> {
        Ok(Object::new())
    }
    fn member(&mut self, object: &mut Object, key: &str, value: Value) -> Result<(), Self::Error> {
        object.push_unchecked(CompactString::from(key), value);
        Ok(())
    }
    fn end_object(&mut self, object: Object) -> Result<Value, Self::Error> {
        Ok(Value::Object(object))
    }
    fn array(&mut self) -> Result<Vec<Value>, Self::Error> {
        Ok(Vec::new())
    }
    fn item(&mut self, array: &mut Vec<Value>, value: Value) -> Result<(), Self::Error> {
        array.push(value);
        Ok(())
    }
    fn end_array(&mut self, array: Vec<Value>) -> Result<Value, Self::Error> {
        Ok(Value::Array(array))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{decode_owned, encode, Message};

    fn frame(payload: &str) -> String {
        format!(
            r#"{{"schema_version":1,"type":"task.progress","task_id":"T-1","seq":1,"kind":"state","attempt":0,"payload":{payload}}}"#
        )
    }

    #[test]
    fn encoder_form_is_recognised_conservatively() {
        let yes = [
            r#"{}"#,
            r#"{"a":1,"b":[true,false,null],"c":{"d":"é ☃ x y"},"e":-5,"f":[]}"#,
            r#"{"n":123456789012345678,"m":-123456789012345678}"#,
            r#"{"s":"spaces inside a string"}"#,
        ];
        for text in yes {
            assert!(is_encoder_form(text), "{text}");
        }
        let no = [
            r#"{ "a":1}"#,
            r#"{"a":1 }"#,
            "{\"a\":\n1}",
            r#"{"a":"q\"uote"}"#,
            r#"{"a":"\u00e9"}"#,
            r#"{"a":"\/"}"#,
            r#"{"a":1.5}"#,
            r#"{"a":1e3}"#,
            r#"{"a":1E3}"#,
            r#"{"a":-0}"#,
            r#"{"a":1234567890123456789}"#,
        ];
        for text in no {
            assert!(!is_encoder_form(text), "{text}");
        }
    }

    #[test]
    fn a_text_payload_re_encodes_as_the_built_one() {
        let payloads = [
            r#"{}"#,
            r#"{"state":"running","step":3,"list":[1,-2,{"x":null}]}"#,
            r#"{ "state" : "running" }"#,
            r#"{"a":"\u00e9\n\/","b":1.50,"c":-0,"d":1e2,"e":12345678901234567890}"#,
        ];
        for p in payloads {
            let f = frame(p);
            let Ok(Message::TaskProgress(lazy)) = decode_owned(f.clone(), true) else {
                panic!("{f}")
            };
            assert_eq!(lazy.payload.text(), Some(p));
            let mut built = lazy.clone();
            built.payload = Payload::from(built.payload.object().clone());
            assert_eq!(
                encode(&Message::TaskProgress(lazy)),
                encode(&Message::TaskProgress(built)),
                "{p}"
            );
        }
    }

    #[test]
    fn reading_builds_once_and_editing_drops_the_text() {
        let f = frame(r#"{"state":"running"}"#);
        let Ok(Message::TaskProgress(mut m)) = decode_owned(f, true) else {
            panic!()
        };
        assert!(m.payload.is_unbuilt());
        let first: *const Object = m.payload.object();
        assert!(!m.payload.is_unbuilt());
        assert_eq!(m.payload.text(), Some(r#"{"state":"running"}"#));
        assert!(std::ptr::eq(first, m.payload.object()), "built twice");
        m.payload.insert("step", 1u64);
        assert_eq!(m.payload.text(), None);
        assert_eq!(
            encode(&Message::TaskProgress(m)),
            frame(r#"{"state":"running","step":1}"#)
        );
        assert_eq!(Payload::new(), Payload::from(Object::new()));
        assert_eq!(Payload::new().into_object(), Object::new());
    }
}
