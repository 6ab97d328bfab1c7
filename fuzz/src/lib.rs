//! Helpers shared by the fuzz targets: a tiny reader over the fuzzer's bytes and the
//! session driver of `session_hub` / `session_runner`.

/// Reads structured choices from fuzzer bytes; exhausted input yields zeros.
pub struct Bytes<'a> {
    data: &'a [u8],
}

impl<'a> Bytes<'a> {
    /// A reader over `data`.
    pub fn new(data: &'a [u8]) -> Self {
        Self { data }
    }

    /// `true` when every byte was read.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// One byte (0 when exhausted).
    pub fn byte(&mut self) -> u8 {
        match self.data.split_first() {
            Some((b, rest)) => {
                self.data = rest;
                *b
            }
            None => 0,
        }
    }

    /// A little-endian u16.
    pub fn u16(&mut self) -> u16 {
        u16::from(self.byte()) | (u16::from(self.byte()) << 8)
    }

    /// Up to `max` bytes, length given by the next byte(s).
    pub fn chunk(&mut self, max: usize) -> &'a [u8] {
        let n = (self.u16() as usize) % (max + 1);
        let n = n.min(self.data.len());
        let (head, rest) = self.data.split_at(n);
        self.data = rest;
        head
    }

    /// Everything not read yet.
    pub fn rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.data)
    }
}

use std::collections::{BTreeMap, BTreeSet};

use stapel_runner_protocol::sequencing::ConnectionState;
use stapel_runner_protocol::session::{Event, Input, Machine, Output, SessionConfig};
use stapel_runner_protocol::wire::{
    Message, TaskAssign, TaskCancel, TaskProgress, TaskReportMessage,
};

/// Largest data chunk of one operation.
pub const MAX_CHUNK: usize = 4096;

/// A small session configuration, so bounds are reached quickly.
pub fn small_session_config() -> SessionConfig {
    let mut c = SessionConfig::default();
    c.sequencing.max_outbox_frames = 16;
    c.sequencing.max_outbox_bytes = 16 * 1024;
    c.sequencing.max_streams = 8;
    c.sequencing.inbound_window = 32;
    c.sequencing.max_tombstones = 4;
    c.max_held_frames = 8;
    c.max_held_bytes = 16 * 1024;
    c
}

/// Upper bound of [`ConnectionState::memory_footprint`] (and of a snapshot's length) for
/// `config` when no single input is larger than [`MAX_CHUNK`]: the kept frames, plus per
/// stream and per tombstone a task id (at most one chunk) and fixed overhead. Generous by
/// a factor of about two; unbounded growth crosses it within a few hundred steps.
pub fn state_bound(config: &SessionConfig) -> usize {
    let s = &config.sequencing;
    let per_stream = 2 * MAX_CHUNK + 1024 + 16 * usize::try_from(s.inbound_window).unwrap_or(0);
    let per_frame = 256;
    64 * 1024
        + 2 * s.max_outbox_bytes
        + s.max_outbox_frames * per_frame
        + (2 * s.max_streams + s.max_tombstones) * per_stream
}

/// The delivered-seq log of the application: per stream, the last seq delivered.
type Delivered = BTreeMap<(String, Option<u64>), u64>;

