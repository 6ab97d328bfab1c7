//! What counts as sensitive, and how identifiers are made safe for evidence.
//!
//! The contract never carries secrets: profiles may name *credential routes*
//! (references such as `env:ANTHROPIC_API_KEY` or `vault:team/anthropic`), while credential
//! resolution stays rein-local. This module holds the one definition of "sensitive" used
//! by strict model parsing (`sensitive_metadata`), by profile resolution (`unsafe`) and by
//! evidence redaction.
//!
//! # Sensitive keys
//!
//! A key is split into lowercase words (at `_`, `-`, `.`, spaces and camelCase
//! boundaries; so `sessionKey`, `session_key`, `SESSION-KEY` and `session.key` are the
//! same words). It is sensitive when
//!
//! * a word is one of `secret`, `secrets`, `password`, `passwd`, `passphrase`, `pwd`,
//!   `token`, `credential`, `credentials`, `apikey`, `bearer`, `cookie`,
//!   `authorization`, `auth`, `jwt`, `pat`, or a compound written without a separator
//!   (`sessionkey`, `sshkey`, `privatekey`, `secretkey`, `accesskey`, `encryptionkey`,
//!   `signingkey`, `authkey`, `authtoken`, `accesstoken`, `refreshtoken`,
//!   `sessiontoken`, `apitoken`, `clientsecret`);
//! * two adjacent words are `api key`, `private key`, `access key`, `secret key`,
//!   `signing key`, `client secret`, `auth header`; or
//! * its last word is `key` or `keys` (`key`, `ssh_key`, `sessionKey`,
//!   `encryption_key`), unless the word before it is one of `public`, `sort`,
//!   `partition`, `primary`, `foreign`, `cache`, `idempotency`, `dedup`, `dedupe`,
//!   `lookup`, `routing`, `shard`, `group`, `map`, `hash` (a key that is not a secret);
//!
//! — unless the key names a *reference* to one or a *measurement* or *property* of one:
//! its last word is `ref`, `refs`, `route`, `routes`, `name`, `names`, `id`, `ids`,
//! `env`, `var`, `url`, `uri`, `endpoint`, `provider` (a reference) or `count`, `counts`,
//! `limit`, `limits`, `budget`, `usage`, `total`, `totals`, `length`, `size`, `type`,
//! `kind`, `ttl`, `expiry`, `expires`, `at`, `method`, `mode`, `scheme` (a measurement or
//! property), or its first word is `max`, `min` or `num`. So `api_key`, `githubToken`,
//! `db-password`, `ssh_key` and `auth` are sensitive; `api_key_ref`, `token_env`,
//! `token_count`, `max_token`, `auth_type` and `sort_key` are not.
//!
//! # Values shaped like credential material
//!
//! A string is credential-shaped when it contains a PEM private-key block
//! (`-----BEGIN … PRIVATE KEY`), starts with an HTTP `Bearer `/`Basic ` scheme followed by
//! a token, embeds a password in a URL (`scheme://user:pass@host`), or any of its words
//! (split at whitespace, quotes, `=`, `,`, `;`, `(`, `)`, `<`, `>`, `:`, `/`, `@`, `?`,
//! `&`, `#`) begins with a well-known secret prefix followed by enough key characters
//! (letters, digits, `_`, `-`):
//!
//! * always: `sk-ant-` (Anthropic, ≥ 8 more), `hf_` (Hugging Face), `npm_` (npm),
//!   `pypi-` (PyPI) (≥ 16 more);
//! * `sk-` (OpenAI; ≥ 20 more, including a digit and an uppercase letter, so that
//!   ordinary words such as `sk-learn-compatible` are not taken for keys);
//! * `sk_live_`, `sk_test_`, `rk_live_` (≥ 8 more), `ghp_`, `gho_`, `ghu_`, `ghs_`,
//!   `ghr_`, `github_pat_` (≥ 20 more), `glpat-` (≥ 16 more), `xoxb-`, `xoxp-`, `xoxa-`,
//!   `xoxs-`, `xoxe-`, `xoxr-` (≥ 8 more);
//! * `AKIA`/`ASIA` + 16 uppercase letters or digits (AWS access key ids), `AIza` + 35
//!   (Google API keys);
//!
//! or it is a JSON Web Token (three base64url segments, the first starting `eyJ`, ≥ 32
//! characters in all).
//!
//! Evidence identifiers are held to more: [`identifier_carries_secret`] also looks at
//! the pieces between `.` `:` `/` `@` `+` `~` and for [random-looking
//! tokens](looks_like_random_token).
//!
//! These rules are deliberately conservative heuristics: they catch the common ways a
//! secret is pasted inline, they do not prove a value is harmless. Evidence therefore
//! does not rely on them alone — it carries no free text at all (see
//! [`evidence`](super::evidence)).

