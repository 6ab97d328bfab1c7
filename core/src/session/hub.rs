//! [`HubSession`]: the hub side of a runner connection.

use crate::sequencing::{ConnectionState, Position, Role};
use crate::wire::Hello;

use super::engine::{Engine, Phase};
use super::{CloseReason, Event, Input, Output, SessionConfig, SessionError, SessionStats};

/// The hub side of a hub↔runner connection (sans-IO).
///
/// # Call order
///
/// 1. [`handle_input`](Self::handle_input) with [`Input::Connected`]; the session
///    waits for the runner's `hello`. A sequenced frame before it closes the
///    connection with [`CloseReason::HelloRequired`]; a `protocol_version` outside
///    `min_protocol_version..=max_protocol_version` with
///    [`CloseReason::UnsupportedProtocolVersion`].
/// 2. On `hello` the session: applies the runner's `replay_from` extension (gaps become
///    [`Event::InboundGap`]), emits [`Event::Hello`], acknowledges every runner stream
///    it holds in a `ping` carrying `ack` (and `replay_from` for command streams the
///    runner can no longer get in full, each also reported as
///    [`Event::OutboundResync`]), then re-sends every kept command above `hello.resume`
///    (a task missing from `resume` counts as 0).
/// 3. Inbound progress and reports are decoded, deduplicated per
///    `(task_id, attempt, seq)` and delivered exactly once, in stream order, as
///    [`Event::Received`]; they are acknowledged every `ack_every_frames` frames or
///    `ack_delay_ms` after the first unacknowledged one.
/// 4. Commands are sent with [`Input::Send`] (stamped per task, kept until the runner
///    acknowledges them); before the `hello` they are only kept and go out with the
///    replay.
/// 5. Drain [`poll_output`](Self::poll_output) after every input until
///    [`Output::Timeout`]; call `handle_input(t, Input::Tick)` at its deadline.
#[derive(Debug, Clone)]
pub struct HubSession {
    engine: Engine,
}

impl HubSession {
    /// A session with a fresh sequencing state.
    pub fn new(config: SessionConfig) -> Self {
        let state = ConnectionState::with_config(Role::Hub, config.sequencing.clone());
        Self::with_state(config, state)
    }

    /// A session over an existing (e.g. restored) hub state. A state of the runner role
    /// is replaced by a fresh hub state.
    pub fn with_state(config: SessionConfig, state: ConnectionState) -> Self {
        let state = if state.role() == Role::Hub {
            state
        } else {
            ConnectionState::with_config(Role::Hub, config.sequencing.clone())
        };
        Self {
            engine: Engine::new(state, config),
        }
    }

    /// Feed one input at time `now_ms` (monotonic, host-chosen).
    ///
    /// # Errors
    /// [`SessionError`]: `not_connected`, `already_connected`, or the sequencing code of
    /// a refused [`Input::Send`] (the message is inside the error).
    pub fn handle_input(&mut self, now_ms: u64, input: Input) -> Result<(), SessionError> {
        let e = &mut self.engine;
        // Lines of earlier bytes not yet pulled by poll_output are handled first, so
        // inputs take effect in the order they were given.
        e.catch_up();
        e.set_now(now_ms);
        let result = match input {
            Input::Connected => e.connect(now_ms, Phase::AwaitingHello),
            Input::Disconnected => {
                e.disconnect();
                Ok(())
            }
            Input::Bytes(b) => e.bytes(now_ms, &b),
            Input::Frame(f) => e.frame(now_ms, &f),
            Input::Send(msg) => match e.state.emit_encoded(msg) {
                Ok((_, frame)) => {
                    if e.phase == Phase::Open {
                        e.transmit(frame);
                    }
                    Ok(())
                }
                Err(err) => Err(SessionError::Emit(err)),
            },
            Input::Tick => Ok(()),
        };
        e.timers(now_ms);
        result
    }

    /// The next output; [`Output::Timeout`] when there is nothing else to do.
    pub fn poll_output(&mut self) -> Output {
        self.engine.poll()
    }

    /// `true` when [`poll_output`](Self::poll_output) would return something other than
    /// a timeout.
    pub fn has_output(&self) -> bool {
        self.engine.has_output()
    }

    /// The sequencing state (snapshot it to persist).
    pub fn state(&self) -> &ConnectionState {
        &self.engine.state
    }

    /// Mutable access to the sequencing state (e.g. to forget a finished task).
    pub fn state_mut(&mut self) -> &mut ConnectionState {
        &mut self.engine.state
    }

    /// `true` while a transport connection is up (with or without `hello`).
    pub fn is_connected(&self) -> bool {
        self.engine.is_up()
    }

    /// `true` once the runner's `hello` was accepted on the current connection.
    pub fn is_open(&self) -> bool {
        self.engine.phase == Phase::Open
    }

    /// Counters.
    pub fn stats(&self) -> &SessionStats {
        &self.engine.stats
    }
}

impl Engine {
    /// The runner's hello on a connection awaiting it.
    pub(crate) fn hub_hello(&mut self, now: u64, hello: Hello) {
        let v = hello.protocol_version;
        if v < self.cfg.min_protocol_version || v > self.cfg.max_protocol_version {
            self.close(CloseReason::UnsupportedProtocolVersion { version: v });
            return;
        }
        self.phase = Phase::Open;
        let extra = hello.extra.clone();
        let resume = hello.resume.clone();
        self.event(Event::Hello(hello));
        // Runner streams whose beginning the runner can no longer send.
        self.extensions(now, &extra);
        let replay = self.state.replay_for(&resume);
        for p in &replay.peer_ahead {
            self.peer_error(
                "resume_ahead",
                format!(
                    "runner declared {} for task {:?}, beyond anything sent; numbering continues after it",
                    p.seq, p.task_id
                ),
            );
        }
        // Tasks the runner has commands of but this hub does not know (its state is
        // older than the runner's): continue their numbering after the runner's
        // position, so new commands are not dropped as duplicates.
        for task in &replay.unknown {
            let seq = resume.get(task).copied().unwrap_or(0);
            if seq > 0 {
                self.peer_error(
                    "resume_ahead",
                    format!("runner declared {seq} for unknown task {task:?}; numbering continues after it"),
                );
                self.state.ack(task, None, seq);
            }
        }
        let mut notice = Vec::with_capacity(replay.resync.len());
        for r in &replay.resync {
            notice.push(Position::new(
                r.task_id.clone(),
                r.attempt,
                r.missing_to + 1,
            ));
            self.event(Event::OutboundResync(r.clone()));
        }
        self.send_full_ack(&notice);
        for s in replay.streams {
            for f in s.frames {
                self.transmit(f.frame);
            }
        }
    }
}
