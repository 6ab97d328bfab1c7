//! [`HubHost`]: the hub's door (token check) and runner registry (announce, eviction).

use std::collections::{HashMap, VecDeque};

use indexmap::IndexMap;

use super::auth::{bearer_from_headers, BearerToken, RedactedHeaders, Refusal, TokenTable};
use super::{
    HostConfig, HostError, CLOSE_POLICY_VIOLATION, STATUS_UNAUTHORIZED, UNAUTHORIZED_BODY,
    UNAUTHORIZED_REASON,
};

/// What the host reports to the hub machine.
///
/// Its [`Debug`](std::fmt::Debug) prints the value of every `Authorization` header as
/// `<redacted>` (the bearer token is a secret).
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum HubInput {
    /// An upgrade request arrived (before the WebSocket opens). `conn` is the host's id
    /// of the connection, unique while it lives; `headers` are the request's header
    /// name/value pairs in arrival order (repeats included).
    Request {
        /// Connection id.
        conn: u64,
        /// Header name/value pairs.
        headers: Vec<(String, String)>,
    },
    /// The WebSocket of `conn` is open. A connection accepted by [`HubInput::Request`]
    /// is attached at once (its token was checked once, before the upgrade); any other
    /// (a server the host started without the request check) is checked now from
    /// `headers`, and a refusal closes it with code 1008.
    Upgraded {
        /// Connection id.
        conn: u64,
        /// Header name/value pairs (used only when the request was not checked).
        headers: Vec<(String, String)>,
    },
    /// The host's authenticator answered [`HubOutput::Authenticate`] for `conn`.
    Authenticated {
        /// Connection id.
        conn: u64,
        /// The runner id the token authenticates, `None` to refuse it.
        runner_id: Option<String>,
    },
    /// The host created a handle for `runner_id`; `activity` describes every handle the
    /// host keeps (the new one included). The machine evicts idle runners beyond
    /// [`HostConfig::max_idle_runners`].
    RunnerAdded {
        /// The new handle's runner id.
        runner_id: String,
        /// What each kept handle is doing.
        activity: Vec<RunnerActivity>,
    },
    /// [`HubHost::poll_timeout`] passed (the hub machine has no timers: a no-op).
    Timeout,
}

impl std::fmt::Debug for HubInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HubInput::Request { conn, headers } => f
                .debug_struct("Request")
                .field("conn", conn)
                .field("headers", &RedactedHeaders(headers))
                .finish(),
            HubInput::Upgraded { conn, headers } => f
                .debug_struct("Upgraded")
                .field("conn", conn)
                .field("headers", &RedactedHeaders(headers))
                .finish(),
            HubInput::Authenticated { conn, runner_id } => f
                .debug_struct("Authenticated")
                .field("conn", conn)
                .field("runner_id", runner_id)
                .finish(),
            HubInput::RunnerAdded {
                runner_id,
                activity,
            } => f
                .debug_struct("RunnerAdded")
                .field("runner_id", runner_id)
                .field("activity", activity)
                .finish(),
            HubInput::Timeout => f.write_str("Timeout"),
        }
    }
}

/// What one runner handle of the host is doing, for the eviction decision.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunnerActivity {
    /// The runner id.
    pub runner_id: String,
    /// Sockets attached to or being attached to the runner's session.
    pub sockets: u64,
    /// Frames the runner's session keeps for replay.
    pub kept_frames: u64,
    /// Events queued for the application.
    pub queued_events: u64,
    /// Application readers waiting for an event.
    pub waiting_readers: u64,
    /// Announced, not yet taken by the application (`accept()`).
    pub awaiting_accept: bool,
}

impl RunnerActivity {
    /// `true` when nothing depends on the handle: no socket, nothing kept for replay, no
    /// event queued, no reader waiting, not waiting to be accepted. Only idle runners
    /// are ever evicted.
    pub fn is_idle(&self) -> bool {
        self.sockets == 0
            && self.kept_frames == 0
            && self.queued_events == 0
            && self.waiting_readers == 0
            && !self.awaiting_accept
    }
}

