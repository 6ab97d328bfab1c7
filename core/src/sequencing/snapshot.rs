//! Versioned snapshot bytes of a [`ConnectionState`].

use std::collections::VecDeque;

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::error::SnapshotError;
use super::inbox::InboxTracker;
use super::outbox::{KeptFrame, Numbering, OutboxLog};
use super::state::{ConnectionState, PeerPositions, TaskChannel, TaskEntry, Tombstone};
use super::{Role, SequencingConfig};
use crate::wire::{self, MessageType};

/// First bytes of every snapshot: `stapel-seq-snapshot/`, followed by the decimal format
/// version and a `\n`, then the JSON body.
pub const SNAPSHOT_MAGIC: &[u8] = b"stapel-seq-snapshot/";

/// The format version this build writes and reads.
const VERSION: &str = "1";

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Body {
    pub(crate) role: String,
    pub(crate) config: Value,
    pub(crate) tasks: Vec<TaskDto>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) forgotten: Vec<TombDto>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TombDto {
    pub(crate) task_id: String,
    pub(crate) outbound: Vec<(Option<u64>, u64)>,
    pub(crate) inbound: Vec<(Option<u64>, u64)>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TaskDto {
    pub(crate) task_id: String,
    pub(crate) outbound: Vec<OutDto>,
    pub(crate) inbound: Vec<InDto>,
    /// Hub: the attempt of the task's latest assignment (absent when 0).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub(crate) assigned_attempt: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct OutDto {
    pub(crate) attempt: Option<u64>,
    pub(crate) next_seq: u64,
    pub(crate) frames: Vec<(u64, String)>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) unconfirmed_from: Option<u64>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct InDto {
    pub(crate) attempt: Option<u64>,
    pub(crate) watermark: u64,
    pub(crate) ahead: Vec<u64>,
}

fn corrupt(message: impl Into<String>) -> SnapshotError {
    SnapshotError::Corrupt {
        message: message.into(),
    }
}

impl ConnectionState {
    /// Serialise the whole state (role, bounds, every stream in both directions, every
    /// kept frame) to versioned bytes.
    ///
    /// Format, version 1: the ASCII header `stapel-seq-snapshot/1\n`, then one compact
    /// JSON object:
    ///
    /// ```text
    /// {"role":"hub"|"runner",
    ///  "config":{"inbound_window":…,"max_outbox_frames":…,"max_outbox_bytes":…,"max_streams":…},
    ///  "tasks":[{"task_id":"T-1",
    ///            "outbound":[{"attempt":null|N,"next_seq":N,"frames":[[seq,"<frame>"],…]}],
    ///            "inbound":[{"attempt":null|N,"watermark":N,"ahead":[seq,…]}]}],
    ///  "forgotten":[{"task_id":"T-0","outbound":[[null|N,last_seq],…],"inbound":[[null|N,watermark],…]}]}
    /// ```
    ///
    /// An outbound stream carries `"unconfirmed_from":N` only when it holds provisional
    /// frames (seqs `N..next_seq`, see "Provisional numbering"); `forgotten` (tombstones,
    /// oldest first) is omitted when empty.
    ///
    /// Tasks and streams appear in the state's order; kept frames are the exact encoded
    /// frames. [`restore`](Self::restore) rejects any other version.
    pub fn snapshot(&self) -> Vec<u8> {
        let tasks = self
            .tasks
            .iter()
            .filter_map(|(task, e)| match e {
                TaskEntry::Live(c) => Some((task, c)),
                TaskEntry::Forgotten(_) => None,
            })
            .map(|(task, c)| TaskDto {
                task_id: task.clone(),
                outbound: c
                    .outbound
                    .iter()
                    .map(|(a, log)| OutDto {
                        attempt: *a,
                        next_seq: log.next_seq(),
                        frames: log.kept().map(|f| (f.seq, f.frame.clone())).collect(),
                        unconfirmed_from: (log.unconfirmed_from() < log.next_seq())
                            .then(|| log.unconfirmed_from()),
                    })
                    .collect(),
                inbound: c
                    .inbound
                    .iter()
                    .map(|(a, t)| InDto {
                        attempt: *a,
                        watermark: t.watermark(),
                        ahead: t.ahead().collect(),
                    })
                    .collect(),
                assigned_attempt: c.assigned_attempt,
            })
            .collect();
        let forgotten = self
            .tasks
            .iter()
            .filter_map(|(task, e)| match e {
                TaskEntry::Forgotten(t) => Some((task, t)),
                TaskEntry::Live(_) => None,
            })
            .map(|(task, t)| TombDto {
                task_id: task.clone(),
                outbound: t.outbound.clone(),
                inbound: t.inbound.clone(),
            })
            .collect();
        let body = Body {
            role: self.role.as_str().into(),
            config: self.config.to_value(),
            tasks,
            forgotten,
        };
        let mut out = Vec::with_capacity(256);
        out.extend_from_slice(SNAPSHOT_MAGIC);
        out.extend_from_slice(VERSION.as_bytes());
        out.push(b'\n');
        // Serialising plain data into a Vec cannot fail.
        let _ = serde_json::to_writer(&mut out, &body);
        out
    }

    /// Restore a state from [`snapshot`](Self::snapshot) bytes.
    ///
    /// # Errors
    /// `not_a_snapshot` (bad magic), `unsupported_snapshot_version`, `corrupt_snapshot`
    /// (malformed JSON, unknown fields, or an inconsistent stream: duplicate task or
    /// stream, kept seqs not ascending or not below `next_seq`, a kept frame that does
    /// not decode to its stream and seq or is of a type or attempt that does not belong to
    /// the stream (by role and direction), an `ahead` seq outside
    /// `(watermark, watermark + inbound_window]`, a seq above 2^53 − 1 (`next_seq` above
    /// 2^53), more streams, kept frames or tombstones than the configured bounds allow,
    /// or kept bytes above `max_outbox_bytes` plus 16 bytes per kept frame).
    ///
    /// Provisional frames stay provisional (see "Provisional numbering"); to treat a
    /// possibly stale snapshot safely, call [`mark_unconfirmed`](Self::mark_unconfirmed)
    /// before emitting (the session machines do).
    pub fn restore(bytes: &[u8]) -> Result<Self, SnapshotError> {
        let rest = bytes
            .strip_prefix(SNAPSHOT_MAGIC)
            .ok_or(SnapshotError::NotASnapshot)?;
        let nl = memchr::memchr(b'\n', rest).ok_or(SnapshotError::NotASnapshot)?;
        let (version, body) = rest.split_at(nl);
        if version != VERSION.as_bytes() {
            return Err(SnapshotError::UnsupportedVersion {
                found: String::from_utf8_lossy(version).into_owned(),
            });
        }
        // `body` starts with the newline found above.
        let body = body.get(1..).unwrap_or_default();
        let body: Body = serde_json::from_slice(body).map_err(|e| corrupt(e.to_string()))?;
        Self::from_body(body)
    }

    /// A state from a snapshot body, with every check of [`restore`](Self::restore).
    pub(crate) fn from_body(body: Body) -> Result<Self, SnapshotError> {
        let role = Role::from_name(&body.role)
            .ok_or_else(|| corrupt(format!("unknown role {:?}", body.role)))?;
        let config_obj = body
            .config
            .as_object()
            .ok_or_else(|| corrupt("config must be an object"))?;
        let config =
            SequencingConfig::from_object(config_obj).map_err(|e| corrupt(e.to_string()))?;
        let mut state = ConnectionState::with_config(role, config);
        let mut tasks: IndexMap<String, TaskEntry> = IndexMap::new();
        for t in body.tasks {
            if t.task_id.is_empty() {
                return Err(corrupt("empty task_id"));
            }
            if t.assigned_attempt > wire::MAX_SAFE_INTEGER
                || (t.assigned_attempt > 0 && role != Role::Hub)
            {
                return Err(corrupt(format!(
                    "assigned_attempt of {:?} is not a hub's assignment attempt",
                    t.task_id
                )));
            }
            let mut channel = TaskChannel {
                assigned_attempt: t.assigned_attempt,
                ..TaskChannel::default()
            };
            for o in t.outbound {
                if channel.outbound.iter().any(|(a, _)| *a == o.attempt) {
                    return Err(corrupt(format!(
                        "duplicate outbound stream in {:?}",
                        t.task_id
                    )));
                }
                if o.next_seq == 0 || o.next_seq > wire::MAX_SAFE_INTEGER + 1 {
                    return Err(corrupt("next_seq must be in 1..=2^53"));
                }
                let want_attempt = (role == Role::Runner) == o.attempt.is_some();
                if !want_attempt || o.attempt.is_some_and(|a| a > wire::MAX_SAFE_INTEGER) {
                    return Err(corrupt(format!(
                        "outbound stream {:?} attempt {:?} is not a {role} stream",
                        t.task_id, o.attempt
                    )));
                }

                let mut kept = VecDeque::with_capacity(o.frames.len());
                let mut prev = 0;
                for (seq, frame) in o.frames {
                    if seq <= prev || seq >= o.next_seq {
                        return Err(corrupt(format!(
                            "kept seq {seq} out of order in {:?}",
                            t.task_id
                        )));
                    }
                    prev = seq;
                    let msg = wire::decode(frame.as_bytes(), false)
                        .map_err(|e| corrupt(format!("kept frame does not decode: {e}")))?;
                    if msg.task_id() != Some(t.task_id.as_str()) || msg.seq() != Some(seq) {
                        return Err(corrupt(format!(
                            "kept frame {seq} of {:?} names another stream",
                            t.task_id
                        )));
                    }
                    let is_command = matches!(
                        msg.message_type(),
                        MessageType::TaskAssign | MessageType::TaskCancel
                    );
                    let frame_attempt = (!is_command).then(|| msg.attempt().unwrap_or(0));
                    if !msg.message_type().is_sequenced()
                        || is_command != (role == Role::Hub)
                        || frame_attempt != o.attempt
                    {
                        return Err(corrupt(format!(
                            "kept frame {seq} of {:?} ({}) does not belong to a {role} stream of attempt {:?}",
                            t.task_id,
                            msg.message_type(),
                            o.attempt
                        )));
                    }
                    state.kept_frames = state.kept_frames.saturating_add(1);
                    state.kept_bytes = state.kept_bytes.saturating_add(frame.len());
                    kept.push_back(KeptFrame { seq, frame });
                }
                state.outbound_streams = state.outbound_streams.saturating_add(1);
                let numbering = match o.unconfirmed_from {
                    None => Numbering::Final,
                    Some(u) if u == 0 || u > o.next_seq => {
                        return Err(corrupt("unconfirmed_from must be in 1..=next_seq"));
                    }
                    Some(from) => {
                        state.positions = PeerPositions::Unknown;
                        Numbering::Provisional { from }
                    }
                };
                channel.outbound.push((
                    o.attempt,
                    OutboxLog::from_parts(o.next_seq, kept, numbering),
                ));
            }
            for i in t.inbound {
                if channel.inbound.iter().any(|(a, _)| *a == i.attempt) {
                    return Err(corrupt(format!(
                        "duplicate inbound stream in {:?}",
                        t.task_id
                    )));
                }
                let window = state.config.inbound_window;
                let want_attempt = (role == Role::Hub) == i.attempt.is_some();
                if !want_attempt || i.attempt.is_some_and(|a| a > wire::MAX_SAFE_INTEGER) {
                    return Err(corrupt(format!(
                        "inbound stream {:?} attempt {:?} is not a {role} stream",
                        t.task_id, i.attempt
                    )));
                }
                if i.watermark > wire::MAX_SAFE_INTEGER
                    || i.ahead.iter().any(|s| *s > wire::MAX_SAFE_INTEGER)
                {
                    return Err(corrupt(format!(
                        "inbound seq of {:?} above 2^53 - 1",
                        t.task_id
                    )));
                }
                if let Some(bad) = i
                    .ahead
                    .iter()
                    .find(|s| **s <= i.watermark || s.saturating_sub(i.watermark) > window)
                {
                    return Err(corrupt(format!(
                        "ahead seq {bad} of {:?} is outside the window above watermark {}",
                        t.task_id, i.watermark
                    )));
                }
                state.inbound_streams = state.inbound_streams.saturating_add(1);
                channel.inbound.push((
                    i.attempt,
                    InboxTracker::from_parts(i.watermark, i.ahead, state.config.inbound_window),
                ));
            }
            if tasks
                .insert(t.task_id.clone(), TaskEntry::Live(channel))
                .is_some()
            {
                return Err(corrupt(format!("duplicate task {:?}", t.task_id)));
            }
        }
        let c = &state.config;
        // Re-stamping may lengthen a kept frame by the digits of its new seq.
        let byte_slack = state.kept_frames.saturating_mul(16);
        if state.outbound_streams > c.max_streams
            || state.inbound_streams > c.max_streams
            || state.kept_frames > c.max_outbox_frames
            || state.kept_bytes > c.max_outbox_bytes.saturating_add(byte_slack)
            || body.forgotten.len() > c.max_tombstones
        {
            return Err(corrupt("the snapshot exceeds its configured bounds"));
        }
        for t in body.forgotten {
            if t.task_id.is_empty() || tasks.contains_key(&t.task_id) {
                return Err(corrupt(format!(
                    "tombstone {:?} is empty or names a live task",
                    t.task_id
                )));
            }
            let bad_out = t.outbound.iter().any(|(a, s)| {
                *s > wire::MAX_SAFE_INTEGER
                    || a.is_some_and(|a| a > wire::MAX_SAFE_INTEGER)
                    || (role == Role::Runner) != a.is_some()
            });
            let bad_in = t.inbound.iter().any(|(a, s)| {
                *s > wire::MAX_SAFE_INTEGER
                    || a.is_some_and(|a| a > wire::MAX_SAFE_INTEGER)
                    || (role == Role::Hub) != a.is_some()
            });
            if bad_out || bad_in {
                return Err(corrupt(format!(
                    "tombstone {:?} is inconsistent",
                    t.task_id
                )));
            }
            let tomb = Tombstone {
                outbound: t.outbound,
                inbound: t.inbound,
            };
            if tasks
                .insert(t.task_id.clone(), TaskEntry::Forgotten(tomb))
                .is_some()
            {
                return Err(corrupt(format!("duplicate tombstone {:?}", t.task_id)));
            }
            state.tombstones = state.tombstones.saturating_add(1);
        }
        state.tasks = tasks;
        state.prune_empty();
        Ok(state)
    }
}
