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
//! same words; `passWord`, `PassPhrase`, `PassCode` are one word). It is sensitive when
//!
//! * a word is one of `secret`, `secrets`, `password`, `passwd`, `passphrase`, `pwd`,
//!   `token`, `credential`, `credentials`, `apikey`, `bearer`, `cookie`,
//!   `authorization`, `auth`, `jwt`, `pat`, `cred`, `creds`, `passcode`, or a compound
//!   written without a separator
//!   (`sessionkey`, `sshkey`, `privatekey`, `secretkey`, `accesskey`, `encryptionkey`,
//!   `signingkey`, `authkey`, `authtoken`, `accesstoken`, `refreshtoken`,
//!   `sessiontoken`, `apitoken`, `clientsecret`);
//! * its last word is `pass`, `pw` or `pword` (`DB_PASS`, `SMTP_PASS`; `pass_through` is
//!   not one);
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
//! More prefixes and shapes from the public facts of secret-scanner rule sets are
//! recognised too (GitLab `gldt-`/`glrt-`, Slack `xapp-` and webhook URLs, Google
//! `GOCSPX-`/`ya29.`, Stripe `whsec_`, SendGrid `SG.`, Twilio `SK`+hex, Mailgun, Mailchimp,
//! Shopify, DigitalOcean, Doppler, Databricks, Vault `hvs.`, Terraform `.atlasv1.`,
//! Docker Hub, Atlassian, Linear, Notion, Postman, Grafana, `age`, Pulumi, Sentry,
//! Tailscale, Figma, PlanetScale, Square, Brevo, Meta, JFrog, RubyGems, Netlify,
//! Dynatrace, Azure AD client secrets, Discord and Telegram bot tokens, Discord webhooks,
//! base64 `user:password` Basic credentials); the whole token run is the secret.
//!
//! # Secrets by shape, without a named prefix
//!
//! Scanner rule sets keep growing; a detector that only knows prefixes misses every new
//! one. So the word scan also takes, with no prefix named:
//!
//! * a `<prefix>_<body>` / `<prefix>-<body>` token (one or two short prefix levels)
//!   whose body, its few separators removed, looks random: mixed case and 27 or more
//!   characters ([`looks_like_random_token`]), one case with digits and 24 or more
//!   (letters and digits interleaved, few vowels), or a hex run of 40 or more — unless the
//!   prefix names an object id or a digest (`msg_`, `toolu_`, `chatcmpl-`, `resp_`,
//!   `cus_`, `evt_`, `sha512-`, `commit-`, …);
//! * `<prefix>_<base64>` tokens with `/` or `+` in them (`ops_eyJ…`);
//! * dotted tokens whose pieces together look random, or a long hex piece after an id
//!   piece (`pat<14>.<64 hex>`);
//! * a bare word of 24 or more letters and digits that looks random, unless it is a
//!   piece of a base64 body or URL path (`/`, `+` or `=` next to it), a certificate or
//!   public key (`-----BEGIN …` blocks that are not private keys, SSH key bodies
//!   starting `AAAA`) or a `data:` URI;
//! * after an AWS access key id, the 40-character secret access key of a pasted pair or a
//!   credentials CSV (`AKIA…,wJalr…`).
//!
//! # Secrets by context
//!
//! Splitting text into words loses the key that makes a value secret, so
//! [`find_secrets`] also reads keys: a word that is a [sensitive text
//! key](is_sensitive_text_key) (the sensitive keys above except the bare `key`, plus
//! `sig`/`signature` and compounds ending in `password`, `passwd`, `secret`, `token`,
//! `apikey`, `passphrase` such as `PGPASSWORD`; not a key about a secret such as
//! `token_file`, `password_policy`, `auth_type`) followed by
//!
//! * `=`, `:=`, `=>` (env lines, `export`, TOML, connection strings such as
//!   `AccountKey=…;`, `Password=…;`, URL queries), a quoted value after `:` (JSON, also
//!   with escaped quotes, `{\"password\": \"…\"}`), or whitespace after a `--flag`: the
//!   value is a secret when it is at least 4 characters and not a placeholder;
//!   an unquoted value ends at whitespace, and at `;`, `&` only before the next `key=`
//!   (`a=1&password=x&b=2`, `Server=x;Password=y;Db=z`) or at the end, so
//!   `DB_PASSWORD=n7&Qz!x2Lp` is one value; after an environment variable at the start of
//!   a line (or after `export`) and after a `--flag` it is the whole word (`,`, brackets
//!   and quotes end it only where they close something), otherwise also `,`, `<`, `>`,
//!   `|`, quotes and closing brackets end it;
//! * `:` and an unquoted value (YAML, headers such as `X-Api-Key: …`): the value must
//!   also look like one (≥ 8 characters with letters and digits, mixed case, base64
//!   punctuation, or ≥ 16 characters); an auth scheme word (`Bearer`, `Basic`, `token`)
//!   before it is skipped (in an `Authorization:`/`Proxy-Authorization:` header any one
//!   scheme-like word before a value-like token: `Splunk`, `SSWS`, `Key`, `GenieKey`), a
//!   `Cookie:` header is secret to the end of its line, and on a YAML-like
//!   `password: …` line a passphrase runs to the end of the line (`password: correct
//!   horse battery staple`);
//! * `>` after `<key` (XML: `<password>…</password>`), or `, "v"` after a quoted key
//!   (`os.Setenv("TOKEN", "v")`, `setProperty("password", "v")`);
//! * nothing: a high-entropy word or UUID among the next four words of the line, the
//!   value-like word after `is`/`was`/`of` (`the password is hunter2hunter2`; after
//!   `is`/`was` it needs a digit, a capital or a symbol, so `the password is stored in
//!   the vault` is prose), or after a bare
//!   password word a first word with a digit, symbol or capital (`.netrc`'s `password
//!   hunter2hunter2`).
//!
//! After a password key (last word `password`, `passwd`, `pwd`, `passphrase`, `pass`,
//! `pw`, `pin`, …) any unquoted value of 6 or more characters counts (`password:
//! letmeinplease`), and a quoted one may be a passphrase of 2–8 words (`PASSPHRASE="correct
//! horse battery staple"`) unless it reads as a message about passwords (`"must be at
//! least 12 characters"`). After a key written like an environment variable, `=` takes a
//! value of lowercase words too (`API_SECRET=correct-horse-battery-staple`). A key whose
//! last word is `key` but that is not sensitive by itself (`key`, `primaryKey`,
//! `routing_key`) still makes a high-entropy value of 20 or more characters secret (an
//! Azure `primaryKey`, a PagerDuty routing key); `public_key` never. The id half of a
//! credential pair (`SecretId`, `ACCESS_KEY_ID`) is a sensitive text key.
//!
//! Keys that are no keys are skipped: pieces of base64 (after `+` or `/`), random runs
//! (`4LRecLMp1d97KcK8PW`), anything inside a certificate or `data:` URI.
//!
//! Outside keys, in command lines and markup:
//!
//! * `-u user:password`, `--user user:password`, `--proxy-user …` (curl): the password;
//! * `-p<password>` on a MySQL client line (`mysql -uroot -pS3cret`), `-p <password>`
//!   after a `login` or `sshpass` word of the line (`docker login -u bob -p …`; not
//!   `mkdir -p src/login`) or after a `-u <user>` (`mongosh -u admin -p …`), `-a
//!   <password>` on a `redis-cli` line (a port, a name of lowercase words, is no
//!   password);
//! * `value="…"` of a tag whose `key`, `name` or `id` attribute is a sensitive key (.NET
//!   `<add key="ApiKey" value="…"/>`, `<input name="password" value="…">`), and the same
//!   pair in YAML and JSON (`- name: DB_PASSWORD` / `  value: …`, `{"name": "API_TOKEN",
//!   "value": "…"}`).
//!
//! Never a secret: placeholders and references (`$VAR`, `${…}`, `%VAR%`, `{{…}}`, `<…>`,
//! `[…]`, mask runs such as `***`, `env:NAME`-style references, file paths, `true`,
//! `none`, scheme names such as `oauth2`), code (`Foo::new(…)`, `os.environ["…"]`,
//! `settings.TOKEN`), short numbers, and,
//! except after a password key, names made of lowercase words (`my-app-secret-name`).
//! [`redact_secrets`] replaces only the secret spans with `[redacted]`, so the key stays
//! readable (`password=[redacted]`).
//!
//! Evidence identifiers are held to more: [`identifier_carries_secret`] also looks at
//! the pieces between `.` `:` `/` `@` `+` `~` and for [random-looking
//! tokens](looks_like_random_token).
//!
//! These rules are deliberately conservative heuristics: they catch the common ways a
//! secret is pasted inline, they do not prove a value is harmless (a random 24-character
//! key without a prefix is recognised about 94 % of the time). Evidence therefore does not
//! rely on them alone — it carries no free text at all (see
//! [`evidence`](super::evidence)); the free text that does travel (report summaries,
//! progress fields, tool error details) goes through [`redact_secrets`].
//! `core/tests/contract_secret_corpus.rs` measures the rules against 98 formats (21 of
//! them a holdout the rules were not written for) in 30 contexts and a benign corpus of
//! what agents print.
//!
//! The scan is linear in the text (up to a binary search per word among the certificate
//! and `data:` ranges): a value is read at most 4 KiB far, a key's adjacent words at most
//! 1 KiB, a tag at most 512 bytes back, a name/value pair's sibling at most 256 bytes
//! either way, a PEM header to its first `-----`.

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
    "cred",
    "creds",
    "passcode",
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

/// A key whose *last* word is one of these names a password (`DB_PASS`, `SMTP_PASS`,
/// `pw`); as an inner word they mean something else (`pass_through`).
const LAST_WORD_SENSITIVE: &[&str] = &["pass", "pw", "pword"];

/// The first position of `needle` in `hay` (a SIMD substring search).
fn find(hay: &str, needle: &str) -> Option<usize> {
    memchr::memmem::find(hay.as_bytes(), needle.as_bytes())
}

/// The first position at or after `from` where `needle` (lowercase ASCII) starts, ASCII
/// case-insensitively: candidates are found by their first byte with `memchr2`.
fn find_ci(hay: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    let first = *needle.first()?;
    let rest = hay.get(from..)?;
    memchr::memchr2_iter(first, first.to_ascii_uppercase(), rest)
        .find(|&i| {
            rest.get(i..i.saturating_add(needle.len()))
                .is_some_and(|w| w.eq_ignore_ascii_case(needle))
        })
        .map(|i| from.saturating_add(i))
}

/// `true` when `hay` contains `needle`, ASCII case-insensitively.
fn contains_ci(hay: &[u8], needle: &[u8]) -> bool {
    hay.len() >= needle.len()
        && hay
            .windows(needle.len())
            .any(|w| w.eq_ignore_ascii_case(needle))
}

/// `false` only when `key` cannot name a secret: an ASCII key containing none of the
/// stems every sensitive key word contains (`secret`, `sig`, `pass`, `pw`, `pat`, `pin`,
/// `token`, `cred`, `cookie`, `key`, `auth`, `bearer`, `jwt`; any case). Non-ASCII keys
/// take the full word split, whose lowercasing is Unicode's. The scan's hot path: most
/// words end here.
fn may_name_secret(key: &str) -> bool {
    if !key.is_ascii() {
        return true;
    }
    let b = key.as_bytes();
    // Dispatch on the stems' first letters: most positions rule themselves out at once.
    (0..b.len()).any(|i| {
        let rest = b.get(i..).unwrap_or_default();
        let stems: &[&[u8]] = match rest.first().map_or(0, u8::to_ascii_lowercase) {
            b's' => &[b"secret", b"sig"],
            b'p' => &[b"pass", b"pw", b"pat", b"pin"],
            b't' => &[b"token"],
            b'c' => &[b"cred", b"cookie"],
            b'k' => &[b"key"],
            b'a' => &[b"auth"],
            b'b' => &[b"bearer"],
            b'j' => &[b"jwt"],
            _ => return false,
        };
        stems.iter().any(|st| {
            rest.get(..st.len())
                .is_some_and(|w| w.eq_ignore_ascii_case(st))
        })
    })
}

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
    // `passWord`, `PassPhrase`, `PassCode`: one word written in camelCase.
    let mut merged: Vec<String> = Vec::with_capacity(out.len());
    for w in out {
        match merged.last_mut() {
            Some(prev) if prev == "pass" && matches!(w.as_str(), "word" | "phrase" | "code") => {
                prev.push_str(&w);
            }
            _ => merged.push(w),
        }
    }
    merged
}

/// `true` when a metadata or profile key names secret material (see the module docs).
pub fn is_sensitive_key(key: &str) -> bool {
    if !may_name_secret(key) {
        return false;
    }
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
        || w.last()
            .is_some_and(|last| LAST_WORD_SENSITIVE.contains(&last.as_str()))
        || w.iter().any(|x| SENSITIVE_WORDS.contains(&x.as_str()))
        || w.windows(2)
            .any(|p| matches!(p, [a, b] if SENSITIVE_PAIRS.contains(&(a.as_str(), b.as_str()))))
}

fn key_chars(s: &str) -> usize {
    s.chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
        .count()
}

