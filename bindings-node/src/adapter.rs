//! Area `adapter`: the harness-adapter seam as data: `RoleSpec` from an invocation,
//! agent options and turns, usage mapping from provider shapes, `TurnResult`
//! validation, host faults, and the subprocess JSONL turn machine. Values cross as JSON
//! text.

use napi::bindgen_prelude::Uint8Array;
use napi_derive::napi;
use serde_json::{json, Value};
use stapel_runner_protocol::adapter::usage::{
    usage_detail_keys, ANTHROPIC_USAGE_KEYS, OPENAI_USAGE_KEYS,
};
use stapel_runner_protocol::adapter::{
    self, usage_from_anthropic, usage_from_anthropic_with_thinking, usage_from_mapping,
    usage_from_openai, AdapterError, AgentOptions, AgentTurn, RoleSpec, SpawnSpec,
    SubprocessConfig, SubprocessInput, SubprocessSession, TurnResult,
};

use crate::errors::{bad_argument, config_error, fail, guard, parse_arg};
use crate::session::now_of;
use crate::wire::num;

/// An adapter error as a thrown `AdapterError` (or `AdapterUnavailableError`) carrying
/// the core's JSON form of the error as `details`.
fn adapter_error(e: &AdapterError) -> napi::Error {
    fail(
        "adapter",
        e.code(),
        e,
        json!({"details": e.to_value(), "line_number": e.line_number()}),
    )
}

fn role_spec(invocation: &str, role: Option<&str>) -> napi::Result<RoleSpec> {
    match parse_arg("invocation", invocation)? {
        Value::Object(inv) => RoleSpec::from_invocation(&inv, role).map_err(|e| adapter_error(&e)),
        _ => Err(bad_argument("invocation", "not an object")),
    }
}

/// The role spec of an invocation (JSON text) and optional role, as JSON text.
#[napi]
pub fn role_spec_from_invocation(invocation: String, role: Option<String>) -> napi::Result<String> {
    guard(|| {
        Ok(role_spec(&invocation, role.as_deref())?
            .to_value()
            .to_string())
    })
}

/// The system prompt of the role spec of an invocation, or `null`.
#[napi]
pub fn role_spec_system_prompt(
    invocation: String,
    role: Option<String>,
) -> napi::Result<Option<String>> {
    guard(|| {
        Ok(role_spec(&invocation, role.as_deref())?
            .system_prompt()
            .map(str::to_owned))
    })
}

/// The agent options of the role spec of an invocation, with an optional system prompt
/// override (`undefined`: keep; `null`: none), as JSON text.
#[napi]
pub fn agent_options(
    invocation: String,
    role: Option<String>,
    override_prompt: bool,
    system_prompt: Option<String>,
) -> napi::Result<String> {
    guard(|| {
        let mut spec = role_spec(&invocation, role.as_deref())?;
        if override_prompt {
            spec.set_system_prompt(system_prompt);
        }
        Ok(AgentOptions::from_role(&spec).to_value().to_string())
    })
}

/// Fold an agent turn: its text blocks and, when it ended with a result, the result's
/// usage (JSON text; `null` text for a result without usage). The turn result as JSON
/// text.
#[napi]
pub fn agent_turn(
    text_blocks: Vec<String>,
    has_result: bool,
    usage: Option<String>,
) -> napi::Result<String> {
    guard(|| {
        let mut turn = AgentTurn::new();
        for b in &text_blocks {
            turn.text_block(b);
        }
        if has_result {
            let usage = match usage {
                Some(t) => Some(parse_arg("usage", &t)?),
                None => None,
            };
            turn.result(usage);
        }
        let r = turn.finish().map_err(|e| adapter_error(&e))?;
        Ok(r.to_value().to_string())
    })
}

/// The keys the core reads from a usage object of `shape` (`anthropic`, `openai`).
#[napi]
pub fn usage_keys(shape: String) -> napi::Result<Vec<String>> {
    guard(|| {
        let keys: &[&str] = match shape.as_str() {
            "anthropic" => &ANTHROPIC_USAGE_KEYS,
            "openai" => &OPENAI_USAGE_KEYS,
            other => return Err(bad_argument("shape", format!("{other:?}"))),
        };
        Ok(keys.iter().map(|k| (*k).to_owned()).collect())
    })
}

