//! Area `session`: the hub-side and runner-side connection machines
//! (`session::HubSession`, `session::RunnerSession`), driven through the core's
//! `Machine` trait and held in an `External` handle (free functions over a handle cost
//! a fraction of a napi-rs class method).
//!
//! Outputs stay in the machine until the host polls them (the machine decides what a
//! later input drops, e.g. transmits queued for a connection that is gone). A polled
//! `received` `task.progress` decoded by the core's fast path from a frame the host fed
//! crosses as a record of numbers in the scratch (the TS layer builds the message from
//! the frame it passed, which it keeps in a ring of the last [`FED`] fast-path frames by
//! serial); every other output as JSON text (tagged with the core's `Output::kind`).
//! Scratch layout: `[0]` the number of records, `[1]` `1` when more outputs wait (after
//! a single poll) or how many frames a batch handled, then records of [`RECORD`]
//! numbers: `1, frame index in the batch, <view>`, `3, serial, <view>` (see
//! [`crate::wire::view_numbers`]) or `2, index into the JSON array`. Once the scratch is
//! full, the remaining outputs are only in the array, after the last recorded index.

use napi::bindgen_prelude::{Buffer, External, Uint8Array};
use napi_derive::napi;
use serde_json::{json, Value};
use stapel_runner_protocol::sequencing::{ConnectionState, Resync};
use stapel_runner_protocol::session::{
    Event, HubSession, Input, Machine, Output, RunnerSession, SessionConfig, SessionError,
};
use stapel_runner_protocol::wire::{self, Hello, Message, TaskProgress};

use crate::boundary::{Frames, Out, Text};
use crate::errors::{bad_argument, config_error, fail, guard, parse_arg};
use crate::sequencing::{restore_error, StateHandle};
use crate::wire::{message_from_text, num, put_view, view_numbers, VIEW_LEN};

/// Numbers per output record in the scratch.
pub const RECORD: usize = 2 + VIEW_LEN;
/// Where the records start in the scratch.
const RECORDS_AT: usize = 2;

/// A time or other `u64` from JS: a non-negative integral number; values beyond
/// `u64::MAX` saturate (a JS number above 2^53 is approximate anyway).
pub fn now_of(now_ms: f64) -> napi::Result<u64> {
    if now_ms.is_finite() && now_ms >= 0.0 && now_ms.fract() == 0.0 {
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        Ok(now_ms as u64)
    } else {
        Err(bad_argument("number", "not a non-negative integer"))
    }
}

/// A stream resync as its JSON object (`attempt` only for progress streams).
pub fn resync_json(r: &Resync) -> Value {
    Value::from(r.to_value())
}

/// One output as JSON text: `kind` and its fields; a message is its canonical frame
/// (the text of its wire object), spliced in without an intermediate value.
fn output_text(o: &Output) -> String {
    match o {
        Output::Transmit(frame) => json!({"kind": o.kind(), "frame": frame}).to_string(),
        Output::Close(reason) => json!({"kind": o.kind(), "reason": reason.code()}).to_string(),
        Output::Event(e) => event_text(e),
    }
}

/// One session event as JSON text: `kind` and its fields; a message is its canonical
/// frame (the text of its wire object), spliced in without an intermediate value.
pub fn event_text(e: &Event) -> String {
    let kind = e.kind();
    let with_message =
        |m: &Message| format!("{{\"kind\":\"{kind}\",\"message\":{}}}", wire::encode(m));
    match e {
        Event::Hello(h) => with_message(&Message::Hello(h.clone())),
        Event::Received(m) => with_message(m),
        Event::InboundGap(r) | Event::OutboundResync(r) => {
            json!({"kind": kind, "resync": resync_json(r)}).to_string()
        }
        Event::PeerError { code, detail } => {
            json!({"kind": kind, "code": code, "detail": detail}).to_string()
        }
        _ => json!({ "kind": kind }).to_string(),
    }
}

/// A session error as a thrown `ProtocolStateError` (a refused send keeps its code).
pub fn session_error(e: SessionError) -> napi::Error {
    fail("session", e.code(), &e, Value::Null)
}

