//! The JSON bodies of the live API: a start (`{"script": NAME}`) and the four actions
//! (see the module docs' table), read strictly: a JSON object, the documented keys only.

use serde_json::{json, Map, Value};

use super::{Refusal, MAX_NAME_CHARS};
use crate::local::CommandType;

/// The JSON object of a body, or `invalid_json` (not UTF-8, not JSON, not an object, a
/// repeated key).
fn object(body: &[u8]) -> Result<Map<String, Value>, Refusal> {
    match crate::local::parse_json(body) {
        Ok(Value::Object(map)) => Ok(map),
        _ => Err(Refusal::InvalidJson),
    }
}

/// A string of 1..=[`MAX_NAME_CHARS`] characters.
fn name(v: Option<&Value>) -> Option<&str> {
    v.and_then(Value::as_str)
        .filter(|s| !s.is_empty() && s.chars().count() <= MAX_NAME_CHARS)
}

/// `true` for a script name any server may offer when it lists none: 1..=160 characters
/// of `A-Z a-z 0-9 . _ -` (never a path).
fn plain_script_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= MAX_NAME_CHARS
        && s != "."
        && s != ".."
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// The script a start body names: `{"script": NAME}` and nothing else. With `offered`
/// non-empty the name must be one of them; otherwise any plain name (see
/// [`AdmissionConfig::scripts`](super::AdmissionConfig::scripts)).
///
/// # Errors
/// `invalid_json`; `unknown_script` (no `script` string, another key, or a name not
/// offered).
pub fn parse_start(body: &[u8], offered: &[String]) -> Result<String, Refusal> {
    let map = object(body)?;
    if map.keys().any(|k| k != "script") {
        return Err(Refusal::UnknownScript);
    }
    let script = map
        .get("script")
        .and_then(Value::as_str)
        .ok_or(Refusal::UnknownScript)?;
    let known = if offered.is_empty() {
        plain_script_name(script)
    } else {
        offered.iter().any(|s| s == script)
    };
    if known {
        Ok(script.to_owned())
    } else {
        Err(Refusal::UnknownScript)
    }
}

/// The controller command an action body asks for: its type and payload (see the module
/// docs' table).
///
/// # Errors
/// `invalid_json`; `invalid_action` (an unknown `type`, a missing or malformed field, an
/// unknown key).
pub fn parse_action(body: &[u8]) -> Result<(CommandType, Map<String, Value>), Refusal> {
    let map = object(body)?;
    let only = |keys: &[&str]| -> Result<(), Refusal> {
        if map.keys().all(|k| keys.contains(&k.as_str())) {
            Ok(())
        } else {
            Err(Refusal::InvalidAction)
        }
    };
    let field = |k: &str| name(map.get(k)).ok_or(Refusal::InvalidAction);
    let payload = |v: Value| match v {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    match map.get("type").and_then(Value::as_str) {
        Some("resolve_permission") => {
            only(&["type", "requestId", "choice"])?;
            let (id, choice) = (field("requestId")?, field("choice")?);
            Ok((
                CommandType::RequestResolve,
                payload(json!({"requestId": id, "response": {"choice": choice}})),
            ))
        }
        Some("answer_input") => {
            only(&["type", "requestId", "text"])?;
            let id = field("requestId")?;
            let text = map
                .get("text")
                .and_then(Value::as_str)
                .ok_or(Refusal::InvalidAction)?;
            Ok((
                CommandType::RequestResolve,
                payload(json!({"requestId": id, "response": {"text": text}})),
            ))
        }
        Some("interrupt") => {
            only(&["type", "turnId"])?;
            let p = match map.get("turnId") {
                None => json!({"reason": "operator"}),
                Some(_) => json!({"turnId": field("turnId")?, "reason": "operator"}),
            };
            Ok((CommandType::TurnInterrupt, payload(p)))
        }
        Some("cancel") => {
            only(&["type"])?;
            Ok((
                CommandType::RunCancel,
                payload(json!({"reason": "operator"})),
            ))
        }
        _ => Err(Refusal::InvalidAction),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts() {
        let offered = vec!["happy-path".to_owned()];
        assert_eq!(
            parse_start(br#"{"script":"happy-path"}"#, &offered),
            Ok("happy-path".into())
        );
        assert_eq!(
            parse_start(br#"{"script":"other"}"#, &offered),
            Err(Refusal::UnknownScript)
        );
        assert_eq!(
            parse_start(br#"{"script":"../etc/passwd"}"#, &[]),
            Err(Refusal::UnknownScript)
        );
        assert_eq!(parse_start(b"[]", &[]), Err(Refusal::InvalidJson));
        assert_eq!(
            parse_start(br#"{"script":"a","script":"b"}"#, &[]),
            Err(Refusal::InvalidJson)
        );
        assert_eq!(parse_start(b"\xff", &[]), Err(Refusal::InvalidJson));
    }

    #[test]
    fn actions() {
        let (t, p) = parse_action(br#"{"type":"interrupt"}"#).unwrap();
        assert_eq!(t, CommandType::TurnInterrupt);
        assert_eq!(Value::Object(p), json!({"reason": "operator"}));
        assert_eq!(
            parse_action(br#"{"type":"cancel","x":1}"#),
            Err(Refusal::InvalidAction)
        );
        assert_eq!(
            parse_action(br#"{"type":"answer_input","requestId":"r"}"#),
            Err(Refusal::InvalidAction)
        );
    }
}
