//! The `task.progress` fast path against the non-fast reference `decode_full`: when
//! `peek_progress` accepts a frame, `decode_full(frame, true)` accepts the same message
//! (same task, seq, attempt, kind, no extra fields, the payload is the frame's own text
//! and parses to the decoded payload; when the scanner calls every payload number an
//! exact double, each is an integer within ±(2^53 − 1)), and `decode_str` /
//! `decode_owned` / `decode_str_view` answer as `decode_full` for every frame, with the
//! same encoding.
#![no_main]

use libfuzzer_sys::fuzz_target;
use stapel_runner_protocol::wire::{
    decode_full, decode_owned, decode_str, decode_str_view, encode, peek_progress, Decoded, Message,
};

fuzz_target!(|data: &[u8]| {
    let Ok(frame) = std::str::from_utf8(data) else {
        return;
    };
    if let Some(view) = peek_progress(frame) {
        let Ok(Message::TaskProgress(m)) = decode_full(frame, true) else {
            panic!("fast path accepted a frame the full decode rejects: {frame:?}");
        };
        assert_eq!(view.task_id, m.task_id);
        assert_eq!(view.seq, m.seq);
        assert_eq!(view.attempt, m.attempt);
        assert_eq!(view.kind, m.kind);
        assert!(m.extra.is_empty());
        let start = view.payload.as_ptr() as usize - frame.as_ptr() as usize;
        assert_eq!(&frame[start..start + view.payload.len()], view.payload);
        let payload: serde_json::Value =
            serde_json::from_str(view.payload).expect("payload text is JSON");
        assert_eq!(payload, serde_json::to_value(&m.payload).expect("payload"));
        if view.payload_f64_exact {
            assert!(
                every_number_is_an_exact_double(&payload),
                "payload_f64_exact set for a payload with a number no double holds exactly: {}",
                view.payload
            );
        }
        // A frame the fast path accepts passes every rule: the lax reference agrees.
        assert_eq!(decode_full(frame, false), Ok(Message::TaskProgress(m)));
    }
    for validate in [true, false] {
        let reference = decode_full(frame, validate);
        let via_view = decode_str_view(frame, validate).and_then(Decoded::into_message);
        assert_eq!(via_view, reference, "decode_str_view (validate={validate})");
        assert_eq!(
            decode_str(frame, validate),
            reference,
            "decode_str (validate={validate})"
        );
        let owned = decode_owned(frame.to_owned(), validate);
        assert_eq!(owned, reference, "decode_owned (validate={validate})");
        if let (Ok(a), Ok(b)) = (&owned, &reference) {
            assert_eq!(
                encode(a),
                encode(b),
                "encode(decode_owned) vs encode(decode_full)"
            );
        }
    }
});

/// Every number in `value` is an integer within ±(2^53 − 1) that is not `-0`.
fn every_number_is_an_exact_double(value: &serde_json::Value) -> bool {
    const LIMIT: u64 = (1 << 53) - 1;
    match value {
        serde_json::Value::Number(n) => {
            n.as_u64().is_some_and(|v| v <= LIMIT)
                || n.as_i64().is_some_and(|v| v.unsigned_abs() <= LIMIT)
        }
        serde_json::Value::Array(items) => items.iter().all(every_number_is_an_exact_double),
        serde_json::Value::Object(map) => map.values().all(every_number_is_an_exact_double),
        _ => true,
    }
}
