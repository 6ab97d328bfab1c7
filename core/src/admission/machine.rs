//! [`Admission`]: the live server's door, run registry and stream-client counts.

use std::collections::{HashMap, VecDeque};

use indexmap::IndexMap;
use serde_json::{json, Map, Value};

use super::body::{parse_action, parse_start};
use super::rules::{self, Framing};
use super::{AdmissionConfig, AdmissionError, Refusal};
use crate::local::CommandType;

/// The head of one HTTP request as the host read it, before any routing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestHead {
    /// The host's id of the request, unique among the requests it has not finished
    /// (a connection counter and a request counter will do).
    pub id: u64,
    /// The socket's peer address, `IP:PORT` (`[IPv6]:PORT`).
    pub peer: String,
    /// The socket's local address, `IP:PORT`: its port is the bound port.
    pub local: String,
    /// The method, as sent (`GET`, `POST`, …; compared case-sensitively).
    pub method: String,
    /// The request target, as sent (`/api/runs?x=1`).
    pub target: String,
    /// Header name/value pairs in arrival order, repeats included.
    pub headers: Vec<(String, String)>,
}

/// What the host reports to the machine.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum AdmissionInput {
    /// A request head arrived.
    Request(RequestHead),
    /// Bytes of the body of a request the machine asked to read ([`AdmissionOutput::ReadBody`]),
    /// as they arrive (after de-chunking).
    Body {
        /// The request id.
        id: u64,
        /// The bytes.
        data: Vec<u8>,
    },
    /// The body of request `id` is complete.
    BodyEnd {
        /// The request id.
        id: u64,
    },
    /// The client of request `id` went away while its body was being read.
    Aborted {
        /// The request id.
        id: u64,
    },
    /// The harness of `run` ended (its host loop returned, or it never started): the run
    /// is completed — kept for its history, no longer active.
    RunEnded {
        /// The run id.
        run: String,
    },
    /// The stream client admitted as request `id` went away (or the host ended its
    /// stream). Unknown ids are ignored: the stream's run may have been evicted.
    StreamClosed {
        /// The request id of the stream.
        id: u64,
    },
    /// [`Admission::poll_timeout`] passed.
    Timeout,
}

/// What an admitted request asks for (see the module docs' route table).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Route {
    /// Serve the page asset at `path` (one of [`AdmissionConfig::pages`]).
    Page {
        /// The path.
        path: String,
    },
    /// List the scripts a start may choose.
    Scripts,
    /// Start a run of `script`; its events carry `runId` `run` and `normalizedSessionId`
    /// `session`. The run counts as active from now on; report its end with
    /// [`AdmissionInput::RunEnded`].
    StartRun {
        /// The run id the machine chose (`run_N`).
        run: String,
        /// The session id the machine chose (`session_N`).
        session: String,
        /// The script.
        script: String,
    },
    /// Stream `run`'s messages from `cursor` (the retained history past the cursor, then
    /// live ones). The stream counts against the run's cap until
    /// [`AdmissionInput::StreamClosed`].
    Events {
        /// The run id.
        run: String,
        /// Messages already seen by the client (0: from the start).
        cursor: u64,
    },
    /// Send `run`'s controller this command (through the ledger).
    Action {
        /// The run id.
        run: String,
        /// The command type.
        command: CommandType,
        /// The command payload.
        payload: Map<String, Value>,
    },
}

impl Route {
    /// The route's stable name: `page`, `scripts`, `start_run`, `events`, `action`.
    pub fn kind(&self) -> &'static str {
        match self {
            Route::Page { .. } => "page",
            Route::Scripts => "scripts",
            Route::StartRun { .. } => "start_run",
            Route::Events { .. } => "events",
            Route::Action { .. } => "action",
        }
    }

    /// The route as a JSON object `{"kind", …fields}`.
    pub fn to_value(&self) -> Value {
        match self {
            Route::Page { path } => json!({"kind": "page", "path": path}),
            Route::Scripts => json!({"kind": "scripts"}),
            Route::StartRun {
                run,
                session,
                script,
            } => json!({"kind": "start_run", "run": run, "session": session, "script": script}),
            Route::Events { run, cursor } => {
                json!({"kind": "events", "run": run, "cursor": cursor})
            }
            Route::Action {
                run,
                command,
                payload,
            } => json!({"kind": "action", "run": run, "command": command.as_str(),
                        "payload": payload}),
        }
    }
}

