//! What a hub persists, and when: the rows of one runner's hub session, how they rebuild
//! a [`HubSession`] on a takeover, the writes each step needs before its outputs may be
//! performed, the lease timing ([`Lease`]), and the store's errors. SQL is the host's;
//! every decision is here, so every hub store (PostgreSQL in the Python package, or any
//! other) writes the same rows at the same moments.
//!
//! # The rows of one runner
//!
//! [`RunnerRows`] — keyed by the runner id (the id the hub's door gave the runner's
//! socket, see [`HubHost`](crate::host::HubHost)):
//!
//! | table | key | columns | what it is |
//! |---|---|---|---|
//! | tasks | `task_id` | `next_seq`, `assigned_attempt`, `forgotten` | the hub's command stream of the task: the next seq it stamps (1: none stamped yet), the attempt of its latest `task.assign` (0: none), and whether the task is forgotten (a tombstone: positions kept so that late frames are duplicates) |
//! | inbound | `task_id`, `attempt` | `through` | the runner's stream `(task, attempt)` is applied (committed) through seq `through` |
//! | commands | `task_id`, `seq` | `frame` | an unacknowledged command, byte for byte as sent |
//!
//! and one lease row per runner (`owner`, `epoch`, `expires_at`), which is the store's:
//! see *Fencing* below. Row order carries no meaning. [`HubSession::rows`] gives the rows
//! of a live session, [`HubSession::from_rows`] rebuilds one; the rows of the rebuilt
//! session equal the rows it was built from, and it decides every later frame, resume
//! and acknowledgement as the live one would have after a reconnect (a property test in
//! `core/tests/store_rows.rs`). Frames held ahead of a gap and positions received but not
//! yet applied are not rows: the runner still holds those frames (nothing was
//! acknowledged) and sends them again.
//!
//! # What is written when
//!
//! 1. **Takeover, on every new socket of a runner** (before its `hello` is read): one
//!    transaction raises the lease's epoch (`epoch + 1`, owner = this hub, expiry = the
//!    database's clock + [`LeaseConfig::lease_ms`]) and reads the runner's rows; the hub
//!    builds the runner's link over [`HubSession::from_rows`] (with
//!    [`durable_acks`](crate::session::SessionConfig::durable_acks) on) and a
//!    [`RowTracker`] over the same rows. In-memory state is never trusted across sockets:
//!    another hub may have served the runner in between.
//! 2. **After every input or `send`**, before performing any output of that step: the
//!    [`RowTracker::writes`] of the session commit (commands durable before they are
//!    sent; acknowledged commands pruned; task numbering), then the outputs go out.
//! 3. **Every delivered progress frame or report** `(task, attempt, seq)` is applied in
//!    one transaction: the fencing check; the conditional update of its inbound row
//!    `(task, attempt)` (attempt 0 for a runner that sends none): `through := seq` where
//!    `through < seq` (a missing row counts as 0 and is inserted) — zero rows means the
//!    frame was applied before (a replay, possibly to another hub) and its effect is
//!    skipped; the application's effect; commit; only then
//!    [`Input::Confirm`](crate::session::Input::Confirm) — so no acknowledgement ever
//!    covers an uncommitted frame. A stream's seqs are delivered in order, and a declared
//!    gap ([`Event::InboundGap`](crate::session::Event::InboundGap)) makes `through` jump,
//!    which the same rule accepts. Several frames may share one transaction (each keeps
//!    its own conditional update).
//! 4. **Lease renewal**, when [`Lease`] says [`LeaseOutput::Renew`]: one statement
//!    extends every lease this hub owns (database clock). On [`LeaseOutput::Expiring`]
//!    the hub stops confirming and closes every runner socket ([`close_for`]
//!    `lease_expired`) before its leases can have expired.
//!
//! # Fencing
//!
//! Every write transaction first checks, in the database, that this hub still owns the
//! runner: the lease row with this hub as owner, the epoch it took, and an expiry after
//! the database's `now()` — an update of that row, so a takeover's update waits for the
//! transaction (or the transaction sees the new epoch). 0 rows: [`StoreError::Fenced`];
//! the transaction rolls back and the hub closes that runner's socket ([`close_for`]).

