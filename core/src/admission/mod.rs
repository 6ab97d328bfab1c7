//! The loopback live server's trust model (seed 002, "Local transport trust model"), as a
//! sans-IO admission machine.
//!
//! `stapel-runner live` serves a page that watches and steers local runs. It is a
//! developer-only loopback transport with no user identity, no cookie and no bearer
//! credential, so the only things that keep another web page (or another site that got
//! its name resolved to 127.0.0.1) away from it are the checks below. [`Admission`]
//! makes every one of them, for **every** request, before route lookup and before any
//! process starts; the host only moves bytes and reports facts (the socket addresses,
//! the request head, the body as it streams, a run's end, a stream client's
//! departure).
//!
//! # The rules, in the order they are checked
//!
//! The first rule a request breaks is its [`Refusal`]: an HTTP status and a JSON body
//! `{"error":{"code":"…","message":"…"}}` ([`error_body`]) with a stable code, whatever
//! the path.
//!
//! | # | rule | refusal (status) |
//! |---|---|---|
//! | 1 | both ends of the socket are loopback (`127.0.0.0/8`, `::1`, or `::ffff:127.x.y.z`) | `not_loopback` (403) |
//! | 2 | exactly one `Host` header, equal to `127.0.0.1:PORT` or `localhost:PORT`, `PORT` the local socket's port (the bound port; without `:PORT` too when it is 80) — this stops DNS rebinding | `bad_host` (403) |
//! | 3 | at most one `Origin`; when present it equals the request origin `http://` + the `Host` value exactly. `null` and other loopback ports are refused: a page on `127.0.0.1:OTHER` is *same-site*, not same-origin | `origin_mismatch` (403) |
//! | 4 | at most one `Sec-Fetch-Site`; when present it is `same-origin`, or `none` for a `GET`/`HEAD` of a page path (a navigation typed by the user) | `fetch_site_refused` (403) |
//! | 5 | an upgrade request (an `Upgrade` header, e.g. a WebSocket) carries an `Origin` (checked by rule 3); no route of this server upgrades | `origin_required` (403), then `upgrade_not_supported` (400) |
//! | 6 | the target is origin-form (`/path?query`) | `bad_target` (400) |
//! | 7 | the path is a page ([`AdmissionConfig::pages`], `GET`/`HEAD`) or an API route (below) with its method | `not_found` (404), `method_not_allowed` (405) |
//! | 8 | body framing: at most one `Content-Length` (digits), `Transfer-Encoding` only `chunked`, never both; no body on `GET`/`HEAD` | `bad_framing` (400), `body_not_allowed` (400) |
//! | 9 | a `POST` is `Content-Type: application/json` (parameters allowed) | `unsupported_media_type` (415) |
//! | 10 | a declared `Content-Length` is at most [`AdmissionConfig::max_body_bytes`] | `body_too_large` (413) |
//! | 11 | the route's run exists (`unknown_run`, 404); an action's run has not ended (`run_finished`, 409); an events cursor is a decimal integer (`invalid_cursor`, 400) | |
//! | 12 | caps: at most [`max_active_runs`](AdmissionConfig::max_active_runs) active runs (`too_many_active_runs`, 429), [`max_stream_clients`](AdmissionConfig::max_stream_clients) stream clients per run (`too_many_stream_clients`, 429), [`max_pending_bodies`](AdmissionConfig::max_pending_bodies) bodies being read (`too_many_pending_bodies`, 503) | |
//! | 13 | the body, counted while it streams (chunked bodies included: cut off as soon as it passes the bound), is at most `max_body_bytes` and complete within [`body_timeout_ms`](AdmissionConfig::body_timeout_ms) | `body_too_large` (413), `body_timeout` (408) |
//! | 14 | the body is a JSON object of the route's shape (below) | `invalid_json` (400), `invalid_action` (400), `unknown_script` (400) |
//!
//! Rule 12's run cap is checked again when the body of a start is complete (another start
//! may have been admitted meanwhile). A request that passes every rule is admitted with
//! its [`Route`]. Nothing in the machine looks at anything but the data the host hands
//! it: no socket, no clock, no randomness.
//!
//! # The API (route table)
//!
//! | method and path | route | body |
//! |---|---|---|
//! | `GET`/`HEAD` a path in [`AdmissionConfig::pages`] | [`Route::Page`] | none |
//! | `GET /api/scripts` | [`Route::Scripts`] | none |
//! | `POST /api/runs` | [`Route::StartRun`] (the machine names the run `run_N` and its session `session_N`) | `{"script": NAME}` |
//! | `GET /api/runs/RUN/events` | [`Route::Events`] (cursor: `Last-Event-ID`, else `?cursor=N`, else 0) | none |
//! | `POST /api/runs/RUN/actions` | [`Route::Action`] with the `paperclip.prp.command.v1` type and payload | an [action](#actions) |
//!
//! Every other path under `/api/` is `not_found`; every other path is a page path
//! (`not_found` unless listed in `pages`).
//!
//! # Actions
//!
//! | body | command | payload |
//! |---|---|---|
//! | `{"type": "resolve_permission", "requestId": R, "choice": C}` | `request.resolve` | `{"requestId": R, "response": {"choice": C}}` |
//! | `{"type": "answer_input", "requestId": R, "text": T}` | `request.resolve` | `{"requestId": R, "response": {"text": T}}` |
//! | `{"type": "interrupt"}` or with `"turnId": T` | `turn.interrupt` | `{"turnId": T, "reason": "operator"}` (no `turnId` when absent) |
//! | `{"type": "cancel"}` | `run.cancel` | `{"reason": "operator"}` |
//!
//! `requestId`, `choice` and `turnId` are 1..=160 characters; no other key is allowed.
//! The host turns the command into a controller command (its own `commandId`, the next
//! `controllerSeq`) that goes through the local-run machine's ledger like every other.
//!
//! # Response headers
//!
//! Every response, admitted or refused, carries [`RESPONSE_HEADERS`]: no CORS header
//! ever, `X-Content-Type-Options: nosniff`, `Referrer-Policy: no-referrer`, a
//! Content-Security-Policy without inline script (`script-src 'self'
//! 'wasm-unsafe-eval'`: the page's modules and the core's WebAssembly only), and the
//! cross-origin isolation headers (COOP `same-origin`, COEP `require-corp`, CORP
//! `same-origin`) that a threaded WebAssembly build needs and that keep other origins
//! from embedding the responses.