/// The session configuration from its JSON text (absent keys take the core's defaults).
pub fn session_config(config: Option<&str>) -> napi::Result<SessionConfig> {
    let value = match config {
        Some(text) => parse_arg("config", text)?,
        None => json!({}),
    };
    SessionConfig::from_value(&value).map_err(|e| config_error(&e))
}

/// Fast-path frames remembered for the outputs they become (the TS layer's ring holds
/// the same number of frames).
pub const FED: usize = 128;

/// One hub-side or runner-side connection machine, the fast-path frames fed since (at
/// most [`FED`], newest last), and the error of a batch that stopped early (thrown by
/// [`session_take_error`]).
pub struct SessionHandle {
    machine: Box<dyn Machine>,
    fed: std::collections::VecDeque<Fed>,
    serial: u64,
    error: Option<napi::Error>,
}

impl SessionHandle {
    /// A handle over a hub session (a session rebuilt from a store's rows).
    pub(crate) fn hub(session: HubSession) -> Self {
        Self {
            machine: Box::new(session),
            fed: std::collections::VecDeque::new(),
            serial: 0,
            error: None,
        }
    }

    /// The hub session (`None` for a runner's): its store rows.
    pub(crate) fn hub_session(&self) -> Option<&HubSession> {
        self.machine.as_hub()
    }

    fn remember(&mut self, fed: Fed) {
        if self.fed.len() >= FED {
            self.fed.pop_front();
        }
        self.fed.push_back(fed);
    }
}

/// A frame this call handed to the machine, decoded by the fast path: where its
/// payload's text lives (the machine keeps the frame's own allocation as the payload
/// of the message it decodes from it), and its fields for the scratch.
///
/// A frame of the current batch (tag 1) is alive while its outputs are taken. A frame
/// remembered for later calls (tag 3) may have been dropped meanwhile (a duplicate, a
/// backlog cleared) and its address reused by another text — a frame of a later batch
/// held ahead of a gap, a line the framer cut from bytes, a binary frame — so it is
/// matched only when the payload text also hashes the same (`hash`).
pub(crate) struct Fed {
    /// `1` (a frame of this batch, `index` in it) or `3` (an earlier frame, `index` its serial).
    tag: u8,
    index: u64,
    /// Address and length of the payload's text (the key its message is found by).
    payload: (usize, usize),
    /// [`text_hash`] of the payload's text (tag 3; 0 for a batch frame).
    hash: u64,
    numbers: [f64; VIEW_LEN],
}

/// A 64-bit hash of a text, eight bytes at a time (multiply-rotate, as FxHash): cheap
/// enough for every frame remembered; a match also needs the same address and length.
pub(crate) fn text_hash(text: &str) -> u64 {
    const K: u64 = 0x517c_c1b7_2722_0a95;
    let bytes = text.as_bytes();
    let mut chunks = bytes.chunks_exact(8);
    let mut h = bytes.len() as u64;
    for c in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        h = (h.rotate_left(5) ^ u64::from_le_bytes(w)).wrapping_mul(K);
    }
    let mut w = [0u8; 8];
    let rest = chunks.remainder();
    if let Some(head) = w.get_mut(..rest.len()) {
        head.copy_from_slice(rest);
    }
    (h.rotate_left(5) ^ u64::from_le_bytes(w)).wrapping_mul(K)
}

/// Collects one call's outputs into the scratch records and the JSON array (the link
/// machines' outputs too, see [`crate::link`]).
pub(crate) struct Collector {
    out: Out,
    records: usize,
    json: String,
    slow: usize,
    full: bool,
}

impl Collector {
    pub(crate) fn new() -> Self {
        Self {
            out: Out::new(),
            records: 0,
            json: String::new(),
            slow: 0,
            full: false,
        }
    }

    fn at(&self) -> usize {
        RECORDS_AT + self.records * RECORD
    }

    fn record(&mut self) -> Option<usize> {
        if self.full || !self.out.fits(self.at(), RECORD) {
            self.full = true;
            return None;
        }
        let at = self.at();
        self.records += 1;
        Some(at)
    }

