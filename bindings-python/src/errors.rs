//! Raising the exception classes of `stapel_runner_protocol.errors` (defined in Python so
//! that catching them needs no native code) from core errors. The class of a core error
//! is never chosen here: it is the core's error table's (`errors::error_class(kind,
//! code)`), and `errors.py` is generated from that table (`scripts/gen_errors.py`).

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyList};
use stapel_runner_protocol::adapter::AdapterError;
use stapel_runner_protocol::wire::{DecodeError, SchemaError, Violation};

static ERRORS: PyOnceLock<Py<PyModule>> = PyOnceLock::new();

/// The `stapel_runner_protocol.errors` module (imported once).
pub fn errors_module(py: Python<'_>) -> PyResult<&Bound<'_, PyModule>> {
    ERRORS
        .get_or_try_init(py, || {
            py.import("stapel_runner_protocol.errors")
                .map(Bound::unbind)
        })
        .map(|m| m.bind(py))
}

/// The class the core's error table names for an error of `kind` with `code`.
pub fn class_of(kind: &str, code: &str) -> &'static str {
    stapel_runner_protocol::errors::error_class(kind, code)
}

/// An instance of the class the core's table names for an error of `kind` (`session`,
/// `link`, `sequencing`, …) with `code`, as a `PyErr`; `code` is passed as the keyword
/// argument `code`.
pub fn raise(py: Python<'_>, kind: &str, message: String, code: &str) -> PyErr {
    build(py, class_of(kind, code), message, code, None)
}

/// The exception class named `class` of the errors module, called with `message` and
/// the keyword arguments `kwargs`, as a `PyErr`.
pub fn raise_class(
    py: Python<'_>,
    class: &str,
    message: String,
    kwargs: &Bound<'_, PyDict>,
) -> PyErr {
    let make = || -> PyResult<PyErr> {
        let exc = errors_module(py)?
            .getattr(class)?
            .call((message,), Some(kwargs))?;
        Ok(PyErr::from_value(exc))
    };
    make().unwrap_or_else(|e| e)
}

fn build(
    py: Python<'_>,
    class: &str,
    message: String,
    code: &str,
    violations: Option<&[Violation]>,
) -> PyErr {
    let make = || -> PyResult<PyErr> {
        let module = errors_module(py)?;
        let cls = module.getattr(class)?;
        let kwargs = PyDict::new(py);
        kwargs.set_item("code", code)?;
        if let Some(vs) = violations {
            let vcls = module.getattr("Violation")?;
            let list = PyList::empty(py);
            for v in vs {
                list.append(vcls.call1((&v.location, v.rule.code(), &v.message))?)?;
            }
            kwargs.set_item("violations", list)?;
            // The core's text of each violation (`DecodeError::lines`), so every binding
            // shows the same lines.
            let lines: Vec<String> = vs.iter().map(ToString::to_string).collect();
            kwargs.set_item("errors", lines)?;
        }
        let exc = cls.call((message,), Some(&kwargs))?;
        Ok(PyErr::from_value(exc))
    };
    make().unwrap_or_else(|e| e)
}

/// A wire decode error as the table's class of kind `decode`: `DecodeError`
/// (`not_json`, `duplicate_key`, `not_object`, …), `UnknownMessageError`
/// (`unknown_type`) or `SchemaValidationError` (`schema_violation`, with the violations).
pub fn decode_error(py: Python<'_>, e: &DecodeError) -> PyErr {
    let violations = match e {
        DecodeError::Schema { violations } => Some(violations.as_slice()),
        _ => None,
    };
    build(
        py,
        class_of("decode", e.code()),
        e.to_string(),
        e.code(),
        violations,
    )
}

/// A schema error as the table's class of kind `schema` (`SchemaValidationError`).
pub fn schema_error(py: Python<'_>, e: &SchemaError) -> PyErr {
    build(
        py,
        class_of("schema", e.code()),
        e.to_string(),
        e.code(),
        Some(&e.violations),
    )
}

/// An adapter-seam error as an instance (not raised) of the table's class of kind
/// `adapter` (`AdapterError`, `AdapterUnavailableError` for `adapter_unavailable`): its
/// code, the line number it is about, and the core's JSON form as `details`.
pub fn adapter_error_object<'py>(py: Python<'py>, e: &AdapterError) -> PyResult<Bound<'py, PyAny>> {
    let module = errors_module(py)?;
    let kwargs = PyDict::new(py);
    kwargs.set_item("code", e.code())?;
    kwargs.set_item("line_number", e.line_number())?;
    kwargs.set_item("details", crate::json::value_to_py(py, &e.to_value())?)?;
    module
        .getattr(class_of("adapter", e.code()))?
        .call((e.to_string(),), Some(&kwargs))
}

/// An adapter-seam error as a raised `AdapterError` (see [`adapter_error_object`]).
pub fn adapter_error(py: Python<'_>, e: &AdapterError) -> PyErr {
    match adapter_error_object(py, e) {
        Ok(obj) => PyErr::from_value(obj),
        Err(err) => err,
    }
}

/// Import `stapel_taskspecs`, whose models the typed views return. It is installed with
/// the package on Python >= 3.11 only (its own `Requires-Python`); elsewhere, or when it
/// is missing, this raises `AdapterUnavailableError` with code `taskspecs_unavailable`
/// (the `ImportError` as its cause) — the rest of the package works without it.
pub fn import_taskspecs(py: Python<'_>) -> PyResult<Bound<'_, PyModule>> {
    py.import("stapel_taskspecs").map_err(|e| {
        if !e.is_instance_of::<pyo3::exceptions::PyImportError>(py) {
            return e;
        }
        // Not a core error: this package's own missing dependency (the table's class
        // for an adapter that cannot run here).
        let err = build(
            py,
            class_of("adapter", "adapter_unavailable"),
            format!(
                "stapel-taskspecs is not available ({}); the typed views (UsageSplit, \
                 TaskSpec, TaskReport) need it, and it requires Python >= 3.11: \
                 pip install \"stapel-taskspecs>=0.1,<0.2\"",
                e.value(py)
            ),
            "taskspecs_unavailable",
            None,
        );
        err.set_cause(py, Some(e));
        err
    })
}
