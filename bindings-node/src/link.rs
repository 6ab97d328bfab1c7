//! Area `link`: each side's whole connection driver (`link::RunnerLink`,
//! `link::HubLink`), held in an `External` handle and driven by free functions, as the
//! session machines are (see [`crate::session`]).
//!
//! Outputs stay in the link until the host polls them (a later input may drop sends
//! queued for a socket that is gone). Drained outputs use the session's scratch layout
//! ([`crate::session`]): a received `task.progress` decoded by the core's fast path
//! crosses as a record of numbers — `1, frame index, <view>` for a frame of the current
//! [`link_frames`] call, `3, serial, <view>` for one fed by [`link_frame`] (the TS layer
//! keeps those frames in a ring of [`FED`] by serial) — every other output as JSON text
//! (`2, index into the JSON array`): `kind` and its fields — `connect`, `send`, `pause`,
//! `resume`, `close`, `abort` with `socket`, and the events (the session's, and
//! `connected`, `disconnected`, `reconnecting`, `error`, `stalled`, `unstalled`,
//! `stopped`). A batch frame the link keeps in its backlog and delivers in a later call
//! takes the JSON form (rare: only while the application's queue is full).

use napi::bindgen_prelude::{BigInt, Buffer, External, Uint8Array};
use napi_derive::napi;
use serde_json::{json, Value};
use stapel_runner_protocol::errors::{error_class, table_value};
use stapel_runner_protocol::host::InboundFrame;
use stapel_runner_protocol::link::{
    self, ConnectFailure, HubLink, LinkConfig, LinkError, LinkEvent, LinkInput, LinkOutput,
    RunnerLink,
};
use stapel_runner_protocol::sequencing::ConnectionState;
use stapel_runner_protocol::session::{Event, HubSession, RunnerSession, Stamped};
use stapel_runner_protocol::wire::{self, Message, TaskProgress};
use std::collections::VecDeque;

use crate::boundary::{Frames, Text};
use crate::errors::{bad_argument, config_error, fail, guard, parse_arg};
use crate::sequencing::{restore_error, StateHandle};
use crate::session::{event_text, now_of, scan, Collector, Fed, FED};
use crate::wire::{message_from_text, num};

/// A link of either side.
// One lives per handle; boxing would only add an indirection.
#[allow(clippy::large_enum_variant)]
enum Side {
    Runner(RunnerLink),
    Hub(HubLink),
}

/// One link of either side, and the fast-path frames fed one at a time ([`link_frame`])
/// since, at most [`FED`] (newest last), for the outputs they become.
pub struct LinkHandle {
    side: Side,
    fed: VecDeque<Fed>,
    serial: u64,
}

impl LinkHandle {
    /// A handle over a hub link (one over a session rebuilt from a store's rows).
    pub(crate) fn hub(link: HubLink) -> Self {
        Self {
            side: Side::Hub(link),
            fed: VecDeque::new(),
            serial: 0,
        }
    }

    /// The hub link (`None` for a runner's).
    pub(crate) fn hub_link(&self) -> Option<&HubLink> {
        match &self.side {
            Side::Hub(l) => Some(l),
            Side::Runner(_) => None,
        }
    }

    fn handle(&mut self, now: u64, input: LinkInput) -> Result<(), LinkError> {
        match &mut self.side {
            Side::Runner(l) => l.handle_input(now, input),
            Side::Hub(l) => l.handle_input(now, input),
        }
    }

    fn poll(&mut self) -> Option<LinkOutput> {
        match &mut self.side {
            Side::Runner(l) => l.poll_output(),
            Side::Hub(l) => l.poll_output(),
        }
    }

    fn state(&self) -> &ConnectionState {
        match &self.side {
            Side::Runner(l) => l.state(),
            Side::Hub(l) => l.state(),
        }
    }

    fn state_mut(&mut self) -> &mut ConnectionState {
        match &mut self.side {
            Side::Runner(l) => l.state_mut(),
            Side::Hub(l) => l.state_mut(),
        }
    }

    fn config(&self) -> &LinkConfig {
        match &self.side {
            Side::Runner(l) => l.config(),
            Side::Hub(l) => l.config(),
        }
    }

