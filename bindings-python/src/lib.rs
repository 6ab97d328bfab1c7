//! `stapel_runner_protocol._native`: the Python bindings of the stapel-runner-protocol
//! core. Every parse, validation, encoding and sequencing step runs in the core; this
//! crate converts between Python objects and the core's types and maps errors onto the
//! exception classes of `stapel_runner_protocol.errors`.
//!
//! The Python package (`python/stapel_runner_protocol/`) re-exports these names in the
//! seed-000 module layout.

mod adapter;
mod admission;
mod contract;
mod encode;
mod errors;
mod fastcall;
mod fields;
mod framing;
mod host;
mod json;
mod link;
mod local;
mod messages;
mod pyobj;
mod reducer;
mod runner_task;
mod sequencing;
mod session;
mod shape;
mod store;
mod wire;

use pyo3::prelude::*;

#[pymodule(gil_used = true)]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<messages::PyHello>()?;
    m.add_class::<messages::PyTaskAssign>()?;
    m.add_class::<messages::PyTaskProgress>()?;
    m.add_class::<messages::PyTaskReportMessage>()?;
    m.add_class::<messages::PyTaskCancel>()?;
    m.add_class::<messages::PyPing>()?;
    m.add_class::<messages::PyPong>()?;
    m.add_class::<sequencing::PyConnectionState>()?;
    m.add_class::<sequencing::PyTaskChannel>()?;
    m.add_class::<sequencing::PyOutboxLog>()?;
    m.add_class::<sequencing::PyInboxTracker>()?;
    m.add_class::<session::PySession>()?;
    m.add_class::<session::PyHubSession>()?;
    m.add_class::<session::PyRunnerSession>()?;
    m.add_class::<reducer::PySessionReducer>()?;
    m.add_class::<local::PyLocalRun>()?;
    m.add_class::<contract::PyGateway>()?;
    contract::register_rein(m)?;
    m.add_function(wrap_pyfunction!(contract::parse_model, m)?)?;
    m.add_function(wrap_pyfunction!(contract::parse_catalog, m)?)?;
    m.add_function(wrap_pyfunction!(contract::resolve, m)?)?;
    m.add_function(wrap_pyfunction!(contract::safe_identifier, m)?)?;
    m.add_function(wrap_pyfunction!(contract::looks_like_credential, m)?)?;
    m.add_function(wrap_pyfunction!(contract::is_sensitive_key, m)?)?;
    m.add_function(wrap_pyfunction!(contract::is_credential_reference, m)?)?;
    m.add("CONTRACT_MODELS", contract::MODELS.to_vec())?;
    m.add_class::<host::PySocketHost>()?;
    m.add_class::<host::PyHubHost>()?;
    m.add_function(wrap_pyfunction!(host::bearer_token, m)?)?;
    m.add_function(wrap_pyfunction!(host::bearer_refusal, m)?)?;
    m.add_function(wrap_pyfunction!(host::runner_is_idle, m)?)?;
    m.add_function(wrap_pyfunction!(host::bearer_authorization, m)?)?;
    m.add_function(wrap_pyfunction!(host::host_config, m)?)?;
    m.add_function(wrap_pyfunction!(runner_task::runner_task_call, m)?)?;
    link::register(m)?;
    store::register(m)?;
    m.add_class::<admission::PyAdmission>()?;
    m.add_function(wrap_pyfunction!(admission::admission_config, m)?)?;
    m.add_function(wrap_pyfunction!(admission::admission_error_body, m)?)?;
    m.add_function(wrap_pyfunction!(admission::admission_response_headers, m)?)?;
    m.add(
        "HOST_REPLACED_REASON",
        stapel_runner_protocol::host::REPLACED_REASON,
    )?;
    m.add(
        "HOST_CLOSE_TIMEOUT_MS",
        stapel_runner_protocol::host::DEFAULT_CLOSE_TIMEOUT_MS,
    )?;
    m.add(
        "HOST_MAX_IDLE_RUNNERS",
        stapel_runner_protocol::host::DEFAULT_MAX_IDLE_RUNNERS,
    )?;
    m.add(
        "HOST_MAX_QUEUED_EVENTS",
        stapel_runner_protocol::host::DEFAULT_MAX_QUEUED_EVENTS,
    )?;
    m.add_class::<framing::PyLineFramer>()?;
    m.add_class::<framing::PyLineError>()?;
    m.add("encode", fastcall::encode_function(m)?)?;
    m.add("decode", fastcall::decode_function(m)?)?;
    m.add_function(wrap_pyfunction!(shape::clear, m)?)?;
    m.add_function(wrap_pyfunction!(shape::is_enabled, m)?)?;
    m.add_function(wrap_pyfunction!(messages::encode_reuses_payload_text, m)?)?;
    m.add_function(wrap_pyfunction!(wire::validate, m)?)?;
    m.add_function(wrap_pyfunction!(wire::is_valid, m)?)?;
    m.add_function(wrap_pyfunction!(wire::iter_errors, m)?)?;
    m.add_function(wrap_pyfunction!(wire::message_types, m)?)?;
    m.add_function(wrap_pyfunction!(wire::is_sequenced, m)?)?;
    m.add_function(wrap_pyfunction!(wire::schema_files, m)?)?;
    m.add_function(wrap_pyfunction!(adapter::usage_from_anthropic, m)?)?;
    m.add_function(wrap_pyfunction!(adapter::usage_from_openai, m)?)?;
    m.add_function(wrap_pyfunction!(adapter::usage_from_mapping, m)?)?;
    m.add_function(wrap_pyfunction!(adapter::check_usage_split, m)?)?;
    m.add_function(wrap_pyfunction!(adapter::role_spec_from_invocation, m)?)?;
    m.add_function(wrap_pyfunction!(adapter::role_spec_to_dict, m)?)?;
    m.add_function(wrap_pyfunction!(adapter::turn_result_from_value, m)?)?;
    m.add_function(wrap_pyfunction!(adapter::agent_options, m)?)?;
    m.add_class::<adapter::PySubprocessTurnMachine>()?;
    adapter::register(m)?;
    m.add(
        "SCHEMA_VERSION",
        stapel_runner_protocol::wire::SCHEMA_VERSION,
    )?;
    m.add(
        "PROTOCOL_VERSION",
        stapel_runner_protocol::wire::PROTOCOL_VERSION,
    )?;
    m.add(
        "DEFAULT_MAX_LINE_BYTES",
        stapel_runner_protocol::framing::DEFAULT_MAX_LINE_BYTES,
    )?;
    Ok(())
}
