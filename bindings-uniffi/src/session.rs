//! `HubSession` and `RunnerSession`: the hub- and runner-side connection machines.

use std::sync::{Mutex, MutexGuard};

use stapel_runner_protocol::sequencing::ConnectionState as CoreState;
use stapel_runner_protocol::session::{
    self as core_session, Event, HubSession as CoreHub, Machine, Output,
    RunnerSession as CoreRunner, SessionConfig,
};

use crate::errors::{state, ProtocolError};
use crate::jsontext::parse_serde;
use crate::sequencing::{resume_entries, Resync};
use crate::wire::{hello_in, hello_out, Hello, Message, ResumeEntry};

/// What happened, fed to a session machine with the host's monotonic `now_ms`.
#[derive(Debug, Clone, uniffi::Enum)]
pub enum SessionInput {
    /// A transport connection is up.
    Connected,
    /// The transport connection is gone.
    Disconnected,
    /// Raw bytes of a newline-delimited stream.
    Bytes {
        /// The bytes.
        data: Vec<u8>,
    },
    /// One complete frame (a WebSocket text message).
    Frame {
        /// The frame.
        text: String,
    },
    /// The application sends a message (stamped, kept for replay, transmitted).
    Send {
        /// The message.
        message: Message,
    },
    /// The deadline of `poll_timeout()` was reached.
    Timeout,
    /// Durable acknowledgements (session config `durable_acks`): the host's store
    /// committed the inbound stream `(task_id, attempt)` through `seq`; nothing above a
    /// confirmed position is acknowledged.
    Confirm {
        /// The stream's task.
        task_id: String,
        /// The stream's attempt (`None` for command streams).
        attempt: Option<u64>,
        /// The highest committed seq.
        seq: u64,
    },
}

/// What the machine asks the host to do or to know.
#[derive(Debug, Clone, uniffi::Enum)]
pub enum SessionOutput {
    /// Send this frame.
    Transmit {
        /// The exact frame.
        frame: String,
    },
    /// Close the connection, for this reason (`peer_timeout`, …).
    Close {
        /// The reason's stable code.
        reason: String,
    },
    /// The peer's `hello` (hub side).
    Hello {
        /// The hello.
        hello: Hello,
    },
    /// A new application message from the peer, exactly once.
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
    /// The peer sent something invalid (dropped).
    PeerError {
        /// Stable code.
        code: String,
        /// The core's text.
        detail: String,
    },
    /// An event this binding does not know yet (a newer core).
    Unknown {
        /// The core's debug text of the event.
        debug: String,
    },
}

fn output(o: Output) -> SessionOutput {
    match o {
        Output::Transmit(frame) => SessionOutput::Transmit { frame },
        Output::Close(r) => SessionOutput::Close {
            reason: r.code().to_owned(),
        },
        Output::Event(Event::Hello(h)) => SessionOutput::Hello {
            hello: hello_out(&h),
        },
        Output::Event(Event::Received(m)) => SessionOutput::Received {
            message: Message::from(&m),
        },
        Output::Event(Event::InboundGap(r)) => SessionOutput::InboundGap {
            resync: Resync::from(&r),
        },
        Output::Event(Event::OutboundResync(r)) => SessionOutput::OutboundResync {
            resync: Resync::from(&r),
        },
        Output::Event(Event::PeerError { code, detail }) => {
            SessionOutput::PeerError { code, detail }
        }
        Output::Event(other) => SessionOutput::Unknown {
            debug: format!("{other:?}"),
        },
    }
}

pub(crate) fn config(config_json: Option<String>) -> Result<SessionConfig, ProtocolError> {
    match config_json {
        None => Ok(SessionConfig::default()),
        Some(t) => Ok(SessionConfig::from_value(&parse_serde(&t)?)?),
    }
}

fn restored(snapshot: Option<Vec<u8>>) -> Result<Option<CoreState>, ProtocolError> {
    snapshot
        .map(|b| CoreState::restore(&b).map_err(|e| state("snapshot", e.code(), &e)))
        .transpose()
}

/// The shared body of both session objects.
struct Session<M: Machine> {
    inner: Mutex<M>,
}

impl<M: Machine> Session<M> {
    fn lock(&self) -> MutexGuard<'_, M> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn handle(&self, now_ms: u64, input: SessionInput) -> Result<(), ProtocolError> {
        let input = match input {
            SessionInput::Connected => core_session::Input::Connected,
            SessionInput::Disconnected => core_session::Input::Disconnected,
            SessionInput::Bytes { data } => core_session::Input::Bytes(data),
            SessionInput::Frame { text } => core_session::Input::Frame(text),
            SessionInput::Send { message } => core_session::Input::Send(message.to_core()?),
            SessionInput::Timeout => core_session::Input::Timeout,
            SessionInput::Confirm {
                task_id,
                attempt,
                seq,
            } => core_session::Input::Confirm {
                task_id,
                attempt,
                seq,
            },
        };
        self.lock()
            .handle_input(now_ms, input)
            .map_err(|e| state("session", e.code(), &e))
    }
}

