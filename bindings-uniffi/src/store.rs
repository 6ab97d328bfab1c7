//! What a hub persists, and when (the core's `store` module): the rows of one runner's
//! hub session (`RunnerRows`), `HubSession.fromRows` / `HubLink.fromRows` (a takeover),
//! `RowTracker` (the writes a step needs before its outputs go out), the `Lease` timing
//! machine and `closeFor`. SQL is the host's; every decision is the core's, this module
//! converts types.

use std::sync::{Arc, Mutex, MutexGuard};

use stapel_runner_protocol::link as core_link;
use stapel_runner_protocol::session::HubSession as CoreHub;
use stapel_runner_protocol::store as core_store;

use crate::errors::{state, ProtocolError};
use crate::jsontext::parse_serde;
use crate::link::{link_config, HubLink};
use crate::session::{config as session_config, HubSession};

/// The tasks row of one task: the hub's command stream of the task.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct TaskRow {
    /// The task.
    pub task_id: String,
    /// The next command seq the hub stamps for the task (1: none stamped yet).
    pub next_seq: u64,
    /// The attempt of the task's latest `task.assign` (0: none).
    pub assigned_attempt: u64,
    /// The task is forgotten (a tombstone): no commands are kept, its positions remain.
    pub forgotten: bool,
}

/// The inbound row of one runner stream `(task_id, attempt)`.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct InboundRow {
    /// The task.
    pub task_id: String,
    /// The attempt (0: a runner that sends no attempt).
    pub attempt: u64,
    /// The stream is applied (committed) through this seq.
    pub through: u64,
}

/// One unacknowledged command, byte for byte as sent.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct CommandRow {
    /// The task.
    pub task_id: String,
    /// The command's seq.
    pub seq: u64,
    /// The encoded frame (replayed as is).
    pub frame: String,
}

/// Everything a store holds of one runner's hub session except its lease (row order
/// carries no meaning; `HubSession.rows()` gives them sorted by key).
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct RunnerRows {
    /// One row per known task.
    #[uniffi(default = [])]
    pub tasks: Vec<TaskRow>,
    /// One row per runner stream.
    #[uniffi(default = [])]
    pub inbound: Vec<InboundRow>,
    /// The unacknowledged commands.
    #[uniffi(default = [])]
    pub commands: Vec<CommandRow>,
}

fn task_row(t: core_store::TaskRow) -> TaskRow {
    TaskRow {
        task_id: t.task_id,
        next_seq: t.next_seq,
        assigned_attempt: t.assigned_attempt,
        forgotten: t.forgotten,
    }
}

fn command_row(c: core_store::CommandRow) -> CommandRow {
    CommandRow {
        task_id: c.task_id,
        seq: c.seq,
        frame: c.frame,
    }
}

impl From<core_store::RunnerRows> for RunnerRows {
    fn from(r: core_store::RunnerRows) -> Self {
        RunnerRows {
            tasks: r.tasks.into_iter().map(task_row).collect(),
            inbound: r
                .inbound
                .into_iter()
                .map(|i| InboundRow {
                    task_id: i.task_id,
                    attempt: i.attempt,
                    through: i.through,
                })
                .collect(),
            commands: r.commands.into_iter().map(command_row).collect(),
        }
    }
}

impl RunnerRows {
    fn into_core(self) -> core_store::RunnerRows {
        core_store::RunnerRows {
            tasks: self.tasks.into_iter().map(TaskRow::into_core).collect(),
            inbound: self
                .inbound
                .into_iter()
                .map(|i| core_store::InboundRow {
                    task_id: i.task_id,
                    attempt: i.attempt,
                    through: i.through,
                })
                .collect(),
            commands: self
                .commands
                .into_iter()
                .map(CommandRow::into_core)
                .collect(),
        }
    }
}

impl TaskRow {
    fn into_core(self) -> core_store::TaskRow {
        core_store::TaskRow {
            task_id: self.task_id,
            next_seq: self.next_seq,
            assigned_attempt: self.assigned_attempt,
            forgotten: self.forgotten,
        }
    }
}

