//! The runner session machine under arbitrary input sequences (connects, disconnects,
//! bytes, frames, timers, sends): no panic, bounded memory, nothing delivered twice.
#![no_main]

use libfuzzer_sys::fuzz_target;
use stapel_runner_protocol::session::RunnerSession;
use stapel_runner_protocol::wire::Hello;
use stapel_runner_protocol_fuzz::{drive_session, small_session_config, Bytes};

fuzz_target!(|data: &[u8]| {
    let config = small_session_config();
    let mut runner = RunnerSession::new(Hello::new("proj", "0.1.0"), config.clone());
    drive_session(&mut runner, &config, &mut Bytes::new(data), false);
});