/// The keys the core reads inside the detail object at `key`, or `null`.
#[napi]
pub fn usage_detail_key_list(key: String) -> napi::Result<Option<Vec<String>>> {
    guard(|| Ok(usage_detail_keys(&key).map(|k| k.iter().map(|s| (*s).to_owned()).collect())))
}

/// Map a provider usage object (JSON text) of `shape` (`anthropic`, `openai`,
/// `mapping`) to a UsageSplit; `thinking` overrides the anthropic thinking tokens.
/// `{usage, total_tokens}` as JSON text.
#[napi]
pub fn usage_from(shape: String, usage: String, thinking: Option<f64>) -> napi::Result<String> {
    guard(|| {
        let v = parse_arg("usage", &usage)?;
        let split = match (shape.as_str(), thinking) {
            ("anthropic", Some(t)) => usage_from_anthropic_with_thinking(&v, now_of(t)?),
            ("anthropic", None) => usage_from_anthropic(&v),
            ("openai", None) => usage_from_openai(&v),
            ("mapping", None) => usage_from_mapping(&v),
            (other, _) => return Err(bad_argument("shape", format!("{other:?}"))),
        }
        .map_err(|e| adapter_error(&e))?;
        Ok(json!({
            "usage": Value::from(split.to_value()),
            "total_tokens": split.total_tokens(),
        })
        .to_string())
    })
}

/// Validate a turn result (JSON text) strictly; its JSON text.
#[napi]
pub fn turn_result_from_value(value: String) -> napi::Result<String> {
    guard(|| {
        let r = TurnResult::from_value(&parse_arg("turn result", &value)?)
            .map_err(|e| adapter_error(&e))?;
        Ok(r.to_value().to_string())
    })
}

/// Throw the adapter error a host fault code stands for, or return `false` when the code
/// is not a host fault.
#[napi]
pub fn host_fault(code: String, message: String) -> napi::Result<bool> {
    guard(|| match AdapterError::host_fault(&code, message) {
        Some(e) => Err(adapter_error(&e)),
        None => Ok(false),
    })
}

/// The adapter defaults: `{role, session, grace_ms, turn_max_line_bytes}` as JSON text.
#[napi]
pub fn adapter_defaults() -> napi::Result<String> {
    guard(|| {
        Ok(json!({
            "role": adapter::DEFAULT_ROLE,
            "session": adapter::DEFAULT_SESSION,
            "grace_ms": adapter::DEFAULT_GRACE_MS,
            "turn_max_line_bytes": adapter::DEFAULT_TURN_MAX_LINE_BYTES,
        })
        .to_string())
    })
}

fn spawn_spec(v: &Value) -> napi::Result<SpawnSpec> {
    let command = v["command"]
        .as_array()
        .and_then(|a| {
            a.iter()
                .map(|s| s.as_str().map(str::to_owned))
                .collect::<Option<Vec<_>>>()
        })
        .ok_or_else(|| bad_argument("command", "not a list of strings"))?;
    let mut spec = SpawnSpec::new(command, v["path"].as_str().unwrap_or_default());
    if let Some(env) = v.get("env").and_then(Value::as_object) {
        for (k, x) in env {
            let x = x
                .as_str()
                .ok_or_else(|| bad_argument("env", "values are strings"))?;
            spec.env.push((k.clone(), x.to_owned()));
        }
    }
    spec.llm_base_url = v
        .get("llm_base_url")
        .and_then(Value::as_str)
        .map(str::to_owned);
    spec.cwd = v.get("cwd").and_then(Value::as_str).map(str::to_owned);
    Ok(spec)
}

/// The subprocess JSONL turn machine: one harness process, one turn at a time.
#[napi]
pub struct NativeSubprocessSession {
    session: SubprocessSession,
}

#[napi]
impl NativeSubprocessSession {
    /// `config`: JSON text with `max_line_bytes`, `grace_ms`, `map_usage` (absent keys take the
    /// core's defaults; the core's config reader refuses anything else).
    #[napi(constructor)]
    pub fn new(config: Option<String>) -> napi::Result<Self> {
        guard(|| {
            let v = match config {
                Some(t) => parse_arg("config", &t)?,
                None => json!({}),
            };
            let c = SubprocessConfig::from_value(&v).map_err(|e| config_error(&e))?;
            Ok(Self {
                session: SubprocessSession::new(c),
            })
        })
    }