/// Drive a session machine with operations read from `b`: connect, disconnect, bytes,
/// frames, timeouts, time steps, sends, checkpoints, restarts (from the current state or
/// from an older checkpoint) and forgotten tasks. `make` builds the machine over a
/// (restored) state, as a host does after a restart.
///
/// Checks after every step:
///
/// * nothing is delivered twice: per stream, delivered seqs strictly increase — across
///   restarts too. A restart from the current state keeps the application's log; one
///   from an older checkpoint rolls the log back with the state (the application
///   persisted both together), so what is delivered again is what the checkpoint had not
///   seen. A forgotten task whose tombstone was evicted is unknown again (documented):
///   its log entry is dropped then;
/// * a timeout never lies in the past: after an input at `now` the next deadline is
///   `None` or later than `now` (the timers run after every input, so a deadline at or
///   before `now` would make the host spin);
/// * bounded memory: kept frames and bytes, streams, tombstones, held frames and the
///   state's estimated footprint stay within the configuration's bounds after every
///   step, and so does the length of every snapshot taken (checkpoints, restarts, the
///   final state);
/// * a snapshot restores to a state whose snapshot is the same bytes.
pub fn drive_session<M: Machine>(
    make: impl Fn(ConnectionState) -> M,
    config: &SessionConfig,
    b: &mut Bytes<'_>,
    hub: bool,
) {
    let mut m = make(ConnectionState::with_config(
        if hub {
            stapel_runner_protocol::sequencing::Role::Hub
        } else {
            stapel_runner_protocol::sequencing::Role::Runner
        },
        config.sequencing.clone(),
    ));
    let bound = state_bound(config);
    let mut now: u64 = 0;
    let mut last: Delivered = BTreeMap::new();
    let mut checkpoint: Option<(Vec<u8>, Delivered, BTreeSet<String>)> = None;
    let mut forgotten: BTreeSet<String> = BTreeSet::new();
    let mut steps = 0;
    while !b.is_empty() && steps < 128 {
        steps += 1;
        let op = b.byte() % 12;
        let mut input_given = true;
        let result = match op {
            0 => m.handle_input(now, Input::Connected),
            1 => m.handle_input(now, Input::Disconnected),
            2 => m.handle_input(now, Input::Bytes(b.chunk(MAX_CHUNK).to_vec())),
            3 => {
                let text = String::from_utf8_lossy(b.chunk(MAX_CHUNK)).into_owned();
                m.handle_input(now, Input::Frame(text))
            }
            4 => {
                if let Some(t) = m.poll_timeout() {
                    now = now.max(t);
                }
                m.handle_input(now, Input::Timeout)
            }
            5 => {
                now = now.saturating_add(u64::from(b.u16()) * 16);
                input_given = false;
                Ok(())
            }
            6 | 7 => {
                let task = format!("t{}", b.byte() % 4);
                let k = b.byte();
                let msg = match (hub, k % 4) {
                    (true, 3) => Message::TaskCancel(TaskCancel::new(task, "stop")),
                    (true, _) => {
                        let mut a =
                            TaskAssign::new(Default::default(), "coder", Default::default());
                        a.task_id = task;
                        a.attempt = u64::from(k % 3);
                        Message::TaskAssign(a)
                    }
                    (false, 3) => {
                        let mut report = stapel_runner_protocol::json::Object::new();
                        report.insert("task_id", task.as_str());
                        let mut r = TaskReportMessage::new(report);
                        r.attempt = u64::from(k % 3);
                        Message::TaskReport(r)
                    }
                    (false, _) => {
                        let mut p = TaskProgress::new(task, "log", Default::default());
                        p.attempt = u64::from(k % 3);
                        Message::TaskProgress(p)
                    }
                };
                m.send(now, msg).map(|_| ())
            }
            8 => {
                // Checkpoint: the host persists the state with the application's log.
                checkpoint = Some((m.state().snapshot(), last.clone(), forgotten.clone()));
                input_given = false;
                Ok(())
            }
            9 => {
                // Restart: from the current state (persisted every step) or from the
                // last checkpoint (a stale snapshot).
                let (snap, log, gone) = match (b.byte() % 2, &checkpoint) {
                    (1, Some(c)) => c.clone(),
                    _ => (m.state().snapshot(), last.clone(), forgotten.clone()),
                };
                let state = ConnectionState::restore(&snap).expect("an own snapshot restores");
                assert_eq!(
                    state.snapshot(),
                    snap,
                    "snapshot → restore → snapshot differs"
                );
                m = make(state);
                last = log;
                forgotten = gone;
                Ok(())
            }
            10 => {
                let task = format!("t{}", b.byte() % 4);
                if m.state_mut().forget_task(&task) {
                    forgotten.insert(task);
                }
                input_given = false;
                Ok(())
            }
            _ => {
                // A frame from a tiny structured alphabet of sequenced messages, so
                // replays, duplicates and gaps happen often.
                let task = format!("t{}", b.byte() % 4);
                let seq = u64::from(b.byte() % 40);
                let attempt = u64::from(b.byte() % 3);
                let frame = if hub {
                    format!(
                        r#"{{"schema_version":1,"type":"task.progress","task_id":"{task}","seq":{seq},"attempt":{attempt},"kind":"log","payload":{{}}}}"#
                    )
                } else {
                    format!(
                        r#"{{"schema_version":1,"type":"task.cancel","task_id":"{task}","seq":{seq},"reason":"r"}}"#
                    )
                };
                m.handle_input(now, Input::Frame(frame))
            }
        };
        let _ = result;
        while let Some(out) = m.poll_output() {
            if let Output::Event(Event::Received(msg)) = out {
                let key = (
                    msg.task_id().unwrap_or_default().to_owned(),
                    if hub { msg.attempt() } else { None },
                );
                let seq = msg.seq().expect("delivered messages are sequenced");
                if let Some(prev) = last.insert(key.clone(), seq) {
                    assert!(seq > prev, "{key:?}: seq {seq} delivered after {prev}");
                }
            }
        }
        // A forgotten task whose tombstone was evicted is unknown again: its frames start
        // a fresh stream (documented on `forget_task`). A revived one keeps its numbering.
        forgotten.retain(|task| {
            if m.state().is_forgotten(task) {
                return true;
            }
            if !m.state().tasks().any(|(t, _)| t == task) {
                last.retain(|(t, _), _| t != task);
            }
            false
        });
        if input_given {
            if let Some(t) = m.poll_timeout() {
                assert!(t > now, "deadline {t} is not after the input's time {now}");
            }
        }
        let s = m.state();
        assert!(s.outbox_frames() <= config.sequencing.max_outbox_frames);
        assert!(s.outbox_bytes() <= config.sequencing.max_outbox_bytes);
        let (o, i) = s.stream_counts();
        assert!(o <= config.sequencing.max_streams && i <= config.sequencing.max_streams);
        assert!(s.forgotten_count() <= config.sequencing.max_tombstones);
        assert!(m.stats().held_now <= config.max_held_frames);
        let footprint = s.memory_footprint();
        assert!(
            footprint <= bound,
            "state footprint {footprint} over {bound}"
        );
        if let Some((snap, _, _)) = &checkpoint {
            assert!(
                snap.len() <= bound,
                "snapshot of {} bytes over {bound}",
                snap.len()
            );
        }
    }
    let snap = m.state().snapshot();
    assert!(
        snap.len() <= bound,
        "snapshot of {} bytes over {bound}",
        snap.len()
    );
    let state = ConnectionState::restore(&snap).expect("an own snapshot restores");
    assert_eq!(
        state.snapshot(),
        snap,
        "snapshot → restore → snapshot differs"
    );
}
