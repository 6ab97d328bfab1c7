//! Links: each side's whole connection driver as one sans-IO machine.
//!
//! A host (the `stapel-runner connect` loop, Python's and Node's WebSocket transports, a
//! Kotlin client over `java.net.http.WebSocket`, a browser page) only pumps a link: it
//! opens, reads, writes, pauses and closes sockets when told, arms one timer, and hands
//! the link's events to the application. Every decision about the connection is the
//! link's:
//!
//! * [`RunnerLink`] — the runner's outbound connection: when to connect (at once, then
//!   after the core's [`Reconnect`](crate::runner_task::Reconnect) backoff with jitter from
//!   a seeded generator), the connect deadline, the session ([`RunnerSession`](crate::session::RunnerSession)) attached to
//!   exactly one socket at a time, what a frame is (text, or binary decoded strictly as
//!   UTF-8), the event-queue bound and the paused socket's backlog, abort of a dead peer,
//!   a bounded close handshake otherwise, and the error codes the application sees.
//! * [`HubLink`] — one runner as a hub serves it, across its sockets: the [`HubSession`](crate::session::HubSession),
//!   which socket serves it (a newer one replaces an older one), the same bounds, and the
//!   same close policy. The hub's door (token check, eviction) stays
//!   [`HubHost`](crate::host::HubHost).
//!
//! Both have the common shape: [`handle_input`](RunnerLink::handle_input)`(now_ms,
//! input)` (or [`send`](RunnerLink::send)), then [`poll_output`](RunnerLink::poll_output)
//! until `None`, then [`poll_timeout`](RunnerLink::poll_timeout) for the absolute deadline
//! at which to feed [`LinkInput::Timeout`]. No clock, no I/O, no randomness (the jitter's
//! generator is seeded by the host).
//!
//! # Sockets
//!
//! Every socket has an id: the runner link picks it ([`LinkOutput::Connect`]), the hub
//! host names it ([`LinkInput::Attach`], e.g. the connection id of
//! [`HubHost`](crate::host::HubHost)). Inputs about a socket the link no longer drives
//! (a late frame of a replaced socket, the close of an aborted one) are ignored, so a host
//! never has to guard against stale callbacks. At most one socket serves the session;
//! sockets being closed (bounded by [`LinkConfig::max_closing_sockets`]) finish their
//! handshake in the background, and a reconnect never waits for them.
//!
//! # The application's events
//!
//! Every [`LinkOutput::Event`] is one event for the application, and the host reports
//! each one the application has taken with [`LinkInput::EventsTaken`]. While
//! [`LinkConfig::max_queued_events`] events are untaken, the link pauses the socket
//! ([`LinkOutput::Pause`]) and keeps frames that still arrive (those the WebSocket
//! library had read already) in a backlog of at most [`LinkConfig::max_backlog_bytes`];
//! nothing is handed to the session, so nothing is acknowledged that the application
//! has not been able to take. A backlog beyond its bound fails the socket
//! (`backlog_full`: aborted, the session resumes on the next connection). Session events
//! are never dropped (the socket is paused instead); news (`connected`, `disconnected`,
//! `reconnecting`, `error`) is admitted up to [`NEWS_ALLOWANCE`] events beyond the bound,
//! then dropped and counted ([`LinkStats::dropped_events`]); `stalled`, `unstalled` and
//! `stopped` are never dropped (a host acts on them).
//!
//! See `docs/protocol.md` ("Links") for the transition tables and the reasons.

mod hub;
mod runner;

pub use hub::HubLink;
pub use runner::{LinkPhase, RunnerLink};

use std::collections::VecDeque;

use serde_json::{json, Value as JsonValue};

use crate::config::{ConfigError, ConfigReader};
use crate::host::{
    bounded_reason, is_sendable_close_code, InboundFrame, CLOSE_NORMAL, DEFAULT_CLOSE_TIMEOUT_MS,
    DEFAULT_MAX_BACKLOG_BYTES, DEFAULT_MAX_QUEUED_EVENTS,
};
use crate::runner_task::Backoff;
use crate::session::{CloseReason, Event, Input, Machine, Output, SessionConfig, SessionError};

/// Default [`LinkConfig::connect_timeout_ms`]: 10 s.
pub const DEFAULT_CONNECT_TIMEOUT_MS: u64 = 10_000;
/// Default [`LinkConfig::max_closing_sockets`]: 4.
pub const DEFAULT_MAX_CLOSING_SOCKETS: usize = 4;
/// News events (see [`LinkEvent::is_droppable`]) admitted beyond
/// [`LinkConfig::max_queued_events`] before further news is dropped: the news of one
/// incident (a `backlog_full` error, the disconnect, the reconnect) reaches an application
/// whose queue is full, and an application that stops taking events during a long outage
/// does not grow the queue without bound.
pub const NEWS_ALLOWANCE: u64 = 16;