/// Characters of a token that may run on after a recognised secret prefix (base64,
/// base64url, `.`-joined parts): the whole run is redacted, not only the part a rule
/// needed to see.
fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'+' | b'/' | b'=' | b'.' | b'~')
}

fn all_hex(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Secret prefixes and the key characters (`[A-Za-z0-9_-]`) that must follow. Facts
/// from the public token formats of each service.
const PREFIXES: &[(&str, usize)] = &[
    ("sk-ant-", 8),
    ("hf_", 16),
    ("npm_", 16),
    ("pypi-", 16),
    ("sk_live_", 8),
    ("sk_test_", 8),
    ("rk_live_", 8),
    ("rk_test_", 8),
    ("whsec_", 20),
    ("ghp_", 20),
    ("gho_", 20),
    ("ghu_", 20),
    ("ghs_", 20),
    ("ghr_", 20),
    ("github_pat_", 20),
    ("glpat-", 16),
    ("gldt-", 16),
    ("glrt-", 16),
    ("glptt-", 16),
    ("glsoat-", 16),
    ("xoxb-", 8),
    ("xoxp-", 8),
    ("xoxa-", 8),
    ("xoxs-", 8),
    ("xoxe-", 8),
    ("xoxr-", 8),
    ("xapp-", 8),
    ("GOCSPX-", 20),
    ("shpat_", 24),
    ("shpss_", 24),
    ("shpca_", 24),
    ("shppa_", 24),
    ("dop_v1_", 32),
    ("doo_v1_", 32),
    ("dor_v1_", 32),
    ("dckr_pat_", 20),
    ("ATATT3", 40),
    ("lin_api_", 32),
    ("ntn_", 32),
    ("PMAK-", 24),
    ("glsa_", 24),
    ("glc_", 24),
    ("sntryu_", 40),
    ("sntrys_", 40),
    ("tskey-", 20),
    ("figd_", 30),
    ("pscale_tkn_", 30),
    ("pscale_pw_", 30),
    ("pscale_oauth_", 30),
    ("sq0atp-", 20),
    ("sq0csp-", 30),
    ("shippo_live_", 32),
    ("shippo_test_", 32),
    ("xkeysib-", 40),
    ("FLWSECK-", 24),
    ("FLWSECK_TEST-", 24),
    ("rubygems_", 40),
    ("nfp_", 32),
    ("AKCp", 60),
    ("pat-na1-", 30),
    ("pat-eu1-", 30),
    ("AGE-SECRET-KEY-1", 50),
];

/// Prefixes followed by `.`-joined parts (so the key characters are counted over the
/// token characters, dots included).
const DOTTED_PREFIXES: &[(&str, usize)] = &[
    ("ya29.", 20),
    ("SG.", 40),
    ("dp.pt.", 32),
    ("dp.st.", 32),
    ("dp.ct.", 32),
    ("dp.sa.", 32),
    ("hvs.", 20),
    ("hvb.", 20),
    ("hvr.", 20),
    ("dt0c01.", 40),
];

fn has_digit(s: &str) -> bool {
    s.bytes().any(|b| b.is_ascii_digit())
}

fn has_upper(s: &str) -> bool {
    s.bytes().any(|b| b.is_ascii_uppercase())
}

fn has_lower(s: &str) -> bool {
    s.bytes().any(|b| b.is_ascii_lowercase())
}

fn word_is_secret(w: &str) -> bool {
    // Every rule below needs 12 or more characters: most words end here.
    if w.len() < 12 {
        return false;
    }
    for (prefix, min) in PREFIXES {
        if let Some(rest) = w.strip_prefix(prefix) {
            if key_chars(rest) >= *min {
                return true;
            }
        }
    }
    for (prefix, min) in DOTTED_PREFIXES {
        if let Some(rest) = w.strip_prefix(prefix) {
            let n = rest.bytes().take_while(|b| is_token_byte(*b)).count();
            if n >= *min && has_digit(rest) {
                return true;
            }
        }
    }
    if let Some(rest) = w.strip_prefix("sk-") {
        let key: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
            .collect();
        if key.len() >= 20 && has_digit(&key) && has_upper(&key) {
            return true;
        }
    }
    for prefix in ["AKIA", "ASIA", "ABIA", "ACCA"] {
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
    // Hex-bodied keys: Databricks `dapi…`, Twilio `SK…`, Mailgun `key-…`, Pulumi `pul-…`.
    for (prefix, min) in [("dapi", 32), ("SK", 32), ("key-", 32), ("pul-", 40)] {
        if let Some(rest) = w.strip_prefix(prefix) {
            let hex = rest.bytes().take_while(u8::is_ascii_hexdigit).count();
            if hex >= min && has_digit(rest) {
                return true;
            }
        }
    }
    // Mailchimp: 32 hex digits, `-us`, a datacenter number.
    if let Some((hex, dc)) = w.split_once("-us") {
        if hex.len() == 32
            && all_hex(hex)
            && !dc.is_empty()
            && dc.len() <= 2
            && dc.bytes().all(|b| b.is_ascii_digit())
        {
            return true;
        }
    }
    // Square / Meta access tokens: `EAA` + a long mixed-case run.
    if let Some(rest) = w.strip_prefix("EAA") {
        if key_chars(rest) >= 60 && has_digit(rest) && has_lower(rest) {
            return true;
        }
    }
    // Notion's legacy integration secret: `secret_` + 43 letters and digits.
    if let Some(rest) = w.strip_prefix("secret_") {
        let n = rest.bytes().take_while(u8::is_ascii_alphanumeric).count();
        if n >= 40 && has_digit(rest) && has_upper(rest) {
            return true;
        }
    }
    // Terraform Cloud / HCP: `<14>.atlasv1.<long>`.
    if let Some((head, tail)) = w.split_once(".atlasv1.") {
        if head.len() >= 10 && key_chars(tail) >= 40 {
            return true;
        }
    }
    // Azure AD client secret: three key characters, a digit, `Q~`, 31–34 more.
    if let (Some(d), Some("Q~")) = (w.as_bytes().get(3), w.get(4..6)) {
        let rest = w.get(6..).unwrap_or_default();
        let n = rest
            .bytes()
            .take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'~' | b'.' | b'-'))
            .count();
        if d.is_ascii_digit() && n >= 30 {
            return true;
        }
    }
    // Discord bot token: `[MN]` + 23–25 letters/digits, `.`, 6, `.`, ≥ 27.
    if w.starts_with(['M', 'N']) {
        let parts: Vec<&str> = w.split('.').collect();
        if let [a, b, c, ..] = parts.as_slice() {
            if (24..=26).contains(&a.len())
                && a.bytes().all(|x| x.is_ascii_alphanumeric())
                && b.len() == 6
                && key_chars(b) == 6
                && key_chars(c) >= 27
            {
                return true;
            }
        }
    }
    // JSON Web Token: header.payload.signature, base64url, header starts with `{"` → `eyJ`.
    if w.starts_with("eyJ") && w.len() >= 32 {
        let parts: Vec<&str> = w.split('.').take(3).collect();
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

/// Decode standard or URL-safe base64 (padding optional); `None` when `s` is not base64.
fn base64_decode(s: &str) -> Option<Vec<u8>> {
    let body = s.trim_end_matches('=');
    let mut out = Vec::with_capacity(body.len().saturating_mul(3) / 4);
    let mut acc: u32 = 0;
    let mut bits: u32 = 0;
    for c in body.bytes() {
        let v = match c {
            b'A'..=b'Z' => c.checked_sub(b'A')?,
            b'a'..=b'z' => c.checked_sub(b'a')?.checked_add(26)?,
            b'0'..=b'9' => c.checked_sub(b'0')?.checked_add(52)?,
            b'+' | b'-' => 62,
            b'/' | b'_' => 63,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(v);
        bits = bits.saturating_add(6);
        if bits >= 8 {
            bits = bits.saturating_sub(8);
            out.push(u8::try_from((acc >> bits) & 0xFF).ok()?);
        }
        acc &= 0xFFu32.checked_shr(8u32.saturating_sub(bits)).unwrap_or(0);
    }
    Some(out)
}

/// HTTP Basic credentials pasted without their scheme: a base64 word of ≥ 12
/// characters that decodes to printable `user:password` (no spaces, one `:` with text on
/// both sides, a digit or uppercase letter in the password part).
fn is_basic_credentials(w: &str) -> bool {
    if w.len() < 12 || w.len() > 512 {
        return false;
    }
    let Some(bytes) = base64_decode(w) else {
        return false;
    };
    let Ok(text) = std::str::from_utf8(&bytes) else {
        return false;
    };
    let Some((user, pass)) = text.split_once(':') else {
        return false;
    };
    !user.is_empty()
        && pass.len() >= 4
        && text.bytes().all(|b| b.is_ascii_graphic())
        && !pass.contains(':')
        && (has_digit(pass) || has_upper(pass))
}

/// A byte range of a text that holds secret material (see [`find_secrets`]).
pub type SecretSpan = std::ops::Range<usize>;

/// Word separators of the shape scan.
fn is_word_sep(c: char) -> bool {
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
                | '['
                | ']'
                | '{'
                | '}'
                | '|'
                | '\\'
        )
}

/// Extend `start..end` over the token characters that follow (a base64 tail, an `=`
/// padded end, a `.`-joined part).
fn extend_token(b: &[u8], start: usize, end: usize) -> SecretSpan {
    let mut e = end;
    while b.get(e).copied().is_some_and(is_token_byte) {
        e = e.saturating_add(1);
    }
    start..e
}

/// Words of the shape scan with their byte offsets.
fn words_with_offsets(s: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in s.char_indices() {
        if is_word_sep(c) {
            if let Some(st) = start.take() {
                if let Some(w) = s.get(st..i) {
                    out.push((st, w));
                }
            }
        } else if start.is_none() {
            start = Some(i);
        }
    }
    if let Some(st) = start {
        if let Some(w) = s.get(st..) {
            out.push((st, w));
        }
    }
    out
}

/// PEM private-key blocks, from `-----BEGIN` to the end of the matching `-----END …-----`
/// line (or the end of the text). The header is the text between `-----BEGIN` and the
/// first `-----` or newline after it, so finding it reads no further than the next
/// `-----` (the scan stays linear) and a later "PRIVATE KEY" on the line of a
/// certificate does not make it a private key.
fn pem_spans(s: &str, out: &mut Vec<SecretSpan>) {
    let mut from = 0;
    while let Some(pos) = s.get(from..).and_then(|r| find(r, "-----BEGIN")) {
        let begin = from.saturating_add(pos);
        let rest = s.get(begin..).unwrap_or_default();
        let after_begin = rest.get(10..).unwrap_or_default();
        let dashes = find(after_begin, "-----").unwrap_or(after_begin.len());
        let line = after_begin.get(..dashes).unwrap_or_default();
        let header = line
            .get(..memchr::memchr(b'\n', line.as_bytes()).unwrap_or(line.len()))
            .unwrap_or_default();
        let end = match rest.find("-----END") {
            Some(e) => {
                let after = rest.get(e.saturating_add(8)..).unwrap_or_default();
                let close = after
                    .find("-----")
                    .map_or(after.len(), |c| c.saturating_add(5));
                begin
                    .saturating_add(e)
                    .saturating_add(8)
                    .saturating_add(close)
            }
            None => s.len(),
        };
        if header.contains("PRIVATE KEY")
            || rest
                .get(..end.saturating_sub(begin))
                .is_some_and(|b| b.contains("PRIVATE KEY"))
        {
            out.push(begin..end);
        }
        from = end.max(begin.saturating_add(10));
    }
}

/// Passwords in URL userinfo (`scheme://user:PASSWORD@host`), and the secret path of
/// webhook URLs (Slack, Discord) whose path is the credential.
fn url_spans(s: &str, out: &mut Vec<SecretSpan>) {
    let b = s.as_bytes();
    let mut from = 0;
    while let Some(pos) = s.get(from..).and_then(|r| find(r, "://")) {
        let auth_start = from.saturating_add(pos).saturating_add(3);
        let after = s.get(auth_start..).unwrap_or_default();
        let auth_len = after
            .find(|c: char| {
                c == '/' || c == '?' || c == '#' || c.is_whitespace() || c == '"' || c == '\''
            })
            .unwrap_or(after.len());
        let authority = after.get(..auth_len).unwrap_or_default();
        if let Some(at) = authority.rfind('@') {
            if let Some(colon) = authority.get(..at).and_then(|u| u.find(':')) {
                let start = auth_start.saturating_add(colon).saturating_add(1);
                let end = auth_start.saturating_add(at);
                if end > start {
                    out.push(start..end);
                }
            }
        }
        for host in [
            "hooks.slack.com/services/",
            "hooks.slack.com/workflows/",
            "discord.com/api/webhooks/",
            "discordapp.com/api/webhooks/",
        ] {
            if after.starts_with(host) {
                let start = auth_start.saturating_add(host.len());
                let mut end = start;
                while b
                    .get(end)
                    .is_some_and(|c| c.is_ascii_alphanumeric() || matches!(c, b'/' | b'_' | b'-'))
                {
                    end = end.saturating_add(1);
                }
                if end > start {
                    out.push(start..end);
                }
            }
        }
        from = auth_start;
    }
}

/// Telegram bot tokens (`<8–10 digits>:<35 key characters>`): the `:` splits words.
fn telegram_spans(s: &str, out: &mut Vec<SecretSpan>) {
    let b = s.as_bytes();
    for (i, c) in b.iter().enumerate() {
        if *c != b':' {
            continue;
        }
        let mut d = i;
        while d > 0 && b.get(d.saturating_sub(1)).is_some_and(u8::is_ascii_digit) {
            d = d.saturating_sub(1);
        }
        let digits = i.saturating_sub(d);
        let tail = key_chars(s.get(i.saturating_add(1)..).unwrap_or_default());
        let bounded = d == 0
            || b.get(d.saturating_sub(1))
                .is_some_and(|x| !x.is_ascii_alphanumeric());
        if (8..=10).contains(&digits) && tail >= 35 && bounded {
            out.push(d..i.saturating_add(1).saturating_add(tail));
        }
    }
}

/// `Bearer <token>` / `Basic <token>`: at the start of a text any token of ≥ 8 key
/// characters; elsewhere a token that looks like a value (a digit, an uppercase letter
/// after the first character, or one of `_-+/=.~`).
fn scheme_spans(s: &str, out: &mut Vec<SecretSpan>) {
    let b = s.as_bytes();
    for scheme in ["bearer", "basic"] {
        let mut from = 0;
        let sb = scheme.as_bytes();
        while let Some(at) = find_ci(b, sb, from) {
            from = at.saturating_add(scheme.len());
            let boundary = at == 0
                || b.get(at.saturating_sub(1))
                    .is_some_and(|c| !c.is_ascii_alphanumeric());
            let mut v = from;
            while b.get(v).is_some_and(|c| *c == b' ' || *c == b'\t') {
                v = v.saturating_add(1);
            }
            if !boundary || v == from {
                continue;
            }
            let mut e = v;
            while b.get(e).copied().is_some_and(is_token_byte) {
                e = e.saturating_add(1);
            }
            let token = s.get(v..e).unwrap_or_default();
            let at_start = s.get(..at).is_some_and(|h| h.trim().is_empty());
            let valueish = token.len() >= 8
                && (has_digit(token)
                    || token.get(1..).is_some_and(has_upper)
                    || token
                        .bytes()
                        .any(|c| matches!(c, b'_' | b'-' | b'+' | b'/' | b'=' | b'.' | b'~')));
            if (at_start && key_chars(token) >= 8) || valueish {
                out.push(v..e);
            }
        }
    }
}

/// Key words that, in text, name something *about* a secret rather than the secret
/// (`token_file`, `password_policy`, `ssh_key_path`): the value after them is not
/// taken for a secret.
const TEXT_REFERENCE_SUFFIXES: &[&str] = &[
    "file",
    "files",
    "path",
    "paths",
    "dir",
    "directory",
    "location",
    "prefix",
    "suffix",
    "field",
    "fields",
    "format",
    "policy",
    "rotation",
    "required",
    "enabled",
    "disabled",
    "valid",
    "expired",
    "missing",
    "store",
    "manager",
    "service",
    "helper",
    "source",
    "version",
    "status",
    "error",
    "errors",
    "message",
    "hint",
    "label",
    "prompt",
    "placeholder",
    "description",
    "title",
    "header",
    "headers",
    "param",
    "parameter",
    "strength",
    "port",
    "host",
    "user",
    "username",
    "login",
    "email",
    "account",
    "algorithm",
    "alg",
    "flow",
    "server",
    "issuer",
    "audience",
    "scope",
    "scopes",
    "duration",
    "timeout",
    "seconds",
    "ms",
    "min",
    "max",
    "hash",
    "fingerprint",
    "hint",
];

/// Compound words ending in one of these are sensitive in text (`PGPASSWORD`,
/// `githubtoken`, `MYSECRET`).
const TEXT_SENSITIVE_ENDINGS: &[&str] = &[
    "password",
    "passwd",
    "secret",
    "token",
    "apikey",
    "passphrase",
];

/// `true` when `key`, written in a text before a value, names a secret: a
/// [sensitive key](is_sensitive_key) other than the bare word `key`, a signature
/// (`sig`, `signature`, as in SAS URLs and signed requests), or a compound word ending in
/// `password`, `passwd`, `secret`, `token`, `apikey` or `passphrase` — unless its last
/// word says it is about a secret (`token_file`, `password_policy`).
pub fn is_sensitive_text_key(key: &str) -> bool {
    if !may_name_secret(key) {
        return false;
    }
    let w = words(key);
    if matches!(w.as_slice(), [only] if only == "key" || only == "keys") {
        return false;
    }
    // The id half of a credential pair (`SecretId`, `ALIBABA_CLOUD_ACCESS_KEY_ID`): the
    // value still has to look like a secret (`--secret-id prod/db` is a name).
    if matches!(w.last().map(String::as_str), Some("id" | "ids"))
        && (w.iter().any(|x| x == "secret" || x == "accesskey")
            || w.windows(2)
                .any(|p| matches!(p, [a, b] if a == "access" && b == "key")))
    {
        return true;
    }
    // `AUTH_HEADER`, `authorization_header`: the header's value (see `value_after`),
    // although `header` otherwise names something about a secret.
    let auth_header = matches!(w.as_slice(), [.., a, h]
        if (a == "auth" || a == "authorization") && (h == "header" || h == "headers"));
    if auth_header {
        return true;
    }
    if w.last().is_some_and(|l| {
        TEXT_REFERENCE_SUFFIXES.contains(&l.as_str()) || REFERENCE_SUFFIXES.contains(&l.as_str())
    }) || w
        .first()
        .is_some_and(|f| MEASURE_PREFIXES.contains(&f.as_str()))
    {
        return false;
    }
    is_sensitive_key(key)
        || w.iter().any(|x| x == "sig" || x == "signature")
        || w.iter().any(|x| {
            TEXT_SENSITIVE_ENDINGS
                .iter()
                .any(|e| x.len() > e.len() && x.ends_with(e))
        })
}

/// Values that are never a secret, whatever the key: placeholders, booleans, scheme names.
const NON_SECRET_VALUES: &[&str] = &[
    "true",
    "false",
    "null",
    "none",
    "nil",
    "undefined",
    "yes",
    "no",
    "on",
    "off",
    "required",
    "optional",
    "redacted",
    "hidden",
    "masked",
    "secret",
    "string",
    "password",
    "token",
    "oauth",
    "oauth2",
    "basic",
    "bearer",
    "digest",
    "kerberos",
    "ntlm",
    "saml",
    "oidc",
    "jwt",
    "apikey",
    "api_key",
    "env",
    "file",
    "keychain",
    "vault",
    "ssh",
    "https",
    "http",
    "anonymous",
    "default",
    "auto",
    "inherit",
    "disabled",
    "enabled",
    "example",
    "unset",
    "empty",
    "missing",
    "invalid",
    "expired",
    "valid",
    "incorrect",
    "wrong",
    "weak",
    "strong",
    "changed",
    "updated",
    "reset",
    "saved",
    "accepted",
    "rejected",
    "denied",
    "failed",
    "success",
    "successful",
    "mismatch",
    "provided",
    "protected",
    "encrypted",
    "hashed",
    "generated",
    "rotated",
    "sensitive",
    "unknown",
];

fn is_password_key(key: &str) -> bool {
    if !may_name_secret(key) {
        return false;
    }
    words(key).last().is_some_and(|x| {
        [
            "password",
            "passwd",
            "pwd",
            "passphrase",
            "pin",
            "pass",
            "pw",
            "pword",
            "passcode",
        ]
        .contains(&x.as_str())
            || x.ends_with("password")
            || x.ends_with("passwd")
    })
}

/// A value that stands for a secret instead of being one: `$VAR`, `${…}`, `%VAR%`,
/// `{{…}}`, `<…>`, `[…]`, a run of one mask character, a credential reference
/// (`env:NAME`), a file path.
fn is_placeholder(v: &str) -> bool {
    let lower = v.to_ascii_lowercase();
    if NON_SECRET_VALUES.contains(&lower.as_str()) {
        return true;
    }
    let b = v.as_bytes();
    let first = b.first().copied().unwrap_or(b' ');
    if first == b'$' {
        let rest = v.get(1..).unwrap_or_default();
        return rest.starts_with(['{', '('])
            || (!rest.is_empty()
                && rest
                    .bytes()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == b'_'));
    }
    if (v.starts_with('%') && v.ends_with('%') && v.len() > 2)
        || v.starts_with("{{")
        || (v.starts_with('<') && v.ends_with('>'))
        || v.starts_with('[')
        || v.starts_with("...")
        || v.starts_with('\u{2026}')
    {
        return true;
    }
    if b.iter()
        .all(|c| matches!(c, b'*' | b'x' | b'X' | b'.' | b'-' | b'_' | b'#' | b'0'))
        || b.windows(2).all(|p| matches!(p, [a, c] if a == c))
    {
        return true;
    }
    if is_credential_reference_shape(v) {
        return true;
    }
    // A path: `/a/b`, `./x`, `../x`, `~/x` of path characters, with lowercase segments.
    let path_like =
        (v.starts_with("./") || v.starts_with("../") || v.starts_with("~/") || v.starts_with('/'))
            && v.bytes()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'/' | b'.' | b'_' | b'-'))
            && v.split('/').filter(|g| !g.is_empty()).count() >= 1
            && v.split('/').all(|g| {
                !(looks_like_random_token(g) || (g.len() >= 16 && has_upper(g) && has_digit(g)))
            });
    path_like && (v.matches('/').count() >= 2 || v.contains('.'))
}

