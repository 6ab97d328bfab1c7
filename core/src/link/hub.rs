//! [`HubLink`]: one runner as a hub serves it, across its sockets.

use crate::sequencing::ConnectionState;
use crate::session::{HubSession, Input, Machine, SessionStats, Stamped};
use crate::wire::Message;

use super::{
    check_close_code, Detach, LinkConfig, LinkError, LinkInput, LinkOutput, LinkStats, Pipe,
    REASON_CLOSED, REASON_REPLACED,
};
use crate::host::CLOSE_NORMAL;

/// One runner's connection on the hub side: its [`HubSession`] (kept across
/// reconnects, so the runner resumes), the socket that serves it, and the bounds on the
/// application's events (see the [module docs](super)). The hub's door — the token check
/// before the upgrade, which runner a socket serves, eviction of idle runners — is
/// [`HubHost`](crate::host::HubHost); its `Attach` output is this link's
/// [`LinkInput::Attach`].
///
/// # Call order
///
/// As [`RunnerLink`](super::RunnerLink): after every input or [`send`](Self::send),
/// drain [`poll_output`](Self::poll_output) and perform each output; arm one timer for
/// [`poll_timeout`](Self::poll_timeout). Report the sockets' frames, ends and failures
/// with their id, and the events the application took with `EventsTaken`. With durable
/// acknowledgements ([`SessionConfig::durable_acks`](crate::session::SessionConfig::durable_acks))
/// feed [`LinkInput::Confirm`] once the store committed a position.
///
/// # Transitions
///
/// | socket | input | outputs |
/// |---|---|---|
/// | none | `Attach{s}` | `Connected`; the session awaits the runner's `hello` on `s` |
/// | `s` | `Attach{t}` | `Disconnected{replaced}`, `Close{s, 1000, "replaced"}`, then as above for `t` |
/// | `s` | `Frame{s}` | as the runner link's `Open` rows (UTF-8 check, backlog while the queue is full, `backlog_full`) |
/// | `s` | the session asks to close `peer_timeout` | `Disconnected{peer_timeout}`, `Abort{s}` |
/// | `s` | the session asks to close `r` (`hello_required`, `unsupported_protocol_version`) | `Disconnected{r}`, `Close{s, 1000, r}` |
/// | `s` | `SocketClosed{s}` | `Disconnected{peer_closed}`, `Abort{s}` |
/// | `s` | `Failed{s}` | `Error{transport_failed}`, `Disconnected{transport_failed}`, `Abort{s}` |
/// | `s` | `Close{code, reason}` | `Disconnected{closed}`, `Close{s, code, reason}` |
/// | any | input about another socket | ignored (a closing one: `SocketClosed` ends it, `Failed` aborts it) |
/// | any | `Start`, `Stop`, `Opened`, `ConnectFailed` | error `wrong_side` |
///
/// `send` works whether or not the runner is connected (commands are kept and replayed
/// after its next `hello`).
#[derive(Debug, Clone)]
pub struct HubLink {
    pipe: Pipe<HubSession>,
}

impl HubLink {
    /// A link over `session` (build it over a restored state to resume the runner's
    /// streams), with no socket.
    pub fn new(session: HubSession, config: LinkConfig) -> Self {
        Self {
            pipe: Pipe::new(session, config),
        }
    }

    /// The socket serving the runner, if any.
    pub fn socket(&self) -> Option<u64> {
        self.pipe.attached_id()
    }

    /// `true` while a socket serves the runner.
    pub fn is_connected(&self) -> bool {
        self.pipe.attached.is_some()
    }

    /// Sockets attached or in their close handshake (for the hub's eviction decision:
    /// [`RunnerActivity::sockets`](crate::host::RunnerActivity::sockets)).
    pub fn sockets(&self) -> u64 {
        (self.pipe.closing.len() as u64).saturating_add(u64::from(self.is_connected()))
    }

    /// The session (read-only: feed it only through the link).
    pub fn session(&self) -> &HubSession {
        &self.pipe.session
    }

    /// The sequencing state (snapshot it to persist).
    pub fn state(&self) -> &ConnectionState {
        self.pipe.session.state()
    }

