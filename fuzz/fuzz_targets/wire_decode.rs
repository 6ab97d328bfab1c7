//! Wire `decode` with validation on and off, against the non-fast reference
//! `decode_full`: `decode`, `decode_str`, `decode_owned` and `decode_view` (which go
//! through the `task.progress` fast path first) answer exactly as `decode_full` — the same
//! message or the same error, and the same encoding; never a panic; a frame accepted with
//! validation is accepted without; whatever decodes re-encodes to a frame that decodes to
//! the same message, and the encoding is stable.
#![no_main]

use libfuzzer_sys::fuzz_target;
use stapel_runner_protocol::wire::{
    decode, decode_full, decode_owned, decode_str, decode_view, encode, Decoded,
};

fuzz_target!(|data: &[u8]| {
    let strict = decode(data, true);
    let lax = decode(data, false);
    if strict.is_ok() {
        assert!(
            lax.is_ok(),
            "validated decode accepted what the lax decode rejects"
        );
    }
    for (validate, got) in [(true, &strict), (false, &lax)] {
        let via_view = decode_view(data, validate).and_then(Decoded::into_message);
        assert_eq!(&via_view, got, "decode_view differs (validate={validate})");
        let Ok(text) = std::str::from_utf8(data) else {
            continue;
        };
        let reference = decode_full(text, validate);
        assert_eq!(
            got, &reference,
            "decode differs from decode_full (validate={validate})"
        );
        assert_eq!(
            decode_str(text, validate),
            reference,
            "decode_str (validate={validate})"
        );
        let owned = decode_owned(text.to_owned(), validate);
        assert_eq!(owned, reference, "decode_owned (validate={validate})");
        if let (Ok(a), Ok(b), Ok(c)) = (got, &reference, &owned) {
            let want = encode(b);
            assert_eq!(
                encode(a),
                want,
                "encode(decode) differs from encode(decode_full)"
            );
            assert_eq!(
                encode(c),
                want,
                "encode(decode_owned) differs from encode(decode_full)"
            );
        }
    }
    if let Ok(m) = &lax {
        let text = encode(m);
        let again = decode(text.as_bytes(), false).expect("an encoded message decodes");
        assert_eq!(&again, m, "encode/decode round trip changed the message");
        assert_eq!(encode(&again), text, "encoding is not stable");
        assert_eq!(
            decode_full(&text, false).as_ref(),
            Ok(m),
            "decode_full of the encoding"
        );
    }
});