/// `scheme:name` with a lowercase scheme and an identifier-like name (`env:API_KEY`,
/// `vault:team/x`, `op://…` is not one): a reference, not a value.
fn is_credential_reference_shape(v: &str) -> bool {
    let Some((scheme, name)) = v.split_once(':') else {
        return false;
    };
    [
        "env", "vault", "keychain", "secret", "secrets", "op", "aws-sm", "gcp-sm", "file", "ssm",
        "sops", "kms",
    ]
    .contains(&scheme)
        && !name.is_empty()
        && !name.starts_with("//")
        && !name.contains(':')
}

/// Looks like a random high-entropy word: ≥ 16 base64/hex characters that mix classes
/// (hex of ≥ 32 with digits and letters; or upper, lower and digits; or letters and
/// digits that [look random](looks_random) in mixed or one case).
fn is_high_entropy(w: &str) -> bool {
    if w.len() < 16 || !w.bytes().all(is_token_byte) {
        return false;
    }
    let alnum: String = w.chars().filter(char::is_ascii_alphanumeric).collect();
    (all_hex(w) && w.len() >= 32 && has_digit(w) && w.bytes().any(|b| b.is_ascii_alphabetic()))
        || (has_upper(w) && has_lower(w) && has_digit(w) && !w.contains("::"))
        || looks_random(&alnum)
}

/// How a value was attached to its key.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Sep {
    /// `=`, `:=`, `=>`, a quoted value after `:` (JSON), a `--flag value`, an XML
    /// element's text.
    Assign,
    /// `=` after a key written like an environment variable (`API_SECRET=…`): as
    /// `Assign`, and a value of lowercase words counts.
    Env,
    /// `"K", "v"`: a quoted value after a quoted key and a comma.
    Pair,
    /// `:` with an unquoted value (YAML, headers, prose).
    Colon,
}

/// `true` when `v` is lowercase words and numbers joined by `_`, `-`, `.` or `/`, each
/// piece all letters or all digits (`token_request_provider_87892`, `gh-token-2024`);
/// a single lowercase run of 16 or more characters is not a name.
fn is_wordy(v: &str) -> bool {
    v.split(['_', '-', '.', '/'])
        .all(|p| p.bytes().all(|b| b.is_ascii_lowercase()) || p.bytes().all(|b| b.is_ascii_digit()))
        && v.bytes().any(|b| b.is_ascii_lowercase())
        && (v.len() < 16 || v.contains(['_', '-', '.', '/']))
}

/// `true` when the value `v` (no surrounding quotes) after a sensitive key is taken as a
/// secret.
fn value_is_secret(key: &str, v: &str, sep: Sep, quoted: bool) -> bool {
    if v.is_empty() || is_placeholder(v) {
        return false;
    }
    if v.chars().any(char::is_whitespace) {
        // A quoted passphrase (`PASSPHRASE="correct horse battery staple"`).
        return quoted && is_password_key(key) && is_passphrase(v);
    }
    if v.contains(['(', ')']) || v.contains("::") {
        return false;
    }
    // A name made of lowercase words (`my-app-secret-name`, `prod_db_2`): a reference,
    // unless the key says password (passwords may be words) or it is the value of an
    // environment variable (`API_SECRET=correct-horse-battery-staple`: a variable holds
    // the secret itself, a reference would be named `…_NAME` / `…_REF`).
    if is_wordy(v) && !is_password_key(key) && !(sep == Sep::Env && v.len() >= 8) {
        return false;
    }
    if sep == Sep::Pair && is_wordy(v) {
        // `("password", "confirm_password")`: a list of names, not a key and its value.
        return false;
    }
    if v.bytes().all(|c| c.is_ascii_digit()) {
        return if is_password_key(key) {
            v.len() >= 4
        } else {
            v.len() >= 12
        };
    }
    match sep {
        Sep::Assign | Sep::Env => v.chars().count() >= 4,
        Sep::Pair => v.chars().count() >= 6,
        Sep::Colon => {
            let n = v.chars().count();
            let letters = v.bytes().any(|b| b.is_ascii_alphabetic());
            // After a password key any word of 6 or more is taken (`password:
            // letmeinplease`); status words are placeholders.
            (is_password_key(key) && n >= 6)
                || (n >= 8
                    && ((letters && has_digit(v))
                        || v.get(1..).is_some_and(|t| has_upper(t) && has_lower(t))
                        || n >= 16
                        || v.bytes().any(|b| matches!(b, b'+' | b'/' | b'='))))
        }
    }
}