mod json;
mod lease;

pub use lease::{Lease, LeaseConfig, LeaseInput, LeaseOutput};

use std::collections::HashMap;

use compact_str::CompactString;

use crate::sequencing::snapshot::{Body, InDto, OutDto, TaskDto, TombDto};
use crate::sequencing::{ConnectionState, Role};
use crate::session::{HubSession, Machine, SessionConfig};

/// The tasks row of one task (see the [module docs](self)).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TaskRow {
    /// The task.
    pub task_id: String,
    /// The next command seq the hub stamps for the task (1: none stamped yet).
    pub next_seq: u64,
    /// The attempt of the task's latest `task.assign` (0: none).
    pub assigned_attempt: u64,
    /// The task is forgotten: no commands are kept, its positions remain.
    pub forgotten: bool,
}

/// The inbound row of one runner stream `(task, attempt)`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct InboundRow {
    /// The task.
    pub task_id: String,
    /// The attempt (0: a runner that sends no attempt).
    pub attempt: u64,
    /// Applied (committed) through this seq.
    pub through: u64,
}

/// One unacknowledged command.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CommandRow {
    /// The task.
    pub task_id: String,
    /// The command's seq.
    pub seq: u64,
    /// The encoded frame, byte for byte as sent (replayed as is).
    pub frame: String,
}

/// Everything a store holds of one runner's hub session except its lease.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunnerRows {
    /// One row per known task.
    pub tasks: Vec<TaskRow>,
    /// One row per runner stream.
    pub inbound: Vec<InboundRow>,
    /// The unacknowledged commands.
    pub commands: Vec<CommandRow>,
}

impl RunnerRows {
    /// The same rows in a canonical order (by key), to compare sets of rows.
    pub fn sorted(mut self) -> Self {
        self.tasks.sort();
        self.inbound.sort();
        self.commands.sort();
        self
    }
}

/// One write a step needs before its outputs are performed (see [`RowTracker`]). Apply
/// them in order, in one transaction, after the fencing check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RowWrite {
    /// Insert or replace the task's row. Op name `put_task`.
    PutTask(TaskRow),
    /// Insert or replace the command `(task_id, seq)`. Op name `put_command`.
    PutCommand(CommandRow),
    /// Delete the task's commands with seq ≤ `through` (acknowledged, or re-stamped
    /// later). Op name `delete_commands`.
    DeleteCommands {
        /// The task.
        task_id: String,
        /// The highest seq deleted.
        through: u64,
    },
    /// Delete every row of the task (tasks, inbound, commands). Op name `delete_task`.
    DeleteTask {
        /// The task.
        task_id: String,
    },
}

impl RowWrite {
    /// The op's stable name: `put_task`, `put_command`, `delete_commands`, `delete_task`.
    pub fn op(&self) -> &'static str {
        match self {
            RowWrite::PutTask(_) => "put_task",
            RowWrite::PutCommand(_) => "put_command",
            RowWrite::DeleteCommands { .. } => "delete_commands",
            RowWrite::DeleteTask { .. } => "delete_task",
        }
    }
}

/// A store's error, with a stable code (kind `store` in the error table).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// Rows that do not make a hub session (a stream out of its bounds, a command that is
    /// not one of the task's, a seq above 2^53 − 1, …). Code `invalid_rows`.
    #[error("invalid rows: {message}")]
    InvalidRows {
        /// What is wrong.
        message: String,
    },
    /// The database refused a write: another hub took the runner over (a higher epoch),
    /// or this hub's lease expired. Code `fenced`.
    #[error("fenced: runner {runner_id:?} is no longer owned by this hub at epoch {epoch}")]
    Fenced {
        /// The runner.
        runner_id: String,
        /// The epoch this hub held.
        epoch: u64,
    },
    /// The store could not be reached or failed the transaction. Code
    /// `store_unavailable`.
    #[error("store unavailable: {message}")]
    Unavailable {
        /// What failed (never a secret, such as a password in a DSN).
        message: String,
    },
    /// This hub could not renew its lease in time and stopped serving its runners. Code
    /// `lease_expired`.
    #[error("the hub's lease could not be renewed in time")]
    LeaseExpired,
    /// A per-runner bound of the store (e.g. its tasks or kept commands) was reached.
    /// Code `store_limit`.
    #[error("store limit: {message}")]
    Limit {
        /// Which bound, and its value.
        message: String,
    },
}