use serde_json::Value;

use crate::fields::join;

const SENSITIVE_WORDS: &[&str] = &[
    "secret",
    "secrets",
    "password",
    "passwd",
    "passphrase",
    "pwd",
    "token",
    "credential",
    "credentials",
    "apikey",
    "bearer",
    "cookie",
    "authorization",
    "auth",
    "jwt",
    "pat",
    // Compounds written without a separator (`sessionkey`, `SSHKEY`).
    "sessionkey",
    "sshkey",
    "privatekey",
    "secretkey",
    "accesskey",
    "encryptionkey",
    "signingkey",
    "authkey",
    "authtoken",
    "accesstoken",
    "refreshtoken",
    "sessiontoken",
    "apitoken",
    "clientsecret",
];

/// A key whose *last* word is one of these names key material (`ssh_key`,
/// `sessionKey`, `encryption_key`, `key`) unless the word before it says the key is not a
/// secret (see [`NON_SECRET_KEY_QUALIFIERS`]).
const KEY_WORDS: &[&str] = &["key", "keys"];

/// Words that, directly before a final `key`, name a non-secret key: `sort_key`,
/// `partition_key`, `public_key`, `idempotency_key`, …
const NON_SECRET_KEY_QUALIFIERS: &[&str] = &[
    "public",
    "sort",
    "partition",
    "primary",
    "foreign",
    "cache",
    "idempotency",
    "dedup",
    "dedupe",
    "lookup",
    "routing",
    "shard",
    "group",
    "map",
    "hash",
];

const SENSITIVE_PAIRS: &[(&str, &str)] = &[
    ("api", "key"),
    ("private", "key"),
    ("access", "key"),
    ("secret", "key"),
    ("signing", "key"),
    ("client", "secret"),
    ("auth", "header"),
];

const REFERENCE_SUFFIXES: &[&str] = &[
    "ref", "refs", "route", "routes", "name", "names", "id", "ids", "env", "var", "count",
    "counts", "limit", "limits", "budget", "usage", "total", "totals", "length", "size", "type",
    "kind", "ttl", "expiry", "expires", "at", "url", "uri", "endpoint", "method", "mode", "scheme",
    "provider",
];

const MEASURE_PREFIXES: &[&str] = &["max", "min", "num"];

