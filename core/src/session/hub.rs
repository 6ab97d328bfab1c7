//! [`HubSession`]: the hub side of a runner connection.

use indexmap::IndexMap;

use crate::json::{Object, Value};
use crate::sequencing::{ConnectionState, Position, Role};
use crate::wire::{self, Hello};

use super::engine::{Engine, HubStage, Link, Live, Stage};
use super::sealed::Sealed;
use super::{CloseReason, Event, Machine, SessionConfig};
#[cfg(doc)]
use super::{Input, Output};

/// The hub side of a hub↔runner connection (sans-IO), driven through [`Machine`].
///
/// # Call order
///
/// Feed one input ([`handle_input`](Machine::handle_input) or [`send`](Machine::send)),
/// drain [`poll_output`](Machine::poll_output) until `None`, then arm a timer at
/// [`poll_timeout`](Machine::poll_timeout) and feed [`Input::Timeout`] when it fires.
/// After [`Output::Close`] or a transport loss feed [`Input::Disconnected`].
///
/// # Transitions
///
/// States: `Down`, `AwaitingHello`, `Resuming` (a `resume_more` hello's resume still
/// arriving in pings), `Open`, `Closing` (a close was asked; waiting for
/// `Disconnected`). "Up" is `AwaitingHello`, `Resuming` or `Open`.
///
/// | from | input or frame | outputs | to |
/// |---|---|---|---|
/// | `Down`, `Closing` | `Connected` | (timers armed) | `AwaitingHello` |
/// | Up | `Connected` | error `already_connected` | same |
/// | `Down`, `Closing` | `Bytes`, `Frame` | error `not_connected` | same |
/// | any | `Disconnected` | queued `Transmit`s and `Close`s dropped | `Down` |
/// | `AwaitingHello` | `hello`, `protocol_version` outside `min..=max_protocol_version` | `Close(unsupported_protocol_version)` | `Closing` |
/// | `AwaitingHello` | `hello` with `resume_more` | `Hello`; its `replay_from` applied (`InboundGap`s) | `Resuming` |
/// | `AwaitingHello` | `hello` | `Hello`; `replay_from` applied; then *finish resume* | `Open` |
/// | `Resuming` | `ping` with `resume` | entries added (bad ones: `PeerError(invalid_extension)`); `pong` | `Resuming` |
/// | `Resuming` | `ping` with `resume_end` | *finish resume*; `pong` | `Open` |
/// | `AwaitingHello` | sequenced frame, or `ping` with `"barrier": true` | `Close(hello_required)` | `Closing` |
/// | Up | other `ping` / `pong` | `ack` / `replay_from` applied; a ping is answered by a `pong` carrying owed acks | same |
/// | `Resuming`, `Open` | `hello` | `PeerError(unexpected_message)` | same |
/// | `Resuming`, `Open` | sequenced frame | `Received` exactly once in stream order (ahead: held; duplicate: dropped); acked after `ack_every_frames` frames or `ack_delay_ms` | same |
/// | any | `Send` | stamped (per task) and kept until acknowledged; `Transmit` only in `Open` (else it goes out with the replay); refused: error (e.g. `backpressure`) | same |
/// | Up | `Timeout`, no bytes for `peer_timeout_ms` | `Close(peer_timeout)` | `Closing` |
/// | Up | `Timeout` | keepalive `ping` every `ping_interval_ms` (with owed acks), due acks (not in `AwaitingHello`) | same |
///
/// *Finish resume*: commands stamped before the runner's positions were known that
/// collide with them are re-stamped after them (`PeerError(resume_ahead)`); every runner
/// stream is acknowledged in a `ping` carrying `ack`, plus `replay_from` for command
/// streams the runner can no longer get in full (each also an `OutboundResync`); then
/// every kept command above the resume is re-sent (a task missing from it counts as 0).
///
/// The timer rows run after every input, not only [`Input::Timeout`]: a deadline that
/// passed is acted on at the next input of any kind.
///
/// Every event is an [`Output::Event`]: [`Event::Hello`], [`Event::Received`],
/// [`Event::InboundGap`], [`Event::OutboundResync`], [`Event::PeerError`] (the
/// offending frame or field is dropped; the state does not change).
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

    /// What a store holds as applied of inbound stream `(task, attempt)`: the confirmed
    /// position with durable acknowledgements, else the watermark.
    pub(crate) fn applied_through(&self, task: &str, attempt: Option<u64>) -> Option<u64> {
        self.engine.acked_position(task, attempt)
    }

    /// `true` once the runner's `hello` was accepted on the current connection.
    pub fn is_open(&self) -> bool {
        matches!(
            self.engine.stage(),
            Some(Stage::Hub(HubStage::Open | HubStage::Resuming(_)))
        )
    }
}

impl Sealed for HubSession {
    fn engine(&self) -> &Engine {
        &self.engine
    }
    fn parts(&mut self) -> (&mut Engine, Option<&Hello>) {
        (&mut self.engine, None)
    }
}

impl Machine for HubSession {
    fn as_hub(&self) -> Option<&HubSession> {
        Some(self)
    }
}

impl Engine {
    fn set_stage_hub(&mut self, stage: HubStage) {
        if let Link::Up(live) = &mut self.link {
            live.stage = Stage::Hub(stage);
        }
    }

    /// The runner's hello on a connection awaiting it.
    pub(crate) fn hub_hello(&mut self, now: u64, hello: Hello) {
        let v = hello.protocol_version;
        if v < self.cfg.min_protocol_version || v > self.cfg.max_protocol_version {
            self.close(CloseReason::UnsupportedProtocolVersion { version: v });
            return;
        }
        self.set_stage_hub(HubStage::Open);
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
            self.set_stage_hub(HubStage::Resuming(resume));
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
        let mut pending = match &mut self.link {
            Link::Up(Live {
                stage: Stage::Hub(stage @ HubStage::Resuming(_)),
                ..
            }) => match std::mem::replace(stage, HubStage::Open) {
                HubStage::Resuming(pending) => pending,
                other => {
                    *stage = other;
                    return;
                }
            },
            _ => return,
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
            self.set_stage_hub(HubStage::Resuming(pending));
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
                r.missing_to.saturating_add(1),
            ));
            self.event(Event::OutboundResync(r.clone()));
        }
        self.send_full_ack(&notice);
        for s in replay.streams {
            for f in s.frames {
                self.transmit_seq(f.frame, &s.task_id, s.attempt, f.seq);
            }
        }
    }
}