/// What the host must do, in order.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum AdmissionOutput {
    /// Answer request `id` with the refusal's status, [`RESPONSE_HEADERS`](super::RESPONSE_HEADERS)
    /// and its JSON body ([`Refusal::body`]); read nothing more of it.
    Refuse {
        /// The request id.
        id: u64,
        /// Why.
        refusal: Refusal,
    },
    /// The head of request `id` passed: read its body and report it with
    /// [`AdmissionInput::Body`] as it streams, then [`AdmissionInput::BodyEnd`] (the
    /// machine refuses it as soon as it passes `limit` bytes).
    ReadBody {
        /// The request id.
        id: u64,
        /// The most bytes the body may have.
        limit: usize,
    },
    /// Request `id` passed every rule: perform its route.
    Admit {
        /// The request id.
        id: u64,
        /// What it asks for.
        route: Route,
    },
    /// Forget the completed run `run` (its history) and end its streams: a newer run
    /// needs its place.
    Evict {
        /// The run id.
        run: String,
    },
}

impl AdmissionOutput {
    /// The output's stable name: `refuse`, `read_body`, `admit`, `evict`.
    pub fn kind(&self) -> &'static str {
        match self {
            AdmissionOutput::Refuse { .. } => "refuse",
            AdmissionOutput::ReadBody { .. } => "read_body",
            AdmissionOutput::Admit { .. } => "admit",
            AdmissionOutput::Evict { .. } => "evict",
        }
    }

    /// The output's JSON form (the form every binding and vector uses):
    /// `{"refuse": {"id", "status", "code"}}`, `{"read_body": {"id", "limit"}}`,
    /// `{"admit": {"id", "route"}}` (route: [`Route::to_value`]), `{"evict": {"run"}}`.
    pub fn to_value(&self) -> Value {
        match self {
            AdmissionOutput::Refuse { id, refusal } => json!({"refuse": {
                "id": id, "status": refusal.status(), "code": refusal.code()}}),
            AdmissionOutput::ReadBody { id, limit } => {
                json!({"read_body": {"id": id, "limit": limit}})
            }
            AdmissionOutput::Admit { id, route } => {
                json!({"admit": {"id": id, "route": route.to_value()}})
            }
            AdmissionOutput::Evict { run } => json!({"evict": {"run": run}}),
        }
    }
}

fn invalid(msg: impl Into<String>) -> AdmissionError {
    AdmissionError::InvalidInput(msg.into())
}

fn field<'a>(v: &'a Value, key: &str) -> Result<&'a Value, AdmissionError> {
    v.get(key).ok_or_else(|| invalid(format!("missing {key}")))
}

fn id_of(v: &Value) -> Result<u64, AdmissionError> {
    field(v, "id")?
        .as_u64()
        .ok_or_else(|| invalid("id must be a non-negative integer"))
}

fn string_of(v: &Value, key: &str) -> Result<String, AdmissionError> {
    field(v, key)?
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| invalid(format!("{key} must be a string")))
}

fn hex_bytes(s: &str) -> Result<Vec<u8>, AdmissionError> {
    let digit = |c: u8| -> Result<u8, AdmissionError> {
        match c {
            b'0'..=b'9' => Ok(c.wrapping_sub(b'0')),
            b'a'..=b'f' => Ok(c.wrapping_sub(b'a').wrapping_add(10)),
            _ => Err(invalid("data_hex must be lower-case hex digits in pairs")),
        }
    };
    let bytes = s.as_bytes();
    if bytes.len() % 2 != 0 {
        return Err(invalid("data_hex must be lower-case hex digits in pairs"));
    }
    bytes
        .chunks(2)
        .map(|pair| match pair {
            [hi, lo] => Ok(digit(*hi)?.wrapping_mul(16).wrapping_add(digit(*lo)?)),
            _ => Err(invalid("data_hex must be lower-case hex digits in pairs")),
        })
        .collect()
}

