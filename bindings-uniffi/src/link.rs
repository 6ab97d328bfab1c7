//! `RunnerLink` and `HubLink`: each side's whole connection driver (the core's
//! `link` module) as a pull-style object. A host only pumps one: it opens, reads,
//! writes, pauses, closes and aborts sockets when told, arms one timer at
//! `poll_timeout()`, hands events to the application and reports how many it took.
//! Every decision (reconnect schedule, deadlines, bounds, error codes) is the core's.
//!
//! Batch-friendly: `step(now, input)` feeds one input and returns every output plus
//! the next deadline in one boundary crossing; `handle_frames` feeds a batch of text
//! frames of one socket.

use std::sync::{Mutex, MutexGuard};

use stapel_runner_protocol::host::InboundFrame;
use stapel_runner_protocol::link::{
    self as core_link, ConnectFailure as CoreFailure, LinkConfig, LinkError,
    LinkEvent as CoreEvent, LinkInput as CoreInput, LinkOutput as CoreOutput,
};
use stapel_runner_protocol::sequencing::ConnectionState as CoreState;
use stapel_runner_protocol::session::{
    Event, HubSession as CoreHub, RunnerSession as CoreRunner, SessionStats as CoreStats,
    Stamped as CoreStamped,
};

use crate::errors::{state, ProtocolError};
use crate::jsontext::parse_serde;
use crate::sequencing::{resume_entries, Resync};
use crate::wire::{hello_in, hello_out, Hello, Message, ResumeEntry};

/// Why a connect failed, as the host saw it; the link turns it into the error code
/// (`upgrade_refused`, `no_token`, `connect_failed`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Enum)]
pub enum ConnectFailure {
    /// The server answered the upgrade request with this HTTP status (401: the token).
    Refused {
        /// The HTTP status.
        status: u16,
    },
    /// The host had no token to present (an unreadable or empty token source).
    NoToken,
    /// Anything else: DNS, TCP, TLS, a handshake error.
    Failed,
}

/// What the host tells a link (`socket`: the socket's id — the runner link names it in
/// `LinkOutput.Connect`, the hub host in `Attach`). Inputs about a socket the link no
/// longer drives are ignored by the link.
#[derive(Debug, Clone, uniffi::Enum)]
pub enum LinkInput {
    /// Runner: start connecting (at once), or again after `Stop`.
    Start,
    /// Runner: close the socket with this code and reason and stop reconnecting;
    /// `LinkEvent.Stopped` follows once every socket is gone.
    Stop {
        /// WebSocket close code (1000 for a plain close).
        code: u16,
        /// Close reason (cut to 123 UTF-8 bytes by the core).
        reason: String,
    },
    /// Runner: socket `socket` (asked for by `LinkOutput.Connect`) is open.
    Opened {
        /// The socket's id.
        socket: u64,
    },
    /// Runner: socket `socket` could not be opened. `detail` goes into the error event:
    /// never put a secret in it.
    ConnectFailed {
        /// The socket's id.
        socket: u64,
        /// What went wrong.
        failure: ConnectFailure,
        /// Human-readable detail.
        detail: String,
    },
    /// Hub: the upgraded, authenticated socket `socket` serves this runner from now on.
    Attach {
        /// The socket's id.
        socket: u64,
    },
    /// Hub: close the runner's socket with this code and reason.
    Close {
        /// WebSocket close code.
        code: u16,
        /// Close reason.
        reason: String,
    },
    /// A text frame was read from socket `socket`.
    FrameText {
        /// The socket's id.
        socket: u64,
        /// The frame.
        text: String,
    },
    /// A binary frame was read from socket `socket` (the link decodes it strictly as
    /// UTF-8; anything else is a `peer_error` `invalid_utf8`).
    FrameBinary {
        /// The socket's id.
        socket: u64,
        /// The frame's bytes.
        data: Vec<u8>,
    },
    /// Socket `socket` is gone: the peer closed it, its read side ended, or the close
    /// handshake completed.
    SocketClosed {
        /// The socket's id.
        socket: u64,
    },
    /// The transport failed on socket `socket` (never put a secret in `detail`).
    Failed {
        /// The socket's id.
        socket: u64,
        /// Human-readable detail.
        detail: String,
    },
    /// The application took `n` events.
    EventsTaken {
        /// How many.
        n: u64,
    },
    /// Durable acknowledgements: the host's store committed the inbound stream
    /// `(task_id, attempt)` through `seq`.
    Confirm {
        /// The stream's task.
        task_id: String,
        /// The stream's attempt (`None` for command streams).
        attempt: Option<u64>,
        /// The highest committed seq.
        seq: u64,
    },
    /// The deadline of `poll_timeout()` passed (harmless at any time).
    Timeout,
}

