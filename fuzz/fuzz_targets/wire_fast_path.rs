//! The `task.progress` fast path against the full decode: when `peek_progress` accepts a
//! frame, `decode_str(frame, true)` accepts the same message (same task, seq, attempt,
//! kind, no extra fields, the payload is the frame's own text and parses to the decoded
//! payload).
#![no_main]

use libfuzzer_sys::fuzz_target;
use stapel_runner_protocol::wire::{decode_str, decode_str_view, peek_progress, Decoded, Message};

fuzz_target!(|data: &[u8]| {
    let Ok(frame) = std::str::from_utf8(data) else {
        return;
    };
    if let Some(view) = peek_progress(frame) {
        let Ok(Message::TaskProgress(m)) = decode_str(frame, true) else {
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
    }
    for validate in [true, false] {
        let via_view = decode_str_view(frame, validate).and_then(Decoded::into_message);
        assert_eq!(via_view, decode_str(frame, validate));
    }
});
