//! Session machines: the hub side ([`HubSession`]) and the runner side
//! ([`RunnerSession`]) of one hub↔runner connection, over [`ConnectionState`].
//!
//! Both have the same sans-IO shape (DESIGN §3.1), the methods of the [`Machine`]
//! trait: the host feeds [`handle_input(now_ms, Input)`](Machine::handle_input) (or
//! [`send`](Machine::send), which also returns what it [`Stamped`]), then drains
//! [`poll_output()`](Machine::poll_output) until it returns `None`, then asks
//! [`poll_timeout()`](Machine::poll_timeout) when to feed `handle_input(t,`
//! [`Input::Timeout`]`)`. Time is only ever the `now_ms` passed in. The transitions of
//! each side are tabled on [`HubSession`] and [`RunnerSession`].
//!
//! ```
//! use stapel_runner_protocol::session::{Event, HubSession, Input, Machine, Output, RunnerSession, SessionConfig};
//! use stapel_runner_protocol::wire::{Hello, TaskCancel};
//!
//! let mut hub = HubSession::new(SessionConfig::default());
//! let mut runner = RunnerSession::new(Hello::new("brave-falcon-1042", "0.1.0"), SessionConfig::default());
//! hub.handle_input(0, Input::Connected).unwrap();
//! runner.handle_input(0, Input::Connected).unwrap(); // queues the hello
//! let stamped = hub.send(0, TaskCancel::new("T-1", "stop").into()).unwrap();
//! assert_eq!((stamped.task_id.as_str(), stamped.attempt, stamped.seq), ("T-1", None, 1));
//!
//! let mut commands = Vec::new();
//! for _ in 0..3 {
//!     // Runner → hub, then hub → runner; a real host does this with its sockets.
//!     while let Some(o) = runner.poll_output() {
//!         match o {
//!             Output::Transmit(f) => hub.handle_input(0, Input::Frame(f)).unwrap(),
//!             Output::Event(Event::Received(m)) => commands.push(m),
//!             _ => {}
//!         }
//!     }
//!     while let Some(o) = hub.poll_output() {
//!         if let Output::Transmit(f) = o {
//!             runner.handle_input(0, Input::Frame(f)).unwrap();
//!         }
//!     }
//! }
//! assert_eq!(commands.len(), 1);
//! assert_eq!(commands[0].seq(), Some(1));
//! assert_eq!(hub.poll_timeout(), Some(15_000)); // the keepalive ping
//! ```
//!
//! # The protocol extensions (interoperable with seed-only peers)
//!
//! Seed 000 defines no acknowledgement of runner→hub frames and no resync notice. Both
//! are carried as **extra fields on `ping` and `pong`**, which a seed-only peer keeps in
//! `extra` and ignores (its decoder rejects unknown *types*, never unknown fields):
//!
//! * `"ack": [{"task_id","attempt"?,"seq"}, …]` — "I have received everything up to
//!   `seq` on this stream"; the receiver drops those frames from its replay log.
//! * `"replay_from": [{"task_id","attempt"?,"seq"}, …]` — "the lowest seq I can still
//!   send on this stream is `seq`"; a receiver whose watermark is below `seq − 1` skips
//!   the gap and reports it ([`Event::InboundGap`]).
//!
//! The runner also puts `replay_from` (for every stream it has emitted on) into
//! `hello`, as an extra field. Control frames stay within
//! [`SessionConfig::max_control_frame_bytes`]: lists are split over pings, and a
//! `hello.resume` that does not fit is continued in pings (`"resume_more": true` on the
//! hello, `"resume": {…}` on pings, `"resume_end": true` on the last). A runner whose
//! state may be older than the hub's sends a barrier ping after its hello and holds
//! provisional frames until its pong. See `docs/protocol.md` for the full protocol and
//! sequence diagrams.

mod engine;
mod hub;
mod runner;

use engine::Engine;