impl LinkInput {
    fn into_core(self) -> CoreInput {
        match self {
            LinkInput::Start => CoreInput::Start,
            LinkInput::Stop { code, reason } => CoreInput::Stop { code, reason },
            LinkInput::Opened { socket } => CoreInput::Opened { socket },
            LinkInput::ConnectFailed {
                socket,
                failure,
                detail,
            } => CoreInput::ConnectFailed {
                socket,
                failure: match failure {
                    ConnectFailure::Refused { status } => CoreFailure::Refused { status },
                    ConnectFailure::NoToken => CoreFailure::NoToken,
                    ConnectFailure::Failed => CoreFailure::Failed,
                },
                detail,
            },
            LinkInput::Attach { socket } => CoreInput::Attach { socket },
            LinkInput::Close { code, reason } => CoreInput::Close { code, reason },
            LinkInput::FrameText { socket, text } => CoreInput::Frame {
                socket,
                frame: InboundFrame::Text(text),
            },
            LinkInput::FrameBinary { socket, data } => CoreInput::Frame {
                socket,
                frame: InboundFrame::Binary(data),
            },
            LinkInput::SocketClosed { socket } => CoreInput::SocketClosed { socket },
            LinkInput::Failed { socket, detail } => CoreInput::Failed { socket, detail },
            LinkInput::EventsTaken { n } => CoreInput::EventsTaken(n),
            LinkInput::Confirm {
                task_id,
                attempt,
                seq,
            } => CoreInput::Confirm {
                task_id,
                attempt,
                seq,
            },
            LinkInput::Timeout => CoreInput::Timeout,
        }
    }
}

/// What the application learns from a link: the session's events (`Hello` …
/// `PeerError`) and the link's own news.
#[derive(Debug, Clone, uniffi::Enum)]
pub enum LinkEvent {
    /// Hub: the runner's `hello` was accepted (its resume already applied).
    Hello {
        /// The hello.
        hello: Hello,
    },
    /// A new sequenced message from the peer, exactly once and in stream order.
    Received {
        /// The message.
        message: Message,
    },
    /// An inbound gap the peer can no longer fill.
    InboundGap {
        /// The gap.
        resync: Resync,
    },
    /// Outbound frames the peer wanted but this side no longer keeps.
    OutboundResync {
        /// The gap.
        resync: Resync,
    },
    /// The peer sent something invalid (dropped); `code` is stable.
    PeerError {
        /// Stable code.
        code: String,
        /// The core's text.
        detail: String,
    },
    /// A socket was attached to the session.
    Connected,
    /// The socket was detached from the session, for `reason` (a stable code:
    /// `stopped`, `closed`, `replaced`, `peer_closed`, `transport_failed`,
    /// `backlog_full`, `peer_timeout`, `hello_required`, `unsupported_protocol_version`).
    Disconnected {
        /// Why.
        reason: String,
    },
    /// Runner: the next connect is in `delay_ms`; `failures` consecutive failures.
    Reconnecting {
        /// Delay before the next connect, ms.
        delay_ms: u64,
        /// Consecutive failures counted.
        failures: u32,
    },
    /// The connection failed: `code` is `upgrade_refused` (with `status`),
    /// `connect_failed`, `connect_timeout`, `no_token`, `transport_failed` or
    /// `backlog_full` (the error table's kind `transport`).
    Error {
        /// Stable code.
        code: String,
        /// Human-readable detail (not stable).
        detail: String,
        /// The HTTP status of a refused upgrade.
        status: Option<u16>,
    },
    /// A send was refused because the kept log is full (`bound`:
    /// `max_outbox_frames` or `max_outbox_bytes`); hold sends until `Unstalled`.
    Stalled {
        /// The bound reached.
        bound: String,
        /// Frames kept for replay.
        kept_frames: u64,
        /// Bytes kept for replay.
        kept_bytes: u64,
        /// What is wrong and what the peer must do.
        detail: String,
    },
    /// The kept log has room again: send again.
    Unstalled,
    /// Runner: after `Stop`, every socket is gone.
    Stopped,
    /// An event this binding does not know yet (a newer core).
    Unknown {
        /// The core's debug text.
        debug: String,
    },
}

