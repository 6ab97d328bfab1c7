//! The subprocess JSONL turn machine: seed 000's `SubprocessAdapter` protocol, sans-IO.

use std::collections::VecDeque;

use serde_json::{json, Map, Value};

use super::error::AdapterError;
use super::turn::TurnResult;
use super::usage::usage_from_mapping;
use crate::framing::{push_draining, FramerConfig, FramingError, LineFramer};
use crate::wire::{parse_value, DecodeError};

/// Default [`SubprocessConfig::max_line_bytes`]: 1 MiB. Larger than the framer's 64 KiB
/// default because one `result` line carries the turn's whole final text.
pub const DEFAULT_TURN_MAX_LINE_BYTES: usize = 1024 * 1024;

/// Configuration of a [`SubprocessSession`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SubprocessConfig {
    /// Longest stdout line accepted from the child, in bytes before the `\n`. Default
    /// [`DEFAULT_TURN_MAX_LINE_BYTES`]. A longer line is a `line_too_long` adapter error
    /// naming the line; it is never buffered beyond this bound.
    pub max_line_bytes: usize,
}

impl Default for SubprocessConfig {
    fn default() -> Self {
        Self {
            max_line_bytes: DEFAULT_TURN_MAX_LINE_BYTES,
        }
    }
}

impl SubprocessConfig {
    /// A configuration with the given line bound.
    pub fn with_max_line_bytes(max_line_bytes: usize) -> Self {
        Self { max_line_bytes }
    }
}

/// What the host feeds the machine.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SubprocessInput {
    /// Start a turn with this prompt.
    StartTurn {
        /// The prompt (content: goes to the child only).
        prompt: String,
    },
    /// Bytes read from the child's stdout, in any chunking.
    Stdout(Vec<u8>),
    /// The child's stdout reached end of file.
    Eof,
}

/// What the machine asks of the host, or reports.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum SubprocessOutput {
    /// Write these bytes (one JSON line, `\n`-terminated) to the child's stdin.
    WriteStdin(String),
    /// A progress event from the child: any line whose `type` is not `result` or `error`,
    /// as the JSON object it was.
    Progress(Map<String, Value>),
    /// The turn ended with a result.
    TurnResult(TurnResult),
    /// The turn (and, unless the code is `harness_error`, the session) ended with an
    /// adapter error.
    Error(AdapterError),
    /// Nothing more until the next input.
    Waiting,
}