/// Reason (code) of a [`LinkEvent::Disconnected`] after the application's
/// [`LinkInput::Stop`].
pub const REASON_STOPPED: &str = "stopped";
/// Reason of a [`LinkEvent::Disconnected`] after the application's [`LinkInput::Close`].
pub const REASON_CLOSED: &str = "closed";
/// Reason of a [`LinkEvent::Disconnected`] when a newer socket replaced the socket (hub).
pub const REASON_REPLACED: &str = crate::host::REPLACED_REASON;
/// Reason of a [`LinkEvent::Disconnected`] when the peer closed the socket or its read
/// side ended ([`LinkInput::SocketClosed`]).
pub const REASON_PEER_CLOSED: &str = "peer_closed";
/// Reason (and [`LinkEvent::Error`] code) when the transport failed on the socket
/// ([`LinkInput::Failed`]).
pub const REASON_TRANSPORT_FAILED: &str = "transport_failed";
/// Reason (and error code) when a paused socket's backlog outgrew
/// [`LinkConfig::max_backlog_bytes`].
pub const REASON_BACKLOG_FULL: &str = "backlog_full";

/// Error code: the server answered the upgrade request with an HTTP status.
pub const ERROR_UPGRADE_REFUSED: &str = "upgrade_refused";
/// Error code: the socket could not be opened (DNS, TCP, TLS, the handshake).
pub const ERROR_CONNECT_FAILED: &str = "connect_failed";
/// Error code: no socket within [`LinkConfig::connect_timeout_ms`].
pub const ERROR_CONNECT_TIMEOUT: &str = "connect_timeout";
/// Error code: the host had no bearer token to present.
pub const ERROR_NO_TOKEN: &str = "no_token";

/// Configuration of a link. Every field has a documented default; read one from JSON
/// with [`LinkConfig::from_value`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LinkConfig {
    /// The session's configuration. Key `session` (an object of
    /// [`SessionConfig::KEYS`]).
    pub session: SessionConfig,
    /// Longest close handshake with a live peer; then the socket is aborted. Default
    /// [`DEFAULT_CLOSE_TIMEOUT_MS`] (the one close bound of the core). Key
    /// `close_timeout_ms`.
    pub close_timeout_ms: u64,
    /// Runner: longest time from [`LinkOutput::Connect`] to [`LinkInput::Opened`]; then
    /// the attempt is aborted and counts as a failed connect. Default
    /// [`DEFAULT_CONNECT_TIMEOUT_MS`]. Key `connect_timeout_ms`.
    pub connect_timeout_ms: u64,
    /// Events the application may leave untaken before the socket is paused (at least 1).
    /// Default [`DEFAULT_MAX_QUEUED_EVENTS`]. Key `max_queued_events`.
    pub max_queued_events: usize,
    /// UTF-8 bytes of frames a paused socket may still deliver (at least 1); beyond it
    /// the socket fails (`backlog_full`). Default [`DEFAULT_MAX_BACKLOG_BYTES`]. Key
    /// `max_backlog_bytes`.
    pub max_backlog_bytes: usize,
    /// Sockets kept while their close handshake runs (at least 1); a further one aborts
    /// the oldest at once. Default [`DEFAULT_MAX_CLOSING_SOCKETS`]. Key
    /// `max_closing_sockets`.
    pub max_closing_sockets: usize,
    /// Runner: reconnect by itself after a lost connection or a failed connect (else the
    /// link goes idle until the next [`LinkInput::Start`]). Default `true`. Key
    /// `reconnect`.
    pub reconnect: bool,
    /// Runner: the reconnect schedule. Keys `backoff_initial_ms`, `backoff_max_ms`.
    pub backoff: Backoff,
}

impl Default for LinkConfig {
    fn default() -> Self {
        Self {
            session: SessionConfig::default(),
            close_timeout_ms: DEFAULT_CLOSE_TIMEOUT_MS,
            connect_timeout_ms: DEFAULT_CONNECT_TIMEOUT_MS,
            max_queued_events: DEFAULT_MAX_QUEUED_EVENTS,
            max_backlog_bytes: DEFAULT_MAX_BACKLOG_BYTES,
            max_closing_sockets: DEFAULT_MAX_CLOSING_SOCKETS,
            reconnect: true,
            backoff: Backoff::default(),
        }
    }
}

