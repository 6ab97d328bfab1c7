//! [`HubSession`]: the hub side of a runner connection.

use indexmap::IndexMap;

use crate::json::{Object, Value};
use crate::sequencing::{ConnectionState, Position, Role};
use crate::wire::{self, Hello};

use super::engine::{Engine, Phase};
use super::{CloseReason, Event, Input, Output, SessionConfig, SessionError, SessionStats};

/// The hub side of a hub↔runner connection (sans-IO).
///
/// # Call order
///
/// 1. [`handle_input`](Self::handle_input) with [`Input::Connected`]; the session
///    waits for the runner's `hello`. A sequenced frame (or the runner's barrier ping,
///    `"barrier": true`) before it closes the connection with
///    [`CloseReason::HelloRequired`]; a `protocol_version` outside
///    `min_protocol_version..=max_protocol_version` with
///    [`CloseReason::UnsupportedProtocolVersion`].
/// 2. On `hello` the session: applies the runner's `replay_from` extension (gaps become
///    [`Event::InboundGap`]), emits [`Event::Hello`], waits for the rest of the resume
///    when the hello says `resume_more` (pings carrying `resume`, the last one
///    `resume_end`), re-stamps commands stamped before the runner's positions were
///    known that collide with them (`resume_ahead`), acknowledges every runner stream
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
        let mut state = if state.role() == Role::Hub {
            state
        } else {
            ConnectionState::with_config(Role::Hub, config.sequencing.clone())
        };
        // The state may be older than the peer's (lost, or a stale snapshot): frames
        // stamped before the peer's positions are known are provisional.
        state.mark_unconfirmed();
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
                    if e.may_transmit() {
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
        let raw = hello.resume.clone();
        let more = extra.get("resume_more").and_then(Value::as_bool) == Some(true);
        self.event(Event::Hello(hello));
        let mut resume = IndexMap::new();
        self.merge_resume(&mut resume, &raw);
        // Runner streams whose beginning the runner can no longer send.
        self.extensions(now, &extra);
        if more {
            // The rest of the resume follows in pings; commands wait for it.
            self.resume_pending = Some(resume);
        } else {
            self.finish_resume(&resume);
        }
    }

    /// Add resume entries, dropping (and reporting) values above 2^53 − 1 and entries
    /// beyond `max_streams` distinct tasks.
    fn merge_resume(&mut self, into: &mut IndexMap<String, u64>, from: &IndexMap<String, u64>) {
        for (task, seq) in from {
            if *seq > wire::MAX_SAFE_INTEGER {
                self.peer_error(
                    "invalid_resume",
                    format!("resume value {seq} of task {task:?} is above 2^53 - 1; ignored"),
                );
            } else if into.len() < self.state.config().max_streams || into.contains_key(task) {
                into.insert(task.clone(), *seq);
            }
        }
    }

    /// A ping continuing a `resume_more` hello: `resume` (object) adds entries,
    /// `resume_end: true` completes it.
    pub(crate) fn hub_resume_chunk(&mut self, _now: u64, extra: &Object) {
        let Some(mut pending) = self.resume_pending.take() else {
            return;
        };
        if let Some(v) = extra.get("resume") {
            let parsed = v.as_object().map(|o| {
                o.iter()
                    .filter_map(|(k, v)| Some((k.to_owned(), v.as_u64()?)))
                    .collect::<IndexMap<String, u64>>()
            });
            match parsed {
                Some(chunk) => {
                    if v.as_object().is_some_and(|o| o.len() != chunk.len()) {
                        self.peer_error(
                            "invalid_extension",
                            "resume: entries with a non-integer value skipped",
                        );
                    }
                    self.merge_resume(&mut pending, &chunk);
                }
                None => self.peer_error("invalid_extension", "resume must be an object"),
            }
        }
        if extra.get("resume_end").and_then(Value::as_bool) == Some(true) {
            self.finish_resume(&pending);
        } else {
            self.resume_pending = Some(pending);
        }
    }

    /// The runner's whole resume is known: acknowledge, report and replay.
    fn finish_resume(&mut self, resume: &IndexMap<String, u64>) {
        let replay = self.state.replay_for(resume);
        for p in &replay.peer_ahead {
            self.peer_error(
                "resume_ahead",
                format!(
                    "runner declared {} for task {:?}, beyond what this hub's state knew it sent; its unseen commands are re-stamped after it",
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
                if let Err(e) = self.state.ack(task, None, seq) {
                    self.peer_error(e.code(), e.to_string());
                }
            }
        }
        self.state.confirm_all();
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
