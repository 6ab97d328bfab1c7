//! The connected runner's task policy (reconnect backoff, admission, progress mapping,
//! task reports) through the core's one JSON entry point.

use stapel_runner_protocol::runner_task;

use crate::errors::{state, ProtocolError};
use crate::jsontext::parse_serde;

/// One call of the core's runner task policy (`runner_task::call`): `call_json` is an
/// object with exactly one key (the calls of `runner_task::call`: `backoff`, `admit`,
/// `local_event`, `harness_event`, `report`, `local_terminal`, `local_end`,
/// `local_violation`, `capabilities`, `profile_ref`, `gateway_outcome`, `task_run`, …);
/// the result is JSON text.
///
/// # Errors
/// `ProtocolError::Decode` for text that is not JSON; `ProtocolError::State` with code
/// `invalid_call` for a malformed call.
#[uniffi::export]
pub fn runner_task_call(call_json: String) -> Result<String, ProtocolError> {
    let input = parse_serde(&call_json)?;
    runner_task::call(&input)
        .map(|v| v.to_string())
        .map_err(|e| state("runner_task", e.code(), &e))
}