impl StoreError {
    /// Stable snake_case code.
    pub fn code(&self) -> &'static str {
        match self {
            StoreError::InvalidRows { .. } => "invalid_rows",
            StoreError::Fenced { .. } => "fenced",
            StoreError::Unavailable { .. } => "store_unavailable",
            StoreError::LeaseExpired => "lease_expired",
            StoreError::Limit { .. } => "store_limit",
        }
    }
}

/// WebSocket close code of a runner socket a hub closes because of its store: the runner
/// reconnects (possibly to another hub) and resumes from the committed rows.
pub const CLOSE_STORE: u16 = 1012;

/// The close (code, reason) for a runner socket whose hub hit the store error `code`
/// (`fenced`, `store_unavailable`, `lease_expired`, `store_limit`; any other code closes
/// as `store_unavailable`). Code [`CLOSE_STORE`] (1012, "service restart": try again),
/// the reason is the error's code.
pub fn close_for(code: &str) -> (u16, &'static str) {
    let reason = match code {
        "fenced" => "fenced",
        "lease_expired" => "lease_expired",
        "store_limit" => "store_limit",
        _ => "store_unavailable",
    };
    (CLOSE_STORE, reason)
}

impl HubSession {
    /// The rows a store holds for this session (see the [module docs](self)). An inbound
    /// stream's `through` is what the host confirmed (durable acknowledgements), or its
    /// watermark without them.
    pub fn rows(&self) -> RunnerRows {
        let state = self.state();
        let mut rows = RunnerRows::default();
        for (task, channel) in state.tasks() {
            let out = channel
                .outbound()
                .find(|(a, _)| a.is_none())
                .map(|(_, l)| l);
            rows.tasks.push(TaskRow {
                task_id: task.to_owned(),
                next_seq: out.map_or(1, |l| l.next_seq()),
                assigned_attempt: channel.assigned_attempt,
                forgotten: false,
            });
            if let Some(l) = out {
                rows.commands.extend(l.kept().map(|f| CommandRow {
                    task_id: task.to_owned(),
                    seq: f.seq,
                    frame: f.frame.clone(),
                }));
            }
            for (attempt, _) in channel.inbound() {
                if let Some(through) = self.applied_through(task, attempt) {
                    rows.inbound.push(InboundRow {
                        task_id: task.to_owned(),
                        attempt: attempt.unwrap_or(0),
                        through,
                    });
                }
            }
        }
        for (task, tomb) in state.tombstones() {
            let last = tomb
                .outbound
                .iter()
                .find(|(a, _)| a.is_none())
                .map_or(0, |(_, s)| *s);
            rows.tasks.push(TaskRow {
                task_id: task.to_owned(),
                next_seq: last.saturating_add(1),
                assigned_attempt: 0,
                forgotten: true,
            });
            rows.inbound
                .extend(tomb.inbound.iter().map(|(a, w)| InboundRow {
                    task_id: task.to_owned(),
                    attempt: a.unwrap_or(0),
                    through: *w,
                }));
        }
        rows.sorted()
    }

    /// Rebuild a hub session from a store's rows (a takeover): the session's state holds
    /// exactly the rows, its kept commands are provisional until the runner's `hello`
    /// (as after a restore), and with durable acknowledgements every inbound position
    /// counts as confirmed (it was committed).
    ///
    /// # Errors
    /// [`StoreError::InvalidRows`]: a row that is not a hub's (a command that does not
    /// decode to its task and seq, a seq at or above its task's `next_seq`, a duplicate
    /// key, a row of an unknown task, a forgotten task with commands), or more streams,
    /// commands or tombstones than `config.sequencing` allows.
    pub fn from_rows(config: SessionConfig, rows: &RunnerRows) -> Result<Self, StoreError> {
        let state = state_from_rows(&config, rows)?;
        Ok(HubSession::with_state(config, state))
    }
}

