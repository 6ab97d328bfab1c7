//! Property tests of the codec: `decode(encode(m)) == m` for arbitrary messages, and
//! encoding is a fixed point (`encode(decode(encode(m))) == encode(m)`).

use indexmap::IndexMap;
use proptest::prelude::*;
use serde_json::{Map, Number, Value};
use stapel_runner_protocol::wire::*;

const MAX: u64 = MAX_SAFE_INTEGER;

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-zA-Z0-9_.-]{0,12}",
        any::<String>().prop_map(|s| s.chars().take(16).collect()),
        Just("Zürich ☃ \"q\" \\ \n\t\u{1}".to_string()),
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| Number::from_f64(f).map_or(Value::Null, Value::Number)),
        text().prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((text(), inner), 0..4)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

fn object() -> impl Strategy<Value = Map<String, Value>> {
    prop::collection::vec((text(), json_value()), 0..5).prop_map(|kv| kv.into_iter().collect())
}

fn extra(t: MessageType) -> impl Strategy<Value = Map<String, Value>> {
    prop::collection::vec(("x_[a-z]{1,6}|[A-Z][a-z]{0,5}", json_value()), 0..3).prop_map(
        move |kv| {
            kv.into_iter()
                .filter(|(k, _)| !t.keys().contains(&k.as_str()))
                .collect()
        },
    )
}

fn uint() -> impl Strategy<Value = u64> {
    prop_oneof![0..10u64, 0..=MAX]
}

fn nonce() -> impl Strategy<Value = Option<Nonce>> {
    prop_oneof![
        Just(None),
        text().prop_map(|s| Some(Nonce::Text(s))),
        (-(MAX as i64)..=(MAX as i64)).prop_map(|i| Some(Nonce::Integer(i))),
    ]
}

fn message() -> impl Strategy<Value = Message> {
    let hello = (
        uint(),
        text(),
        text(),
        prop::collection::vec(text(), 0..3),
        prop::collection::vec((text(), uint()), 0..3),
        extra(MessageType::Hello),
    )
        .prop_map(|(pv, p, r, caps, resume, extra)| {
            Message::Hello(Hello {
                schema_version: 1,
                protocol_version: pv,
                project_id: p,
                runner_version: r,
                capabilities: caps,
                resume: resume.into_iter().collect::<IndexMap<_, _>>(),
                extra: extra.into(),
            })
        });
    let assign = (
        text(),
        object(),
        text(),
        object(),
        uint(),
        uint(),
        extra(MessageType::TaskAssign),
    )
        .prop_map(|(task_id, task, role, invocation, seq, attempt, extra)| {
            Message::TaskAssign(TaskAssign {
                schema_version: 1,
                task_id,
                task: task.into(),
                role,
                invocation: invocation.into(),
                seq,
                attempt,
                extra: extra.into(),
            })
        });
    let progress = (
        text(),
        uint(),
        text(),
        uint(),
        object(),
        extra(MessageType::TaskProgress),
    )
        .prop_map(|(task_id, seq, kind, attempt, payload, extra)| {
            Message::TaskProgress(TaskProgress {
                schema_version: 1,
                task_id: task_id.into(),
                seq,
                kind: kind.into(),
                attempt,
                payload: stapel_runner_protocol::json::Object::from(payload).into(),
                extra: extra.into(),
            })
        });
    let report = (
        text(),
        object(),
        uint(),
        uint(),
        extra(MessageType::TaskReport),
    )
        .prop_map(|(task_id, report, seq, attempt, extra)| {
            Message::TaskReport(TaskReportMessage {
                schema_version: 1,
                task_id,
                report: report.into(),
                seq,
                attempt,
                extra: extra.into(),
            })
        });
    let cancel = (text(), text(), uint(), extra(MessageType::TaskCancel)).prop_map(
        |(task_id, reason, seq, extra)| {
            Message::TaskCancel(TaskCancel {
                schema_version: 1,
                task_id,
                reason,
                seq,
                extra: extra.into(),
            })
        },
    );
    let sent_at = prop_oneof![
        Just(None),
        text().prop_map(|s| Some(SentAt::Text(s))),
        (0..=MAX).prop_map(|n| Some(SentAt::Number(n.into()))),
        (0.0f64..1e12).prop_map(|f| Number::from_f64(f).map(SentAt::Number)),
    ];
    let ping = (nonce(), sent_at, extra(MessageType::Ping)).prop_map(|(nonce, sent_at, extra)| {
        Message::Ping(Ping {
            schema_version: 1,
            nonce,
            sent_at,
            extra: extra.into(),
        })
    });
    let pong = (nonce(), extra(MessageType::Pong)).prop_map(|(nonce, extra)| {
        Message::Pong(Pong {
            schema_version: 1,
            nonce,
            extra: extra.into(),
        })
    });
    prop_oneof![hello, assign, progress, report, cancel, ping, pong]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn decode_of_encode_is_identity(m in message()) {
        // task_id is derived from task.id / report.task_id only when absent on the wire; the
        // encoder always emits it, so the round trip is exact.
        let frame = encode(&m);
        let back = decode(frame.as_bytes(), false).map_err(|e| TestCaseError::fail(format!("{e}: {frame}")))?;
        prop_assert_eq!(&back, &m);
        prop_assert_eq!(&decode_str(&frame, false).map_err(|e| TestCaseError::fail(e.to_string()))?, &m);
        prop_assert_eq!(encode(&back), frame);
    }

    #[test]
    fn object_form_round_trips(m in message()) {
        let back = from_object(to_object(&m), false).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(back, m);
    }

    #[test]
    fn object_form_is_exactly_the_encoded_form(m in message()) {
        // Same keys in the same order with the same values as the encoded frame.
        let parsed = parse_value(encode(&m).as_bytes()).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let direct = serde_json::Value::Object(to_object(&m).into());
        prop_assert_eq!(serde_json::to_string(&direct).unwrap(), serde_json::to_string(&parsed).unwrap());
    }

    #[test]
    fn decode_never_panics_on_arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..300), validate in any::<bool>()) {
        let _ = decode(&bytes, validate);
    }
}

/// Every too-deep refusal carries one error, whichever parser met it: `parse_value` of a
/// document nested past serde_json's own limit says what `decode` says.
#[test]
fn parse_value_too_deep_is_the_decoders_error() {
    use stapel_runner_protocol::wire::{decode, parse_value, DecodeError};
    let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
    assert_eq!(
        parse_value(deep.as_bytes()).unwrap_err(),
        DecodeError::too_deep()
    );
    let frame = format!(r#"{{"schema_version":1,"type":"ping","x":{deep}}}"#);
    assert_eq!(
        decode(frame.as_bytes(), true).unwrap_err(),
        DecodeError::too_deep()
    );
    assert!(parse_value(b"[[1]]").is_ok());
}