/// What the host must do, in order. (Its `Debug` never prints a token: see
/// [`BearerToken`].)
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum HubOutput {
    /// Ask the host's authenticator (no token table configured) which runner `token`
    /// authenticates; answer with [`HubInput::Authenticated`].
    Authenticate {
        /// Connection id.
        conn: u64,
        /// The presented bearer token (its `Debug` is redacted; the authenticator reads
        /// [`BearerToken::as_str`]).
        token: BearerToken,
    },
    /// Let the upgrade of `conn` proceed; it will serve `runner_id`.
    Accept {
        /// Connection id.
        conn: u64,
        /// The authenticated runner.
        runner_id: String,
    },
    /// Answer the upgrade request with this HTTP status and body instead of upgrading.
    Reject {
        /// Connection id.
        conn: u64,
        /// HTTP status (401).
        status: u16,
        /// Response body.
        body: &'static str,
        /// Why (for logs; the peer sees only the status).
        refusal: Refusal,
    },
    /// Close the upgraded socket `conn` with this code and reason (through its
    /// [`SocketHost`](super::SocketHost): a bounded handshake).
    Refuse {
        /// Connection id.
        conn: u64,
        /// Close code (1008).
        code: u16,
        /// Close reason.
        reason: &'static str,
        /// Why (for logs).
        refusal: Refusal,
    },
    /// Drive `runner_id`'s session over the upgraded socket `conn` (replacing the
    /// runner's older socket, if any: close it through its `SocketHost` with
    /// [`REPLACED_REASON`](super::REPLACED_REASON)). `announce`: this is the runner's
    /// first socket since its handle was created — hand it to the application
    /// (`accept()`).
    Attach {
        /// Connection id.
        conn: u64,
        /// The runner.
        runner_id: String,
        /// Announce the runner to the application.
        announce: bool,
    },
    /// Drop this idle runner's handle (and its session).
    Evict {
        /// The runner.
        runner_id: String,
    },
}