/// Split a key into lowercase words at separators and camelCase boundaries.
fn words(key: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut prev_lower = false;
    for ch in key.chars() {
        if !ch.is_alphanumeric() {
            if !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
            prev_lower = false;
            continue;
        }
        if ch.is_uppercase() && prev_lower && !cur.is_empty() {
            out.push(std::mem::take(&mut cur));
        }
        prev_lower = ch.is_lowercase() || ch.is_ascii_digit();
        cur.extend(ch.to_lowercase());
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// `true` when a metadata or profile key names secret material (see the module docs).
pub fn is_sensitive_key(key: &str) -> bool {
    let w = words(key);
    if w.last()
        .is_some_and(|last| REFERENCE_SUFFIXES.contains(&last.as_str()))
        || w.first()
            .is_some_and(|first| MEASURE_PREFIXES.contains(&first.as_str()))
    {
        return false;
    }
    let last_is_key = match w.as_slice() {
        [] => false,
        [.., before, last] if KEY_WORDS.contains(&last.as_str()) => {
            !NON_SECRET_KEY_QUALIFIERS.contains(&before.as_str())
        }
        [.., last] => KEY_WORDS.contains(&last.as_str()),
    };
    last_is_key
        || w.iter().any(|x| SENSITIVE_WORDS.contains(&x.as_str()))
        || w.windows(2)
            .any(|p| matches!(p, [a, b] if SENSITIVE_PAIRS.contains(&(a.as_str(), b.as_str()))))
}

fn key_chars(s: &str) -> usize {
    s.chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
        .count()
}

fn word_is_secret(w: &str) -> bool {
    // Always-secret prefixes: no character-class condition, only a minimum length.
    const ALWAYS: &[(&str, usize)] = &[("sk-ant-", 8), ("hf_", 16), ("npm_", 16), ("pypi-", 16)];
    for (prefix, min) in ALWAYS {
        if let Some(rest) = w.strip_prefix(prefix) {
            if key_chars(rest) >= *min {
                return true;
            }
        }
    }
    if let Some(rest) = w.strip_prefix("sk-") {
        let key: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
            .collect();
        if key.len() >= 20
            && key.chars().any(|c| c.is_ascii_digit())
            && key.chars().any(|c| c.is_ascii_uppercase())
        {
            return true;
        }
    }
    const PREFIXES: &[(&str, usize)] = &[
        ("sk_live_", 8),
        ("sk_test_", 8),
        ("rk_live_", 8),
        ("ghp_", 20),
        ("gho_", 20),
        ("ghu_", 20),
        ("ghs_", 20),
        ("ghr_", 20),
        ("github_pat_", 20),
        ("glpat-", 16),
        ("xoxb-", 8),
        ("xoxp-", 8),
        ("xoxa-", 8),
        ("xoxs-", 8),
        ("xoxe-", 8),
        ("xoxr-", 8),
    ];
    for (prefix, min) in PREFIXES {
        if let Some(rest) = w.strip_prefix(prefix) {
            if key_chars(rest) >= *min {
                return true;
            }
        }
    }
    for prefix in ["AKIA", "ASIA"] {
        if let Some(rest) = w.strip_prefix(prefix) {
            let n = rest
                .chars()
                .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
                .count();
            if n >= 16 {
                return true;
            }
        }
    }
    if let Some(rest) = w.strip_prefix("AIza") {
        if key_chars(rest) >= 35 {
            return true;
        }
    }
    // JSON Web Token: header.payload.signature, base64url, header starts with `{"` → `eyJ`.
    if w.starts_with("eyJ") && w.len() >= 32 {
        let parts: Vec<&str> = w.split('.').collect();
        if parts.len() == 3
            && parts.iter().all(|p| {
                !p.is_empty()
                    && p.chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '=')
            })
        {
            return true;
        }
    }
    false
}

/// `true` when a URL in `s` carries a password in its userinfo (`scheme://user:pass@host`).
fn url_with_password(s: &str) -> bool {
    let mut rest = s;
    while let Some((_, after)) = rest.split_once("://") {
        let authority_end = after
            .find(|c: char| c == '/' || c == '?' || c == '#' || c.is_whitespace())
            .unwrap_or(after.len());
        let authority = &after[..authority_end];
        if let Some(at) = authority.rfind('@') {
            if authority[..at].contains(':') {
                return true;
            }
        }
        rest = after;
    }
    false
}

/// `true` when `s` looks like inline credential material (see the module docs).
pub fn looks_like_credential(s: &str) -> bool {
    if s.contains("-----BEGIN") && s.contains("PRIVATE KEY") {
        return true;
    }
    let trimmed = s.trim_start();
    for scheme in ["bearer ", "basic "] {
        if trimmed.len() > scheme.len()
            && trimmed.is_char_boundary(scheme.len())
            && trimmed[..scheme.len()].eq_ignore_ascii_case(scheme)
            && key_chars(trimmed[scheme.len()..].trim_start()) >= 8
        {
            return true;
        }
    }
    if url_with_password(s) {
        return true;
    }
    s.split(|c: char| {
        c.is_whitespace()
            || matches!(
                c,
                '"' | '\''
                    | '`'
                    | '='
                    | ','
                    | ';'
                    | '('
                    | ')'
                    | '<'
                    | '>'
                    | ':'
                    | '/'
                    | '@'
                    | '?'
                    | '&'
                    | '#'
            )
    })
    .any(word_is_secret)
}

/// The first sensitive entry of an open object (a sensitive key, or a credential-shaped
/// string at any depth), as a path relative to the object; `None` when clean.
pub fn find_sensitive(value: &Value) -> Option<String> {
    fn walk(v: &Value, path: &str) -> Option<String> {
        match v {
            Value::String(s) => looks_like_credential(s).then(|| path.to_owned()),
            Value::Array(items) => items
                .iter()
                .enumerate()
                .find_map(|(i, x)| walk(x, &join(path, &i.to_string()))),
            Value::Object(map) => map.iter().find_map(|(k, x)| {
                let p = join(path, k);
                if is_sensitive_key(k) || looks_like_credential(k) {
                    Some(p)
                } else {
                    walk(x, &p)
                }
            }),
            _ => None,
        }
    }
    walk(value, "")
}

/// `true` when `s` is a credential-route *reference* rather than a value: `scheme:name`
/// with a scheme of lowercase ASCII letters, digits, `+`, `.` or `-` starting with a
/// letter, a non-empty name without whitespace, and nothing credential-shaped.
/// `env:ANTHROPIC_API_KEY`, `vault:team/anthropic` and `keychain:gh` are references.
pub fn is_credential_reference(s: &str) -> bool {
    let Some((scheme, name)) = s.split_once(':') else {
        return false;
    };
    let mut chars = scheme.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "+.-".contains(c))
        && !name.is_empty()
        && !name.starts_with("//")
        && !name.chars().any(char::is_whitespace)
        && !looks_like_credential(s)
}