impl LinkConfig {
    /// The keys [`from_value`](Self::from_value) reads.
    pub const KEYS: [&'static str; 9] = [
        "session",
        "close_timeout_ms",
        "connect_timeout_ms",
        "max_queued_events",
        "max_backlog_bytes",
        "max_closing_sockets",
        "reconnect",
        "backoff_initial_ms",
        "backoff_max_ms",
    ];

    /// Defaults overridden by the keys present in `value` (the crate's one config
    /// reader: unknown keys, wrong types and out-of-range numbers are refused; keys of
    /// the nested `session` object are dotted, e.g. `session.ping_interval_ms`).
    ///
    /// # Errors
    /// [`ConfigError`]: `not_an_object`, `unknown_key`, `wrong_type`, `out_of_range`
    /// (`0` for `max_queued_events`, `max_backlog_bytes`, `max_closing_sockets`).
    pub fn from_value(value: &JsonValue) -> Result<Self, ConfigError> {
        let r = ConfigReader::new(value, &Self::KEYS)?;
        let d = Self::default();
        let positive = |key: &str| -> Result<Option<usize>, ConfigError> {
            match r.usize(key)? {
                Some(0) => Err(ConfigError::OutOfRange {
                    key: r.path(key),
                    expected: "positive integer",
                }),
                n => Ok(n),
            }
        };
        Ok(Self {
            session: match r.nested("session", &SessionConfig::KEYS)? {
                Some(s) => SessionConfig::read(&s)?,
                None => d.session,
            },
            close_timeout_ms: r.u64("close_timeout_ms")?.unwrap_or(d.close_timeout_ms),
            connect_timeout_ms: r.u64("connect_timeout_ms")?.unwrap_or(d.connect_timeout_ms),
            max_queued_events: positive("max_queued_events")?.unwrap_or(d.max_queued_events),
            max_backlog_bytes: positive("max_backlog_bytes")?.unwrap_or(d.max_backlog_bytes),
            max_closing_sockets: positive("max_closing_sockets")?.unwrap_or(d.max_closing_sockets),
            reconnect: r.bool("reconnect")?.unwrap_or(d.reconnect),
            backoff: Backoff {
                initial_ms: r.u64("backoff_initial_ms")?.unwrap_or(d.backoff.initial_ms),
                max_ms: r.u64("backoff_max_ms")?.unwrap_or(d.backoff.max_ms),
            },
        })
    }

    /// The link's own keys with their values (the session's config is not repeated), for
    /// a host to log or a test to compare.
    pub fn to_value(&self) -> JsonValue {
        json!({
            "close_timeout_ms": self.close_timeout_ms,
            "connect_timeout_ms": self.connect_timeout_ms,
            "max_queued_events": self.max_queued_events,
            "max_backlog_bytes": self.max_backlog_bytes,
            "max_closing_sockets": self.max_closing_sockets,
            "reconnect": self.reconnect,
            "backoff_initial_ms": self.backoff.initial_ms,
            "backoff_max_ms": self.backoff.max_ms,
        })
    }
}

/// Why a connect failed, as the host saw it (the link turns it into an error code).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConnectFailure {
    /// The server answered the upgrade request with this HTTP status instead of
    /// upgrading (401: the token). Code [`ERROR_UPGRADE_REFUSED`].
    Refused {
        /// The HTTP status.
        status: u16,
    },
    /// The host had no token to present (an unreadable or empty token file). Code
    /// [`ERROR_NO_TOKEN`].
    NoToken,
    /// Anything else: DNS, TCP, TLS, a handshake error. Code [`ERROR_CONNECT_FAILED`].
    Failed,
}

impl ConnectFailure {
    /// The error code the link reports for it.
    pub fn code(self) -> &'static str {
        match self {
            ConnectFailure::Refused { .. } => ERROR_UPGRADE_REFUSED,
            ConnectFailure::NoToken => ERROR_NO_TOKEN,
            ConnectFailure::Failed => ERROR_CONNECT_FAILED,
        }
    }
}

