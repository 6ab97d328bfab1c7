//! [`RunnerLink`]: the runner's outbound connection as one machine.

use crate::runner_task::Reconnect;
use crate::sequencing::ConnectionState;
use crate::session::{Input, Machine, RunnerSession, SessionStats, Stamped};
use crate::wire::Message;

use super::{
    check_close_code, ConnectFailure, Detach, LinkConfig, LinkError, LinkEvent, LinkInput,
    LinkOutput, LinkStats, Lost, Pipe, ERROR_CONNECT_TIMEOUT, REASON_STOPPED,
};

/// Where the runner link is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkPhase {
    /// Not connecting: before [`LinkInput::Start`], after [`LinkInput::Stop`], or after a
    /// loss with [`LinkConfig::reconnect`] off.
    Idle,
    /// The next connect is due at `at_ms`.
    Waiting {
        /// When [`LinkOutput::Connect`] is asked for.
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

impl LinkPhase {
    /// `idle`, `waiting`, `connecting` or `open`.
    pub fn as_str(self) -> &'static str {
        match self {
            LinkPhase::Idle => "idle",
            LinkPhase::Waiting { .. } => "waiting",
            LinkPhase::Connecting { .. } => "connecting",
            LinkPhase::Open { .. } => "open",
        }
    }
}

/// A 64-bit generator for the backoff's jitter (splitmix64), seeded by the host: the
/// link stays deterministic for a given seed, and a host never passes a random number
/// per call.
#[derive(Debug, Clone)]
struct Jitter(u64);

impl Jitter {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// The runner's connection to its hub: the [`RunnerSession`], its socket, reconnects,
/// and the bounds on the application's events (see the [module docs](super)).
///
/// # Call order
///
/// Create it with the session (over a restored state to resume) and a seed from the
/// host's random source; feed [`LinkInput::Start`]. Then, after every input (and after
/// [`send`](Self::send)), drain [`poll_output`](Self::poll_output) until `None`,
/// performing each output in order: open sockets on `Connect`, write on `Send`, stop and
/// start reading on `Pause`/`Resume`, close or abort, and queue events for the
/// application. Arm one timer for [`poll_timeout`](Self::poll_timeout) and feed
/// [`LinkInput::Timeout`] when it passes. Report what the sockets do with `Opened`,
/// `ConnectFailed`, `Frame`, `SocketClosed` and `Failed` (always with the socket's id),
/// and the events the application took with `EventsTaken`.
///
/// # Transitions
///
/// | phase | input | outputs | next phase |
/// |---|---|---|---|
/// | `Idle` | `Start` | `Connect{s}` (a new id) | `Connecting{s}` |
/// | `Waiting{at}` | `Timeout`, now ≥ at | `Connect{s}` | `Connecting{s, now + connect_timeout_ms}` |
/// | `Connecting{s}` | `Opened{s}` | `Connected`, the session's `hello` … as `Send{s}` | `Open{s}` |
/// | `Connecting{s}` | `ConnectFailed{s, f}` | `Error{f.code()}`, then *retry (failed connect)* | `Waiting` / `Idle` |
/// | `Connecting{s}` | `Timeout`, now ≥ deadline | `Abort{s}`, `Error{connect_timeout}`, *retry (failed connect)* | `Waiting` / `Idle` |
/// | `Open{s}` | `Frame{s, text}` (or UTF-8 binary) | the session's outputs (`Send{s}`, events) | `Open{s}` |
/// | `Open{s}` | `Frame{s, binary}`, not UTF-8 | `peer_error` `invalid_utf8` (dropped) | `Open{s}` |
/// | `Open{s}` | `Frame{s}` while the queue is full | kept in the backlog (`Pause{s}` asked already) | `Open{s}` |
/// | `Open{s}` | `Frame{s}`, backlog above `max_backlog_bytes` | `Error{backlog_full}`, `Disconnected{backlog_full}`, `Abort{s}`, *retry (lost)* | `Waiting` / `Idle` |
/// | `Open{s}` | `EventsTaken(n)` | backlogged frames delivered while there is room; `Resume{s}` once it is empty | `Open{s}` |
/// | `Open{s}` | the session asks to close `peer_timeout` | `Disconnected{peer_timeout}`, `Abort{s}`, *retry (lost)* | `Waiting` / `Idle` |
/// | `Open{s}` | `SocketClosed{s}` | `Disconnected{peer_closed}`, `Abort{s}`, *retry (lost)* | `Waiting` / `Idle` |
/// | `Open{s}` | `Failed{s}` | `Error{transport_failed}`, `Disconnected{transport_failed}`, `Abort{s}`, *retry (lost)* | `Waiting` / `Idle` |
/// | `Open{s}` | `Stop{code, reason}` | `Disconnected{stopped}`, `Close{s, code, reason}` | `Idle` (stopping) |
/// | `Connecting{s}` | `Stop` | `Abort{s}` | `Idle` (stopping) |
/// | `Waiting` | `Stop` | — | `Idle` (stopping) |
/// | any | input about a socket that is not the current one | ignored (a closing one: `SocketClosed` ends it, `Failed` aborts it) | same |
/// | any | `Opened{s}` of a socket not being connected | `Abort{s}` | same |
/// | stopping | the last socket is gone | `Stopped` | `Idle` |
///
/// *Retry*: with [`LinkConfig::reconnect`], the [`Reconnect`] counter gives the delay
/// (a failed connect counts one more failure; a lost connection too, unless a frame
/// arrived on it, which starts the count again), jittered by the seeded generator:
/// `Reconnecting{delay_ms, failures}`, phase `Waiting{now + delay}`. Without it, or while
/// stopping: `Idle`.
///
/// Closing sockets end with `SocketClosed`, or are aborted at `now + close_timeout_ms`.
/// `send` works in every phase: the session keeps the message for replay and transmits it
/// when connected; a refused send (`backpressure`) emits `Stalled` once, and `Unstalled`
/// follows when the kept log has room again.
#[derive(Debug, Clone)]
pub struct RunnerLink {
    pipe: Pipe<RunnerSession>,
    phase: LinkPhase,
    reconnect: Reconnect,
    jitter: Jitter,
    next_socket: u64,
    stopping: bool,
}

impl RunnerLink {
    /// A link over `session` (build it over a restored state to resume), in
    /// [`LinkPhase::Idle`]. `seed` seeds the jitter of the reconnect delays (take it
    /// from the host's random source). The session's configuration is the session's own;
    /// [`LinkConfig::session`] is what a host uses to build it.
    pub fn new(session: RunnerSession, config: LinkConfig, seed: u64) -> Self {
        Self {
            reconnect: Reconnect::new(config.backoff),
            pipe: Pipe::new(session, config),
            phase: LinkPhase::Idle,
            jitter: Jitter(seed),
            next_socket: 0,
            stopping: false,
        }
    }