pub use hub::HubSession;
pub use runner::RunnerSession;

use crate::config::{ConfigError, ConfigReader};
use crate::framing::FramerConfig;
use crate::sequencing::{ConnectionState, EmitError, Resync, SequencingConfig};
use crate::wire::{Hello, Message};

/// Whether a session checks every schema rule of the frames it receives, by default.
pub const DEFAULT_VALIDATE: bool = true;

/// Default keepalive ping interval: 15 s.
pub const DEFAULT_PING_INTERVAL_MS: u64 = 15_000;
/// Default dead-peer timeout: 45 s without any inbound bytes.
pub const DEFAULT_PEER_TIMEOUT_MS: u64 = 45_000;
/// Default number of newly applied frames that triggers an immediate acknowledgement.
pub const DEFAULT_ACK_EVERY_FRAMES: u64 = 1024;
/// Default longest delay between applying a frame and acknowledging it: 200 ms.
pub const DEFAULT_ACK_DELAY_MS: u64 = 200;
/// Default most positions in one `ack` list (longer lists are split over several pings).
pub const DEFAULT_MAX_ACK_ENTRIES: usize = 1024;
/// Default most frames held while waiting for a gap to fill, per session.
pub const DEFAULT_MAX_HELD_FRAMES: usize = 1024;
/// Default most encoded bytes held while waiting for a gap to fill, per session (16 MiB).
pub const DEFAULT_MAX_HELD_BYTES: usize = 16 * 1024 * 1024;
/// Default number of sequenced frames transmitted since the last ping after which the
/// session sends a probe `ping` (see [`SessionConfig::probe_every_frames`]).
pub const DEFAULT_PROBE_EVERY_FRAMES: u64 = 1024;
/// Most pings whose implied acknowledgement a session remembers at once (the oldest is
/// forgotten first; forgetting one only delays trimming until a later pong).
pub const MAX_PING_SNAPSHOTS: usize = 16;
/// Default bound on the encoded size of the control frames a session builds (`hello`,
/// `ping`, `pong` with their lists): 60 KiB, below the 64 KiB default line bound of the
/// peer's framer.
pub const DEFAULT_MAX_CONTROL_FRAME_BYTES: usize = 60 * 1024;

