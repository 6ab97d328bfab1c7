//! Differential test of the `task.progress` fast path, `wire::peek_progress`, against the
//! full decode, `wire::decode_full(frame, true)` (which `decode_str`, `decode` and `decode_owned`
//! now route through the fast path, so each of them is checked against it too).
//!
//! * Whenever the fast path says `Some`, the full decode must accept the frame as a
//!   `task.progress` with equal fields, and the payload text must parse to the decoded
//!   payload. This is checked on every frame below: generated valid ones, structurally
//!   broken ones, character-level mutations and nesting around serde_json's limit.
//! * The fast path may answer `None` for a valid frame only outside the plain form (an
//!   escape in a key or in `type`/`task_id`/`kind`, an unknown top-level field, more than
//!   `MAX_MEMBERS` members in a payload object, an exponent longer than four digits). The
//!   generators track that form, and for every plain frame the two must agree exactly.
//! * A valid generated frame must be accepted whenever it is plain, and most are, so the
//!   test cannot pass by answering `None`.

use std::cell::Cell;
use std::collections::HashSet;

use proptest::prelude::*;
use proptest::sample::{select, Index};
use proptest::test_runner::{Config, TestRunner};
use stapel_runner_protocol::json::Object;
use stapel_runner_protocol::wire::{
    decode, decode_full, decode_owned, decode_str, decode_str_view, encode, peek_progress, Decoded,
    Message, TaskProgress, MAX_MEMBERS, MAX_SAFE_INTEGER,
};

/// JSON text, and whether it is in the fast path's plain form.
type Piece = (String, bool);

/// The full decode's answer: the progress message, or `None`.
fn reference(frame: &str) -> Option<TaskProgress> {
    match decode_full(frame, true) {
        Ok(Message::TaskProgress(m)) => Some(m),
        _ => None,
    }
}

/// Compare the fast path with the full decode on `frame`; `plain` (when known) demands
/// that they agree exactly. Answers whether the fast path accepted.
fn check(frame: &str, plain: bool) -> Result<bool, TestCaseError> {
    let want = reference(frame);
    let got = peek_progress(frame);
    if let Some(view) = got {
        let Some(m) = &want else {
            return Err(TestCaseError::fail(format!(
                "fast path accepted a frame decode_str rejects: {frame:?}: {:?}",
                decode_str(frame, true).map(|_| "not a task.progress")
            )));
        };
        prop_assert_eq!(view.task_id, m.task_id.as_str(), "task_id of {:?}", frame);
        prop_assert_eq!(view.seq, m.seq, "seq of {:?}", frame);
        prop_assert_eq!(view.attempt, m.attempt, "attempt of {:?}", frame);
        prop_assert_eq!(view.kind, m.kind.as_str(), "kind of {:?}", frame);
        prop_assert!(m.extra.is_empty(), "extra fields in {:?}", frame);
        // The payload is the frame's own text, and parses to the decoded payload.
        let start = view.payload.as_ptr() as usize - frame.as_ptr() as usize;
        prop_assert_eq!(&frame[start..start + view.payload.len()], view.payload);
        let payload: Object = serde_json::from_str(view.payload)
            .map_err(|e| TestCaseError::fail(format!("payload of {frame:?}: {e}")))?;
        prop_assert_eq!(&payload, &m.payload, "payload of {:?}", frame);
        // A payload the scanner calls f64-exact holds only integers a double holds
        // exactly (so a double-based parser reads and writes it back unchanged).
        if view.payload_f64_exact {
            let raw: serde_json::Value = serde_json::from_str(view.payload)
                .map_err(|e| TestCaseError::fail(format!("payload of {frame:?}: {e}")))?;
            prop_assert!(f64_exact(&raw), "f64-exact payload of {:?}", frame);
        }
    }
    // Every decode entry point gives the full decode's answer (message or error), and a
    // decoded message re-encodes as the fully decoded one does (a lazy text payload is
    // written by copying only when it is the encoder's own form).
    let full = decode_full(frame, true);
    for got in [
        decode_str(frame, true),
        decode(frame.as_bytes(), true),
        decode_owned(frame.to_owned(), true),
    ] {
        prop_assert_eq!(&got, &full, "decode entry points on {:?}", frame);
        if let (Ok(a), Ok(b)) = (&got, &full) {
            prop_assert_eq!(encode(a), encode(b), "re-encoding of {:?}", frame);
        }
    }
    // The bindings' entry point gives the full decode's answer (message or error), with
    // and without validation.
    for validate in [true, false] {
        let via_view = decode_str_view(frame, validate).and_then(Decoded::into_message);
        prop_assert_eq!(
            via_view,
            decode_full(frame, validate),
            "decode_str_view({:?}, {})",
            frame,
            validate
        );
    }
    if plain {
        prop_assert_eq!(
            got.is_some(),
            want.is_some(),
            "plain frame judged differently: {:?}, decode_str: {:?}",
            frame,
            decode_str(frame, true).err()
        );
    }
    Ok(got.is_some())
}

// ---------------------------------------------------------------------------------------
// Pieces of JSON text

/// What a generator makes: `valid` JSON (accepted by serde_json, no duplicate keys) or
/// anything; `plain`: only text in the fast path's plain form, or anything; `holes`: with
/// [`HOLE`] markers among the leaves, for [`fill_holes`].
#[derive(Debug, Clone, Copy)]
struct Gen {
    valid: bool,
    plain: bool,
    holes: bool,
}

/// A leaf to be replaced by [`fill_holes`].
const HOLE: &str = "@HOLE@";

/// Valid JSON in the plain form.
const PLAIN: Gen = Gen {
    valid: true,
    plain: true,
    holes: false,
};

/// A weighted union of the options that apply (no filtering, so no rejected cases).
fn union<T: std::fmt::Debug + 'static>(options: Vec<(u32, BoxedStrategy<T>)>) -> BoxedStrategy<T> {
    prop::strategy::Union::new_weighted(options).boxed()
}

fn ws() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => Just(String::new()),
        1 => "[ \t\n\r]{1,3}",
    ]
}

