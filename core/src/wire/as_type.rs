//! Checking a value against one named message type ([`check_as`]), the nesting limit an
//! encodable message keeps ([`check_depth`], [`try_encode`]), and the schema manifest
//! ([`SCHEMA_FILES`]).

use super::codec::{encode, from_object, to_object};
use super::error::{DecodeError, Rule, Violation};
use super::messages::{Message, MessageType};
use crate::json::{Object, Value, MAX_DEPTH};

/// Wire `type` → file name of its JSON Schema (draft 2020-12), in the seed's order: the
/// manifest a binding ships its schema files by.
pub const SCHEMA_FILES: [(MessageType, &str); 7] = [
    (MessageType::Hello, "hello.v1.json"),
    (MessageType::TaskAssign, "task_assign.v1.json"),
    (MessageType::TaskProgress, "task_progress.v1.json"),
    (MessageType::TaskReport, "task_report.v1.json"),
    (MessageType::TaskCancel, "task_cancel.v1.json"),
    (MessageType::Ping, "ping.v1.json"),
    (MessageType::Pong, "pong.v1.json"),
];

impl MessageType {
    /// The file name of this type's JSON Schema (see [`SCHEMA_FILES`]).
    pub fn schema_file(self) -> &'static str {
        SCHEMA_FILES
            .iter()
            .find(|(t, _)| *t == self)
            .map_or("", |(_, f)| f)
    }
}

/// Whether the message named `name` on the wire belongs to a per-task sequence; `false`
/// for a name that is not one of the seven types.
pub fn is_sequenced_name(name: &str) -> bool {
    MessageType::from_wire(name).is_some_and(MessageType::is_sequenced)
}

/// Check `value` against every rule of message type `mt` (the `validate` functions of
/// the bindings) and build the message.
///
/// The object's `type` must be `mt`'s name, as the message's JSON Schema requires: an
/// absent `type` is a [`Rule::Required`] violation at `type`, any other value a
/// [`Rule::Const`] violation there, each reported with the violations of the rest of
/// the object checked as `mt`. `schema_version` must be present and 1, as in any
/// validating decode. A non-object is [`DecodeError::NotObject`].
///
/// # Errors
/// [`DecodeError`] with the codes of [`decode`](super::decode).
pub fn check_as(value: Value, mt: MessageType) -> Result<Message, DecodeError> {
    let mut object = match value {
        Value::Object(o) => o,
        other => {
            return Err(DecodeError::NotObject {
                found: other.type_name(),
            })
        }
    };
    let violation = match object.get("type") {
        None => Some(Violation::new(
            "type",
            Rule::Required,
            format!("required: the object must say it is a {:?}", mt.as_str()),
        )),
        Some(Value::String(s)) if s.as_str() == mt.as_str() => None,
        Some(_) => Some(Violation::new(
            "type",
            Rule::Const,
            format!("must be {:?} to be checked as that type", mt.as_str()),
        )),
    };
    object.insert("type", mt.as_str());
    let result = from_object(object, true);
    let Some(violation) = violation else {
        return result;
    };
    let mut violations = match result {
        Ok(_) => Vec::new(),
        Err(DecodeError::Schema { violations }) => violations,
        Err(other) => return Err(other),
    };
    violations.push(violation);
    violations.sort();
    Err(DecodeError::Schema { violations })
}

/// [`check_as`] for a message already built: its own type must be `mt` (else the
/// violation [`check_as`] reports), and it must satisfy every rule of that type.
///
/// # Errors
/// As [`check_as`].
pub fn check_message_as(msg: &Message, mt: MessageType) -> Result<(), DecodeError> {
    if msg.message_type() == mt {
        return msg.validate().map_err(DecodeError::from);
    }
    check_as(Value::Object(to_object(msg)), mt).map(|_| ())
}

/// `true` when `value` nests arrays and objects deeper than `limit` levels (a scalar is
/// 0 levels, `[]` one). Stops descending at the limit, so the stack stays bounded.
fn deeper_than(value: &Value, limit: usize) -> bool {
    match value {
        Value::Array(items) => match limit.checked_sub(1) {
            None => true,
            Some(rest) => items.iter().any(|v| deeper_than(v, rest)),
        },
        Value::Object(o) => object_deeper_than(o, limit),
        _ => false,
    }
}

fn object_deeper_than(object: &Object, limit: usize) -> bool {
    match limit.checked_sub(1) {
        None => true,
        Some(rest) => object.iter().any(|(_, v)| deeper_than(v, rest)),
    }
}

/// Refuse an object whose frame would nest deeper than [`MAX_DEPTH`], the deepest the
/// decoder reads (the frame's own object is the first level).
pub(crate) fn check_object_depth(object: &Object) -> Result<(), DecodeError> {
    if object_deeper_than(object, MAX_DEPTH) {
        return Err(DecodeError::too_deep());
    }
    Ok(())
}

