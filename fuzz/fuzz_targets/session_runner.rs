//! The runner session machine under arbitrary input sequences (connects, disconnects,
//! bytes, frames, timers, sends, checkpoints, restarts, forgotten tasks): no panic,
//! bounded memory, nothing delivered twice (across restarts too), no deadline in the past
//! (see `drive_session`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use stapel_runner_protocol::session::RunnerSession;
use stapel_runner_protocol::wire::Hello;
use stapel_runner_protocol_fuzz::{drive_session, small_session_config, Bytes};

fuzz_target!(|data: &[u8]| {
    let config = small_session_config();
    let hello = Hello::new("proj", "0.1.0");
    drive_session(
        |state| RunnerSession::with_state(hello.clone(), config.clone(), state),
        &config,
        &mut Bytes::new(data),
        false,
    );
});