fn invalid(message: impl Into<String>) -> StoreError {
    StoreError::InvalidRows {
        message: message.into(),
    }
}

/// The hub state the rows describe, with every check of a snapshot restore.
fn state_from_rows(
    config: &SessionConfig,
    rows: &RunnerRows,
) -> Result<ConnectionState, StoreError> {
    let mut tasks: Vec<TaskDto> = Vec::new();
    let mut forgotten: Vec<TombDto> = Vec::new();
    let mut index: HashMap<&str, (bool, usize)> = HashMap::new();
    let mut sorted_tasks: Vec<&TaskRow> = rows.tasks.iter().collect();
    sorted_tasks.sort();
    for t in sorted_tasks {
        if index.contains_key(t.task_id.as_str()) {
            return Err(invalid(format!("duplicate task row {:?}", t.task_id)));
        }
        if t.next_seq == 0 {
            return Err(invalid(format!("next_seq of {:?} must be ≥ 1", t.task_id)));
        }
        if t.forgotten {
            index.insert(&t.task_id, (true, forgotten.len()));
            forgotten.push(TombDto {
                task_id: t.task_id.clone(),
                outbound: if t.next_seq > 1 {
                    vec![(None, t.next_seq.saturating_sub(1))]
                } else {
                    Vec::new()
                },
                inbound: Vec::new(),
            });
        } else {
            index.insert(&t.task_id, (false, tasks.len()));
            tasks.push(TaskDto {
                task_id: t.task_id.clone(),
                outbound: if t.next_seq > 1 {
                    vec![OutDto {
                        attempt: None,
                        next_seq: t.next_seq,
                        frames: Vec::new(),
                        unconfirmed_from: None,
                    }]
                } else {
                    Vec::new()
                },
                inbound: Vec::new(),
                assigned_attempt: t.assigned_attempt,
            });
        }
    }
    let mut inbound: Vec<&InboundRow> = rows.inbound.iter().collect();
    inbound.sort();
    for i in inbound {
        let unknown = || invalid(format!("inbound row of unknown task {:?}", i.task_id));
        match index.get(i.task_id.as_str()) {
            Some((true, n)) => forgotten
                .get_mut(*n)
                .ok_or_else(unknown)?
                .inbound
                .push((Some(i.attempt), i.through)),
            Some((false, n)) => tasks.get_mut(*n).ok_or_else(unknown)?.inbound.push(InDto {
                attempt: Some(i.attempt),
                watermark: i.through,
                ahead: Vec::new(),
            }),
            None => return Err(unknown()),
        }
    }
    let mut commands: Vec<&CommandRow> = rows.commands.iter().collect();
    commands.sort();
    for c in commands {
        match index.get(c.task_id.as_str()) {
            None => return Err(invalid(format!("command of unknown task {:?}", c.task_id))),
            Some((true, _)) => {
                return Err(invalid(format!(
                    "command of forgotten task {:?}",
                    c.task_id
                )))
            }
            Some((false, n)) => match tasks.get_mut(*n).and_then(|t| t.outbound.first_mut()) {
                Some(out) => out.frames.push((c.seq, c.frame.clone())),
                None => {
                    return Err(invalid(format!(
                        "command {} of {:?} at or above its next_seq",
                        c.seq, c.task_id
                    )))
                }
            },
        }
    }
    let body = Body {
        role: Role::Hub.as_str().into(),
        config: config.sequencing.to_value(),
        tasks,
        forgotten,
    };
    ConnectionState::from_body(body).map_err(|e| match e {
        crate::sequencing::SnapshotError::Corrupt { message } => invalid(message),
        other => invalid(other.to_string()),
    })
}

/// What a store already holds of one runner (the baseline [`RowTracker`] diffs against).
#[derive(Debug, Clone, Default)]
struct Held {
    tasks: HashMap<CompactString, TaskRow>,
    /// Per task: seq → frame of its kept commands.
    commands: HashMap<CompactString, std::collections::BTreeMap<u64, String>>,
}