    /// Drain every output into `c`; `batch` is the fast-path frame just fed.
    fn drain_into(&mut self, c: &mut Collector, batch: Option<&Fed>) {
        while let Some(o) = self.poll() {
            if let LinkOutput::Event(LinkEvent::Session(Event::Received(Message::TaskProgress(
                p,
            )))) = &o
            {
                if self.record(c, p, batch) {
                    continue;
                }
            }
            c.slow_text(&output_text(&o));
        }
    }

    /// Record a received progress as the frame it came from: the frame just fed (its
    /// text is alive in the link), else a frame fed by [`link_frame`] (same address,
    /// length and hash: see [`Fed`]).
    fn record(&self, c: &mut Collector, p: &TaskProgress, batch: Option<&Fed>) -> bool {
        c.progress(p, self.fed.iter().rev(), batch)
    }
}

/// A link error as a thrown error (its class from the core's table: kind `link`, or
/// `session` for the session's refusal inside).
pub fn link_error(e: &LinkError) -> napi::Error {
    match e {
        LinkError::Session(s) => fail("session", s.code(), s, Value::Null),
        other => fail("link", other.code(), other, Value::Null),
    }
}

/// One output as JSON text (see the module docs).
fn output_text(o: &LinkOutput) -> String {
    let kind = o.kind();
    match o {
        LinkOutput::Connect { socket }
        | LinkOutput::Pause { socket }
        | LinkOutput::Resume { socket }
        | LinkOutput::Abort { socket } => json!({"kind": kind, "socket": socket}).to_string(),
        LinkOutput::Send { socket, frame } => {
            json!({"kind": kind, "socket": socket, "frame": frame}).to_string()
        }
        LinkOutput::Close {
            socket,
            code,
            reason,
        } => json!({"kind": kind, "socket": socket, "code": code, "reason": reason}).to_string(),
        LinkOutput::Event(e) => link_event_text(e),
        _ => json!({ "kind": kind }).to_string(),
    }
}

/// One link event as JSON text: `kind` and its fields.
fn link_event_text(e: &LinkEvent) -> String {
    let kind = e.kind();
    match e {
        LinkEvent::Session(s) => event_text(s),
        LinkEvent::Disconnected { reason } => json!({"kind": kind, "reason": reason}).to_string(),
        LinkEvent::Reconnecting { delay_ms, failures } => {
            json!({"kind": kind, "delay_ms": delay_ms, "failures": failures}).to_string()
        }
        LinkEvent::Error {
            code,
            detail,
            status,
        } => json!({"kind": kind, "code": code, "detail": detail, "status": status}).to_string(),
        LinkEvent::Stalled {
            bound,
            kept_frames,
            kept_bytes,
            detail,
        } => json!({"kind": kind, "bound": bound, "kept_frames": kept_frames,
                    "kept_bytes": kept_bytes, "detail": detail})
        .to_string(),
        _ => json!({ "kind": kind }).to_string(),
    }
}

/// The link configuration from its JSON text (absent keys take the core's defaults).
pub(crate) fn link_config_of(config: Option<&str>) -> napi::Result<LinkConfig> {
    let value = match config {
        Some(text) => parse_arg("config", text)?,
        None => json!({}),
    };
    LinkConfig::from_value(&value).map_err(|e| config_error(&e))
}

/// The link configuration as the core reads it: its link keys with their values (the
/// core's `LinkConfig::to_value`), as JSON text. Refused configurations throw the core's
/// `ConfigError`.
#[napi]
pub fn link_config(config: Option<String>) -> napi::Result<String> {
    guard(|| Ok(link_config_of(config.as_deref())?.to_value().to_string()))
}

/// The link constants a host or a test needs, as JSON text: `news_allowance` (news
/// admitted beyond `max_queued_events` before more is dropped), the defaults
/// `connect_timeout_ms` and `max_closing_sockets`, the `disconnected` reasons and the
/// `error` codes.
#[napi]
pub fn link_constants() -> napi::Result<String> {
    guard(|| {
        Ok(json!({
            "news_allowance": link::NEWS_ALLOWANCE,
            "connect_timeout_ms": link::DEFAULT_CONNECT_TIMEOUT_MS,
            "max_closing_sockets": link::DEFAULT_MAX_CLOSING_SOCKETS,
            "reasons": {
                "stopped": link::REASON_STOPPED,
                "closed": link::REASON_CLOSED,
                "replaced": link::REASON_REPLACED,
                "peer_closed": link::REASON_PEER_CLOSED,
                "transport_failed": link::REASON_TRANSPORT_FAILED,
                "backlog_full": link::REASON_BACKLOG_FULL,
            },
            "errors": {
                "upgrade_refused": link::ERROR_UPGRADE_REFUSED,
                "connect_failed": link::ERROR_CONNECT_FAILED,
                "connect_timeout": link::ERROR_CONNECT_TIMEOUT,
                "no_token": link::ERROR_NO_TOKEN,
                "transport_failed": link::REASON_TRANSPORT_FAILED,
                "backlog_full": link::REASON_BACKLOG_FULL,
            },
        })
        .to_string())
    })
}

