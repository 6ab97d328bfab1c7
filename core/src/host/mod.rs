//! The connection host policy of a WebSocket transport, as sans-IO machines.
//!
//! A transport (Python's `transport_ws`, the Rust `connect` runner, the Node transport)
//! moves bytes; these machines make every decision about the sockets it moves them on:
//!
//! * [`SocketHost`] — one socket, on either side: what a received frame is (a text
//!   frame is delivered, a binary frame is decoded strictly as UTF-8 or dropped with an
//!   `invalid_utf8` peer error), whether a session's frame may still be sent, when the
//!   session is attached and detached (exactly once each), and how the socket ends: a
//!   dead peer (`peer_timeout`) or a failed transport is **aborted** at once; anything
//!   else gets a WebSocket close handshake bounded by
//!   [`HostConfig::close_timeout_ms`], then an abort.
//! * [`HubHost`] — the hub's door and runner registry: the bearer-token check of every
//!   upgrade request ([`auth`], in a documented order, tokens compared in constant time),
//!   HTTP 401 before the upgrade or close code 1008 after it, which runner a socket
//!   serves, when a runner is announced, and which idle runners are evicted beyond
//!   [`HostConfig::max_idle_runners`].
//!
//! Both machines have the common shape: [`handle_input`](SocketHost::handle_input)
//! `(now_ms, input)`, then [`poll_output`](SocketHost::poll_output) until `None`, and
//! [`poll_timeout`](SocketHost::poll_timeout) for the absolute deadline at which the
//! host feeds `Timeout`. No clock, no I/O, no randomness.

pub mod auth;
mod hub;
mod socket;

pub use auth::{BearerToken, Refusal, TokenTable};
pub use hub::{HubHost, HubInput, HubOutput, RunnerActivity};
pub use socket::{InboundFrame, SocketHost, SocketInput, SocketOutput, SocketState};

use serde_json::{Map, Value};

use crate::config::{ConfigError, ConfigReader};

/// Default bound of a close handshake with a live peer before the TCP connection is
/// aborted: 2 s.
pub const DEFAULT_CLOSE_TIMEOUT_MS: u64 = 2_000;
/// Default number of disconnected, fully idle runners a hub keeps.
pub const DEFAULT_MAX_IDLE_RUNNERS: usize = 1024;
/// Default number of upgrade requests a hub remembers between the token check and the
/// upgraded socket (the oldest is dropped first: an accepted one's socket is then
/// checked again, one still awaiting the authenticator is refused with
/// [`Refusal::PendingEvicted`]; see [`HubHost`]).
pub const DEFAULT_MAX_PENDING_CONNECTIONS: usize = 1024;
/// Default bound of a connection's application event queue. The queue is the host's
/// (its reader stops reading frames while the queue is full: backpressure down to TCP);
/// the bound and its default are the core's.
pub const DEFAULT_MAX_QUEUED_EVENTS: usize = 1024;
/// Default bound of a paused socket's backlog: 1 MiB. While a connection's event queue
/// is full its reader stops reading, but frames the WebSocket library had already read
/// (the rest of the read that filled the queue) still arrive; the host keeps them, in
/// order, in a backlog of at most this many bytes (the UTF-8 bytes of the frames' text)
/// and hands them to the session as the queue drains. A socket whose backlog grows
/// beyond the bound fails (the host feeds [`SocketInput::Failed`]: the socket is aborted
/// and the session resumes on the next connection).
pub const DEFAULT_MAX_BACKLOG_BYTES: usize = 1024 * 1024;
/// Close code of a normal closure (RFC 6455 §7.4.1).
pub const CLOSE_NORMAL: u16 = 1000;
/// Close code of a policy violation: an upgraded socket whose token is refused.
pub const CLOSE_POLICY_VIOLATION: u16 = 1008;
/// HTTP status of a refused upgrade request.
pub const STATUS_UNAUTHORIZED: u16 = 401;
/// Body of the HTTP 401 response.
pub const UNAUTHORIZED_BODY: &str = "a valid bearer token is required\n";
/// Reason of the 1008 close of an upgraded socket whose token is refused.
pub const UNAUTHORIZED_REASON: &str = "a valid bearer token is required";
/// Close reason of a socket replaced by a newer socket of the same runner.
pub const REPLACED_REASON: &str = "replaced";
/// The session close reason of a dead peer: the socket is aborted, never closed with a
/// handshake.
pub const PEER_TIMEOUT: &str = "peer_timeout";
/// Most UTF-8 bytes of a close reason (a close frame's payload is at most 125 bytes,
/// two of them the code). Longer reasons are cut at a character boundary.
pub const MAX_CLOSE_REASON_BYTES: usize = 123;