    /// Take one output; `fed` are the fast-path frames it may come from (newest last: a
    /// live frame's allocation is the newest entry at its address).
    fn take(&mut self, o: &Output, fed: &std::collections::VecDeque<Fed>, batch: Option<&Fed>) {
        if let Output::Event(Event::Received(Message::TaskProgress(p))) = o {
            if self.progress(p, fed.iter().rev(), batch) {
                return;
            }
        }
        self.slow_text(&output_text(o));
    }

    /// Record a received `task.progress` whose payload text is that of a fast-path frame
    /// (`batch` first, then `fed` in order): `false` when it is none of them (or the
    /// scratch is full), and the caller takes the output's slow form.
    pub(crate) fn progress<'a>(
        &mut self,
        p: &TaskProgress,
        mut fed: impl Iterator<Item = &'a Fed>,
        batch: Option<&Fed>,
    ) -> bool {
        let Some(t) = p.payload.text() else {
            return false;
        };
        let key = (t.as_ptr() as usize, t.len());
        if let Some(f) = batch.filter(|f| f.payload == key) {
            return self.put_record(f, p);
        }
        let mut hash = None;
        let found =
            fed.find(|f| f.payload == key && *hash.get_or_insert_with(|| text_hash(t)) == f.hash);
        match found {
            Some(f) => self.put_record(f, p),
            None => false,
        }
    }

    /// Record `p` as the fast-path frame `f` it was decoded from (`false`: the scratch
    /// is full, and the caller takes the output's slow form).
    pub(crate) fn put_record(&mut self, f: &Fed, p: &TaskProgress) -> bool {
        let Some(at) = self.record() else {
            return false;
        };
        self.out.put(at, f64::from(f.tag));
        self.out.put(at + 1, num(f.index));
        put_view(&self.out, at + 2, &f.numbers);
        // The message's own numbers: the session may deliver a seed-only runner's
        // attempt-less frame as the task's assigned attempt.
        self.out.put(at + 2, num(p.seq));
        self.out.put(at + 3, num(p.attempt));
        true
    }

    /// Take one output in its slow form: its JSON text.
    pub(crate) fn slow_text(&mut self, text: &str) {
        if let Some(at) = self.record() {
            self.out.put(at, 2.0);
            self.out.put(at + 1, num(self.slow as u64));
        }
        self.json.push(if self.slow == 0 { '[' } else { ',' });
        self.json.push_str(text);
        self.slow += 1;
    }

    /// Finish: the header, and the JSON array (`null` when there are no slow outputs).
    pub(crate) fn finish(mut self, handled: usize) -> Option<String> {
        self.out.put(0, num(self.records as u64));
        self.out.put(1, num(handled as u64));
        if self.slow == 0 {
            return None;
        }
        self.json.push(']');
        Some(self.json)
    }
}

/// The fast-path view of a frame before it moves into the machine: the frame's heap text
/// stays where it is when the `String` moves, so the payload span identifies the message
/// the machine decodes from it.
/// Tag 1 (a batch frame, `index` its place) takes no hash; tag 3 (remembered by serial
/// `index`) hashes its payload.
pub(crate) fn scan(frame: &str, tag: u8, index: u64) -> Option<Fed> {
    wire::peek_progress(frame).map(|v| Fed {
        tag,
        index,
        payload: (v.payload.as_ptr() as usize, v.payload.len()),
        hash: if tag == 3 { text_hash(v.payload) } else { 0 },
        numbers: view_numbers(frame, &v),
    })
}