/// Words that make a quoted text a message about a password rather than a passphrase
/// (`"must be at least 12 characters"`, `"This field is required."`).
const MESSAGE_WORDS: &[&str] = &[
    "a",
    "an",
    "the",
    "this",
    "that",
    "is",
    "are",
    "be",
    "been",
    "was",
    "must",
    "should",
    "cannot",
    "can't",
    "not",
    "no",
    "too",
    "please",
    "enter",
    "your",
    "my",
    "field",
    "required",
    "invalid",
    "incorrect",
    "wrong",
    "expired",
    "missing",
    "provided",
    "match",
    "matches",
    "characters",
    "character",
    "least",
    "long",
    "short",
    "contain",
    "contains",
    "at",
    "of",
    "to",
    "for",
    "and",
    "or",
    "with",
    "it",
    "has",
    "have",
    "does",
    "do",
    "empty",
    "blank",
    "reset",
    "changed",
    "updated",
    "weak",
    "strong",
    "strength",
    "policy",
    "in",
    "on",
    "by",
    "via",
    "from",
    "see",
    "use",
    "using",
    "stored",
    "sent",
    "set",
];

/// A quoted text after a password key that reads as a passphrase: 2–8 words, at most 128
/// characters, no sentence punctuation at the end, none of [`MESSAGE_WORDS`].
fn is_passphrase(v: &str) -> bool {
    let n = v.split_whitespace().count();
    (2..=8).contains(&n)
        && v.len() <= 128
        && !v.trim_end().ends_with(['.', '!', '?', ':'])
        && v.split_whitespace().all(|w| {
            let w = w
                .trim_matches(|c: char| !c.is_alphanumeric())
                .to_lowercase();
            !MESSAGE_WORDS.contains(&w.as_str())
        })
}

/// A word that reads as a password when it follows a password key with only a space
/// (`.netrc`'s `password hunter2hunter2`): 6 or more characters with a digit, a symbol
/// or a capital after the first letter, not a placeholder.
fn is_passwordish(w: &str) -> bool {
    w.chars().count() >= 6
        && !w.chars().any(char::is_whitespace)
        && !is_placeholder(w)
        && (has_digit(w)
            || w.bytes().any(|c| c.is_ascii_punctuation())
            || w.get(1..).is_some_and(has_upper))
}

fn is_key_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.')
}

/// How a key makes the value after it secret.
#[derive(Clone, Copy, PartialEq, Eq)]
enum KeyMode {
    /// A [sensitive text key](is_sensitive_text_key): the value rules of
    /// [`value_is_secret`].
    Sensitive,
    /// A key whose last word is `key`/`keys` but that is not sensitive by itself (the bare
    /// `key`, `primary_key`, `routing_key`, …): only a high-entropy value of 20 or more
    /// characters is a secret (`"primaryKey": "<base64>"`, a PagerDuty `routing_key`);
    /// all-hex values only when `hex` (cache, hash and idempotency keys are hex digests).
    Entropy {
        /// Hex values count.
        hex: bool,
    },
}

/// The [`KeyMode::Entropy`] of `key`, if it has one: its last word is `key` or `keys`,
/// and it is not a public key.
fn entropy_mode(key: &str) -> Option<KeyMode> {
    if !contains_ci(key.as_bytes(), b"key") {
        return None;
    }
    let w = words(key);
    match w.as_slice() {
        [.., before, last] if KEY_WORDS.contains(&last.as_str()) => {
            (before != "public").then(|| KeyMode::Entropy {
                hex: ["primary", "routing", "master", "secondary"].contains(&before.as_str()),
            })
        }
        [last] if KEY_WORDS.contains(&last.as_str()) => Some(KeyMode::Entropy { hex: false }),
        _ => None,
    }
}

/// Values after sensitive keys: `k=v`, `k: v`, `"k": "v"`, `k := v`, `k => v`,
/// `--k v`, `--k=v`, `<k>v</k>`, `"k", "v"`, header lines (`Authorization: Bearer v`,
/// `X-Api-Key: v`, `Cookie: …` to the end of the line) and, with no separator, a
/// high-entropy word among the next four words of the line (see [`adjacent_entropy`]).
fn context_spans(s: &str, blobs: &[SecretSpan], out: &mut Vec<SecretSpan>) {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let starts = b.get(i).copied().is_some_and(is_key_byte)
            && (i == 0 || !b.get(i.saturating_sub(1)).copied().is_some_and(is_key_byte));
        if !starts {
            i = i.saturating_add(1);
            continue;
        }
        let mut j = i;
        while b.get(j).copied().is_some_and(is_key_byte) {
            j = j.saturating_add(1);
        }
        let raw = s.get(i..j).unwrap_or_default();
        // Not a key: a piece of base64 (after `+`, or mixing cases and digits after
        // `/`), or anything inside a certificate or a `data:` URI.
        let prev = b.get(i.wrapping_sub(1)).copied();
        let base64_piece = prev == Some(b'+')
            || (prev == Some(b'/') && has_digit(raw) && has_upper(raw) && has_lower(raw));
        if !may_name_secret(raw) || base64_piece || looks_like_junk_key(raw) || in_blob(blobs, i, j)
        {
            i = j;
            continue;
        }
        let flag = raw.starts_with("--") || (raw.starts_with('-') && raw.len() > 2);
        let key = raw.trim_start_matches('-').trim_end_matches(['.', '-']);
        let key_end = i.saturating_add(raw.trim_end_matches(['.', '-']).len());
        // `API key`, `access key`, `secret key`: a two-word key written with a space.
        let bare_key = key.eq_ignore_ascii_case("key") || key.eq_ignore_ascii_case("keys");
        let paired = bare_key && b.get(i.saturating_sub(1)) == Some(&b' ') && {
            let before = s.get(..i.saturating_sub(1)).unwrap_or_default();
            let qualifier = before
                .rsplit(|c: char| !c.is_ascii_alphabetic())
                .next()
                .unwrap_or_default();
            ["api", "access", "secret", "private", "signing", "account"]
                .iter()
                .any(|q| q.eq_ignore_ascii_case(qualifier))
        };
        let key = if paired { "api_key" } else { key };
        let mode = if key.is_empty() {
            None
        } else if is_sensitive_text_key(key) {
            Some(KeyMode::Sensitive)
        } else {
            entropy_mode(key)
        };
        if let Some(mode) = mode {
            if let Some(span) = value_after(s, key, i, key_end, flag, mode) {
                // Keys inside a secret value are part of it: scan on after it.
                j = j.max(span.end);
                out.push(span);
            }
        }
        i = j;
    }
}

/// A run of letters and digits of 12 or more with digits between letters and both cases
/// (`4LRecLMp1d97KcK8PW`): random text whose camelCase split would end in a word such as
/// `pw`, not a key anyone writes.
fn looks_like_junk_key(raw: &str) -> bool {
    raw.len() >= 12
        && raw.bytes().all(|c| c.is_ascii_alphanumeric())
        && has_upper(raw)
        && has_lower(raw)
        && raw
            .as_bytes()
            .windows(3)
            .filter(|w| {
                matches!(w, [x, d, y] if x.is_ascii_alphabetic() && d.is_ascii_digit() && y.is_ascii_alphabetic())
            })
            .count()
            >= 1
        && class_changes(raw.as_bytes()).saturating_mul(4) >= raw.len()
}

fn skip_blanks(b: &[u8], mut p: usize) -> usize {
    while b.get(p).is_some_and(|c| *c == b' ' || *c == b'\t') {
        p = p.saturating_add(1);
    }
    p
}

/// Farthest a value after a key is read, in bytes (longer secrets are caught by shape,
/// or redacted up to this bound).
const MAX_VALUE_BYTES: usize = 4096;

/// Farthest a scheme word (`Bearer`, `Splunk`) or the token after it is read when
/// deciding whether a value starts with a scheme, in bytes.
const MAX_SCHEME_WORD_BYTES: usize = 128;

/// `true` when `key` is written like an environment variable (`API_SECRET`, `DB_PASS`).
fn is_env_name(key: &str) -> bool {
    key.bytes()
        .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == b'_')
        && key.bytes().any(|c| c.is_ascii_uppercase())
}

/// The end of a quoted value starting at `p` (after its opening quote `q`): the closing
/// quote, a newline or the read bound.
fn quoted_end(b: &[u8], p: usize, q: u8) -> usize {
    let mut e = p;
    while let Some(c) = b.get(e).copied() {
        if c == q || c == b'\n' {
            break;
        }
        e = e.saturating_add(if c == b'\\' { 2 } else { 1 });
    }
    e.min(b.len())
}

/// `true` when the text before `at` on its line is blank or a word that introduces an
/// assignment or an item (`export`, `ENV`, `set`, `setenv`, `-`): `DB_PASSWORD=…` in a
/// `.env` file, `export API_TOKEN=…`, a YAML `password: …` line. Looks at most 64 bytes
/// back.
fn at_line_start(s: &str, at: usize) -> bool {
    let b = s.as_bytes();
    let from = at.saturating_sub(64);
    let before = b.get(from..at).unwrap_or_default();
    let line = match memchr::memrchr(b'\n', before) {
        Some(nl) => before.get(nl.saturating_add(1)..).unwrap_or_default(),
        None if from == 0 => before,
        None => return false,
    };
    let t = line.trim_ascii();
    t.is_empty() || [&b"export"[..], b"ENV", b"set", b"setenv", b"-"].contains(&t)
}

/// `true` when a `key=` starts at `at` (letters, digits, `_`, `-`, `.` starting with a
/// letter or `_`, then `=`), or the text ends there or a blank follows: a `;`, `&` or `,`
/// before `at` ends the value before it.
fn separator_ends_value(b: &[u8], at: usize) -> bool {
    let Some(first) = b.get(at).copied() else {
        return true;
    };
    if first.is_ascii_whitespace() {
        return true;
    }
    if !(first.is_ascii_alphabetic() || first == b'_') {
        return false;
    }
    let mut e = at;
    while b.get(e).copied().is_some_and(is_key_byte) {
        e = e.saturating_add(1);
    }
    b.get(e) == Some(&b'=')
}

/// `true` when a quote before `at` closes an enclosing string: the text ends, or a blank,
/// another quote or one of `,;)]}>` follows.
fn quote_closes(b: &[u8], at: usize) -> bool {
    b.get(at).is_none_or(|c| {
        c.is_ascii_whitespace()
            || matches!(
                c,
                b',' | b';' | b')' | b']' | b'}' | b'>' | b'"' | b'\'' | b'`'
            )
    })
}

/// `true` when an escaped quote (`\"`, JSON inside a string) starts at `p`.
fn escaped_quote_at(b: &[u8], p: usize) -> bool {
    b.get(p) == Some(&b'\\') && b.get(p.saturating_add(1)) == Some(&b'"')
}

/// The end of a value opened by an escaped quote (`\"v\"`): the next `\"`, a newline or
/// the end of `b`.
fn escaped_quote_end(b: &[u8], p: usize) -> usize {
    let mut e = p;
    while let Some(c) = b.get(e).copied() {
        if c == b'\n' || escaped_quote_at(b, e) {
            break;
        }
        e = e.saturating_add(1);
    }
    e.min(b.len())
}

/// `true` when `w` could be an HTTP authorization scheme: 2–32 letters, digits, `-` or
/// `_`, starting with a letter (`Splunk`, `SSWS`, `Key`, `GenieKey`, `AWS4-HMAC-SHA256`).
fn is_scheme_word(w: &str) -> bool {
    (2..=32).contains(&w.len())
        && w.starts_with(|c: char| c.is_ascii_alphabetic())
        && w.bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_')
}

/// A token of 8 or more characters that looks like a value rather than a word: a digit,
/// an uppercase letter after the first character, or one of `_-+/=.~`.
fn is_valueish_token(t: &str) -> bool {
    t.len() >= 8
        && (has_digit(t)
            || t.get(1..).is_some_and(has_upper)
            || t.bytes()
                .any(|c| matches!(c, b'_' | b'-' | b'+' | b'/' | b'=' | b'.' | b'~')))
}

/// Roots of code expressions that read a secret from somewhere (`os.environ[…]`,
/// `settings.TOKEN`, `process.env.API_KEY`, `self.password`).
const CODE_ROOTS: &[&str] = &[
    "os",
    "sys",
    "settings",
    "config",
    "conf",
    "cfg",
    "env",
    "environ",
    "process",
    "self",
    "this",
    "cls",
    "request",
    "req",
    "args",
    "opts",
    "options",
    "params",
    "props",
    "secrets",
    "vars",
    "context",
    "ctx",
    "app",
    "window",
    "credentials",
    "creds",
    "values",
    "inputs",
    "import",
];