impl SubprocessOutput {
    /// JSON form: `{"type":"write_stdin","data"}`, `{"type":"progress","event"}`,
    /// `{"type":"turn_result","text","usage"}`, `{"type":"error","code","line_number"}`
    /// (plus `"message"` for `harness_error`), `{"type":"waiting"}`.
    pub fn to_value(&self) -> Value {
        match self {
            SubprocessOutput::WriteStdin(data) => json!({"type": "write_stdin", "data": data}),
            SubprocessOutput::Progress(event) => json!({"type": "progress", "event": event}),
            SubprocessOutput::TurnResult(r) => {
                json!({"type": "turn_result", "text": r.text, "usage": r.usage.to_value()})
            }
            SubprocessOutput::Error(e) => {
                let mut v = e.to_value();
                if let Value::Object(m) = &mut v {
                    let mut out = Map::new();
                    out.insert("type".into(), json!("error"));
                    out.extend(std::mem::take(m));
                    return Value::Object(out);
                }
                v
            }
            SubprocessOutput::Waiting => json!({"type": "waiting"}),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Idle,
    InTurn,
    Closed,
}

/// One child process's JSONL session, driven turn by turn.
///
/// # Protocol
///
/// * `start_turn(prompt)` writes `{"type":"turn","prompt":…}` + `\n` to the child's stdin.
/// * Each stdout line is a JSON object with a string `type`:
///   `{"type":"result","text":string,"usage":object}` ends the turn with a
///   [`TurnResult`] (usage mapped by
///   [`usage_from_mapping`](super::usage::usage_from_mapping));
///   `{"type":"error","message":string}` ends the turn with a `harness_error`; any other
///   `type` is a progress event, passed through. Empty lines are skipped. Extra keys in
///   `result` and `error` lines are ignored.
/// * Stream-level faults close the session (the child is out of sync and should be
///   stopped): a line that is not JSON (`not_json`), too long (`line_too_long`), not UTF-8
///   (`invalid_utf8`), not a message (`invalid_message`), a bad result (`invalid_result`,
///   `invalid_usage`), a `result`/`error` outside a turn (`unexpected_message`), and end of
///   file during a turn (`unexpected_eof`). Errors name the 1-based stdout line number;
///   numbering runs across turns. A `harness_error` ends only the turn.
///
/// # Call order
///
/// Call [`handle_input`](Self::handle_input) with `start_turn`, then with each chunk of
/// stdout and finally `eof`; after every call drain [`poll_output`](Self::poll_output)
/// until it returns [`SubprocessOutput::Waiting`]. The machine has no timers: `now_ms` is
/// accepted for the uniform machine shape and not used. Once closed, stdout bytes and
/// `eof` are ignored and `start_turn` is `session_closed`.
///
/// ```
/// use stapel_runner_protocol::adapter::{SubprocessConfig, SubprocessInput, SubprocessOutput, SubprocessSession};
///
/// let mut s = SubprocessSession::new(SubprocessConfig::default());
/// s.handle_input(0, SubprocessInput::StartTurn { prompt: "hi".into() }).unwrap();
/// assert_eq!(s.poll_output(), SubprocessOutput::WriteStdin("{\"type\":\"turn\",\"prompt\":\"hi\"}\n".into()));
/// s.handle_input(0, SubprocessInput::Stdout(br#"{"type":"result","text":"ok","usage":{"input_tokens":3,"output_tokens":1}}
/// "#.to_vec())).unwrap();
/// let SubprocessOutput::TurnResult(r) = s.poll_output() else { panic!() };
/// assert_eq!((r.text.as_str(), r.usage.total_tokens()), ("ok", 4));
/// ```
#[derive(Debug, Clone)]
pub struct SubprocessSession {
    framer: LineFramer,
    state: State,
    line_number: u64,
    pending: VecDeque<SubprocessOutput>,
}

impl SubprocessSession {
    /// A session with no turn in progress.
    pub fn new(config: SubprocessConfig) -> Self {
        let mut framer_config = FramerConfig::with_max_line_bytes(config.max_line_bytes);
        // Empty lines are counted here (so line numbers match the stream) and skipped.
        framer_config.skip_empty_lines = false;
        Self {
            framer: LineFramer::new(framer_config),
            state: State::Idle,
            line_number: 0,
            pending: VecDeque::new(),
        }
    }

    /// `true` while a turn waits for its result.
    pub fn in_turn(&self) -> bool {
        self.state == State::InTurn
    }

    /// `true` once the session is closed (end of file, or a stream-level fault).
    pub fn is_closed(&self) -> bool {
        self.state == State::Closed
    }

    /// Feed one input. See the [type docs](Self).
    ///
    /// # Errors
    /// Local misuse only: `turn_in_progress` (a turn is running) or `session_closed`
    /// (`start_turn` after the session closed). Harness faults are reported as
    /// [`SubprocessOutput::Error`].
    pub fn handle_input(
        &mut self,
        now_ms: u64,
        input: SubprocessInput,
    ) -> Result<(), AdapterError> {
        let _ = now_ms;
        match input {
            SubprocessInput::StartTurn { prompt } => match self.state {
                State::InTurn => Err(AdapterError::TurnInProgress),
                State::Closed => Err(AdapterError::SessionClosed),
                State::Idle => {
                    let mut line = json!({"type": "turn", "prompt": prompt}).to_string();
                    line.push('\n');
                    self.state = State::InTurn;
                    self.pending.push_back(SubprocessOutput::WriteStdin(line));
                    Ok(())
                }
            },
            SubprocessInput::Stdout(bytes) => {
                if self.state != State::Closed {
                    // The framer only refuses bytes after `finish`, which happens only
                    // together with closing; closed sessions never reach this push.
                    if push_draining(self, |s| &mut s.framer, &bytes, Self::drain_lines).is_ok() {
                        self.drain_lines();
                    }
                }
                Ok(())
            }
            SubprocessInput::Eof => {
                if self.state != State::Closed {
                    self.framer.finish();
                    self.drain_lines();
                    if self.state == State::InTurn {
                        self.pending
                            .push_back(SubprocessOutput::Error(AdapterError::UnexpectedEof));
                    }
                    self.state = State::Closed;
                }
                Ok(())
            }
        }
    }

    /// Next output; [`SubprocessOutput::Waiting`] when nothing more is ready.
    pub fn poll_output(&mut self) -> SubprocessOutput {
        self.pending
            .pop_front()
            .unwrap_or(SubprocessOutput::Waiting)
    }

    fn drain_lines(&mut self) {
        while let Some(item) = self.framer.poll_line() {
            if self.state == State::Closed {
                continue;
            }
            match item {
                Ok(line) => {
                    self.line_number += 1;
                    self.handle_line(&line);
                }
                Err(FramingError::LineTooLong {
                    line_number,
                    max_line_bytes,
                }) => {
                    self.line_number = line_number;
                    self.close_with(AdapterError::LineTooLong {
                        line_number,
                        max_line_bytes,
                    });
                }
                Err(FramingError::InvalidUtf8 { line_number, .. }) => {
                    self.line_number = line_number;
                    self.close_with(AdapterError::InvalidUtf8 { line_number });
                }
                Err(_) => {}
            }
        }
    }

    fn close_with(&mut self, e: AdapterError) {
        self.state = State::Closed;
        self.pending.push_back(SubprocessOutput::Error(e));
    }

    fn handle_line(&mut self, line: &str) {
        let n = self.line_number;
        if line.trim().is_empty() {
            return;
        }
        let value = match parse_value(line.as_bytes()) {
            Ok(v) => v,
            Err(DecodeError::DuplicateKey { message }) => {
                return self.close_with(AdapterError::InvalidMessage {
                    line_number: n,
                    reason: message,
                })
            }
            Err(e) => {
                return self.close_with(AdapterError::NotJson {
                    line_number: n,
                    reason: e.to_string(),
                })
            }
        };
        let Value::Object(obj) = value else {
            return self.close_with(AdapterError::InvalidMessage {
                line_number: n,
                reason: "a message must be a JSON object".into(),
            });
        };
        let Some(ty) = obj.get("type").and_then(Value::as_str) else {
            return self.close_with(AdapterError::InvalidMessage {
                line_number: n,
                reason: "`type` must be a string".into(),
            });
        };
        match ty {
            "result" | "error" if self.state != State::InTurn => {
                let message_type = ty.to_owned();
                self.close_with(AdapterError::UnexpectedMessage {
                    line_number: n,
                    message_type,
                })
            }
            "result" => match Self::result(&obj) {
                Ok(r) => {
                    self.state = State::Idle;
                    self.pending.push_back(SubprocessOutput::TurnResult(r));
                }
                Err(e) => self.close_with(e.with_line(n)),
            },
            "error" => match obj.get("message").and_then(Value::as_str) {
                Some(message) => {
                    self.state = State::Idle;
                    self.pending
                        .push_back(SubprocessOutput::Error(AdapterError::HarnessError {
                            line_number: n,
                            message: message.to_owned(),
                        }));
                }
                None => self.close_with(AdapterError::InvalidMessage {
                    line_number: n,
                    reason: "an error message needs a string `message`".into(),
                }),
            },
            _ => self.pending.push_back(SubprocessOutput::Progress(obj)),
        }
    }

    fn result(obj: &Map<String, Value>) -> Result<TurnResult, AdapterError> {
        let bad = |reason: &str| AdapterError::InvalidResult {
            line_number: None,
            reason: reason.to_owned(),
        };
        let text = obj
            .get("text")
            .and_then(Value::as_str)
            .ok_or_else(|| bad("`text` must be a string"))?;
        let usage = obj
            .get("usage")
            .filter(|u| !u.is_null())
            .ok_or_else(|| bad("`usage` is required"))?;
        TurnResult::try_new(text, usage_from_mapping(usage)?)
    }
}