/// Plain unless the number's exponent has more than four digits.
fn number_piece(text: String) -> Piece {
    let plain = match text.find(['e', 'E']) {
        Some(i) => {
            let exp = text[i + 1..].trim_start_matches(['+', '-']);
            exp.bytes().take_while(u8::is_ascii_digit).count() <= 4
        }
        None => true,
    };
    (text, plain)
}

fn texts(list: &[&'static str]) -> BoxedStrategy<String> {
    select(list.to_vec()).prop_map(str::to_owned).boxed()
}

/// Numbers: every shape serde_json accepts; unless `g.valid`, also bad grammar and
/// literals out of the f64 range.
fn number(g: Gen) -> BoxedStrategy<Piece> {
    let mut options: Vec<(u32, BoxedStrategy<String>)> = vec![
        (1, any::<u64>().prop_map(|n| n.to_string()).boxed()),
        (1, any::<i64>().prop_map(|n| n.to_string()).boxed()),
        (1, (0u64..1000).prop_map(|n| n.to_string()).boxed()),
        (
            2,
            "-?(0|[1-9][0-9]{0,45})(\\.[0-9]{1,22})?([eE][+-]?[0-9]{1,2})?".boxed(),
        ),
        (1, "-?[1-9][0-9]{17,21}".boxed()),
        // Around the digit count past which the scanner checks the range.
        (1, "-?[1-9][0-9]{295,307}(\\.[0-9]{1,5})?".boxed()),
        (
            1,
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(|f| f.to_string())
                .boxed(),
        ),
        (
            1,
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(|f| format!("{f:e}"))
                .boxed(),
        ),
        (
            2,
            texts(&[
                "0",
                "-0",
                "-0.0",
                "0.0",
                "-0e5",
                "0e-999",
                "1e308",
                "1.7976931348623157e308",
                "-1.7976931348623157e308",
                "1.7976931348623158e308",
                "5e-324",
                "2.4703282292062327e-324",
                "1e-400",
                "1e-1000",
                "0e1000",
                "1E0001",
                "18446744073709551615",
                "18446744073709551616",
                "-9223372036854775808",
                "-9223372036854775809",
                "9007199254740993",
                "0.1",
                "1E+2",
                "1e-0",
            ]),
        ),
    ];
    if !g.plain {
        // Valid, but exponents too long for the fast path.
        options.push((1, texts(&["1e-10000", "0e99999", "1e00001", "-0.5E+00002"])));
    }
    if !g.valid {
        options.push((2, "[1-9][0-9]{305,312}".boxed()));
        options.push((
            3,
            texts(&[
                "2e308",
                "-1e400",
                "1e0400",
                "1.7976931348623159e308",
                "-",
                "01",
                "-01",
                "00",
                "1.",
                "1.e5",
                "1e",
                "1e+",
                ".5",
                "+1",
                "0x1",
                "1.5e",
                "--1",
                "1ee5",
                "NaN",
                "Infinity",
                "-0.e1",
                "1_000",
            ]),
        ));
        if !g.plain {
            options.push((
                1,
                texts(&["1e99999999999999999999", "0e99999999999999999999"]),
            ));
        }
    }
    union(options).prop_map(number_piece).boxed()
}

/// One piece of a valid string literal's body: a raw character or an escape of one.
fn string_piece() -> BoxedStrategy<String> {
    prop_oneof![
        4 => "[a-z0-9 _.:/-]{1,12}",
        2 => "[\u{e9}\u{4e2d}\u{1f600}\u{7f}\u{80}\u{ffff}\u{10ffff}]",
        1 => select(vec!["\\\"", "\\\\", "\\/", "\\b", "\\f", "\\n", "\\r", "\\t", "\\u0000"])
            .prop_map(str::to_owned),
        1 => any::<char>().prop_map(|c| {
            let mut units = [0u16; 2];
            c.encode_utf16(&mut units).iter().map(|u| format!("\\u{u:04x}")).collect()
        }),
        1 => any::<char>().prop_map(|c| {
            let mut units = [0u16; 2];
            c.encode_utf16(&mut units).iter().map(|u| format!("\\u{u:04X}")).collect()
        }),
    ]
    .boxed()
}

/// Pieces of string bodies serde_json rejects: bad escapes, lone or broken surrogates,
/// raw control characters, a stray quote or backslash.
fn bad_string_piece() -> BoxedStrategy<String> {
    texts(&[
        "\\x",
        "\\'",
        "\\U0041",
        "\\u12",
        "\\u12g4",
        "\\ud800",
        "\\udc00",
        "\\uDFFF",
        "\\ud800\\u0041",
        "\\ud800\\ud800",
        "\\udbff\\ue000",
        "\\ud800x",
        "\\ud800\\n",
        "\u{0}",
        "\u{1}",
        "\u{1f}",
        "\t",
        "\n",
        "\r",
        "\\",
        "\"",
    ])
}

/// `\u` escapes of surrogates: lone ones, pairs, and ones followed by any escape.
fn surrogate_escape() -> BoxedStrategy<String> {
    (
        0xD800u16..0xE000,
        prop_oneof![
            Just(None),
            (0xD800u16..0xE000).prop_map(Some),
            (0xDC00u16..0xE000).prop_map(Some),
            any::<u16>().prop_map(Some),
        ],
    )
        .prop_map(|(a, b)| match b {
            Some(b) => format!("\\u{a:04x}\\u{b:04X}"),
            None => format!("\\u{a:04X}"),
        })
        .boxed()
}

/// A string with exactly one piece that is (mostly) invalid, among valid ones.
fn one_bad_string() -> BoxedStrategy<String> {
    (
        prop::collection::vec(string_piece(), 0..3),
        prop_oneof![bad_string_piece(), surrogate_escape()],
        prop::collection::vec(string_piece(), 0..3),
    )
        .prop_map(|(a, bad, b)| format!("\"{}{bad}{}\"", a.concat(), b.concat()))
        .boxed()
}

fn string_of(piece: BoxedStrategy<String>) -> BoxedStrategy<String> {
    prop::collection::vec(piece, 0..5)
        .prop_map(|p| format!("\"{}\"", p.concat()))
        .boxed()
}

/// A string value (escapes are plain in values); unless `valid`, sometimes a bad one.
fn string(valid: bool) -> BoxedStrategy<String> {
    if valid {
        return string_of(string_piece());
    }
    prop_oneof![
        4 => string_of(string_piece()),
        1 => string_of(
            prop_oneof![6 => string_piece(), 1 => bad_string_piece(), 1 => surrogate_escape()]
                .boxed()
        ),
        1 => one_bad_string(),
    ]
    .boxed()
}

/// A string as a key or borrowed field: plain unless it has an escape.
fn str_piece(text: String) -> Piece {
    let plain = !text.contains('\\');
    (text, plain)
}

/// Object keys: a small alphabet repeats keys often (the valid generators drop repeats);
/// unless `g.plain`, also escaped keys, one of them an escaped spelling of `a`; unless
/// `g.valid`, also keys with raw control characters or a stray quote.
fn key(g: Gen) -> BoxedStrategy<Piece> {
    let quoted = |re: &'static str| re.prop_map(|k| format!("\"{k}\"")).boxed();
    let mut options = vec![
        (6, quoted("[a-z_]{1,10}")),
        (3, quoted("[a-c]{0,2}")),
        (1, quoted("[\u{e9}\u{4e2d}\u{1f600}\u{7f}a-c]{1,4}")),
        (1, Just("\"usage\"".to_owned()).boxed()),
    ];
    if !g.plain {
        options.push((1, Just("\"\\u0061\"".to_owned()).boxed()));
        options.push((1, string(g.valid)));
    }
    if !g.valid {
        options.push((1, quoted("[a-c\u{0}\u{1}\u{1f}\t\"]{1,3}")));
    }
    union(options).prop_map(str_piece).boxed()
}

/// The key a key literal decodes to (`None` when it does not decode).
fn decoded_key(text: &str) -> Option<String> {
    serde_json::from_str(text).ok()
}

/// One object member with its surrounding whitespace: `ws key ws : ws value ws`.
type Member = (String, Piece, String, String, Piece, String);

fn member(key: BoxedStrategy<Piece>, value: BoxedStrategy<Piece>) -> BoxedStrategy<Member> {
    (ws(), key, ws(), ws(), value, ws()).boxed()
}

fn render_object(members: &[Member], empty_ws: &str) -> Piece {
    if members.is_empty() {
        return (format!("{{{empty_ws}}}"), true);
    }
    let mut plain = members.len() <= MAX_MEMBERS;
    let texts: Vec<String> = members
        .iter()
        .map(|(a, k, b, c, v, d)| {
            plain &= k.1 && v.1;
            format!("{a}{}{b}:{c}{}{d}", k.0, v.0)
        })
        .collect();
    (format!("{{{}}}", texts.join(",")), plain)
}

/// Keep the first member of every decoded key.
fn dedup(members: Vec<Member>) -> Vec<Member> {
    let mut seen = HashSet::new();
    members
        .into_iter()
        .filter(|m| seen.insert(decoded_key(&m.1 .0)))
        .collect()
}

/// Any JSON value, nested up to five deep (see [`Gen`]).
fn json_value(g: Gen) -> BoxedStrategy<Piece> {
    let mut leaves = vec![
        (1, Just(("null".to_owned(), true)).boxed()),
        (1, Just(("true".to_owned(), true)).boxed()),
        (1, Just(("false".to_owned(), true)).boxed()),
        (2, number(g)),
        (2, string(g.valid).prop_map(|s| (s, true)).boxed()),
    ];
    if g.holes {
        leaves.push((1, Just((HOLE.to_owned(), true)).boxed()));
    }
    let leaf = union(leaves);
    // Around the member bound of the fast path (beyond it only when not plain).
    let widths = MAX_MEMBERS - 4..MAX_MEMBERS + if g.plain { 1 } else { 4 };
    leaf.prop_recursive(5, 96, 10, move |inner| {
        prop_oneof![
            3 => (prop::collection::vec((ws(), inner.clone(), ws()), 0..8), ws()).prop_map(
                |(items, empty)| {
                    if items.is_empty() {
                        return (format!("[{empty}]"), true);
                    }
                    let plain = items.iter().all(|(_, v, _)| v.1);
                    let items: Vec<String> =
                        items.into_iter().map(|(a, v, b)| a + &v.0 + &b).collect();
                    (format!("[{}]", items.join(",")), plain)
                }
            ),
            3 => (prop::collection::vec(member(key(g), inner.clone()), 0..10), ws())
                .prop_map(move |(members, empty)| {
                    let members = if g.valid { dedup(members) } else { members };
                    render_object(&members, &empty)
                }),
            1 => (widths.clone(), inner).prop_map(|(n, v)| {
                let members: Vec<String> = (0..n).map(|i| format!("\"k{i}\":{}", v.0)).collect();
                (format!("{{{}}}", members.join(",")), v.1 && n <= MAX_MEMBERS)
            }),
        ]
    })
    .boxed()
}

fn safe_uint() -> BoxedStrategy<String> {
    prop_oneof![
        2 => 0..=MAX_SAFE_INTEGER,
        2 => 0u64..100_000,
        1 => select(vec![0, 1, MAX_SAFE_INTEGER, MAX_SAFE_INTEGER - 1, 1 << 52]),
    ]
    .prop_map(|n| n.to_string())
    .boxed()
}

/// Integer-field values that are valid JSON but not an integer in `0..=2^53 - 1`.
fn json_bad_uint() -> BoxedStrategy<String> {
    texts(&[
        "9007199254740992",
        "9007199254740993",
        "18446744073709551615",
        "18446744073709551616",
        "99999999999999999999",
        "-1",
        "-0",
        "-9007199254740991",
        "1.0",
        "0.0",
        "1e0",
        "1E2",
        "0.5",
        "null",
        "\"1\"",
        "true",
        "[]",
        "{}",
        "[1]",
    ])
}

/// Values an integer field must reject (and a few it accepts).
fn bad_uint() -> BoxedStrategy<String> {
    prop_oneof![
        1 => safe_uint(),
        3 => json_bad_uint(),
        1 => texts(&["1e400", "01", "00", "-", "", "1 2", "0x10", "1.", "+1"]),
    ]
    .boxed()
}

/// A valid UsageSplit, components in any order.
fn usage_split() -> BoxedStrategy<String> {
    let components = [
        "cache_read",
        "cache_write",
        "fresh_input",
        "output",
        "thinking",
    ];
    (
        Just(components.to_vec()).prop_shuffle(),
        prop::collection::vec((ws(), ws(), ws(), safe_uint(), ws()), 5),
    )
        .prop_map(|(keys, parts)| {
            let members: Vec<String> = keys
                .iter()
                .zip(parts)
                .map(|(k, (a, b, c, v, d))| format!("{a}\"{k}\"{b}:{c}{v}{d}"))
                .collect();
            format!("{{{}}}", members.join(","))
        })
        .boxed()
}

/// Invalid splits (and a valid one now and then); with `g.valid` and no holes, all valid
/// JSON (so a payload carrying one is valid for kinds other than `usage`).
fn bad_usage_split(g: Gen) -> BoxedStrategy<Piece> {
    let bad = if g.valid { json_bad_uint() } else { bad_uint() };
    let mut changes = vec![0u8, 1];
    if !g.plain {
        changes.push(2);
    }
    if !g.valid || g.holes {
        // A repeated component: not valid JSON for the decoder.
        changes.push(3);
    }
    prop_oneof![
        1 => usage_split().prop_map(|s| (s, true)),
        // One component's value replaced.
        3 => (usage_split(), any::<Index>(), bad).prop_map(|(split, i, bad)| {
            let colons: Vec<usize> = split.match_indices(':').map(|(p, _)| p).collect();
            let at = colons[i.index(colons.len())] + 1;
            let end = split[at..].find([',', '}']).map_or(split.len(), |e| at + e);
            (format!("{}{bad}{}", &split[..at], &split[end..]), true)
        }),
        // A component renamed (also by an escape), one more, or one repeated.
        3 => (usage_split(), select(changes)).prop_map(|(split, how)| match how {
            0 => (split.replacen("\"thinking\"", "\"thinkin\"", 1), true),
            1 => (split.replacen('{', "{\"extra\":1,", 1), true),
            2 => (split.replacen("\"cache_read\"", "\"cache_re\\u0061d\"", 1), false),
            _ => (split.replacen('{', "{\"output\":1,", 1), true),
        }),
        1 => texts(&["{}", "[]", "null", "1", "\"usage\"", "{\"output\":1}"]).prop_map(|s| (s, true)),
        1 => json_value(g),
    ]
    .boxed()
}

/// What a payload carries as `usage`.
#[derive(Debug, Clone, Copy)]
enum Usage {
    Absent,
    /// A valid split.
    Split,
    /// Mostly not a valid split (valid JSON when the payload is valid).
    Other,
}

/// A payload object: members from `json_value(g)`, and a `usage` member at a random
/// position.
fn payload(g: Gen, usage: Usage) -> BoxedStrategy<Piece> {
    let split = match usage {
        Usage::Absent => Just(None).boxed(),
        Usage::Split => usage_split().prop_map(|s| Some((s, true))).boxed(),
        Usage::Other => bad_usage_split(g).prop_map(Some).boxed(),
    };
    (
        prop::collection::vec(member(key(g), json_value(g)), 0..8),
        split,
        any::<Index>(),
        ws(),
        ws(),
        ws(),
    )
        .prop_map(move |(members, split, at, a, b, c)| {
            let mut members = if g.valid { dedup(members) } else { members };
            if let Some(split) = split {
                if g.valid {
                    members.retain(|m| decoded_key(&m.1 .0).as_deref() != Some("usage"));
                }
                let at = at.index(members.len() + 1);
                let key = ("\"usage\"".to_owned(), true);
                members.insert(at, (a, key, b, c.clone(), split, c));
            }
            render_object(&members, "")
        })
        .boxed()
}

// ---------------------------------------------------------------------------------------
// Frames

/// One top-level member: key text, value piece, and whitespace around both.
#[derive(Debug, Clone)]
struct Field {
    key: String,
    value: Piece,
    ws: [String; 4],
}

/// A frame as a list of top-level fields, rendered on demand.
#[derive(Debug, Clone)]
struct Frame {
    fields: Vec<Field>,
    lead: String,
    trail: String,
}

const DECLARED: [&str; 7] = [
    "type",
    "schema_version",
    "task_id",
    "seq",
    "kind",
    "attempt",
    "payload",
];

impl Frame {
    fn render(&self) -> String {
        let members: Vec<String> = self
            .fields
            .iter()
            .map(|f| {
                let [a, b, c, d] = &f.ws;
                format!("{a}{}{b}:{c}{}{d}", f.key, f.value.0)
            })
            .collect();
        format!("{}{{{}}}{}", self.lead, members.join(","), self.trail)
    }

    /// In the plain form: only declared keys without escapes, borrowed strings and the
    /// payload plain.
    fn plain(&self) -> bool {
        self.fields.iter().all(|f| {
            let name = f.key.trim_matches('"');
            DECLARED.contains(&name) && f.value.1
        })
    }
}

fn field(key: &str, value: BoxedStrategy<Piece>) -> BoxedStrategy<Field> {
    let key = format!("\"{key}\"");
    (value, ws(), ws(), ws(), ws())
        .prop_map(move |(value, a, b, c, d)| Field {
            key: key.clone(),
            value,
            ws: [a, b, c, d],
        })
        .boxed()
}

/// `kind` values: the text, and whether it decodes to `usage`.
fn kind(plain: bool) -> BoxedStrategy<(Piece, bool)> {
    let quoted = |re: &'static str| re.prop_map(|k| format!("\"{k}\"")).boxed();
    let mut options = vec![
        (3, Just("\"usage\"".to_owned()).boxed()),
        (1, Just("\"state\"".to_owned()).boxed()),
        (1, Just("\"\"".to_owned()).boxed()),
        (1, quoted("[a-z_.]{1,12}")),
        (1, quoted("[a-z\u{e9}\u{1f600}\u{7f}]{1,6}")),
    ];
    if !plain {
        // Escaped spellings, one of them of `usage`.
        options.push((1, Just("\"us\\u0061ge\"".to_owned()).boxed()));
        options.push((1, string(true)));
    }
    union(options)
        .prop_map(|text| {
            let usage = decoded_key(&text).as_deref() == Some("usage");
            (str_piece(text), usage)
        })
        .boxed()
}

/// Frames; with `valid`, all accepted by `decode_str(frame, true)` (once their holes are
/// filled with valid values). Four in five are generated in the plain form.
fn frame(valid: bool, holes: bool) -> BoxedStrategy<Frame> {
    (prop::bool::weighted(0.8), kind(true), kind(false))
        .prop_flat_map(move |(plain, plain_kind, any_kind)| {
            let g = Gen {
                valid,
                plain,
                holes,
            };
            let (kind, is_usage) = if plain { plain_kind } else { any_kind };
            let mut type_options = vec![(9, Just("\"task.progress\"".to_owned()).boxed())];
            let quoted = |re: &'static str| re.prop_map(|k| format!("\"{k}\"")).boxed();
            let mut task_id_options = vec![
                (6, quoted("[A-Za-z0-9._:-]{1,24}")),
                (1, quoted("[a-z\u{e9}\u{4e2d}\u{1f600}]{1,6}")),
            ];
            if !plain {
                type_options.push((1, Just("\"task\\u002eprogress\"".to_owned()).boxed()));
                task_id_options.push((
                    2,
                    prop::collection::vec(string_piece(), 1..4)
                        .prop_map(|p| format!("\"{}\"", p.concat()))
                        .boxed(),
                ));
            }
            let uint = || safe_uint().prop_map(|n| (n, true)).boxed();
            (
                any::<bool>(),
                0u8..3,
                prop::bool::weighted(if plain { 0.0 } else { 0.5 }),
            )
                .prop_flat_map(move |(with_attempt, u, extra)| {
                    // Kind usage needs a valid split (in frames that must be valid); other
                    // kinds may carry anything as `usage`: a valid split, mostly not one,
                    // or none.
                    let strict = valid && !holes;
                    let usage = match (u, is_usage) {
                        (0, _) => Usage::Split,
                        (_, true) if strict => Usage::Split,
                        (1, _) | (_, true) => Usage::Other,
                        (_, false) => Usage::Absent,
                    };
                    let mut fields = vec![
                        field(
                            "type",
                            union(type_options.clone()).prop_map(str_piece).boxed(),
                        ),
                        field("schema_version", Just(("1".to_owned(), true)).boxed()),
                        field(
                            "task_id",
                            union(task_id_options.clone()).prop_map(str_piece).boxed(),
                        ),
                        field("seq", uint()),
                        field("kind", Just(kind.clone()).boxed()),
                        field("payload", payload(g, usage)),
                    ];
                    if with_attempt {
                        fields.push(field("attempt", uint()));
                    }
                    // An unknown top-level field: valid, but not plain.
                    if extra {
                        fields.push(field("x_trace", json_value(PLAIN)));
                    }
                    (Just(fields).prop_shuffle(), ws(), ws())
                })
        })
        .prop_flat_map(|(fields, lead, trail)| (fields, Just(lead), Just(trail)))
        .prop_map(|(fields, lead, trail)| Frame {
            fields,
            lead,
            trail,
        })
        .boxed()
}

/// One thing wrong (mostly) in a value: a bad number or string, a duplicate key at some
/// depth, broken syntax; and some near misses that are valid.
fn evil() -> BoxedStrategy<Piece> {
    prop_oneof![
        2 => number(Gen { valid: false, ..PLAIN }),
        3 => one_bad_string().prop_map(|s| (s, true)),
        2 => texts(&[
            r#"{"k":1,"k":2}"#,
            r#"[{"a":{"b":1,"b":[2]}}]"#,
            r#"{"a":[{"x":1},{"x":1,"y":{"z":null,"z":null}}]}"#,
            r#"{"":1,"":2}"#,
            "{\"\u{e9}\":1,\"\u{e9}\":2}",
            r#"{"a":1,"b":2,"c":3,"a":4}"#,
            r#"[[[{"d":1,"d":1}]]]"#,
            r#"{"usage":1,"usage":1}"#,
            // Near misses, valid.
            r#"{"a":1,"A":2}"#,
            r#"{"ab":1,"a":2,"b":3,"ba":4}"#,
            r#"{"a":1,"a ":2}"#,
            "{\"\u{e9}\":1,\"e\":2}",
            r#"[{"a":1},{"a":1}]"#,
            r#"{"a":{"a":{"a":1}}}"#,
        ])
        .prop_map(|s| (s, true)),
        1 => texts(&[
            "", "nul", "tru", "True", "undefined", "[1,]", "{\"a\":1,}", "{\"a\" 1}", "[1 2]",
            "{,}", "{1:2}", "[", "{", "]", "\"abc", "'a'", "{\"a\":1}}", "[]]", "+1", "[,1]",
            "{\"a\"}", "{\"a\":}", "\u{a0}1", "\u{feff}1", "1\u{0}",
        ])
        .prop_map(|s| (s, true)),
        1 => json_value(Gen { valid: false, ..PLAIN }),
    ]
    .boxed()
}

/// Replace one of the holes in `text` with `evil`, the others with `0`; whether the result
/// is still plain (`plain` and, when there was a hole, `evil` plain).
fn fill_holes(text: &str, plain: bool, at: Index, evil: &Piece) -> (String, bool) {
    let holes = text.matches(HOLE).count();
    if holes == 0 {
        return (text.to_owned(), plain);
    }
    let chosen = at.index(holes);
    let mut out = String::with_capacity(text.len());
    for (i, part) in text.split(HOLE).enumerate() {
        if i > 0 {
            out.push_str(if i - 1 == chosen { &evil.0 } else { "0" });
        }
        out.push_str(part);
    }
    (out, plain && evil.1)
}

/// A structural change to a frame's top level.
#[derive(Debug, Clone)]
enum Change {
    /// Replace the value of the named field (when present) with this text.
    Set(&'static str, String),
    /// Replace any field's value with this text.
    Value(Index, String),
    /// Drop a field.
    Drop(Index),
    /// Repeat a field (at the end).
    Repeat(Index),
    /// Rename a field (to a key of another message, or a near miss).
    Rename(Index, String),
}

/// Values a string field (`type`, `task_id`, `kind`) must reject, and a few it accepts.
fn bad_str_field() -> BoxedStrategy<String> {
    prop_oneof![
        1 => Just("\"\"".to_owned()),
        3 => texts(&[
            "1", "null", "true", "[]", "{}", "\"task.report\"", "\"task.progress \"",
            "\"Task.progress\"", "\"hello\"", "\"a\\x\"", "\"\\ud800\"", "\"a\u{1}\"", "\"a",
            "\"usage\"", "\"task.progress\"", "\"t\"",
        ]),
        1 => one_bad_string(),
    ]
    .boxed()
}

fn change() -> BoxedStrategy<Change> {
    let i = any::<Index>;
    prop_oneof![
        4 => (select(vec!["seq", "attempt", "schema_version"]), bad_uint())
            .prop_map(|(k, v)| Change::Set(k, v)),
        4 => (select(vec!["type", "task_id", "kind"]), bad_str_field())
            .prop_map(|(k, v)| Change::Set(k, v)),
        1 => texts(&["[]", "null", "\"x\"", "1", "{", "{}", "{\"usage\":{}}", "{\"a\":1,\"a\":2}"])
            .prop_map(|v| Change::Set("payload", v)),
        1 => (i(), prop_oneof![bad_uint(), bad_str_field()]).prop_map(|(i, v)| Change::Value(i, v)),
        1 => i().prop_map(Change::Drop),
        1 => i().prop_map(Change::Repeat),
        1 => (i(), select(vec!["role", "reason", "types", "Seq", "payload ", "\\u0074ype", ""]))
            .prop_map(|(i, k)| Change::Rename(i, k.to_owned())),
    ]
    .boxed()
}

fn apply_changes(mut frame: Frame, changes: &[Change]) -> Frame {
    for c in changes {
        let n = frame.fields.len();
        if n == 0 {
            break;
        }
        match c {
            Change::Set(key, v) => {
                let key = format!("\"{key}\"");
                if let Some(f) = frame.fields.iter_mut().find(|f| f.key == key) {
                    f.value = str_piece(v.clone());
                }
            }
            Change::Value(i, v) => frame.fields[i.index(n)].value = str_piece(v.clone()),
            Change::Drop(i) => {
                frame.fields.remove(i.index(n));
            }
            Change::Repeat(i) => {
                let f = frame.fields[i.index(n)].clone();
                frame.fields.push(f);
            }
            Change::Rename(i, k) => frame.fields[i.index(n)].key = format!("\"{k}\""),
        }
    }
    frame
}

// Character-level mutations.

/// Characters a mutation inserts or substitutes.
const INTERESTING: &[char] = &[
    ',',
    '}',
    '{',
    ']',
    '[',
    '"',
    '\\',
    ':',
    ' ',
    '\n',
    '0',
    '1',
    '9',
    '-',
    '+',
    '.',
    'e',
    'u',
    'd',
    'n',
    't',
    'f',
    'a',
    '\u{0}',
    '\u{1}',
    '\u{1f}',
    '\u{7f}',
    '\u{a0}',
    '\u{e9}',
    '\u{feff}',
    '\u{1f600}',
];

#[derive(Debug, Clone)]
enum Mutation {
    Replace(Index, Index),
    Insert(Index, Index),
    Delete(Index),
    Truncate(Index),
    /// Append a character (trailing garbage).
    Append(Index),
    /// Copy a slice of the text to another place (duplicates keys and members).
    Splice(Index, Index, Index),
}

fn mutation() -> BoxedStrategy<Mutation> {
    let i = any::<Index>;
    prop_oneof![
        3 => (i(), i()).prop_map(|(a, b)| Mutation::Replace(a, b)),
        3 => (i(), i()).prop_map(|(a, b)| Mutation::Insert(a, b)),
        2 => i().prop_map(Mutation::Delete),
        1 => i().prop_map(Mutation::Truncate),
        1 => i().prop_map(Mutation::Append),
        2 => (i(), i(), i()).prop_map(|(a, b, c)| Mutation::Splice(a, b, c)),
    ]
    .boxed()
}

fn mutate(text: &str, mutations: &[Mutation]) -> String {
    let mut chars: Vec<char> = text.chars().collect();
    for m in mutations {
        let n = chars.len();
        match m {
            Mutation::Replace(at, c) if n > 0 => chars[at.index(n)] = *c.get(INTERESTING),
            Mutation::Insert(at, c) => chars.insert(at.index(n + 1), *c.get(INTERESTING)),
            Mutation::Delete(at) if n > 0 => {
                chars.remove(at.index(n));
            }
            Mutation::Truncate(at) => chars.truncate(at.index(n + 1)),
            Mutation::Append(c) => chars.push(*c.get(INTERESTING)),
            Mutation::Splice(from, len, to) if n > 0 => {
                let start = from.index(n);
                let end = start + len.index(n - start + 1).min(40);
                let piece: Vec<char> = chars[start..end].to_vec();
                let to = to.index(n + 1);
                chars.splice(to..to, piece);
            }
            _ => {}
        }
    }
    chars.into_iter().collect()
}

const BENCH_FRAME: &str = concat!(
    r#"{"schema_version":1,"type":"task.progress","task_id":"T-2026-11-30-0042","seq":1842,"kind":"usage","attempt":3,"#,
    r#""payload":{"usage":{"cache_read":1843200,"cache_write":40960,"fresh_input":5120,"output":20480,"thinking":8192},"#,
    r#""model":"claude-sonnet-4-5","call_id":"call_01JDX4R8Q7","turn":17}}"#
);

/// Bounds on shrinking after a failure: frames are large trees, and proptest walks back
/// through the nested `prop_flat_map`s of [`frame`] by regenerating them, which without a
/// bound on regenerations can take hours.
const SHRINK_ITERS: u32 = 2000;
const SHRINK_MILLIS: u32 = 20_000;
const SHRINK_REGENS: u32 = 2000;

/// Cases of the property over valid frames.
const VALID_CASES: u32 = 2000;

/// Valid frames: all decode; every plain one is accepted with equal fields, and most are
/// plain.
#[test]
fn valid_frames_are_accepted_with_equal_fields() {
    let mut runner = TestRunner::new(Config {
        cases: VALID_CASES,
        failure_persistence: None,
        max_shrink_iters: SHRINK_ITERS,
        max_shrink_time: SHRINK_MILLIS,
        max_flat_map_regens: SHRINK_REGENS,
        ..Config::default()
    });
    let (plain, accepted) = (Cell::new(0u32), Cell::new(0u32));
    runner
        .run(&frame(true, false), |f| {
            let text = f.render();
            if let Err(e) = decode_str(&text, true) {
                return Err(TestCaseError::fail(format!(
                    "generator made an invalid frame {text:?}: {e}"
                )));
            }
            let is_plain = f.plain();
            let ok = check(&text, is_plain)?;
            plain.set(plain.get() + u32::from(is_plain));
            accepted.set(accepted.get() + u32::from(ok));
            Ok(())
        })
        .unwrap();
    // Every plain frame was accepted (checked per case); and they are the bulk.
    assert!(
        accepted.get() >= plain.get() && plain.get() * 2 >= VALID_CASES,
        "only {} of {VALID_CASES} valid frames accepted ({} plain)",
        accepted.get(),
        plain.get()
    );
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 2000,
        max_shrink_iters: SHRINK_ITERS,
        max_shrink_time: SHRINK_MILLIS,
        max_flat_map_regens: SHRINK_REGENS,
        ..ProptestConfig::default()
    })]

    /// Valid frames with one to three top-level changes: bad values for every field,
    /// missing, repeated, renamed and unknown fields. Equal judgement whenever the frame
    /// is plain.
    #[test]
    fn frames_with_bad_fields_are_judged_like_decode_str(
        f in frame(true, false),
        changes in prop::collection::vec(change(), 1..4),
    ) {
        let f = apply_changes(f, &changes);
        check(&f.render(), f.plain())?;
    }

    /// Valid frames with exactly one bad value in a random place of the payload (a bad
    /// number or string, a duplicate key at some depth, broken syntax, a near miss), and
    /// for kind `usage` possibly an invalid split. Equal judgement whenever the frame is
    /// plain.
    #[test]
    fn frames_with_a_bad_payload_value_are_judged_like_decode_str(
        f in frame(true, true), at in any::<Index>(), evil in evil(),
    ) {
        let (text, plain) = fill_holes(&f.render(), f.plain(), at, &evil);
        check(&text, plain)?;
    }

    /// Frames with many errors anywhere (payloads from the invalid generators, invalid
    /// splits, bad fields). Equal judgement whenever the frame is plain.
    #[test]
    fn densely_broken_frames_are_judged_like_decode_str(
        f in frame(false, false), changes in prop::collection::vec(change(), 0..3),
    ) {
        let f = apply_changes(f, &changes);
        check(&f.render(), f.plain())?;
    }

    /// Character-level mutations of valid frames: the fast path never accepts what the
    /// full decode rejects.
    #[test]
    fn mutated_frames_are_never_wrongly_accepted(
        f in prop_oneof![4 => frame(true, false).prop_map(|f| f.render()), 1 => Just(BENCH_FRAME.to_owned())],
        mutations in prop::collection::vec(mutation(), 1..4)
    ) {
        check(&mutate(&f, &mutations), false)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 500,
        max_shrink_iters: SHRINK_ITERS,
        max_shrink_time: SHRINK_MILLIS,
        max_flat_map_regens: SHRINK_REGENS,
        ..ProptestConfig::default()
    })]

    /// Nesting around serde_json's limit of 127 containers (the frame's object and the
    /// payload included).
    #[test]
    fn nesting_around_the_limit_is_judged_like_decode_str(
        depth in 118usize..132, shape in 0u8..4, dup in any::<bool>(),
        inner in json_value(Gen { valid: false, ..PLAIN }),
        attempt_first in any::<bool>()
    ) {
        let inner = if dup { (r#"{"k":1,"k":2}"#.to_owned(), true) } else { inner };
        let (open, close) = match shape {
            0 => ("[".repeat(depth), "]".repeat(depth)),
            1 => (r#"{"a":"#.repeat(depth), "}".repeat(depth)),
            2 => (r#"[{"a":"#.repeat(depth / 2), "}]".repeat(depth / 2)),
            _ => (r#"[1,{"b":2,"a":"#.repeat(depth / 2), "}]".repeat(depth / 2)),
        };
        let payload = format!(r#"{{"x":{open}{}{close},"y":1}}"#, inner.0);
        let head = if attempt_first { r#""attempt":2,"# } else { "" };
        let frame = format!(
            r#"{{{head}"type":"task.progress","schema_version":1,"task_id":"T","seq":1,"kind":"k","payload":{payload}}}"#
        );
        check(&frame, inner.1)?;
    }
}

#[test]
fn edge_cases_are_judged_like_decode_str() {
    let frame = |payload: &str| {
        format!(
            r#"{{"schema_version":1,"type":"task.progress","task_id":"T","seq":1,"kind":"k","payload":{payload}}}"#
        )
    };
    let usage_frame = |usage: &str| {
        format!(
            r#"{{"schema_version":1,"type":"task.progress","task_id":"T","seq":1,"kind":"usage","payload":{{"usage":{usage}}}}}"#
        )
    };
    let split = r#"{"cache_read":1,"cache_write":2,"fresh_input":3,"output":4,"thinking":5}"#;
    // (frame, the fast path must accept it)
    let mut cases: Vec<(String, bool)> = vec![
        (BENCH_FRAME.to_owned(), true),
        (format!(" \t\n\r{BENCH_FRAME}\r\n\t "), true),
        (format!("{BENCH_FRAME}x"), false),
        (format!("{BENCH_FRAME}{{}}"), false),
        (format!("\u{feff}{BENCH_FRAME}"), false),
        (format!("{BENCH_FRAME}\u{0}"), false),
        (frame("{}"), true),
        (frame("[]"), false),
        (frame("null"), false),
        (frame(r#"{"a":1,"a":2}"#), false),
        (frame(r#"{"a":[{"b":1,"c":{"d":1,"d":1}}]}"#), false),
        (frame(r#"{"a":[{"b":1,"c":{"d":1,"e":1}}]}"#), true),
        (frame(r#"{"a":1,"\u0061":2}"#), false),
        (frame(r#"{"s":"\ud83d\ude00\u00e9\n\"\\\/\b\f\r\t"}"#), true),
        (frame(r#"{"s":"\ud800"}"#), false),
        (frame(r#"{"s":"\udc00"}"#), false),
        (frame(r#"{"s":"\ud800\u0041"}"#), false),
        (frame(r#"{"s":"\x"}"#), false),
        (frame("{\"s\":\"a\u{1}\"}"), false),
        (frame("{\"s\":\"a\u{7f}\"}"), true),
        (frame(r#"{"n":1e400}"#), false),
        (frame(r#"{"n":-1e400}"#), false),
        (frame(r#"{"n":1.7976931348623157e308}"#), true),
        (frame(r#"{"n":1.7976931348623159e308}"#), false),
        (frame(r#"{"n":1e-400}"#), true),
        (frame(r#"{"n":-0}"#), true),
        (frame(r#"{"n":01}"#), false),
        (frame(r#"{"n":1.}"#), false),
        (frame(r#"{"n":-}"#), false),
        (frame(r#"{"n":18446744073709551616}"#), true),
        (frame(&format!(r#"{{"n":{}}}"#, "9".repeat(308))), true),
        (frame(&format!(r#"{{"n":{}}}"#, "9".repeat(309))), false),
        (frame(r#"{"usage":5}"#), true),
        (frame(r#"{"usage":{"output":-1}}"#), true),
        (usage_frame(split), true),
        (usage_frame(&split.replace("5}", "9007199254740991}")), true),
        (
            usage_frame(&split.replace("5}", "9007199254740992}")),
            false,
        ),
        (usage_frame(&split.replace("5}", "-5}")), false),
        (usage_frame(&split.replace("5}", "5.0}")), false),
        (usage_frame(&split.replace("5}", "null}")), false),
        (usage_frame(&split.replace(",\"thinking\":5", "")), false),
        (usage_frame(&split.replace("5}", "5,\"x\":1}")), false),
        (usage_frame(&split.replace("5}", "5,\"output\":1}")), false),
        (usage_frame("{}"), false),
    ];
    for (field, good) in [
        ("1", true),
        ("0", true),
        ("9007199254740991", true),
        ("9007199254740992", false),
        ("-1", false),
        ("-0", false),
        ("1.0", false),
        ("1e0", false),
        ("null", false),
        ("\"1\"", false),
        ("01", false),
    ] {
        cases.push((
            BENCH_FRAME.replace("\"attempt\":3", &format!("\"attempt\":{field}")),
            good,
        ));
        cases.push((
            BENCH_FRAME.replace("\"seq\":1842", &format!("\"seq\":{field}")),
            good,
        ));
        cases.push((
            BENCH_FRAME.replace(
                "\"schema_version\":1",
                &format!("\"schema_version\":{field}"),
            ),
            field == "1",
        ));
    }
    cases.push((BENCH_FRAME.replace("\"attempt\":3,", ""), true));
    cases.push((BENCH_FRAME.replace("\"seq\":1842,", ""), false));
    cases.push((BENCH_FRAME.replace("\"T-2026-11-30-0042\"", "\"\""), false));
    cases.push((BENCH_FRAME.replace("\"attempt\":3", "\"extra\":3"), false));
    cases.push((
        BENCH_FRAME.replace("\"attempt\":3", "\"kind\":\"usage\""),
        false,
    ));
    for (text, good) in cases {
        let accepted = check(&text, good).unwrap_or_else(|e| panic!("{text:?}: {e}"));
        assert_eq!(accepted, good, "{text:?}");
    }
}

/// Whether every number in `v` is an integer of magnitude at most 2^53 - 1.
fn f64_exact(v: &serde_json::Value) -> bool {
    const MAX: u64 = (1 << 53) - 1;
    match v {
        serde_json::Value::Number(n) => n
            .as_i64()
            .map(|i| i.unsigned_abs() <= MAX)
            .or_else(|| n.as_u64().map(|u| u <= MAX))
            .unwrap_or(false),
        serde_json::Value::Array(a) => a.iter().all(f64_exact),
        serde_json::Value::Object(o) => o.values().all(f64_exact),
        _ => true,
    }
}

#[test]
fn payload_f64_exact_flags_what_a_double_cannot_hold_or_rewrites() {
    let frame = |payload: &str| {
        format!(
            r#"{{"schema_version":1,"type":"task.progress","task_id":"T","seq":1,"kind":"k","payload":{payload}}}"#
        )
    };
    for (payload, exact) in [
        (
            r#"{"a":1,"b":[-2,{"c":999999999999999}],"d":"1.5e3"}"#,
            true,
        ),
        (r#"{"a":1000000000000000}"#, false), // conservative: 16 digits
        (
            r#"{"usage":{"cache_read":0,"cache_write":0,"fresh_input":0,"output":0,"thinking":9007199254740991}}"#,
            true,
        ),
        (r#"{"a":9007199254740993}"#, false),
        (r#"{"a":1.0}"#, false),
        (r#"{"a":1e5}"#, false),
        (r#"{"a":-0}"#, false),
        (r#"{"a":0.5}"#, false),
    ] {
        let text = frame(payload);
        let view = peek_progress(&text).unwrap();
        assert_eq!(view.payload_f64_exact, exact, "{payload}");
    }
}
