//! `json::walk` against the wire decoder's strict parser (`wire::parse_value`, serde_json
//! underneath) as the reference: on generated documents the values built by a sink are
//! the reference's, and on mutated text the two accept and reject the same inputs.

use proptest::prelude::*;
use serde_json::{Map, Value};
use stapel_runner_protocol::json::{walk, Sink, WalkError};
use stapel_runner_protocol::wire::parse_value;

/// Builds `serde_json` values; a repeated key is an error, as in the wire decoder.
struct ToSerde;

impl Sink for ToSerde {
    type Value = Value;
    type Object = Map<String, Value>;
    type Array = Vec<Value>;
    type Error = String;

    fn null(&mut self) -> Result<Value, String> {
        Ok(Value::Null)
    }
    fn boolean(&mut self, v: bool) -> Result<Value, String> {
        Ok(Value::Bool(v))
    }
    fn unsigned(&mut self, v: u64) -> Result<Value, String> {
        Ok(v.into())
    }
    fn signed(&mut self, v: i64) -> Result<Value, String> {
        assert!(v < 0, "non-negative integers are unsigned");
        Ok(v.into())
    }
    fn float(&mut self, v: f64) -> Result<Value, String> {
        Ok(serde_json::Number::from_f64(v).expect("finite").into())
    }
    fn string(&mut self, v: &str) -> Result<Value, String> {
        Ok(v.into())
    }
    fn object(&mut self) -> Result<Map<String, Value>, String> {
        Ok(Map::new())
    }
    fn member(&mut self, o: &mut Map<String, Value>, k: &str, v: Value) -> Result<(), String> {
        match o.insert(k.to_owned(), v) {
            None => Ok(()),
            Some(_) => Err(format!("duplicate key {k:?}")),
        }
    }
    fn end_object(&mut self, o: Map<String, Value>) -> Result<Value, String> {
        Ok(Value::Object(o))
    }
    fn array(&mut self) -> Result<Vec<Value>, String> {
        Ok(Vec::new())
    }
    fn item(&mut self, a: &mut Vec<Value>, v: Value) -> Result<(), String> {
        a.push(v);
        Ok(())
    }
    fn end_array(&mut self, a: Vec<Value>) -> Result<Value, String> {
        Ok(Value::Array(a))
    }
}

fn json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<u64>().prop_map(Into::into),
        any::<i64>().prop_map(Into::into),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Into::into),
        "[a-z\u{e9}\"\\\\/\n\t\u{1}\u{1f600}]{0,30}".prop_map(Value::String),
    ];
    leaf.prop_recursive(5, 64, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
            prop::collection::vec(("[a-e\"\\\\\u{e9}]{0,3}", inner), 0..10)
                .prop_map(|members| Value::Object(members.into_iter().collect())),
        ]
    })
}

/// Text of `v` with escapes and whitespace varied: `\u` escapes for some characters,
/// `\/`, whitespace around tokens.
fn spelled(v: &Value, ws: &[u8], pick: &mut usize) -> String {
    let mut next = || {
        *pick = pick.wrapping_mul(31).wrapping_add(7);
        ws[*pick % ws.len()]
    };
    let mut out = String::new();
    fn string(s: &str, out: &mut String, style: u8) {
        out.push('"');
        for c in s.chars() {
            match c {
                '/' if style % 2 == 0 => out.push_str("\\/"),
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                c if (c as u32) < 0x20 || style % 3 == 0 && !c.is_ascii() => {
                    let mut buf = [0u16; 2];
                    for unit in c.encode_utf16(&mut buf) {
                        out.push_str(&format!("\\u{unit:04X}"));
                    }
                }
                c => out.push(c),
            }
        }
        out.push('"');
    }
    fn go(v: &Value, out: &mut String, next: &mut dyn FnMut() -> u8) {
        let pad = |out: &mut String, n: &mut dyn FnMut() -> u8| {
            let b = n();
            if b != b'x' {
                out.push(b as char);
            }
        };
        match v {
            Value::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    pad(out, next);
                    go(item, out, next);
                    pad(out, next);
                }
                out.push(']');
            }
            Value::Object(m) => {
                out.push('{');
                for (i, (k, item)) in m.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    pad(out, next);
                    string(k, out, next());
                    pad(out, next);
                    out.push(':');
                    pad(out, next);
                    go(item, out, next);
                }
                pad(out, next);
                out.push('}');
            }
            Value::String(s) => string(s, out, next()),
            other => out.push_str(&other.to_string()),
        }
    }
    go(v, &mut out, &mut next);
    out
}

