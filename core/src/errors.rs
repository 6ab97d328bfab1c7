//! The one error table: which exception class every binding raises for a core error.
//!
//! Every error of the core has a *kind* (the error type it comes from, e.g. `decode` for
//! [`wire::DecodeError`](crate::wire::DecodeError)) and a stable snake_case *code*. A
//! binding never picks an exception class itself: it asks [`error_class`] with the
//! error's kind and code and builds the class of that name, from the hierarchy in
//! [`ERROR_CLASSES`] (Python and TypeScript classes, Kotlin exception classes). So the
//! same core error is the same class with the same code in every language.
//!
//! Exceptions to the rule are the bindings' own and documented where they are: Python
//! keeps 0.1.1's bases (`ConfigError` is also a `ValueError`), and a value a language
//! cannot hold (a float where JSON needs an integer, a non-string key) is that
//! language's own type error, raised before the core is called.

/// One exception class of the hierarchy every binding builds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ErrorClass {
    /// The class name (the same in every language).
    pub name: &'static str,
    /// The parent class (`None` for the root, [`ROOT_CLASS`]).
    pub parent: Option<&'static str>,
    /// What the class means.
    pub doc: &'static str,
}

/// The root class: every core error is one.
pub const ROOT_CLASS: &str = "RunnerProtocolError";

/// Every exception class, parents before children.
pub const ERROR_CLASSES: &[ErrorClass] = &[
    ErrorClass {
        name: ROOT_CLASS,
        parent: None,
        doc: "Base class of every error the core reports; carries the stable `code`.",
    },
    ErrorClass {
        name: "DecodeError",
        parent: Some(ROOT_CLASS),
        doc: "A frame or JSON text could not be decoded (`not_json`, `duplicate_key`, `not_object`, …).",
    },
    ErrorClass {
        name: "SchemaValidationError",
        parent: Some("DecodeError"),
        doc: "A message broke schema rules (`schema_violation`), with the located violations.",
    },
    ErrorClass {
        name: "UnknownMessageError",
        parent: Some("DecodeError"),
        doc: "A frame's `type` is absent or not one of the seven messages (`unknown_type`).",
    },
    ErrorClass {
        name: "ProtocolStateError",
        parent: Some(ROOT_CLASS),
        doc: "A machine refused an input or a call: the caller broke a rule, or the peer did and the machine reports it as an error (sequencing, session, link, framing, host, local run).",
    },
    ErrorClass {
        name: "ConfigError",
        parent: Some("ProtocolStateError"),
        doc: "A configuration object was refused (`not_an_object`, `unknown_key`, `wrong_type`, `out_of_range`), naming the offending key.",
    },
    ErrorClass {
        name: "AdapterError",
        parent: Some(ROOT_CLASS),
        doc: "A harness adapter could not open a session or complete a turn, or its data is invalid.",
    },
    ErrorClass {
        name: "AdapterUnavailableError",
        parent: Some("AdapterError"),
        doc: "The adapter cannot run here (a missing optional dependency or program: `adapter_unavailable`).",
    },
    ErrorClass {
        name: "ReducerError",
        parent: Some(ROOT_CLASS),
        doc: "The session reducer refused an event.",
    },
    ErrorClass {
        name: "ContractError",
        parent: Some(ROOT_CLASS),
        doc: "A contract-1.0 document, catalog or gateway input was refused.",
    },
    ErrorClass {
        name: "ResolutionRefused",
        parent: Some(ROOT_CLASS),
        doc: "Profile resolution refused a reference, with its reasons.",
    },
    ErrorClass {
        name: "TransportError",
        parent: Some(ROOT_CLASS),
        doc: "A connection failed, as a link reports it (`upgrade_refused`, `connect_failed`, `connect_timeout`, `no_token`, `transport_failed`, `backlog_full`), raised by a host that surfaces the link's error event.",
    },
    ErrorClass {
        name: "StoreError",
        parent: Some(ROOT_CLASS),
        doc: "A hub store failed or refused (`store_unavailable`, `lease_expired`, `store_limit`, `invalid_rows`): the hub closes the runner's socket and it resumes from the committed rows.",
    },
    ErrorClass {
        name: "FencedError",
        parent: Some("StoreError"),
        doc: "The database refused a hub's write because another hub took the runner over, or this hub's lease expired (`fenced`).",
    },
    ErrorClass {
        name: "PanicError",
        parent: Some(ROOT_CLASS),
        doc: "The core panicked inside a binding call (`panic`); the process survives, the object it was called on must not be used again.",
    },
];

/// One rule of the table: errors of `kind` (and `code`, when given) are `class`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ErrorRule {
    /// The error's kind (see [`ERROR_KINDS`]).
    pub kind: &'static str,
    /// The code this rule is for; `None`: every code of the kind without a rule of its own.
    pub code: Option<&'static str>,
    /// The class name (one of [`ERROR_CLASSES`]).
    pub class: &'static str,
}

