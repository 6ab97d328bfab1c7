//! [`walk`]: JSON text straight into any value representation, through a [`Sink`].
//!
//! The bindings use it to build their own language's objects from a payload the core has
//! already validated (the Python binding builds `dict`s from
//! [`ProgressView::payload`](crate::wire::ProgressView::payload)), without an intermediate
//! [`Value`](super::Value) tree. The grammar is checked as strictly as the wire decoder
//! checks it (see [`walk`]); duplicate keys are the sink's to detect, since it is the one
//! that knows its objects.

use std::fmt;

/// Deepest nesting of arrays and objects [`walk`] reads (the wire decoder's limit).
pub const MAX_DEPTH: usize = 127;

/// Builds values from the events of [`walk`].
///
/// Containers are built in place: [`walk`] asks for an empty one, hands each member or
/// item to it as soon as it is complete, and finally asks for the finished value.
pub trait Sink {
    /// A finished value.
    type Value;
    /// An object under construction.
    type Object;
    /// An array under construction.
    type Array;
    /// The sink's own error.
    type Error;

    /// `null`.
    fn null(&mut self) -> Result<Self::Value, Self::Error>;
    /// `true` or `false`.
    fn boolean(&mut self, value: bool) -> Result<Self::Value, Self::Error>;
    /// A non-negative integer literal that fits `u64`.
    fn unsigned(&mut self, value: u64) -> Result<Self::Value, Self::Error>;
    /// A negative integer literal that fits `i64`.
    fn signed(&mut self, value: i64) -> Result<Self::Value, Self::Error>;
    /// Any other number (fraction, exponent, wider integer, `-0`): the nearest `f64`,
    /// always finite.
    fn float(&mut self, value: f64) -> Result<Self::Value, Self::Error>;
    /// A string, escapes resolved.
    fn string(&mut self, value: &str) -> Result<Self::Value, Self::Error>;
    /// An empty object.
    fn object(&mut self) -> Result<Self::Object, Self::Error>;
    /// Add a member to `object`, in arrival order.
    fn member(
        &mut self,
        object: &mut Self::Object,
        key: &str,
        value: Self::Value,
    ) -> Result<(), Self::Error>;
    /// The finished object.
    fn end_object(&mut self, object: Self::Object) -> Result<Self::Value, Self::Error>;
    /// An empty array.
    fn array(&mut self) -> Result<Self::Array, Self::Error>;
    /// Append an item to `array`.
    fn item(&mut self, array: &mut Self::Array, value: Self::Value) -> Result<(), Self::Error>;
    /// The finished array.
    fn end_array(&mut self, array: Self::Array) -> Result<Self::Value, Self::Error>;
}

/// Why [`walk`] stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WalkError<E> {
    /// The text is not JSON: what was wrong, at which byte.
    Syntax {
        /// What was expected or found.
        message: &'static str,
        /// Byte offset in the text.
        offset: usize,
    },
    /// The sink failed.
    Sink(E),
}

impl<E: fmt::Display> fmt::Display for WalkError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WalkError::Syntax { message, offset } => write!(f, "{message} at byte {offset}"),
            WalkError::Sink(e) => e.fmt(f),
        }
    }
}

impl<E: fmt::Debug + fmt::Display> std::error::Error for WalkError<E> {}