/// What the host tells a link. `socket` is the socket's id (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LinkInput {
    /// Runner: start connecting (at once), or again after [`LinkInput::Stop`] or a loss
    /// with reconnects off. A no-op while connecting or connected.
    Start,
    /// Runner: close the socket with this code and reason and stop reconnecting;
    /// [`LinkEvent::Stopped`] follows once every socket is gone.
    Stop {
        /// WebSocket close code ([`CLOSE_NORMAL`] for a plain close).
        code: u16,
        /// Close reason (cut to 123 UTF-8 bytes).
        reason: String,
    },
    /// Runner: socket `socket` (asked for by [`LinkOutput::Connect`]) is open.
    Opened {
        /// The socket's id.
        socket: u64,
    },
    /// Runner: socket `socket` could not be opened. `detail` is for the application's
    /// error event (never put a secret in it).
    ConnectFailed {
        /// The socket's id.
        socket: u64,
        /// What went wrong.
        failure: ConnectFailure,
        /// Human-readable detail.
        detail: String,
    },
    /// Hub: the upgraded, authenticated socket `socket` serves this runner from now on (a
    /// socket serving it before is closed: reason [`REASON_REPLACED`]).
    Attach {
        /// The socket's id.
        socket: u64,
    },
    /// Hub: close the runner's socket with this code and reason (the runner may connect
    /// again).
    Close {
        /// WebSocket close code.
        code: u16,
        /// Close reason (cut to 123 UTF-8 bytes).
        reason: String,
    },
    /// A frame was read from socket `socket`.
    Frame {
        /// The socket's id.
        socket: u64,
        /// The frame.
        frame: InboundFrame,
    },
    /// Socket `socket` is gone: the peer closed it, its read side ended, or the close
    /// handshake completed.
    SocketClosed {
        /// The socket's id.
        socket: u64,
    },
    /// The transport failed on socket `socket` (a read or write raised something other
    /// than "the socket went away"). `detail` goes into the error event.
    Failed {
        /// The socket's id.
        socket: u64,
        /// Human-readable detail (never a secret).
        detail: String,
    },
    /// The application took `n` events.
    EventsTaken(u64),
    /// Durable acknowledgements: the host's store committed the inbound stream `(task_id,
    /// attempt)` through `seq` (the session's [`Input::Confirm`]).
    Confirm {
        /// The stream's task.
        task_id: String,
        /// The stream's attempt (`None` for command streams).
        attempt: Option<u64>,
        /// The highest committed seq.
        seq: u64,
    },
    /// [`RunnerLink::poll_timeout`] passed (harmless at any time).
    Timeout,
}

impl LinkInput {
    /// The input's stable name: `start`, `stop`, `opened`, `connect_failed`, `attach`,
    /// `close`, `frame`, `socket_closed`, `failed`, `events_taken`, `confirm`, `timeout`.
    pub fn kind(&self) -> &'static str {
        match self {
            LinkInput::Start => "start",
            LinkInput::Stop { .. } => "stop",
            LinkInput::Opened { .. } => "opened",
            LinkInput::ConnectFailed { .. } => "connect_failed",
            LinkInput::Attach { .. } => "attach",
            LinkInput::Close { .. } => "close",
            LinkInput::Frame { .. } => "frame",
            LinkInput::SocketClosed { .. } => "socket_closed",
            LinkInput::Failed { .. } => "failed",
            LinkInput::EventsTaken(_) => "events_taken",
            LinkInput::Confirm { .. } => "confirm",
            LinkInput::Timeout => "timeout",
        }
    }
}

/// What the link asks of its host, in order.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum LinkOutput {
    /// Runner: open socket `socket` now (read the token, connect, upgrade) and report
    /// [`LinkInput::Opened`] or [`LinkInput::ConnectFailed`]. The connect deadline is the
    /// link's: at it the link asks for [`LinkOutput::Abort`] of this socket.
    Connect {
        /// The new socket's id.
        socket: u64,
    },
    /// Write this text frame to socket `socket`.
    Send {
        /// The socket's id.
        socket: u64,
        /// The frame.
        frame: String,
    },
    /// Stop reading frames from socket `socket` (the application's queue is full).
    Pause {
        /// The socket's id.
        socket: u64,
    },
    /// Read frames from socket `socket` again.
    Resume {
        /// The socket's id.
        socket: u64,
    },
    /// Start the WebSocket close handshake on socket `socket`; report
    /// [`LinkInput::SocketClosed`] when it completes. The deadline is the link's
    /// ([`LinkConfig::close_timeout_ms`]): at it the link asks for an abort.
    Close {
        /// The socket's id.
        socket: u64,
        /// Close code.
        code: u16,
        /// Close reason (at most 123 UTF-8 bytes).
        reason: String,
    },
    /// Drop socket `socket` at once: abort its TCP connection, or cancel its connect
    /// attempt. Nothing more is reported about it.
    Abort {
        /// The socket's id.
        socket: u64,
    },
    /// Hand this event to the application (and report it taken with
    /// [`LinkInput::EventsTaken`]).
    Event(LinkEvent),
}