/// Configuration of a session machine. Every field has a documented default.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SessionConfig {
    /// Bounds of the underlying
    /// [`ConnectionState`]. Default: [`SequencingConfig::default`].
    pub sequencing: SequencingConfig,
    /// Bounds of the inbound JSONL framer (used for [`Input::Bytes`]; also the size
    /// bound of one [`Input::Frame`]). Default: [`FramerConfig::default`] (64 KiB lines).
    pub framer: FramerConfig,
    /// Decode inbound frames with full schema validation. Default `true`.
    pub validate: bool,
    /// Send a `ping` this often while connected. Default
    /// [`DEFAULT_PING_INTERVAL_MS`]; 0 disables keepalive pings.
    pub ping_interval_ms: u64,
    /// Declare the peer dead after this long without inbound bytes
    /// ([`CloseReason::PeerTimeout`]). Default [`DEFAULT_PEER_TIMEOUT_MS`]; 0 disables.
    pub peer_timeout_ms: u64,
    /// Acknowledge as soon as this many new frames were applied since the last
    /// acknowledgement. Default [`DEFAULT_ACK_EVERY_FRAMES`] (values below 1 act as 1).
    pub ack_every_frames: u64,
    /// Acknowledge at the latest this long after the first unacknowledged frame was
    /// applied. Default [`DEFAULT_ACK_DELAY_MS`].
    pub ack_delay_ms: u64,
    /// Most positions in one `ack` list. Default [`DEFAULT_MAX_ACK_ENTRIES`] (values below
    /// 1 act as 1).
    pub max_ack_entries: usize,
    /// Most encoded bytes of one control frame this session builds: `ack` and
    /// `replay_from` lists are split over several pings, and a `hello.resume` that does
    /// not fit is continued in pings (`resume_more` / `resume` / `resume_end`, see
    /// `docs/protocol.md`). Keep it below the peer's line bound. Default
    /// [`DEFAULT_MAX_CONTROL_FRAME_BYTES`] (60 KiB).
    pub max_control_frame_bytes: usize,
    /// Most frames held (arrived ahead of a gap) per session; further ones are dropped
    /// unrecorded and come back with the next replay. Default
    /// [`DEFAULT_MAX_HELD_FRAMES`].
    pub max_held_frames: usize,
    /// Most encoded bytes held (arrived ahead of a gap) per session; further frames are
    /// dropped unrecorded, as with `max_held_frames`. Default [`DEFAULT_MAX_HELD_BYTES`]
    /// (16 MiB).
    pub max_held_bytes: usize,
    /// Lowest `hello.protocol_version` the hub accepts. Default 1.
    pub min_protocol_version: u64,
    /// Highest `hello.protocol_version` the hub accepts. Default
    /// [`PROTOCOL_VERSION`](crate::wire::PROTOCOL_VERSION) (1).
    pub max_protocol_version: u64,
    /// Send a probe `ping` after this many sequenced frames were transmitted since the
    /// last ping (and when a send is refused with `backpressure`), so that a seed-only
    /// peer's `pong` trims the kept log (see "Seed-only peers" in `docs/protocol.md`).
    /// Default [`DEFAULT_PROBE_EVERY_FRAMES`]; 0 disables the count (the backpressure
    /// probe stays).
    pub probe_every_frames: u64,
    /// Durable acknowledgements: acknowledge an inbound stream only up to the position the
    /// host confirmed with [`Input::Confirm`] (its store committed it), on every path
    /// (timer, `ack_every_frames`, pings, pongs, the acknowledgement after a `hello`).
    /// Default `false`: frames are acknowledged once applied (an in-memory hub).
    pub durable_acks: bool,
}

impl Default for SessionConfig {
    fn default() -> Self {
        Self {
            sequencing: SequencingConfig::default(),
            framer: FramerConfig::default(),
            validate: DEFAULT_VALIDATE,
            ping_interval_ms: DEFAULT_PING_INTERVAL_MS,
            peer_timeout_ms: DEFAULT_PEER_TIMEOUT_MS,
            ack_every_frames: DEFAULT_ACK_EVERY_FRAMES,
            ack_delay_ms: DEFAULT_ACK_DELAY_MS,
            max_ack_entries: DEFAULT_MAX_ACK_ENTRIES,
            max_control_frame_bytes: DEFAULT_MAX_CONTROL_FRAME_BYTES,
            max_held_frames: DEFAULT_MAX_HELD_FRAMES,
            max_held_bytes: DEFAULT_MAX_HELD_BYTES,
            min_protocol_version: 1,
            max_protocol_version: crate::wire::PROTOCOL_VERSION,
            probe_every_frames: DEFAULT_PROBE_EVERY_FRAMES,
            durable_acks: false,
        }
    }
}

impl SessionConfig {
    /// The keys of the JSON form: the field names, with `max_line_bytes` for
    /// [`framer`](Self::framer)'s line bound and `sequencing` a nested
    /// [`SequencingConfig`] object.
    pub const KEYS: [&'static str; 15] = [
        "validate",
        "ping_interval_ms",
        "peer_timeout_ms",
        "ack_every_frames",
        "ack_delay_ms",
        "max_ack_entries",
        "max_control_frame_bytes",
        "max_held_frames",
        "max_held_bytes",
        "min_protocol_version",
        "max_protocol_version",
        "max_line_bytes",
        "sequencing",
        "probe_every_frames",
        "durable_acks",
    ];

