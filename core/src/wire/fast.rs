//! A validating fast path for the firehose frame, `task.progress`.
//!
//! [`peek_progress`] checks a frame in one pass without building any value: the fixed
//! fields are borrowed from the frame and the payload is returned as its JSON text. It
//! accepts a frame only when [`decode_str`](super::decode_str) with `validate = true`
//! would accept it *and* the frame is in the plain form (no unknown top-level fields, no
//! escapes in keys or in the borrowed strings, at most [`MAX_MEMBERS`] members per
//! payload object); for every other frame it answers `None` and the caller takes the full
//! path, which also produces the error. It is an accelerator, never a second set of
//! rules: `core/tests/fast_props.rs` checks it against `decode_str` on random frames.
//!
//! # How it checks
//!
//! A hand-written strict scanner over the frame's bytes (no serde, no allocation): string
//! bodies are scanned eight bytes at a time for `"`, `\` and control bytes, integers are
//! read digit by digit, and the grammar is the one `serde_json` enforces:
//!
//! * whitespace is ` \t\n\r` only, and only whitespace may follow the frame's object;
//! * escapes are `\" \\ \/ \b \f \n \r \t \uXXXX`; a `\u` surrogate must be a complete
//!   pair (a lone one is an error); raw control characters in strings are errors;
//! * numbers follow the JSON grammar and must be finite as an `f64` (`1e400` is an error);
//! * containers nest at most 127 deep, the frame's own object included (serde_json's
//!   recursion limit of 128);
//! * a key repeated in any object of the payload, at any depth, is an error.
//!
//! On top of the grammar it checks the schema of `task.progress` with `validate = true`:
//! exactly the keys `type`, `schema_version`, `task_id`, `seq`, `kind`, `payload` and
//! optionally `attempt`, each once; `type` is `"task.progress"`; `schema_version` is the
//! integer literal `1`; `task_id` is a non-empty string, `kind` a string and `payload` an
//! object; `seq` and `attempt` are integer literals in `0..=2^53 - 1`; and when `kind` is
//! `usage`, `payload.usage` is a valid UsageSplit (exactly the five components, each an
//! integer literal in `0..=2^53 - 1`).
//!
//! # Where it is conservative
//!
//! It answers `None` for some valid frames, which the full decode then accepts: a key or
//! a borrowed string (`type`, `task_id`, `kind`) containing a backslash escape; a payload
//! object (at any depth) with more than [`MAX_MEMBERS`] members; a number whose exponent
//! has more than four digits (serde_json's exponent-overflow rules need not be mirrored
//! for such literals); any unknown top-level field; and a frame of 4 GiB or more.

use super::codec::{decode, decode_str, progress_from_view};
use super::error::DecodeError;
use super::messages::{progress_kind, Message};
use super::{MAX_SAFE_INTEGER, SCHEMA_VERSION};
use crate::json::walk::{byte_at, fwd, hex_digit, skip_ws, string_run_end};

/// Most members an object inside a payload may have for the fast path (duplicate keys are
/// found by comparing against every earlier key).
pub const MAX_MEMBERS: usize = 32;

/// The fields of a valid `task.progress` frame, borrowed from it (see [`peek_progress`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProgressView<'a> {
    /// `task_id`, non-empty.
    pub task_id: &'a str,
    /// `seq`.
    pub seq: u64,
    /// `attempt` (0 when absent).
    pub attempt: u64,
    /// `kind`.
    pub kind: &'a str,
    /// The payload object's JSON text, exactly as in the frame: well-formed, without
    /// duplicate keys at any depth, and for kind `usage` with a valid `usage` split.
    pub payload: &'a str,
    /// `true` when every number in `payload` is an integer literal within
    /// ±(2^53 − 1), without fraction, exponent or `-0`: each is exactly an IEEE 754
    /// double that any shortest round-trip formatter writes back as the same literal, so
    /// a binding whose numbers are doubles (JavaScript) can parse the text with its own
    /// parser and re-encode the result unchanged. Computed in the same single pass and
    /// conservative: outside a `usage` split, an integer of 16 or more digits clears it.
    pub payload_f64_exact: bool,
}