    /// The phase.
    pub fn phase(&self) -> LinkPhase {
        self.phase
    }

    /// `true` while a socket serves the session.
    pub fn is_connected(&self) -> bool {
        matches!(self.phase, LinkPhase::Open { .. })
    }

    /// The session (read-only: feed it only through the link).
    pub fn session(&self) -> &RunnerSession {
        &self.pipe.session
    }

    /// The sequencing state (snapshot it to persist).
    pub fn state(&self) -> &ConnectionState {
        self.pipe.session.state()
    }

    /// Mutable sequencing state (e.g. `forget_task` once a report was acknowledged).
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

    /// `true` between [`LinkEvent::Stalled`] and [`LinkEvent::Unstalled`].
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
    /// [`LinkError`]: `wrong_side` (a hub input), `invalid_close_code`, or the session's
    /// code of a refused [`LinkInput::Confirm`].
    pub fn handle_input(&mut self, now_ms: u64, input: LinkInput) -> Result<(), LinkError> {
        let now = now_ms;
        let mut result = Ok(());
        let lost = match input {
            LinkInput::Start => {
                self.stopping = false;
                if self.phase == LinkPhase::Idle {
                    self.phase = LinkPhase::Waiting { at_ms: now };
                }
                None
            }
            LinkInput::Stop { code, reason } => {
                check_close_code(code)?;
                self.stop(now, code, &reason);
                None
            }
            LinkInput::Opened { socket } => match self.phase {
                LinkPhase::Connecting { socket: s, .. } if s == socket => {
                    self.phase = LinkPhase::Open { socket };
                    self.pipe.attach(now, socket)
                }
                _ => {
                    if self.pipe.attached_id() != Some(socket) {
                        self.pipe.out.push_back(LinkOutput::Abort { socket });
                    }
                    None
                }
            },
            LinkInput::ConnectFailed {
                socket,
                failure,
                detail,
            } => {
                if matches!(self.phase, LinkPhase::Connecting { socket: s, .. } if s == socket) {
                    let status = match failure {
                        ConnectFailure::Refused { status } => Some(status),
                        _ => None,
                    };
                    self.pipe.event(LinkEvent::Error {
                        code: failure.code(),
                        detail,
                        status,
                    });
                    self.connect_failed(now);
                }
                None
            }
            LinkInput::Frame { socket, frame } => self.pipe.frame(now, socket, frame),
            LinkInput::SocketClosed { socket } => self.pipe.socket_closed(now, socket),
            LinkInput::Failed { socket, detail } => self.pipe.failed(now, socket, detail),
            LinkInput::EventsTaken(n) => self.pipe.events_taken(now, n),
            LinkInput::Confirm {
                task_id,
                attempt,
                seq,
            } => {
                let (r, lost) = self.pipe.session_input(
                    now,
                    Input::Confirm {
                        task_id,
                        attempt,
                        seq,
                    },
                );
                result = r.map_err(LinkError::Session);
                lost
            }
            LinkInput::Timeout => self.pipe.timeout(now),
            LinkInput::Attach { .. } | LinkInput::Close { .. } => {
                return Err(LinkError::WrongSide {
                    input: input.kind(),
                })
            }
        };
        self.after(now, lost);
        result
    }