    /// Defaults overridden by the keys present in `value` (see [`KEYS`](Self::KEYS)),
    /// read by the crate's one config reader ([`crate::config`]).
    ///
    /// # Errors
    /// [`ConfigError`]: `not_an_object`, `unknown_key`, `wrong_type`, `out_of_range`
    /// (keys of the nested `sequencing` object are dotted: `sequencing.max_streams`).
    pub fn from_value(value: &serde_json::Value) -> Result<Self, ConfigError> {
        Self::read(&ConfigReader::new(value, &Self::KEYS)?)
    }

    /// The config read from a checked reader (its keys [`KEYS`](Self::KEYS); a nested
    /// object's errors name dotted keys, e.g. `session.ping_interval_ms`).
    ///
    /// # Errors
    /// As [`from_value`](Self::from_value).
    pub fn read(r: &ConfigReader<'_>) -> Result<Self, ConfigError> {
        let d = Self::default();
        Ok(Self {
            sequencing: match r.nested("sequencing", &SequencingConfig::KEYS)? {
                Some(s) => SequencingConfig::read(&s)?,
                None => d.sequencing,
            },
            framer: match r.usize("max_line_bytes")? {
                Some(n) => FramerConfig::with_max_line_bytes(n),
                None => d.framer,
            },
            validate: r.bool("validate")?.unwrap_or(d.validate),
            ping_interval_ms: r.u64("ping_interval_ms")?.unwrap_or(d.ping_interval_ms),
            peer_timeout_ms: r.u64("peer_timeout_ms")?.unwrap_or(d.peer_timeout_ms),
            ack_every_frames: r.u64("ack_every_frames")?.unwrap_or(d.ack_every_frames),
            ack_delay_ms: r.u64("ack_delay_ms")?.unwrap_or(d.ack_delay_ms),
            max_ack_entries: r.usize("max_ack_entries")?.unwrap_or(d.max_ack_entries),
            max_control_frame_bytes: r
                .usize("max_control_frame_bytes")?
                .unwrap_or(d.max_control_frame_bytes),
            max_held_frames: r.usize("max_held_frames")?.unwrap_or(d.max_held_frames),
            max_held_bytes: r.usize("max_held_bytes")?.unwrap_or(d.max_held_bytes),
            min_protocol_version: r
                .u64("min_protocol_version")?
                .unwrap_or(d.min_protocol_version),
            max_protocol_version: r
                .u64("max_protocol_version")?
                .unwrap_or(d.max_protocol_version),
            probe_every_frames: r.u64("probe_every_frames")?.unwrap_or(d.probe_every_frames),
            durable_acks: r.bool("durable_acks")?.unwrap_or(d.durable_acks),
        })
    }
}

/// What the host tells a session machine.
// A message travels inline rather than boxed: one input per frame on the hot path, and
// a box would add an allocation per frame for no gain.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum Input {
    /// A transport connection is up.
    Connected,
    /// The transport connection is gone (closed by either side, or after an
    /// [`Output::Close`]). Idempotent.
    Disconnected,
    /// Bytes of a JSONL stream, in any chunking (frames end with `\n`).
    Bytes(Vec<u8>),
    /// One complete frame (e.g. one WebSocket text message), without a newline.
    Frame(String),
    /// A sequenced message to send: `task.assign` / `task.cancel` on the hub,
    /// `task.progress` / `task.report` on the runner. It is stamped, kept for replay,
    /// and transmitted when the connection is ready.
    Send(Message),
    /// The deadline given by [`poll_timeout`](Machine::poll_timeout) was reached
    /// (keepalive pings, acknowledgements, dead-peer detection). Harmless at any time.
    Timeout,
    /// Durable acknowledgements ([`SessionConfig::durable_acks`]): the host's store
    /// committed every frame of the inbound stream `(task_id, attempt)` up to `seq`
    /// (attempt `Some(a)` on the hub, `None` on the runner). Acknowledgements of the
    /// stream may now go up to `seq`. Confirm through an [`Event::InboundGap`]'s
    /// `missing_to` once the gap is recorded. The attempt is the one the application
    /// saw: a seed-only runner's attempt-less frames, delivered as the task's assigned
    /// attempt, are confirmed with that attempt.
    Confirm {
        /// The stream's task.
        task_id: String,
        /// The stream's attempt (`None` for the hub's command streams).
        attempt: Option<u64>,
        /// The highest seq committed.
        seq: u64,
    },
}