/// The text that replaces a redacted identifier.
pub const REDACTED: &str = "[redacted]";

/// Longest `ref`-kind identifier, in characters.
pub const MAX_REF_CHARS: usize = 128;

/// Longest `repository`- or `artifact`-kind identifier, in characters.
pub const MAX_LOCATOR_CHARS: usize = 256;

/// The shape an evidence identifier must have (see [`safe_identifier_as`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum IdentifierKind {
    /// A record reference, id or name (profile ref, rein id, model, sandbox id, the
    /// correlation refs, tool names): 1–128 characters of `[A-Za-z0-9._:/@+-]`.
    Ref,
    /// A repository: a URL loses its userinfo, query and fragment, then 1–256 characters
    /// of `[A-Za-z0-9._:/@+~-]`.
    Repository,
    /// A commit: 7–64 hexadecimal digits.
    Commit,
    /// An artifact reference: `scheme:ref` (scheme `[a-z][a-z0-9+.-]*`, ref of the
    /// `repository` characters; a URL loses userinfo, query and fragment) or a relative
    /// path of `[A-Za-z0-9._+-]` segments joined by `/` with no empty or `..` segment,
    /// which has a `/` or a `.extension`; at most 256 characters.
    Artifact,
}

impl IdentifierKind {
    /// The kind's name: `ref`, `repository`, `commit`, `artifact`.
    pub fn as_str(self) -> &'static str {
        match self {
            IdentifierKind::Ref => "ref",
            IdentifierKind::Repository => "repository",
            IdentifierKind::Commit => "commit",
            IdentifierKind::Artifact => "artifact",
        }
    }

    /// The kind named `name` (see [`as_str`](Self::as_str)).
    pub fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "ref" => IdentifierKind::Ref,
            "repository" => IdentifierKind::Repository,
            "commit" => IdentifierKind::Commit,
            "artifact" => IdentifierKind::Artifact,
            _ => return None,
        })
    }

    fn well_shaped(self, s: &str) -> bool {
        let n = s.chars().count();
        let ref_char = |c: char| c.is_ascii_alphanumeric() || "._:/@+-".contains(c);
        let loc_char = |c: char| ref_char(c) || c == '~';
        match self {
            IdentifierKind::Ref => (1..=MAX_REF_CHARS).contains(&n) && s.chars().all(ref_char),
            IdentifierKind::Repository => {
                (1..=MAX_LOCATOR_CHARS).contains(&n) && s.chars().all(loc_char)
            }
            IdentifierKind::Commit => {
                (7..=64).contains(&n) && s.chars().all(|c| c.is_ascii_hexdigit())
            }
            IdentifierKind::Artifact => {
                if !(1..=MAX_LOCATOR_CHARS).contains(&n) {
                    return false;
                }
                if let Some((scheme, rest)) = s.split_once(':') {
                    let mut sc = scheme.chars();
                    return sc.next().is_some_and(|c| c.is_ascii_lowercase())
                        && sc.all(|c| {
                            c.is_ascii_lowercase() || c.is_ascii_digit() || "+.-".contains(c)
                        })
                        && !rest.is_empty()
                        && rest.chars().all(loc_char);
                }
                let path_char = |c: char| c.is_ascii_alphanumeric() || "._+-/".contains(c);
                let segments: Vec<&str> = s.split('/').collect();
                let last = segments.last().copied().unwrap_or_default();
                s.chars().all(path_char)
                    && segments.iter().all(|g| !g.is_empty() && *g != "..")
                    && (segments.len() > 1
                        || last
                            .rsplit_once('.')
                            .is_some_and(|(a, b)| !a.is_empty() && !b.is_empty()))
            }
        }
    }
}