macro_rules! session_object {
    ($name:ident, $core:ty, $doc:literal) => {
        #[doc = $doc]
        ///
        /// Call order: feed one input with `handle_input(now_ms, input)`, then drain
        /// `poll_output()` until `None` and perform every output in order; feed
        /// `SessionInput.Timeout` when `poll_timeout()`'s deadline is reached.
        #[derive(uniffi::Object)]
        pub struct $name {
            s: Session<$core>,
        }

        #[uniffi::export]
        impl $name {
            /// Feeds one input.
            ///
            /// # Errors
            /// `ProtocolError::State` with the session's code (`not_connected`,
            /// `not_durable`, `confirm_ahead`, …).
            pub fn handle_input(
                &self,
                now_ms: u64,
                input: SessionInput,
            ) -> Result<(), ProtocolError> {
                self.s.handle(now_ms, input)
            }

            /// Sends a message that may have been sent before (the core's
            /// `Machine::resend`, stapel-runner-protocol 0.1.1's re-send from a
            /// checkpoint): a message whose seq its stream already emitted is that
            /// frame, so nothing is stamped, kept or transmitted and it comes back as
            /// given; any other message is sent as `SessionInput.Send` would send it.
            /// Returns the message with the seq it goes under.
            ///
            /// # Errors
            /// `ProtocolError::State` with the session's code (`not_connected`, …).
            pub fn resend(&self, now_ms: u64, message: Message) -> Result<Message, ProtocolError> {
                let msg = message.to_core()?;
                let stamped = self
                    .s
                    .lock()
                    .resend(now_ms, msg)
                    .map_err(|e| state("session", e.code(), &e))?;
                Ok(Message::from(&stamped.message))
            }

            /// The next output, or `None` once drained.
            pub fn poll_output(&self) -> Option<SessionOutput> {
                self.s.lock().poll_output().map(output)
            }

            /// Feeds many frames at once, in order, as `handle_input(now_ms,
            /// Frame(text))` would one by one (one boundary crossing for the batch). The
            /// outputs queue up: drain them afterwards with `drain()` or `poll_output()`.
            /// Stops at the first frame the machine refuses; the frames before it were
            /// handled and their outputs stay queued.
            ///
            /// # Errors
            /// `ProtocolError::State` with the session's code (`not_connected`, …).
            pub fn handle_frames(
                &self,
                now_ms: u64,
                frames: Vec<String>,
            ) -> Result<(), ProtocolError> {
                let mut m = self.s.lock();
                for f in frames {
                    m.handle_input(now_ms, core_session::Input::Frame(f))
                        .map_err(|e| state("session", e.code(), &e))?;
                }
                Ok(())
            }

            /// Every output until drained.
            pub fn drain(&self) -> Vec<SessionOutput> {
                let mut m = self.s.lock();
                std::iter::from_fn(|| m.poll_output().map(output)).collect()
            }

            /// The absolute deadline at which to feed `Timeout` (`None`: no timer).
            pub fn poll_timeout(&self) -> Option<u64> {
                self.s.lock().poll_timeout()
            }

            /// `true` while a transport connection is up.
            pub fn is_connected(&self) -> bool {
                self.s.lock().is_connected()
            }

            /// The sequencing state's resume declaration.
            pub fn resume_map(&self) -> Vec<ResumeEntry> {
                resume_entries(&self.s.lock().state().resume_map())
            }

            /// Frames kept for replay.
            pub fn outbox_frames(&self) -> u64 {
                self.s.lock().state().outbox_frames() as u64
            }

            /// The sequencing state as bytes (persist it; restore with `withSnapshot`).
            pub fn snapshot(&self) -> Vec<u8> {
                self.s.lock().state().snapshot()
            }

            /// Forgets a task in the sequencing state; `true` when it was known.
            pub fn forget_task(&self, task_id: String) -> bool {
                self.s.lock().state_mut().forget_task(&task_id)
            }
        }
    };
}

session_object!(
    HubSession,
    CoreHub,
    "The hub side of one runner connection: waits for `hello`, replays what the runner missed, suppresses duplicates, acks, keeps the peer alive."
);
session_object!(
    RunnerSession,
    CoreRunner,
    "The runner side of the hub connection: sends `hello` with its resume map, replays, suppresses duplicates, acks, keeps the peer alive."
);

impl HubSession {
    /// The object over a core session (the store's `from_rows`, see `store.rs`).
    pub(crate) fn from_core(m: CoreHub) -> Self {
        Self {
            s: Session {
                inner: Mutex::new(m),
            },
        }
    }

    /// Runs `f` on the core session under its lock.
    pub(crate) fn with_core<R>(&self, f: impl FnOnce(&CoreHub) -> R) -> R {
        f(&self.s.lock())
    }
}

#[uniffi::export]
impl HubSession {
    /// A hub session; `config_json` is the core's session configuration (JSON text,
    /// `None`: defaults); `snapshot` restores persisted sequencing state.
    ///
    /// # Errors
    /// `ProtocolError::Config`, or the snapshot's code.
    #[uniffi::constructor(default(config_json = None, snapshot = None))]
    pub fn new(
        config_json: Option<String>,
        snapshot: Option<Vec<u8>>,
    ) -> Result<Self, ProtocolError> {
        let c = config(config_json)?;
        let m = match restored(snapshot)? {
            None => CoreHub::new(c),
            Some(s) => CoreHub::with_state(c, s),
        };
        Ok(Self {
            s: Session {
                inner: Mutex::new(m),
            },
        })
    }
}

#[uniffi::export]
impl RunnerSession {
    /// A runner session announcing `hello`; `config_json` and `snapshot` as for
    /// `HubSession`.
    ///
    /// # Errors
    /// `ProtocolError::Config`, `ProtocolError::Decode` for a bad hello, or the
    /// snapshot's code.
    #[uniffi::constructor(default(config_json = None, snapshot = None))]
    pub fn new(
        hello: Hello,
        config_json: Option<String>,
        snapshot: Option<Vec<u8>>,
    ) -> Result<Self, ProtocolError> {
        let c = config(config_json)?;
        let h = hello_in(hello)?;
        let m = match restored(snapshot)? {
            None => CoreRunner::new(h, c),
            Some(s) => CoreRunner::with_state(h, c, s),
        };
        Ok(Self {
            s: Session {
                inner: Mutex::new(m),
            },
        })
    }
}