/// What a session machine asks of its host, in order.
// Inline for the same reason as [`Input`]: one output per applied frame.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    /// Send this frame (compact JSON, no trailing newline; a JSONL transport appends
    /// `\n`).
    Transmit(String),
    /// Something the application must know.
    Event(Event),
    /// Close the transport for this reason, then report [`Input::Disconnected`].
    Close(CloseReason),
}

impl Output {
    /// The output's stable name, the tag every binding uses for it: `transmit`,
    /// `close`, or for an [`Output::Event`] the event's own [`Event::kind`].
    pub fn kind(&self) -> &'static str {
        match self {
            Output::Transmit(_) => "transmit",
            Output::Close(_) => "close",
            Output::Event(e) => e.kind(),
        }
    }
}

/// What [`Machine::send`] stamped: the message with its `seq` set, and the stream it
/// was stamped on.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Stamped {
    /// The stamped message (its `seq` set), as kept for replay.
    pub message: Message,
    /// The stream's task.
    pub task_id: String,
    /// The stream's attempt: `None` for the hub's command streams, the message's
    /// attempt (0 when absent) for the runner's progress and report streams.
    pub attempt: Option<u64>,
    /// The seq it was stamped with.
    pub seq: u64,
}

mod sealed {
    use super::Engine;
    use crate::wire::Hello;

    /// Reaches the engine behind a session machine (not implementable outside).
    pub trait Sealed {
        /// The engine.
        fn engine(&self) -> &Engine;
        /// The engine, and the runner's hello template (`None` on the hub).
        fn parts(&mut self) -> (&mut Engine, Option<&Hello>);
    }
}

/// The sans-IO shape both session machines share ([`HubSession`], [`RunnerSession`]):
/// one implementation, so a host (or a binding) drives either through one type.
///
/// Call order: feed one input ([`handle_input`](Self::handle_input) or
/// [`send`](Self::send)), drain [`poll_output`](Self::poll_output) until `None`, then
/// arm a timer at [`poll_timeout`](Self::poll_timeout) and feed [`Input::Timeout`] when
/// it fires. Sealed: only this crate implements it.
pub trait Machine: sealed::Sealed {
    /// Feed one input at time `now_ms` (monotonic, host-chosen).
    ///
    /// # Errors
    /// [`SessionError`]: `not_connected`, `already_connected`, or the sequencing code of
    /// a refused [`Input::Send`] (the message is inside the error).
    fn handle_input(&mut self, now_ms: u64, input: Input) -> Result<(), SessionError> {
        let (engine, hello) = self.parts();
        engine.handle(now_ms, input, hello)
    }

    /// [`Input::Send`] that returns what was stamped: the message with its seq and its
    /// stream key.
    ///
    /// # Errors
    /// As [`handle_input`](Self::handle_input) with [`Input::Send`].
    fn send(&mut self, now_ms: u64, message: Message) -> Result<Stamped, SessionError> {
        self.parts().0.send(now_ms, message)
    }