/// An error of the host machines: local misuse (the transport broke the call order).
/// Stable snake_case [`code`](HostError::code)s. A bad configuration is the crate's
/// [`ConfigError`] ([`HostConfig::from_value`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HostError {
    /// A socket input other than `Opened`, `Close`, `Failed`, `SocketClosed` or
    /// `Timeout` before `Opened`. Code `not_opened`.
    #[error("the socket was not opened yet")]
    NotOpened,
    /// `Opened` on a socket machine that was opened before. Code `already_opened`.
    #[error("the socket was already opened")]
    AlreadyOpened,
    /// A close code a WebSocket endpoint may not send (RFC 6455 §7.4). Code
    /// `invalid_close_code`.
    #[error("close code {code} may not be sent")]
    InvalidCloseCode {
        /// The code.
        code: u16,
    },
    /// `Authenticated` for a connection that awaits no authenticator answer. Code
    /// `unknown_connection`.
    #[error("connection {conn} awaits no authentication")]
    UnknownConnection {
        /// The connection id.
        conn: u64,
    },
    /// `Request` for a connection id that is still pending, or `Upgraded` while the
    /// authenticator's answer for it is outstanding. Code `connection_pending`.
    #[error("connection {conn} is already being checked")]
    ConnectionPending {
        /// The connection id.
        conn: u64,
    },
}

impl HostError {
    /// Stable snake_case code of this error.
    pub fn code(&self) -> &'static str {
        match self {
            HostError::NotOpened => "not_opened",
            HostError::AlreadyOpened => "already_opened",
            HostError::InvalidCloseCode { .. } => "invalid_close_code",
            HostError::UnknownConnection { .. } => "unknown_connection",
            HostError::ConnectionPending { .. } => "connection_pending",
        }
    }
}

/// Configuration of the host machines. Every field has a documented default; read one
/// from JSON with [`HostConfig::from_value`].
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct HostConfig {
    /// Longest close handshake with a live peer; then the socket is aborted. Default
    /// [`DEFAULT_CLOSE_TIMEOUT_MS`]. Key `close_timeout_ms`.
    pub close_timeout_ms: u64,
    /// Disconnected, fully idle runners a hub keeps (the oldest are evicted first).
    /// Default [`DEFAULT_MAX_IDLE_RUNNERS`]. Key `max_idle_runners`.
    pub max_idle_runners: usize,
    /// Upgrade requests a hub remembers between the token check and the upgraded socket
    /// (at least 1; beyond it the oldest is dropped, see [`HubHost`]). Default [`DEFAULT_MAX_PENDING_CONNECTIONS`]. Key
    /// `max_pending_connections`.
    pub max_pending_connections: usize,
    /// Bound of each connection's application event queue (at least 1). Default
    /// [`DEFAULT_MAX_QUEUED_EVENTS`]. Key `max_queued_events`.
    pub max_queued_events: usize,
    /// Bound of a paused socket's backlog, bytes (at least 1): frames that arrive while
    /// the event queue is full wait in it; a socket whose backlog exceeds it fails. Default
    /// [`DEFAULT_MAX_BACKLOG_BYTES`]. Key `max_backlog_bytes`.
    pub max_backlog_bytes: usize,
    /// Accepted bearer tokens and their runner ids; `None` (the default): the hub asks
    /// the host's authenticator ([`HubOutput::Authenticate`]). Key `tokens` (an object
    /// token → runner id).
    pub tokens: Option<TokenTable>,
}