/// A session machine: `side` is `hub` or `runner`; `config` the JSON text of the
/// session configuration; `hello` (runner) the JSON text of the runner's hello
/// template; `snapshot` a `ConnectionState` snapshot to resume from.
#[napi(ts_return_type = "ExternalObject<'Session'>")]
pub fn session_new(
    side: String,
    config: Option<String>,
    hello: Option<String>,
    snapshot: Option<Uint8Array>,
) -> napi::Result<External<SessionHandle>> {
    guard(|| {
        let config = session_config(config.as_deref())?;
        let state = match snapshot {
            Some(bytes) => Some(ConnectionState::restore(&bytes).map_err(|e| restore_error(&e))?),
            None => None,
        };
        let machine: Box<dyn Machine> = match side.as_str() {
            "hub" => match state {
                Some(s) => Box::new(HubSession::with_state(config, s)),
                None => Box::new(HubSession::new(config)),
            },
            "runner" => {
                let hello = match hello {
                    Some(text) => match message_from_text(&text, false)? {
                        Message::Hello(h) => h,
                        _ => return Err(bad_argument("hello", "not a hello message")),
                    },
                    None => return Err(bad_argument("hello", "a runner needs its hello")),
                };
                runner(hello, config, state)
            }
            other => return Err(bad_argument("side", format!("{other:?}"))),
        };
        Ok(External::new(SessionHandle {
            machine,
            fed: std::collections::VecDeque::new(),
            serial: 0,
            error: None,
        }))
    })
}

/// Feed one input: `kind` 0 `connected`, 1 `disconnected`, 2 `timeout`, 3 `frame` (with
/// `text`), 4 `bytes` (with `bytes`). A fast-path frame's serial (its slot in the TS
/// layer's ring is `serial % FED`), else `-1`.
#[napi(
    ts_args_type = "session: ExternalObject<'Session'>, nowMs: number, kind: number, text?: string | undefined | null, bytes?: Uint8Array | undefined | null"
)]
pub fn session_input(
    session: &mut External<SessionHandle>,
    now_ms: f64,
    kind: u32,
    text: Option<Text>,
    bytes: Option<Uint8Array>,
) -> napi::Result<f64> {
    guard(|| {
        let now = now_of(now_ms)?;
        let handle = &mut **session;
        match (kind, text, bytes) {
            (0, _, _) => handle.machine.handle_input(now, Input::Connected),
            (1, _, _) => handle.machine.handle_input(now, Input::Disconnected),
            (2, _, _) => handle.machine.handle_input(now, Input::Timeout),
            (3, Some(t), _) => {
                let frame = t.to_owned_string()?;
                let serial = handle.serial;
                let fed = scan(&frame, 3, serial);
                handle
                    .machine
                    .handle_input(now, Input::Frame(frame))
                    .map_err(session_error)?;
                return Ok(match fed {
                    Some(f) => {
                        handle.serial = serial.wrapping_add(1);
                        handle.remember(f);
                        num(serial)
                    }
                    None => -1.0,
                });
            }
            (4, _, Some(b)) => handle.machine.handle_input(now, Input::Bytes(b.to_vec())),
            (k, _, _) => return Err(bad_argument("input", format!("kind {k}"))),
        }
        .map_err(session_error)?;
        Ok(-1.0)
    })
}

/// The next output (see the module docs): `null` with `[0]` 0 when there is none, `null`
/// with one record, or the output's JSON text; `[1]` is 1 when more outputs wait.
#[napi(ts_args_type = "session: ExternalObject<'Session'>")]
pub fn session_poll(session: &mut External<SessionHandle>) -> napi::Result<Option<String>> {
    guard(|| {
        let handle = &mut **session;
        let out = Out::new();
        let Some(o) = handle.machine.poll_output() else {
            out.put(0, 0.0);
            out.put(1, 0.0);
            return Ok(None);
        };
        let mut c = Collector::new();
        c.take(&o, &handle.fed, None);
        let more = handle.machine.has_output();
        let text = c.finish(0);
        out.put(1, if more { 1.0 } else { 0.0 });
        Ok(text.map(|t| {
            t.get(1..t.len().saturating_sub(1))
                .unwrap_or_default()
                .to_owned()
        }))
    })
}

/// Every pending output (see the module docs), the slow ones as a JSON array.
#[napi(ts_args_type = "session: ExternalObject<'Session'>")]
pub fn session_drain(session: &mut External<SessionHandle>) -> napi::Result<Option<String>> {
    guard(|| {
        let handle = &mut **session;
        let mut c = Collector::new();
        while let Some(o) = handle.machine.poll_output() {
            c.take(&o, &handle.fed, None);
        }
        Ok(c.finish(0))
    })
}