mod body;
mod machine;
mod rules;

pub use body::{parse_action, parse_start};
pub use machine::{Admission, AdmissionInput, AdmissionOutput, RequestHead, Route};

use serde_json::{json, Value};

use crate::config::{ConfigError, ConfigReader};

/// Default most bytes of a request body (16 KiB), chunked bodies included.
pub const DEFAULT_MAX_BODY_BYTES: usize = 16 * 1024;
/// Default most runs whose harness is still running.
pub const DEFAULT_MAX_ACTIVE_RUNS: usize = 4;
/// Default most runs kept (active plus completed); the oldest completed is evicted.
pub const DEFAULT_MAX_RETAINED_RUNS: usize = 16;
/// Default most live stream clients per run.
pub const DEFAULT_MAX_STREAM_CLIENTS: usize = 8;
/// Default most requests whose body is being read at once.
pub const DEFAULT_MAX_PENDING_BODIES: usize = 64;
/// Default longest wait for a request body to complete: 10 s.
pub const DEFAULT_BODY_TIMEOUT_MS: u64 = 10_000;
/// Most characters of a script name, request id, choice or turn id.
pub const MAX_NAME_CHARS: usize = 160;

/// The headers every response carries, admitted or refused (name, value).
pub const RESPONSE_HEADERS: &[(&str, &str)] = &[
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "no-referrer"),
    (
        "Content-Security-Policy",
        "default-src 'none'; script-src 'self' 'wasm-unsafe-eval'; style-src 'self'; img-src 'self'; connect-src 'self'; worker-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    ),
    ("Cross-Origin-Opener-Policy", "same-origin"),
    ("Cross-Origin-Embedder-Policy", "require-corp"),
    ("Cross-Origin-Resource-Policy", "same-origin"),
    ("X-Frame-Options", "DENY"),
    ("Cache-Control", "no-store"),
];

/// The `Content-Type` of every error body.
pub const ERROR_CONTENT_TYPE: &str = "application/json";

