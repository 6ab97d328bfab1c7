//! Wire `decode` with validation on and off, and `decode_view`: never a panic; a frame
//! accepted with validation is accepted without; the view path answers like the full
//! decode; whatever decodes re-encodes to a frame that decodes to the same message.
#![no_main]

use libfuzzer_sys::fuzz_target;
use stapel_runner_protocol::wire::{decode, decode_view, encode, Decoded};

fuzz_target!(|data: &[u8]| {
    let strict = decode(data, true);
    let lax = decode(data, false);
    if strict.is_ok() {
        assert!(
            lax.is_ok(),
            "validated decode accepted what the lax decode rejects"
        );
    }
    for (validate, full) in [(true, &strict), (false, &lax)] {
        let via_view = decode_view(data, validate).and_then(Decoded::into_message);
        assert_eq!(&via_view, full, "decode_view differs (validate={validate})");
    }
    if let Ok(m) = &lax {
        let text = encode(m);
        let again = decode(text.as_bytes(), false).expect("an encoded message decodes");
        assert_eq!(&again, m, "encode/decode round trip changed the message");
        assert_eq!(encode(&again), text, "encoding is not stable");
    }
});