/// Feed whole frames (WebSocket text messages) in order, draining after each (see the
/// module docs). A refused frame stops the batch: the scratch says how many frames were
/// handled, and [`session_take_error`] throws the refusal.
#[napi(ts_args_type = "session: ExternalObject<'Session'>, nowMs: number, frames: string[]")]
pub fn session_frames(
    session: &mut External<SessionHandle>,
    now_ms: f64,
    frames: Frames,
) -> napi::Result<Option<String>> {
    guard(|| {
        let now = now_of(now_ms)?;
        let handle = &mut **session;
        let mut c = Collector::new();
        let mut handled = 0usize;
        for (i, frame) in frames.0.into_iter().enumerate() {
            let fed = scan(&frame, 1, i as u64);
            if let Err(e) = handle.machine.handle_input(now, Input::Frame(frame)) {
                handle.error = Some(session_error(e));
                break;
            }
            while let Some(o) = handle.machine.poll_output() {
                c.take(&o, &handle.fed, fed.as_ref());
            }
            handled += 1;
        }
        Ok(c.finish(handled))
    })
}

/// Throw the refusal that stopped the last [`session_frames`] batch (nothing when none).
#[napi(ts_args_type = "session: ExternalObject<'Session'>")]
pub fn session_take_error(session: &mut External<SessionHandle>) -> napi::Result<()> {
    guard(|| match session.error.take() {
        Some(e) => Err(e),
        None => Ok(()),
    })
}

/// Send a sequenced message (JSON text): the stamped message's JSON text (its outputs
/// wait in the machine).
#[napi(ts_args_type = "session: ExternalObject<'Session'>, nowMs: number, message: string")]
pub fn session_send(
    session: &mut External<SessionHandle>,
    now_ms: f64,
    message: Text,
) -> napi::Result<String> {
    send_text(session, now_ms, message, false)
}

/// Re-send a sequenced message (JSON text) that may have been sent before (the core's
/// `Machine::resend`): the message with the seq it goes under, as JSON text.
#[napi(ts_args_type = "session: ExternalObject<'Session'>, nowMs: number, message: string")]
pub fn session_resend(
    session: &mut External<SessionHandle>,
    now_ms: f64,
    message: Text,
) -> napi::Result<String> {
    send_text(session, now_ms, message, true)
}

/// `send` (or `resend`) of a message given as JSON text: the stamped message's JSON text.
fn send_text(
    session: &mut External<SessionHandle>,
    now_ms: f64,
    message: Text,
    resend: bool,
) -> napi::Result<String> {
    guard(|| {
        let now = now_of(now_ms)?;
        let msg = message.with(|t| message_from_text(t, false))??;
        let stamped = if resend {
            session.machine.resend(now, msg)
        } else {
            session.machine.send(now, msg)
        }
        .map_err(session_error)?;
        Ok(wire::encode(&stamped.message))
    })
}

/// Durable acknowledgements: the host's store committed the inbound stream `(taskId,
/// attempt)` through `seq` (the core's `Input::Confirm`; errors `not_durable`,
/// `confirm_ahead`). Its outputs wait in the machine.
#[napi(
    ts_args_type = "session: ExternalObject<'Session'>, nowMs: number, taskId: string, attempt: number | undefined | null, seq: number"
)]
pub fn session_confirm(
    session: &mut External<SessionHandle>,
    now_ms: f64,
    task_id: String,
    attempt: Option<f64>,
    seq: f64,
) -> napi::Result<()> {
    guard(|| {
        let input = Input::Confirm {
            task_id,
            attempt: attempt.map(now_of).transpose()?,
            seq: now_of(seq)?,
        };
        session
            .machine
            .handle_input(now_of(now_ms)?, input)
            .map_err(session_error)
    })
}

/// The absolute deadline for the next `timeout` input, or `null`.
#[napi(ts_args_type = "session: ExternalObject<'Session'>")]
pub fn session_poll_timeout(session: &External<SessionHandle>) -> napi::Result<Option<f64>> {
    guard(|| Ok(session.machine.poll_timeout().map(num)))
}