    /// Feed one input: `kind` is `open` (with `value`: the spawn spec's JSON text),
    /// `spawned` (with `value`: `{pid, process_group}`), `spawn_failed`,
    /// `stdin_write_failed` (with `text`), `start_turn` (with `text`), `stdout` (with
    /// `bytes`), `eof`, `exited`, `close` or `timeout`.
    #[napi]
    pub fn handle(
        &mut self,
        now_ms: f64,
        kind: String,
        text: Option<String>,
        bytes: Option<Uint8Array>,
    ) -> napi::Result<()> {
        guard(|| {
            let now = now_of(now_ms)?;
            let text_arg = || {
                text.clone()
                    .ok_or_else(|| bad_argument(&kind, "missing text"))
            };
            let input = match kind.as_str() {
                "open" => SubprocessInput::Open(spawn_spec(&parse_arg("spec", &text_arg()?)?)?),
                "spawned" => {
                    let v = parse_arg("spawned", &text_arg()?)?;
                    let pid = match v.get("pid") {
                        None | Some(Value::Null) => None,
                        Some(p) => Some(
                            p.as_u64()
                                .and_then(|p| u32::try_from(p).ok())
                                .ok_or_else(|| bad_argument("pid", "not a u32"))?,
                        ),
                    };
                    SubprocessInput::Spawned {
                        pid,
                        process_group: v["process_group"].as_bool().unwrap_or(false),
                    }
                }
                "spawn_failed" => SubprocessInput::SpawnFailed {
                    message: text_arg()?,
                },
                "stdin_write_failed" => SubprocessInput::StdinWriteFailed {
                    message: text_arg()?,
                },
                "start_turn" => SubprocessInput::StartTurn {
                    prompt: text_arg()?,
                },
                "stdout" => SubprocessInput::Stdout(
                    bytes
                        .as_ref()
                        .map(|b| b.to_vec())
                        .ok_or_else(|| bad_argument("stdout", "missing bytes"))?,
                ),
                "eof" => SubprocessInput::Eof,
                "exited" => SubprocessInput::Exited,
                "close" => SubprocessInput::Close,
                "timeout" => SubprocessInput::Timeout,
                other => return Err(bad_argument("input", format!("{other:?}"))),
            };
            self.session
                .handle_input(now, input)
                .map_err(|e| adapter_error(&e))
        })
    }

    /// The next output as JSON text (`type` and its fields), or `null`.
    #[napi]
    pub fn poll_output(&mut self) -> napi::Result<Option<String>> {
        guard(|| Ok(self.session.poll_output().map(|o| o.to_value().to_string())))
    }

    /// Every pending output as the JSON text of an array.
    #[napi]
    pub fn drain_outputs(&mut self) -> napi::Result<String> {
        guard(|| {
            let mut out = Vec::new();
            while let Some(o) = self.session.poll_output() {
                out.push(o.to_value());
            }
            Ok(Value::Array(out).to_string())
        })
    }

    /// The absolute deadline for the next `timeout` input, or `null`.
    #[napi]
    pub fn poll_timeout(&self) -> napi::Result<Option<f64>> {
        guard(|| Ok(self.session.poll_timeout().map(num)))
    }

    /// Whether a turn is running.
    #[napi]
    pub fn in_turn(&self) -> napi::Result<bool> {
        guard(|| Ok(self.session.in_turn()))
    }

    /// Whether the session is closed.
    #[napi]
    pub fn is_closed(&self) -> napi::Result<bool> {
        guard(|| Ok(self.session.is_closed()))
    }

    /// The lifecycle state's name.
    #[napi]
    pub fn lifecycle(&self) -> napi::Result<String> {
        guard(|| Ok(self.session.state().as_str().to_owned()))
    }

    /// The `result` line that ended the latest turn, as JSON object text (every key the
    /// child wrote), or `null` before the first result.
    #[napi]
    pub fn result_line(&self) -> napi::Result<Option<String>> {
        guard(|| {
            Ok(self
                .session
                .result_line()
                .map(|m| Value::Object(m.clone()).to_string()))
        })
    }
}