/// Refuse a message whose frame would nest arrays and objects deeper than
/// [`MAX_DEPTH`] levels (the frame's own object counting as the first), so no binding
/// sends a frame the decoder refuses. The error is the decoder's for such a frame,
/// `not_json`.
///
/// # Errors
/// [`DecodeError::NotJson`] naming the limit.
pub fn check_depth(msg: &Message) -> Result<(), DecodeError> {
    let limit = MAX_DEPTH.saturating_sub(1);
    let too_deep = match msg {
        Message::Hello(m) => object_deeper_than(&m.extra, MAX_DEPTH),
        Message::TaskAssign(m) => {
            object_deeper_than(&m.task, limit)
                || object_deeper_than(&m.invocation, limit)
                || object_deeper_than(&m.extra, MAX_DEPTH)
        }
        Message::TaskProgress(m) => {
            object_deeper_than(&m.payload, limit) || object_deeper_than(&m.extra, MAX_DEPTH)
        }
        Message::TaskReport(m) => {
            object_deeper_than(&m.report, limit) || object_deeper_than(&m.extra, MAX_DEPTH)
        }
        Message::TaskCancel(m) => object_deeper_than(&m.extra, MAX_DEPTH),
        Message::Ping(m) => object_deeper_than(&m.extra, MAX_DEPTH),
        Message::Pong(m) => object_deeper_than(&m.extra, MAX_DEPTH),
    };
    if too_deep {
        return Err(DecodeError::too_deep());
    }
    Ok(())
}

/// [`encode`], refusing a message [`check_depth`] refuses: every frame it returns
/// decodes.
///
/// # Errors
/// As [`check_depth`].
pub fn try_encode(msg: &Message) -> Result<String, DecodeError> {
    check_depth(msg)?;
    Ok(encode(msg))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{decode_str, Ping, TaskProgress};

    fn nested(depth: usize) -> Value {
        let mut v = Value::Array(Vec::new());
        for _ in 1..depth {
            v = Value::Array(vec![v]);
        }
        v
    }

    /// Oracle: the decoder. Whatever `try_encode` returns decodes, and whatever it refuses
    /// the decoder refuses too, for nesting in `extra` and in `payload` around the limit.
    #[test]
    fn try_encode_agrees_with_the_decoder() {
        for depth in 120..132 {
            let mut ping = Ping::new(None);
            ping.extra.insert("x", nested(depth));
            let mut progress = TaskProgress::new("T", "state", Object::new());
            progress.payload.insert("x", nested(depth));
            for msg in [Message::Ping(ping), Message::TaskProgress(progress)] {
                let text = encode(&msg);
                match (try_encode(&msg), decode_str(&text, false)) {
                    (Ok(frame), Ok(back)) => {
                        assert_eq!(frame, text);
                        assert_eq!(back, msg);
                    }
                    (Err(e), Err(d)) => assert_eq!((e.code(), d.code()), ("not_json", "not_json")),
                    (e, d) => panic!("depth {depth}: try_encode {e:?}, decode {d:?}"),
                }
            }
        }
    }

    #[test]
    fn check_as_reports_another_type_and_keeps_the_other_violations() {
        let frame =
            r#"{"schema_version":1,"type":"task.cancel","task_id":"T","reason":"r","seq":1}"#;
        let Ok(Value::Object(o)) = crate::wire::parse_value(frame.as_bytes()).map(Value::from)
        else {
            panic!("test frame");
        };
        assert!(check_as(Value::Object(o.clone()), MessageType::TaskCancel).is_ok());
        let e = check_as(Value::Object(o), MessageType::TaskProgress).unwrap_err();
        let at: Vec<_> = e
            .violations()
            .iter()
            .map(|v| (v.location.as_str(), v.rule))
            .collect();
        assert_eq!(
            at,
            [
                ("kind", Rule::Required),
                ("payload", Rule::Required),
                ("type", Rule::Const)
            ]
        );
        let cancel = decode_str(frame, true).unwrap();
        assert!(check_message_as(&cancel, MessageType::TaskCancel).is_ok());
        assert_eq!(
            check_message_as(&cancel, MessageType::TaskProgress)
                .unwrap_err()
                .code(),
            "schema_violation"
        );
    }

    #[test]
    fn manifest_names_every_type_once() {
        for t in MessageType::ALL {
            assert_eq!(SCHEMA_FILES.iter().filter(|(s, _)| *s == t).count(), 1);
            assert!(t.schema_file().ends_with(".v1.json"));
        }
        assert!(is_sequenced_name("task.progress") && !is_sequenced_name("ping"));
        assert!(!is_sequenced_name("nope"));
    }
}
