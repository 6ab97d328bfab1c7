//! Errors of the contract area: strict-model violations and gateway misuse.

/// A contract-1.0 model could not be built from a JSON value.
///
/// Every variant names the model and the offending field as a slash-separated path from
/// the model's root (e.g. `tool_policy/allowed_tools/2`; the empty string is the model
/// itself). Codes are stable and asserted by conformance vectors.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ContractError {
    /// The value is not a JSON object (or the text is not JSON). Code `not_object`.
    #[error("{model}: expected a JSON object at {field:?}, found {found}")]
    NotObject {
        /// Model being built.
        model: &'static str,
        /// Path of the value.
        field: String,
        /// JSON type found (`array`, `string`, `number`, `boolean`, `null`), or
        /// `invalid JSON` when the text did not parse.
        found: String,
    },
    /// The object has a field the model does not declare. Contract models forbid unknown
    /// fields; only declared `metadata` objects are open. Code `unknown_field`.
    #[error("{model}: unknown field {field:?} (contract models forbid unknown fields)")]
    UnknownField {
        /// Model being built.
        model: &'static str,
        /// Path of the unknown field.
        field: String,
    },
    /// A required field is absent. Code `missing_field`.
    #[error("{model}: required field {field:?} is missing")]
    MissingField {
        /// Model being built.
        model: &'static str,
        /// Path of the missing field.
        field: String,
    },
    /// A field has the wrong JSON type or an out-of-range value (empty required string,
    /// integer outside 0..=2^53−1, unknown enum value, inconsistent combination).
    /// Code `invalid_field`.
    #[error("{model}: invalid field {field:?}: {reason}")]
    InvalidField {
        /// Model being built.
        model: &'static str,
        /// Path of the field.
        field: String,
        /// Human-readable reason (not stable).
        reason: String,
    },
    /// A declared `metadata` object carries a sensitive value: a key that names secret
    /// material or a value shaped like credential material (see
    /// [`safety`](super::safety)). Sensitive values are never contract extensions.
    /// Code `sensitive_metadata`.
    #[error("{model}: metadata field {field:?} carries a sensitive value")]
    SensitiveMetadata {
        /// Model being built.
        model: &'static str,
        /// Path of the metadata entry.
        field: String,
    },
    /// [`parse_model`](super::parse_model) was given a name that is not one of
    /// [`MODEL_NAMES`](super::MODEL_NAMES). Its [`model`](ContractError::model) and
    /// [`field`](ContractError::field) are `""` (no model was being built). Code
    /// `unknown_model`.
    #[error("unknown contract model {name:?}; known: {known:?}")]
    UnknownModel {
        /// The name given.
        name: String,
        /// The names known (the table [`MODEL_NAMES`](super::MODEL_NAMES)).
        known: &'static [&'static str],
    },
}

impl ContractError {
    /// Stable snake_case code.
    pub fn code(&self) -> &'static str {
        match self {
            ContractError::NotObject { .. } => "not_object",
            ContractError::UnknownField { .. } => "unknown_field",
            ContractError::MissingField { .. } => "missing_field",
            ContractError::InvalidField { .. } => "invalid_field",
            ContractError::SensitiveMetadata { .. } => "sensitive_metadata",
            ContractError::UnknownModel { .. } => "unknown_model",
        }
    }

    /// The path of the offending field (`""` for the model itself, and for
    /// `unknown_model`).
    pub fn field(&self) -> &str {
        match self {
            ContractError::NotObject { field, .. }
            | ContractError::UnknownField { field, .. }
            | ContractError::MissingField { field, .. }
            | ContractError::InvalidField { field, .. }
            | ContractError::SensitiveMetadata { field, .. } => field,
            ContractError::UnknownModel { .. } => "",
        }
    }

    /// The model that was being built (`""` for `unknown_model`).
    pub fn model(&self) -> &'static str {
        match self {
            ContractError::NotObject { model, .. }
            | ContractError::UnknownField { model, .. }
            | ContractError::MissingField { model, .. }
            | ContractError::InvalidField { model, .. }
            | ContractError::SensitiveMetadata { model, .. } => model,
            ContractError::UnknownModel { .. } => "",
        }
    }
}

/// The host broke the gateway's call order. The gateway's state is unchanged; these are
/// *local* misuse (the host's bug), never remote data. Codes are stable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GatewayError {
    /// An input arrived that does not answer the action the gateway is waiting on (for
    /// example `session_started` while a sandbox is being created, or any report after
    /// the result). Code `unexpected_input`.
    #[error("unexpected input {got:?} while waiting for {expected}")]
    UnexpectedInput {
        /// What the gateway is waiting for (`execute`, `sandbox_create`, `session_start`,
        /// `tool_dispatch`, `session_end`, `sandbox_destroy`, or `nothing` once finished).
        expected: &'static str,
        /// The input's type.
        got: &'static str,
    },
    /// `execute` carried more tool calls than
    /// [`GatewayConfig::max_tool_calls`](super::GatewayConfig::max_tool_calls).
    /// Code `too_many_tool_calls`.
    #[error("{count} tool calls exceed the bound of {max}")]
    TooManyToolCalls {
        /// Calls in the request.
        count: usize,
        /// The configured bound.
        max: usize,
    },
    /// A gateway input given as JSON is malformed, or an `abort` code (JSON or Rust) is
    /// not `[a-z][a-z0-9_]*` of at most 64 bytes. Code `invalid_input`.
    #[error("invalid gateway input: {reason}")]
    InvalidInput {
        /// Why (not stable).
        reason: String,
    },
    /// A model inside a gateway input is invalid. Code: the model error's code.
    #[error(transparent)]
    Model(#[from] ContractError),
}

impl GatewayError {
    /// Stable snake_case code. For [`GatewayError::Model`] it is the inner
    /// [`ContractError::code`].
    pub fn code(&self) -> &'static str {
        match self {
            GatewayError::UnexpectedInput { .. } => "unexpected_input",
            GatewayError::TooManyToolCalls { .. } => "too_many_tool_calls",
            GatewayError::InvalidInput { .. } => "invalid_input",
            GatewayError::Model(e) => e.code(),
        }
    }

    /// Always `true`: every gateway error is the host's misuse of the API.
    pub fn is_local(&self) -> bool {
        true
    }
}