/// `true` when an unquoted value is code that refers to a secret, not the secret: a
/// dotted identifier chain followed by a subscript (`os.environ["OPENAI_API_KEY"]`, read
/// up to the quote), or a dotted chain whose root is a [code root](CODE_ROOTS) or whose
/// last piece is written like an environment variable or is a sensitive key
/// (`settings.TOKEN`, `config.api_key`).
fn is_code_reference(v: &str) -> bool {
    let ident = |p: &str| {
        p.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            && p.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_')
    };
    let chain = |c: &str| c.split('.').all(ident);
    if let Some((head, rest)) = v.split_once('[') {
        return (head.contains('.') || rest.is_empty()) && chain(head);
    }
    let pieces: Vec<&str> = v.split('.').collect();
    pieces.len() >= 2
        && pieces.iter().all(|p| ident(p))
        && (pieces.first().is_some_and(|f| CODE_ROOTS.contains(f))
            || pieces
                .last()
                .is_some_and(|l| is_env_name(l) || is_sensitive_text_key(l)))
}

/// `true` when `key`'s last word is `header` or `headers` (`AUTH_HEADER`).
fn header_suffix(key: &str) -> bool {
    words(key)
        .last()
        .is_some_and(|l| l == "header" || l == "headers")
}

fn value_after(
    s: &str,
    key: &str,
    key_start: usize,
    key_end: usize,
    flag: bool,
    mode: KeyMode,
) -> Option<SecretSpan> {
    let b = s.as_bytes();
    // A value is read at most MAX_VALUE_BYTES far, so scanning stays linear in the text.
    let decide = |value: &str, sep: Sep, quoted: bool| match mode {
        KeyMode::Sensitive => value_is_secret(key, value, sep, quoted),
        KeyMode::Entropy { hex } => {
            value.len() >= 20 && is_high_entropy(value) && (hex || !all_hex(value))
        }
    };
    // `<password>v</password>`: an XML element named by the key.
    if key_start > 0
        && b.get(key_start.saturating_sub(1)) == Some(&b'<')
        && b.get(key_end) == Some(&b'>')
    {
        let p = key_end.saturating_add(1);
        let limit = p.saturating_add(MAX_VALUE_BYTES).min(b.len());
        let window = b.get(p..limit).unwrap_or_default();
        let end = p.saturating_add(
            window
                .iter()
                .position(|c| *c == b'<' || *c == b'\n')
                .unwrap_or(window.len()),
        );
        let raw = s.get(p..end).unwrap_or_default();
        let value = raw.trim();
        let start = p.saturating_add(raw.len().saturating_sub(raw.trim_start().len()));
        return (!value.is_empty() && decide(value, Sep::Assign, true))
            .then(|| start..start.saturating_add(value.len()));
    }
    let mut p = key_end;
    // `\"k\": \"v\"`: JSON embedded in a string (a request body in an error text).
    let escaped = escaped_quote_at(b, p);
    let key_quoted = escaped || matches!(b.get(p), Some(b'"' | b'\''));
    if key_quoted {
        p = p.saturating_add(if escaped { 2 } else { 1 });
    }
    let after_key = p;
    p = skip_blanks(b, p);
    // `"K", "v"` (`os.Setenv("TOKEN", "v")`, `setProperty("password", "v")`): a quoted key
    // followed by a quoted value.
    if key_quoted && b.get(p) == Some(&b',') {
        let v = skip_blanks(b, p.saturating_add(1));
        let q = b.get(v).copied().filter(|c| matches!(c, b'"' | b'\''))?;
        let start = v.saturating_add(1);
        let limit = start.saturating_add(MAX_VALUE_BYTES).min(b.len());
        let end = quoted_end(b.get(..limit).unwrap_or(b), start, q);
        let value = s.get(start..end).unwrap_or_default();
        return (end > start && decide(value, Sep::Pair, true)).then_some(start..end);
    }
    let rest = s.get(p..).unwrap_or_default();
    let mut sep = if rest.starts_with(":=") || rest.starts_with("=>") {
        p = p.saturating_add(2);
        Some(Sep::Assign)
    } else if rest.starts_with('=') && !rest.starts_with("==") {
        p = p.saturating_add(1);
        Some(if is_env_name(key) {
            Sep::Env
        } else {
            Sep::Assign
        })
    } else if rest.starts_with(':') && !rest.starts_with("::") && !rest.starts_with(":/") {
        p = p.saturating_add(1);
        Some(Sep::Colon)
    } else if flag && p > after_key && !key_quoted {
        Some(Sep::Assign)
    } else {
        None
    };
    let Some(found) = sep else {
        return match mode {
            KeyMode::Sensitive => adjacent_entropy(s, key, p),
            KeyMode::Entropy { .. } => None,
        };
    };
    p = skip_blanks(b, p);
    let header = words(key)
        .iter()
        .any(|w| ["authorization", "cookie", "auth", "authentication"].contains(&w.as_str()));
    // An auth scheme word (`Bearer`, `Basic`, `token`, …) before the value is skipped.
    // A scheme word and the token after it are short: reading at most
    // MAX_SCHEME_WORD_BYTES keeps the scan linear in a text of keys without blanks
    // (`password=a&password=a&…` once read to the end of the text at every key).
    let word_end = |from: usize| {
        let mut e = from;
        while e.saturating_sub(from) < MAX_SCHEME_WORD_BYTES
            && b.get(e).is_some_and(|c| {
                !c.is_ascii_whitespace() && !matches!(c, b'"' | b'\'' | b',' | b';')
            })
        {
            e = e.saturating_add(1);
        }
        e
    };
    let open_escaped = escaped_quote_at(b, p);
    if open_escaped {
        p = p.saturating_add(1);
    }
    let open = b.get(p).copied();
    let quoted = matches!(open, Some(b'"' | b'\'' | b'`'));
    if quoted {
        p = p.saturating_add(1);
    }
    let w_end = word_end(p);
    let first = s.get(p..w_end).unwrap_or_default();
    let mut schemed = false;
    let known_scheme = [
        "bearer",
        "basic",
        "token",
        "digest",
        "bot",
        "oauth",
        "apikey",
        "negotiate",
        "sso-key",
    ]
    .iter()
    .any(|w| w.eq_ignore_ascii_case(first));
    // In an `Authorization:` / `Proxy-Authorization:` header the word after any one
    // scheme-like word is the credential (`Splunk <uuid>`, `SSWS <token>`, `Key <k>`,
    // `GenieKey <uuid>`), when it looks like a value.
    let next_word = {
        let v = skip_blanks(b, w_end);
        s.get(v..word_end(v)).unwrap_or_default()
    };
    let other_scheme = !known_scheme
        && (found == Sep::Colon || quoted)
        && words(key).iter().any(|w| w == "authorization")
        && is_scheme_word(first)
        && (is_valueish_token(next_word) || is_uuid(next_word));
    // After a scheme word the value is the token (`Authorization: Bearer …`,
    // `AUTH_HEADER=Token …`).
    if (known_scheme || other_scheme)
        && b.get(w_end) == Some(&b' ')
        && !matches!(b.get(skip_blanks(b, w_end)), Some(b'-'))
    {
        p = skip_blanks(b, w_end);
        schemed = true;
    }
    if matches!(b.get(p), Some(b'{' | b'[' | b'(')) || (!quoted && b.get(p) == Some(&b'<')) {
        return None;
    }
    let limit = p.saturating_add(MAX_VALUE_BYTES).min(b.len());
    let b = b.get(..limit).unwrap_or(b);
    let cookie = key.to_ascii_lowercase().contains("cookie");
    // After an environment variable at the start of a line (`DB_PASSWORD=…`, `export
    // …`) or after a `--flag`, the value is the whole word: `&`, `;`, `,`, `<`, `)` …
    // end it only where a shell or a query would (`;`/`&`/`,` before the next `key=`, a
    // quote that closes an enclosing string).
    let whole_word = !quoted && (flag || (found == Sep::Env && at_line_start(s, key_start)));
    let mut end = if quoted && open_escaped {
        escaped_quote_end(b, p)
    } else if quoted {
        quoted_end(b, p, open.unwrap_or(b'"'))
    } else if header && found == Sep::Colon && cookie {
        let line = b.get(p..).unwrap_or_default();
        p.saturating_add(
            line.iter()
                .position(|c| *c == b'\n' || *c == b'\r')
                .unwrap_or(line.len()),
        )
    } else {
        let mut e = p;
        // Brackets opened inside a whole word: a closing one with none open ends the
        // value (`(tool login --db-password=S3cret)`).
        let mut depth: usize = 0;
        while let Some(c) = b.get(e).copied() {
            let next = e.saturating_add(1);
            let stop = match c {
                b'(' | b'[' | b'{' if whole_word => {
                    depth = depth.saturating_add(1);
                    false
                }
                b')' | b']' | b'}' if whole_word && depth > 0 => {
                    depth = depth.saturating_sub(1);
                    false
                }
                _ if c.is_ascii_whitespace() => true,
                // A query's or a connection string's next key (`a=1&password=x&b=2`,
                // `Server=x;Password=y;Db=z`), or a separator at the end of the value.
                b';' | b'&' => separator_ends_value(b, next),
                b',' => !whole_word || separator_ends_value(b, next),
                b'"' | b'\'' | b'`' => !whole_word || quote_closes(b, next),
                b')' | b']' | b'}' => true,
                b'<' | b'>' | b'|' => !whole_word,
                _ => false,
            };
            if stop {
                break;
            }
            e = next;
        }
        // A sentence's full stop or colon is not part of the value.
        while e > p && matches!(b.get(e.saturating_sub(1)), Some(b'.' | b':')) {
            e = e.saturating_sub(1);
        }
        e
    };
    // `password: correct horse battery staple` on a YAML-like line: the rest of the line
    // is the value when it reads as a passphrase.
    let mut multiword = false;
    if !quoted
        && !schemed
        && found == Sep::Colon
        && mode == KeyMode::Sensitive
        && is_password_key(key)
        && at_line_start(s, key_start)
    {
        let line = b.get(p..).unwrap_or_default();
        let nl = line
            .iter()
            .position(|c| *c == b'\n' || *c == b'\r')
            .unwrap_or(line.len());
        let text = s
            .get(p..p.saturating_add(nl))
            .unwrap_or_default()
            .trim_end();
        let first_word = text.split_whitespace().next().unwrap_or_default();
        if text.contains(char::is_whitespace)
            && is_passphrase(text)
            && !is_placeholder(first_word)
            && !first_word.contains(['(', ')', '['])
        {
            end = p.saturating_add(text.len());
            multiword = true;
        }
    }
    if quoted && found == Sep::Colon {
        sep = Some(Sep::Assign);
    }
    let value = s.get(p..end).unwrap_or_default();
    let is_secret = if multiword {
        true
    } else if cookie && found == Sep::Colon && !quoted {
        value.len() >= 8 && value.contains('=')
    } else if schemed {
        value.len() >= 8 && !value.chars().any(char::is_whitespace) && !is_placeholder(value)
    } else if !quoted && is_code_reference(value) {
        false
    } else if header_suffix(key) && !has_digit(value) {
        // `AUTH_HEADER: X-Api-Key` names a header; its value has digits.
        false
    } else {
        decide(value, sep.unwrap_or(Sep::Colon), quoted)
    };
    if !is_secret || end <= p {
        return None;
    }
    // A secret longer than the read bound is redacted whole: run on to its end.
    let full = s.as_bytes();
    if end == limit {
        while full
            .get(end)
            .is_some_and(|c| !c.is_ascii_whitespace() && !matches!(c, b'"' | b'\'' | b'`'))
        {
            end = end.saturating_add(1);
        }
    }
    Some(p..end)
}

/// A word that reads as a value rather than prose: a digit, an uppercase letter after the
/// first character, or punctuation other than `-` and `'` (`hunter2hunter2`, `Tr0ub4dor`,
/// `n7&Qz!x2Lp`; not `stored`, `case-sensitive`).
fn is_value_word(w: &str) -> bool {
    has_digit(w)
        || w.get(1..).is_some_and(has_upper)
        || w.bytes()
            .any(|c| c.is_ascii_punctuation() && c != b'-' && c != b'\'')
}

/// Bytes after a key searched for an adjacent high-entropy word.
const ADJACENT_WINDOW: usize = 1024;

/// `w` without `%XX` escapes (a URL-encoded `=` padding is `%3D`), for the entropy test.
fn without_escapes(w: &str) -> std::borrow::Cow<'_, str> {
    if !w.contains('%') {
        return std::borrow::Cow::Borrowed(w);
    }
    let b = w.as_bytes();
    let mut out = String::with_capacity(w.len());
    let mut i = 0;
    while let Some(c) = b.get(i).copied() {
        let escape = c == b'%'
            && b.get(i.saturating_add(1))
                .is_some_and(u8::is_ascii_hexdigit)
            && b.get(i.saturating_add(2))
                .is_some_and(u8::is_ascii_hexdigit);
        if escape {
            i = i.saturating_add(3);
        } else {
            out.push(char::from(c));
            i = i.saturating_add(1);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// `8-4-4-4-12` hex digits.
fn is_uuid(w: &str) -> bool {
    w.len() == 36
        && w.bytes().enumerate().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => c == b'-',
            _ => c.is_ascii_hexdigit(),
        })
}