/// A decoded frame as [`decode_view`] hands it over: the fast path's borrowed view of a
/// plain, valid `task.progress` frame, or the fully decoded message of any other frame.
#[derive(Debug, Clone, PartialEq)]
pub enum Decoded<'a> {
    /// A `task.progress` frame that passed every rule in one pass; its payload is still
    /// the validated JSON text of the frame (build it with
    /// [`json::walk`](crate::json::walk), or let the host language parse it).
    Progress(ProgressView<'a>),
    /// Any other frame, decoded by [`decode_str`](super::decode_str).
    Message(Message),
}

impl Decoded<'_> {
    /// The frame as a [`Message`] (the view's payload text parsed into an object).
    ///
    /// # Errors
    /// None in practice: the view's payload was validated; a failure of the parser on it
    /// is reported as the parser's error.
    pub fn into_message(self) -> Result<Message, DecodeError> {
        match self {
            Decoded::Message(m) => Ok(m),
            Decoded::Progress(view) => Ok(Message::TaskProgress(progress_from_view(&view))),
        }
    }
}

/// Decode a text frame the way every binding should: a plain, valid `task.progress`
/// frame through [`peek_progress`] (no value built, payload kept as text), any other
/// through [`decode_str`](super::decode_str). The result and the errors are those of
/// `decode_str(frame, validate)`: a frame the fast path accepts passes every rule, so it
/// decodes the same with and without `validate`.
///
/// ```
/// use stapel_runner_protocol::wire::{decode_str_view, Decoded};
///
/// let frame = r#"{"schema_version":1,"type":"task.progress","task_id":"T-1","seq":3,"kind":"state","payload":{"state":"running"}}"#;
/// assert!(matches!(decode_str_view(frame, true), Ok(Decoded::Progress(v)) if v.seq == 3));
/// let ping = r#"{"schema_version":1,"type":"ping"}"#;
/// assert!(matches!(decode_str_view(ping, true), Ok(Decoded::Message(_))));
/// assert_eq!(decode_str_view("{", true).unwrap_err().code(), "not_json");
/// ```
///
/// # Errors
/// Those of [`decode_str`](super::decode_str).
#[inline]
pub fn decode_str_view(frame: &str, validate: bool) -> Result<Decoded<'_>, DecodeError> {
    match peek_progress(frame) {
        Some(view) => Ok(Decoded::Progress(view)),
        None => decode_str(frame, validate).map(Decoded::Message),
    }
}

/// [`decode_str_view`] for a frame's bytes: UTF-8 frames go through it, others through
/// [`decode`](super::decode), which reports where the UTF-8 breaks.
///
/// # Errors
/// Those of [`decode`](super::decode).
#[inline]
pub fn decode_view(frame: &[u8], validate: bool) -> Result<Decoded<'_>, DecodeError> {
    match std::str::from_utf8(frame) {
        Ok(text) => decode_str_view(text, validate),
        Err(_) => decode(frame, validate).map(Decoded::Message),
    }
}

