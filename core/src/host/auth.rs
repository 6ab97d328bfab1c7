//! Bearer-token parsing and checking for the hub's upgrade requests.
//!
//! The rules, in the order they are checked (the first that fails is the
//! [`Refusal`]):
//!
//! 1. exactly one `Authorization` header (names compare ASCII-case-insensitively): none,
//!    or an empty value, is [`Refusal::MissingAuthorization`]; two or more are
//!    [`Refusal::DuplicateAuthorization`] (a repeated header is refused, never guessed
//!    at — even when every copy is equal);
//! 2. the value is `<scheme> <token>`, split at the first space; the scheme must be
//!    `Bearer` in any ASCII case, else [`Refusal::NotBearer`];
//! 3. the token with surrounding white space (Unicode `White_Space`) removed must not be
//!    empty, else [`Refusal::EmptyToken`];
//! 4. the token must be known: with a [`TokenTable`] it is compared with every known
//!    token in constant time (no early exit, per entry and over the table), else
//!    [`Refusal::UnknownToken`]. Without a table the host's own authenticator decides
//!    (see [`HubHost`](super::HubHost)).
//!
//! Nothing here looks at anything but the header values: no I/O, no clock.

use std::fmt;

/// Why an upgrade request was refused. Stable snake_case [`code`](Refusal::code)s, in
/// the order the checks run (see the module docs), then the one refusal that is no
/// check ([`Refusal::PendingEvicted`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Refusal {
    /// No `Authorization` header, or an empty one. Code `missing_authorization`.
    MissingAuthorization,
    /// More than one `Authorization` header. Code `duplicate_authorization`.
    DuplicateAuthorization,
    /// The scheme is not `Bearer`. Code `not_bearer`.
    NotBearer,
    /// `Bearer` without a token. Code `empty_token`.
    EmptyToken,
    /// The token is not known (the table has no such token, or the host's authenticator
    /// refused it). Code `unknown_token`.
    UnknownToken,
    /// Not a header check: the connection was still waiting for the host's authenticator
    /// when [`HostConfig::max_pending_connections`](super::HostConfig::max_pending_connections)
    /// newer connections needed its place, so it was refused at once (see
    /// [`HubHost`](super::HubHost)). Code `pending_evicted`.
    PendingEvicted,
}

impl Refusal {
    /// Stable snake_case code of this refusal.
    pub fn code(self) -> &'static str {
        match self {
            Refusal::MissingAuthorization => "missing_authorization",
            Refusal::DuplicateAuthorization => "duplicate_authorization",
            Refusal::NotBearer => "not_bearer",
            Refusal::EmptyToken => "empty_token",
            Refusal::UnknownToken => "unknown_token",
            Refusal::PendingEvicted => "pending_evicted",
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

/// The one `Authorization` header value among `headers` (name/value pairs in arrival
/// order; names compare ASCII-case-insensitively), or the refusal of rule 1.
fn authorization_header<N: AsRef<str>, V: AsRef<str>>(headers: &[(N, V)]) -> Result<&str, Refusal> {
    let mut found: Option<&str> = None;
    for (name, value) in headers {
        if name.as_ref().eq_ignore_ascii_case("authorization") {
            if found.is_some() {
                return Err(Refusal::DuplicateAuthorization);
            }
            found = Some(value.as_ref());
        }
    }
    match found {
        Some(value) if !value.is_empty() => Ok(value),
        _ => Err(Refusal::MissingAuthorization),
    }
}

/// The token of one `Authorization` header value (rules 2 and 3; an empty value is
/// rule 1's [`Refusal::MissingAuthorization`]).
pub fn bearer_token(value: &str) -> Result<&str, Refusal> {
    if value.is_empty() {
        return Err(Refusal::MissingAuthorization);
    }
    let (scheme, rest) = value.split_once(' ').unwrap_or((value, ""));
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err(Refusal::NotBearer);
    }
    let token = rest.trim();
    if token.is_empty() {
        return Err(Refusal::EmptyToken);
    }
    Ok(token)
}

/// A presented bearer token (a secret). Its [`Debug`](fmt::Debug) prints
/// `BearerToken(<redacted>)`, never the token, so logging a hub input, output or machine
/// with `{:?}` leaks nothing; equality compares in constant time. The authenticator gets
/// the value from [`as_str`](Self::as_str) or [`into_string`](Self::into_string).
#[derive(Clone, Eq)]
pub struct BearerToken(String);

impl BearerToken {
    /// Wrap a token.
    pub fn new(token: impl Into<String>) -> Self {
        Self(token.into())
    }

    /// The token itself (hand it to the authenticator only).
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The token itself, by value.
    pub fn into_string(self) -> String {
        self.0
    }
}

impl PartialEq for BearerToken {
    fn eq(&self, other: &Self) -> bool {
        constant_time_eq(self.0.as_bytes(), other.0.as_bytes())
    }
}

impl fmt::Debug for BearerToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("BearerToken(")?;
        f.write_str(REDACTED)?;
        f.write_str(")")
    }
}