impl Held {
    fn of(rows: &RunnerRows) -> Self {
        let mut held = Held::default();
        for t in &rows.tasks {
            held.tasks
                .insert(CompactString::from(&t.task_id), t.clone());
        }
        for c in &rows.commands {
            held.commands
                .entry(CompactString::from(&c.task_id))
                .or_default()
                .insert(c.seq, c.frame.clone());
        }
        held
    }
}

/// Which rows a step changed: the writes to commit before the step's outputs are
/// performed (see the [module docs](self), *What is written when*).
///
/// It holds what the store holds (the rows it was built over plus every committed
/// batch) and compares the session with it: [`writes`](Self::writes) lists the
/// difference and remembers it as pending; [`committed`](Self::committed) makes it held;
/// [`failed`](Self::failed) forgets it (the next `writes` lists it again). Inbound rows are
/// never in it: the apply transaction writes them (see *What is written when*, 3).
#[derive(Debug, Clone, Default)]
pub struct RowTracker {
    held: Held,
    pending: Option<Held>,
}

impl RowTracker {
    /// A tracker over the rows the store holds (those the session was built from; empty
    /// for a runner the store has never seen).
    pub fn new(rows: &RunnerRows) -> Self {
        Self {
            held: Held::of(rows),
            pending: None,
        }
    }

    /// The writes that make the store hold `session`'s tasks and commands, in the order
    /// to apply them. Pending writes of an earlier call that was neither committed nor
    /// failed are included again (the list is always relative to what is held).
    pub fn writes(&mut self, session: &HubSession) -> Vec<RowWrite> {
        self.pending = None;
        let mut out = Vec::new();
        let rows = session.rows();
        // Tasks that are gone from the session (evicted tombstones, pruned tasks).
        let live: std::collections::HashSet<&str> =
            rows.tasks.iter().map(|t| t.task_id.as_str()).collect();
        let mut gone: Vec<CompactString> = self
            .held
            .tasks
            .keys()
            .filter(|k| !live.contains(k.as_str()))
            .cloned()
            .collect();
        gone.sort();
        for task in gone {
            out.push(RowWrite::DeleteTask {
                task_id: task.to_string(),
            });
        }
        let mut by_task: HashMap<&str, std::collections::BTreeMap<u64, &str>> = HashMap::new();
        for c in &rows.commands {
            by_task
                .entry(c.task_id.as_str())
                .or_default()
                .insert(c.seq, c.frame.as_str());
        }
        let empty = std::collections::BTreeMap::new();
        for t in &rows.tasks {
            let key = CompactString::from(&t.task_id);
            if self.held.tasks.get(&key) != Some(t) {
                out.push(RowWrite::PutTask(t.clone()));
            }
            let now_cmds = by_task.get(t.task_id.as_str()).unwrap_or(&empty);
            let held_cmds = self.held.commands.get(&key);
            let removed_through = held_cmds
                .into_iter()
                .flatten()
                .filter(|(s, _)| !now_cmds.contains_key(s))
                .map(|(s, _)| *s)
                .max();
            if let Some(through) = removed_through {
                out.push(RowWrite::DeleteCommands {
                    task_id: t.task_id.clone(),
                    through,
                });
            }
            for (seq, frame) in now_cmds {
                let same = held_cmds.and_then(|h| h.get(seq)).map(String::as_str) == Some(*frame);
                if !same || removed_through.is_some_and(|r| *seq <= r) {
                    out.push(RowWrite::PutCommand(CommandRow {
                        task_id: t.task_id.clone(),
                        seq: *seq,
                        frame: (*frame).to_owned(),
                    }));
                }
            }
        }
        let next = Held::of(&RunnerRows {
            tasks: rows.tasks,
            inbound: Vec::new(),
            commands: rows.commands,
        });
        self.pending = Some(next);
        out
    }

    /// The writes of the last [`writes`](Self::writes) committed: the store holds them.
    pub fn committed(&mut self) {
        if let Some(p) = self.pending.take() {
            self.held = p;
        }
    }

    /// The writes of the last [`writes`](Self::writes) were rolled back: the next call
    /// lists them again.
    pub fn failed(&mut self) {
        self.pending = None;
    }
}