/// Check `frame` as a `task.progress` frame in one pass (see the module docs): `Some`
/// when it is valid and in the plain form, `None` when the full
/// [`decode_str`](super::decode_str) must decide.
///
/// ```
/// use stapel_runner_protocol::wire::peek_progress;
///
/// let frame = r#"{"schema_version":1,"type":"task.progress","task_id":"T-1","seq":3,"kind":"state","payload":{"state":"running"}}"#;
/// let view = peek_progress(frame).unwrap();
/// assert_eq!((view.task_id, view.seq, view.kind), ("T-1", 3, "state"));
/// assert_eq!(view.payload, r#"{"state":"running"}"#);
/// assert!(peek_progress(r#"{"type":"task.progress"}"#).is_none()); // invalid: full path
/// ```
pub fn peek_progress(frame: &str) -> Option<ProgressView<'_>> {
    // Key offsets are stored as `u32`; a frame this large takes the full path.
    if u32::try_from(frame.len()).is_err() {
        return None;
    }
    if let Some(view) = peek_encoded(frame) {
        return Some(view);
    }
    let mut s = Scanner {
        text: frame,
        bytes: frame.as_bytes(),
        pos: 0,
        f64_exact: true,
    };
    if s.ws() != b'{' {
        return None;
    }
    s.skip(1);
    // serde_json's recursion budget is 128; the frame's object spends one.
    let depth = DEPTH_BUDGET - 1;
    let mut view = ProgressView {
        task_id: "",
        seq: 0,
        attempt: 0,
        kind: "",
        payload: "",
        payload_f64_exact: false,
    };
    let mut seen = 0u8;
    let mut usage_ok = false;
    loop {
        if s.ws() != b'"' {
            return None;
        }
        let bit = match s.key()? {
            b"type" => TYPE,
            b"schema_version" => SCHEMA,
            b"task_id" => TASK_ID,
            b"seq" => SEQ,
            b"kind" => KIND,
            b"attempt" => ATTEMPT,
            b"payload" => PAYLOAD,
            _ => return None,
        };
        if seen & bit != 0 {
            return None;
        }
        seen |= bit;
        s.colon()?;
        match bit {
            TYPE => {
                if s.plain_str()? != "task.progress" {
                    return None;
                }
            }
            SCHEMA => {
                if s.safe_uint()? != SCHEMA_VERSION {
                    return None;
                }
            }
            TASK_ID => {
                view.task_id = s.plain_str()?;
                if view.task_id.is_empty() {
                    return None;
                }
            }
            SEQ => view.seq = s.safe_uint()?,
            ATTEMPT => view.attempt = s.safe_uint()?,
            KIND => view.kind = s.plain_str()?,
            _ => {
                let start = s.pos;
                s.f64_exact = true;
                usage_ok = s.object(depth, true)?;
                view.payload = frame.get(start..s.pos)?;
                view.payload_f64_exact = s.f64_exact;
            }
        }
        match s.ws() {
            b',' => s.skip(1),
            b'}' => {
                s.skip(1);
                break;
            }
            _ => return None,
        }
    }
    if seen & REQUIRED != REQUIRED || (view.kind == progress_kind::USAGE && !usage_ok) {
        return None;
    }
    s.ws();
    if s.pos != frame.len() {
        return None;
    }
    Some(view)
}

/// The start of a `task.progress` frame as [`encode`](super::encode) writes it, up to the
/// `task_id` value.
const ENCODED_HEAD: &[u8] = br#"{"schema_version":1,"type":"task.progress","task_id":"#;

/// [`peek_progress`] of a frame laid out exactly as [`encode`](super::encode) writes one
/// (the top-level members in its order and spelling, no whitespace): the same checks,
/// with the member names matched as literals. `None` when the frame is laid out any
/// other way (or is invalid): [`peek_progress`] then scans it member by member, which
/// decides. Whatever this accepts, that scan accepts with the same view.
fn peek_encoded(frame: &str) -> Option<ProgressView<'_>> {
    let bytes = frame.as_bytes();
    if !bytes.starts_with(ENCODED_HEAD) {
        return None;
    }
    let mut s = Scanner {
        text: frame,
        bytes,
        pos: ENCODED_HEAD.len(),
        f64_exact: true,
    };
    let task_id = s.plain_str()?;
    if task_id.is_empty() || !s.literal_at(br#","seq":"#) {
        return None;
    }
    let seq = s.safe_uint()?;
    if !s.literal_at(br#","kind":"#) {
        return None;
    }
    let kind = s.plain_str()?;
    let attempt = if s.literal_at(br#","attempt":"#) {
        s.safe_uint()?
    } else {
        0
    };
    if !s.literal_at(br#","payload":"#) {
        return None;
    }
    let start = s.pos;
    s.f64_exact = true;
    let usage_ok = s.object(DEPTH_BUDGET - 1, true)?;
    let payload = frame.get(start..s.pos)?;
    let payload_f64_exact = s.f64_exact;
    if !s.literal_at(b"}") || s.pos != bytes.len() {
        return None;
    }
    if kind == progress_kind::USAGE && !usage_ok {
        return None;
    }
    Some(ProgressView {
        task_id,
        seq,
        attempt,
        kind,
        payload,
        payload_f64_exact,
    })
}

/// serde_json's recursion budget: entering a container spends one, reaching zero fails.
const DEPTH_BUDGET: u32 = 128;

// One bit per top-level field.
const TYPE: u8 = 1;
const SCHEMA: u8 = 2;
const TASK_ID: u8 = 4;
const SEQ: u8 = 8;
const KIND: u8 = 16;
const ATTEMPT: u8 = 32;
const PAYLOAD: u8 = 64;
const REQUIRED: u8 = TYPE | SCHEMA | TASK_ID | SEQ | KIND | PAYLOAD;

/// The scanner: a cursor over the frame. Every method answers `None` as soon as the frame
/// is invalid or outside the plain form; the cursor is then meaningless.
struct Scanner<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
    /// Every number seen since this was last set is an integer literal of at most
    /// [`F64_EXACT_DIGITS`] digits, and not `-0`.
    f64_exact: bool,
}

