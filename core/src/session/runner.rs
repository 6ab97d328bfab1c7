//! [`RunnerSession`]: the runner side of a hub connection.

use indexmap::IndexMap;

use crate::json::{Object, Value};
use crate::sequencing::{ConnectionState, Position, Role};
use crate::wire::{self, Hello, Message, Ping};

use super::engine::{Engine, Link, RunnerStage, Stage, CONTROL_OVERHEAD};
use super::sealed::Sealed;
#[cfg(doc)]
use super::{Event, Input, Output};
use super::{Machine, SessionConfig};

/// The runner side of a hub↔runner connection (sans-IO), driven through [`Machine`].
///
/// # Call order
///
/// Feed one input ([`handle_input`](Machine::handle_input) or [`send`](Machine::send)),
/// drain [`poll_output`](Machine::poll_output) until `None`, then arm a timer at
/// [`poll_timeout`](Machine::poll_timeout) and feed [`Input::Timeout`] when it fires.
/// After [`Output::Close`] or a transport loss feed [`Input::Disconnected`]. Persist
/// [`state`](Machine::state)'s snapshot to survive a restart and resume with
/// [`with_state`](Self::with_state).
///
/// # Transitions
///
/// States: `Down`, `Barrier` (the post-hello barrier ping's `pong` is awaited),
/// `Open`, `Closing` (a close was asked; waiting for `Disconnected`). "Up" is `Barrier`
/// or `Open`. The state given to [`new`](Self::new) / [`with_state`](Self::with_state)
/// is marked unconfirmed (the hub may be ahead of it): frames stamped before the hub's
/// positions are known are *provisional*.
///
/// | from | input or frame | outputs | to |
/// |---|---|---|---|
/// | `Down`, `Closing` | `Connected`, state confirmed | `hello` (identity from the template, `resume` from the state, `replay_from`; what does not fit `max_control_frame_bytes` continues in pings), then every unacknowledged frame in stream order | `Open` |
/// | `Down`, `Closing` | `Connected`, state unconfirmed | the same `hello`, a barrier `ping` (`"barrier": true`), then every non-provisional unacknowledged frame | `Barrier` |
/// | Up | `Connected` | error `already_connected` | same |
/// | `Down`, `Closing` | `Bytes`, `Frame` | error `not_connected` | same |
/// | any | `Disconnected` | queued `Transmit`s and `Close`s dropped | `Down` |
/// | `Barrier` | `pong` echoing the barrier nonce, or the nonce of a later ping of this connection | its `ack` applied first; provisional frames confirmed and transmitted | `Open` |
/// | Up | `ping` / other `pong` | `ack` / `replay_from` applied (an ack ahead of provisional frames re-stamps them after it: `PeerError(ack_ahead)`); a ping is answered by a `pong` carrying owed acks | same |
/// | Up | `hello` | `PeerError(unexpected_message)` | same |
/// | Up | command frame | `Received` exactly once in stream order (ahead: held; duplicate: dropped); acked after `ack_every_frames` frames or `ack_delay_ms` | same |
/// | any | `Send` | stamped on its `(task_id, attempt)` stream and kept until acknowledged; `Transmit` when up and not provisional (else it goes out on reconnect or after the barrier); kept log full: error `backpressure`, message handed back | same |
/// | Up | `Timeout`, no bytes for `peer_timeout_ms` | `Close(peer_timeout)` | `Closing` |
/// | Up | `Timeout` | keepalive `ping` every `ping_interval_ms` (with owed acks), due acks | same |
///
/// The timer rows run after every input, not only [`Input::Timeout`]: a deadline that
/// passed is acted on at the next input of any kind.
///
/// Every event is an [`Output::Event`]: [`Event::Received`], [`Event::InboundGap`],
/// [`Event::OutboundResync`], [`Event::PeerError`] (the offending frame or field is
/// dropped; the state does not change).
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
}

impl Sealed for RunnerSession {
    fn engine(&self) -> &Engine {
        &self.engine
    }
    fn parts(&mut self) -> (&mut Engine, Option<&Hello>) {
        (&mut self.engine, Some(&self.hello))
    }
}

impl Machine for RunnerSession {}

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
            let base = wire::encode(&Message::Hello(hello.clone()))
                .len()
                .saturating_add(CONTROL_OVERHEAD);
            let mut used = base;
            let mut entries = resume.iter();
            let mut first = IndexMap::new();
            let mut rest: Vec<(&String, &u64)> = Vec::new();
            for (task, seq) in entries.by_ref() {
                let size = entry_bytes(task, *seq);
                if used.saturating_add(size) > max && !first.is_empty() {
                    rest.push((task, seq));
                    break;
                }
                used = used.saturating_add(size);
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
                let mut used: usize = 2;
                for (task, seq) in rest {
                    let size = entry_bytes(task, *seq);
                    if !cur.is_empty() && used.saturating_add(size) > budget {
                        chunks.push(std::mem::take(&mut cur));
                        used = 2;
                    }
                    used = used.saturating_add(size);
                    cur.insert(task.clone(), Value::from(*seq));
                }
                chunks.push(cur);
                let mut chunks = chunks.into_iter().peekable();
                while let Some(chunk) = chunks.next() {
                    let nonce = self.next_nonce();
                    self.record_ping(nonce);
                    let mut ping = Ping::new(Some(nonce.into()));
                    ping.extra.insert("resume", Value::Object(chunk));
                    if chunks.peek().is_none() {
                        ping.extra.insert("resume_end", Value::Bool(true));
                    }
                    self.transmit(wire::encode(&Message::Ping(ping)));
                }
            }
        }
        let frames: Vec<(String, Option<u64>, u64, String)> = if self.state.is_confirmed() {
            self.state
                .unacked()
                .map(|(t, a, f)| (t.to_owned(), a, f.seq, f.frame.clone()))
                .collect()
        } else {
            // The hub's acknowledgements after this hello tell where its streams are;
            // its pong to this ping comes after all of them.
            let nonce = self.next_nonce();
            self.record_ping(nonce);
            if let Link::Up(live) = &mut self.link {
                live.stage = Stage::Runner(RunnerStage::Barrier { nonce });
            }
            let mut ping = Ping::new(Some(nonce.into()));
            ping.extra.insert("barrier", Value::Bool(true));
            self.transmit(wire::encode(&Message::Ping(ping)));
            let mut v = Vec::new();
            for (t, c) in self.state.tasks() {
                for (a, log) in c.outbound() {
                    let from = log.unconfirmed_from();
                    v.extend(
                        log.kept()
                            .filter(|f| f.seq < from)
                            .map(|f| (t.to_owned(), a, f.seq, f.frame.clone())),
                    );
                }
            }
            v
        };
        for (t, a, seq, f) in frames {
            self.transmit_seq(f, &t, a, seq);
        }
    }
}

/// Encoded size of one `resume` entry (`"task":seq,`).
fn entry_bytes(task: &str, seq: u64) -> usize {
    serde_json::to_string(task)
        .map_or(0, |s| s.len())
        .saturating_add(2)
        .saturating_add(seq.to_string().len())
}