    /// Mutable sequencing state (e.g. `forget_task`).
    pub fn state_mut(&mut self) -> &mut ConnectionState {
        self.pipe.session.state_mut()
    }

    /// The session's counters.
    pub fn session_stats(&self) -> &SessionStats {
        self.pipe.session.stats()
    }

    /// The link's counters.
    pub fn stats(&self) -> &LinkStats {
        &self.pipe.stats
    }

    /// Events emitted and not yet reported taken.
    pub fn queued_events(&self) -> u64 {
        self.pipe.queued
    }

    /// `true` between [`LinkEvent::Stalled`](super::LinkEvent::Stalled) and
    /// [`LinkEvent::Unstalled`](super::LinkEvent::Unstalled).
    pub fn is_stalled(&self) -> bool {
        self.pipe.stalled
    }

    /// The configuration.
    pub fn config(&self) -> &LinkConfig {
        &self.pipe.cfg
    }

    /// Feed one input (see the transition table on the type).
    ///
    /// # Errors
    /// [`LinkError`]: `wrong_side` (a runner input), `invalid_close_code`, or the
    /// session's code of a refused [`LinkInput::Confirm`].
    pub fn handle_input(&mut self, now_ms: u64, input: LinkInput) -> Result<(), LinkError> {
        let now = now_ms;
        let mut result = Ok(());
        match input {
            LinkInput::Attach { socket } => {
                if self.pipe.attached_id() == Some(socket) {
                    return Ok(());
                }
                let _ = self.pipe.detach(
                    now,
                    Detach::Close(CLOSE_NORMAL, REASON_REPLACED.to_owned()),
                    REASON_REPLACED,
                );
                let _ = self.pipe.attach(now, socket);
            }
            LinkInput::Close { code, reason } => {
                check_close_code(code)?;
                let _ = self
                    .pipe
                    .detach(now, Detach::Close(code, reason), REASON_CLOSED);
            }
            LinkInput::Frame { socket, frame } => {
                let _ = self.pipe.frame(now, socket, frame);
            }
            LinkInput::SocketClosed { socket } => {
                let _ = self.pipe.socket_closed(now, socket);
            }
            LinkInput::Failed { socket, detail } => {
                let _ = self.pipe.failed(now, socket, detail);
            }
            LinkInput::EventsTaken(n) => {
                let _ = self.pipe.events_taken(now, n);
            }
            LinkInput::Confirm {
                task_id,
                attempt,
                seq,
            } => {
                let (r, _) = self.pipe.session_input(
                    now,
                    Input::Confirm {
                        task_id,
                        attempt,
                        seq,
                    },
                );
                result = r.map_err(LinkError::Session);
            }
            LinkInput::Timeout => {
                let _ = self.pipe.timeout(now);
            }
            LinkInput::Start
            | LinkInput::Stop { .. }
            | LinkInput::Opened { .. }
            | LinkInput::ConnectFailed { .. } => {
                return Err(LinkError::WrongSide {
                    input: input.kind(),
                })
            }
        }
        self.pipe.check_stall();
        result
    }

    /// Send a command (`task.assign` / `task.cancel`): stamped, kept for replay, and
    /// transmitted once the runner's resume is applied.
    ///
    /// # Errors
    /// The session's refusal, the message inside (e.g. `backpressure`, with
    /// [`LinkEvent::Stalled`](super::LinkEvent::Stalled) emitted once).
    pub fn send(&mut self, now_ms: u64, message: Message) -> Result<Stamped, LinkError> {
        let r = self.pipe.session.send(now_ms, message);
        if let Err(e) = &r {
            self.pipe.stall(e);
        }
        let _ = self.pipe.drain(now_ms);
        self.pipe.check_stall();
        r.map_err(LinkError::Session)
    }

    /// The next output, `None` when drained.
    pub fn poll_output(&mut self) -> Option<LinkOutput> {
        self.pipe.out.pop_front()
    }

    /// When to feed [`LinkInput::Timeout`] next (`None`: no timer).
    pub fn poll_timeout(&self) -> Option<u64> {
        self.pipe.deadline()
    }
}