impl std::fmt::Debug for HostConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostConfig")
            .field("close_timeout_ms", &self.close_timeout_ms)
            .field("max_idle_runners", &self.max_idle_runners)
            .field("max_pending_connections", &self.max_pending_connections)
            .field("max_queued_events", &self.max_queued_events)
            .field("max_backlog_bytes", &self.max_backlog_bytes)
            .field("tokens", &self.tokens)
            .finish()
    }
}

impl Default for HostConfig {
    fn default() -> Self {
        Self {
            close_timeout_ms: DEFAULT_CLOSE_TIMEOUT_MS,
            max_idle_runners: DEFAULT_MAX_IDLE_RUNNERS,
            max_pending_connections: DEFAULT_MAX_PENDING_CONNECTIONS,
            max_queued_events: DEFAULT_MAX_QUEUED_EVENTS,
            max_backlog_bytes: DEFAULT_MAX_BACKLOG_BYTES,
            tokens: None,
        }
    }
}

impl HostConfig {
    /// The keys [`from_value`](Self::from_value) reads.
    pub const KEYS: [&'static str; 6] = [
        "close_timeout_ms",
        "max_idle_runners",
        "max_pending_connections",
        "max_queued_events",
        "max_backlog_bytes",
        "tokens",
    ];

    /// Defaults overridden by the keys present in `value` (see [`KEYS`](Self::KEYS)),
    /// read by the crate's one config reader ([`crate::config`]): a non-object is
    /// `not_an_object`, a key not in [`KEYS`](Self::KEYS) `unknown_key`, a value of the
    /// wrong JSON type `wrong_type` (`tokens` must be `null` or an object whose values
    /// are runner id strings; the error names the key `tokens`, never a token), a
    /// number the field cannot hold `out_of_range` (negative; `0` for
    /// `max_pending_connections`, `max_queued_events` and `max_backlog_bytes`, which are
    /// at least 1).
    ///
    /// # Errors
    /// [`ConfigError`].
    pub fn from_value(value: &Value) -> Result<Self, ConfigError> {
        let r = ConfigReader::new(value, &Self::KEYS)?;
        let d = Self::default();
        Ok(Self {
            close_timeout_ms: r.u64("close_timeout_ms")?.unwrap_or(d.close_timeout_ms),
            max_idle_runners: r.usize("max_idle_runners")?.unwrap_or(d.max_idle_runners),
            max_pending_connections: positive(&r, "max_pending_connections")?
                .unwrap_or(d.max_pending_connections),
            max_queued_events: positive(&r, "max_queued_events")?.unwrap_or(d.max_queued_events),
            max_backlog_bytes: positive(&r, "max_backlog_bytes")?.unwrap_or(d.max_backlog_bytes),
            tokens: match r.get("tokens") {
                None | Some(Value::Null) => d.tokens,
                Some(Value::Object(map)) => Some(token_table(&r, map)?),
                Some(_) => return Err(tokens_type(&r)),
            },
        })
    }

    /// The config as a JSON object of its keys, for a host to log or a test to compare:
    /// `tokens` is the number of table entries (`null` without a table); the tokens
    /// themselves never leave the table.
    pub fn to_value(&self) -> Value {
        serde_json::json!({
            "close_timeout_ms": self.close_timeout_ms,
            "max_idle_runners": self.max_idle_runners,
            "max_pending_connections": self.max_pending_connections,
            "max_queued_events": self.max_queued_events,
            "max_backlog_bytes": self.max_backlog_bytes,
            "tokens": self.tokens.as_ref().map(TokenTable::len),
        })
    }
}