impl LinkOutput {
    /// The output's stable name: `connect`, `send`, `pause`, `resume`, `close`, `abort`,
    /// or for an event the event's [`LinkEvent::kind`].
    pub fn kind(&self) -> &'static str {
        match self {
            LinkOutput::Connect { .. } => "connect",
            LinkOutput::Send { .. } => "send",
            LinkOutput::Pause { .. } => "pause",
            LinkOutput::Resume { .. } => "resume",
            LinkOutput::Close { .. } => "close",
            LinkOutput::Abort { .. } => "abort",
            LinkOutput::Event(e) => e.kind(),
        }
    }
}

/// What the application learns from a link.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum LinkEvent {
    /// The session's own event: `hello`, `received`, `inbound_gap`, `outbound_resync`,
    /// `peer_error` (a binary frame that is not UTF-8 is a `peer_error` `invalid_utf8`).
    Session(Event),
    /// A socket was attached to the session (runner: the `hello` is on its way).
    Connected,
    /// The socket was detached from the session, for `reason` (a code:
    /// [`REASON_STOPPED`], [`REASON_CLOSED`], [`REASON_REPLACED`], [`REASON_PEER_CLOSED`],
    /// [`REASON_TRANSPORT_FAILED`], [`REASON_BACKLOG_FULL`], or a session close reason:
    /// `peer_timeout`, `hello_required`, `unsupported_protocol_version`).
    Disconnected {
        /// Why (a stable code).
        reason: String,
    },
    /// Runner: the next connect is in `delay_ms`; `failures` consecutive failures are
    /// counted (see [`Reconnect`](crate::runner_task::Reconnect)).
    Reconnecting {
        /// Delay before the next connect, ms.
        delay_ms: u64,
        /// Consecutive failures counted after this one.
        failures: u32,
    },
    /// The connection failed: `code` is [`ERROR_UPGRADE_REFUSED`] (with `status`),
    /// [`ERROR_CONNECT_FAILED`], [`ERROR_CONNECT_TIMEOUT`], [`ERROR_NO_TOKEN`],
    /// [`REASON_TRANSPORT_FAILED`] or [`REASON_BACKLOG_FULL`].
    Error {
        /// Stable code.
        code: &'static str,
        /// Human-readable detail (not stable; never a secret the host did not put in).
        detail: String,
        /// The HTTP status of a refused upgrade.
        status: Option<u16>,
    },
    /// A send was refused because the kept log is full (`bound` is
    /// `max_outbox_frames` or `max_outbox_bytes`): the peer has neither acknowledged the
    /// kept frames nor answered a ping sent after them. Hold further sends until
    /// [`LinkEvent::Unstalled`]; `detail` says what the peer must do.
    Stalled {
        /// The bound reached (a sequencing config key).
        bound: &'static str,
        /// Frames kept for replay.
        kept_frames: usize,
        /// Bytes kept for replay.
        kept_bytes: usize,
        /// What is wrong and what the peer must do.
        detail: String,
    },
    /// The kept log has room again after [`LinkEvent::Stalled`]: send again.
    Unstalled,
    /// Runner: after [`LinkInput::Stop`], every socket is gone.
    Stopped,
}

impl LinkEvent {
    /// The event's stable name: the session event's kind for [`LinkEvent::Session`],
    /// else `connected`, `disconnected`, `reconnecting`, `error`, `stalled`, `unstalled`,
    /// `stopped`.
    pub fn kind(&self) -> &'static str {
        match self {
            LinkEvent::Session(e) => e.kind(),
            LinkEvent::Connected => "connected",
            LinkEvent::Disconnected { .. } => "disconnected",
            LinkEvent::Reconnecting { .. } => "reconnecting",
            LinkEvent::Error { .. } => "error",
            LinkEvent::Stalled { .. } => "stalled",
            LinkEvent::Unstalled => "unstalled",
            LinkEvent::Stopped => "stopped",
        }
    }

    /// `true` for events dropped (and counted) when the queue holds
    /// [`LinkConfig::max_queued_events`] + [`NEWS_ALLOWANCE`] events: the news of
    /// [`LinkEvent::Connected`], [`Disconnected`](LinkEvent::Disconnected),
    /// [`Reconnecting`](LinkEvent::Reconnecting) and [`Error`](LinkEvent::Error).
    pub fn is_droppable(&self) -> bool {
        matches!(
            self,
            LinkEvent::Connected
                | LinkEvent::Disconnected { .. }
                | LinkEvent::Reconnecting { .. }
                | LinkEvent::Error { .. }
        )
    }
}

