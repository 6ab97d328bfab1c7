//! [`RunnerSession`]: the runner side of a hub connection.

use indexmap::IndexMap;

use crate::json::{Object, Value};
use crate::sequencing::{ConnectionState, Position, Role};
use crate::wire::{self, Hello, Message, Ping};

use super::engine::{Engine, Phase, CONTROL_OVERHEAD};
use super::{Input, Output, SessionConfig, SessionError, SessionStats};

/// The runner side of a hub↔runner connection (sans-IO).
///
/// # Call order
///
/// 1. [`handle_input`](Self::handle_input) with [`Input::Connected`] when the transport
///    is up, then drain [`poll_output`](Self::poll_output) until [`Output::Timeout`].
///    The first transmitted frame is the `hello` (identity from the template given to
///    [`new`](Self::new), `resume` from the sequencing state, plus the `replay_from`
///    extension; what does not fit `max_control_frame_bytes` follows in pings), then —
///    while the state is unconfirmed (fresh or restored: the hub may be ahead of it) — a
///    barrier `ping`, then every progress/report frame the hub has not acknowledged, in
///    stream order. Provisional frames (stamped before the hub's positions were known)
///    are held until the hub's post-hello acknowledgements have been applied (the
///    barrier's `pong`); an acknowledgement ahead of them re-stamps them after it.
/// 2. Feed inbound traffic with [`Input::Bytes`] (JSONL) or [`Input::Frame`] (one
///    frame); each is decoded, duplicates are dropped, and new commands come out as
///    [`Event::Received`](super::Event::Received) in stream order.
/// 3. Send progress and reports with [`Input::Send`]: stamped with the next seq of
///    their `(task_id, attempt)` stream, kept until acknowledged, transmitted now if
///    connected (and not provisional), re-sent after a reconnect otherwise. When the kept log is full the
///    input fails with `backpressure` and the message is handed back.
/// 4. At each `Timeout(Some(t))` deadline call `handle_input(t, Input::Tick)`
///    (keepalive pings, acknowledgements, dead-peer detection).
/// 5. After [`Output::Close`] or a transport loss report [`Input::Disconnected`]
///    (queued transmits and closes of the dead connection are dropped).
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
        let mut state = if state.role() == Role::Runner {
            state
        } else {
            ConnectionState::with_config(Role::Runner, config.sequencing.clone())
        };
        // The state may be older than the peer's (lost, or a stale snapshot): frames
        // stamped before the peer's positions are known are provisional.
        state.mark_unconfirmed();
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
                e.runner_hello(&self.hello);
                Ok(())
            }
            Input::Disconnected => {
                e.disconnect();
                Ok(())
            }
            Input::Bytes(b) => e.bytes(now_ms, &b),
            Input::Frame(f) => e.frame(now_ms, &f),
            Input::Send(msg) => match e.state.emit_encoded(msg) {
                Ok((m, frame)) => {
                    // A provisional frame waits for the barrier (see `runner_hello`).
                    let provisional = m
                        .task_id()
                        .and_then(|t| e.state.outbound_log(t, Some(m.attempt().unwrap_or(0))))
                        .is_some_and(|l| m.seq().unwrap_or(0) >= l.unconfirmed_from());
                    if e.phase == Phase::Open && !provisional {
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

impl Engine {
    /// The frames a runner sends on connect: the `hello` (its `resume` continued in pings
    /// when it does not fit in `max_control_frame_bytes`), `replay_from` (in the hello
    /// when everything fits, else in pings), the barrier ping while the state is
    /// unconfirmed, then every kept frame that is not provisional.
    pub(crate) fn runner_hello(&mut self, template: &Hello) {
        let mut hello = template.clone();
        hello.resume = IndexMap::new();
        hello.extra.remove("replay_from");
        hello.extra.remove("resume_more");
        let resume = self.state.resume_map();
        let from: Vec<Position> = self.state.replay_from();
        let max = self.cfg.max_control_frame_bytes;
        let mut full = hello.clone();
        full.resume = resume.clone();
        if !from.is_empty() {
            full.extra
                .insert("replay_from", Position::list_to_value(&from));
        }
        let encoded = wire::encode(&Message::Hello(full));
        if encoded.len() <= max {
            self.transmit(encoded);
        } else {
            // As much of the resume as fits; the rest follows in pings.
            let base = wire::encode(&Message::Hello(hello.clone())).len() + CONTROL_OVERHEAD;
            let mut used = base;
            let mut entries = resume.iter();
            let mut first = IndexMap::new();
            let mut rest: Vec<(&String, &u64)> = Vec::new();
            for (task, seq) in entries.by_ref() {
                let size = entry_bytes(task, *seq);
                if used + size > max && !first.is_empty() {
                    rest.push((task, seq));
                    break;
                }
                used += size;
                first.insert(task.clone(), *seq);
            }
            rest.extend(entries);
            hello.resume = first;
            if !rest.is_empty() {
                hello.extra.insert("resume_more", Value::Bool(true));
            }
            self.transmit(wire::encode(&Message::Hello(hello)));
            self.send_ack_pings(&[], &from);
            if !rest.is_empty() {
                let budget = max.saturating_sub(CONTROL_OVERHEAD).max(1);
                let mut chunks: Vec<Object> = Vec::new();
                let mut cur = Object::new();
                let mut used = 2;
                for (task, seq) in rest {
                    let size = entry_bytes(task, *seq);
                    if !cur.is_empty() && used + size > budget {
                        chunks.push(std::mem::take(&mut cur));
                        used = 2;
                    }
                    used += size;
                    cur.insert(task.clone(), Value::from(*seq));
                }
                chunks.push(cur);
                let n = chunks.len();
                for (i, chunk) in chunks.into_iter().enumerate() {
                    let mut ping = Ping::new(Some(self.next_nonce().into()));
                    ping.extra.insert("resume", Value::Object(chunk));
                    if i + 1 == n {
                        ping.extra.insert("resume_end", Value::Bool(true));
                    }
                    self.transmit(wire::encode(&Message::Ping(ping)));
                }
            }
        }
        let frames: Vec<String> = if self.state.is_confirmed() {
            self.state
                .unacked()
                .map(|(_, _, f)| f.frame.clone())
                .collect()
        } else {
            // The hub's acknowledgements after this hello tell where its streams are;
            // its pong to this ping comes after all of them.
            let nonce = self.next_nonce();
            self.barrier = Some(nonce);
            let mut ping = Ping::new(Some(nonce.into()));
            ping.extra.insert("barrier", Value::Bool(true));
            self.transmit(wire::encode(&Message::Ping(ping)));
            let mut v = Vec::new();
            for (_, c) in self.state.tasks() {
                for (_, log) in c.outbound() {
                    let from = log.unconfirmed_from();
                    v.extend(log.kept().filter(|f| f.seq < from).map(|f| f.frame.clone()));
                }
            }
            v
        };
        for f in frames {
            self.transmit(f);
        }
    }
}

/// Encoded size of one `resume` entry (`"task":seq,`).
fn entry_bytes(task: &str, seq: u64) -> usize {
    serde_json::to_string(task).map_or(0, |s| s.len()) + 2 + seq.to_string().len()
}
