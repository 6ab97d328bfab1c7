//! [`RunnerSession`]: the runner side of a hub connection.

use crate::sequencing::{ConnectionState, Position, Role};
use crate::wire::{self, Hello, Message};

use super::engine::{Engine, Phase};
use super::{Input, Output, SessionConfig, SessionError, SessionStats};

/// The runner side of a hub↔runner connection (sans-IO).
///
/// # Call order
///
/// 1. [`handle_input`](Self::handle_input) with [`Input::Connected`] when the transport
///    is up, then drain [`poll_output`](Self::poll_output) until [`Output::Timeout`].
///    The first transmitted frame is the `hello` (identity from the template given to
///    [`new`](Self::new), `resume` from the sequencing state, plus the `replay_from`
///    extension), followed by every progress/report frame the hub has not
///    acknowledged, in stream order.
/// 2. Feed inbound traffic with [`Input::Bytes`] (JSONL) or [`Input::Frame`] (one
///    frame); each is decoded, duplicates are dropped, and new commands come out as
///    [`Event::Received`](super::Event::Received) in stream order.
/// 3. Send progress and reports with [`Input::Send`]: stamped with the next seq of
///    their `(task_id, attempt)` stream, kept until acknowledged, transmitted now if
///    connected, re-sent after a reconnect otherwise. When the kept log is full the
///    input fails with `backpressure` and the message is handed back.
/// 4. At each `Timeout(Some(t))` deadline call `handle_input(t, Input::Tick)`
///    (keepalive pings, acknowledgements, dead-peer detection).
/// 5. After [`Output::Close`] or a transport loss report [`Input::Disconnected`].
///
/// Persist [`state`](Self::state)'s snapshot to survive a runner restart and resume
/// with [`with_state`](Self::with_state).
#[derive(Debug, Clone)]
pub struct RunnerSession {
    engine: Engine,
    hello: Hello,
}

impl RunnerSession {
    /// A session with a fresh sequencing state. `hello` is the identity template
    /// (project_id, runner_version, capabilities, protocol_version, extra); its `resume`
    /// is replaced on every connect.
    pub fn new(hello: Hello, config: SessionConfig) -> Self {
        let state = ConnectionState::with_config(Role::Runner, config.sequencing.clone());
        Self::with_state(hello, config, state)
    }

    /// A session over an existing (e.g. restored) runner state. A state of the hub role
    /// is replaced by a fresh runner state.
    pub fn with_state(hello: Hello, config: SessionConfig, state: ConnectionState) -> Self {
        let state = if state.role() == Role::Runner {
            state
        } else {
            ConnectionState::with_config(Role::Runner, config.sequencing.clone())
        };
        Self {
            engine: Engine::new(state, config),
            hello,
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
            Input::Connected => {
                e.connect(now_ms, Phase::Open)?;
                let mut hello = self.hello.clone();
                hello.resume = e.state.resume_map();
                let from: Vec<Position> = e.state.replay_from();
                if from.is_empty() {
                    hello.extra.shift_remove("replay_from");
                } else {
                    hello
                        .extra
                        .insert("replay_from".into(), Position::list_to_value(&from));
                }
                e.transmit(wire::encode(&Message::Hello(hello)));
                let frames: Vec<String> =
                    e.state.unacked().map(|(_, _, f)| f.frame.clone()).collect();
                for f in frames {
                    e.transmit(f);
                }
                Ok(())
            }
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

    /// `true` while a transport connection is up.
    pub fn is_connected(&self) -> bool {
        self.engine.is_up()
    }

    /// Counters.
    pub fn stats(&self) -> &SessionStats {
        &self.engine.stats
    }
}
