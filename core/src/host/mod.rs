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

pub use auth::{Refusal, TokenTable};
pub use hub::{HubHost, HubInput, HubOutput, RunnerActivity};
pub use socket::{InboundFrame, SocketHost, SocketInput, SocketOutput, SocketState};

use serde_json::Value;

/// Default bound of a close handshake with a live peer before the TCP connection is
/// aborted: 2 s.
pub const DEFAULT_CLOSE_TIMEOUT_MS: u64 = 2_000;
/// Default number of disconnected, fully idle runners a hub keeps.
pub const DEFAULT_MAX_IDLE_RUNNERS: usize = 1024;
/// Default number of upgrade requests a hub remembers between the token check and the
/// upgraded socket (the oldest is forgotten first; its socket is then checked again).
pub const DEFAULT_MAX_PENDING_CONNECTIONS: usize = 1024;
/// Default bound of a connection's application event queue. The queue is the host's
/// (its reader stops reading frames while the queue is full: backpressure down to TCP);
/// the bound and its default are the core's.
pub const DEFAULT_MAX_QUEUED_EVENTS: usize = 1024;
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

/// An error of the host machines: local misuse (the transport broke the call order) or
/// a bad configuration. Stable snake_case [`code`](HostError::code)s.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HostError {
    /// The config is not a JSON object. Code `config_not_object`.
    #[error("the host config must be a JSON object")]
    ConfigNotObject,
    /// The config has a key this version does not know. Code `unknown_config_key`.
    #[error("unknown host config key {key:?}")]
    UnknownConfigKey {
        /// The key.
        key: String,
    },
    /// A config key has a value of the wrong type or range. Code
    /// `invalid_config_value`.
    #[error("invalid host config value for {key:?}: expected {expected}")]
    InvalidConfigValue {
        /// The key.
        key: String,
        /// What the key takes.
        expected: &'static str,
    },
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
            HostError::ConfigNotObject => "config_not_object",
            HostError::UnknownConfigKey { .. } => "unknown_config_key",
            HostError::InvalidConfigValue { .. } => "invalid_config_value",
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
    /// (at least 1). Default [`DEFAULT_MAX_PENDING_CONNECTIONS`]. Key
    /// `max_pending_connections`.
    pub max_pending_connections: usize,
    /// Bound of each connection's application event queue (at least 1). Default
    /// [`DEFAULT_MAX_QUEUED_EVENTS`]. Key `max_queued_events`.
    pub max_queued_events: usize,
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
            tokens: None,
        }
    }
}

fn unsigned(key: &str, value: &Value, min: u64) -> Result<u64, HostError> {
    value
        .as_u64()
        .filter(|n| *n >= min)
        .ok_or_else(|| HostError::InvalidConfigValue {
            key: key.to_owned(),
            expected: if min == 0 {
                "a non-negative integer"
            } else {
                "a positive integer"
            },
        })
}

fn size(key: &str, value: &Value, min: u64) -> Result<usize, HostError> {
    usize::try_from(unsigned(key, value, min)?).map_err(|_| HostError::InvalidConfigValue {
        key: key.to_owned(),
        expected: "an integer that fits the platform's size",
    })
}

impl HostConfig {
    /// Read a config from a JSON object with the keys named on the fields (all
    /// optional). An unknown key is [`HostError::UnknownConfigKey`], a value of the
    /// wrong type or range [`HostError::InvalidConfigValue`].
    pub fn from_value(value: &Value) -> Result<Self, HostError> {
        let object = value.as_object().ok_or(HostError::ConfigNotObject)?;
        let mut config = Self::default();
        for (key, v) in object {
            match key.as_str() {
                "close_timeout_ms" => config.close_timeout_ms = unsigned(key, v, 0)?,
                "max_idle_runners" => config.max_idle_runners = size(key, v, 0)?,
                "max_pending_connections" => config.max_pending_connections = size(key, v, 1)?,
                "max_queued_events" => config.max_queued_events = size(key, v, 1)?,
                "tokens" => {
                    config.tokens = match v {
                        Value::Null => None,
                        Value::Object(map) => {
                            let mut pairs = Vec::with_capacity(map.len());
                            for (token, runner_id) in map {
                                let runner_id = runner_id.as_str().ok_or_else(|| {
                                    HostError::InvalidConfigValue {
                                        key: key.clone(),
                                        expected: "an object of token → runner id strings",
                                    }
                                })?;
                                pairs.push((token.clone(), runner_id.to_owned()));
                            }
                            Some(TokenTable::new(pairs))
                        }
                        _ => {
                            return Err(HostError::InvalidConfigValue {
                                key: key.clone(),
                                expected: "an object of token → runner id strings",
                            })
                        }
                    }
                }
                _ => return Err(HostError::UnknownConfigKey { key: key.clone() }),
            }
        }
        Ok(config)
    }
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
        assert_eq!(c.tokens.unwrap().lookup("t"), Some("R"));
        let e = HostConfig::from_value(&json!({"nope": 1})).unwrap_err();
        assert_eq!(e.code(), "unknown_config_key");
        let e = HostConfig::from_value(&json!({"max_queued_events": 0})).unwrap_err();
        assert_eq!(e.code(), "invalid_config_value");
        let e = HostConfig::from_value(&json!({"tokens": {"t": 1}})).unwrap_err();
        assert_eq!(e.code(), "invalid_config_value");
        assert_eq!(
            HostConfig::from_value(&json!([])).unwrap_err().code(),
            "config_not_object"
        );
    }

    #[test]
    fn reasons_are_bounded_at_char_boundaries() {
        let long = "é".repeat(100);
        let cut = bounded_reason(&long);
        assert!(cut.len() <= MAX_CLOSE_REASON_BYTES && cut.len() >= MAX_CLOSE_REASON_BYTES - 1);
        assert_eq!(bounded_reason("x"), "x");
    }
}
