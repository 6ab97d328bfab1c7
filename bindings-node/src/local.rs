//! Area `local`: the local-run machine of seed 002 (`local::LocalRun`): controller
//! commands in, canonical events and receipts out, and the spawn/signal/exit actions the
//! host performs. Outputs cross as JSON text tagged with the core's `Output::kind`.

use napi::bindgen_prelude::Uint8Array;
use napi_derive::napi;
use serde_json::{json, Value};
use stapel_runner_protocol::local::{Input, LocalConfig, LocalError, LocalRun, Output};

use crate::errors::{bad_argument, config_error, fail, guard, parse_arg};
use crate::session::now_of;
use crate::wire::num;

fn local_error(e: &LocalError) -> napi::Error {
    fail("local", e.code(), e, Value::Null)
}

fn output_json(o: &Output) -> Value {
    let kind = o.kind();
    match o {
        Output::ToController(line) | Output::ToHarness(line) => json!({"kind": kind, "line": line}),
        Output::Spawn(s) => json!({
            "kind": kind,
            "program": s.program,
            "args": s.args,
            "env": s.env,
            "new_process_group": s.new_process_group,
        }),
        Output::Signal { group, signal } => {
            json!({"kind": kind, "group": group, "signal": signal.as_str()})
        }
        Output::Exit(code) => json!({"kind": kind, "code": code}),
        _ => json!({"kind": kind}),
    }
}

fn opt_i32(v: Option<f64>) -> napi::Result<Option<i32>> {
    v.map(|n| {
        if n.fract() == 0.0 && n >= f64::from(i32::MIN) && n <= f64::from(i32::MAX) {
            #[allow(clippy::cast_possible_truncation)]
            Ok(n as i32)
        } else {
            Err(bad_argument("exit", "not a 32-bit integer"))
        }
    })
    .transpose()
}

/// One local run: the machine between the controller and the harness process.
#[napi]
pub struct NativeLocalRun {
    run: LocalRun,
}

#[napi]
impl NativeLocalRun {
    /// `config`: the JSON text of the local configuration (absent keys take the core's
    /// defaults).
    #[napi(constructor)]
    pub fn new(config: Option<String>) -> napi::Result<Self> {
        guard(|| {
            let v = match config {
                Some(t) => parse_arg("config", &t)?,
                None => json!({}),
            };
            let config = LocalConfig::from_value(&v).map_err(|e| config_error(&e))?;
            Ok(Self {
                run: LocalRun::new(config).map_err(|e| local_error(&e))?,
            })
        })
    }

    /// Feed one input: `kind` is `controller_bytes`, `harness_stdout`,
    /// `harness_stderr` (with `bytes`), `controller_eof`, `harness_spawned` (with
    /// `pid`), `harness_spawn_failed` (with `message`), `harness_exited` (with `code`,
    /// `signal`) or `timeout`.
    #[napi]
    #[allow(clippy::too_many_arguments)]
    pub fn handle(
        &mut self,
        now_ms: f64,
        kind: String,
        bytes: Option<Uint8Array>,
        pid: Option<u32>,
        message: Option<String>,
        code: Option<f64>,
        signal: Option<f64>,
    ) -> napi::Result<()> {
        guard(|| {
            let now = now_of(now_ms)?;
            let data = || {
                bytes
                    .as_ref()
                    .map(|b| b.to_vec())
                    .ok_or_else(|| bad_argument("bytes", "missing"))
            };
            let input = match kind.as_str() {
                "controller_bytes" => Input::ControllerBytes(data()?),
                "controller_eof" => Input::ControllerEof,
                "harness_stdout" => Input::HarnessStdout(data()?),
                "harness_stderr" => Input::HarnessStderr(data()?),
                "harness_spawned" => Input::HarnessSpawned {
                    pid: pid.ok_or_else(|| bad_argument("pid", "missing"))?,
                },
                "harness_spawn_failed" => Input::HarnessSpawnFailed {
                    message: message.clone().unwrap_or_default(),
                },
                "harness_exited" => Input::HarnessExited {
                    code: opt_i32(code)?,
                    signal: opt_i32(signal)?,
                },
                "timeout" => Input::Timeout,
                other => return Err(bad_argument("input", format!("{other:?}"))),
            };
            self.run
                .handle_input(now, input)
                .map_err(|e| local_error(&e))
        })
    }

    /// The next output as JSON text (`kind` and its fields), or `null`.
    #[napi]
    pub fn poll_output(&mut self) -> napi::Result<Option<String>> {
        guard(|| Ok(self.run.poll_output().map(|o| output_json(&o).to_string())))
    }

    /// Every pending output as the JSON text of an array.
    #[napi]
    pub fn drain_outputs(&mut self) -> napi::Result<String> {
        guard(|| {
            let mut out = Vec::new();
            while let Some(o) = self.run.poll_output() {
                out.push(output_json(&o));
            }
            Ok(Value::Array(out).to_string())
        })
    }

    /// The absolute deadline for the next `timeout` input, or `null`.
    #[napi]
    pub fn poll_timeout(&self) -> napi::Result<Option<f64>> {
        guard(|| Ok(self.run.poll_timeout().map(num)))
    }

    /// Whether the run is over (its `exit` was emitted).
    #[napi]
    pub fn is_finished(&self) -> napi::Result<bool> {
        guard(|| Ok(self.run.is_finished()))
    }
}