impl CommandRow {
    fn into_core(self) -> core_store::CommandRow {
        core_store::CommandRow {
            task_id: self.task_id,
            seq: self.seq,
            frame: self.frame,
        }
    }
}

/// One write a step needs before its outputs are performed. Apply a `RowTracker.writes`
/// list in order, in one transaction, after the fencing check. `rowWriteOp` gives the
/// op's stable name (`put_task`, `put_command`, `delete_commands`, `delete_task`).
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Enum)]
pub enum RowWrite {
    /// Insert or replace the task's row (`put_task`).
    PutTask {
        /// The row.
        row: TaskRow,
    },
    /// Insert or replace the command `(task_id, seq)` (`put_command`).
    PutCommand {
        /// The row.
        row: CommandRow,
    },
    /// Delete the task's commands with seq ≤ `through` (`delete_commands`).
    DeleteCommands {
        /// The task.
        task_id: String,
        /// The highest seq deleted.
        through: u64,
    },
    /// Delete every row of the task: tasks, inbound, commands (`delete_task`).
    DeleteTask {
        /// The task.
        task_id: String,
    },
}

impl From<core_store::RowWrite> for RowWrite {
    fn from(w: core_store::RowWrite) -> Self {
        match w {
            core_store::RowWrite::PutTask(t) => RowWrite::PutTask { row: task_row(t) },
            core_store::RowWrite::PutCommand(c) => RowWrite::PutCommand {
                row: command_row(c),
            },
            core_store::RowWrite::DeleteCommands { task_id, through } => {
                RowWrite::DeleteCommands { task_id, through }
            }
            core_store::RowWrite::DeleteTask { task_id } => RowWrite::DeleteTask { task_id },
        }
    }
}

impl RowWrite {
    fn into_core(self) -> core_store::RowWrite {
        match self {
            RowWrite::PutTask { row } => core_store::RowWrite::PutTask(row.into_core()),
            RowWrite::PutCommand { row } => core_store::RowWrite::PutCommand(row.into_core()),
            RowWrite::DeleteCommands { task_id, through } => {
                core_store::RowWrite::DeleteCommands { task_id, through }
            }
            RowWrite::DeleteTask { task_id } => core_store::RowWrite::DeleteTask { task_id },
        }
    }
}

/// The write's stable op name (the core's `RowWrite::op`): `put_task`, `put_command`,
/// `delete_commands`, `delete_task`.
#[uniffi::export]
pub fn row_write_op(write: RowWrite) -> String {
    write.into_core().op().to_owned()
}

/// The rows' JSON text, the core's form (`{"tasks": [...], "inbound": [...],
/// "commands": [...]}` with snake_case columns), which every binding reads and writes:
/// for a store that keeps rows as JSON, or rows from another language's hub.
#[uniffi::export]
pub fn runner_rows_to_json(rows: RunnerRows) -> String {
    rows.into_core().to_json().to_string()
}

/// Rows from their JSON text (the core's form, see `runnerRowsToJson`); an unknown table
/// or column, a missing column or a wrong type throws `ProtocolException.State` of kind
/// `store`, code `invalid_rows`, naming the place (`rows.tasks[2].next_seq`).
#[uniffi::export]
pub fn runner_rows_from_json(json: String) -> Result<RunnerRows, ProtocolError> {
    let v = parse_serde(&json)?;
    core_store::RunnerRows::from_json(&v)
        .map(RunnerRows::from)
        .map_err(store_error)
}

/// The write's JSON text, the core's form: `{"op", ...its columns}` (op first).
#[uniffi::export]
pub fn row_write_to_json(write: RowWrite) -> String {
    write.into_core().to_json().to_string()
}

/// How a hub closes a runner socket because of its store (see `closeFor`).
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct StoreClose {
    /// The WebSocket close code (1012, "service restart": the runner reconnects,
    /// possibly to another hub, and resumes from the committed rows).
    pub code: u16,
    /// The close reason: the store error's code.
    pub reason: String,
}

