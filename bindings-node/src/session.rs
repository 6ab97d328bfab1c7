//! Area `session`: the hub-side and runner-side connection machines
//! (`session::HubSession`, `session::RunnerSession`) behind one class, driven through the
//! core's `Machine` trait. Outputs cross as JSON text tagged with the core's
//! `Output::kind`.

use napi::bindgen_prelude::{Buffer, Uint8Array};
use napi_derive::napi;
use serde_json::{json, Value};
use stapel_runner_protocol::sequencing::{ConnectionState, Resync};
use stapel_runner_protocol::session::{
    Event, HubSession, Input, Machine, Output, RunnerSession, SessionConfig, SessionError,
};
use stapel_runner_protocol::wire::{self, Hello, Message};

use crate::errors::{bad_argument, config_error, fail, guard, parse_arg};
use crate::wire::{message_from_text, message_text};

/// A time or other `u64` from JS: a non-negative integral number; values beyond
/// `u64::MAX` saturate (a JS number above 2^53 is approximate anyway).
pub fn now_of(now_ms: f64) -> napi::Result<u64> {
    if now_ms.is_finite() && now_ms >= 0.0 && now_ms.fract() == 0.0 {
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        Ok(now_ms as u64)
    } else {
        Err(bad_argument("number", "not a non-negative integer"))
    }
}

/// A `u64` for JS: exact below 2^53, which every protocol integer is.
#[allow(clippy::cast_precision_loss)]
pub fn num(n: u64) -> f64 {
    n as f64
}

/// A stream resync as its JSON object (`attempt` only for progress streams).
pub fn resync_json(r: &Resync) -> Value {
    Value::from(r.to_value())
}

/// One output as JSON text: `kind` and its fields; a message is its canonical frame
/// (the text of its wire object), spliced in without an intermediate value.
fn output_text(o: &Output) -> String {
    let kind = o.kind();
    let with_message =
        |m: &Message| format!("{{\"kind\":\"{kind}\",\"message\":{}}}", wire::encode(m));
    match o {
        Output::Transmit(frame) => json!({"kind": kind, "frame": frame}).to_string(),
        Output::Close(reason) => json!({"kind": kind, "reason": reason.code()}).to_string(),
        Output::Event(Event::Hello(h)) => with_message(&Message::Hello(h.clone())),
        Output::Event(Event::Received(m)) => with_message(m),
        Output::Event(Event::InboundGap(r)) | Output::Event(Event::OutboundResync(r)) => {
            json!({"kind": kind, "resync": resync_json(r)}).to_string()
        }
        Output::Event(Event::PeerError { code, detail }) => {
            json!({"kind": kind, "code": code, "detail": detail}).to_string()
        }
        Output::Event(_) => json!({"kind": kind}).to_string(),
    }
}

/// A session error as a thrown `ProtocolStateError` (a refused send keeps its code).
pub fn session_error(e: SessionError) -> napi::Error {
    fail("ProtocolStateError", e.code(), &e, Value::Null)
}

/// The session configuration from its JSON text (absent keys take the core's defaults).
pub fn session_config(config: Option<&str>) -> napi::Result<SessionConfig> {
    let value = match config {
        Some(text) => parse_arg("config", text)?,
        None => json!({}),
    };
    SessionConfig::from_value(&value).map_err(|e| config_error(&e))
}

/// One hub-side or runner-side connection machine.
#[napi]
pub struct NativeSession {
    machine: Box<dyn Machine>,
}

#[napi]
impl NativeSession {
    /// `side` is `hub` or `runner`; `config` the JSON text of the session
    /// configuration; `hello` (runner) the JSON text of the runner's hello template;
    /// `snapshot` a `ConnectionState` snapshot to resume from.
    #[napi(constructor)]
    pub fn new(
        side: String,
        config: Option<String>,
        hello: Option<String>,
        snapshot: Option<Uint8Array>,
    ) -> napi::Result<Self> {
        guard(|| {
            let config = session_config(config.as_deref())?;
            let state = match snapshot {
                Some(bytes) => Some(
                    ConnectionState::restore(&bytes)
                        .map_err(|e| fail("ProtocolStateError", e.code(), &e, Value::Null))?,
                ),
                None => None,
            };
            let machine: Box<dyn Machine> = match side.as_str() {
                "hub" => match state {
                    Some(s) => Box::new(HubSession::with_state(config, s)),
                    None => Box::new(HubSession::new(config)),
                },
                "runner" => {
                    let hello = match hello {
                        Some(text) => match message_from_text(&text, false)? {
                            Message::Hello(h) => h,
                            _ => return Err(bad_argument("hello", "not a hello message")),
                        },
                        None => return Err(bad_argument("hello", "a runner needs its hello")),
                    };
                    runner(hello, config, state)
                }
                other => return Err(bad_argument("side", format!("{other:?}"))),
            };
            Ok(Self { machine })
        })
    }