fn reference(text: &str) -> Option<Value> {
    parse_value(text.as_bytes()).ok()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn walk_builds_what_the_decoder_parses(v in json(), seed in any::<usize>()) {
        let mut pick = seed;
        let text = spelled(&v, b" \n\t\rxxxx", &mut pick);
        prop_assert_eq!(walk(&text, &mut ToSerde), Ok(v.clone()));
        prop_assert_eq!(reference(&text), Some(v));
    }

    #[test]
    fn walk_accepts_exactly_what_the_decoder_accepts(
        v in json(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), 0u8..4, prop::sample::select(
            vec![b'"', b'\\', b'{', b'}', b'[', b']', b',', b':', b'-', b'.', b'e', b'0', b'9', b'u', b'x', b'a', b'n', b'D', 0x01, b' '])), 1..4),
    ) {
        let mut bytes = serde_json::to_string(&v).unwrap().into_bytes();
        for (at, op, b) in edits {
            if bytes.is_empty() {
                break;
            }
            let i = at.index(bytes.len());
            match op {
                0 => { bytes.remove(i); }
                1 => bytes.insert(i, b),
                2 => bytes[i] = b,
                _ => { let c = bytes[i]; bytes.insert(i, c); }
            }
        }
        let Ok(text) = String::from_utf8(bytes) else { return Ok(()) };
        let ours = walk(&text, &mut ToSerde).ok();
        prop_assert_eq!(ours, reference(&text), "text: {}", text);
    }
}

#[test]
fn numbers_read_as_the_decoder_reads_them() {
    for text in [
        "0",
        "-0",
        "-0.0",
        "1",
        "-1",
        "18446744073709551615",
        "18446744073709551616",
        "-9223372036854775808",
        "-9223372036854775809",
        "1.5",
        "1e5",
        "1E+5",
        "2.5e-3",
        "1e308",
        "1e-400",
        "123456789012345678901234567890",
        "0.1",
        "9007199254740993",
    ] {
        assert_eq!(walk(text, &mut ToSerde).ok(), reference(text), "{text}");
    }
    for bad in [
        "1e400", "-1e400", "01", "1.", ".5", "-", "+1", "1e", "0x1", "NaN", "--1",
    ] {
        assert!(walk(bad, &mut ToSerde).is_err(), "{bad}");
        assert!(reference(bad).is_none(), "{bad}");
    }
}

#[test]
fn strings_and_structure() {
    for (text, ok) in [
        (r#""\ud83d\ude00""#, true),
        (r#""\ud83d""#, false),
        (r#""\ude00""#, false),
        (r#""\ud83d\u0041""#, false),
        (r#""\x""#, false),
        (r#""\a""#, false),
        (r#""\U0041""#, false),
        (r#""\u00G1""#, false),
        ("\"a\u{1}\"", false),
        (r#""\u00e9\/\b\f\n\r\t""#, true),
        (" [ ] ", true),
        ("[1,]", false),
        ("{\"a\":1,}", false),
        ("{\"a\" 1}", false),
        ("[1] x", false),
        ("", false),
        ("\u{a0}1", false),
    ] {
        assert_eq!(walk(text, &mut ToSerde).is_ok(), ok, "{text}");
        assert_eq!(reference(text).is_some(), ok, "{text}");
    }
}

#[test]
fn depth_limit_and_sink_errors() {
    let nested = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
    assert!(walk(&nested(127), &mut ToSerde).is_ok());
    assert!(reference(&nested(127)).is_some());
    assert!(matches!(
        walk(&nested(128), &mut ToSerde),
        Err(WalkError::Syntax { .. })
    ));
    assert!(reference(&nested(128)).is_none());
    assert_eq!(
        walk(r#"{"a":[{"b":1,"b":2}]}"#, &mut ToSerde),
        Err(WalkError::Sink("duplicate key \"b\"".to_owned()))
    );
}