/// Why a request was refused. Stable snake_case [`code`](Refusal::code)s, an HTTP
/// [`status`](Refusal::status) and a one-sentence [`message`](Refusal::message); see the
/// module docs for the order of the checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Refusal {
    /// A socket end is not loopback. 403 `not_loopback`.
    NotLoopback,
    /// The `Host` header is missing, repeated or not this server's loopback authority.
    /// 403 `bad_host`.
    BadHost,
    /// An `Origin` that is not the request origin (or a repeated one). 403
    /// `origin_mismatch`.
    OriginMismatch,
    /// A `Sec-Fetch-Site` other than `same-origin` (or `none` for a page). 403
    /// `fetch_site_refused`.
    FetchSiteRefused,
    /// An upgrade request without an `Origin`. 403 `origin_required`.
    OriginRequired,
    /// An upgrade request: no route of this server upgrades. 400 `upgrade_not_supported`.
    UpgradeNotSupported,
    /// The target is not origin-form. 400 `bad_target`.
    BadTarget,
    /// No page or API route has this path. 404 `not_found`.
    NotFound,
    /// The route exists, not with this method. 405 `method_not_allowed`.
    MethodNotAllowed,
    /// Contradictory or malformed body framing. 400 `bad_framing`.
    BadFraming,
    /// A body on a route that takes none. 400 `body_not_allowed`.
    BodyNotAllowed,
    /// A `POST` that is not `application/json`. 415 `unsupported_media_type`.
    UnsupportedMediaType,
    /// The body is (or is declared) longer than the bound. 413 `body_too_large`.
    BodyTooLarge,
    /// The body did not complete in time. 408 `body_timeout`.
    BodyTimeout,
    /// The route names a run this server does not keep. 404 `unknown_run`.
    UnknownRun,
    /// An action for a run whose harness has ended. 409 `run_finished`.
    RunFinished,
    /// The events cursor is not a decimal integer. 400 `invalid_cursor`.
    InvalidCursor,
    /// The active-run cap is reached. 429 `too_many_active_runs`.
    TooManyActiveRuns,
    /// The run's stream-client cap is reached. 429 `too_many_stream_clients`.
    TooManyStreamClients,
    /// Too many bodies are being read at once. 503 `too_many_pending_bodies`.
    TooManyPendingBodies,
    /// The body is not a JSON object. 400 `invalid_json`.
    InvalidJson,
    /// The body is not one of the actions. 400 `invalid_action`.
    InvalidAction,
    /// A start names no script, or one this server does not offer. 400 `unknown_script`.
    UnknownScript,
}

impl Refusal {
    /// Every refusal, in the order of the module docs' table.
    pub const ALL: [Refusal; 23] = [
        Refusal::NotLoopback,
        Refusal::BadHost,
        Refusal::OriginMismatch,
        Refusal::FetchSiteRefused,
        Refusal::OriginRequired,
        Refusal::UpgradeNotSupported,
        Refusal::BadTarget,
        Refusal::NotFound,
        Refusal::MethodNotAllowed,
        Refusal::BadFraming,
        Refusal::BodyNotAllowed,
        Refusal::UnsupportedMediaType,
        Refusal::BodyTooLarge,
        Refusal::BodyTimeout,
        Refusal::UnknownRun,
        Refusal::RunFinished,
        Refusal::InvalidCursor,
        Refusal::TooManyActiveRuns,
        Refusal::TooManyStreamClients,
        Refusal::TooManyPendingBodies,
        Refusal::InvalidJson,
        Refusal::InvalidAction,
        Refusal::UnknownScript,
    ];