/// With no separator after a sensitive key: the first high-entropy word (or UUID) among
/// the next four words on the same line (`the token 3f2a…`), the word after `is`, `was`,
/// `of` or `=` when it looks like a value (`the password is hunter2hunter2`), or, after a
/// password key, a first word that reads as a password (`password hunter2hunter2`, as in
/// `.netrc`).
fn adjacent_entropy(s: &str, key: &str, from: usize) -> Option<SecretSpan> {
    // Four words fit in a short window: looking no further keeps the scan linear.
    let mut window_end = from.saturating_add(ADJACENT_WINDOW).min(s.len());
    while !s.is_char_boundary(window_end) {
        window_end = window_end.saturating_sub(1);
    }
    let line = s.get(from..window_end).unwrap_or_default();
    let line = line
        .get(..line.find(['\n', '\r']).unwrap_or(line.len()))
        .unwrap_or_default();
    let mut pos: usize = 0;
    let mut copula: Option<&str> = None;
    let password = is_password_key(key);
    for (n, word) in line.split([' ', '\t']).enumerate() {
        let start = pos;
        pos = pos.saturating_add(word.len()).saturating_add(1);
        if word.is_empty() {
            continue;
        }
        if n > 3 {
            break;
        }
        let lead = word.len().saturating_sub(
            word.trim_start_matches(['"', '\'', '`', '(', '[', '<'])
                .len(),
        );
        let core = word
            .trim_start_matches(['"', '\'', '`', '(', '[', '<'])
            .trim_end_matches(['"', '\'', '`', ')', ']', '>', ',', '.', ';', ':']);
        // A `k=v` / `k:v` word is another key's business (the key scan sees it).
        if core.trim_end_matches('=').contains(['=', ':']) {
            break;
        }
        let entropy = is_high_entropy(&without_escapes(core)) || is_uuid(core);
        // Only after a key that is just the word (`password hunter2`, as in `.netrc`),
        // not after a name ending in it (`test_reset_password PASSED`).
        let first_password = password
            && n == 0
            && words(key).len() == 1
            && !core.contains(['=', ':'])
            && is_passwordish(core);
        // After `is`/`was` only a word that looks like a value (`the password is
        // hunter2hunter2`), not prose (`the password is stored in the vault`).
        let after_copula = match copula {
            Some("is" | "was") => {
                value_is_secret(key, core, Sep::Colon, false) && is_value_word(core)
            }
            Some(_) => value_is_secret(key, core, Sep::Colon, false),
            None => false,
        };
        if entropy || first_password || after_copula {
            let st = from.saturating_add(start).saturating_add(lead);
            return Some(st..st.saturating_add(core.len()));
        }
        copula = ["is", "was", "=", "of"]
            .iter()
            .copied()
            .find(|c| *c == word);
    }
    None
}

/// First prefix levels of identifiers that are not secrets although a random run follows
/// (API object ids such as `msg_…`, `toolu_…`, `chatcmpl-…`, `resp_…`, `cus_…`, `evt_…`;
/// digests and builds such as `sha512-…`, `commit-…`), compared without case.
const ID_PREFIXES: &[&str] = &[
    "msg",
    "toolu",
    "srvtoolu",
    "req",
    "request",
    "chatcmpl",
    "cmpl",
    "call",
    "resp",
    "run",
    "thread",
    "asst",
    "file",
    "batch",
    "ftjob",
    "evt",
    "event",
    "ch",
    "cus",
    "pi",
    "pm",
    "sub",
    "in",
    "ii",
    "txn",
    "price",
    "prod",
    "acct",
    "seti",
    "src",
    "ord",
    "order",
    "item",
    "org",
    "proj",
    "user",
    "usr",
    "sess",
    "session",
    "span",
    "trace",
    "job",
    "task",
    "cmd",
    "step",
    "obj",
    "id",
    "uuid",
    "ulid",
    "test",
    "fixture",
    "snapshot",
    "build",
    "commit",
    "sha",
    "sha1",
    "sha224",
    "sha256",
    "sha384",
    "sha512",
    "md5",
    "blake2b",
    "blake3",
    "git",
    "rev",
    "ref",
    "hash",
    "digest",
    "blob",
    "tree",
    "layer",
    "image",
    "img",
    "cache",
    "tmp",
    "temp",
    "node",
    "pod",
    "container",
    "vol",
    "snap",
    "ami",
    "chunk",
    "asset",
    "bundle",
    "v1",
    "v2",
];

/// Count of adjacent pairs of `run` whose character class (upper, lower, digit) differs.
fn class_changes(run: &[u8]) -> usize {
    let class = |c: u8| {
        if c.is_ascii_uppercase() {
            0
        } else if c.is_ascii_lowercase() {
            1
        } else {
            2
        }
    };
    run.windows(2)
        .filter(|p| matches!(p, [a, b] if class(*a) != class(*b)))
        .count()
}

/// `true` when `run` (one case of letters, and digits) looks random: at least 24
/// characters, at least 10 % digits and 40 % letters, fewer than 40 % of its letters
/// vowels, the class (letter, digit) changing at 20 % or more of adjacent pairs, not all
/// hex (hex runs are digests). `upper` chooses the case. Random base36 runs (New Relic's
/// `NRAK-…`, ReadMe's `rdme_…`, Azure DevOps PATs) pass; words, numbered names and hex
/// digests do not.
fn looks_like_random_one_case(run: &str, upper: bool) -> bool {
    let b = run.as_bytes();
    let n = b.len();
    let case_ok = |c: &u8| {
        c.is_ascii_digit()
            || if upper {
                c.is_ascii_uppercase()
            } else {
                c.is_ascii_lowercase()
            }
    };
    if n < 24 || !b.iter().all(case_ok) || all_hex(run) {
        return false;
    }
    let digits = b.iter().filter(|c| c.is_ascii_digit()).count();
    let letters = n.saturating_sub(digits);
    let vowels = b
        .iter()
        .filter(|c| matches!(c.to_ascii_lowercase(), b'a' | b'e' | b'i' | b'o' | b'u'))
        .count();
    digits.saturating_mul(10) >= n
        && letters.saturating_mul(10) >= n.saturating_mul(4)
        && vowels.saturating_mul(10) < letters.saturating_mul(4)
        && class_changes(b).saturating_mul(5) >= n.saturating_sub(1)
}

/// `true` when `run` looks random in any of the alphabets keys use: mixed case
/// ([`looks_like_random_token`]), or one case with digits.
fn looks_random(run: &str) -> bool {
    looks_like_random_token(run)
        || looks_like_random_one_case(run, false)
        || looks_like_random_one_case(run, true)
}

/// The longest run of hex digits in `s`.
fn longest_hex_run(s: &str) -> usize {
    s.split(|c: char| !c.is_ascii_hexdigit())
        .map(str::len)
        .max()
        .unwrap_or(0)
}

/// A token of the common shape `<prefix>_<random>` / `<prefix>-<random>` whose prefix no
/// rule names (Groq's `gsk_…`, Prefect's `pnu_…`, Scalingo's `tk-us-…`, …): one or two
/// prefix levels (a letter and up to 11 letters or digits, then `_` or `-`; a second
/// level of up to 6 lowercase letters or digits), then a body of letters, digits, `_`
/// and `-` with few separators whose letters and digits look random — mixed case and at
/// least 27 characters, one case and at least 24, or a hex run of 40 or more — unless the
/// prefix names an object id or a digest ([`ID_PREFIXES`]).
fn is_prefixed_random(w: &str) -> bool {
    let b = w.as_bytes();
    if b.len() < 24 {
        return false;
    }
    let level = |from: usize, max: usize, lower_only: bool| -> Option<usize> {
        let first = b.get(from)?;
        if !first.is_ascii_alphabetic() {
            return None;
        }
        let mut e = from;
        while b
            .get(e)
            .is_some_and(|c| c.is_ascii_alphanumeric() && (!lower_only || !c.is_ascii_uppercase()))
        {
            e = e.saturating_add(1);
            if e.saturating_sub(from) > max {
                return None;
            }
        }
        matches!(b.get(e), Some(b'_' | b'-')).then(|| e.saturating_add(1))
    };
    let Some(first_end) = level(0, 12, false) else {
        return false;
    };
    let first = w.get(..first_end.saturating_sub(1)).unwrap_or_default();
    if ID_PREFIXES.iter().any(|p| p.eq_ignore_ascii_case(first)) {
        return false;
    }
    let body_start = level(first_end, 6, true).unwrap_or(first_end);
    let body = w.get(body_start..).unwrap_or_default();
    if !body
        .bytes()
        .all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-')
    {
        return false;
    }
    let alnum: String = body.chars().filter(char::is_ascii_alphanumeric).collect();
    let seps = body.len().saturating_sub(alnum.len());
    if seps.saturating_mul(8) > alnum.len() {
        return false;
    }
    let n = alnum.len();
    (n >= 27 && looks_like_random_token(&alnum))
        || (n >= 24
            && (looks_like_random_one_case(&alnum, false)
                || looks_like_random_one_case(&alnum, true)))
        || (longest_hex_run(body) >= 40
            && has_digit(body)
            && body.bytes().any(|c| c.is_ascii_alphabetic()))
}

/// A word of letters and digits joined by dots whose letters and digits together look
/// random (Airtable's `pat<14>.<64 hex>`): at least two pieces, 40 or more characters.
fn is_dotted_random(w: &str) -> bool {
    if !w.contains('.') || w.len() < 41 {
        return false;
    }
    let pieces: Vec<&str> = w.split('.').collect();
    if pieces.len() < 2
        || pieces
            .iter()
            .any(|p| p.is_empty() || !p.bytes().all(|c| c.is_ascii_alphanumeric()))
    {
        return false;
    }
    let all: String = pieces.concat();
    // Or a long hex piece after a piece of 10 or more letters and digits with a digit or
    // a capital (`pat<14>.<64 hex>`); `main.<hex>.js` has a short word first.
    let hex_after_id = pieces.windows(2).any(|p| {
        matches!(p, [a, h] if a.len() >= 10
            && !all_hex(a)
            && (has_digit(a) || has_upper(a))
            && h.len() >= 40
            && all_hex(h)
            && has_digit(h)
            && h.bytes().any(|c| c.is_ascii_alphabetic()))
    });
    all.len() >= 40 && (looks_like_random_token(&all) || hex_after_id)
}

/// A bare word of 24 or more letters and digits that looks random
/// ([`looks_like_random_token`]; Alibaba's `LTAI…`, EasyPost's `EZAK…`, or any key
/// without a known prefix). Not a base64 body (a word starting `AAAA`, as SSH keys do).
fn is_bare_random(w: &str) -> bool {
    w.len() >= 24
        && w.bytes().all(|c| c.is_ascii_alphanumeric())
        && !w.starts_with("AAAA")
        && looks_like_random_token(w)
}

/// What the generic rules of the word scan (no named prefix) say about a word.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Generic {
    /// Not a secret.
    No,
    /// [`is_prefixed_random`] or [`is_dotted_random`]: a secret wherever it stands.
    Prefixed,
    /// [`is_bare_random`]: a secret unless it is a piece of a base64 body or a URL path.
    Random,
}

/// The generic rules for `w` (and for `w` without a file extension: `build/<key>.log`).
fn generic_secret(w: &str) -> Generic {
    let stem = match w.rsplit_once('.') {
        Some((stem, ext))
            if (1..=5).contains(&ext.len()) && ext.bytes().all(|c| c.is_ascii_alphanumeric()) =>
        {
            stem
        }
        _ => w,
    };
    if is_prefixed_random(w)
        || is_prefixed_random(stem)
        || is_dotted_random(w)
        || is_dotted_random(stem)
    {
        Generic::Prefixed
    } else if is_bare_random(w) || is_bare_random(stem) {
        Generic::Random
    } else {
        Generic::No
    }
}

/// Base64 tokens behind a prefix (1Password's `ops_eyJ…`, any `<prefix>_<base64>`): a
/// whitespace-free token of 40 or more base64 characters with a `/` or `+` in it, after
/// one prefix level ([`ID_PREFIXES`] excluded), whose letters and digits look random.
/// The word scan cannot see these: `/` splits them.
fn prefixed_base64_spans(s: &str, blobs: &[SecretSpan], out: &mut Vec<SecretSpan>) {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let boundary = |c: u8| {
            c.is_ascii_whitespace()
                || matches!(
                    c,
                    b'"' | b'\''
                        | b'`'
                        | b','
                        | b';'
                        | b'('
                        | b')'
                        | b'<'
                        | b'>'
                        | b'['
                        | b']'
                        | b'{'
                        | b'}'
                )
        };
        if b.get(i).copied().is_some_and(boundary) {
            i = i.saturating_add(1);
            continue;
        }
        let start = i;
        while b.get(i).copied().is_some_and(|c| !boundary(c)) {
            i = i.saturating_add(1);
        }
        let token = s.get(start..i).unwrap_or_default();
        if token.len() < 40 || !token.contains(['/', '+']) {
            continue;
        }
        let Some(sep) = token.find(['_', '-']).filter(|p| (2..=12).contains(p)) else {
            continue;
        };
        let (prefix, body) = (
            token.get(..sep).unwrap_or_default(),
            token.get(sep.saturating_add(1)..).unwrap_or_default(),
        );
        let b64 = |c: u8| c.is_ascii_alphanumeric() || matches!(c, b'+' | b'/' | b'=');
        if !prefix.bytes().all(|c| c.is_ascii_alphanumeric())
            || !prefix.starts_with(|c: char| c.is_ascii_alphabetic())
            || ID_PREFIXES.iter().any(|p| p.eq_ignore_ascii_case(prefix))
            || body.len() < 36
            || !body.bytes().all(b64)
            || in_blob(blobs, start, i)
        {
            continue;
        }
        let alnum: String = body.chars().filter(char::is_ascii_alphanumeric).collect();
        if looks_like_random_token(&alnum) {
            out.push(start..i);
        }
    }
}

