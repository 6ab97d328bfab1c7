//! One exception type for every core error: its stable `code`, its `kind` in the core's
//! error table, and the details the core gives (violations for schema errors, the key of
//! a configuration error, …). The table itself (`error_class`, `error_classes`) is
//! exported too: the Kotlin exception classes are generated from it (see README.md,
//! "Errors").

use stapel_runner_protocol::config::ConfigError;
use stapel_runner_protocol::wire::DecodeError;

/// One broken schema rule, located (`payload/usage/thinking`), with the rule's code
/// (`required`, `type`, …) and the core's message.
#[derive(Debug, Clone, uniffi::Record)]
pub struct Violation {
    /// Slash-separated path of the offending value (`""`: the frame itself).
    pub location: String,
    /// The rule's stable code.
    pub rule: String,
    /// The core's human-readable message.
    pub text: String,
}

/// Errors of the core, by kind. Every variant carries the core's stable snake_case
/// `code`; `detail` is the core's human-readable text (not part of any contract).
/// In Kotlin this is `ProtocolException` with one subclass per variant; in Swift an
/// `enum ProtocolError: Error`.
#[derive(Debug, thiserror::Error, uniffi::Error)]
pub enum ProtocolError {
    /// A frame or JSON text could not be decoded or broke the schema (`not_json`,
    /// `duplicate_key`, `not_object`, `unknown_type`, `schema_violation`).
    #[error("{code}: {detail}")]
    Decode {
        /// Stable code.
        code: String,
        /// The error's kind in the core's error table (`decode`, `session`, `link`, …):
        /// `errorClass(kind, code)` names its class.
        kind: String,
        /// The core's text.
        detail: String,
        /// Located violations (`schema_violation` only), sorted by location.
        violations: Vec<Violation>,
        /// The violations as the core words them, one line each.
        lines: Vec<String>,
    },
    /// A machine refused an input or a call (local misuse or a remote violation the
    /// machine reports as an error): sequencing, session, framing, local, adapter, host.
    #[error("{code}: {detail}")]
    State {
        /// Stable code.
        code: String,
        /// The error's kind in the core's error table (`decode`, `session`, `link`, …):
        /// `errorClass(kind, code)` names its class.
        kind: String,
        /// The core's text.
        detail: String,
    },
    /// A configuration object was refused (`not_an_object`, `unknown_key`,
    /// `wrong_type`, `out_of_range`), naming the offending key.
    #[error("{code}: {detail}")]
    Config {
        /// Stable code.
        code: String,
        /// The error's kind in the core's error table (`decode`, `session`, `link`, …):
        /// `errorClass(kind, code)` names its class.
        kind: String,
        /// The offending key (dotted when nested).
        key: String,
        /// The core's text.
        detail: String,
    },
    /// A contract model, catalog or gateway input was refused.
    #[error("{code}: {detail}")]
    Contract {
        /// Stable code.
        code: String,
        /// The error's kind in the core's error table (`decode`, `session`, `link`, …):
        /// `errorClass(kind, code)` names its class.
        kind: String,
        /// The core's text.
        detail: String,
        /// The model being built, as the core names it (`""` for `unknown_model`);
        /// `None` for gateway errors that are not about a model (`unexpected_input`,
        /// `too_many_tool_calls`, `invalid_input`).
        model: Option<String>,
        /// The offending field's slash-separated path within the model, as the core
        /// names it (`""`: the model itself); `None` exactly when `model` is.
        field: Option<String>,
    },
    /// The session reducer refused an event.
    #[error("{code}: {detail}")]
    Reduce {
        /// Stable code.
        code: String,
        /// The error's kind in the core's error table (`decode`, `session`, `link`, …):
        /// `errorClass(kind, code)` names its class.
        kind: String,
        /// The invalid event's own code, when the core gives one.
        detail_code: Option<String>,
        /// The core's text.
        detail: String,
    },
    /// The harness-adapter seam refused something (`invalid_invocation`, `invalid_usage`,
    /// a subprocess turn error, …); `json` is the core's JSON form of the error.
    #[error("{code}: {detail}")]
    Adapter {
        /// Stable code.
        code: String,
        /// The error's kind in the core's error table (`decode`, `session`, `link`, …):
        /// `errorClass(kind, code)` names its class.
        kind: String,
        /// The core's text.
        detail: String,
        /// The 1-based harness line the error is about (`None`: not about a line).
        line_number: Option<u64>,
        /// The error's JSON form (`{"code", …}`), as the core gives it.
        json: String,
    },
    /// Profile resolution refused the request.
    #[error("{code}: {detail}")]
    Refusal {
        /// Stable code.
        code: String,
        /// The error's kind in the core's error table (`decode`, `session`, `link`, …):
        /// `errorClass(kind, code)` names its class.
        kind: String,
        /// The core's text.
        detail: String,
        /// The refusal's reasons as the core lists them.
        reasons: Vec<String>,
    },
}

impl From<DecodeError> for ProtocolError {
    fn from(e: DecodeError) -> Self {
        ProtocolError::Decode {
            code: e.code().to_owned(),
            kind: "decode".to_owned(),
            detail: e.to_string(),
            violations: e
                .violations()
                .iter()
                .map(|v| Violation {
                    location: v.location.clone(),
                    rule: v.rule.code().to_owned(),
                    text: v.message.clone(),
                })
                .collect(),
            lines: e.lines(),
        }
    }
}

impl From<ConfigError> for ProtocolError {
    fn from(e: ConfigError) -> Self {
        ProtocolError::Config {
            code: e.code().to_owned(),
            kind: "config".to_owned(),
            key: e.key().to_owned(),
            detail: e.to_string(),
        }
    }
}

/// A machine error of `kind` (the error table's kind: `session`, `sequencing`, `link`,
/// `host`, `local`, …) with a `code()` as [`ProtocolError::State`].
pub(crate) fn state(kind: &str, code: &str, detail: impl std::fmt::Display) -> ProtocolError {
    ProtocolError::State {
        code: code.to_owned(),
        kind: kind.to_owned(),
        detail: detail.to_string(),
    }
}

/// One exception class of the core's error table.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct ErrorClassInfo {
    /// The class name (the same in every language).
    pub name: String,
    /// The parent class (`None` for the root, `RunnerProtocolError`).
    pub parent: Option<String>,
    /// What the class means.
    pub doc: String,
}

/// The class every binding raises for a core error of `kind` with `code` (the core's
/// `errors::error_class`).
#[uniffi::export]
pub fn error_class(kind: String, code: String) -> String {
    stapel_runner_protocol::errors::error_class(&kind, &code).to_owned()
}

/// Every exception class of the core's table, parents before children.
#[uniffi::export]
pub fn error_classes() -> Vec<ErrorClassInfo> {
    stapel_runner_protocol::errors::ERROR_CLASSES
        .iter()
        .map(|c| ErrorClassInfo {
            name: c.name.to_owned(),
            parent: c.parent.map(str::to_owned),
            doc: c.doc.to_owned(),
        })
        .collect()
}

/// The whole table as JSON text (`{"classes": [...], "rules": [...]}`, the core's
/// `errors::table_value`).
#[uniffi::export]
pub fn error_table_json() -> String {
    stapel_runner_protocol::errors::table_value().to_string()
}