    /// Stable snake_case code.
    pub fn code(self) -> &'static str {
        match self {
            Refusal::NotLoopback => "not_loopback",
            Refusal::BadHost => "bad_host",
            Refusal::OriginMismatch => "origin_mismatch",
            Refusal::FetchSiteRefused => "fetch_site_refused",
            Refusal::OriginRequired => "origin_required",
            Refusal::UpgradeNotSupported => "upgrade_not_supported",
            Refusal::BadTarget => "bad_target",
            Refusal::NotFound => "not_found",
            Refusal::MethodNotAllowed => "method_not_allowed",
            Refusal::BadFraming => "bad_framing",
            Refusal::BodyNotAllowed => "body_not_allowed",
            Refusal::UnsupportedMediaType => "unsupported_media_type",
            Refusal::BodyTooLarge => "body_too_large",
            Refusal::BodyTimeout => "body_timeout",
            Refusal::UnknownRun => "unknown_run",
            Refusal::RunFinished => "run_finished",
            Refusal::InvalidCursor => "invalid_cursor",
            Refusal::TooManyActiveRuns => "too_many_active_runs",
            Refusal::TooManyStreamClients => "too_many_stream_clients",
            Refusal::TooManyPendingBodies => "too_many_pending_bodies",
            Refusal::InvalidJson => "invalid_json",
            Refusal::InvalidAction => "invalid_action",
            Refusal::UnknownScript => "unknown_script",
        }
    }

    /// The refusal of a code, `None` for an unknown one.
    pub fn from_code(code: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.code() == code)
    }

    /// HTTP status of the response.
    pub fn status(self) -> u16 {
        match self {
            Refusal::NotLoopback
            | Refusal::BadHost
            | Refusal::OriginMismatch
            | Refusal::FetchSiteRefused
            | Refusal::OriginRequired => 403,
            Refusal::UpgradeNotSupported
            | Refusal::BadTarget
            | Refusal::BadFraming
            | Refusal::BodyNotAllowed
            | Refusal::InvalidCursor
            | Refusal::InvalidJson
            | Refusal::InvalidAction
            | Refusal::UnknownScript => 400,
            Refusal::NotFound | Refusal::UnknownRun => 404,
            Refusal::MethodNotAllowed => 405,
            Refusal::BodyTimeout => 408,
            Refusal::RunFinished => 409,
            Refusal::BodyTooLarge => 413,
            Refusal::UnsupportedMediaType => 415,
            Refusal::TooManyActiveRuns | Refusal::TooManyStreamClients => 429,
            Refusal::TooManyPendingBodies => 503,
        }
    }

    /// One sentence for a person (the body's `message`).
    pub fn message(self) -> &'static str {
        match self {
            Refusal::NotLoopback => "This server only talks to loopback sockets.",
            Refusal::BadHost => "The Host header must be this server's loopback address and port.",
            Refusal::OriginMismatch => "The request's Origin is not this server's origin.",
            Refusal::FetchSiteRefused => "Only same-origin requests reach this server.",
            Refusal::OriginRequired => "An upgrade request must carry an Origin header.",
            Refusal::UpgradeNotSupported => "This server upgrades no connection.",
            Refusal::BadTarget => "The request target must be a path.",
            Refusal::NotFound => "Nothing is served at this path.",
            Refusal::MethodNotAllowed => "This path does not take this method.",
            Refusal::BadFraming => "The request body's framing is malformed.",
            Refusal::BodyNotAllowed => "This request takes no body.",
            Refusal::UnsupportedMediaType => "Actions must be sent as application/json.",
            Refusal::BodyTooLarge => "The request body is too large.",
            Refusal::BodyTimeout => "The request body did not arrive in time.",
            Refusal::UnknownRun => "This server keeps no run of that id.",
            // The local runner's wording for a command after the run finished.
            Refusal::RunFinished => {
                "This request expired because the local run already finished. Start a new run."
            }
            Refusal::InvalidCursor => "The stream cursor must be a non-negative integer.",
            Refusal::TooManyActiveRuns => "Too many runs are active; wait for one to finish.",
            Refusal::TooManyStreamClients => "Too many clients are streaming this run.",
            Refusal::TooManyPendingBodies => "Too many requests are being received; retry.",
            Refusal::InvalidJson => "The request body must be a JSON object.",
            Refusal::InvalidAction => "The request body is not a valid action.",
            Refusal::UnknownScript => "This server offers no script of that name.",
        }
    }

    /// The JSON error body of the response (see [`error_body`]).
    pub fn body(self) -> String {
        error_body_of(self.code(), self.message())
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.code())
    }
}

fn error_body_of(code: &str, message: &str) -> String {
    json!({"error": {"code": code, "message": message}}).to_string()
}

/// The JSON error body of a refusal code: `{"error":{"code":"…","message":"…"}}`
/// (compact, in that key order). `None` for a code that is no [`Refusal`].
pub fn error_body(code: &str) -> Option<String> {
    Refusal::from_code(code).map(Refusal::body)
}