/// The core's error table (`errors::table_value()`) as JSON text.
#[napi]
pub fn error_table() -> napi::Result<String> {
    guard(|| Ok(table_value().to_string()))
}

/// The class the core's error table names for an error of `kind` with `code`.
#[napi]
pub fn error_class_of(kind: String, code: String) -> napi::Result<String> {
    guard(|| Ok(error_class(&kind, &code).to_owned()))
}

/// A `u64` seed from a JS BigInt in `0..2^64`.
fn seed_of(seed: Option<BigInt>) -> napi::Result<u64> {
    match seed {
        None => Ok(0),
        Some(b) => {
            let (negative, value, lossless) = b.get_u64();
            if negative || !lossless {
                return Err(bad_argument("seed", "not an integer in 0..2^64"));
            }
            Ok(value)
        }
    }
}

/// A link: `side` is `hub` or `runner`; `config` the JSON text of the link
/// configuration (its `session` object configures the session); `hello` (runner) the
/// JSON text of the runner's hello template; `snapshot` a `ConnectionState` snapshot to
/// resume from; `seed` (runner) the seed of the reconnect jitter, a BigInt in `0..2^64`.
#[napi(ts_return_type = "ExternalObject<'Link'>")]
pub fn link_new(
    side: String,
    config: Option<String>,
    hello: Option<String>,
    snapshot: Option<Uint8Array>,
    seed: Option<BigInt>,
) -> napi::Result<External<LinkHandle>> {
    guard(|| {
        let config = link_config_of(config.as_deref())?;
        let state = match snapshot {
            Some(bytes) => Some(ConnectionState::restore(&bytes).map_err(|e| restore_error(&e))?),
            None => None,
        };
        let session_config = config.session.clone();
        let side = match side.as_str() {
            "hub" => {
                let session = match state {
                    Some(s) => HubSession::with_state(session_config, s),
                    None => HubSession::new(session_config),
                };
                Side::Hub(HubLink::new(session, config))
            }
            "runner" => {
                let hello = match hello {
                    Some(text) => match message_from_text(&text, false)? {
                        Message::Hello(h) => h,
                        _ => return Err(bad_argument("hello", "not a hello message")),
                    },
                    None => return Err(bad_argument("hello", "a runner needs its hello")),
                };
                let session = match state {
                    Some(s) => RunnerSession::with_state(hello, session_config, s),
                    None => RunnerSession::new(hello, session_config),
                };
                Side::Runner(RunnerLink::new(session, config, seed_of(seed)?))
            }
            other => return Err(bad_argument("side", format!("{other:?}"))),
        };
        Ok(External::new(LinkHandle {
            side,
            fed: VecDeque::new(),
            serial: 0,
        }))
    })
}

fn u64_field(v: &Value, key: &str) -> napi::Result<u64> {
    match v.get(key) {
        Some(Value::Number(n)) => n
            .as_u64()
            .ok_or_else(|| bad_argument(key, "not a non-negative integer")),
        _ => Err(bad_argument(key, "missing")),
    }
}

fn u16_field(v: &Value, key: &str, default: u16) -> napi::Result<u16> {
    match v.get(key) {
        None | Some(Value::Null) => Ok(default),
        Some(_) => u16::try_from(u64_field(v, key)?).map_err(|e| bad_argument(key, e)),
    }
}

fn str_field(v: &Value, key: &str) -> napi::Result<String> {
    match v.get(key) {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(_) => Err(bad_argument(key, "not a string")),
    }
}