    /// [`send`](Self::send) of a message that may have been sent before — the shape of
    /// stapel-runner-protocol 0.1.1's `RunnerConnection.send`, whose application numbers
    /// its frames itself and, after a reconnect, re-sends them from its last checkpoint
    /// ("the hub drops duplicates"). A message whose `seq` its stream already emitted
    /// (`1 ≤ seq ≤` the stream's last emitted seq, forgotten tasks included:
    /// [`ConnectionState::was_emitted`]) is that frame: nothing is stamped, kept or
    /// transmitted — the session already keeps it until acknowledged and replays it
    /// after a reconnect, so the peer gets it exactly once — and the returned
    /// [`Stamped`] carries the message as given, with its seq. A message with seq 0 is
    /// sent as with [`send`](Self::send) and numbered by the session. Any other seq is the
    /// application's: the frame is stamped with it (the stream's numbering jumps to it),
    /// and the stream's numbering is final from then on — never provisional, and a peer's
    /// acknowledgement at or beyond it trims instead of re-stamping — so 0.1.1 code that
    /// re-sends its frames to a fresh session (a new connection) has them dropped as
    /// duplicates, not applied again.
    ///
    /// # Errors
    /// As [`send`](Self::send) (a message that is not re-sent).
    fn resend(&mut self, now_ms: u64, message: Message) -> Result<Stamped, SessionError> {
        self.parts().0.resend(now_ms, message)
    }

    /// The next output; `None` when there is nothing more to do now.
    fn poll_output(&mut self) -> Option<Output> {
        self.parts().0.poll()
    }

    /// When to feed [`Input::Timeout`] next: an absolute time in the host's `now_ms`
    /// clock (`None`: no timer; only another input can change that). Ask after
    /// draining [`poll_output`](Self::poll_output).
    fn poll_timeout(&self) -> Option<u64> {
        self.engine().deadline()
    }

    /// The machine as a [`HubSession`] (`None` for a runner session): for hosts that
    /// hold either side behind this trait and need the hub's own API (its store rows).
    fn as_hub(&self) -> Option<&HubSession> {
        None
    }

    /// `true` when [`poll_output`](Self::poll_output) would return `Some`.
    fn has_output(&self) -> bool {
        self.engine().has_output()
    }

    /// The sequencing state (snapshot it to persist).
    fn state(&self) -> &ConnectionState {
        &self.engine().state
    }

    /// Mutable access to the sequencing state (e.g. to forget a finished task).
    fn state_mut(&mut self) -> &mut ConnectionState {
        &mut self.parts().0.state
    }

    /// `true` while a transport connection is up (hub: with or without `hello`).
    fn is_connected(&self) -> bool {
        self.engine().is_up()
    }

    /// Counters.
    fn stats(&self) -> &SessionStats {
        &self.engine().stats
    }
}

/// Application-visible happenings.
// Inline for the same reason as [`Input`]: one event per applied frame.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Event {
    /// Hub: the runner's `hello` was accepted (its resume was already applied).
    Hello(Hello),
    /// A new sequenced message, delivered exactly once and in stream order: commands on
    /// the runner, progress and reports on the hub.
    Received(Message),
    /// The peer declared it can no longer send seqs `missing_from..=missing_to` of a
    /// stream this end had not received; the stream continues after them.
    InboundGap(Resync),
    /// The peer declared a position older than the kept log: it missed
    /// `missing_from..=missing_to`, which can no longer be replayed (the peer was told
    /// with a `replay_from` notice).
    OutboundResync(Resync),
    /// The peer broke a rule; the offending frame or field was dropped. `code` is the
    /// stable code of the underlying error (a wire `DecodeError`, a framing error, a
    /// sequencing error) or one of `unexpected_message`, `invalid_extension`,
    /// `resume_ahead` (hub: the runner declared a command position this hub's state did
    /// not know it had sent), `ack_ahead` (the peer acknowledged seqs this end's state
    /// did not know it had sent), `invalid_resume` (hub: a `hello.resume` value above
    /// 2^53 − 1, ignored). In both `*_ahead` cases this end's state is older than the
    /// peer's: frames the peer has not seen are re-stamped after its position and sent
    /// (nothing is lost), and numbering continues after them.
    PeerError {
        /// Stable code.
        code: String,
        /// Human-readable detail (not stable).
        detail: String,
    },
}