/// Local misuse of the [`Admission`] machine (the host broke the call order, or a JSON
/// form could not be read). Stable snake_case [`code`](AdmissionError::code)s.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AdmissionError {
    /// `Request` with the id of a request whose body is still being read. Code
    /// `duplicate_request`.
    #[error("request {id} is already being received")]
    DuplicateRequest {
        /// The request id.
        id: u64,
    },
    /// `Body`/`BodyEnd` for a request whose body is not being read (never asked for,
    /// finished, refused or aborted). Code `unknown_request`.
    #[error("no body of request {id} is being read")]
    UnknownRequest {
        /// The request id.
        id: u64,
    },
    /// `RunEnded` for a run the machine does not keep. Code `run_not_kept`.
    #[error("no run {run:?} is kept")]
    RunNotKept {
        /// The run id.
        run: String,
    },
    /// A JSON-form input that is not one of the documented inputs. Code `invalid_input`.
    #[error("invalid admission input: {0}")]
    InvalidInput(String),
}

impl AdmissionError {
    /// Stable snake_case code.
    pub fn code(&self) -> &'static str {
        match self {
            AdmissionError::DuplicateRequest { .. } => "duplicate_request",
            AdmissionError::UnknownRequest { .. } => "unknown_request",
            AdmissionError::RunNotKept { .. } => "run_not_kept",
            AdmissionError::InvalidInput(_) => "invalid_input",
        }
    }
}

/// Configuration of an [`Admission`] machine. Every bound has a documented default; read
/// one from JSON with [`AdmissionConfig::from_value`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AdmissionConfig {
    /// Most bytes of a request body, chunked bodies included. Default
    /// [`DEFAULT_MAX_BODY_BYTES`] (16 KiB). Key `max_body_bytes` (at least 1).
    pub max_body_bytes: usize,
    /// Most active runs (started, harness not yet ended). Default
    /// [`DEFAULT_MAX_ACTIVE_RUNS`]. Key `max_active_runs` (at least 1).
    pub max_active_runs: usize,
    /// Most runs kept, active plus completed; starting one more evicts the oldest
    /// completed run. Default [`DEFAULT_MAX_RETAINED_RUNS`]. Key `max_retained_runs`
    /// (at least `max_active_runs`).
    pub max_retained_runs: usize,
    /// Most live stream clients per run. Default [`DEFAULT_MAX_STREAM_CLIENTS`]. Key
    /// `max_stream_clients` (at least 1).
    pub max_stream_clients: usize,
    /// Most requests whose body is being read at once. Default
    /// [`DEFAULT_MAX_PENDING_BODIES`]. Key `max_pending_bodies` (at least 1).
    pub max_pending_bodies: usize,
    /// Longest time from a request's head to the end of its body. Default
    /// [`DEFAULT_BODY_TIMEOUT_MS`]. Key `body_timeout_ms`.
    pub body_timeout_ms: u64,
    /// The script names a start may choose; empty: any name of 1..=160 characters of
    /// `A-Z a-z 0-9 . _ -`. Default empty. Key `scripts` (a list of strings).
    pub scripts: Vec<String>,
    /// The page paths served (`GET`/`HEAD`), each starting with `/` and outside `/api/`.
    /// Default `["/"]`. Key `pages` (a list of strings).
    pub pages: Vec<String>,
}

impl Default for AdmissionConfig {
    fn default() -> Self {
        Self {
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            max_active_runs: DEFAULT_MAX_ACTIVE_RUNS,
            max_retained_runs: DEFAULT_MAX_RETAINED_RUNS,
            max_stream_clients: DEFAULT_MAX_STREAM_CLIENTS,
            max_pending_bodies: DEFAULT_MAX_PENDING_BODIES,
            body_timeout_ms: DEFAULT_BODY_TIMEOUT_MS,
            scripts: Vec::new(),
            pages: vec!["/".into()],
        }
    }
}

impl AdmissionConfig {
    /// The keys [`from_value`](Self::from_value) reads.
    pub const KEYS: [&'static str; 8] = [
        "max_body_bytes",
        "max_active_runs",
        "max_retained_runs",
        "max_stream_clients",
        "max_pending_bodies",
        "body_timeout_ms",
        "scripts",
        "pages",
    ];