/// A link input from its JSON form (the TS layer's `LinkInput` object without frames:
/// those cross as [`link_frames`] and [`link_binary`]).
fn input_of(v: &Value) -> napi::Result<LinkInput> {
    let kind = v
        .get("type")
        .and_then(Value::as_str)
        .ok_or_else(|| bad_argument("input", "no type"))?;
    Ok(match kind {
        "start" => LinkInput::Start,
        "stop" => LinkInput::Stop {
            code: u16_field(v, "code", stapel_runner_protocol::host::CLOSE_NORMAL)?,
            reason: str_field(v, "reason")?,
        },
        "opened" => LinkInput::Opened {
            socket: u64_field(v, "socket")?,
        },
        "connect_failed" => LinkInput::ConnectFailed {
            socket: u64_field(v, "socket")?,
            failure: match v.get("failure").and_then(Value::as_str) {
                Some("refused") => ConnectFailure::Refused {
                    status: u16::try_from(u64_field(v, "status")?)
                        .map_err(|e| bad_argument("status", e))?,
                },
                Some("no_token") => ConnectFailure::NoToken,
                Some("failed") => ConnectFailure::Failed,
                other => return Err(bad_argument("failure", format!("{other:?}"))),
            },
            detail: str_field(v, "detail")?,
        },
        "attach" => LinkInput::Attach {
            socket: u64_field(v, "socket")?,
        },
        "close" => LinkInput::Close {
            code: u16_field(v, "code", stapel_runner_protocol::host::CLOSE_NORMAL)?,
            reason: str_field(v, "reason")?,
        },
        "socket_closed" => LinkInput::SocketClosed {
            socket: u64_field(v, "socket")?,
        },
        "failed" => LinkInput::Failed {
            socket: u64_field(v, "socket")?,
            detail: str_field(v, "detail")?,
        },
        "events_taken" => LinkInput::EventsTaken(u64_field(v, "n")?),
        "confirm" => LinkInput::Confirm {
            task_id: match v.get("task_id") {
                Some(Value::String(s)) => s.clone(),
                _ => return Err(bad_argument("task_id", "not a string")),
            },
            attempt: match v.get("attempt") {
                None | Some(Value::Null) => None,
                Some(_) => Some(u64_field(v, "attempt")?),
            },
            seq: u64_field(v, "seq")?,
        },
        "timeout" => LinkInput::Timeout,
        other => return Err(bad_argument("input", format!("type {other:?}"))),
    })
}

/// Feed one input given as JSON text (`{type, …}`: `start`, `stop`, `opened`,
/// `connect_failed`, `attach`, `close`, `socket_closed`, `failed`, `events_taken`,
/// `confirm`, `timeout`). Its outputs wait in the link.
#[napi(ts_args_type = "link: ExternalObject<'Link'>, nowMs: number, input: string")]
pub fn link_input(link: &mut External<LinkHandle>, now_ms: f64, input: String) -> napi::Result<()> {
    guard(|| {
        let now = now_of(now_ms)?;
        let input = input_of(&parse_arg("input", &input)?)?;
        link.handle(now, input).map_err(|e| link_error(&e))
    })
}

/// `EventsTaken(n)` (the hot input of a host handing events to its application).
#[napi(ts_args_type = "link: ExternalObject<'Link'>, nowMs: number, n: number")]
pub fn link_events_taken(link: &mut External<LinkHandle>, now_ms: f64, n: f64) -> napi::Result<()> {
    guard(|| {
        let input = LinkInput::EventsTaken(now_of(n)?);
        link.handle(now_of(now_ms)?, input)
            .map_err(|e| link_error(&e))
    })
}

/// A text frame from socket `socket`. Its outputs wait in the link ([`link_frames`] feeds
/// frames and takes the outputs in one call). A fast-path frame's serial (its slot in
/// the TS layer's ring is `serial % FED`), else `-1`.
#[napi(ts_args_type = "link: ExternalObject<'Link'>, nowMs: number, socket: number, text: string")]
pub fn link_frame(
    link: &mut External<LinkHandle>,
    now_ms: f64,
    socket: f64,
    text: Text,
) -> napi::Result<f64> {
    guard(|| {
        let now = now_of(now_ms)?;
        let socket = now_of(socket)?;
        let handle = &mut **link;
        let frame = text.to_owned_string()?;
        let serial = handle.serial;
        let kept = scan(&frame, 3, serial);
        let input = LinkInput::Frame {
            socket,
            frame: InboundFrame::Text(frame),
        };
        handle.handle(now, input).map_err(|e| link_error(&e))?;
        Ok(match kept {
            Some(k) => {
                handle.serial = serial.wrapping_add(1);
                if handle.fed.len() >= FED {
                    handle.fed.pop_front();
                }
                handle.fed.push_back(k);
                num(serial)
            }
            None => -1.0,
        })
    })
}