/// The close for a runner socket whose hub hit the store error `code` (`fenced`,
/// `store_unavailable`, `lease_expired`, `store_limit`; any other code closes as
/// `store_unavailable`): the core's `store::close_for`.
#[uniffi::export]
pub fn close_for(code: String) -> StoreClose {
    let (code, reason) = core_store::close_for(&code);
    StoreClose {
        code,
        reason: reason.to_owned(),
    }
}

fn store_error(e: core_store::StoreError) -> ProtocolError {
    state("store", e.code(), &e)
}

#[uniffi::export]
impl HubSession {
    /// Rebuilds a hub session from a store's rows (a takeover): its state holds exactly
    /// the rows, its kept commands are replayed after the runner's `hello`, and with
    /// durable acknowledgements (`durable_acks`) every inbound position counts as
    /// confirmed. `config_json` as for the constructor.
    ///
    /// # Errors
    /// `ProtocolError::Config`; `ProtocolError::State` of kind `store`, code
    /// `invalid_rows` (table class `StoreError`) for rows that are not a hub's.
    #[uniffi::constructor(default(config_json = None))]
    pub fn from_rows(rows: RunnerRows, config_json: Option<String>) -> Result<Self, ProtocolError> {
        let c = session_config(config_json)?;
        let m = CoreHub::from_rows(c, &rows.into_core()).map_err(store_error)?;
        Ok(HubSession::from_core(m))
    }

    /// The rows a store holds for this session, sorted by key. An inbound stream's
    /// `through` is what the host confirmed (durable acknowledgements), or its
    /// watermark without them.
    pub fn rows(&self) -> RunnerRows {
        self.with_core(|h| h.rows().into())
    }
}

#[uniffi::export]
impl HubLink {
    /// A hub link over a session rebuilt from a store's rows (a takeover; see
    /// `HubSession.fromRows`). `config_json` as for the constructor (the session's keys
    /// under `session`; a store host turns `durable_acks` on).
    ///
    /// # Errors
    /// `ProtocolError::Config`; `ProtocolError::State` of kind `store`, code
    /// `invalid_rows`.
    #[uniffi::constructor(default(config_json = None))]
    pub fn from_rows(rows: RunnerRows, config_json: Option<String>) -> Result<Self, ProtocolError> {
        let c = link_config(config_json)?;
        let session =
            CoreHub::from_rows(c.session.clone(), &rows.into_core()).map_err(store_error)?;
        Ok(HubLink::from_core(core_link::HubLink::new(session, c)))
    }

    /// The rows a store holds for the link's session (`HubSession.rows`).
    pub fn rows(&self) -> RunnerRows {
        self.with_core(|l| l.session().rows().into())
    }
}

/// Which rows a step changed: the writes to commit before the step's outputs are
/// performed. It holds what the store holds (the rows it was built over plus every
/// committed batch); `writes` lists the difference with the session and remembers it as
/// pending, `committed` makes it held, `failed` forgets it (the next `writes` lists it
/// again). Inbound rows are never in it: the apply transaction of each delivered frame
/// writes them. Thread-safe (a mutex).
#[derive(uniffi::Object)]
pub struct RowTracker {
    inner: Mutex<core_store::RowTracker>,
}

impl RowTracker {
    fn lock(&self) -> MutexGuard<'_, core_store::RowTracker> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[uniffi::export]
impl RowTracker {
    /// A tracker over the rows the store holds (those the session was built from;
    /// `RunnerRows()` for a runner the store has never seen).
    #[uniffi::constructor]
    pub fn new(rows: RunnerRows) -> Self {
        Self {
            inner: Mutex::new(core_store::RowTracker::new(&rows.into_core())),
        }
    }

    /// The writes that make the store hold `session`'s tasks and commands, in the order
    /// to apply them (pending writes of an earlier call that was neither committed nor
    /// failed are listed again).
    pub fn writes(&self, session: Arc<HubSession>) -> Vec<RowWrite> {
        let mut t = self.lock();
        session
            .with_core(|h| t.writes(h))
            .into_iter()
            .map(RowWrite::from)
            .collect()
    }