/// What [`Debug`](fmt::Debug) prints instead of a secret.
pub const REDACTED: &str = "<redacted>";

/// Header name/value pairs whose [`Debug`](fmt::Debug) prints the value of every
/// `Authorization` header (names compare ASCII-case-insensitively) as `<redacted>`;
/// other headers are printed as they are.
pub struct RedactedHeaders<'a, N, V>(pub &'a [(N, V)]);

impl<N: AsRef<str>, V: AsRef<str>> fmt::Debug for RedactedHeaders<'_, N, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.0.iter().map(|(name, value)| {
                let name = name.as_ref();
                let value = if name.eq_ignore_ascii_case("authorization") {
                    REDACTED
                } else {
                    value.as_ref()
                };
                (name, value)
            }))
            .finish()
    }
}

/// Rules 1–3 over the request's headers: the presented bearer token.
pub fn bearer_from_headers<N: AsRef<str>, V: AsRef<str>>(
    headers: &[(N, V)],
) -> Result<&str, Refusal> {
    authorization_header(headers).and_then(bearer_token)
}

/// The `Authorization` header value a runner sends to present `token`:
/// `Bearer <token>`. `None` for an empty token: no header is sent (the hub then
/// refuses the upgrade with `missing_authorization`).
pub fn authorization_value(token: &str) -> Option<String> {
    if token.is_empty() {
        None
    } else {
        Some(format!("Bearer {token}"))
    }
}

/// Compare two byte strings without an early exit: the time depends on the longer
/// length only (the lengths themselves are not hidden, as with Python's
/// `hmac.compare_digest`).
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff: usize = a.len() ^ b.len();
    for i in 0..a.len().max(b.len()) {
        let x = a.get(i).copied().unwrap_or(0);
        let y = b.get(i).copied().unwrap_or(0);
        diff |= usize::from(x ^ y);
    }
    std::hint::black_box(diff) == 0
}

/// Accepted bearer tokens and the runner id each one authenticates. [`lookup`] compares
/// the presented token with **every** entry in constant time.
///
/// [`lookup`]: TokenTable::lookup
#[derive(Clone, PartialEq, Eq, Default)]
pub struct TokenTable {
    entries: Vec<(String, String)>,
}

impl fmt::Debug for TokenTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never print the tokens.
        f.debug_struct("TokenTable")
            .field("entries", &self.entries.len())
            .finish()
    }
}

impl TokenTable {
    /// A table of `(token, runner id)` pairs. A later pair with the same token replaces
    /// an earlier one (as in a mapping).
    pub fn new<I, T, R>(pairs: I) -> Self
    where
        I: IntoIterator<Item = (T, R)>,
        T: Into<String>,
        R: Into<String>,
    {
        let mut entries: Vec<(String, String)> = Vec::new();
        for (token, runner_id) in pairs {
            let token = token.into();
            let runner_id = runner_id.into();
            match entries.iter_mut().find(|(t, _)| *t == token) {
                Some(entry) => entry.1 = runner_id,
                None => entries.push((token, runner_id)),
            }
        }
        Self { entries }
    }

    /// Number of tokens.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// `true` when no token is accepted.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The runner id `token` authenticates, after comparing it with every entry.
    pub fn lookup(&self, token: &str) -> Option<&str> {
        let mut found: Option<&str> = None;
        for (known, runner_id) in &self.entries {
            if constant_time_eq(known.as_bytes(), token.as_bytes()) {
                found = Some(runner_id.as_str());
            }
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parsing_order() {
        let none: [(&str, &str); 0] = [];
        assert_eq!(
            bearer_from_headers(&none),
            Err(Refusal::MissingAuthorization)
        );
        assert_eq!(
            bearer_from_headers(&[("authorization", "Basic x"), ("AUTHORIZATION", "")]),
            Err(Refusal::DuplicateAuthorization)
        );
        assert_eq!(bearer_token("Basic abc"), Err(Refusal::NotBearer));
        assert_eq!(bearer_token("Bearer"), Err(Refusal::EmptyToken));
        assert_eq!(bearer_token("bEaReR   tok  "), Ok("tok"));
        assert_eq!(bearer_token("Bearer a b"), Ok("a b"));
        assert_eq!(authorization_value("t").as_deref(), Some("Bearer t"));
        assert_eq!(authorization_value(""), None);
    }

    #[test]
    fn table_compares_every_entry() {
        let t = TokenTable::new([("a", "A"), ("bb", "B"), ("a", "A2")]);
        assert_eq!(t.len(), 2);
        assert_eq!(t.lookup("a"), Some("A2"));
        assert_eq!(t.lookup("bb"), Some("B"));
        assert_eq!(t.lookup("b"), None);
        assert_eq!(t.lookup(""), None);
        assert!(constant_time_eq(b"", b""));
        assert!(!constant_time_eq(b"ab", b"abc"));
        assert!(format!("{t:?}").contains("entries: 2"));
    }
}
