//! `json::walk` against serde_json (through the wire decoder's strict reader, which also
//! rejects duplicate keys): same accept/reject, and equal values.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::{Map, Value};
use stapel_runner_protocol::json::{walk, Sink};
use stapel_runner_protocol::wire::parse_value;

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
        assert!(v.is_finite(), "floats are finite");
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

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let ours = walk(text, &mut ToSerde).ok();
    let reference = parse_value(text.as_bytes())
        .ok()
        .map(|v| serde_json::to_value(v).expect("value"));
    assert_eq!(ours, reference, "walk and serde_json disagree on {text:?}");
});