    /// `writes` for the session of a `HubLink`.
    pub fn link_writes(&self, link: Arc<HubLink>) -> Vec<RowWrite> {
        let mut t = self.lock();
        link.with_core(|l| t.writes(l.session()))
            .into_iter()
            .map(RowWrite::from)
            .collect()
    }

    /// The writes of the last `writes` committed: the store holds them.
    pub fn committed(&self) {
        self.lock().committed();
    }

    /// The writes of the last `writes` were rolled back: the next call lists them again.
    pub fn failed(&self) {
        self.lock().failed();
    }
}

/// The lease timing of a hub process (the core's `LeaseConfig`).
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct LeaseConfig {
    /// How long a lease lasts after the renewal that set it (database clock). Default
    /// 10000 ms.
    pub lease_ms: u64,
    /// Renew this long after the last renewal started. Default 3000 ms.
    pub renew_every_ms: u64,
    /// Stop serving this long before a lease can have expired. Default 2000 ms.
    pub margin_ms: u64,
    /// After a failed renewal, try again this much later. Default 500 ms.
    pub retry_ms: u64,
}

impl From<&core_store::LeaseConfig> for LeaseConfig {
    fn from(c: &core_store::LeaseConfig) -> Self {
        LeaseConfig {
            lease_ms: c.lease_ms,
            renew_every_ms: c.renew_every_ms,
            margin_ms: c.margin_ms,
            retry_ms: c.retry_ms,
        }
    }
}

fn lease_config(config_json: Option<String>) -> Result<core_store::LeaseConfig, ProtocolError> {
    match config_json {
        None => Ok(core_store::LeaseConfig::default()),
        Some(t) => Ok(core_store::LeaseConfig::from_value(&parse_serde(&t)?)?),
    }
}

/// The core's default lease configuration (every key with its default) as JSON text.
#[uniffi::export]
pub fn lease_config_defaults() -> String {
    core_store::LeaseConfig::default().to_value().to_string()
}

/// The lease configuration the core reads from `config_json` (JSON text of the keys
/// `lease_ms`, `renew_every_ms`, `margin_ms`, `retry_ms`, each optional).
///
/// # Errors
/// `ProtocolError::Config` (`not_an_object`, `unknown_key`, `wrong_type`,
/// `out_of_range`: a zero duration, or `renew_every_ms + margin_ms` not below
/// `lease_ms`, reported on `renew_every_ms`).
#[uniffi::export]
pub fn lease_config_parse(config_json: String) -> Result<LeaseConfig, ProtocolError> {
    Ok(LeaseConfig::from(&lease_config(Some(config_json))?))
}

/// What the host tells a `Lease`.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Enum)]
pub enum LeaseInput {
    /// The renewal asked for by `Renew` committed; its transaction began at local
    /// monotonic time `started_at`.
    Renewed {
        /// Local ms when the renewal's transaction began.
        started_at: u64,
    },
    /// The renewal failed (the database unreachable, the transaction refused).
    RenewFailed,
    /// `pollTimeout()` passed (harmless at any time).
    Timeout,
}

/// What a `Lease` asks of the host. `leaseOutputName` gives the stable name (`renew`,
/// `expiring`, `held`).
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Enum)]
pub enum LeaseOutput {
    /// Start a renewal now (report it with `Renewed` or `RenewFailed`).
    Renew,
    /// The leases may expire soon and could not be renewed: stop confirming, close every
    /// runner socket (`closeFor("lease_expired")`), take no runner until `Held`.
    Expiring,
    /// After `Expiring`, a renewal committed: runners may be served again.
    Held,
    /// An output this binding does not know yet (a newer core), by its stable name.
    Unknown {
        /// The core's name of the output.
        name: String,
    },
}

fn lease_output(o: core_store::LeaseOutput) -> LeaseOutput {
    match o {
        core_store::LeaseOutput::Renew => LeaseOutput::Renew,
        core_store::LeaseOutput::Expiring => LeaseOutput::Expiring,
        core_store::LeaseOutput::Held => LeaseOutput::Held,
        other => LeaseOutput::Unknown {
            name: other.name().to_owned(),
        },
    }
}