/// A size of at least 1: `out_of_range` for 0.
fn positive(r: &ConfigReader<'_>, key: &str) -> Result<Option<usize>, ConfigError> {
    match r.usize(key)? {
        Some(0) => Err(ConfigError::OutOfRange {
            key: r.path(key),
            expected: "positive integer",
        }),
        n => Ok(n),
    }
}

fn tokens_type(r: &ConfigReader<'_>) -> ConfigError {
    ConfigError::WrongType {
        key: r.path("tokens"),
        expected: "null or an object of token → runner id strings",
    }
}

fn token_table(r: &ConfigReader<'_>, map: &Map<String, Value>) -> Result<TokenTable, ConfigError> {
    let mut pairs = Vec::with_capacity(map.len());
    for (token, runner_id) in map {
        // The error names `tokens`, not `tokens.<token>`: a token is a secret.
        let runner_id = runner_id.as_str().ok_or_else(|| tokens_type(r))?;
        pairs.push((token.clone(), runner_id.to_owned()));
    }
    Ok(TokenTable::new(pairs))
}

/// Cut `reason` to at most [`MAX_CLOSE_REASON_BYTES`] at a character boundary.
pub(crate) fn bounded_reason(reason: &str) -> String {
    if reason.len() <= MAX_CLOSE_REASON_BYTES {
        return reason.to_owned();
    }
    let mut end = MAX_CLOSE_REASON_BYTES;
    while !reason.is_char_boundary(end) {
        end = end.saturating_sub(1);
    }
    reason.get(..end).unwrap_or_default().to_owned()
}

/// `true` for a close code an endpoint may send in a close frame (RFC 6455 §7.4):
/// 1000–1003, 1007–1011, 3000–4999.
pub fn is_sendable_close_code(code: u16) -> bool {
    matches!(code, 1000..=1003 | 1007..=1011 | 3000..=4999)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn config_keys_and_errors() {
        let c =
            HostConfig::from_value(&json!({"close_timeout_ms": 5, "tokens": {"t": "R"}})).unwrap();
        assert_eq!(c.close_timeout_ms, 5);
        assert_eq!(c.tokens.as_ref().unwrap().lookup("t"), Some("R"));
        assert_eq!(c.to_value()["tokens"], json!(1));
        assert_eq!(
            HostConfig::from_value(&json!({})).unwrap(),
            HostConfig::default()
        );
        let err = |v| {
            let e = HostConfig::from_value(&v).unwrap_err();
            (e.code(), e.key().to_owned())
        };
        assert_eq!(err(json!({"nope": 1})), ("unknown_key", "nope".into()));
        assert_eq!(
            err(json!({"max_queued_events": 0})),
            ("out_of_range", "max_queued_events".into())
        );
        assert_eq!(
            err(json!({"max_backlog_bytes": 0})),
            ("out_of_range", "max_backlog_bytes".into())
        );
        assert_eq!(
            HostConfig::from_value(&json!({"max_backlog_bytes": 7}))
                .unwrap()
                .max_backlog_bytes,
            7
        );
        assert_eq!(
            err(json!({"close_timeout_ms": -1})),
            ("out_of_range", "close_timeout_ms".into())
        );
        assert_eq!(
            err(json!({"max_idle_runners": 1.5})),
            ("wrong_type", "max_idle_runners".into())
        );
        assert_eq!(
            err(json!({"tokens": {"t": 1}})),
            ("wrong_type", "tokens".into())
        );
        assert_eq!(
            err(json!({"tokens": ["t"]})),
            ("wrong_type", "tokens".into())
        );
        assert_eq!(err(json!([])), ("not_an_object", String::new()));
    }

    #[test]
    fn reasons_are_bounded_at_char_boundaries() {
        let long = "é".repeat(100);
        let cut = bounded_reason(&long);
        assert!(cut.len() <= MAX_CLOSE_REASON_BYTES && cut.len() >= MAX_CLOSE_REASON_BYTES - 1);
        assert_eq!(bounded_reason("x"), "x");
    }
}