/// Strip userinfo, query and fragment from a value of the form `scheme://…`. Returns the
/// value unchanged when it is not such a URL.
fn strip_url(s: &str) -> (String, bool) {
    let Some((scheme, after)) = s.split_once("://") else {
        return (s.to_owned(), false);
    };
    let head = format!("{scheme}://");
    let end = after.find(['?', '#']).unwrap_or(after.len());
    let mut changed = end < after.len();
    let kept = &after[..end];
    let authority_end = kept.find('/').unwrap_or(kept.len());
    let authority = &kept[..authority_end];
    let host = match authority.rsplit_once('@') {
        Some((_, host)) => {
            changed = true;
            host
        }
        None => authority,
    };
    (format!("{head}{host}{}", &kept[authority_end..]), changed)
}

/// `true` when `run` (ASCII letters and digits only) looks like a random key: at least 24
/// characters with at least two uppercase and two lowercase letters, where the character
/// class (upper, lower, digit) changes between at least 40 % of adjacent characters and
/// fewer than 65 % of lowercase letters are followed by another lowercase letter. Random
/// base62 keys change class at about 60 % of positions and continue lowercase about 42 %
/// of the time; written words and camelCase names (`MyVeryLongRepositoryName2024`)
/// continue lowercase most of the time. Lowercase hex (commits, container ids) has no
/// uppercase and never matches. A heuristic: it catches most pasted keys (about 94 % of
/// random 24-character and 98 % of 40-character base62 strings), not all.
pub fn looks_like_random_token(run: &str) -> bool {
    let n = run.chars().count();
    if n < 24 || !run.chars().all(|c| c.is_ascii_alphanumeric()) {
        return false;
    }
    let upper = run.chars().filter(char::is_ascii_uppercase).count();
    let lower = run.chars().filter(char::is_ascii_lowercase).count();
    if upper < 2 || lower < 2 {
        return false;
    }
    let class = |c: char| {
        if c.is_ascii_uppercase() {
            0
        } else if c.is_ascii_lowercase() {
            1
        } else {
            2
        }
    };
    let chars: Vec<char> = run.chars().collect();
    let pairs = || chars.iter().zip(chars.iter().skip(1));
    let changes = pairs().filter(|(a, b)| class(**a) != class(**b)).count();
    let after_lower: Vec<char> = pairs()
        .filter(|(a, _)| a.is_ascii_lowercase())
        .map(|(_, b)| *b)
        .collect();
    let lower_lower = after_lower
        .iter()
        .filter(|c| c.is_ascii_lowercase())
        .count();
    // Counts are bounded by the string's length, so the products cannot saturate.
    changes.saturating_mul(5) >= n.saturating_sub(1).saturating_mul(2)
        && lower_lower.saturating_mul(100) < after_lower.len().saturating_mul(65)
}

/// `true` when an identifier carries credential material: [`looks_like_credential`] on
/// the whole, a well-known secret prefix on any piece between `.`, `:`, `/`, `@`, `+`,
/// `~`, or a [random-looking](looks_like_random_token) run of letters and digits.
pub fn identifier_carries_secret(s: &str) -> bool {
    looks_like_credential(s)
        || s.split(['.', ':', '/', '@', '+', '~']).any(word_is_secret)
        || s.split(|c: char| !c.is_ascii_alphanumeric())
            .any(looks_like_random_token)
}

