//! The contract-1.0 models by name: the one table a binding exposes ([`MODEL_NAMES`]) and
//! the dispatch from a name to the model's strict parser ([`parse_model`]).

use serde_json::Value;

use super::error::ContractError;
use super::evidence::{ExecutionEvidence, GatewayResult};
use super::models::{
    ExecutionRequest, ExecutionSummary, HarnessProfile, ReinDescriptor, SandboxHandle, ToolCall,
    ToolResult,
};

/// The names [`parse_model`] accepts, in this order (the contract's models, then the
/// evidence readers' models).
pub const MODEL_NAMES: [&str; 9] = [
    "ExecutionRequest",
    "HarnessProfile",
    "ReinDescriptor",
    "SandboxHandle",
    "ToolCall",
    "ToolResult",
    "ExecutionSummary",
    "ExecutionEvidence",
    "GatewayResult",
];

/// Parse `value` strictly as the contract-1.0 model named `name` (one of
/// [`MODEL_NAMES`]) and return its normalised JSON form (the model's `to_value`: every
/// declared field present, defaults filled in).
///
/// # Errors
/// `unknown_model` when `name` is not in [`MODEL_NAMES`]; otherwise the model's own
/// [`ContractError`] (`not_object`, `unknown_field`, `missing_field`, `invalid_field`,
/// `sensitive_metadata`).
pub fn parse_model(name: &str, value: &Value) -> Result<Value, ContractError> {
    match name {
        "ExecutionRequest" => ExecutionRequest::from_value(value).map(|m| m.to_value()),
        "HarnessProfile" => HarnessProfile::from_value(value).map(|m| m.to_value()),
        "ReinDescriptor" => ReinDescriptor::from_value(value).map(|m| m.to_value()),
        "SandboxHandle" => SandboxHandle::from_value(value).map(|m| m.to_value()),
        "ToolCall" => ToolCall::from_value(value).map(|m| m.to_value()),
        "ToolResult" => ToolResult::from_value(value).map(|m| m.to_value()),
        "ExecutionSummary" => ExecutionSummary::from_value(value).map(|m| m.to_value()),
        "ExecutionEvidence" => ExecutionEvidence::from_value(value).map(|m| m.to_value()),
        "GatewayResult" => GatewayResult::from_value(value).map(|m| m.to_value()),
        other => Err(ContractError::UnknownModel {
            name: other.to_owned(),
            known: &MODEL_NAMES,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_listed_name_dispatches_to_its_own_parser() {
        for name in MODEL_NAMES {
            // An empty object is not a valid instance of any model except possibly one
            // with no required field; either way the error (if any) names this model.
            if let Err(e) = parse_model(name, &json!({})) {
                assert_eq!(e.model(), name);
            }
            let e = parse_model(name, &json!([])).unwrap_err();
            assert_eq!((e.code(), e.model()), ("not_object", name));
        }
    }

    #[test]
    fn an_unknown_name_is_refused_with_its_code() {
        let e = parse_model("Nope", &json!({})).unwrap_err();
        assert_eq!((e.code(), e.model(), e.field()), ("unknown_model", "", ""));
        assert!(e.to_string().contains("\"Nope\""));
    }
}
