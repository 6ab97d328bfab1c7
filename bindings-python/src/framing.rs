//! `LineFramer`: the core's bounded JSONL line framer.

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyList, PyString};
use stapel_runner_protocol::framing::{FramerConfig, FramingError, LineFramer, LineResult};

use crate::errors::raise;
use crate::json::type_name;

// `LineFramer(max_line_bytes=65536)`: the literal `help()` shows, which must be the
// core's default.
const _: () = assert!(stapel_runner_protocol::framing::DEFAULT_MAX_LINE_BYTES == 65536);

/// Run `f` over the bytes of `data` (`bytes`, `bytearray`, or a `str` as UTF-8).
fn with_bytes<R>(data: &Bound<'_, PyAny>, what: &str, f: impl FnOnce(&[u8]) -> R) -> PyResult<R> {
    if let Ok(b) = data.cast::<PyBytes>() {
        Ok(f(b.as_bytes()))
    } else if let Ok(s) = data.cast::<PyString>() {
        Ok(f(s.to_cow()?.as_bytes()))
    } else if let Ok(b) = data.cast::<PyByteArray>() {
        Ok(f(&b.to_vec()))
    } else {
        Err(PyTypeError::new_err(format!(
            "{what}() takes bytes, bytearray or str, not {}",
            type_name(data)
        )))
    }
}

/// A line the framer could not deliver: `code` is `line_too_long` or `invalid_utf8`.
#[pyclass(module = "stapel_runner_protocol.framing", name = "LineError", frozen)]
pub struct PyLineError {
    /// Stable code: `line_too_long` or `invalid_utf8`.
    #[pyo3(get)]
    code: &'static str,
    /// 1-based number of the line in the stream (skipped empty lines count).
    #[pyo3(get)]
    line_number: u64,
    /// Human-readable explanation (not stable).
    #[pyo3(get)]
    message: String,
}

#[pymethods]
impl PyLineError {
    #[new]
    #[pyo3(signature = (code, line_number, message = ""))]
    fn new(code: &str, line_number: u64, message: &str) -> PyResult<Self> {
        let code = FramingError::line_code(code)
            .ok_or_else(|| PyTypeError::new_err(format!("unknown line error code {code:?}")))?;
        Ok(Self {
            code,
            line_number,
            message: message.to_owned(),
        })
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let py = other.py();
        match other.cast::<PyLineError>() {
            Ok(o) => {
                let o = o.get();
                let same = o.code == self.code && o.line_number == self.line_number;
                Ok(pyo3::types::PyBool::new(py, same)
                    .to_owned()
                    .into_any()
                    .unbind())
            }
            Err(_) => Ok(py.NotImplemented()),
        }
    }

    fn __repr__(&self) -> String {
        format!(
            "LineError(code='{}', line_number={})",
            self.code, self.line_number
        )
    }
}

/// A bounded, chunking-independent JSONL line framer (the core's `LineFramer`).
///
/// `push(data)` feeds bytes in any chunking and returns how many it took (all of them
/// unless the queue of ready lines is full: pull, then push the rest); complete lines
/// (`str`, without the line terminator) and `LineError`s come out of `poll()` /
/// iteration, in stream order. `push_all(data)` takes everything and returns every item.
/// `finish()` marks end of input (an unterminated last line is delivered). The queue
/// bounds `max_ready_lines` and `max_ready_bytes` default (when `None`) to the core's
/// (1024 lines, 1 MiB).
#[pyclass(module = "stapel_runner_protocol.framing", name = "LineFramer")]
pub struct PyLineFramer {
    inner: LineFramer,
}