/// Integer literals up to this many digits are exact doubles (below 2^53).
const F64_EXACT_DIGITS: usize = 15;

impl<'a> Scanner<'a> {
    #[inline(always)]
    fn at(&self, i: usize) -> u8 {
        byte_at(self.bytes, i)
    }

    /// Skip whitespace; the next byte (`0` at the end).
    #[inline(always)]
    fn ws(&mut self) -> u8 {
        skip_ws(self.bytes, &mut self.pos)
    }

    /// `:` after optional whitespace, then whitespace up to the value.
    #[inline(always)]
    fn colon(&mut self) -> Option<()> {
        if self.ws() != b':' {
            return None;
        }
        self.skip(1);
        self.ws();
        Some(())
    }

    /// The first byte at or after `i` that ends a string run, or the length.
    #[inline(always)]
    fn scan(&self, i: usize) -> usize {
        string_run_end(self.bytes, i)
    }

    /// A string without escapes at the cursor (its `"`), borrowed.
    #[inline(always)]
    fn plain(&mut self) -> Option<(usize, usize)> {
        if self.at(self.pos) != b'"' {
            return None;
        }
        let start = fwd(self.pos, 1);
        let end = self.scan(start);
        if self.at(end) != b'"' {
            return None;
        }
        self.pos = fwd(end, 1);
        Some((start, end))
    }