impl AdmissionInput {
    /// Read an input's JSON form (the form every binding and vector uses), an object with
    /// exactly one key: `{"request": {"id", "peer", "local", "method", "target",
    /// "headers": [[name, value], …]}}`, `{"body": {"id", "data": "text"}}` (or
    /// `"data_hex"`), `{"body_end": {"id"}}`, `{"aborted": {"id"}}`, `{"run_ended":
    /// {"run"}}`, `{"stream_closed": {"id"}}`, `{"timeout": true}`.
    ///
    /// # Errors
    /// [`AdmissionError::InvalidInput`] for anything else.
    pub fn from_value(v: &Value) -> Result<Self, AdmissionError> {
        let obj = v
            .as_object()
            .ok_or_else(|| invalid("an input is a JSON object"))?;
        let mut it = obj.iter();
        let (key, body) = match (it.next(), it.next()) {
            (Some(kv), None) => kv,
            _ => return Err(invalid("an input has exactly one key")),
        };
        match key.as_str() {
            "request" => {
                let headers = field(body, "headers")?
                    .as_array()
                    .ok_or_else(|| invalid("headers must be a list"))?
                    .iter()
                    .map(|pair| match pair.as_array().map(Vec::as_slice) {
                        Some([Value::String(n), Value::String(v)]) => Ok((n.clone(), v.clone())),
                        _ => Err(invalid("a header is a [name, value] pair of strings")),
                    })
                    .collect::<Result<_, _>>()?;
                Ok(AdmissionInput::Request(RequestHead {
                    id: id_of(body)?,
                    peer: string_of(body, "peer")?,
                    local: string_of(body, "local")?,
                    method: string_of(body, "method")?,
                    target: string_of(body, "target")?,
                    headers,
                }))
            }
            "body" => {
                let data = match (body.get("data"), body.get("data_hex")) {
                    (Some(Value::String(s)), None) => s.as_bytes().to_vec(),
                    (None, Some(Value::String(h))) => hex_bytes(h)?,
                    _ => return Err(invalid("body takes data (text) or data_hex")),
                };
                Ok(AdmissionInput::Body {
                    id: id_of(body)?,
                    data,
                })
            }
            "body_end" => Ok(AdmissionInput::BodyEnd { id: id_of(body)? }),
            "aborted" => Ok(AdmissionInput::Aborted { id: id_of(body)? }),
            "run_ended" => Ok(AdmissionInput::RunEnded {
                run: string_of(body, "run")?,
            }),
            "stream_closed" => Ok(AdmissionInput::StreamClosed { id: id_of(body)? }),
            "timeout" => Ok(AdmissionInput::Timeout),
            other => Err(invalid(format!("unknown input {other:?}"))),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum BodyFor {
    Start,
    Action { run: String },
}

#[derive(Debug, Clone)]
struct Pending {
    purpose: BodyFor,
    deadline: u64,
    body: Vec<u8>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct RunSlot {
    active: bool,
    streams: usize,
}

/// The live server's admission machine: every request's verdict, the run registry and
/// the stream-client counts (see the [module docs](super) for the rules and routes).
///
/// # Call order
///
/// For each request head feed [`AdmissionInput::Request`] and drain
/// [`poll_output`](Self::poll_output): `Refuse` answers it, `Admit` lets its route run,
/// `ReadBody` asks for its body — feed every chunk as [`AdmissionInput::Body`] and the
/// end as [`AdmissionInput::BodyEnd`] (or [`AdmissionInput::Aborted`]), draining after
/// each: the verdict (`Refuse` or `Admit`) follows. Perform `Evict` whenever it appears.
/// Feed [`AdmissionInput::RunEnded`] when a started run's harness ends and
/// [`AdmissionInput::StreamClosed`] when an admitted stream ends; feed
/// [`AdmissionInput::Timeout`] at [`poll_timeout`](Self::poll_timeout).
///
/// # Transitions
///
/// | state of request `id` | input | outputs | next |
/// |---|---|---|---|
/// | — | `Request`, a rule broken | `Refuse{id, refusal}` | — |
/// | — | `Request`, a page, `/api/scripts` | `Admit{id, route}` | — |
/// | — | `Request`, events of a kept run under its cap | `Admit{id, events}` | streaming |
/// | — | `Request`, a `POST` whose head passed | `ReadBody{id, limit}` (an empty body is judged at once) | reading |
/// | reading | `Body`, total ≤ limit | — | reading |
/// | reading | `Body`, total > limit | `Refuse{id, body_too_large}` | — |
/// | reading | `BodyEnd`, body and state pass | (`Evict{oldest completed}` when the retained cap is full) `Admit{id, start_run / action}` | — |
/// | reading | `BodyEnd`, refused | `Refuse{id, refusal}` | — |
/// | reading | `Aborted` | — | — |
/// | reading | `Timeout` at or after its deadline | `Refuse{id, body_timeout}` | — |
/// | streaming | `StreamClosed` | — (the run's stream count drops) | — |
/// | reading / streaming | `Request` with the same id | error `duplicate_request` | unchanged |
/// | not reading | `Body` / `BodyEnd` / `Aborted` | error `unknown_request` | unchanged |
///
/// Runs: `Admit{start_run}` registers an active run; `RunEnded` marks it completed (error
/// `run_not_kept` for a run not kept; again for a completed run: no change); `Evict`
/// removes the oldest completed run, and with it its streams' counts.
#[derive(Debug, Clone)]
pub struct Admission {
    config: AdmissionConfig,
    runs: IndexMap<String, RunSlot>,
    streams: HashMap<u64, String>,
    pending: IndexMap<u64, Pending>,
    next_run: u64,
    outputs: VecDeque<AdmissionOutput>,
}

impl Admission {
    /// A machine with no run.
    pub fn new(config: AdmissionConfig) -> Self {
        Self {
            config,
            runs: IndexMap::new(),
            streams: HashMap::new(),
            pending: IndexMap::new(),
            next_run: 1,
            outputs: VecDeque::new(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &AdmissionConfig {
        &self.config
    }

    /// Feed one input; then drain [`poll_output`](Self::poll_output).
    ///
    /// # Errors
    /// [`AdmissionError`] for local misuse (see the transition table); the machine is
    /// unchanged then.
    pub fn handle_input(
        &mut self,
        now_ms: u64,
        input: AdmissionInput,
    ) -> Result<(), AdmissionError> {
        match input {
            AdmissionInput::Request(head) => self.on_request(now_ms, head),
            AdmissionInput::Body { id, data } => {
                let limit = self.config.max_body_bytes;
                let p = self
                    .pending
                    .get_mut(&id)
                    .ok_or(AdmissionError::UnknownRequest { id })?;
                if p.body.len().saturating_add(data.len()) > limit {
                    self.pending.shift_remove(&id);
                    self.refuse(id, Refusal::BodyTooLarge);
                } else {
                    p.body.extend_from_slice(&data);
                }
                Ok(())
            }
            AdmissionInput::BodyEnd { id } => {
                let p = self
                    .pending
                    .shift_remove(&id)
                    .ok_or(AdmissionError::UnknownRequest { id })?;
                self.finish(id, &p.purpose, &p.body);
                Ok(())
            }
            AdmissionInput::Aborted { id } => self
                .pending
                .shift_remove(&id)
                .map(drop)
                .ok_or(AdmissionError::UnknownRequest { id }),
            AdmissionInput::RunEnded { run } => {
                let slot = self
                    .runs
                    .get_mut(&run)
                    .ok_or(AdmissionError::RunNotKept { run: run.clone() })?;
                slot.active = false;
                Ok(())
            }
            AdmissionInput::StreamClosed { id } => {
                if let Some(run) = self.streams.remove(&id) {
                    if let Some(slot) = self.runs.get_mut(&run) {
                        slot.streams = slot.streams.saturating_sub(1);
                    }
                }
                Ok(())
            }
            AdmissionInput::Timeout => {
                let expired: Vec<u64> = self
                    .pending
                    .iter()
                    .filter(|(_, p)| p.deadline <= now_ms)
                    .map(|(id, _)| *id)
                    .collect();
                for id in expired {
                    self.pending.shift_remove(&id);
                    self.refuse(id, Refusal::BodyTimeout);
                }
                Ok(())
            }
        }
    }

    /// The next output, `None` when drained.
    pub fn poll_output(&mut self) -> Option<AdmissionOutput> {
        self.outputs.pop_front()
    }

    /// The earliest body deadline (feed [`AdmissionInput::Timeout`] then); `None` while
    /// no body is being read.
    pub fn poll_timeout(&self) -> Option<u64> {
        self.pending.values().map(|p| p.deadline).min()
    }

    /// The runs kept, oldest first: `(run id, active, stream clients)`.
    pub fn runs(&self) -> impl Iterator<Item = (&str, bool, usize)> + '_ {
        self.runs
            .iter()
            .map(|(id, s)| (id.as_str(), s.active, s.streams))
    }

    /// Runs whose harness has not ended.
    pub fn active_runs(&self) -> usize {
        self.runs.values().filter(|s| s.active).count()
    }

    /// Requests whose body is being read.
    pub fn pending_bodies(&self) -> usize {
        self.pending.len()
    }

    fn refuse(&mut self, id: u64, refusal: Refusal) {
        self.outputs
            .push_back(AdmissionOutput::Refuse { id, refusal });
    }

    fn on_request(&mut self, now_ms: u64, head: RequestHead) -> Result<(), AdmissionError> {
        let id = head.id;
        if self.pending.contains_key(&id) || self.streams.contains_key(&id) {
            return Err(AdmissionError::DuplicateRequest { id });
        }
        match self.judge_head(&head) {
            Err(refusal) => self.refuse(id, refusal),
            Ok(Head::Admit(route)) => {
                if let Route::Events { run, .. } = &route {
                    if let Some(slot) = self.runs.get_mut(run) {
                        slot.streams = slot.streams.saturating_add(1);
                    }
                    self.streams.insert(id, run.clone());
                }
                self.outputs.push_back(AdmissionOutput::Admit { id, route });
            }
            Ok(Head::EmptyBody(purpose)) => self.finish(id, &purpose, &[]),
            Ok(Head::ReadBody(purpose)) => {
                if self.pending.len() >= self.config.max_pending_bodies {
                    self.refuse(id, Refusal::TooManyPendingBodies);
                } else {
                    self.pending.insert(
                        id,
                        Pending {
                            purpose,
                            deadline: now_ms.saturating_add(self.config.body_timeout_ms),
                            body: Vec::new(),
                        },
                    );
                    self.outputs.push_back(AdmissionOutput::ReadBody {
                        id,
                        limit: self.config.max_body_bytes,
                    });
                }
            }
        }
        Ok(())
    }

    /// Rules 1–12 over the head.
    fn judge_head(&self, head: &RequestHead) -> Result<Head, Refusal> {
        let port = rules::loopback(&head.peer, &head.local)?;
        let host = rules::host(&head.headers, port)?;
        let has_origin = rules::origin(&head.headers, host)?;
        let (path, query) = match head.target.split_once('?') {
            Some((p, q)) => (p, Some(q)),
            None => (head.target.as_str(), None),
        };
        let origin_form = path.starts_with('/');
        let get = head.method == "GET" || head.method == "HEAD";
        let navigation = origin_form && get && !rules::is_api_path(path);
        rules::fetch_site(&head.headers, navigation)?;
        if rules::values(&head.headers, "upgrade").next().is_some() {
            return Err(if has_origin {
                Refusal::UpgradeNotSupported
            } else {
                Refusal::OriginRequired
            });
        }
        if !origin_form {
            return Err(Refusal::BadTarget);
        }
        let route = self.lookup(&head.method, path)?;
        let framing = rules::framing(&head.headers)?;
        match route {
            Lookup::Page | Lookup::Scripts | Lookup::Events(_) => {
                if framing != Framing::Empty {
                    return Err(Refusal::BodyNotAllowed);
                }
            }
            Lookup::Start | Lookup::Action(_) => {
                rules::json_content_type(&head.headers)?;
                if let Framing::Length(n) = framing {
                    if usize::try_from(n).map_or(true, |n| n > self.config.max_body_bytes) {
                        return Err(Refusal::BodyTooLarge);
                    }
                }
            }
        }
        let body = |purpose| {
            if framing == Framing::Empty {
                Head::EmptyBody(purpose)
            } else {
                Head::ReadBody(purpose)
            }
        };
        match route {
            Lookup::Page => Ok(Head::Admit(Route::Page {
                path: path.to_owned(),
            })),
            Lookup::Scripts => Ok(Head::Admit(Route::Scripts)),
            Lookup::Events(run) => {
                let slot = self.runs.get(run).ok_or(Refusal::UnknownRun)?;
                let cursor = rules::cursor(&head.headers, query)?;
                if slot.streams >= self.config.max_stream_clients {
                    return Err(Refusal::TooManyStreamClients);
                }
                Ok(Head::Admit(Route::Events {
                    run: run.to_owned(),
                    cursor,
                }))
            }
            Lookup::Action(run) => {
                self.check_action_run(run)?;
                Ok(body(BodyFor::Action {
                    run: run.to_owned(),
                }))
            }
            Lookup::Start => {
                self.check_start()?;
                Ok(body(BodyFor::Start))
            }
        }
    }

    /// Rule 7: the route of a path and method.
    fn lookup<'p>(&self, method: &str, path: &'p str) -> Result<Lookup<'p>, Refusal> {
        let allow = |ok: bool, lookup: Lookup<'p>| {
            if ok {
                Ok(lookup)
            } else {
                Err(Refusal::MethodNotAllowed)
            }
        };
        let get = method == "GET";
        if !rules::is_api_path(path) {
            if !self.config.pages.iter().any(|p| p == path) {
                return Err(Refusal::NotFound);
            }
            return allow(get || method == "HEAD", Lookup::Page);
        }
        match path {
            "/api/scripts" => return allow(get, Lookup::Scripts),
            "/api/runs" => return allow(method == "POST", Lookup::Start),
            _ => {}
        }
        let Some(rest) = path.strip_prefix("/api/runs/") else {
            return Err(Refusal::NotFound);
        };
        match rest.split_once('/') {
            Some((run, "events")) if !run.is_empty() => allow(get, Lookup::Events(run)),
            Some((run, "actions")) if !run.is_empty() => {
                allow(method == "POST", Lookup::Action(run))
            }
            _ => Err(Refusal::NotFound),
        }
    }

    fn check_action_run(&self, run: &str) -> Result<(), Refusal> {
        match self.runs.get(run) {
            None => Err(Refusal::UnknownRun),
            Some(slot) if !slot.active => Err(Refusal::RunFinished),
            Some(_) => Ok(()),
        }
    }

    fn check_start(&self) -> Result<(), Refusal> {
        if self.active_runs() >= self.config.max_active_runs {
            Err(Refusal::TooManyActiveRuns)
        } else {
            Ok(())
        }
    }

    /// Rules 14 and the re-check of 11–12 for a complete body.
    fn finish(&mut self, id: u64, purpose: &BodyFor, body: &[u8]) {
        let verdict = match purpose {
            BodyFor::Start => parse_start(body, &self.config.scripts)
                .and_then(|script| self.check_start().map(|()| script))
                .map(|script| self.start(script)),
            BodyFor::Action { run } => parse_action(body).and_then(|(command, payload)| {
                self.check_action_run(run).map(|()| Route::Action {
                    run: run.clone(),
                    command,
                    payload,
                })
            }),
        };
        match verdict {
            Ok(route) => self.outputs.push_back(AdmissionOutput::Admit { id, route }),
            Err(refusal) => self.refuse(id, refusal),
        }
    }

    /// Register a new active run (evicting the oldest completed one when the retained
    /// cap is full).
    fn start(&mut self, script: String) -> Route {
        if self.runs.len() >= self.config.max_retained_runs {
            let oldest = self
                .runs
                .iter()
                .find(|(_, s)| !s.active)
                .map(|(id, _)| id.clone());
            if let Some(run) = oldest {
                self.runs.shift_remove(&run);
                self.streams.retain(|_, r| *r != run);
                self.outputs.push_back(AdmissionOutput::Evict { run });
            }
        }
        let n = self.next_run;
        self.next_run = n.saturating_add(1);
        let run = format!("run_{n}");
        self.runs.insert(
            run.clone(),
            RunSlot {
                active: true,
                streams: 0,
            },
        );
        Route::StartRun {
            run,
            session: format!("session_{n}"),
            script,
        }
    }
}

enum Head {
    Admit(Route),
    ReadBody(BodyFor),
    EmptyBody(BodyFor),
}

enum Lookup<'p> {
    Page,
    Scripts,
    Start,
    Events(&'p str),
    Action(&'p str),
}