/// The error kinds, each with the core type it names.
pub const ERROR_KINDS: &[(&str, &str)] = &[
    ("config", "config::ConfigError"),
    ("decode", "wire::DecodeError"),
    ("schema", "wire::SchemaError"),
    ("framing", "framing::FramingError"),
    ("sequencing", "sequencing::SequencingError and EmitError"),
    ("snapshot", "sequencing::SnapshotError"),
    ("session", "session::SessionError"),
    ("link", "link::LinkError"),
    ("host", "host::HostError"),
    ("admission", "admission::AdmissionError"),
    (
        "local",
        "local's errors (commands, ledger, run machine, player)",
    ),
    ("reducer", "reducer::ReduceError"),
    ("contract", "contract's model and gateway errors"),
    ("resolution", "contract::ResolutionError"),
    ("adapter", "adapter::AdapterError"),
    ("runner_task", "runner_task's errors"),
    ("store", "store::StoreError"),
    (
        "transport",
        "a link's error event (LinkEvent::Error) raised by a host",
    ),
    ("panic", "a panic caught at the binding boundary"),
];

/// The table, most specific rules first.
pub const ERROR_RULES: &[ErrorRule] = &[
    rule("config", None, "ConfigError"),
    rule("decode", Some("unknown_type"), "UnknownMessageError"),
    rule("decode", Some("schema_violation"), "SchemaValidationError"),
    rule("decode", None, "DecodeError"),
    rule("schema", None, "SchemaValidationError"),
    rule("framing", None, "ProtocolStateError"),
    rule("sequencing", None, "ProtocolStateError"),
    rule("snapshot", None, "ProtocolStateError"),
    rule("session", None, "ProtocolStateError"),
    rule("link", None, "ProtocolStateError"),
    rule("host", None, "ProtocolStateError"),
    rule("admission", None, "ProtocolStateError"),
    rule("local", None, "ProtocolStateError"),
    rule("reducer", None, "ReducerError"),
    rule("contract", None, "ContractError"),
    rule("resolution", None, "ResolutionRefused"),
    rule(
        "adapter",
        Some("adapter_unavailable"),
        "AdapterUnavailableError",
    ),
    rule("adapter", None, "AdapterError"),
    rule("runner_task", None, "ProtocolStateError"),
    rule("store", Some("fenced"), "FencedError"),
    rule("store", None, "StoreError"),
    rule("transport", None, "TransportError"),
    rule("panic", None, "PanicError"),
];

const fn rule(kind: &'static str, code: Option<&'static str>, class: &'static str) -> ErrorRule {
    ErrorRule { kind, code, class }
}

/// The class every binding raises for an error of `kind` with `code`: the rule for the
/// kind and code, else the kind's rule, else [`ROOT_CLASS`] (an unknown kind).
pub fn error_class(kind: &str, code: &str) -> &'static str {
    ERROR_RULES
        .iter()
        .find(|r| r.kind == kind && r.code == Some(code))
        .or_else(|| {
            ERROR_RULES
                .iter()
                .find(|r| r.kind == kind && r.code.is_none())
        })
        .map_or(ROOT_CLASS, |r| r.class)
}

/// The parent of class `name` (`None` for the root or an unknown class).
pub fn parent_class(name: &str) -> Option<&'static str> {
    ERROR_CLASSES
        .iter()
        .find(|c| c.name == name)
        .and_then(|c| c.parent)
}

/// The table as JSON, for bindings that build their classes at load time:
/// `{"classes": [{"name", "parent", "doc"}…], "rules": [{"kind", "code", "class"}…]}`.
pub fn table_value() -> serde_json::Value {
    serde_json::json!({
        "classes": ERROR_CLASSES.iter().map(|c| serde_json::json!({
            "name": c.name, "parent": c.parent, "doc": c.doc,
        })).collect::<Vec<_>>(),
        "rules": ERROR_RULES.iter().map(|r| serde_json::json!({
            "kind": r.kind, "code": r.code, "class": r.class,
        })).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rule_names_a_known_class_and_kind() {
        for r in ERROR_RULES {
            assert!(ERROR_CLASSES.iter().any(|c| c.name == r.class), "{r:?}");
            assert!(ERROR_KINDS.iter().any(|(k, _)| *k == r.kind), "{r:?}");
        }
        for (k, _) in ERROR_KINDS {
            assert!(ERROR_RULES.iter().any(|r| r.kind == *k && r.code.is_none()));
        }
        // Parents come before their children.
        for (i, c) in ERROR_CLASSES.iter().enumerate() {
            if let Some(p) = c.parent {
                assert!(ERROR_CLASSES[..i].iter().any(|x| x.name == p), "{c:?}");
            }
        }
        assert_eq!(error_class("decode", "unknown_type"), "UnknownMessageError");
        assert_eq!(error_class("decode", "not_json"), "DecodeError");
        assert_eq!(error_class("nope", "x"), ROOT_CLASS);
        assert_eq!(parent_class("ConfigError"), Some("ProtocolStateError"));
    }
}