/// Local misuse of a link. Stable snake_case [`code`](LinkError::code)s.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum LinkError {
    /// The session refused the input (its code: e.g. `backpressure` with the message
    /// inside, `not_durable`, `confirm_ahead`).
    #[error(transparent)]
    Session(SessionError),
    /// An input of the other side's link (`Start`/`Stop`/`Opened`/`ConnectFailed` are the
    /// runner's, `Attach`/`Close` the hub's). Code `wrong_side`.
    #[error("input {input} is not an input of this side's link")]
    WrongSide {
        /// The input's kind.
        input: &'static str,
    },
    /// A close code an endpoint may not send (RFC 6455 §7.4). Code `invalid_close_code`.
    #[error("close code {code} may not be sent")]
    InvalidCloseCode {
        /// The code.
        code: u16,
    },
}

impl LinkError {
    /// Stable snake_case code.
    pub fn code(&self) -> &'static str {
        match self {
            LinkError::Session(e) => e.code(),
            LinkError::WrongSide { .. } => "wrong_side",
            LinkError::InvalidCloseCode { .. } => "invalid_close_code",
        }
    }
}

impl From<SessionError> for LinkError {
    fn from(e: SessionError) -> Self {
        LinkError::Session(e)
    }
}

/// Counters of a link.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LinkStats {
    /// Droppable events not emitted because the application's queue was full.
    pub dropped_events: u64,
    /// Sockets attached to the session.
    pub connections: u64,
    /// Paused sockets that failed because their backlog outgrew its bound.
    pub backlog_overflows: u64,
}

/// The socket the session is attached to.
#[derive(Debug, Clone)]
struct Attached {
    id: u64,
    paused: bool,
    /// A frame arrived on it (the link worked: the reconnect count starts again).
    got_frame: bool,
}

/// How the attached socket ends.
enum Detach {
    /// Abort it at once (dead peer, failed transport, overflowing backlog).
    Abort,
    /// Close handshake with this code and reason.
    Close(u16, String),
    /// It is gone already (the peer closed it): release it.
    Gone,
}

/// The machinery both links share: the session over at most one attached socket, the
/// sockets being closed, the application's event accounting and the paused socket's
/// backlog.
#[derive(Debug, Clone)]
struct Pipe<S> {
    session: S,
    cfg: LinkConfig,
    attached: Option<Attached>,
    /// Sockets in their close handshake, with its deadline, oldest first.
    closing: VecDeque<(u64, u64)>,
    backlog: VecDeque<String>,
    backlog_bytes: usize,
    /// Events emitted and not yet reported taken.
    queued: u64,
    /// A send was refused (kept log full) and `Unstalled` was not emitted yet.
    stalled: bool,
    out: VecDeque<LinkOutput>,
    stats: LinkStats,
}

/// What became of the attached socket during one input (the runner reconnects after it).
struct Lost {
    got_frame: bool,
}

impl<S: Machine> Pipe<S> {
    fn new(session: S, cfg: LinkConfig) -> Self {
        Self {
            session,
            cfg,
            attached: None,
            closing: VecDeque::new(),
            backlog: VecDeque::new(),
            backlog_bytes: 0,
            queued: 0,
            stalled: false,
            out: VecDeque::new(),
            stats: LinkStats::default(),
        }
    }

    fn attached_id(&self) -> Option<u64> {
        self.attached.as_ref().map(|a| a.id)
    }

    /// Emit an event for the application (news beyond the overflow allowance is
    /// dropped).
    fn event(&mut self, e: LinkEvent) {
        if e.is_droppable() && self.queued >= self.max_events().saturating_add(NEWS_ALLOWANCE) {
            self.stats.dropped_events = self.stats.dropped_events.saturating_add(1);
            return;
        }
        self.queued = self.queued.saturating_add(1);
        self.out.push_back(LinkOutput::Event(e));
    }

    fn max_events(&self) -> u64 {
        self.cfg.max_queued_events.max(1) as u64
    }

    fn full(&self) -> bool {
        self.queued >= self.max_events()
    }

    /// Attach `id` to the session.
    fn attach(&mut self, now: u64, id: u64) -> Option<Lost> {
        self.attached = Some(Attached {
            id,
            paused: false,
            got_frame: false,
        });
        self.stats.connections = self.stats.connections.saturating_add(1);
        self.event(LinkEvent::Connected);
        // A session that is still up (a host that never reported its loss) is detached
        // first: its queued frames belong to the old socket.
        let _ = self.session.handle_input(now, Input::Disconnected);
        // Cannot fail: the session was just detached.
        let _ = self.session.handle_input(now, Input::Connected);
        self.drain(now)
    }