impl Event {
    /// The event's stable name, the tag every binding uses for it: `hello`,
    /// `received`, `inbound_gap`, `outbound_resync`, `peer_error`.
    pub fn kind(&self) -> &'static str {
        match self {
            Event::Hello(_) => "hello",
            Event::Received(_) => "received",
            Event::InboundGap(_) => "inbound_gap",
            Event::OutboundResync(_) => "outbound_resync",
            Event::PeerError { .. } => "peer_error",
        }
    }
}

/// Why a session asks the host to close the transport.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CloseReason {
    /// Nothing arrived for `peer_timeout_ms`. Code `peer_timeout`.
    PeerTimeout,
    /// Hub: the runner's `hello.protocol_version` is outside the accepted range. Code
    /// `unsupported_protocol_version`.
    UnsupportedProtocolVersion {
        /// The version the runner declared.
        version: u64,
    },
    /// Hub: the runner sent a sequenced frame (or its post-hello barrier ping) before
    /// its `hello`. Code `hello_required`.
    HelloRequired,
}

impl CloseReason {
    /// Stable snake_case code.
    pub fn code(&self) -> &'static str {
        match self {
            CloseReason::PeerTimeout => "peer_timeout",
            CloseReason::UnsupportedProtocolVersion { .. } => "unsupported_protocol_version",
            CloseReason::HelloRequired => "hello_required",
        }
    }
}

/// Local misuse of a session machine.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum SessionError {
    /// [`Input::Send`] was refused by the sequencing layer; the message is inside,
    /// unchanged. Code: that of the cause (e.g. `backpressure`).
    #[error(transparent)]
    Emit(EmitError),
    /// Bytes or a frame arrived while no connection is up. Code `not_connected`.
    #[error("no connection is up")]
    NotConnected,
    /// [`Input::Connected`] while a connection is already up. Code `already_connected`.
    #[error("a connection is already up")]
    AlreadyConnected,
    /// [`Input::Confirm`] on a session without [`SessionConfig::durable_acks`]. Code
    /// `not_durable`.
    #[error("confirm needs durable_acks")]
    NotDurable,
    /// [`Input::Confirm`] beyond what the session delivered on the stream (a store cannot
    /// have committed a frame it never got). Code `confirm_ahead`.
    #[error("confirmed seq {seq} of {task_id:?} (attempt {attempt:?}) is beyond the delivered {delivered}")]
    ConfirmAhead {
        /// The stream's task.
        task_id: String,
        /// The stream's attempt.
        attempt: Option<u64>,
        /// The confirmed seq.
        seq: u64,
        /// The last seq delivered contiguously.
        delivered: u64,
    },
}

impl SessionError {
    /// Stable snake_case code.
    pub fn code(&self) -> &'static str {
        match self {
            SessionError::Emit(e) => e.code(),
            SessionError::NotConnected => "not_connected",
            SessionError::AlreadyConnected => "already_connected",
            SessionError::NotDurable => "not_durable",
            SessionError::ConfirmAhead { .. } => "confirm_ahead",
        }
    }
}

/// Counters of a session (for metrics and tests).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SessionStats {
    /// Sequenced frames delivered as [`Event::Received`].
    pub delivered: u64,
    /// Sequenced frames dropped as duplicates.
    pub duplicates: u64,
    /// Frames that arrived ahead of a gap and were held.
    pub held: u64,
    /// Frames that arrived ahead of a gap and were dropped because the hold buffer was
    /// full (they come back with the next replay).
    pub held_dropped: u64,
    /// Frames currently held.
    pub held_now: usize,
    /// Frames transmitted (including replays, pings and pongs).
    pub transmitted: u64,
    /// Kept frames dropped because a `pong` without an `ack` member answered a ping sent
    /// after them (a seed-only peer's implied acknowledgement).
    pub implied_acked: u64,
    /// Probe pings sent (see [`SessionConfig::probe_every_frames`]).
    pub probes: u64,
}