    /// Defaults overridden by the keys present in `value`, read by the crate's one
    /// config reader ([`crate::config`]): a non-object is `not_an_object`, a key not in
    /// [`KEYS`](Self::KEYS) `unknown_key`, a value of the wrong JSON type `wrong_type`
    /// (`scripts` and `pages` are lists of strings; a page must start with `/` and lie
    /// outside `/api/`), a number the field cannot hold `out_of_range` (negative; `0`
    /// for the sizes that are at least 1; `max_retained_runs` below `max_active_runs`).
    ///
    /// # Errors
    /// [`ConfigError`].
    pub fn from_value(value: &Value) -> Result<Self, ConfigError> {
        let r = ConfigReader::new(value, &Self::KEYS)?;
        let d = Self::default();
        let positive = |key: &str| -> Result<Option<usize>, ConfigError> {
            match r.usize(key)? {
                Some(0) => Err(ConfigError::OutOfRange {
                    key: r.path(key),
                    expected: "positive integer",
                }),
                n => Ok(n),
            }
        };
        let config = Self {
            max_body_bytes: positive("max_body_bytes")?.unwrap_or(d.max_body_bytes),
            max_active_runs: positive("max_active_runs")?.unwrap_or(d.max_active_runs),
            max_retained_runs: positive("max_retained_runs")?.unwrap_or(d.max_retained_runs),
            max_stream_clients: positive("max_stream_clients")?.unwrap_or(d.max_stream_clients),
            max_pending_bodies: positive("max_pending_bodies")?.unwrap_or(d.max_pending_bodies),
            body_timeout_ms: r.u64("body_timeout_ms")?.unwrap_or(d.body_timeout_ms),
            scripts: match r.get("scripts") {
                None => d.scripts,
                Some(v) => strings(&r, "scripts", v, |_| true)?,
            },
            pages: match r.get("pages") {
                None => d.pages,
                Some(v) => strings(&r, "pages", v, |p| {
                    p.starts_with('/') && !rules::is_api_path(p)
                })?,
            },
        };
        if config.max_retained_runs < config.max_active_runs {
            return Err(ConfigError::OutOfRange {
                key: r.path("max_retained_runs"),
                expected: "integer at least max_active_runs",
            });
        }
        Ok(config)
    }

    /// The config as a JSON object of every key.
    pub fn to_value(&self) -> Value {
        json!({
            "max_body_bytes": self.max_body_bytes,
            "max_active_runs": self.max_active_runs,
            "max_retained_runs": self.max_retained_runs,
            "max_stream_clients": self.max_stream_clients,
            "max_pending_bodies": self.max_pending_bodies,
            "body_timeout_ms": self.body_timeout_ms,
            "scripts": self.scripts,
            "pages": self.pages,
        })
    }
}

fn strings(
    r: &ConfigReader<'_>,
    key: &str,
    v: &Value,
    ok: impl Fn(&str) -> bool,
) -> Result<Vec<String>, ConfigError> {
    let wrong = || ConfigError::WrongType {
        key: r.path(key),
        expected: if key == "pages" {
            "list of paths starting with / outside /api/"
        } else {
            "list of strings"
        },
    };
    v.as_array()
        .ok_or_else(wrong)?
        .iter()
        .map(|s| match s.as_str() {
            Some(s) if ok(s) => Ok(s.to_owned()),
            _ => Err(wrong()),
        })
        .collect()
}

/// The response headers table as a JSON list of `[name, value]` pairs (for hosts and
/// vectors).
pub fn response_headers_value() -> Value {
    Value::Array(
        RESPONSE_HEADERS
            .iter()
            .map(|(n, v)| json!([n, v]))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_and_bodies_are_json() {
        for r in Refusal::ALL {
            assert_eq!(Refusal::from_code(r.code()), Some(r));
            let body: Value = serde_json::from_str(&r.body()).unwrap();
            assert_eq!(body["error"]["code"], r.code());
            assert!((400..600).contains(&r.status()));
        }
        assert_eq!(error_body("nope"), None);
    }

    #[test]
    fn config_bounds() {
        let e = AdmissionConfig::from_value(&json!({"max_active_runs": 5, "max_retained_runs": 4}))
            .unwrap_err();
        assert_eq!((e.code(), e.key()), ("out_of_range", "max_retained_runs"));
        let e = AdmissionConfig::from_value(&json!({"pages": ["/api/x"]})).unwrap_err();
        assert_eq!((e.code(), e.key()), ("wrong_type", "pages"));
        assert_eq!(
            AdmissionConfig::from_value(&json!({})).unwrap(),
            AdmissionConfig::default()
        );
    }
}
