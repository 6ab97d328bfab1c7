//! [`SocketHost`]: the policy of one WebSocket between a transport and a session machine.

use std::collections::VecDeque;

use super::{
    bounded_reason, is_sendable_close_code, HostConfig, HostError, CLOSE_NORMAL, PEER_TIMEOUT,
};

/// A frame read from the socket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InboundFrame {
    /// A text frame (the protocol's frames are text).
    Text(String),
    /// A binary frame: decoded strictly as UTF-8.
    Binary(Vec<u8>),
}

/// What happened on the socket, or what the session or application asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SocketInput {
    /// The socket is open (runner: connected; hub: upgraded and authenticated).
    Opened,
    /// A frame was read.
    Frame(InboundFrame),
    /// The session produced this frame to transmit (its `Transmit` output).
    Transmit(String),
    /// The session gave up on the connection with this reason code (its `Close`
    /// output, e.g. `peer_timeout`, `hello_required`).
    SessionClose(String),
    /// The application (or the hub, replacing the socket or refusing it) closes it.
    Close {
        /// WebSocket close code (RFC 6455 §7.4; [`CLOSE_NORMAL`] for a plain close).
        code: u16,
        /// Close reason (cut to [`MAX_CLOSE_REASON_BYTES`](super::MAX_CLOSE_REASON_BYTES)).
        reason: String,
    },
    /// The transport failed on this socket (a read, a send or the session timer raised
    /// something other than "the socket went away").
    Failed,
    /// The socket is gone: the read side ended, the peer closed, or the close
    /// handshake completed.
    SocketClosed,
    /// [`SocketHost::poll_timeout`] passed.
    Timeout,
}

/// What the transport must do, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SocketOutput {
    /// Attach the session: feed it `Connected` and start reading and the session timer.
    Attach,
    /// Feed this text to the session as one frame.
    Deliver(String),
    /// A frame was dropped: report it to the application as a peer error (the session
    /// never sees it).
    PeerError {
        /// Stable code (`invalid_utf8`).
        code: &'static str,
        /// Human-readable detail (never compared).
        detail: String,
    },
    /// Write this text frame to the socket.
    Send(String),
    /// Detach the session: feed it `Disconnected` (exactly once per attached socket,
    /// before the socket is closed or aborted, so a reconnect never waits for it).
    Detach,
    /// Start the WebSocket close handshake; if the socket is not gone by `deadline_ms`
    /// the machine asks for [`SocketOutput::Abort`] on the `Timeout` input.
    Close {
        /// Close code.
        code: u16,
        /// Close reason (at most 123 UTF-8 bytes).
        reason: String,
        /// Absolute deadline of the handshake (also [`SocketHost::poll_timeout`]).
        deadline_ms: u64,
    },
    /// Drop the TCP connection at once, without a handshake (a transport that cannot
    /// abort closes as best it can).
    Abort,
}

impl SocketOutput {
    /// The output's stable name, the tag every binding and vector uses for it:
    /// `attach`, `deliver`, `peer_error`, `send`, `detach`, `close`, `abort`.
    pub fn kind(&self) -> &'static str {
        match self {
            SocketOutput::Attach => "attach",
            SocketOutput::Deliver(_) => "deliver",
            SocketOutput::PeerError { .. } => "peer_error",
            SocketOutput::Send(_) => "send",
            SocketOutput::Detach => "detach",
            SocketOutput::Close { .. } => "close",
            SocketOutput::Abort => "abort",
        }
    }
}

/// The socket's state. Illegal combinations (a detached session on an open socket, a
/// handshake without a deadline) cannot be represented.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SocketState {
    /// Created; the socket is not open yet (or the host never opened it).
    Idle,
    /// Open, the session attached.
    Open,
    /// The close handshake runs until `deadline_ms`; the session is detached.
    Closing {
        /// When the handshake is given up and the socket aborted.
        deadline_ms: u64,
    },
    /// Gone (closed or aborted). Terminal: every input is ignored.
    Closed,
}

impl SocketState {
    /// `idle`, `open`, `closing` or `closed`.
    pub fn as_str(self) -> &'static str {
        match self {
            SocketState::Idle => "idle",
            SocketState::Open => "open",
            SocketState::Closing { .. } => "closing",
            SocketState::Closed => "closed",
        }
    }
}