fn item_to_py(py: Python<'_>, item: LineResult) -> PyResult<Bound<'_, PyAny>> {
    match item {
        Ok(line) => Ok(PyString::new(py, &line).into_any()),
        Err(e) => {
            let line_number = e.line_number().unwrap_or(0);
            Ok(Bound::new(
                py,
                PyLineError {
                    code: e.code(),
                    line_number,
                    message: e.to_string(),
                },
            )?
            .into_any())
        }
    }
}

#[pymethods]
impl PyLineFramer {
    #[new]
    #[pyo3(signature = (
        max_line_bytes = 65536,
        *,
        skip_empty_lines = true,
        max_ready_lines = None,
        max_ready_bytes = None,
    ))]
    fn new(
        max_line_bytes: usize,
        skip_empty_lines: bool,
        max_ready_lines: Option<usize>,
        max_ready_bytes: Option<usize>,
    ) -> Self {
        // `None`: the core's defaults.
        let mut config = FramerConfig::with_max_line_bytes(max_line_bytes);
        config.skip_empty_lines = skip_empty_lines;
        if let Some(n) = max_ready_lines {
            config.max_ready_lines = n;
        }
        if let Some(n) = max_ready_bytes {
            config.max_ready_bytes = n;
        }
        Self {
            inner: LineFramer::new(config),
        }
    }

    /// Feed bytes (`bytes`, `bytearray`, or a `str` as UTF-8) and return how many bytes
    /// were taken: all of them unless the queue of ready lines filled up (then pull and
    /// push the rest, `data[taken:]`; for a `str`, count in its UTF-8 bytes). Raises
    /// `ProtocolStateError` (code `push_after_finish`) after `finish()`.
    fn push(&mut self, data: &Bound<'_, PyAny>) -> PyResult<usize> {
        let py = data.py();
        let inner = &mut self.inner;
        with_bytes(data, "push", |bytes| inner.push(bytes))?
            .map_err(|e| raise(py, "framing", e.to_string(), e.code()))
    }

    /// Feed all of `data` (as for `push`), pulling in between, and return every line and
    /// `LineError` that became ready (after those already waiting), in stream order.
    fn push_all<'py>(&mut self, data: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyList>> {
        let py = data.py();
        let mut items = Vec::new();
        let inner = &mut self.inner;
        with_bytes(data, "push_all", |bytes| {
            inner.push_all(bytes, |item| items.push(item))
        })?
        .map_err(|e| raise(py, "framing", e.to_string(), e.code()))?;
        let list = PyList::empty(py);
        for item in items {
            list.append(item_to_py(py, item)?)?;
        }
        Ok(list)
    }

    /// Mark the end of input. Idempotent.
    fn finish(&mut self) {
        self.inner.finish()
    }

    /// The next line (`str`) or `LineError`, or `None` when nothing is ready.
    fn poll<'py>(&mut self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.inner
            .poll_line()
            .map(|item| item_to_py(py, item))
            .transpose()
    }

    /// Everything ready, as a list.
    fn drain<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let list = PyList::empty(py);
        while let Some(item) = self.inner.poll_line() {
            list.append(item_to_py(py, item)?)?;
        }
        Ok(list)
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(&mut self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.poll(py)
    }

    /// Bytes held for the current partial line (never more than `max_line_bytes`).
    #[getter]
    fn buffered_bytes(&self) -> usize {
        self.inner.buffered_bytes()
    }

    /// Number of lines and errors ready to be pulled (never more than `max_ready_lines`).
    #[getter]
    fn ready(&self) -> usize {
        self.inner.ready_len()
    }

    /// Bytes of the lines ready to be pulled.
    #[getter]
    fn ready_bytes(&self) -> usize {
        self.inner.ready_bytes()
    }

    /// `True` when `push` takes nothing more until lines are pulled.
    #[getter]
    fn full(&self) -> bool {
        self.inner.is_full()
    }

    /// The bound on lines and errors ready to be pulled.
    #[getter]
    fn max_ready_lines(&self) -> usize {
        self.inner.config().max_ready_lines
    }

    /// The bytes of ready lines at which `push` stops starting new lines.
    #[getter]
    fn max_ready_bytes(&self) -> usize {
        self.inner.config().max_ready_bytes
    }

    /// `True` once `finish()` was called.
    #[getter]
    fn finished(&self) -> bool {
        self.inner.is_finished()
    }

    /// The line bound in force.
    #[getter]
    fn max_line_bytes(&self) -> usize {
        self.inner.config().max_line_bytes
    }

    /// Whether empty lines are skipped.
    #[getter]
    fn skip_empty_lines(&self) -> bool {
        self.inner.config().skip_empty_lines
    }
}