/// `true` when `start..end` lies inside one of `blobs` (sorted by start and merged, as
/// [`benign_blobs`] returns them): a binary search, so that checking every word of a text
/// full of blobs stays `O(n log n)`.
fn in_blob(blobs: &[SecretSpan], start: usize, end: usize) -> bool {
    let after = blobs.partition_point(|r| r.start <= start);
    after
        .checked_sub(1)
        .and_then(|i| blobs.get(i))
        .is_some_and(|r| end <= r.end)
}

/// Ranges of the text the generic rules leave alone: PEM blocks that are not private
/// keys (certificates, public keys: base64 that looks random) and `data:` URIs; sorted
/// by start, overlapping ranges merged (see [`in_blob`]).
fn benign_blobs(s: &str) -> Vec<SecretSpan> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(pos) = s.get(from..).and_then(|r| find(r, "-----BEGIN ")) {
        let begin = from.saturating_add(pos);
        let rest = s.get(begin..).unwrap_or_default();
        let end = rest
            .find("-----END ")
            .map_or(s.len(), |e| begin.saturating_add(e).saturating_add(9));
        out.push(begin..end);
        from = end.max(begin.saturating_add(11));
    }
    let mut from = 0;
    while let Some(pos) = s.get(from..).and_then(|r| find(r, ";base64,")) {
        let start = from.saturating_add(pos);
        let body = s.get(start..).unwrap_or_default();
        let len = body
            .find(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | ')' | '>'))
            .unwrap_or(body.len());
        out.push(start..start.saturating_add(len));
        from = start.saturating_add(len).max(start.saturating_add(8));
    }
    out.sort_by_key(|r| (r.start, r.end));
    let mut merged: Vec<SecretSpan> = Vec::with_capacity(out.len());
    for r in out {
        match merged.last_mut() {
            Some(last) if r.start <= last.end => last.end = last.end.max(r.end),
            _ => merged.push(r),
        }
    }
    merged
}

/// After an AWS access key id at `end`: the 40-character secret access key that follows
/// it in a credentials CSV or a pasted pair (`AKIA…,wJalr…`, `AKIA… wJalr…`).
fn aws_secret_after(s: &str, end: usize) -> Option<SecretSpan> {
    let b = s.as_bytes();
    let mut p = end;
    let mut skipped: usize = 0;
    while b
        .get(p)
        .is_some_and(|c| matches!(c, b',' | b';' | b':' | b'=' | b' ' | b'\t' | b'"' | b'\''))
    {
        p = p.saturating_add(1);
        skipped = skipped.saturating_add(1);
        if skipped > 8 {
            return None;
        }
    }
    let mut e = p;
    while b
        .get(e)
        .is_some_and(|c| c.is_ascii_alphanumeric() || matches!(c, b'/' | b'+'))
    {
        e = e.saturating_add(1);
    }
    let key = s.get(p..e)?;
    (key.len() == 40 && has_upper(key) && has_lower(key)).then_some(p..e)
}

/// The end of the whitespace-free token starting at `p`, at most `max` bytes on.
fn token_end(b: &[u8], p: usize, max: usize) -> usize {
    let mut e = p;
    while e.saturating_sub(p) < max
        && b.get(e)
            .is_some_and(|c| !c.is_ascii_whitespace() && !matches!(c, b'"' | b'\'' | b'`'))
    {
        e = e.saturating_add(1);
    }
    e
}

/// `true` when `text` (a flag's value) is not a literal: empty, a `$VAR` / `${…}` /
/// `%VAR%`, or another placeholder.
fn is_flag_placeholder(text: &str) -> bool {
    text.is_empty() || text.starts_with(['$', '%', '<', '{', '*']) || is_placeholder(text)
}

/// Passwords in command-line flags, which name no key the key scan would see:
///
/// * `-u user:password`, `--user user:password`, `--user=user:password`,
///   `--proxy-user …` (curl, wget): the part after the first `:`;
/// * `-p<password>` attached, on a line that runs a MySQL client (`mysql`, `mysqldump`,
///   `mysqladmin`, `mariadb`): everything after `-p`;
/// * `-p <password>` on a line that logs in (`docker login`, `podman login`, `helm
///   registry login`, …) or runs `sshpass`.
///
/// Placeholders (`$TOKEN`, `${PASS}`) are not secrets; a value that starts with `-` is
/// the next flag.
fn flag_spans(s: &str, out: &mut Vec<SecretSpan>) {
    let mut line_start: usize = 0;
    for line in s.split_inclusive('\n') {
        let base = line_start;
        line_start = line_start.saturating_add(line.len());
        if !line.contains('-') {
            continue;
        }
        let lower_has = |w: &[u8]| contains_ci(line.as_bytes(), w);
        let mysql = lower_has(b"mysql") || lower_has(b"mariadb");
        // `login` / `sshpass` as a word of the command (`docker login`), not inside a
        // path (`mkdir -p src/login`, `cp -p login.html dist/`).
        let login_at = command_word_at(line, &["login", "sshpass"]);
        let redis = command_word_at(line, &["redis-cli"]).is_some();
        // A `-u <user>` / `-u<user>` / `--username` seen earlier on the line.
        let mut user_seen = false;
        let lb = line.as_bytes();
        let mut i = 0;
        while let Some(off) = lb.get(i..).and_then(|r| r.iter().position(|c| *c == b'-')) {
            let at = i.saturating_add(off);
            i = at.saturating_add(1);
            let boundary = at == 0
                || lb
                    .get(at.saturating_sub(1))
                    .is_some_and(u8::is_ascii_whitespace);
            if !boundary {
                continue;
            }
            let rest = line.get(at..).unwrap_or_default();
            let flag_len = ["--proxy-user", "--user", "-u"]
                .iter()
                .find(|f| {
                    rest.starts_with(**f)
                        && matches!(rest.as_bytes().get(f.len()), Some(b' ' | b'\t' | b'='))
                })
                .map(|f| f.len());
            if flag_len.is_some()
                || rest.starts_with("--username")
                || (rest.starts_with("-u")
                    && rest
                        .as_bytes()
                        .get(2)
                        .is_some_and(u8::is_ascii_alphanumeric))
            {
                user_seen = true;
            }
            if let Some(n) = flag_len {
                let v = skip_blanks(
                    lb,
                    at.saturating_add(n)
                        .saturating_add(usize::from(rest.as_bytes().get(n) == Some(&b'='))),
                );
                let quote = usize::from(matches!(lb.get(v), Some(b'"' | b'\'')));
                let v = v.saturating_add(quote);
                let e = token_end(lb, v, MAX_VALUE_BYTES);
                let token = line.get(v..e).unwrap_or_default();
                if let Some((user, pass)) = token.split_once(':') {
                    let pass_start = v.saturating_add(user.len()).saturating_add(1);
                    if !user.starts_with('-') && pass.len() >= 4 && !is_flag_placeholder(pass) {
                        out.push(base.saturating_add(pass_start)..base.saturating_add(e));
                    }
                }
                continue;
            }
            // `redis-cli -a <password>`.
            let redis_auth = redis && rest.starts_with("-a");
            if !rest.starts_with("-p") && !redis_auth {
                continue;
            }
            let login = login_at.is_some_and(|l| l < at);
            let after = at.saturating_add(2);
            match lb.get(after) {
                Some(b' ' | b'\t') if !login && (redis_auth || user_seen) => {
                    // `mongosh -u admin -p <password>`, `redis-cli -a <password>`.
                    let v = skip_blanks(lb, after);
                    let e = token_end(lb, v, MAX_VALUE_BYTES);
                    let value = line.get(v..e).unwrap_or_default();
                    let port = value.len() <= 5 && value.bytes().all(|c| c.is_ascii_digit());
                    if value.len() >= 4
                        && !port
                        && !value.starts_with('-')
                        && !is_wordy(value)
                        && !is_flag_placeholder(value)
                    {
                        out.push(base.saturating_add(v)..base.saturating_add(e));
                    }
                }
                _ if redis_auth => {}
                Some(c) if mysql && !c.is_ascii_whitespace() => {
                    let e = token_end(lb, after, MAX_VALUE_BYTES);
                    let value = line.get(after..e).unwrap_or_default();
                    // `-print`, `-pipe`: another flag of the same line, not a password.
                    let word = value.bytes().all(|c| c.is_ascii_lowercase());
                    if !word && !is_flag_placeholder(value) {
                        out.push(base.saturating_add(after)..base.saturating_add(e));
                    }
                }
                Some(b' ' | b'\t') if login => {
                    let v = skip_blanks(lb, after);
                    let e = token_end(lb, v, MAX_VALUE_BYTES);
                    let value = line.get(v..e).unwrap_or_default();
                    // A port (`ssh -p 2222`) is no password.
                    let port = value.len() <= 5 && value.bytes().all(|c| c.is_ascii_digit());
                    if value.len() >= 4
                        && !port
                        && !value.starts_with('-')
                        && !is_flag_placeholder(value)
                    {
                        out.push(base.saturating_add(v)..base.saturating_add(e));
                    }
                }
                _ => {}
            }
        }
    }
}

/// The position of the first whitespace-separated word of `line` that is one of `names`
/// (ASCII case-insensitively).
fn command_word_at(line: &str, names: &[&str]) -> Option<usize> {
    let b = line.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b.get(i).is_some_and(u8::is_ascii_whitespace) {
            i = i.saturating_add(1);
            continue;
        }
        let start = i;
        while b.get(i).is_some_and(|c| !c.is_ascii_whitespace()) {
            i = i.saturating_add(1);
        }
        let word = b.get(start..i).unwrap_or_default();
        if names
            .iter()
            .any(|n| word.eq_ignore_ascii_case(n.as_bytes()))
        {
            return Some(start);
        }
    }
    None
}

/// How far back an attribute scan looks for the tag's naming attribute, in bytes.
const MAX_TAG_BYTES: usize = 512;

/// The value of `attr="…"` (or `'…'`) in `tag`, ASCII case-insensitive name, with its
/// byte range in `tag`.
fn attribute<'a>(tag: &'a str, attr: &str) -> Option<(&'a str, SecretSpan)> {
    let b = tag.as_bytes();
    let n = attr.len();
    let mut i: usize = 0;
    while i.saturating_add(n) < b.len() {
        let name = b.get(i..i.saturating_add(n))?;
        let boundary = i == 0
            || b.get(i.saturating_sub(1))
                .is_some_and(u8::is_ascii_whitespace);
        if boundary && name.eq_ignore_ascii_case(attr.as_bytes()) {
            if let Some(p) = past_separator(b, i.saturating_add(n), b'=', false) {
                if let Some(q) = b.get(p).copied().filter(|c| matches!(c, b'"' | b'\'')) {
                    let start = p.saturating_add(1);
                    let end = start.saturating_add(b.get(start..)?.iter().position(|c| *c == q)?);
                    return Some((tag.get(start..end)?, start..end));
                }
            }
        }
        i = i.saturating_add(1);
    }
    None
}

/// Name/value attribute pairs in markup: `<add key="ApiKey" value="…"/>` (.NET
/// `appSettings`), `<add name="password" value="…">`, `<input name="password"
/// value="…">`, `<entry key="token" value="…"/>`: the `value` when the `key`, `name` or
/// `id` attribute of the same tag is a sensitive key and the value looks like a secret.
fn attribute_spans(s: &str, out: &mut Vec<SecretSpan>) {
    let b = s.as_bytes();
    let mut from = 0;
    while let Some(at) = find_ci(b, b"value", from) {
        from = at.saturating_add(5);
        let tag_start = b
            .get(at.saturating_sub(MAX_TAG_BYTES)..at)
            .and_then(|r| r.iter().rposition(|c| *c == b'<' || *c == b'>'))
            .map(|p| at.saturating_sub(MAX_TAG_BYTES).saturating_add(p));
        let Some(tag_start) = tag_start.filter(|p| b.get(*p) == Some(&b'<')) else {
            continue;
        };
        let tag_end = b
            .get(at..)
            .and_then(|r| r.iter().take(MAX_VALUE_BYTES).position(|c| *c == b'>'))
            .map_or(b.len().min(at.saturating_add(MAX_VALUE_BYTES)), |p| {
                at.saturating_add(p)
            });
        let Some(tag) = s.get(tag_start..tag_end) else {
            continue;
        };
        let Some((value, range)) = attribute(tag, "value") else {
            continue;
        };
        let name = ["key", "name", "id"]
            .iter()
            .find_map(|a| attribute(tag, a).map(|(v, _)| v));
        if let Some(name) = name {
            if is_sensitive_text_key(name) && value_is_secret(name, value, Sep::Assign, true) {
                out.push(
                    tag_start.saturating_add(range.start)..tag_start.saturating_add(range.end),
                );
            }
        }
        from = from.max(tag_end);
    }
}