/// One socket's host policy (both sides use it).
///
/// # Call order
///
/// Create one per socket. Call [`handle_input`](Self::handle_input) with what happened,
/// then drain [`poll_output`](Self::poll_output) until `None` and perform every output
/// in order; arm a timer for [`poll_timeout`](Self::poll_timeout) and feed
/// [`SocketInput::Timeout`] when it passes. Relay the session's outputs through the
/// machine: `Transmit(f)` as [`SocketInput::Transmit`], `Close(reason)` as
/// [`SocketInput::SessionClose`]; its events go to the application directly.
///
/// # Transitions
///
/// | state | input | outputs | next state |
/// |---|---|---|---|
/// | `Idle` | `Opened` | `Attach` | `Open` |
/// | `Idle` | `Close{code, reason}` | `Close{code, reason, now + close_timeout_ms}` | `Closing` |
/// | `Idle` | `Failed` | `Abort` | `Closed` |
/// | `Idle` | `SocketClosed` | — | `Closed` |
/// | `Idle` | `Frame`, `Transmit`, `SessionClose` | error `not_opened` | `Idle` |
/// | `Open` | `Frame(Text(t))` | `Deliver(t)` | `Open` |
/// | `Open` | `Frame(Binary(b))`, `b` UTF-8 | `Deliver(b as text)` | `Open` |
/// | `Open` | `Frame(Binary(b))`, not UTF-8 | `PeerError{invalid_utf8}` (dropped) | `Open` |
/// | `Open` | `Transmit(f)` | `Send(f)` | `Open` |
/// | `Open` | `SessionClose("peer_timeout")` | `Detach`, `Abort` | `Closed` |
/// | `Open` | `SessionClose(r)`, other `r` | `Detach`, `Close{1000, r, now + close_timeout_ms}` | `Closing` |
/// | `Open` | `Close{code, reason}` | `Detach`, `Close{code, reason, now + close_timeout_ms}` | `Closing` |
/// | `Open` | `Failed`, `SocketClosed` | `Detach`, `Abort` | `Closed` |
/// | `Closing{d}` | `Timeout`, `now >= d` | `Abort` | `Closed` |
/// | `Closing{d}` | `Close`, `Failed` | `Abort` (the handshake is abandoned) | `Closed` |
/// | `Closing{d}` | `SocketClosed` | — | `Closed` |
/// | `Closing{d}` | `Frame`, `Transmit`, `SessionClose`, early `Timeout` | — (dropped) | `Closing{d}` |
/// | `Closed` | anything but `Opened` | — | `Closed` |
/// | not `Idle` | `Opened` | error `already_opened` | unchanged |
///
/// A `Close` input with a code an endpoint may not send is error `invalid_close_code`
/// in every state. `Timeout` is a no-op outside `Closing`. When the socket leaves
/// `Open`, `Send` outputs the host has not polled yet are dropped (the session keeps
/// those frames for replay on its next socket).
#[derive(Debug, Clone)]
pub struct SocketHost {
    close_timeout_ms: u64,
    state: SocketState,
    outputs: VecDeque<SocketOutput>,
}

impl SocketHost {
    /// A machine for one socket, in [`SocketState::Idle`].
    pub fn new(config: &HostConfig) -> Self {
        Self {
            close_timeout_ms: config.close_timeout_ms,
            state: SocketState::Idle,
            outputs: VecDeque::new(),
        }
    }

    /// The current state.
    pub fn state(&self) -> SocketState {
        self.state
    }

    /// `true` while the socket is open and the session attached.
    pub fn is_open(&self) -> bool {
        self.state == SocketState::Open
    }