/// Read one JSON value from `text` (surrounding whitespace allowed, nothing else) into
/// `sink`.
///
/// The grammar is RFC 8259's, read the way the wire decoder reads it: whitespace is
/// ` \t\n\r` only; escapes are `\" \\ \/ \b \f \n \r \t \uXXXX` and a `\u` surrogate must
/// be part of a pair; raw control characters in strings are errors; a number must be
/// finite as an `f64`; arrays and objects nest at most [`MAX_DEPTH`] deep.
///
/// ```
/// use stapel_runner_protocol::json::{walk, Sink};
///
/// /// Counts the numbers in a document.
/// struct Numbers;
/// impl Sink for Numbers {
///     type Value = usize;
///     type Object = usize;
///     type Array = usize;
///     type Error = std::convert::Infallible;
///     fn null(&mut self) -> Result<usize, Self::Error> { Ok(0) }
///     fn boolean(&mut self, _: bool) -> Result<usize, Self::Error> { Ok(0) }
///     fn unsigned(&mut self, _: u64) -> Result<usize, Self::Error> { Ok(1) }
///     fn signed(&mut self, _: i64) -> Result<usize, Self::Error> { Ok(1) }
///     fn float(&mut self, _: f64) -> Result<usize, Self::Error> { Ok(1) }
///     fn string(&mut self, _: &str) -> Result<usize, Self::Error> { Ok(0) }
///     fn object(&mut self) -> Result<usize, Self::Error> { Ok(0) }
///     fn member(&mut self, o: &mut usize, _: &str, v: usize) -> Result<(), Self::Error> {
///         *o += v;
///         Ok(())
///     }
///     fn end_object(&mut self, o: usize) -> Result<usize, Self::Error> { Ok(o) }
///     fn array(&mut self) -> Result<usize, Self::Error> { Ok(0) }
///     fn item(&mut self, a: &mut usize, v: usize) -> Result<(), Self::Error> {
///         *a += v;
///         Ok(())
///     }
///     fn end_array(&mut self, a: usize) -> Result<usize, Self::Error> { Ok(a) }
/// }
///
/// assert_eq!(walk(r#"{"a": [1, -2, 3.5], "b": {"c": "4"}}"#, &mut Numbers), Ok(3));
/// assert!(walk("[1, 2", &mut Numbers).is_err());
/// ```
///
/// # Errors
/// [`WalkError::Syntax`] for text that is not one JSON value; [`WalkError::Sink`] when the
/// sink fails (reading stops there).
pub fn walk<S: Sink>(text: &str, sink: &mut S) -> Result<S::Value, WalkError<S::Error>> {
    let mut r = Reader {
        text,
        bytes: text.as_bytes(),
        pos: 0,
        depth: 0,
        scratch: String::new(),
    };
    let first = r.ws();
    let value = r.value(first, sink)?;
    if r.ws() != 0 || r.pos < r.bytes.len() {
        return Err(r.syntax("trailing characters"));
    }
    Ok(value)
}

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGHS: u64 = 0x8080_8080_8080_8080;

/// The bytes of `x` (little-endian) that end a run of plain string bytes: `"`, `\` or a
/// control character. The lowest flagged byte is exact (higher ones may be false
/// positives).
#[inline(always)]
fn specials(x: u64) -> u64 {
    let quote = x ^ (ONES * u64::from(b'"'));
    let backslash = x ^ (ONES * u64::from(b'\\'));
    let quote = quote.wrapping_sub(ONES) & !quote;
    let backslash = backslash.wrapping_sub(ONES) & !backslash;
    let control = x.wrapping_sub(ONES * 0x20) & !x;
    (quote | backslash | control) & HIGHS
}

/// The first byte at or after `i` that ends a run of plain string bytes, or the length.
#[inline(always)]
pub(crate) fn string_run_end(bytes: &[u8], mut i: usize) -> usize {
    while let Some(chunk) = bytes.get(i..fwd(i, 8)) {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let m = specials(u64::from_le_bytes(word));
        if m != 0 {
            return fwd(i, (m.trailing_zeros() / 8) as usize);
        }
        i = fwd(i, 8);
    }
    while let Some(b) = bytes.get(i) {
        if matches!(b, b'"' | b'\\' | 0..=0x1f) {
            break;
        }
        i = fwd(i, 1);
    }
    i
}

/// Position `i + n` in a text. Positions never exceed the text's length plus a few bytes
/// of look-ahead, and a text is never longer than `isize::MAX` bytes, so the sum never
/// wraps: `wrapping_add` is the plain machine add, without a debug-build overflow check
/// on the hot path.
#[inline(always)]
pub(crate) fn fwd(i: usize, n: usize) -> usize {
    i.wrapping_add(n)
}

/// The byte at `i`, or `0` past the end (no JSON token starts with `0`, and a real NUL
/// byte is invalid everywhere a reader could see it).
#[inline(always)]
pub(crate) fn byte_at(bytes: &[u8], i: usize) -> u8 {
    bytes.get(i).copied().unwrap_or(0)
}

/// Skip JSON whitespace from `*pos`; the next byte (`0` at the end).
#[inline(always)]
pub(crate) fn skip_ws(bytes: &[u8], pos: &mut usize) -> u8 {
    loop {
        let b = byte_at(bytes, *pos);
        if b > b' ' || !matches!(b, b' ' | b'\n' | b'\t' | b'\r') {
            return b;
        }
        *pos = fwd(*pos, 1);
    }
}

/// The value of a hex digit.
pub(crate) fn hex_digit(b: u8) -> Option<u32> {
    char::from(b).to_digit(16)
}

struct Reader<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
    depth: usize,
    /// Where strings with escapes are resolved.
    scratch: String,
}

impl<'a> Reader<'a> {
    #[cold]
    fn syntax<E>(&self, message: &'static str) -> WalkError<E> {
        WalkError::Syntax {
            message,
            offset: self.pos,
        }
    }

    #[inline(always)]
    fn at(&self, i: usize) -> u8 {
        byte_at(self.bytes, i)
    }

    #[inline(always)]
    fn ws(&mut self) -> u8 {
        skip_ws(self.bytes, &mut self.pos)
    }