    /// Feed one input: `kind` is `connected`, `disconnected`, `timeout`, `frame` (with
    /// `text`), `bytes` (with `bytes`) or `send` (with `text`, a message's JSON text).
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
            let input = match (kind.as_str(), text, bytes) {
                ("connected", _, _) => Input::Connected,
                ("disconnected", _, _) => Input::Disconnected,
                ("timeout", _, _) => Input::Timeout,
                ("frame", Some(t), _) => Input::Frame(t),
                ("bytes", _, Some(b)) => Input::Bytes(b.to_vec()),
                ("send", Some(t), _) => Input::Send(message_from_text(&t, false)?),
                (other, _, _) => return Err(bad_argument("input", format!("{other:?}"))),
            };
            self.machine.handle_input(now, input).map_err(session_error)
        })
    }

    /// Feed one whole frame (a WebSocket text message).
    #[napi]
    pub fn handle_frame(&mut self, now_ms: f64, frame: String) -> napi::Result<()> {
        guard(|| {
            let now = now_of(now_ms)?;
            self.machine
                .handle_input(now, Input::Frame(frame))
                .map_err(session_error)
        })
    }

    /// Feed whole frames in order, then drain: every output as the JSON text of an
    /// array. A refused frame input stops the batch with its error.
    #[napi]
    pub fn handle_frames(&mut self, now_ms: f64, frames: Vec<String>) -> napi::Result<String> {
        guard(|| {
            let now = now_of(now_ms)?;
            let mut out = String::from("[");
            for frame in frames {
                self.machine
                    .handle_input(now, Input::Frame(frame))
                    .map_err(session_error)?;
                while let Some(o) = self.machine.poll_output() {
                    if out.len() > 1 {
                        out.push(',');
                    }
                    out.push_str(&output_text(&o));
                }
            }
            out.push(']');
            Ok(out)
        })
    }

    /// Send a sequenced message; the stamped message's JSON text.
    #[napi]
    pub fn send(&mut self, now_ms: f64, message: String) -> napi::Result<String> {
        guard(|| {
            let now = now_of(now_ms)?;
            let msg = message_from_text(&message, false)?;
            let stamped = self.machine.send(now, msg).map_err(session_error)?;
            message_text(&stamped.message)
        })
    }

    /// The next output as JSON text (`kind` and its fields), or `null`.
    #[napi]
    pub fn poll_output(&mut self) -> napi::Result<Option<String>> {
        guard(|| match self.machine.poll_output() {
            Some(o) => Ok(Some(output_text(&o))),
            None => Ok(None),
        })
    }

    /// Every pending output as the JSON text of an array.
    #[napi]
    pub fn drain_outputs(&mut self) -> napi::Result<String> {
        guard(|| {
            let mut out = String::from("[");
            while let Some(o) = self.machine.poll_output() {
                if out.len() > 1 {
                    out.push(',');
                }
                out.push_str(&output_text(&o));
            }
            out.push(']');
            Ok(out)
        })
    }

    /// The absolute deadline for the next `timeout` input, or `null`.
    #[napi]
    pub fn poll_timeout(&self) -> napi::Result<Option<f64>> {
        guard(|| Ok(self.machine.poll_timeout().map(num)))
    }

    /// Whether a transport connection is up.
    #[napi]
    pub fn is_connected(&self) -> napi::Result<bool> {
        guard(|| Ok(self.machine.is_connected()))
    }

    /// The sequencing state's snapshot bytes.
    #[napi]
    pub fn snapshot(&self) -> napi::Result<Buffer> {
        guard(|| Ok(self.machine.state().snapshot().into()))
    }

    /// The state's resume map as JSON text.
    #[napi]
    pub fn resume_map(&self) -> napi::Result<String> {
        guard(|| {
            serde_json::to_string(&self.machine.state().resume_map())
                .map_err(|e| bad_argument("resume map", e))
        })
    }

    /// Frames kept for replay.
    #[napi]
    pub fn outbox_frames(&self) -> napi::Result<f64> {
        guard(|| Ok(num(self.machine.state().outbox_frames() as u64)))
    }

    /// Forget a finished task's streams; whether it was known.
    #[napi]
    pub fn forget_task(&mut self, task_id: String) -> napi::Result<bool> {
        guard(|| Ok(self.machine.state_mut().forget_task(&task_id)))
    }

    /// The session's counters as JSON text.
    #[napi]
    pub fn stats(&self) -> napi::Result<String> {
        guard(|| {
            let s = self.machine.stats();
            Ok(json!({
                "delivered": s.delivered,
                "duplicates": s.duplicates,
                "held": s.held,
                "held_dropped": s.held_dropped,
                "held_now": s.held_now,
                "transmitted": s.transmitted,
            })
            .to_string())
        })
    }
}

fn runner(hello: Hello, config: SessionConfig, state: Option<ConnectionState>) -> Box<dyn Machine> {
    match state {
        Some(s) => Box::new(RunnerSession::with_state(hello, config, s)),
        None => Box::new(RunnerSession::new(hello, config)),
    }
}