    /// Hand the session's outputs on: frames to the attached socket, events to the
    /// application, a close request to the socket's end. Returns the loss it caused.
    fn drain(&mut self, now: u64) -> Option<Lost> {
        let mut lost = None;
        while let Some(o) = self.session.poll_output() {
            match o {
                Output::Transmit(frame) => {
                    if let Some(socket) = self.attached_id() {
                        self.out.push_back(LinkOutput::Send { socket, frame });
                    }
                }
                Output::Event(e) => self.event(LinkEvent::Session(e)),
                Output::Close(reason) => {
                    let how = if reason == CloseReason::PeerTimeout {
                        Detach::Abort
                    } else {
                        Detach::Close(CLOSE_NORMAL, reason.code().to_owned())
                    };
                    lost = lost.or(self.detach(now, how, reason.code()));
                }
            }
        }
        if let Some(a) = &mut self.attached {
            if !a.paused && self.queued >= self.cfg.max_queued_events.max(1) as u64 {
                a.paused = true;
                let socket = a.id;
                self.out.push_back(LinkOutput::Pause { socket });
            }
        }
        lost
    }

    /// Detach the session from the attached socket (if any) and end the socket.
    fn detach(&mut self, now: u64, how: Detach, reason: &str) -> Option<Lost> {
        let a = self.attached.take()?;
        self.backlog.clear();
        self.backlog_bytes = 0;
        let _ = self.session.handle_input(now, Input::Disconnected);
        // Frames and closes queued for the dead socket are dropped by the session; its
        // events stay.
        while let Some(o) = self.session.poll_output() {
            if let Output::Event(e) = o {
                self.event(LinkEvent::Session(e));
            }
        }
        self.out
            .retain(|o| !matches!(o, LinkOutput::Send { socket, .. } if *socket == a.id));
        self.event(LinkEvent::Disconnected {
            reason: reason.to_owned(),
        });
        match how {
            Detach::Abort | Detach::Gone => self.out.push_back(LinkOutput::Abort { socket: a.id }),
            Detach::Close(code, reason) => self.close_socket(now, a.id, code, &reason),
        }
        Some(Lost {
            got_frame: a.got_frame,
        })
    }

    /// Start the close handshake of a socket no longer attached.
    fn close_socket(&mut self, now: u64, id: u64, code: u16, reason: &str) {
        while self.closing.len() >= self.cfg.max_closing_sockets.max(1) {
            if let Some((old, _)) = self.closing.pop_front() {
                self.out.push_back(LinkOutput::Abort { socket: old });
            }
        }
        self.closing
            .push_back((id, now.saturating_add(self.cfg.close_timeout_ms)));
        self.out.push_back(LinkOutput::Close {
            socket: id,
            code,
            reason: bounded_reason(reason),
        });
    }

    /// A frame from socket `id`.
    fn frame(&mut self, now: u64, id: u64, frame: InboundFrame) -> Option<Lost> {
        let a = self.attached.as_mut().filter(|a| a.id == id)?;
        a.got_frame = true;
        let paused = a.paused;
        let text = match frame {
            InboundFrame::Text(t) => t,
            InboundFrame::Binary(b) => match String::from_utf8(b) {
                Ok(t) => t,
                Err(e) => {
                    self.event(LinkEvent::Session(Event::PeerError {
                        code: "invalid_utf8".into(),
                        detail: format!(
                            "a binary frame that is not UTF-8 was dropped: {}",
                            e.utf8_error()
                        ),
                    }));
                    return self.drain(now);
                }
            },
        };
        if paused || self.full() || !self.backlog.is_empty() {
            self.backlog_bytes = self.backlog_bytes.saturating_add(text.len());
            self.backlog.push_back(text);
            if self.backlog_bytes > self.cfg.max_backlog_bytes {
                self.stats.backlog_overflows = self.stats.backlog_overflows.saturating_add(1);
                self.event(LinkEvent::Error {
                    code: REASON_BACKLOG_FULL,
                    detail: format!(
                        "the peer kept sending while the application's event queue was full (backlog above {} bytes)",
                        self.cfg.max_backlog_bytes
                    ),
                    status: None,
                });
                return self.detach(now, Detach::Abort, REASON_BACKLOG_FULL);
            }
            if !paused {
                // Full already: pause now (drain() pauses too, after deliveries).
                return self.drain(now);
            }
            return None;
        }
        self.deliver(now, text)
    }

    fn deliver(&mut self, now: u64, text: String) -> Option<Lost> {
        // Errors here are NotConnected only, which cannot happen while attached.
        let _ = self.session.handle_input(now, Input::Frame(text));
        self.drain(now)
    }