    /// A key (cursor at its `"`), without escapes.
    #[inline(always)]
    fn key(&mut self) -> Option<&'a [u8]> {
        let (start, end) = self.plain()?;
        let bytes: &'a [u8] = self.bytes;
        bytes.get(start..end)
    }

    /// A string value without escapes, borrowed.
    #[inline(always)]
    fn plain_str(&mut self) -> Option<&'a str> {
        let (start, end) = self.plain()?;
        // Both ends are ASCII quotes, so they are character boundaries.
        let text: &'a str = self.text;
        text.get(start..end)
    }

    /// An integer literal in `0..=2^53 - 1` at the cursor: no sign, fraction or exponent.
    #[inline(always)]
    fn safe_uint(&mut self) -> Option<u64> {
        let start = self.pos;
        let first = self.at(start).wrapping_sub(b'0');
        if first > 9 {
            return None;
        }
        let mut n = u64::from(first);
        let mut i = fwd(start, 1);
        if first != 0 {
            loop {
                let d = self.at(i).wrapping_sub(b'0');
                if d > 9 {
                    break;
                }
                // At most 16 digits: 2^53 - 1 has 16, and 17 cannot overflow `u64`, so
                // the wrapping operations never wrap.
                n = n.wrapping_mul(10).wrapping_add(u64::from(d));
                i = fwd(i, 1);
                if i.wrapping_sub(start) > 16 {
                    return None;
                }
            }
        }
        if n > MAX_SAFE_INTEGER || matches!(self.at(i), b'.' | b'e' | b'E' | b'0'..=b'9') {
            return None;
        }
        self.pos = i;
        Some(n)
    }

    /// An object at the cursor (its `{`), with `depth` recursion budget left before
    /// entering it. `payload` marks the payload object itself, whose `usage` member is
    /// checked as a UsageSplit: the answer is whether it holds a valid one.
    fn object(&mut self, depth: u32, payload: bool) -> Option<bool> {
        if self.at(self.pos) != b'{' {
            return None;
        }
        let depth = depth.checked_sub(1).filter(|d| *d != 0)?;
        self.skip(1);
        if self.ws() == b'}' {
            self.skip(1);
            return Some(false);
        }
        let mut keys = [(0u32, 0u32); MAX_MEMBERS];
        let mut len = 0;
        let mut usage_ok = false;
        loop {
            if self.ws() != b'"' {
                return None;
            }
            let (start, end) = self.plain()?;
            let key = self.bytes.get(start..end)?;
            for &(s, e) in keys.get(..len)? {
                if e.wrapping_sub(s) as usize == key.len()
                    && self.bytes.get(s as usize..e as usize) == Some(key)
                {
                    return None;
                }
            }
            // The frame is shorter than 4 GiB (checked on entry). More than MAX_MEMBERS
            // members: the full path.
            *keys.get_mut(len)? = (start as u32, end as u32);
            len = fwd(len, 1);
            self.colon()?;
            if payload && key == b"usage" {
                let at = self.pos;
                usage_ok = self.usage_split();
                if !usage_ok {
                    self.pos = at;
                    self.value(depth)?;
                }
            } else {
                self.value(depth)?;
            }
            match self.ws() {
                b',' => self.skip(1),
                b'}' => {
                    self.skip(1);
                    return Some(usage_ok);
                }
                _ => return None,
            }
        }
    }

    /// A valid UsageSplit at the cursor: exactly the five components, each an integer
    /// literal in `0..=2^53 - 1`. `false` leaves the cursor anywhere.
    fn usage_split(&mut self) -> bool {
        if self.at(self.pos) != b'{' {
            return false;
        }
        // As the encoder writes it: the five names as literals, in its order.
        let at = self.pos;
        let encoded = [
            &br#"{"cache_read":"#[..],
            br#","cache_write":"#,
            br#","fresh_input":"#,
            br#","output":"#,
            br#","thinking":"#,
        ]
        .iter()
        .all(|name| self.literal_at(name) && self.safe_uint().is_some());
        if encoded && self.literal_at(b"}") {
            return true;
        }
        self.pos = at;
        self.skip(1);
        let mut seen = 0u8;
        loop {
            if self.ws() != b'"' {
                return false;
            }
            let bit = match self.key() {
                Some(b"cache_read") => 1,
                Some(b"cache_write") => 2,
                Some(b"fresh_input") => 4,
                Some(b"output") => 8,
                Some(b"thinking") => 16,
                _ => return false,
            };
            if seen & bit != 0 || self.colon().is_none() || self.safe_uint().is_none() {
                return false;
            }
            seen |= bit;
            match self.ws() {
                b',' => self.skip(1),
                b'}' => {
                    self.skip(1);
                    return seen == 0b1_1111;
                }
                _ => return false,
            }
        }
    }

    /// An array at the cursor (its `[`).
    fn array(&mut self, depth: u32) -> Option<()> {
        let depth = depth.checked_sub(1).filter(|d| *d != 0)?;
        self.skip(1);
        if self.ws() == b']' {
            self.skip(1);
            return Some(());
        }
        loop {
            self.ws();
            self.value(depth)?;
            match self.ws() {
                b',' => self.skip(1),
                b']' => {
                    self.skip(1);
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// Any value at the cursor (whitespace already skipped).
    fn value(&mut self, depth: u32) -> Option<()> {
        match self.at(self.pos) {
            b'"' => self.string(),
            b'-' | b'0'..=b'9' => self.number(),
            b'{' => self.object(depth, false).map(drop),
            b'[' => self.array(depth),
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            _ => None,
        }
    }

    /// Skip `word` when the text at the cursor is exactly it (`false`: nothing moved).
    #[inline(always)]
    fn literal_at(&mut self, word: &[u8]) -> bool {
        let hit = self
            .bytes
            .get(self.pos..)
            .is_some_and(|rest| rest.starts_with(word));
        if hit {
            self.skip(word.len());
        }
        hit
    }

    /// The literal `word` at the cursor.
    #[inline(always)]
    fn literal(&mut self, word: &[u8]) -> Option<()> {
        if self.bytes.get(self.pos..fwd(self.pos, word.len()))? != word {
            return None;
        }
        self.skip(word.len());
        Some(())
    }

    /// A string value at the cursor (its `"`), escapes checked.
    #[inline(always)]
    fn string(&mut self) -> Option<()> {
        let mut i = self.scan(fwd(self.pos, 1));
        loop {
            match self.at(i) {
                b'"' => {
                    self.pos = fwd(i, 1);
                    return Some(());
                }
                b'\\' => i = self.scan(self.escape(fwd(i, 1))?),
                // A control character, or the end of the frame.
                _ => return None,
            }
        }
    }

    /// The escape whose letter is at `i`: the offset after it.
    fn escape(&self, i: usize) -> Option<usize> {
        match self.at(i) {
            b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => Some(fwd(i, 1)),
            b'u' => match self.hex4(fwd(i, 1))? {
                // A trailing surrogate first: serde_json rejects it.
                0xDC00..=0xDFFF => None,
                // A leading surrogate must be followed by an escaped trailing one.
                0xD800..=0xDBFF => {
                    if self.at(fwd(i, 5)) != b'\\' || self.at(fwd(i, 6)) != b'u' {
                        return None;
                    }
                    match self.hex4(fwd(i, 7))? {
                        0xDC00..=0xDFFF => Some(fwd(i, 11)),
                        _ => None,
                    }
                }
                _ => Some(fwd(i, 5)),
            },
            _ => None,
        }
    }

    /// Four hex digits at `i`.
    fn hex4(&self, i: usize) -> Option<u16> {
        let digits = self.bytes.get(i..fwd(i, 4))?;
        digits
            .iter()
            .try_fold(0u16, |n, &b| Some((n << 4) | hex_digit(b)? as u16))
    }

    /// A number at the cursor (`-` or a digit): the JSON grammar, and finite as an `f64`.
    fn number(&mut self) -> Option<()> {
        let start = self.pos;
        let mut i = fwd(start, usize::from(self.at(start) == b'-'));
        let int_start = i;
        match self.at(i) {
            b'0' => i = fwd(i, 1),
            b'1'..=b'9' => i = self.digits(fwd(i, 1)),
            _ => return None,
        }
        let int_digits = i.wrapping_sub(int_start);
        // Integer digits beyond this many could exceed f64::MAX (about 1.8e308).
        let mut check_range = int_digits > 300;
        // `-0` parses as a float, and a long integer may not be an exact double.
        let negative_zero = start != int_start && self.at(int_start) == b'0';
        if int_digits > F64_EXACT_DIGITS || negative_zero {
            self.f64_exact = false;
        }
        match self.at(i) {
            b'0'..=b'9' => return None, // a leading zero
            b'.' => {
                if !self.at(fwd(i, 1)).is_ascii_digit() {
                    return None;
                }
                self.f64_exact = false;
                i = self.digits(fwd(i, 2));
            }
            _ => {}
        }
        if matches!(self.at(i), b'e' | b'E') {
            self.f64_exact = false;
            i = fwd(i, 1);
            if matches!(self.at(i), b'+' | b'-') {
                i = fwd(i, 1);
            }
            if !self.at(i).is_ascii_digit() {
                return None;
            }
            let exp_start = i;
            i = self.digits(fwd(i, 1));
            // Conservative: a long exponent is left to serde_json's overflow rules.
            if i.wrapping_sub(exp_start) > 4 {
                return None;
            }
            check_range = true;
        }
        // serde_json (float_roundtrip) and `str::parse` both round correctly, so they agree
        // on which literals overflow to infinity.
        if check_range && !self.text.get(start..i)?.parse::<f64>().ok()?.is_finite() {
            return None;
        }
        self.pos = i;
        Some(())
    }

    /// The end of the digit run starting at `i`.
    #[inline(always)]
    fn digits(&self, mut i: usize) -> usize {
        while self.at(i).is_ascii_digit() {
            i = fwd(i, 1);
        }
        i
    }

    /// Move the cursor `n` bytes on.
    #[inline(always)]
    fn skip(&mut self, n: usize) {
        self.pos = fwd(self.pos, n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoded_frames_take_the_literal_path_with_the_same_view() {
        let frames = [
            r#"{"schema_version":1,"type":"task.progress","task_id":"brave-falcon-1042/T-1042","seq":17,"kind":"usage","attempt":2,"payload":{"usage":{"cache_read":30433,"cache_write":287,"fresh_input":1,"output":67,"thinking":12},"model":"claude-sonnet-4-5-20250929","turn":3}}"#,
            r#"{"schema_version":1,"type":"task.progress","task_id":"T-1","seq":3,"kind":"state","payload":{"state":"running"}}"#,
        ];
        for f in frames {
            let fast = peek_encoded(f).expect("the literal path takes an encoded frame");
            // The member-by-member scan (a frame the literal path refuses: a blank after
            // the opening brace) gives the same view.
            let spaced = format!("{{ {}", &f[1..]);
            let general = peek_progress(&spaced).expect("the scan takes it too");
            assert!(peek_encoded(&spaced).is_none());
            assert_eq!(
                (
                    fast.task_id,
                    fast.seq,
                    fast.attempt,
                    fast.kind,
                    fast.payload
                ),
                (
                    general.task_id,
                    general.seq,
                    general.attempt,
                    general.kind,
                    general.payload
                )
            );
            assert_eq!(fast.payload_f64_exact, general.payload_f64_exact);
        }
    }
}
