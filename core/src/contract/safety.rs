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
//! boundaries). It is sensitive when a word is one of `secret`, `secrets`, `password`,
//! `passwd`, `passphrase`, `token`, `credential`, `credentials`, `apikey`, `bearer`,
//! `cookie`, `authorization`, `pat`, or two adjacent words are `api key`, `private key`,
//! `access key`, `secret key`, `signing key`, `client secret`, `auth header` — unless the
//! key names a *reference* to one or a *measurement* of one: its last word is `ref`,
//! `refs`, `route`, `routes`, `name`, `names`, `id`, `ids`, `env`, `var` (a reference) or
//! `count`, `counts`, `limit`, `limits`, `budget`, `usage`, `total`, `totals`, `length`,
//! `size`, `type`, `kind`, `ttl`, `expiry`, `expires`, `at` (a measurement or property),
//! or its first word is `max`, `min` or `num`. So `api_key`, `githubToken` and
//! `db-password` are sensitive; `api_key_ref`, `token_env`, `token_count` and
//! `max_token` are not.
//!
//! # Values shaped like credential material
//!
//! A string is credential-shaped when it contains a PEM private-key block
//! (`-----BEGIN … PRIVATE KEY`), starts with an HTTP `Bearer `/`Basic ` scheme followed by
//! a token, embeds a password in a URL (`scheme://user:pass@host`), or any of its words
//! (split at whitespace, quotes, `=`, `,`, `;`, `(`, `)`, `<`, `>`) begins with a
//! well-known secret prefix followed by enough key characters: `sk-` (OpenAI, Anthropic
//! `sk-ant-…`; ≥ 20 more, including a digit and an uppercase letter, so that ordinary
//! words such as `sk-learn-compatible` are not taken for keys), `sk_live_`, `sk_test_`,
//! `rk_live_` (≥ 8 more), `ghp_`, `gho_`, `ghu_`, `ghs_`, `ghr_`, `github_pat_` (≥ 20
//! more), `glpat-` (≥ 16 more), `xoxb-`, `xoxp-`, `xoxa-`, `xoxs-` (≥ 8 more),
//! `AKIA`/`ASIA` + 16 uppercase letters or digits (AWS access key ids), `AIza` + 35
//! (Google API keys), or is a JSON Web Token (three base64url segments, the first
//! starting `eyJ`, ≥ 32 characters in all).
//!
//! These rules are deliberately conservative heuristics: they catch the common ways a
//! secret is pasted inline, they do not prove a value is harmless. Evidence therefore
//! does not rely on them alone — it carries no free text at all (see
//! [`evidence`](super::evidence)).

use serde_json::Value;

const SENSITIVE_WORDS: &[&str] = &[
    "secret",
    "secrets",
    "password",
    "passwd",
    "passphrase",
    "token",
    "credential",
    "credentials",
    "apikey",
    "bearer",
    "cookie",
    "authorization",
    "pat",
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
    "kind", "ttl", "expiry", "expires", "at",
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
    w.iter().any(|x| SENSITIVE_WORDS.contains(&x.as_str()))
        || w.windows(2)
            .any(|p| SENSITIVE_PAIRS.contains(&(p[0].as_str(), p[1].as_str())))
}

fn key_chars(s: &str) -> usize {
    s.chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
        .count()
}

fn word_is_secret(w: &str) -> bool {
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
    while let Some(pos) = rest.find("://") {
        let after = &rest[pos + 3..];
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
                '"' | '\'' | '`' | '=' | ',' | ';' | '(' | ')' | '<' | '>'
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

/// Append one key (escaped as in JSON Pointer: `~` → `~0`, `/` → `~1`) to a path.
pub(crate) fn join(prefix: &str, key: &str) -> String {
    concat(prefix, &key.replace('~', "~0").replace('/', "~1"))
}

/// Append an already-escaped relative path to a path.
pub(crate) fn concat(prefix: &str, rel: &str) -> String {
    match (prefix.is_empty(), rel.is_empty()) {
        (true, _) => rel.to_owned(),
        (false, true) => prefix.to_owned(),
        (false, false) => format!("{prefix}/{rel}"),
    }
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

/// Make an identifier safe for evidence: userinfo is removed from URLs
/// (`https://user:pw@host/x` → `https://host/x`), and a value that still looks like
/// credential material becomes `[redacted]`. Returns the safe text and whether anything
/// was changed.
pub fn redact_identifier(s: &str) -> (String, bool) {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    let mut changed = false;
    while let Some(pos) = rest.find("://") {
        out.push_str(&rest[..pos + 3]);
        let after = &rest[pos + 3..];
        let authority_end = after
            .find(|c: char| c == '/' || c == '?' || c == '#' || c.is_whitespace())
            .unwrap_or(after.len());
        let authority = &after[..authority_end];
        match authority.rfind('@') {
            Some(at) => {
                out.push_str(&authority[at + 1..]);
                changed = true;
            }
            None => out.push_str(authority),
        }
        rest = &after[authority_end..];
    }
    out.push_str(rest);
    if looks_like_credential(&out) {
        return (REDACTED.to_owned(), true);
    }
    (out, changed)
}

/// The text that replaces a redacted identifier.
pub const REDACTED: &str = "[redacted]";

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
        assert_eq!(
            redact_identifier("https://bob:pw@github.com/o/r.git"),
            ("https://github.com/o/r.git".to_owned(), true)
        );
        assert_eq!(
            redact_identifier("github.com/o/r"),
            ("github.com/o/r".to_owned(), false)
        );
        assert_eq!(
            redact_identifier("ghp_abcdefghijklmnopqrstuvwxyz0123"),
            (REDACTED.to_owned(), true)
        );
    }
}