fn event(e: CoreEvent) -> LinkEvent {
    match e {
        CoreEvent::Session(Event::Hello(h)) => LinkEvent::Hello {
            hello: hello_out(&h),
        },
        CoreEvent::Session(Event::Received(m)) => LinkEvent::Received {
            message: Message::from(&m),
        },
        CoreEvent::Session(Event::InboundGap(r)) => LinkEvent::InboundGap {
            resync: Resync::from(&r),
        },
        CoreEvent::Session(Event::OutboundResync(r)) => LinkEvent::OutboundResync {
            resync: Resync::from(&r),
        },
        CoreEvent::Session(Event::PeerError { code, detail }) => {
            LinkEvent::PeerError { code, detail }
        }
        CoreEvent::Connected => LinkEvent::Connected,
        CoreEvent::Disconnected { reason } => LinkEvent::Disconnected { reason },
        CoreEvent::Reconnecting { delay_ms, failures } => {
            LinkEvent::Reconnecting { delay_ms, failures }
        }
        CoreEvent::Error {
            code,
            detail,
            status,
        } => LinkEvent::Error {
            code: code.to_owned(),
            detail,
            status,
        },
        CoreEvent::Stalled {
            bound,
            kept_frames,
            kept_bytes,
            detail,
        } => LinkEvent::Stalled {
            bound: bound.to_owned(),
            kept_frames: kept_frames as u64,
            kept_bytes: kept_bytes as u64,
            detail,
        },
        CoreEvent::Unstalled => LinkEvent::Unstalled,
        CoreEvent::Stopped => LinkEvent::Stopped,
        other => LinkEvent::Unknown {
            debug: format!("{other:?}"),
        },
    }
}

/// What the link asks of its host, in order.
#[derive(Debug, Clone, uniffi::Enum)]
pub enum LinkOutput {
    /// Runner: open socket `socket` now (token, connect, upgrade) and report `Opened`
    /// or `ConnectFailed`. The connect deadline is the link's (it asks for an `Abort`).
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
    /// Start the close handshake on socket `socket`; report `SocketClosed` when it
    /// completes (the deadline is the link's: it asks for an `Abort`).
    Close {
        /// The socket's id.
        socket: u64,
        /// Close code.
        code: u16,
        /// Close reason (at most 123 UTF-8 bytes).
        reason: String,
    },
    /// Drop socket `socket` at once (abort its connection or its connect attempt);
    /// nothing more is reported about it.
    Abort {
        /// The socket's id.
        socket: u64,
    },
    /// Hand this event to the application (report it taken with `EventsTaken`).
    Event {
        /// The event.
        event: LinkEvent,
    },
    /// An output this binding does not know yet (a newer core).
    Unknown {
        /// The core's debug text.
        debug: String,
    },
}