/// Whether a transport connection is up.
#[napi(ts_args_type = "session: ExternalObject<'Session'>")]
pub fn session_is_connected(session: &External<SessionHandle>) -> napi::Result<bool> {
    guard(|| Ok(session.machine.is_connected()))
}

/// The sequencing state's snapshot bytes.
#[napi(ts_args_type = "session: ExternalObject<'Session'>")]
pub fn session_snapshot(session: &External<SessionHandle>) -> napi::Result<Buffer> {
    guard(|| Ok(session.machine.state().snapshot().into()))
}

/// A copy of the sequencing state.
#[napi(
    ts_args_type = "session: ExternalObject<'Session'>",
    ts_return_type = "ExternalObject<'State'>"
)]
pub fn session_state(session: &External<SessionHandle>) -> napi::Result<External<StateHandle>> {
    guard(|| {
        Ok(External::new(StateHandle::of(
            session.machine.state().clone(),
        )))
    })
}

/// The state's resume map as JSON text.
#[napi(ts_args_type = "session: ExternalObject<'Session'>")]
pub fn session_resume_map(session: &External<SessionHandle>) -> napi::Result<String> {
    guard(|| {
        serde_json::to_string(&session.machine.state().resume_map())
            .map_err(|e| bad_argument("resume map", e))
    })
}

/// Frames kept for replay.
#[napi(ts_args_type = "session: ExternalObject<'Session'>")]
pub fn session_outbox_frames(session: &External<SessionHandle>) -> napi::Result<f64> {
    guard(|| Ok(num(session.machine.state().outbox_frames() as u64)))
}

/// Forget a finished task's streams; whether it was known.
#[napi(ts_args_type = "session: ExternalObject<'Session'>, taskId: string")]
pub fn session_forget_task(
    session: &mut External<SessionHandle>,
    task_id: String,
) -> napi::Result<bool> {
    guard(|| Ok(session.machine.state_mut().forget_task(&task_id)))
}

/// Drop the kept frames of a stream at or below `seq` (a checkpoint); how many.
#[napi(
    ts_args_type = "session: ExternalObject<'Session'>, taskId: string, attempt: number | undefined | null, seq: number"
)]
pub fn session_trim_through(
    session: &mut External<SessionHandle>,
    task_id: String,
    attempt: Option<f64>,
    seq: f64,
) -> napi::Result<f64> {
    guard(|| {
        let attempt = attempt.map(now_of).transpose()?;
        let n = session
            .machine
            .state_mut()
            .trim_through(&task_id, attempt, now_of(seq)?);
        Ok(num(n as u64))
    })
}

/// Whether every frame of the task was acknowledged.
#[napi(ts_args_type = "session: ExternalObject<'Session'>, taskId: string")]
pub fn session_is_fully_acknowledged(
    session: &External<SessionHandle>,
    task_id: String,
) -> napi::Result<bool> {
    guard(|| Ok(session.machine.state().is_fully_acknowledged(&task_id)))
}

/// Whether the task was forgotten (a tombstone is kept).
#[napi(ts_args_type = "session: ExternalObject<'Session'>, taskId: string")]
pub fn session_is_forgotten(
    session: &External<SessionHandle>,
    task_id: String,
) -> napi::Result<bool> {
    guard(|| Ok(session.machine.state().is_forgotten(&task_id)))
}

/// The session's counters as JSON text.
#[napi(ts_args_type = "session: ExternalObject<'Session'>")]
pub fn session_stats(session: &External<SessionHandle>) -> napi::Result<String> {
    guard(|| {
        let s = session.machine.stats();
        Ok(json!({
            "delivered": s.delivered,
            "duplicates": s.duplicates,
            "held": s.held,
            "held_dropped": s.held_dropped,
            "held_now": s.held_now,
            "transmitted": s.transmitted,
            "implied_acked": s.implied_acked,
            "probes": s.probes,
        })
        .to_string())
    })
}

fn runner(hello: Hello, config: SessionConfig, state: Option<ConnectionState>) -> Box<dyn Machine> {
    match state {
        Some(s) => Box::new(RunnerSession::with_state(hello, config, s)),
        None => Box::new(RunnerSession::new(hello, config)),
    }
}