/// A binary frame from socket `socket` (the link decodes it strictly as UTF-8). Its
/// outputs wait in the link.
#[napi(
    ts_args_type = "link: ExternalObject<'Link'>, nowMs: number, socket: number, bytes: Uint8Array"
)]
pub fn link_binary(
    link: &mut External<LinkHandle>,
    now_ms: f64,
    socket: f64,
    bytes: Uint8Array,
) -> napi::Result<()> {
    guard(|| {
        let input = LinkInput::Frame {
            socket: now_of(socket)?,
            frame: InboundFrame::Binary(bytes.to_vec()),
        };
        link.handle(now_of(now_ms)?, input)
            .map_err(|e| link_error(&e))
    })
}

/// Feed `EventsTaken(taken)` when `taken` > 0, then text frames (WebSocket text
/// messages) of socket `socket` in order, and take every output (those waiting from
/// earlier inputs first), in the scratch layout of the module docs. Frame inputs never
/// fail.
#[napi(
    ts_args_type = "link: ExternalObject<'Link'>, nowMs: number, socket: number, frames: string[], taken: number"
)]
pub fn link_frames(
    link: &mut External<LinkHandle>,
    now_ms: f64,
    socket: f64,
    frames: Frames,
    taken: f64,
) -> napi::Result<Option<String>> {
    guard(|| {
        let now = now_of(now_ms)?;
        let socket = now_of(socket)?;
        let taken = now_of(taken)?;
        let handle = &mut **link;
        if taken > 0 {
            handle
                .handle(now, LinkInput::EventsTaken(taken))
                .map_err(|e| link_error(&e))?;
        }
        let mut c = Collector::new();
        handle.drain_into(&mut c, None);
        for (i, frame) in frames.0.into_iter().enumerate() {
            let fed = scan(&frame, 1, i as u64);
            let input = LinkInput::Frame {
                socket,
                frame: InboundFrame::Text(frame),
            };
            // A frame is never refused (the core's errors are for other inputs).
            handle.handle(now, input).map_err(|e| link_error(&e))?;
            handle.drain_into(&mut c, fed.as_ref());
        }
        Ok(c.finish(0))
    })
}

/// Every pending output (see the module docs), the slow ones as a JSON array.
#[napi(ts_args_type = "link: ExternalObject<'Link'>")]
pub fn link_drain(link: &mut External<LinkHandle>) -> napi::Result<Option<String>> {
    guard(|| {
        let mut c = Collector::new();
        link.drain_into(&mut c, None);
        Ok(c.finish(0))
    })
}

/// The next output as JSON text, or `null`.
#[napi(ts_args_type = "link: ExternalObject<'Link'>")]
pub fn link_poll(link: &mut External<LinkHandle>) -> napi::Result<Option<String>> {
    guard(|| Ok(link.poll().map(|o| output_text(&o))))
}

fn stamped_text(s: &Stamped) -> String {
    wire::encode(&s.message)
}

/// Send a sequenced message (JSON text): the stamped message's JSON text (its outputs
/// wait in the link). `resend` (runner): the core's `resend`.
#[napi(
    ts_args_type = "link: ExternalObject<'Link'>, nowMs: number, message: string, resend: boolean"
)]
pub fn link_send(
    link: &mut External<LinkHandle>,
    now_ms: f64,
    message: Text,
    resend: bool,
) -> napi::Result<String> {
    guard(|| {
        let now = now_of(now_ms)?;
        let msg = message.with(|t| message_from_text(t, false))??;
        let stamped = match (&mut link.side, resend) {
            (Side::Runner(l), false) => l.send(now, msg),
            (Side::Runner(l), true) => l.resend(now, msg),
            (Side::Hub(l), _) => l.send(now, msg),
        }
        .map_err(|e| link_error(&e))?;
        Ok(stamped_text(&stamped))
    })
}

/// The absolute deadline for the next `timeout` input, or `null`.
#[napi(ts_args_type = "link: ExternalObject<'Link'>")]
pub fn link_poll_timeout(link: &External<LinkHandle>) -> napi::Result<Option<f64>> {
    guard(|| {
        Ok(match &link.side {
            Side::Runner(l) => l.poll_timeout(),
            Side::Hub(l) => l.poll_timeout(),
        }
        .map(num))
    })
}