fn output(o: CoreOutput) -> LinkOutput {
    match o {
        CoreOutput::Connect { socket } => LinkOutput::Connect { socket },
        CoreOutput::Send { socket, frame } => LinkOutput::Send { socket, frame },
        CoreOutput::Pause { socket } => LinkOutput::Pause { socket },
        CoreOutput::Resume { socket } => LinkOutput::Resume { socket },
        CoreOutput::Close {
            socket,
            code,
            reason,
        } => LinkOutput::Close {
            socket,
            code,
            reason,
        },
        CoreOutput::Abort { socket } => LinkOutput::Abort { socket },
        CoreOutput::Event(e) => LinkOutput::Event { event: event(e) },
        other => LinkOutput::Unknown {
            debug: format!("{other:?}"),
        },
    }
}

/// Every output of one input, and the deadline after it: what `step` returns.
#[derive(Debug, Clone, uniffi::Record)]
pub struct LinkStep {
    /// The outputs, in order (perform them in this order).
    pub outputs: Vec<LinkOutput>,
    /// When to feed `Timeout` next (absolute, the host's `now_ms` clock; `None`: no
    /// timer).
    pub timeout: Option<u64>,
}

/// Where the runner link is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Enum)]
pub enum LinkPhase {
    /// Not connecting.
    Idle,
    /// The next connect is due at `at_ms`.
    Waiting {
        /// When `Connect` is asked for.
        at_ms: u64,
    },
    /// Socket `socket` is being opened; it is aborted at `deadline_ms`.
    Connecting {
        /// The socket's id.
        socket: u64,
        /// The connect deadline.
        deadline_ms: u64,
    },
    /// Socket `socket` serves the session.
    Open {
        /// The socket's id.
        socket: u64,
    },
}

/// Counters of a link.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct LinkStats {
    /// News events not emitted because the application's queue was full.
    pub dropped_events: u64,
    /// Sockets attached to the session.
    pub connections: u64,
    /// Paused sockets that failed because their backlog outgrew its bound.
    pub backlog_overflows: u64,
}

/// Counters of the session inside a link.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct SessionStats {
    /// Sequenced frames delivered as `Received`.
    pub delivered: u64,
    /// Sequenced frames dropped as duplicates.
    pub duplicates: u64,
    /// Frames that arrived ahead of a gap and were held.
    pub held: u64,
    /// Held frames dropped because the hold buffer was full (replayed later).
    pub held_dropped: u64,
    /// Frames currently held.
    pub held_now: u64,
    /// Frames transmitted (replays, pings and pongs included).
    pub transmitted: u64,
    /// Kept frames dropped by a seed-only peer's implied acknowledgement (a plain pong
    /// to a ping sent after them).
    pub implied_acked: u64,
    /// Probe pings sent.
    pub probes: u64,
}

fn session_stats(s: &CoreStats) -> SessionStats {
    SessionStats {
        delivered: s.delivered,
        duplicates: s.duplicates,
        held: s.held,
        held_dropped: s.held_dropped,
        held_now: s.held_now as u64,
        transmitted: s.transmitted,
        implied_acked: s.implied_acked,
        probes: s.probes,
    }
}

/// What `send` stamped: the message with its `seq`, and its stream.
#[derive(Debug, Clone, uniffi::Record)]
pub struct Stamped {
    /// The stamped message, as kept for replay.
    pub message: Message,
    /// The stream's task.
    pub task_id: String,
    /// The stream's attempt (`None` for the hub's command streams).
    pub attempt: Option<u64>,
    /// The seq it was stamped with.
    pub seq: u64,
}

fn stamped(s: CoreStamped) -> Stamped {
    Stamped {
        message: Message::from(&s.message),
        task_id: s.task_id,
        attempt: s.attempt,
        seq: s.seq,
    }
}

fn link_error(e: LinkError) -> ProtocolError {
    match &e {
        LinkError::Session(s) => state("session", s.code(), s),
        other => state("link", other.code(), other),
    }
}