    /// Send a sequenced message (`task.progress` / `task.report`): stamped, kept for
    /// replay, and transmitted when connected. Returns what was stamped.
    ///
    /// # Errors
    /// The session's refusal, the message inside (e.g. `backpressure`: the kept log is
    /// full — [`LinkEvent::Stalled`] is emitted once; send again after
    /// [`LinkEvent::Unstalled`]).
    pub fn send(&mut self, now_ms: u64, message: Message) -> Result<Stamped, LinkError> {
        let r = self.pipe.session.send(now_ms, message);
        self.finish_send(now_ms, r)
    }

    /// [`send`](Self::send) of a message that may have been sent before (the session's
    /// [`resend`](Machine::resend): a seq its stream already emitted is not sent again).
    ///
    /// # Errors
    /// As [`send`](Self::send).
    pub fn resend(&mut self, now_ms: u64, message: Message) -> Result<Stamped, LinkError> {
        let r = self.pipe.session.resend(now_ms, message);
        self.finish_send(now_ms, r)
    }

    fn finish_send(
        &mut self,
        now: u64,
        r: Result<Stamped, crate::session::SessionError>,
    ) -> Result<Stamped, LinkError> {
        if let Err(e) = &r {
            self.pipe.stall(e);
        }
        let lost = self.pipe.drain(now);
        self.after(now, lost);
        r.map_err(LinkError::Session)
    }

    /// The next output, `None` when drained.
    pub fn poll_output(&mut self) -> Option<LinkOutput> {
        self.pipe.out.pop_front()
    }

    /// When to feed [`LinkInput::Timeout`] next (absolute, in the host's `now_ms` clock;
    /// `None`: no timer).
    pub fn poll_timeout(&self) -> Option<u64> {
        let phase = match self.phase {
            LinkPhase::Waiting { at_ms } => Some(at_ms),
            LinkPhase::Connecting { deadline_ms, .. } => Some(deadline_ms),
            _ => None,
        };
        [phase, self.pipe.deadline()].into_iter().flatten().min()
    }

    fn stop(&mut self, now: u64, code: u16, reason: &str) {
        self.stopping = true;
        match self.phase {
            LinkPhase::Open { .. } => {
                let _ =
                    self.pipe
                        .detach(now, Detach::Close(code, reason.to_owned()), REASON_STOPPED);
            }
            LinkPhase::Connecting { socket, .. } => {
                self.pipe.out.push_back(LinkOutput::Abort { socket });
            }
            LinkPhase::Waiting { .. } | LinkPhase::Idle => {}
        }
        self.phase = LinkPhase::Idle;
    }

    /// The connection was lost: retry after the backoff.
    fn lost(&mut self, now: u64, lost: &Lost) {
        let random = self.jitter.next();
        let delay = self.reconnect.connection_lost(lost.got_frame, random);
        self.retry(now, delay);
    }

    fn connect_failed(&mut self, now: u64) {
        let random = self.jitter.next();
        let delay = self.reconnect.connect_failed(random);
        self.retry(now, delay);
    }

    fn retry(&mut self, now: u64, delay: u64) {
        if self.stopping || !self.pipe.cfg.reconnect {
            self.phase = LinkPhase::Idle;
            return;
        }
        self.phase = LinkPhase::Waiting {
            at_ms: now.saturating_add(delay),
        };
        self.pipe.event(LinkEvent::Reconnecting {
            delay_ms: delay,
            failures: self.reconnect.failures(),
        });
    }

    /// After every input: a loss schedules the retry, due timers fire, `Unstalled` and
    /// `Stopped` are told.
    fn after(&mut self, now: u64, lost: Option<Lost>) {
        if let Some(l) = lost {
            if matches!(self.phase, LinkPhase::Open { .. }) {
                self.lost(now, &l);
            }
        }
        // The phase's own timers (a `Start` or a passed deadline acts at once), each at
        // most once per input: a zero delay connects at the next input or timeout.
        if let LinkPhase::Connecting {
            socket,
            deadline_ms,
        } = self.phase
        {
            if deadline_ms <= now {
                self.pipe.out.push_back(LinkOutput::Abort { socket });
                self.pipe.event(LinkEvent::Error {
                    code: ERROR_CONNECT_TIMEOUT,
                    detail: format!(
                        "no connection within {} ms",
                        self.pipe.cfg.connect_timeout_ms
                    ),
                    status: None,
                });
                self.connect_failed(now);
            }
        }
        if let LinkPhase::Waiting { at_ms } = self.phase {
            if at_ms <= now {
                self.next_socket = self.next_socket.saturating_add(1);
                let socket = self.next_socket;
                self.phase = LinkPhase::Connecting {
                    socket,
                    deadline_ms: now.saturating_add(self.pipe.cfg.connect_timeout_ms),
                };
                self.pipe.out.push_back(LinkOutput::Connect { socket });
            }
        }
        self.pipe.check_stall();
        if self.stopping
            && self.phase == LinkPhase::Idle
            && self.pipe.closing.is_empty()
            && self.pipe.attached.is_none()
        {
            self.stopping = false;
            self.pipe.event(LinkEvent::Stopped);
        }
    }
}