    /// The application took `n` events: deliver backlogged frames while there is room,
    /// then resume reading.
    fn events_taken(&mut self, now: u64, n: u64) -> Option<Lost> {
        self.queued = self.queued.saturating_sub(n);
        while !self.full() && self.attached.is_some() {
            let Some(text) = self.backlog.pop_front() else {
                break;
            };
            self.backlog_bytes = self.backlog_bytes.saturating_sub(text.len());
            if let Some(lost) = self.deliver(now, text) {
                return Some(lost);
            }
        }
        if self.backlog.is_empty() && !self.full() {
            if let Some(a) = &mut self.attached {
                if a.paused {
                    a.paused = false;
                    let socket = a.id;
                    self.out.push_back(LinkOutput::Resume { socket });
                }
            }
        }
        None
    }

    /// Socket `id` is gone.
    fn socket_closed(&mut self, now: u64, id: u64) -> Option<Lost> {
        if self.attached_id() == Some(id) {
            return self.detach(now, Detach::Gone, REASON_PEER_CLOSED);
        }
        self.closing.retain(|(s, _)| *s != id);
        None
    }

    /// The transport failed on socket `id`.
    fn failed(&mut self, now: u64, id: u64, detail: String) -> Option<Lost> {
        if self.attached_id() == Some(id) {
            self.event(LinkEvent::Error {
                code: REASON_TRANSPORT_FAILED,
                detail,
                status: None,
            });
            return self.detach(now, Detach::Abort, REASON_TRANSPORT_FAILED);
        }
        if let Some(i) = self.closing.iter().position(|(s, _)| *s == id) {
            self.closing.remove(i);
            self.out.push_back(LinkOutput::Abort { socket: id });
        }
        None
    }

    /// Timers: the session's (when attached) and the close handshakes'.
    fn timeout(&mut self, now: u64) -> Option<Lost> {
        let mut lost = None;
        if self.attached.is_some() {
            let _ = self.session.handle_input(now, Input::Timeout);
            lost = self.drain(now);
        }
        while let Some(&(id, deadline)) = self.closing.front() {
            if deadline > now {
                break;
            }
            self.closing.pop_front();
            self.out.push_back(LinkOutput::Abort { socket: id });
        }
        // Handshakes start in time order with one bound: the front is the earliest.
        lost
    }

    fn deadline(&self) -> Option<u64> {
        let session = self
            .attached
            .as_ref()
            .and_then(|_| self.session.poll_timeout());
        let closing = self.closing.iter().map(|(_, d)| *d).min();
        [session, closing].into_iter().flatten().min()
    }

    /// Feed a session input (a send, a confirm) and pass its outputs on.
    fn session_input(
        &mut self,
        now: u64,
        input: Input,
    ) -> (Result<(), SessionError>, Option<Lost>) {
        let r = self.session.handle_input(now, input);
        let lost = self.drain(now);
        (r, lost)
    }

    /// A send was refused with backpressure: tell the application once.
    fn stall(&mut self, e: &SessionError) {
        if self.stalled || e.code() != "backpressure" {
            return;
        }
        self.stalled = true;
        let state = self.session.state();
        let c = state.config();
        let (bound, limit) = if state.outbox_frames() >= c.max_outbox_frames {
            ("max_outbox_frames", c.max_outbox_frames)
        } else {
            ("max_outbox_bytes", c.max_outbox_bytes)
        };
        let (kept_frames, kept_bytes) = (state.outbox_frames(), state.outbox_bytes());
        self.event(LinkEvent::Stalled {
            bound,
            kept_frames,
            kept_bytes,
            detail: format!(
                "the kept log is full ({kept_frames} frames, {kept_bytes} bytes; bound {bound} = {limit}): the peer has not acknowledged these frames (the `ack` extension) and has not answered a ping sent after them; sending resumes when it does (a peer must acknowledge, or answer pings in order)"
            ),
        });
    }

    /// After every input: `Unstalled` once the kept log has room again.
    fn check_stall(&mut self) {
        if !self.stalled {
            return;
        }
        let state = self.session.state();
        let c = state.config();
        if state.outbox_frames() < c.max_outbox_frames && state.outbox_bytes() < c.max_outbox_bytes
        {
            self.stalled = false;
            self.event(LinkEvent::Unstalled);
        }
    }
}

/// `Err(invalid_close_code)` for a code an endpoint may not send.
fn check_close_code(code: u16) -> Result<(), LinkError> {
    if is_sendable_close_code(code) {
        Ok(())
    } else {
        Err(LinkError::InvalidCloseCode { code })
    }
}