pub(crate) fn link_config(config_json: Option<String>) -> Result<LinkConfig, ProtocolError> {
    match config_json {
        None => Ok(LinkConfig::default()),
        Some(t) => Ok(LinkConfig::from_value(&parse_serde(&t)?)?),
    }
}

fn restored(snapshot: Option<Vec<u8>>) -> Result<Option<CoreState>, ProtocolError> {
    snapshot
        .map(|b| CoreState::restore(&b).map_err(|e| state("snapshot", e.code(), &e)))
        .transpose()
}

/// The close code of a plain close (1000), the one the core uses itself: what a host
/// passes to `Stop` unless the application names another.
#[uniffi::export]
pub fn close_code_normal() -> u16 {
    stapel_runner_protocol::host::CLOSE_NORMAL
}

/// The core's default link configuration (every key with its default) as JSON text.
#[uniffi::export]
pub fn link_config_defaults() -> String {
    LinkConfig::default().to_value().to_string()
}

/// The link configuration the core reads from `config_json` (the link's own keys with
/// their values, `session` not repeated), as JSON text.
///
/// # Errors
/// `ProtocolError::Config` (`unknown_key`, `wrong_type`, `out_of_range`, …).
#[uniffi::export]
pub fn link_config_parse(config_json: String) -> Result<String, ProtocolError> {
    Ok(link_config(Some(config_json))?.to_value().to_string())
}