    /// Move the cursor `n` bytes on.
    #[inline(always)]
    fn skip(&mut self, n: usize) {
        self.pos = fwd(self.pos, n);
    }

    /// The text between two positions the reader found (both at ASCII bytes or the end,
    /// so at character boundaries).
    #[inline(always)]
    fn span<E>(&self, start: usize, end: usize) -> Result<&'a str, WalkError<E>> {
        let text: &'a str = self.text;
        text.get(start..end)
            .ok_or_else(|| self.syntax("invalid string"))
    }

    fn value<S: Sink>(&mut self, first: u8, sink: &mut S) -> Result<S::Value, WalkError<S::Error>> {
        match first {
            b'{' => self.object(sink),
            b'[' => self.array(sink),
            b'"' => {
                self.skip(1);
                let s = self.string()?;
                sink.string(s.resolve(self)).map_err(WalkError::Sink)
            }
            b'-' | b'0'..=b'9' => self.number(sink),
            b't' => self.literal(b"true", sink.boolean(true)),
            b'f' => self.literal(b"false", sink.boolean(false)),
            b'n' => self.literal(b"null", sink.null()),
            _ => Err(self.syntax("expected a value")),
        }
    }

    fn literal<V, E>(&mut self, word: &[u8], value: Result<V, E>) -> Result<V, WalkError<E>> {
        if self.bytes.get(self.pos..fwd(self.pos, word.len())) != Some(word) {
            return Err(self.syntax("expected a value"));
        }
        self.skip(word.len());
        value.map_err(WalkError::Sink)
    }

    fn enter<E>(&mut self) -> Result<(), WalkError<E>> {
        self.depth = self.depth.saturating_add(1);
        if self.depth > MAX_DEPTH {
            return Err(self.syntax("nested too deeply"));
        }
        self.skip(1);
        Ok(())
    }

    fn object<S: Sink>(&mut self, sink: &mut S) -> Result<S::Value, WalkError<S::Error>> {
        self.enter()?;
        let mut object = sink.object().map_err(WalkError::Sink)?;
        let mut b = self.ws();
        if b != b'}' {
            loop {
                if b != b'"' {
                    return Err(self.syntax("expected a key"));
                }
                self.skip(1);
                let key = self.string()?;
                // The key stays a span of the text (or is copied out of the scratch) while
                // the value is read.
                let owned;
                let key: &str = match key {
                    Str::Text(s) => s,
                    Str::Scratch => {
                        owned = std::mem::take(&mut self.scratch);
                        &owned
                    }
                };
                if self.ws() != b':' {
                    return Err(self.syntax("expected ':'"));
                }
                self.skip(1);
                let first = self.ws();
                let value = self.value(first, sink)?;
                sink.member(&mut object, key, value)
                    .map_err(WalkError::Sink)?;
                match self.ws() {
                    b',' => {
                        self.skip(1);
                        b = self.ws();
                    }
                    b'}' => break,
                    _ => return Err(self.syntax("expected ',' or '}'")),
                }
            }
        }
        self.skip(1);
        self.depth = self.depth.saturating_sub(1);
        sink.end_object(object).map_err(WalkError::Sink)
    }

    fn array<S: Sink>(&mut self, sink: &mut S) -> Result<S::Value, WalkError<S::Error>> {
        self.enter()?;
        let mut array = sink.array().map_err(WalkError::Sink)?;
        let mut b = self.ws();
        if b != b']' {
            loop {
                let value = self.value(b, sink)?;
                sink.item(&mut array, value).map_err(WalkError::Sink)?;
                match self.ws() {
                    b',' => {
                        self.skip(1);
                        b = self.ws();
                    }
                    b']' => break,
                    _ => return Err(self.syntax("expected ',' or ']'")),
                }
            }
        }
        self.skip(1);
        self.depth = self.depth.saturating_sub(1);
        sink.end_array(array).map_err(WalkError::Sink)
    }

    /// A string whose opening quote is consumed: a span of the text when it has no
    /// escapes, otherwise resolved into the scratch buffer.
    fn string<E>(&mut self) -> Result<Str<'a>, WalkError<E>> {
        let start = self.pos;
        let end = string_run_end(self.bytes, start);
        match self.at(end) {
            b'"' => {
                self.pos = fwd(end, 1);
                return self.span(start, end).map(Str::Text);
            }
            b'\\' => {}
            _ => {
                self.pos = end;
                return Err(self.syntax("unterminated string or control character"));
            }
        }
        self.scratch.clear();
        let head = self.span(start, end)?;
        self.scratch.push_str(head);
        self.pos = end;
        loop {
            match self.at(self.pos) {
                b'"' => {
                    self.skip(1);
                    return Ok(Str::Scratch);
                }
                b'\\' => {
                    let c = self.escape()?;
                    self.scratch.push(c);
                }
                _ => {
                    let run = string_run_end(self.bytes, self.pos);
                    if run == self.pos {
                        return Err(self.syntax("unterminated string or control character"));
                    }
                    let part = self.span(self.pos, run)?;
                    self.scratch.push_str(part);
                    self.pos = run;
                }
            }
        }
    }

    /// One escape sequence at `pos` (its backslash).
    fn escape<E>(&mut self) -> Result<char, WalkError<E>> {
        let c = match self.at(fwd(self.pos, 1)) {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => {
                let high = self.hex4(fwd(self.pos, 2))?;
                self.skip(6);
                let c = if (0xD800..0xDC00).contains(&high) {
                    if self.at(self.pos) != b'\\' || self.at(fwd(self.pos, 1)) != b'u' {
                        return Err(self.syntax("lone surrogate in \\u escape"));
                    }
                    let low = self.hex4(fwd(self.pos, 2))?;
                    if !(0xDC00..0xE000).contains(&low) {
                        return Err(self.syntax("lone surrogate in \\u escape"));
                    }
                    self.skip(6);
                    char::decode_utf16([high, low]).next().and_then(Result::ok)
                } else {
                    // `None` for a lone trailing surrogate.
                    char::from_u32(u32::from(high))
                };
                return c.ok_or_else(|| self.syntax("lone surrogate in \\u escape"));
            }
            _ => return Err(self.syntax("invalid escape")),
        };
        self.skip(2);
        Ok(c)
    }

    /// Four hex digits at `at`, as one UTF-16 code unit.
    fn hex4<E>(&self, at: usize) -> Result<u16, WalkError<E>> {
        let mut v: u16 = 0;
        for i in at..fwd(at, 4) {
            let digit = hex_digit(self.at(i)).ok_or_else(|| self.syntax("invalid \\u escape"))?;
            // Four digits of at most 15 fill exactly 16 bits.
            v = (v << 4) | digit as u16;
        }
        Ok(v)
    }

    fn number<S: Sink>(&mut self, sink: &mut S) -> Result<S::Value, WalkError<S::Error>> {
        let start = self.pos;
        let negative = self.at(self.pos) == b'-';
        if negative {
            self.skip(1);
        }
        // Integer part: `0` or a non-zero digit and more digits, accumulated while it
        // fits.
        let mut magnitude: u64 = 0;
        let mut fits = true;
        match self.at(self.pos) {
            b'0' => self.skip(1),
            b'1'..=b'9' => {
                while let d @ b'0'..=b'9' = self.at(self.pos) {
                    // The low nibble of an ASCII digit is its value.
                    match magnitude
                        .checked_mul(10)
                        .and_then(|m| m.checked_add(u64::from(d & 0x0f)))
                    {
                        Some(m) => magnitude = m,
                        None => fits = false,
                    }
                    self.skip(1);
                }
            }
            _ => return Err(self.syntax("invalid number")),
        }
        let mut integer = true;
        if self.at(self.pos) == b'.' {
            integer = false;
            self.skip(1);
            if !self.at(self.pos).is_ascii_digit() {
                return Err(self.syntax("invalid number"));
            }
            while self.at(self.pos).is_ascii_digit() {
                self.skip(1);
            }
        }
        if matches!(self.at(self.pos), b'e' | b'E') {
            integer = false;
            self.skip(1);
            if matches!(self.at(self.pos), b'+' | b'-') {
                self.skip(1);
            }
            if !self.at(self.pos).is_ascii_digit() {
                return Err(self.syntax("invalid number"));
            }
            while self.at(self.pos).is_ascii_digit() {
                self.skip(1);
            }
        }
        if integer && fits {
            if !negative {
                return sink.unsigned(magnitude).map_err(WalkError::Sink);
            }
            // `-0` is a float, as the wire decoder reads it.
            if magnitude != 0 && magnitude <= 1 << 63 {
                let value = (magnitude as i64).wrapping_neg();
                return sink.signed(value).map_err(WalkError::Sink);
            }
        }
        match self.span(start, self.pos)?.parse::<f64>() {
            Ok(f) if f.is_finite() => sink.float(f).map_err(WalkError::Sink),
            _ => Err(self.syntax("number out of range")),
        }
    }
}

/// A string read by [`Reader::string`].
enum Str<'a> {
    /// No escapes: a span of the text.
    Text(&'a str),
    /// Resolved into the reader's scratch buffer.
    Scratch,
}

impl<'a> Str<'a> {
    fn resolve<'r>(&self, reader: &'r Reader<'a>) -> &'r str
    where
        'a: 'r,
    {
        match self {
            Str::Text(s) => s,
            Str::Scratch => &reader.scratch,
        }
    }
}