/// The output's stable name (the core's `LeaseOutput::name`): `renew`, `expiring`,
/// `held`.
#[uniffi::export]
pub fn lease_output_name(output: LeaseOutput) -> String {
    match output {
        LeaseOutput::Renew => core_store::LeaseOutput::Renew.name().to_owned(),
        LeaseOutput::Expiring => core_store::LeaseOutput::Expiring.name().to_owned(),
        LeaseOutput::Held => core_store::LeaseOutput::Held.name().to_owned(),
        LeaseOutput::Unknown { name } => name,
    }
}

/// The lease timing of one hub process (sans-IO): when to renew the leases of its
/// runners, and when it must stop serving them because it could not (the core's
/// `store::Lease`, transition table there).
///
/// Call order: create it (it asks for a renewal at once); after every `handleInput`,
/// drain `pollOutput()` until `null` and perform each output; feed `Timeout` at
/// `pollTimeout()`; ask `isHeld(nowMs)` before confirming an applied frame or taking a
/// runner. Thread-safe (a mutex).
#[derive(uniffi::Object)]
pub struct Lease {
    inner: Mutex<core_store::Lease>,
}

impl Lease {
    fn lock(&self) -> MutexGuard<'_, core_store::Lease> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[uniffi::export]
impl Lease {
    /// A lease not yet held; `config_json` is the core's lease configuration (JSON text,
    /// `None`: defaults).
    ///
    /// # Errors
    /// `ProtocolError::Config`, as `leaseConfigParse`.
    #[uniffi::constructor(default(config_json = None))]
    pub fn new(config_json: Option<String>) -> Result<Self, ProtocolError> {
        Ok(Self {
            inner: Mutex::new(core_store::Lease::new(lease_config(config_json)?)),
        })
    }

    /// A lease with a typed configuration, read by the core's config reader (the same
    /// checks as the JSON form).
    ///
    /// # Errors
    /// `ProtocolError::Config`, as `leaseConfigParse`.
    #[uniffi::constructor]
    pub fn with_config(config: LeaseConfig) -> Result<Self, ProtocolError> {
        let value = serde_json::json!({
            "lease_ms": config.lease_ms,
            "renew_every_ms": config.renew_every_ms,
            "margin_ms": config.margin_ms,
            "retry_ms": config.retry_ms,
        });
        let c = core_store::LeaseConfig::from_value(&value)?;
        Ok(Self {
            inner: Mutex::new(core_store::Lease::new(c)),
        })
    }

    /// Feeds one input at local monotonic time `now_ms`.
    pub fn handle_input(&self, now_ms: u64, input: LeaseInput) {
        let input = match input {
            LeaseInput::Renewed { started_at } => core_store::LeaseInput::Renewed { started_at },
            LeaseInput::RenewFailed => core_store::LeaseInput::RenewFailed,
            LeaseInput::Timeout => core_store::LeaseInput::Timeout,
        };
        self.lock().handle_input(now_ms, input);
    }

    /// The next output, or `None` once drained.
    pub fn poll_output(&self) -> Option<LeaseOutput> {
        self.lock().poll_output().map(lease_output)
    }

    /// When to feed `Timeout` (absolute, the host's clock; `None`: no timer).
    pub fn poll_timeout(&self) -> Option<u64> {
        self.lock().poll_timeout()
    }

    /// `true` while the hub may serve its runners at `now_ms` (confirm applied frames,
    /// take over runners).
    pub fn is_held(&self, now_ms: u64) -> bool {
        self.lock().is_held(now_ms)
    }

    /// The configuration.
    pub fn config(&self) -> LeaseConfig {
        LeaseConfig::from(self.lock().config())
    }

    /// The configuration's keys with their values, as JSON text (the core's form).
    pub fn config_json(&self) -> String {
        self.lock().config().to_value().to_string()
    }
}