macro_rules! link_object {
    ($name:ident, $core:ty) => {
        impl $name {
            fn lock(&self) -> MutexGuard<'_, $core> {
                self.inner.lock().unwrap_or_else(|e| e.into_inner())
            }
        }

        #[uniffi::export]
        impl $name {
            /// Feeds one input (see the transition table of the core's type).
            ///
            /// # Errors
            /// `ProtocolError::State`: `wrong_side` (the other side's input),
            /// `invalid_close_code`, or the session's code of a refused `Confirm`
            /// (`not_durable`, `confirm_ahead`).
            pub fn handle_input(&self, now_ms: u64, input: LinkInput) -> Result<(), ProtocolError> {
                self.lock()
                    .handle_input(now_ms, input.into_core())
                    .map_err(link_error)
            }

            /// `handle_input`, then every output and the next deadline, in one call. On
            /// an error the outputs the input produced stay queued (`drain_outputs`).
            ///
            /// # Errors
            /// As `handle_input`.
            pub fn step(&self, now_ms: u64, input: LinkInput) -> Result<LinkStep, ProtocolError> {
                let mut l = self.lock();
                l.handle_input(now_ms, input.into_core())
                    .map_err(link_error)?;
                let outputs = std::iter::from_fn(|| l.poll_output().map(output)).collect();
                Ok(LinkStep {
                    outputs,
                    timeout: l.poll_timeout(),
                })
            }

            /// Feeds text frames read from socket `socket`, in order, as many
            /// `FrameText` inputs (one boundary crossing for the batch); drain the
            /// outputs afterwards.
            pub fn handle_frames(&self, now_ms: u64, socket: u64, frames: Vec<String>) {
                let mut l = self.lock();
                for text in frames {
                    // Frame inputs are never refused.
                    let _ = l.handle_input(
                        now_ms,
                        core_link::LinkInput::Frame {
                            socket,
                            frame: InboundFrame::Text(text),
                        },
                    );
                }
            }

            /// The next output, or `None` once drained.
            pub fn poll_output(&self) -> Option<LinkOutput> {
                self.lock().poll_output().map(output)
            }

            /// Every output until drained.
            pub fn drain_outputs(&self) -> Vec<LinkOutput> {
                let mut l = self.lock();
                std::iter::from_fn(|| l.poll_output().map(output)).collect()
            }

            /// When to feed `Timeout` next (absolute, the host's `now_ms` clock; `None`:
            /// no timer).
            pub fn poll_timeout(&self) -> Option<u64> {
                self.lock().poll_timeout()
            }

            /// Sends a sequenced message: stamped, kept for replay, transmitted when
            /// connected (drain the outputs afterwards). Returns what was stamped.
            ///
            /// # Errors
            /// `ProtocolError::State` with the session's code, e.g. `backpressure` (the
            /// kept log is full: `Stalled` is emitted once; send again after
            /// `Unstalled`), or a message the session refuses.
            pub fn send(&self, now_ms: u64, message: Message) -> Result<Stamped, ProtocolError> {
                let m = message.to_core()?;
                self.lock().send(now_ms, m).map(stamped).map_err(link_error)
            }

            /// `true` while a socket serves the session.
            pub fn is_connected(&self) -> bool {
                self.lock().is_connected()
            }

            /// `true` between `Stalled` and `Unstalled`.
            pub fn is_stalled(&self) -> bool {
                self.lock().is_stalled()
            }

            /// Events emitted and not yet reported taken.
            pub fn queued_events(&self) -> u64 {
                self.lock().queued_events()
            }

            /// The link's counters.
            pub fn stats(&self) -> LinkStats {
                let l = self.lock();
                let s = l.stats();
                LinkStats {
                    dropped_events: s.dropped_events,
                    connections: s.connections,
                    backlog_overflows: s.backlog_overflows,
                }
            }

            /// The session's counters.
            pub fn session_stats(&self) -> SessionStats {
                session_stats(self.lock().session_stats())
            }

            /// The link's configuration (its own keys; `session` not repeated) as
            /// JSON text.
            pub fn config_json(&self) -> String {
                self.lock().config().to_value().to_string()
            }

            /// The sequencing state as bytes (persist it; pass it to the constructor to
            /// resume).
            pub fn snapshot(&self) -> Vec<u8> {
                self.lock().state().snapshot()
            }

            /// Forgets a task in the sequencing state (e.g. once its report was
            /// acknowledged); `true` when it was known.
            pub fn forget_task(&self, task_id: String) -> bool {
                self.lock().state_mut().forget_task(&task_id)
            }

            /// The sequencing state's resume declaration.
            pub fn resume_map(&self) -> Vec<ResumeEntry> {
                resume_entries(&self.lock().state().resume_map())
            }

            /// Frames kept for replay.
            pub fn outbox_frames(&self) -> u64 {
                self.lock().state().outbox_frames() as u64
            }

            /// Bytes kept for replay.
            pub fn outbox_bytes(&self) -> u64 {
                self.lock().state().outbox_bytes() as u64
            }

            /// `true` when every frame of `task_id` this side sent was acknowledged.
            pub fn is_fully_acknowledged(&self, task_id: String) -> bool {
                self.lock().state().is_fully_acknowledged(&task_id)
            }
        }
    };
}

/// The runner's connection to its hub: the runner session, its socket, reconnects
/// with the core's backoff (jitter from a seed given once), and the bounds on the
/// application's events.
///
/// Call order: create it (over a snapshot to resume), feed `Start`; after every input
/// and every `send`, drain the outputs and perform each in order (`Connect`, `Send`,
/// `Pause`, `Resume`, `Close`, `Abort`, `Event`); arm one timer at `poll_timeout()` and
/// feed `Timeout`; report socket news with the socket's id and the events the
/// application took with `EventsTaken`. Thread-safe (a mutex); calls never re-enter.
#[derive(uniffi::Object)]
pub struct RunnerLink {
    inner: Mutex<core_link::RunnerLink>,
}

link_object!(RunnerLink, core_link::RunnerLink);