impl HubOutput {
    /// The output's stable name, the tag every binding and vector uses for it:
    /// `authenticate`, `accept`, `reject`, `refuse`, `attach`, `evict`.
    pub fn kind(&self) -> &'static str {
        match self {
            HubOutput::Authenticate { .. } => "authenticate",
            HubOutput::Accept { .. } => "accept",
            HubOutput::Reject { .. } => "reject",
            HubOutput::Refuse { .. } => "refuse",
            HubOutput::Attach { .. } => "attach",
            HubOutput::Evict { .. } => "evict",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Pending {
    /// The authenticator's answer is outstanding; `upgraded`: the socket is open.
    Authenticating { upgraded: bool },
    /// Accepted before the upgrade; the socket will serve this runner.
    Accepted { runner_id: String },
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct RunnerRecord {
    /// A socket was attached since the handle was created (it was announced).
    arrived: bool,
}

/// The hub's connection policy: who may connect, as which runner, and which runner
/// handles are kept. Its `Debug` (like its inputs' and outputs') never prints a bearer
/// token or an `Authorization` value.
///
/// # Call order
///
/// For each upgrade request feed [`HubInput::Request`]; drain
/// [`poll_output`](Self::poll_output): answer `Authenticate` with
/// [`HubInput::Authenticated`] (then drain again), respond to `Reject` with the status,
/// let `Accept` upgrade. When the socket is open feed [`HubInput::Upgraded`]: `Attach`
/// says which runner it serves, `Refuse` closes it. Whenever the host creates a runner
/// handle, feed [`HubInput::RunnerAdded`] and drop every `Evict`ed handle.
///
/// # Transitions (per connection)
///
/// | connection | input | outputs | next |
/// |---|---|---|---|
/// | unknown | `Request`, headers refused (rules 1–3 of [`auth`](super::auth)) | `Reject{401, refusal}` | unknown |
/// | unknown | `Request`, table has the token | `Accept{runner}` | `Accepted{runner}` |
/// | unknown | `Request`, table lacks it | `Reject{401, unknown_token}` | unknown |
/// | unknown | `Request`, no table | `Authenticate{token}` | `Authenticating{upgraded: false}` |
/// | `Authenticating{false}` | `Authenticated{Some(r)}` | `Accept{r}` | `Accepted{r}` |
/// | `Authenticating{false}` | `Authenticated{None}` | `Reject{401, unknown_token}` | unknown |
/// | `Accepted{r}` | `Upgraded` | `Attach{r, announce}` | unknown |
/// | unknown | `Upgraded`: as `Request`, with `Refuse{1008}` for `Reject` and `Attach` for `Accept` | | unknown / `Authenticating{true}` |
/// | `Authenticating{true}` | `Authenticated{Some(r)}` / `{None}` | `Attach{r, announce}` / `Refuse{1008, unknown_token}` | unknown |
/// | pending | `Request` | error `connection_pending` | unchanged |
/// | `Authenticating` | `Upgraded` | error `connection_pending` | unchanged |
/// | not `Authenticating` | `Authenticated` | error `unknown_connection` | unchanged |
/// | any pending | a newer connection needs its place (below) | `Reject`/`Refuse{pending_evicted}` if `Authenticating` | unknown |
///
/// At most [`HostConfig::max_pending_connections`] connections are pending; a new one
/// beyond that makes room by dropping the oldest pending connection, whatever its state,
/// and no pending connection is dropped without its verdict:
///
/// | dropped entry | outputs (before the new connection's) | later |
/// |---|---|---|
/// | `Accepted{r}` | — (its `Accept` was given) | its `Upgraded` is checked again from its headers, as an unchecked socket |
/// | `Authenticating{false}` | `Reject{401, pending_evicted}` | its `Authenticated` is error `unknown_connection` (the host drops the answer) |
/// | `Authenticating{true}` | `Refuse{1008, pending_evicted}` | its `Authenticated` is error `unknown_connection` (the host drops the answer) |
///
/// Runner registry, in creation order: `Attach` of a runner not in it adds it; a
/// `RunnerAdded` of a runner not in it adds it (one already in it keeps its place), and
/// then, with `idle` the registered runners the host lists as idle
/// ([`RunnerActivity::is_idle`]; a registered runner the host no longer lists is
/// forgotten; the runner just added counts unless listed as busy), the oldest
/// `idle − max_idle_runners` of them other than the runner just added are evicted —
/// never the runner just added, wherever it stands in the order. `announce` is `true` for the first `Attach` of a runner
/// since it was added (and again after it was evicted).
#[derive(Debug, Clone)]
pub struct HubHost {
    tokens: Option<TokenTable>,
    max_idle_runners: usize,
    max_pending_connections: usize,
    pending: IndexMap<u64, Pending>,
    runners: IndexMap<String, RunnerRecord>,
    outputs: VecDeque<HubOutput>,
}

impl HubHost {
    /// A hub machine with no connection and no runner.
    pub fn new(config: &HostConfig) -> Self {
        Self {
            tokens: config.tokens.clone(),
            max_idle_runners: config.max_idle_runners,
            max_pending_connections: config.max_pending_connections.max(1),
            pending: IndexMap::new(),
            runners: IndexMap::new(),
            outputs: VecDeque::new(),
        }
    }

    /// The runner id `authorization` (one `Authorization` header value) authenticates
    /// with the token table: `None` when the value is refused, the token unknown, or no
    /// table is configured.
    pub fn runner_id_for(&self, authorization: &str) -> Option<&str> {
        let token = super::auth::bearer_token(authorization).ok()?;
        self.tokens.as_ref()?.lookup(token)
    }

    /// `true` when a token table decides (else the host's authenticator does).
    pub fn has_token_table(&self) -> bool {
        self.tokens.is_some()
    }

    /// Runner ids in the registry, oldest first.
    pub fn runners(&self) -> impl Iterator<Item = &str> {
        self.runners.keys().map(String::as_str)
    }

    /// Connections pending between the token check and the upgraded socket.
    pub fn pending_connections(&self) -> usize {
        self.pending.len()
    }

    /// Feed one input (see the transition table on the type).
    pub fn handle_input(&mut self, _now_ms: u64, input: HubInput) -> Result<(), HostError> {
        match input {
            HubInput::Request { conn, headers } => {
                if self.pending.contains_key(&conn) {
                    return Err(HostError::ConnectionPending { conn });
                }
                self.check(conn, &headers, false);
            }
            HubInput::Upgraded { conn, headers } => match self.pending.get(&conn) {
                Some(Pending::Authenticating { .. }) => {
                    return Err(HostError::ConnectionPending { conn })
                }
                Some(Pending::Accepted { runner_id }) => {
                    let runner_id = runner_id.clone();
                    self.pending.shift_remove(&conn);
                    self.attach(conn, runner_id);
                }
                None => self.check(conn, &headers, true),
            },
            HubInput::Authenticated { conn, runner_id } => {
                let upgraded = match self.pending.get(&conn) {
                    Some(Pending::Authenticating { upgraded }) => *upgraded,
                    _ => return Err(HostError::UnknownConnection { conn }),
                };
                self.pending.shift_remove(&conn);
                match runner_id {
                    Some(runner_id) => self.admit(conn, runner_id, upgraded),
                    None => self.refuse(conn, Refusal::UnknownToken, upgraded),
                }
            }
            HubInput::RunnerAdded {
                runner_id,
                activity,
            } => self.runner_added(runner_id, &activity),
            HubInput::Timeout => {}
        }
        Ok(())
    }

    fn check(&mut self, conn: u64, headers: &[(String, String)], upgraded: bool) {
        let token = match bearer_from_headers(headers) {
            Ok(token) => token,
            Err(refusal) => return self.refuse(conn, refusal, upgraded),
        };
        match &self.tokens {
            Some(table) => match table.lookup(token) {
                Some(runner_id) => {
                    let runner_id = runner_id.to_owned();
                    self.admit(conn, runner_id, upgraded);
                }
                None => self.refuse(conn, Refusal::UnknownToken, upgraded),
            },
            None => {
                let token = BearerToken::new(token);
                self.remember(conn, Pending::Authenticating { upgraded });
                self.outputs
                    .push_back(HubOutput::Authenticate { conn, token });
            }
        }
    }

    /// Remember `conn` as pending, first dropping the oldest pending connections beyond
    /// the bound; one still awaiting the authenticator gets its refusal now (see the
    /// type docs), so every connection gets exactly one verdict.
    fn remember(&mut self, conn: u64, pending: Pending) {
        while self.pending.len() >= self.max_pending_connections {
            match self.pending.shift_remove_index(0) {
                Some((old, Pending::Authenticating { upgraded })) => {
                    self.refuse(old, Refusal::PendingEvicted, upgraded);
                }
                Some((_, Pending::Accepted { .. })) => {}
                None => break,
            }
        }
        self.pending.insert(conn, pending);
    }

    fn admit(&mut self, conn: u64, runner_id: String, upgraded: bool) {
        if upgraded {
            self.attach(conn, runner_id);
        } else {
            self.remember(
                conn,
                Pending::Accepted {
                    runner_id: runner_id.clone(),
                },
            );
            self.outputs
                .push_back(HubOutput::Accept { conn, runner_id });
        }
    }

    fn refuse(&mut self, conn: u64, refusal: Refusal, upgraded: bool) {
        self.outputs.push_back(if upgraded {
            HubOutput::Refuse {
                conn,
                code: CLOSE_POLICY_VIOLATION,
                reason: UNAUTHORIZED_REASON,
                refusal,
            }
        } else {
            HubOutput::Reject {
                conn,
                status: STATUS_UNAUTHORIZED,
                body: UNAUTHORIZED_BODY,
                refusal,
            }
        });
    }

    fn attach(&mut self, conn: u64, runner_id: String) {
        let announce = match self.runners.get_mut(&runner_id) {
            Some(record) => !std::mem::replace(&mut record.arrived, true),
            None => {
                self.runners
                    .insert(runner_id.clone(), RunnerRecord { arrived: true });
                true
            }
        };
        self.outputs.push_back(HubOutput::Attach {
            conn,
            runner_id,
            announce,
        });
    }

    fn runner_added(&mut self, runner_id: String, activity: &[RunnerActivity]) {
        let idle_by_id: HashMap<&str, bool> = activity
            .iter()
            .map(|a| (a.runner_id.as_str(), a.is_idle()))
            .collect();
        // Forget registered runners the host no longer keeps.
        self.runners
            .retain(|id, _| *id == runner_id || idle_by_id.contains_key(id.as_str()));
        if !self.runners.contains_key(&runner_id) {
            self.runners
                .insert(runner_id.clone(), RunnerRecord { arrived: false });
        }
        // The new handle counts (it is idle unless the host says otherwise) but is
        // never evicted: the excess is taken from the other idle runners, oldest first
        // (the new one may be among the oldest when it was registered before).
        let is_idle = |id: &str| idle_by_id.get(id).copied().unwrap_or(id == runner_id);
        let idle_count = self.runners.keys().filter(|id| is_idle(id)).count();
        let excess = idle_count.saturating_sub(self.max_idle_runners);
        let evicted: Vec<String> = self
            .runners
            .keys()
            .filter(|id| **id != runner_id && is_idle(id))
            .take(excess)
            .cloned()
            .collect();
        for id in evicted {
            self.runners.shift_remove(&id);
            self.outputs.push_back(HubOutput::Evict { runner_id: id });
        }
    }

    /// The next output, `None` when drained.
    pub fn poll_output(&mut self) -> Option<HubOutput> {
        self.outputs.pop_front()
    }

    /// Always `None`: the hub machine has no timers (the sockets' handshakes are their
    /// [`SocketHost`](super::SocketHost)s').
    pub fn poll_timeout(&self) -> Option<u64> {
        None
    }
}