/// Make `s` safe as an evidence identifier of kind `kind`: a URL (`scheme://…`, not for
/// commits) loses its userinfo, query and fragment; then a value that does not have the
/// kind's shape, or that [carries a secret](identifier_carries_secret), becomes
/// [`REDACTED`]. Returns the text and whether it differs from `s`.
pub fn safe_identifier_as(kind: IdentifierKind, s: &str) -> (String, bool) {
    let (text, changed) = if kind == IdentifierKind::Commit {
        (s.to_owned(), false)
    } else {
        strip_url(s)
    };
    if !kind.well_shaped(&text) || identifier_carries_secret(&text) {
        return (REDACTED.to_owned(), true);
    }
    (text, changed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys() {
        for k in [
            "api_key",
            "apiKey",
            "githubToken",
            "db-password",
            "client_secret",
            "PRIVATE_KEY",
            "Authorization",
        ] {
            assert!(is_sensitive_key(k), "{k}");
        }
        for k in [
            "api_key_ref",
            "token_env",
            "max_tokens",
            "token_count",
            "max_token",
            "tokenizer",
            "path",
            "secret_name",
            "team",
        ] {
            assert!(!is_sensitive_key(k), "{k}");
        }
    }

    #[test]
    fn values() {
        for v in [
            "sk-ant-api03-Xk9fQ2mZpL7vR4tY8wB1nC6d",
            "ghp_abcdefghijklmnopqrstuvwxyz0123",
            "AKIAABCDEFGHIJKLMNOP",
            "Bearer abcdefghijklmnop",
            "https://bob:hunter2@example.com/repo.git",
            "-----BEGIN RSA PRIVATE KEY-----\nabc",
            "token=xoxb-123456789-abc",
            "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJlLXZhbHVl",
        ] {
            assert!(looks_like_credential(v), "{v}");
        }
        for v in [
            "claude-sonnet-4",
            "sk-short",
            "sk-learn-compatible-model-version2",
            "https://github.com/org/repo.git",
            "env:ANTHROPIC_API_KEY",
            "ask-me-anything",
        ] {
            assert!(!looks_like_credential(v), "{v}");
        }
    }

    #[test]
    fn references() {
        assert!(is_credential_reference("env:ANTHROPIC_API_KEY"));
        assert!(is_credential_reference("vault:team/anthropic"));
        assert!(!is_credential_reference(
            "sk-ant-api03-Xk9fQ2mZpL7vR4tY8wB1nC6d"
        ));
        assert!(!is_credential_reference("https://x"));
        assert!(!is_credential_reference("plain"));
        assert!(!is_credential_reference("env:has space"));
    }

    #[test]
    fn redaction() {
        use IdentifierKind::*;
        assert_eq!(
            safe_identifier_as(
                Repository,
                "https://bob:pw@github.com/o/r.git?access_token=abc#x"
            ),
            ("https://github.com/o/r.git".to_owned(), true)
        );
        assert_eq!(
            safe_identifier_as(Repository, "github.com/o/r"),
            ("github.com/o/r".to_owned(), false)
        );
        for (kind, v) in [
            (Ref, "ghp_abcdefghijklmnopqrstuvwxyz0123"),
            (Ref, "goal:hf_AbCdEfGhIjKlMnOpQrStUvWxYz"),
            (Ref, "Q7fZ2kLmN8pR4sT1vW6xY9aBc3D5eR2t"),
            (Ref, "has space"),
            (Commit, "hf_AbCdEfGhIjKlMnOpQrStUv"),
            (Commit, "3f2a9c"),
            (Artifact, "MKLEAK_the_model_said_rm_-rf"),
            (Artifact, "npm_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"),
            (Artifact, "../etc/passwd"),
        ] {
            assert_eq!(
                safe_identifier_as(kind, v),
                (REDACTED.to_owned(), true),
                "{v}"
            );
        }
        for (kind, v) in [
            (Ref, "claude-sonnet-4-5-20250929"),
            (Ref, "MyVeryLongClassName2024Version2X"),
            (Repository, "MyOrg/MyVeryLongRepositoryName"),
            (Ref, "XMLHttpRequestFactoryProvider2Impl"),
            (Commit, "3f2a9c1"),
            (Commit, "0123456789abcdef0123456789abcdef01234567"),
            (Artifact, "artifact://diff.patch"),
            (Artifact, "dist/app"),
            (Artifact, "report.html"),
        ] {
            assert_eq!(safe_identifier_as(kind, v), (v.to_owned(), false), "{v}");
        }
    }
}