/// Past a key's closing quotes (`"`, `'`, `\` of an escaped quote; only when `quotes`),
/// blanks, `sep` and blanks again: where the value starts, or `None` when `sep` does not
/// follow the key.
fn past_separator(b: &[u8], mut p: usize, sep: u8, quotes: bool) -> Option<usize> {
    if quotes {
        while matches!(b.get(p), Some(b'"' | b'\'' | b'\\')) {
            p = p.saturating_add(1);
        }
    }
    p = skip_blanks(b, p);
    (b.get(p) == Some(&sep)).then(|| skip_blanks(b, p.saturating_add(1)))
}

/// How far a name/value scan looks for the sibling `name` or `key`, in bytes each way.
const MAX_SIBLING_BYTES: usize = 256;

/// The value of the first `name` or `key` field in `region` (`name: DB_PASSWORD`,
/// `"key": "api_key"`, quotes and escaped quotes around key and value allowed).
fn sibling_name(region: &str) -> Option<&str> {
    let b = region.as_bytes();
    for field in [&b"name"[..], b"key"] {
        let mut from = 0;
        while let Some(at) = find_ci(b, field, from) {
            from = at.saturating_add(field.len());
            if at > 0
                && b.get(at.saturating_sub(1))
                    .copied()
                    .is_some_and(is_key_byte)
            {
                continue;
            }
            let Some(mut p) = past_separator(b, from, b':', true) else {
                continue;
            };
            while matches!(b.get(p), Some(b'"' | b'\'' | b'\\')) {
                p = p.saturating_add(1);
            }
            let mut e = p;
            while b.get(e).copied().is_some_and(is_key_byte) {
                e = e.saturating_add(1);
            }
            if e > p {
                return region.get(p..e);
            }
        }
    }
    None
}

/// Name/value pairs in YAML and JSON, the forms of the markup pairs of
/// [`attribute_spans`]: a Kubernetes `env` entry (`- name: DB_PASSWORD` / `  value: …`),
/// a JSON `{"name": "API_TOKEN", "value": "…"}` or `{"key": "api_key", "value": "…"}`
/// (escaped quotes too). The `value` is a secret when its sibling `name` or `key` — in
/// the same JSON object, or on the item's lines in YAML, at most [`MAX_SIBLING_BYTES`]
/// away — is a [sensitive text key](is_sensitive_text_key) and the value looks like one.
fn name_value_spans(s: &str, out: &mut Vec<SecretSpan>) {
    let b = s.as_bytes();
    let mut from = 0;
    while let Some(at) = find_ci(b, b"value", from) {
        from = at.saturating_add(5);
        let prev = at.checked_sub(1).and_then(|i| b.get(i)).copied();
        if prev.is_some_and(is_key_byte) {
            continue;
        }
        // The key, quoted (JSON) or not (YAML).
        let json = matches!(prev, Some(b'"' | b'\''));
        if !json && b.get(from).copied().is_some_and(is_key_byte) {
            continue;
        }
        let Some(mut p) = past_separator(b, from, b':', json) else {
            continue;
        };
        // The value.
        let escaped = escaped_quote_at(b, p);
        if escaped {
            p = p.saturating_add(1);
        }
        let quote = b.get(p).copied().filter(|c| matches!(c, b'"' | b'\''));
        if quote.is_some() {
            p = p.saturating_add(1);
        }
        let limit = p.saturating_add(MAX_VALUE_BYTES).min(b.len());
        let window = b.get(..limit).unwrap_or(b);
        let end = match quote {
            Some(_) if escaped => escaped_quote_end(window, p),
            Some(q) => quoted_end(window, p, q),
            None => {
                let mut e = p;
                while window
                    .get(e)
                    .is_some_and(|c| !c.is_ascii_whitespace() && !matches!(c, b',' | b'}' | b']'))
                {
                    e = e.saturating_add(1);
                }
                e
            }
        };
        let Some(value) = s.get(p..end) else {
            continue;
        };
        if value.is_empty() || is_placeholder(value) {
            continue;
        }
        // The sibling fields: the enclosing JSON object, or the YAML item's lines.
        let back_from = at.saturating_sub(MAX_SIBLING_BYTES);
        let before = b.get(back_from..at).unwrap_or_default();
        let fwd_to = end.saturating_add(MAX_SIBLING_BYTES).min(b.len());
        let after = b.get(end..fwd_to).unwrap_or_default();
        let (back, fwd) = if json {
            let back = before
                .iter()
                .rposition(|c| matches!(c, b'{' | b'}'))
                .map_or(back_from, |i| back_from.saturating_add(i).saturating_add(1));
            let fwd = after
                .iter()
                .position(|c| matches!(c, b'{' | b'}'))
                .map_or(fwd_to, |i| end.saturating_add(i));
            (back, fwd)
        } else {
            // This line up to the key and, unless this line starts the item (`- value:`),
            // the line before; the line after, unless it starts another item.
            let line_start = before
                .iter()
                .rposition(|c| *c == b'\n')
                .map_or(back_from, |i| back_from.saturating_add(i).saturating_add(1));
            let item_line = b
                .get(line_start..at)
                .is_some_and(|l| l.trim_ascii_start().starts_with(b"-"));
            let back = if item_line {
                line_start
            } else {
                b.get(back_from..line_start.saturating_sub(1))
                    .and_then(|r| r.iter().rposition(|c| *c == b'\n'))
                    .map_or(back_from, |i| back_from.saturating_add(i).saturating_add(1))
            };
            let next_start = after
                .iter()
                .position(|c| *c == b'\n')
                .map(|i| end.saturating_add(i).saturating_add(1));
            let fwd = match next_start {
                Some(n) if item_line => {
                    let next = b.get(n..fwd_to).unwrap_or_default();
                    if next.trim_ascii_start().starts_with(b"-") {
                        n
                    } else {
                        n.saturating_add(
                            next.iter().position(|c| *c == b'\n').unwrap_or(next.len()),
                        )
                    }
                }
                Some(n) => n,
                None => fwd_to,
            };
            (back, fwd)
        };
        let name = [s.get(back..at), s.get(end..fwd)]
            .into_iter()
            .flatten()
            .find_map(sibling_name);
        if let Some(name) = name {
            if is_sensitive_text_key(name) && value_is_secret(name, value, Sep::Assign, true) {
                out.push(p..end);
            }
        }
    }
}

/// Every span of `s` that holds secret material, sorted and merged: PEM private-key
/// blocks, URL passwords and webhook paths, `Bearer`/`Basic` tokens, well-known secret
/// prefixes and token shapes (with the token characters that follow them), and values
/// after sensitive keys (see the module docs).
pub fn find_secrets(s: &str) -> Vec<SecretSpan> {
    let mut out = Vec::new();
    pem_spans(s, &mut out);
    url_spans(s, &mut out);
    telegram_spans(s, &mut out);
    scheme_spans(s, &mut out);
    let b = s.as_bytes();
    let blobs = benign_blobs(s);
    for (start, w) in words_with_offsets(s) {
        let end = start.saturating_add(w.len());
        if word_is_secret(w) || is_basic_credentials(w) {
            let span = extend_token(b, start, end);
            if w.starts_with("AKIA") || w.starts_with("ASIA") {
                out.extend(aws_secret_after(s, span.end));
            }
            out.push(span);
        } else if w.len() >= 24 {
            let generic = generic_secret(w);
            // A random word that is a piece of a base64 body or a URL path (`/`, `+` or
            // `=` next to it), or inside a certificate, a public key or a `data:` URI, is
            // random-looking and public; a prefixed token is a token anywhere.
            let in_base64 = matches!(b.get(start.wrapping_sub(1)), Some(b'/' | b'+' | b'='))
                || matches!(b.get(end), Some(b'/' | b'+' | b'='));
            let inside_blob = || in_blob(&blobs, start, end);
            let secret = match generic {
                Generic::No => false,
                Generic::Prefixed => !inside_blob(),
                Generic::Random => !in_base64 && !inside_blob(),
            };
            if secret {
                out.push(extend_token(b, start, end));
            }
        }
    }
    prefixed_base64_spans(s, &blobs, &mut out);
    context_spans(s, &blobs, &mut out);
    flag_spans(s, &mut out);
    attribute_spans(s, &mut out);
    name_value_spans(s, &mut out);
    out.sort_by_key(|r| (r.start, r.end));
    let mut merged: Vec<SecretSpan> = Vec::with_capacity(out.len());
    for r in out {
        if r.start >= r.end {
            continue;
        }
        match merged.last_mut() {
            Some(last) if r.start <= last.end => last.end = last.end.max(r.end),
            _ => merged.push(r),
        }
    }
    merged
}

/// `s` with every [secret span](find_secrets) replaced by [`REDACTED`]; keys, scheme
/// words and everything else stay, so the text remains readable
/// (`password=[redacted]`, `Authorization: Bearer [redacted]`). Returns the text and the
/// number of spans replaced.
pub fn redact_secrets(s: &str) -> (String, usize) {
    let spans = find_secrets(s);
    if spans.is_empty() {
        return (s.to_owned(), 0);
    }
    let mut out = String::with_capacity(s.len());
    let mut at = 0;
    for r in &spans {
        out.push_str(s.get(at..r.start).unwrap_or_default());
        out.push_str(REDACTED);
        at = r.end;
    }
    out.push_str(s.get(at..).unwrap_or_default());
    (out, spans.len())
}

/// `true` when `s` holds inline credential material: any [secret span](find_secrets)
/// (see the module docs), or a PEM private-key marker anywhere.
pub fn looks_like_credential(s: &str) -> bool {
    (s.contains("-----BEGIN") && s.contains("PRIVATE KEY")) || !find_secrets(s).is_empty()
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
/// `~`, a [random-looking](looks_like_random_token) run of letters and digits, or a
/// base64 run (letters, digits, `+`, `/`, `=`; ≥ 30 characters with at least one of
/// `+/=`) whose letters and digits look random (an AWS secret key pasted whole).
pub fn identifier_carries_secret(s: &str) -> bool {
    // All three classes, changing at 35 % or more of adjacent pairs, and fewer than 60 %
    // of lowercase letters followed by another (camelCase names continue lowercase
    // about two thirds of the time, random base62 about 42 %).
    let mixed = |alnum: &str| {
        let b = alnum.as_bytes();
        let after_lower: Vec<u8> = b
            .windows(2)
            .filter_map(|p| match p {
                [a, c] if a.is_ascii_lowercase() => Some(*c),
                _ => None,
            })
            .collect();
        let lower_lower = after_lower
            .iter()
            .filter(|c| c.is_ascii_lowercase())
            .count();
        has_upper(alnum)
            && has_lower(alnum)
            && has_digit(alnum)
            && class_changes(b).saturating_mul(20) >= alnum.len().saturating_mul(7)
            && lower_lower.saturating_mul(10) < after_lower.len().saturating_mul(6)
    };
    looks_like_credential(s)
        || s.split(['.', ':', '/', '@', '+', '~']).any(word_is_secret)
        || s.split(|c: char| !c.is_ascii_alphanumeric()).any(|run| {
            looks_like_random_token(run)
                || (run.len() >= 32 && (looks_like_random_one_case(run, false) || looks_like_random_one_case(run, true)))
        })
        // A base64url run (`_`, `-` inside) with few separators whose letters and digits
        // together look random.
        || s.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
            .filter(|run| run.len() >= 30)
            .any(|run| {
                let alnum: String = run.chars().filter(char::is_ascii_alphanumeric).collect();
                let seps = run.len().saturating_sub(alnum.len());
                seps.saturating_mul(6) <= alnum.len() && looks_like_random_token(&alnum)
            })
        || s.split(|c: char| !(c.is_ascii_alphanumeric() || "+/=".contains(c)))
            // A directory named by a word before it (`build/<key>`) is not part of it.
            .flat_map(|run| {
                let tail = run
                    .split_once('/')
                    .filter(|(dir, _)| dir.bytes().all(|c| c.is_ascii_lowercase()))
                    .map(|(_, t)| t);
                std::iter::once(run).chain(tail)
            })
            .filter(|run| run.len() >= 30 && run.contains(['+', '/', '=']))
            .any(|run| {
                let alnum: String = run.chars().filter(char::is_ascii_alphanumeric).collect();
                // Base64 (an AWS secret key) even when the stricter random-token test
                // misses it: with a `+` or `=` (no name has them) all three classes
                // changing often suffice; with only `/` (a path could) the continuation
                // test applies too.
                let loose = run.contains(['+', '='])
                    && has_upper(&alnum)
                    && has_lower(&alnum)
                    && has_digit(&alnum)
                    && class_changes(alnum.as_bytes()).saturating_mul(20)
                        >= alnum.len().saturating_mul(7);
                looks_like_random_token(&alnum) || loose || mixed(&alnum)
            })
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