#[uniffi::export]
impl RunnerLink {
    /// A runner link announcing `hello`. `config_json` is the core's link configuration
    /// (`LinkConfig` keys, the session's under `session`; `None`: defaults);
    /// `snapshot` restores persisted sequencing state; `seed` seeds the reconnect
    /// jitter (take it from a random source, once).
    ///
    /// # Errors
    /// `ProtocolError::Config`, `ProtocolError::Decode` for a bad hello, or the
    /// snapshot's code.
    #[uniffi::constructor(default(config_json = None, snapshot = None, seed = 0))]
    pub fn new(
        hello: Hello,
        config_json: Option<String>,
        snapshot: Option<Vec<u8>>,
        seed: u64,
    ) -> Result<Self, ProtocolError> {
        let c = link_config(config_json)?;
        let h = hello_in(hello)?;
        let session = match restored(snapshot)? {
            None => CoreRunner::new(h, c.session.clone()),
            Some(s) => CoreRunner::with_state(h, c.session.clone(), s),
        };
        Ok(Self {
            inner: Mutex::new(core_link::RunnerLink::new(session, c, seed)),
        })
    }

    /// `send` of a message that may have been sent before (a seq its stream already
    /// emitted is not sent again).
    ///
    /// # Errors
    /// As `send`.
    pub fn resend(&self, now_ms: u64, message: Message) -> Result<Stamped, ProtocolError> {
        let m = message.to_core()?;
        self.lock()
            .resend(now_ms, m)
            .map(stamped)
            .map_err(link_error)
    }

    /// The phase (idle, waiting, connecting, open).
    pub fn phase(&self) -> LinkPhase {
        match self.lock().phase() {
            core_link::LinkPhase::Idle => LinkPhase::Idle,
            core_link::LinkPhase::Waiting { at_ms } => LinkPhase::Waiting { at_ms },
            core_link::LinkPhase::Connecting {
                socket,
                deadline_ms,
            } => LinkPhase::Connecting {
                socket,
                deadline_ms,
            },
            core_link::LinkPhase::Open { socket } => LinkPhase::Open { socket },
        }
    }
}

/// One runner as a hub serves it, across its sockets: the hub session (kept across
/// reconnects), the socket that serves it (a newer one replaces an older one), the same
/// bounds and close policy as the runner link. The door (token check, eviction) is
/// `HubHost`. Call order as `RunnerLink`; with durable acks (session config
/// `durable_acks`) feed `Confirm` once the store committed a position.
#[derive(uniffi::Object)]
pub struct HubLink {
    inner: Mutex<core_link::HubLink>,
}

link_object!(HubLink, core_link::HubLink);

impl HubLink {
    /// The object over a core hub link (the store's `from_rows`, see `store.rs`).
    pub(crate) fn from_core(l: core_link::HubLink) -> Self {
        Self {
            inner: Mutex::new(l),
        }
    }

    /// Runs `f` on the core link under its lock.
    pub(crate) fn with_core<R>(&self, f: impl FnOnce(&core_link::HubLink) -> R) -> R {
        f(&self.lock())
    }
}

#[uniffi::export]
impl HubLink {
    /// A hub link; `config_json` and `snapshot` as for `RunnerLink`.
    ///
    /// # Errors
    /// `ProtocolError::Config`, or the snapshot's code.
    #[uniffi::constructor(default(config_json = None, snapshot = None))]
    pub fn new(
        config_json: Option<String>,
        snapshot: Option<Vec<u8>>,
    ) -> Result<Self, ProtocolError> {
        let c = link_config(config_json)?;
        let session = match restored(snapshot)? {
            None => CoreHub::new(c.session.clone()),
            Some(s) => CoreHub::with_state(c.session.clone(), s),
        };
        Ok(Self {
            inner: Mutex::new(core_link::HubLink::new(session, c)),
        })
    }

    /// The socket serving the runner, if any.
    pub fn socket(&self) -> Option<u64> {
        self.lock().socket()
    }

    /// Sockets attached or in their close handshake (for the hub's eviction decision).
    pub fn sockets(&self) -> u64 {
        self.lock().sockets()
    }

    /// The `attempt` of the latest `task.assign` sent for `task_id` (0: none): the
    /// attempt a seed-only runner's attempt-less frames are delivered with.
    pub fn assigned_attempt(&self, task_id: String) -> u64 {
        self.lock().state().assigned_attempt(&task_id)
    }
}