    /// Feed one input (see the transition table on the type).
    pub fn handle_input(&mut self, now_ms: u64, input: SocketInput) -> Result<(), HostError> {
        if let SocketInput::Close { code, .. } = &input {
            if !is_sendable_close_code(*code) {
                return Err(HostError::InvalidCloseCode { code: *code });
            }
        }
        let deadline_ms = now_ms.saturating_add(self.close_timeout_ms);
        match (self.state, input) {
            (SocketState::Idle, SocketInput::Opened) => {
                self.state = SocketState::Open;
                self.outputs.push_back(SocketOutput::Attach);
            }
            (_, SocketInput::Opened) => return Err(HostError::AlreadyOpened),
            (SocketState::Idle, SocketInput::Close { code, reason }) => {
                self.start_close(code, &reason, deadline_ms);
            }
            (SocketState::Idle, SocketInput::Failed) => self.abort(),
            (SocketState::Idle, SocketInput::SocketClosed) => self.state = SocketState::Closed,
            (SocketState::Idle, SocketInput::Timeout) => {}
            (
                SocketState::Idle,
                SocketInput::Frame(_) | SocketInput::Transmit(_) | SocketInput::SessionClose(_),
            ) => return Err(HostError::NotOpened),
            (SocketState::Open, SocketInput::Frame(frame)) => match frame {
                InboundFrame::Text(text) => self.outputs.push_back(SocketOutput::Deliver(text)),
                InboundFrame::Binary(bytes) => match String::from_utf8(bytes) {
                    Ok(text) => self.outputs.push_back(SocketOutput::Deliver(text)),
                    Err(e) => self.outputs.push_back(SocketOutput::PeerError {
                        code: "invalid_utf8",
                        detail: format!(
                            "a binary frame that is not UTF-8 was dropped: {}",
                            e.utf8_error()
                        ),
                    }),
                },
            },
            (SocketState::Open, SocketInput::Transmit(frame)) => {
                self.outputs.push_back(SocketOutput::Send(frame));
            }
            (SocketState::Open, SocketInput::SessionClose(reason)) => {
                self.outputs.push_back(SocketOutput::Detach);
                if reason == PEER_TIMEOUT {
                    self.abort();
                } else {
                    self.start_close(CLOSE_NORMAL, &reason, deadline_ms);
                }
            }
            (SocketState::Open, SocketInput::Close { code, reason }) => {
                self.outputs.push_back(SocketOutput::Detach);
                self.start_close(code, &reason, deadline_ms);
            }
            (SocketState::Open, SocketInput::Failed | SocketInput::SocketClosed) => {
                self.outputs.push_back(SocketOutput::Detach);
                self.abort();
            }
            (SocketState::Open, SocketInput::Timeout) => {}
            (SocketState::Closing { deadline_ms }, SocketInput::Timeout) => {
                if now_ms >= deadline_ms {
                    self.abort();
                }
            }
            (SocketState::Closing { .. }, SocketInput::Close { .. } | SocketInput::Failed) => {
                self.abort();
            }
            (SocketState::Closing { .. }, SocketInput::SocketClosed) => {
                self.state = SocketState::Closed;
            }
            (
                SocketState::Closing { .. },
                SocketInput::Frame(_) | SocketInput::Transmit(_) | SocketInput::SessionClose(_),
            ) => {}
            (SocketState::Closed, _) => {}
        }
        Ok(())
    }

    /// Frames not yet taken by the host when the socket stops being open are dropped
    /// (the session keeps them for replay on the next socket).
    fn drop_queued_sends(&mut self) {
        self.outputs.retain(|o| !matches!(o, SocketOutput::Send(_)));
    }

    fn start_close(&mut self, code: u16, reason: &str, deadline_ms: u64) {
        self.drop_queued_sends();
        self.state = SocketState::Closing { deadline_ms };
        self.outputs.push_back(SocketOutput::Close {
            code,
            reason: bounded_reason(reason),
            deadline_ms,
        });
    }

    fn abort(&mut self) {
        self.drop_queued_sends();
        self.state = SocketState::Closed;
        self.outputs.push_back(SocketOutput::Abort);
    }

    /// The next output, `None` when drained.
    pub fn poll_output(&mut self) -> Option<SocketOutput> {
        self.outputs.pop_front()
    }

    /// The close handshake's deadline while closing, else `None`.
    pub fn poll_timeout(&self) -> Option<u64> {
        match self.state {
            SocketState::Closing { deadline_ms } => Some(deadline_ms),
            _ => None,
        }
    }
}