/// The link's status as JSON text: `phase` (runner: `idle`, `waiting`, `connecting`,
/// `open`; hub: `open` or `idle`), `connected`, `socket` (the socket serving the
/// session, or `null`), `sockets` (hub: attached or closing), `queued_events`,
/// `stalled`, `stats` (`dropped_events`, `connections`, `backlog_overflows`) and
/// `session_stats`.
#[napi(ts_args_type = "link: ExternalObject<'Link'>")]
pub fn link_status(link: &External<LinkHandle>) -> napi::Result<String> {
    guard(|| {
        let (phase, connected, socket, sockets, queued, stalled, stats, ss) = match &link.side {
            Side::Runner(l) => {
                let socket = match l.phase() {
                    stapel_runner_protocol::link::LinkPhase::Open { socket } => Some(socket),
                    _ => None,
                };
                (
                    l.phase().as_str(),
                    l.is_connected(),
                    socket,
                    None,
                    l.queued_events(),
                    l.is_stalled(),
                    l.stats(),
                    l.session_stats(),
                )
            }
            Side::Hub(l) => (
                if l.is_connected() { "open" } else { "idle" },
                l.is_connected(),
                l.socket(),
                Some(l.sockets()),
                l.queued_events(),
                l.is_stalled(),
                l.stats(),
                l.session_stats(),
            ),
        };
        Ok(json!({
            "phase": phase,
            "connected": connected,
            "socket": socket,
            "sockets": sockets,
            "queued_events": queued,
            "stalled": stalled,
            "stats": {
                "dropped_events": stats.dropped_events,
                "connections": stats.connections,
                "backlog_overflows": stats.backlog_overflows,
            },
            "session_stats": {
                "delivered": ss.delivered,
                "duplicates": ss.duplicates,
                "held": ss.held,
                "held_dropped": ss.held_dropped,
                "held_now": ss.held_now,
                "transmitted": ss.transmitted,
                "implied_acked": ss.implied_acked,
                "probes": ss.probes,
            },
        })
        .to_string())
    })
}

/// The link's configuration (the core's `LinkConfig::to_value`: the link keys, not the
/// session's) as JSON text.
#[napi(ts_args_type = "link: ExternalObject<'Link'>")]
pub fn link_config_value(link: &External<LinkHandle>) -> napi::Result<String> {
    guard(|| Ok(link.config().to_value().to_string()))
}

/// The sequencing state's snapshot bytes.
#[napi(ts_args_type = "link: ExternalObject<'Link'>")]
pub fn link_snapshot(link: &External<LinkHandle>) -> napi::Result<Buffer> {
    guard(|| Ok(link.state().snapshot().into()))
}

/// A copy of the sequencing state.
#[napi(
    ts_args_type = "link: ExternalObject<'Link'>",
    ts_return_type = "ExternalObject<'State'>"
)]
pub fn link_state(link: &External<LinkHandle>) -> napi::Result<External<StateHandle>> {
    guard(|| Ok(External::new(StateHandle::of(link.state().clone()))))
}

/// The state's resume map as JSON text.
#[napi(ts_args_type = "link: ExternalObject<'Link'>")]
pub fn link_resume_map(link: &External<LinkHandle>) -> napi::Result<String> {
    guard(|| {
        serde_json::to_string(&link.state().resume_map()).map_err(|e| bad_argument("resume map", e))
    })
}

/// Frames kept for replay.
#[napi(ts_args_type = "link: ExternalObject<'Link'>")]
pub fn link_outbox_frames(link: &External<LinkHandle>) -> napi::Result<f64> {
    guard(|| Ok(num(link.state().outbox_frames() as u64)))
}

/// Forget a finished task's streams; whether it was known.
#[napi(ts_args_type = "link: ExternalObject<'Link'>, taskId: string")]
pub fn link_forget_task(link: &mut External<LinkHandle>, task_id: String) -> napi::Result<bool> {
    guard(|| Ok(link.state_mut().forget_task(&task_id)))
}

/// Whether every frame of the task was acknowledged.
#[napi(ts_args_type = "link: ExternalObject<'Link'>, taskId: string")]
pub fn link_is_fully_acknowledged(
    link: &External<LinkHandle>,
    task_id: String,
) -> napi::Result<bool> {
    guard(|| Ok(link.state().is_fully_acknowledged(&task_id)))
}
