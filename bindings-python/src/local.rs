//! `LocalRun`: the core's local-run machine (seed 002), sans-IO.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString, PyTuple};
use serde_json::Value;
use stapel_runner_protocol::local::{Input, LocalConfig, LocalError, LocalRun, Output};

use crate::errors::raise;
use crate::json::py_to_value;

fn local_error(py: Python<'_>, e: &LocalError) -> PyErr {
    raise(py, "local", e.to_string(), e.code())
}

fn output_to_py<'py>(py: Python<'py>, o: Output) -> PyResult<Bound<'py, PyTuple>> {
    let pair = |kind: &str, v: Bound<'py, PyAny>| {
        PyTuple::new(py, [PyString::new(py, kind).into_any(), v])
    };
    match o {
        Output::ToController(line) => pair("to_controller", PyString::new(py, &line).into_any()),
        Output::ToHarness(line) => pair("to_harness", PyString::new(py, &line).into_any()),
        Output::Spawn(s) => {
            let d = PyDict::new(py);
            d.set_item("program", &s.program)?;
            d.set_item("args", &s.args)?;
            d.set_item("env", &s.env)?;
            d.set_item("new_process_group", s.new_process_group)?;
            pair("spawn", d.into_any())
        }
        Output::CloseHarnessStdin => pair("close_harness_stdin", py.None().into_bound(py)),
        Output::Signal { group, signal } => {
            let d = PyDict::new(py);
            d.set_item("group", group)?;
            d.set_item("signal", signal.as_str())?;
            pair("signal", d.into_any())
        }
        Output::Exit(code) => pair("exit", code.into_pyobject(py)?.into_any()),
        other => pair(
            "unknown",
            PyString::new(py, &format!("{other:?}")).into_any(),
        ),
    }
}

/// The local-run machine: the host owns the processes, pipes and clock; the machine owns
/// every decision. Feed what happened (`controller_bytes`, `controller_eof`,
/// `harness_stdout`, `harness_stderr`, `harness_spawned`, `harness_spawn_failed`,
/// `harness_exited`, `timeout`, each with a monotonic `now_ms`), then drain
/// `poll_output()` until `("timeout", deadline)` and perform every output in order:
/// `("to_controller", line)`, `("to_harness", line)` (write the line plus `\n`),
/// `("spawn", {"program", "args", "env", "new_process_group"})`,
/// `("close_harness_stdin", None)`, `("signal", {"group", "signal"})`, `("exit", code)`.
/// Misuse raises `ProtocolStateError` with the core's code.
#[pyclass(module = "stapel_runner_protocol.local", name = "LocalRun")]
pub struct PyLocalRun {
    inner: LocalRun,
}

impl PyLocalRun {
    /// The next output in the Python shape: the core's output, or `("timeout", deadline)`
    /// (the core's `poll_timeout`) once drained.
    fn next_output<'py>(&mut self, py: Python<'py>) -> PyResult<(bool, Bound<'py, PyTuple>)> {
        match self.inner.poll_output() {
            Some(o) => Ok((false, output_to_py(py, o)?)),
            None => {
                let deadline = self.inner.poll_timeout();
                let t = PyTuple::new(
                    py,
                    [
                        PyString::new(py, "timeout").into_any(),
                        deadline.into_pyobject(py)?.into_any(),
                    ],
                )?;
                Ok((true, t))
            }
        }
    }

    fn input(&mut self, py: Python<'_>, now_ms: u64, input: Input) -> PyResult<()> {
        self.inner
            .handle_input(now_ms, input)
            .map_err(|e| local_error(py, &e))
    }
}

#[pymethods]
impl PyLocalRun {
    /// `config`: a dict of the core's `LocalConfig` fields (see conformance/README.md).
    #[new]
    #[pyo3(signature = (config = None))]
    fn new(py: Python<'_>, config: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        let v = match config {
            Some(c) if !c.is_none() => py_to_value(c)?,
            _ => Value::Object(Default::default()),
        };
        let config =
            LocalConfig::from_value(&v).map_err(|e| crate::session::config_error(py, &e))?;
        let inner = LocalRun::new(config).map_err(|e| local_error(py, &e))?;
        Ok(Self { inner })
    }

    /// Bytes read from the controller (runner stdin), any chunking.
    fn controller_bytes(&mut self, py: Python<'_>, now_ms: u64, data: &[u8]) -> PyResult<()> {
        self.input(py, now_ms, Input::ControllerBytes(data.to_vec()))
    }
    /// The controller closed its stream.
    fn controller_eof(&mut self, py: Python<'_>, now_ms: u64) -> PyResult<()> {
        self.input(py, now_ms, Input::ControllerEof)
    }
    /// Bytes read from the harness stdout.
    fn harness_stdout(&mut self, py: Python<'_>, now_ms: u64, data: &[u8]) -> PyResult<()> {
        self.input(py, now_ms, Input::HarnessStdout(data.to_vec()))
    }
    /// Bytes read from the harness stderr.
    fn harness_stderr(&mut self, py: Python<'_>, now_ms: u64, data: &[u8]) -> PyResult<()> {
        self.input(py, now_ms, Input::HarnessStderr(data.to_vec()))
    }
    /// The spawn succeeded; `pid` is also the process group id.
    fn harness_spawned(&mut self, py: Python<'_>, now_ms: u64, pid: u32) -> PyResult<()> {
        self.input(py, now_ms, Input::HarnessSpawned { pid })
    }
    /// The spawn failed with this OS error text.
    fn harness_spawn_failed(&mut self, py: Python<'_>, now_ms: u64, message: &str) -> PyResult<()> {
        self.input(
            py,
            now_ms,
            Input::HarnessSpawnFailed {
                message: message.to_owned(),
            },
        )
    }
    /// The harness leader was reaped (deliver all its output first).
    #[pyo3(signature = (now_ms, code = None, signal = None))]
    fn harness_exited(
        &mut self,
        py: Python<'_>,
        now_ms: u64,
        code: Option<i32>,
        signal: Option<i32>,
    ) -> PyResult<()> {
        self.input(py, now_ms, Input::HarnessExited { code, signal })
    }
    /// The deadline of the last timeout passed.
    fn timeout(&mut self, py: Python<'_>, now_ms: u64) -> PyResult<()> {
        self.input(py, now_ms, Input::Timeout)
    }

    /// The next output (a `(kind, value)` pair); `("timeout", deadline)` last.
    fn poll_output<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        self.next_output(py).map(|(_, o)| o)
    }

    /// Every output up to and including the next `("timeout", deadline)`.
    fn drain_outputs<'py>(&mut self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyTuple>>> {
        let mut out = Vec::new();
        loop {
            let (done, o) = self.next_output(py)?;
            out.push(o);
            if done {
                return Ok(out);
            }
        }
    }
}
