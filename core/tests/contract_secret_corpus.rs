//! Secret redaction against a corpus of real-world secret formats (issue 17).
//!
//! **Secret corpus.** 98 token formats modelled on the public facts of secret-scanner
//! rule sets (prefixes, lengths and alphabets of GitHub, GitLab, Slack, OpenAI,
//! Anthropic, AWS, Google, Stripe, … tokens; PEM blocks, JWTs, connection strings and
//! unprefixed values that are secret only by context). Every value is generated here from
//! a seeded PRNG — none is a real secret. 21 of them are a **holdout**
//! ([`holdout_formats`]): formats from the public rule sets (gitleaks and others) that
//! were *not* looked at when the detector's rules were written, added to measure how the
//! detector does on formats it was not written for. Their recall before the detector
//! learned generic rules (prefixed random tokens, random lowercase bodies, bare random
//! words; no prefix of theirs was added) is recorded in [`HOLDOUT_RECALL_BEFORE`].
//!
//! Each format is planted in up to 30 contexts ([`CONTEXTS`]: env lines, `export`, YAML,
//! JSON, TOML, XML elements, .NET `<add key= value=>`, `--flag v`, `--flag=v`, headers,
//! connection strings (`Password=`, `AccountKey=`, `SharedAccessKey=`, `Pwd=`), URL
//! queries, `curl -u user:v`, `.netrc`, `os.Setenv("K", "v")`, prose, a bare value after
//! a key word, log lines, env dumps, bare words). Every planted text goes through
//! every production path that can carry text:
//!
//! * **text** — [`safety::redact_secrets`]: the secret is gone, the key that made it a
//!   secret stays;
//! * **evidence** — the gateway's JSON input forms (`GatewayInput::from_value`) with the
//!   text planted in the request's title, description and every identifier, the rein
//!   inputs, tool-call arguments, the session map, the tool output and error, the
//!   summary's identifiers and every `*_failed` message; the value alone is planted in
//!   every identifier slot too (the sandbox id, refs, the summary's model, commit and
//!   artifacts). No evidence string may carry the secret (or any 12-character piece);
//! * **tool_error** — the gateway result's `tool_error` (error details a host may log):
//!   context-redacted;
//! * **report** — a task report built by `runner_task::call({"report": …})` (the path the
//!   runner and every binding use) whose outcome carries the text (`cancelled` with it as
//!   the reason): `summary_business` is redacted;
//! * **progress** — progress built from harness events (`harness_event`, `local_event`)
//!   whose copied fields (`state`, `name`, `phase`) are the text.
//!
//! **Opaque identifier slots.** An identifier slot takes a value of its kind's shape
//! verbatim (see `contract::evidence`): a `commit` is 7–64 hex digits, a `ref` (sandbox
//! id, refs, model) any of `[A-Za-z0-9._:/@+-]`. A value with no secret *shape* — 32 or
//! 64 hex digits (a Datadog key, a hex secret), a UUID (a Heroku key), a random base62 or
//! base64url run that happens to look like an id — is indistinguishable there from the
//! commit SHAs, digests, UUIDs and random ids those slots exist to carry. Those slots are
//! filled by the host and the rein from typed fields (a sandbox handle, a summary), never
//! from free text or tool output, so what crosses is what the host or rein chose to put
//! in an id field; a rein that wants to exfiltrate can always encode a secret as hex. The
//! test reports every such pass-through per format and slot (`opaque` in the table) and
//! fails on any other evidence leak: a shaped secret in any slot, an unshaped one outside
//! [`OPAQUE_SLOTS`], or one of a value class not listed there.
//!
//! **Benign corpus.** What agents print, by category: commit SHAs, `sha256:` digests,
//! UUIDs, paths, model names, timestamps, camelCase identifiers, prose about tokens and
//! passwords, git logs, cargo / npm / pip / pytest output, stack traces, JSON logs, HTTP
//! logs, go.sum lines, lock-file integrity hashes, public certificates and SSH public
//! keys, data-URI images, shell sessions with flags. Under 1 % of it may be redacted
//! (text), and under 1 % of the identifier-shaped part may be redacted as an evidence
//! identifier.
//!
//! The confusion table (per format: planted, caught per path, missed; benign false
//! positives per category) is written to `target/tmp/secret-corpus-report.md` (printed
//! with `--nocapture`); a summary line is printed either way.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::{json, Value};
use stapel_runner_protocol::contract::{
    safe_identifier_as, safety, Catalog, Gateway, GatewayAction, GatewayConfig, GatewayInput,
    GatewayOutput, IdentifierKind,
};
use stapel_runner_protocol::runner_task;

/// splitmix64: a small deterministic PRNG.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi - lo + 1)
    }
    fn from(&mut self, alphabet: &str, n: usize) -> String {
        let a: Vec<char> = alphabet.chars().collect();
        (0..n).map(|_| a[self.below(a.len())]).collect()
    }
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}

const UPPER: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZ";
const LOWER: &str = "abcdefghijklmnopqrstuvwxyz";
const DIGITS: &str = "0123456789";
const HEX: &str = "0123456789abcdef";
const ALNUM: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
const B64: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const B64URL: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-";
const BECH32: &str = "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L";

fn b64_encode(bytes: &[u8], url: bool) -> String {
    let table: Vec<char> = if url { B64URL } else { B64 }.chars().collect();
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk.len();
        let v = (u32::from(chunk[0]) << 16)
            | (u32::from(*chunk.get(1).unwrap_or(&0)) << 8)
            | u32::from(*chunk.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= n {
                out.push(table[((v >> (18 - 6 * i)) & 63) as usize]);
            } else if !url {
                out.push('=');
            }
        }
    }
    out
}

/// One secret format: its name, the env-var name it usually lives under, a noun for
/// prose, whether its shape alone identifies it, and a generator returning
/// `(value as planted, the secret part that must never leak)`.
struct Format {
    name: &'static str,
    env: &'static str,
    noun: &'static str,
    shaped: bool,
    gen: fn(&mut Rng) -> (String, String),
}

fn same(v: String) -> (String, String) {
    (v.clone(), v)
}

fn pem(r: &mut Rng, kind: &str) -> (String, String) {
    let body: Vec<String> = (0..8).map(|_| r.from(B64, 64)).collect();
    let body = body.join("\n");
    (
        format!("-----BEGIN {kind}PRIVATE KEY-----\n{body}\n-----END {kind}PRIVATE KEY-----"),
        body,
    )
}

macro_rules! fmt {
    ($name:expr, $env:expr, $noun:expr, $shaped:expr, $gen:expr) => {
        Format {
            name: $name,
            env: $env,
            noun: $noun,
            shaped: $shaped,
            gen: $gen,
        }
    };
}

fn formats() -> Vec<Format> {
    vec![
        fmt!("aws_access_key_id", "AWS_ACCESS_KEY_ID", "key", true, |r| {
            same(format!(
                "AKIA{}",
                r.from("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16)
            ))
        }),
        fmt!(
            "aws_secret_access_key",
            "AWS_SECRET_ACCESS_KEY",
            "secret key",
            false,
            |r| same(r.from(B64, 40))
        ),
        fmt!(
            "aws_session_token",
            "AWS_SESSION_TOKEN",
            "token",
            false,
            |r| same(format!("IQoJb3JpZ2luX2Vj{}", r.from(B64, 280)))
        ),
        fmt!("github_classic_pat", "GITHUB_TOKEN", "token", true, |r| {
            same(format!("ghp_{}", r.from(ALNUM, 36)))
        }),
        fmt!("github_oauth", "GH_OAUTH_TOKEN", "token", true, |r| same(
            format!("gho_{}", r.from(ALNUM, 36))
        )),
        fmt!(
            "github_app_installation",
            "GH_APP_TOKEN",
            "token",
            true,
            |r| same(format!("ghs_{}", r.from(ALNUM, 36)))
        ),
        fmt!(
            "github_user_to_server",
            "GH_USER_TOKEN",
            "token",
            true,
            |r| same(format!("ghu_{}", r.from(ALNUM, 36)))
        ),
        fmt!("github_refresh", "GH_REFRESH_TOKEN", "token", true, |r| {
            same(format!("ghr_{}", r.from(ALNUM, 76)))
        }),
        fmt!(
            "github_fine_grained_pat",
            "GITHUB_PAT",
            "token",
            true,
            |r| same(format!(
                "github_pat_{}_{}",
                r.from(ALNUM, 22),
                r.from(ALNUM, 59)
            ))
        ),
        fmt!("gitlab_pat", "GITLAB_TOKEN", "token", true, |r| same(
            format!("glpat-{}", r.from(B64URL, 20))
        )),
        fmt!(
            "gitlab_deploy_token",
            "GITLAB_DEPLOY_TOKEN",
            "token",
            true,
            |r| same(format!("gldt-{}", r.from(B64URL, 20)))
        ),
        fmt!("gitlab_runner_token", "RUNNER_TOKEN", "token", true, |r| {
            same(format!("glrt-{}", r.from(B64URL, 20)))
        }),
        fmt!("slack_bot_token", "SLACK_BOT_TOKEN", "token", true, |r| {
            let (a, b) = (r.range(10, 13), r.range(10, 13));
            same(format!(
                "xoxb-{}-{}-{}",
                r.from(DIGITS, a),
                r.from(DIGITS, b),
                r.from(ALNUM, 24)
            ))
        }),
        fmt!("slack_user_token", "SLACK_USER_TOKEN", "token", true, |r| {
            same(format!(
                "xoxp-{}-{}-{}-{}",
                r.from(DIGITS, 11),
                r.from(DIGITS, 11),
                r.from(DIGITS, 13),
                r.from(HEX, 32)
            ))
        }),
        fmt!("slack_app_token", "SLACK_APP_TOKEN", "token", true, |r| {
            same(format!(
                "xapp-1-A{}-{}-{}",
                r.from("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", 10),
                r.from(DIGITS, 13),
                r.from(HEX, 64)
            ))
        }),
        fmt!("slack_webhook", "SLACK_WEBHOOK_URL", "webhook", true, |r| {
            let path = format!(
                "T{}/B{}/{}",
                r.from("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", 9),
                r.from("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", 10),
                r.from(ALNUM, 24)
            );
            (format!("https://hooks.slack.com/services/{path}"), path)
        }),
        fmt!(
            "openai_project_key",
            "OPENAI_API_KEY",
            "API key",
            true,
            |r| same(format!(
                "sk-proj-{}T3BlbkFJ{}",
                r.from(B64URL, 74),
                r.from(B64URL, 74)
            ))
        ),
        fmt!(
            "openai_legacy_key",
            "OPENAI_KEY",
            "API key",
            true,
            |r| same(format!(
                "sk-{}T3BlbkFJ{}",
                r.from(ALNUM, 20),
                r.from(ALNUM, 20)
            ))
        ),
        fmt!(
            "anthropic_api_key",
            "ANTHROPIC_API_KEY",
            "API key",
            true,
            |r| same(format!("sk-ant-api03-{}AA", r.from(B64URL, 93)))
        ),
        fmt!(
            "anthropic_admin_key",
            "ANTHROPIC_ADMIN_KEY",
            "API key",
            true,
            |r| same(format!("sk-ant-admin01-{}AA", r.from(B64URL, 93)))
        ),
        fmt!("google_api_key", "GOOGLE_API_KEY", "API key", true, |r| {
            same(format!("AIza{}", r.from(B64URL, 35)))
        }),
        fmt!(
            "google_oauth_client_secret",
            "GOOGLE_CLIENT_SECRET",
            "client secret",
            true,
            |r| same(format!("GOCSPX-{}", r.from(B64URL, 28)))
        ),
        fmt!(
            "google_oauth_access_token",
            "GOOGLE_ACCESS_TOKEN",
            "token",
            true,
            |r| same(format!(
                "ya29.a0{}{}",
                r.from(DIGITS, 2),
                r.from(B64URL, 120)
            ))
        ),
        fmt!(
            "stripe_secret_key",
            "STRIPE_SECRET_KEY",
            "secret key",
            true,
            |r| {
                let n = r.range(24, 99);
                same(format!("sk_live_{}", r.from(ALNUM, n)))
            }
        ),
        fmt!(
            "stripe_restricted_key",
            "STRIPE_RESTRICTED_KEY",
            "API key",
            true,
            |r| same(format!("rk_live_{}", r.from(ALNUM, 24)))
        ),
        fmt!("stripe_test_key", "STRIPE_TEST_KEY", "API key", true, |r| {
            same(format!("sk_test_{}", r.from(ALNUM, 24)))
        }),
        fmt!(
            "stripe_webhook_secret",
            "STRIPE_WEBHOOK_SECRET",
            "secret",
            true,
            |r| same(format!("whsec_{}", r.from(ALNUM, 32)))
        ),
        fmt!("huggingface_token", "HF_TOKEN", "token", true, |r| same(
            format!("hf_{}", r.from(&format!("{UPPER}{LOWER}"), 34))
        )),
        fmt!("npm_token", "NPM_TOKEN", "token", true, |r| same(format!(
            "npm_{}",
            r.from(ALNUM, 36)
        ))),
        fmt!("pypi_token", "PYPI_API_TOKEN", "token", true, |r| same(
            format!("pypi-AgEIcHlwaS5vcmc{}", r.from(B64URL, 70))
        )),
        fmt!("sendgrid_key", "SENDGRID_API_KEY", "API key", true, |r| {
            same(format!("SG.{}.{}", r.from(B64URL, 22), r.from(B64URL, 43)))
        }),
        fmt!("twilio_api_key", "TWILIO_API_KEY", "API key", true, |r| {
            same(format!("SK{}", r.from(HEX, 32)))
        }),
        fmt!("mailgun_key", "MAILGUN_API_KEY", "API key", true, |r| same(
            format!("key-{}", r.from(HEX, 32))
        )),
        fmt!("mailchimp_key", "MAILCHIMP_API_KEY", "API key", true, |r| {
            let dc = r.range(1, 20);
            same(format!("{}-us{dc}", r.from(HEX, 32)))
        }),
        fmt!(
            "shopify_access_token",
            "SHOPIFY_ACCESS_TOKEN",
            "token",
            true,
            |r| same(format!("shpat_{}", r.from(HEX, 32)))
        ),
        fmt!(
            "digitalocean_pat",
            "DIGITALOCEAN_TOKEN",
            "token",
            true,
            |r| same(format!("dop_v1_{}", r.from(HEX, 64)))
        ),
        fmt!("doppler_token", "DOPPLER_TOKEN", "token", true, |r| same(
            format!("dp.pt.{}", r.from(ALNUM, 43))
        )),
        fmt!("databricks_token", "DATABRICKS_TOKEN", "token", true, |r| {
            same(format!("dapi{}", r.from(HEX, 32)))
        }),
        fmt!("vault_service_token", "VAULT_TOKEN", "token", true, |r| {
            same(format!("hvs.CAESI{}", r.from(B64URL, 90)))
        }),
        fmt!("terraform_cloud_token", "TFE_TOKEN", "token", true, |r| {
            same(format!(
                "{}.atlasv1.{}",
                r.from(ALNUM, 14),
                r.from(ALNUM, 67)
            ))
        }),
        fmt!("dockerhub_pat", "DOCKERHUB_TOKEN", "token", true, |r| same(
            format!("dckr_pat_{}", r.from(B64URL, 27))
        )),
        fmt!(
            "atlassian_api_token",
            "JIRA_API_TOKEN",
            "API token",
            true,
            |r| same(format!(
                "ATATT3xFfGF0{}={}",
                r.from(B64URL, 170),
                r.from("0123456789ABCDEF", 8)
            ))
        ),
        fmt!("linear_api_key", "LINEAR_API_KEY", "API key", true, |r| {
            same(format!("lin_api_{}", r.from(ALNUM, 40)))
        }),
        fmt!("notion_token", "NOTION_TOKEN", "token", true, |r| same(
            format!("ntn_{}{}", r.from(DIGITS, 11), r.from(ALNUM, 35))
        )),
        fmt!("postman_api_key", "POSTMAN_API_KEY", "API key", true, |r| {
            same(format!("PMAK-{}-{}", r.from(HEX, 24), r.from(HEX, 34)))
        }),
        fmt!(
            "grafana_service_account",
            "GRAFANA_SERVICE_ACCOUNT_TOKEN",
            "token",
            true,
            |r| same(format!("glsa_{}_{}", r.from(ALNUM, 32), r.from(HEX, 8)))
        ),
        fmt!("age_secret_key", "SOPS_AGE_KEY", "key", true, |r| same(
            format!("AGE-SECRET-KEY-1{}", r.from(BECH32, 58))
        )),
        fmt!("pulumi_token", "PULUMI_ACCESS_TOKEN", "token", true, |r| {
            same(format!("pul-{}", r.from(HEX, 40)))
        }),
        fmt!(
            "sentry_user_token",
            "SENTRY_AUTH_TOKEN",
            "token",
            true,
            |r| same(format!("sntryu_{}", r.from(HEX, 64)))
        ),
        fmt!("tailscale_auth_key", "TS_AUTHKEY", "key", true, |r| same(
            format!("tskey-auth-{}-{}", r.from(ALNUM, 17), r.from(ALNUM, 30))
        )),
        fmt!("jwt", "ID_TOKEN", "token", true, |r| {
            let header = b64_encode(br#"{"alg":"HS256","typ":"JWT"}"#, true);
            let payload = b64_encode(
                format!(
                    r#"{{"sub":"{}","iat":{}}}"#,
                    r.from(DIGITS, 10),
                    r.from(DIGITS, 10)
                )
                .as_bytes(),
                true,
            );
            same(format!("{header}.{payload}.{}", r.from(B64URL, 43)))
        }),
        fmt!(
            "pem_rsa_private_key",
            "TLS_PRIVATE_KEY",
            "private key",
            true,
            |r| pem(r, "RSA ")
        ),
        fmt!(
            "pem_openssh_private_key",
            "SSH_PRIVATE_KEY",
            "private key",
            true,
            |r| pem(r, "OPENSSH ")
        ),
        fmt!(
            "pem_pkcs8_private_key",
            "SIGNING_KEY",
            "private key",
            true,
            |r| pem(r, "")
        ),
        fmt!(
            "azure_storage_account_key",
            "AZURE_STORAGE_KEY",
            "account key",
            false,
            |r| same(format!("{}==", r.from(B64, 86)))
        ),
        fmt!(
            "azure_sas_signature",
            "AZURE_SAS_SIG",
            "signature",
            false,
            |r| same(format!("{}%3D", r.from(ALNUM, 43)))
        ),
        fmt!(
            "azure_ad_client_secret",
            "AZURE_CLIENT_SECRET",
            "client secret",
            true,
            |r| same(format!(
                "{}{}Q~{}",
                r.from(ALNUM, 3),
                r.from(DIGITS, 1),
                r.from(&format!("{ALNUM}_~.-"), 34)
            ))
        ),
        fmt!(
            "postgres_url_password",
            "DATABASE_URL",
            "password",
            true,
            |r| {
                let pw = r.from(ALNUM, 20);
                (format!("postgres://app:{pw}@db.internal:5432/app"), pw)
            }
        ),
        fmt!("generic_password", "DB_PASSWORD", "password", false, |r| {
            let w = r.pick(&["Summer", "Winter", "Dragon", "Monkey", "Shadow", "Master"]);
            same(format!(
                "{w}{}{}{}",
                r.from(DIGITS, 4),
                r.pick(&["!", "#", "$", "%", "&", "*"]),
                r.from(LOWER, 4)
            ))
        }),
        fmt!("generic_api_key_32", "API_KEY", "API key", false, |r| same(
            r.from(ALNUM, 32)
        )),
        fmt!(
            "generic_hex_secret_64",
            "SECRET_TOKEN",
            "token",
            false,
            |r| same(r.from(HEX, 64))
        ),
        fmt!(
            "basic_auth_credentials",
            "AUTH_HEADER",
            "credentials",
            true,
            |r| {
                let user = r.from(LOWER, 6);
                let pw = r.from(ALNUM, 14);
                same(b64_encode(format!("{user}:{pw}").as_bytes(), false))
            }
        ),
        fmt!(
            "discord_bot_token",
            "DISCORD_BOT_TOKEN",
            "token",
            true,
            |r| same(format!(
                "M{}.{}.{}",
                r.from(ALNUM, 23),
                r.from(B64URL, 6),
                r.from(B64URL, 27)
            ))
        ),
        fmt!(
            "discord_webhook",
            "DISCORD_WEBHOOK_URL",
            "webhook",
            true,
            |r| {
                let path = format!("{}/{}", r.from(DIGITS, 18), r.from(B64URL, 68));
                (format!("https://discord.com/api/webhooks/{path}"), path)
            }
        ),
        fmt!(
            "telegram_bot_token",
            "TELEGRAM_BOT_TOKEN",
            "token",
            true,
            |r| same(format!("{}:AA{}", r.from(DIGITS, 10), r.from(B64URL, 33)))
        ),
        fmt!("heroku_api_key", "HEROKU_API_KEY", "API key", false, |r| {
            same(format!(
                "{}-{}-{}-{}-{}",
                r.from(HEX, 8),
                r.from(HEX, 4),
                r.from(HEX, 4),
                r.from(HEX, 4),
                r.from(HEX, 12)
            ))
        }),
        fmt!("datadog_api_key", "DD_API_KEY", "API key", false, |r| same(
            r.from(HEX, 32)
        )),
        fmt!(
            "cloudflare_api_token",
            "CLOUDFLARE_API_TOKEN",
            "API token",
            false,
            |r| same(r.from(B64URL, 40))
        ),
        fmt!(
            "square_access_token",
            "SQUARE_ACCESS_TOKEN",
            "token",
            true,
            |r| same(format!("sq0atp-{}", r.from(B64URL, 22)))
        ),
        fmt!("figma_token", "FIGMA_TOKEN", "token", true, |r| same(
            format!("figd_{}", r.from(B64URL, 40))
        )),
        fmt!(
            "planetscale_token",
            "PLANETSCALE_TOKEN",
            "token",
            true,
            |r| same(format!("pscale_tkn_{}", r.from(B64URL, 43)))
        ),
        fmt!("brevo_api_key", "BREVO_API_KEY", "API key", true, |r| same(
            format!("xkeysib-{}-{}", r.from(HEX, 64), r.from(ALNUM, 16))
        )),
        fmt!(
            "facebook_access_token",
            "FACEBOOK_ACCESS_TOKEN",
            "token",
            true,
            |r| same(format!("EAACEdEose0cBA{}", r.from(ALNUM, 100)))
        ),
        fmt!(
            "jfrog_api_key",
            "ARTIFACTORY_API_KEY",
            "API key",
            true,
            |r| same(format!("AKCp{}", r.from(ALNUM, 69)))
        ),
        fmt!(
            "rubygems_api_key",
            "GEM_HOST_API_KEY",
            "API key",
            true,
            |r| same(format!("rubygems_{}", r.from(HEX, 48)))
        ),
        fmt!("netlify_token", "NETLIFY_AUTH_TOKEN", "token", true, |r| {
            same(format!("nfp_{}", r.from(ALNUM, 40)))
        }),
        fmt!("dynatrace_token", "DT_API_TOKEN", "token", true, |r| same(
            format!(
                "dt0c01.{}.{}",
                r.from("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", 24),
                r.from("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", 64)
            )
        )),
    ]
}
/// The holdout: formats from public secret-scanner rule sets (gitleaks' rule files and
/// other public scanners' patterns: prefix, length, alphabet) that were not looked at
/// when the detector's rules were written. No rule names any of their prefixes; they
/// are caught (or not) by the generic rules.
fn holdout_formats() -> Vec<Format> {
    const LOWER_ALNUM: &str = "abcdefghijklmnopqrstuvwxyz0123456789";
    const UPPER_ALNUM: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    vec![
        fmt!(
            "newrelic_user_api_key",
            "NEW_RELIC_API_KEY",
            "API key",
            true,
            |r| { same(format!("NRAK-{}", r.from(UPPER_ALNUM, 27))) }
        ),
        fmt!(
            "newrelic_insert_key",
            "NEW_RELIC_INSERT_KEY",
            "insert key",
            true,
            |r| { same(format!("NRII-{}", r.from(B64URL, 32))) }
        ),
        fmt!("prefect_api_key", "PREFECT_API_KEY", "API key", true, |r| {
            same(format!("pnu_{}", r.from(ALNUM, 36)))
        }),
        fmt!("readme_api_key", "README_API_KEY", "API key", true, |r| {
            same(format!("rdme_{}", r.from(LOWER_ALNUM, 70)))
        }),
        fmt!("typeform_token", "TYPEFORM_TOKEN", "token", true, |r| same(
            format!("tfp_{}", r.from(B64URL, 59))
        )),
        fmt!(
            "sourcegraph_token",
            "SRC_ACCESS_TOKEN",
            "token",
            true,
            |r| same(format!("sgp_{}_{}", r.from(HEX, 16), r.from(HEX, 40)))
        ),
        fmt!(
            "scalingo_token",
            "SCALINGO_API_TOKEN",
            "API token",
            true,
            |r| { same(format!("tk-us-{}", r.from(B64URL, 48))) }
        ),
        fmt!("groq_api_key", "GROQ_API_KEY", "API key", true, |r| same(
            format!("gsk_{}", r.from(ALNUM, 48))
        )),
        fmt!(
            "langsmith_api_key",
            "LANGSMITH_API_KEY",
            "API key",
            true,
            |r| {
                same(format!(
                    "lsv2_pt_{}_{}",
                    r.from(LOWER_ALNUM, 32),
                    r.from(LOWER_ALNUM, 10)
                ))
            }
        ),
        fmt!(
            "alibaba_access_key_id",
            "ALIBABA_CLOUD_ACCESS_KEY_ID",
            "access key",
            true,
            |r| same(format!("LTAI{}", r.from(ALNUM, 20)))
        ),
        fmt!(
            "easypost_api_key",
            "EASYPOST_API_KEY",
            "API key",
            true,
            |r| { same(format!("EZAK{}", r.from(ALNUM, 54))) }
        ),
        fmt!(
            "supabase_access_token",
            "SUPABASE_ACCESS_TOKEN",
            "token",
            true,
            |r| { same(format!("sbp_{}", r.from(HEX, 40))) }
        ),
        fmt!(
            "replicate_api_token",
            "REPLICATE_API_TOKEN",
            "API token",
            true,
            |r| { same(format!("r8_{}", r.from(ALNUM, 37))) }
        ),
        fmt!("frameio_token", "FRAMEIO_TOKEN", "token", true, |r| same(
            format!("fio-u-{}", r.from(&format!("{LOWER_ALNUM}_-"), 64))
        )),
        fmt!("clojars_token", "CLOJARS_TOKEN", "token", true, |r| same(
            format!("CLOJARS_{}", r.from(LOWER_ALNUM, 60))
        )),
        fmt!(
            "slack_client_token",
            "SLACK_CLIENT_TOKEN",
            "token",
            true,
            |r| {
                same(format!(
                    "xoxc-{}-{}-{}-{}",
                    r.from(DIGITS, 11),
                    r.from(DIGITS, 13),
                    r.from(DIGITS, 13),
                    r.from(HEX, 64)
                ))
            }
        ),
        fmt!(
            "perplexity_api_key",
            "PERPLEXITY_API_KEY",
            "API key",
            true,
            |r| { same(format!("pplx-{}", r.from(ALNUM, 48))) }
        ),
        fmt!("duffel_token", "DUFFEL_ACCESS_TOKEN", "token", true, |r| {
            same(format!("duffel_live_{}", r.from(B64URL, 43)))
        }),
        fmt!("airtable_pat", "AIRTABLE_TOKEN", "token", true, |r| same(
            format!("pat{}.{}", r.from(ALNUM, 14), r.from(HEX, 64))
        )),
        fmt!(
            "onepassword_service_token",
            "OP_SERVICE_ACCOUNT_TOKEN",
            "token",
            true,
            |r| same(format!("ops_eyJ{}", r.from(B64, 260)))
        ),
        fmt!(
            "azure_devops_pat",
            "AZURE_DEVOPS_PAT",
            "personal access token",
            false,
            |r| same(r.from("abcdefghijklmnopqrstuvwxyz234567", 52))
        ),
    ]
}

/// Recall of the holdout formats measured with the detector as it was before the generic
/// rules (commit d1d336b's `safety.rs`, the same contexts and paths as now): text contexts
/// whose secret was removed / contexts planted, and evidence runs that leaked. Kept as
/// the record the issue asks for; the current figures are in the report.
const HOLDOUT_RECALL_BEFORE: &[(&str, usize, usize, usize)] = &[
    ("newrelic_user_api_key", 21, 30, 60),
    ("newrelic_insert_key", 22, 30, 32),
    ("prefect_api_key", 24, 30, 0),
    ("readme_api_key", 21, 30, 60),
    ("typeform_token", 24, 30, 6),
    ("sourcegraph_token", 21, 30, 60),
    ("scalingo_token", 24, 30, 16),
    ("groq_api_key", 24, 30, 0),
    ("langsmith_api_key", 21, 30, 60),
    ("alibaba_access_key_id", 10, 30, 12),
    ("easypost_api_key", 24, 30, 0),
    ("supabase_access_token", 21, 30, 60),
    ("replicate_api_token", 24, 30, 4),
    ("frameio_token", 21, 30, 60),
    ("clojars_token", 24, 30, 60),
    ("slack_client_token", 21, 30, 60),
    ("perplexity_api_key", 24, 30, 2),
    ("duffel_token", 24, 30, 12),
    ("airtable_pat", 24, 30, 60),
    ("onepassword_service_token", 24, 30, 0),
    ("azure_devops_pat", 21, 28, 0),
];

/// Which formats a context is planted with.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Plant {
    /// Every format: the context names a key (its own or the format's).
    Keyed,
    /// Only formats whose shape alone marks them: the context gives no key.
    ShapedOnly,
}

/// One planting context: a name, a template over `{K}` (env name), `{k}` (snake
/// case), `{kebab}`, `{camel}`, `{Pascal}`, `{noun}` and `{V}`, and the key text that
/// must stay readable after redaction (same placeholders; `None` for key-less contexts).
struct Context {
    name: &'static str,
    template: &'static str,
    plant: Plant,
    key: Option<&'static str>,
}

const fn keyed(name: &'static str, template: &'static str, key: &'static str) -> Context {
    Context {
        name,
        template,
        plant: Plant::Keyed,
        key: Some(key),
    }
}

const CONTEXTS: &[Context] = &[
    keyed("env", "{K}={V}", "{K}="),
    keyed("export", "export {K}=\"{V}\"", "export {K}="),
    keyed(
        "yaml",
        "service:\n  name: api\n  {k}: {V}\n  replicas: 3",
        "{k}: ",
    ),
    keyed(
        "yaml_quoted",
        "credentials:\n  {k}: \"{V}\"\n  region: eu-west-1",
        "{k}: ",
    ),
    keyed(
        "json",
        "{\"name\": \"svc\", \"{k}\": \"{V}\", \"region\": \"eu-west-1\"}",
        "\"{k}\": ",
    ),
    keyed(
        "cli_flag",
        "$ deploy --{kebab} {V} --verbose",
        "--{kebab} ",
    ),
    keyed("cli_flag_eq", "tool login --{kebab}={V}", "--{kebab}="),
    keyed(
        "toml",
        "[deploy]\n{k} = '{V}'\nregion = \"eu\"",
        "{k} = ",
    ),
    keyed(
        "docker_env",
        "docker run --rm -e {K}={V} ghcr.io/acme/app:1.4.2",
        "-e {K}=",
    ),
    keyed(
        "url_query",
        "fetching https://api.example.com/v1/items?{k}={V}&page=2",
        "?{k}=",
    ),
    keyed(
        "log_line",
        "2026-12-01T06:30:12Z INFO auth ok {k}={V} user=bob",
        "{k}=",
    ),
    keyed(
        "env_dump",
        "PATH=/usr/local/bin:/usr/bin\nHOME=/root\n{K}={V}\nLANG=C.UTF-8",
        "{K}=",
    ),
    keyed(
        "prose",
        "For the deploy, the {noun} is {V} (rotate it later).",
        "the {noun} is ",
    ),
    keyed(
        "adjacent",
        "use the {noun} {V} for the staging deploy",
        "the {noun} ",
    ),
    keyed(
        "xml_element",
        "<settings>\n  <{camel}>{V}</{camel}>\n</settings>",
        "<{camel}>",
    ),
    keyed(
        "dotnet_add",
        "<appSettings>\n  <add key=\"{Pascal}\" value=\"{V}\" />\n</appSettings>",
        "<add key=\"{Pascal}\" value=\"",
    ),
    keyed("setenv", "os.Setenv(\"{K}\", \"{V}\")", "os.Setenv(\"{K}\", \""),
    keyed(
        "python_kwarg",
        "client = Client({k}=\"{V}\", timeout=30)",
        "Client({k}=\"",
    ),
    keyed(
        "auth_header",
        "GET /v1/items HTTP/1.1\nHost: api.example.com\nAuthorization: Bearer {V}\nAccept: */*",
        "Authorization: Bearer ",
    ),
    keyed(
        "api_key_header",
        "curl -H 'X-Api-Key: {V}' https://api.example.com/v1",
        "X-Api-Key: ",
    ),
    keyed(
        "x_auth_token_header",
        "HTTP request headers: X-Auth-Token: {V}\nUser-Agent: curl/8.5",
        "X-Auth-Token: ",
    ),
    keyed(
        "conn_string",
        "Server=tcp:db.example.net,1433;Database=app;User ID=app;Password={V};Encrypt=True;",
        ";Password=",
    ),
    keyed(
        "conn_pwd",
        "Driver={ODBC Driver 18 for SQL Server};Server=db;Uid=app;Pwd={V};",
        ";Pwd=",
    ),
    keyed(
        "conn_account_key",
        "DefaultEndpointsProtocol=https;AccountName=acme;AccountKey={V};EndpointSuffix=core.windows.net",
        ";AccountKey=",
    ),
    keyed(
        "conn_shared_access_key",
        "Endpoint=sb://acme.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey={V}",
        ";SharedAccessKey=",
    ),
    keyed(
        "curl_user",
        "curl -u deploy:{V} https://api.example.com/v1/items",
        "curl -u deploy:",
    ),
    keyed(
        "netrc",
        "machine api.example.com login deploy password {V}",
        "login deploy password ",
    ),
    keyed("xml_password", "<password>{V}</password>", "<password>"),
    Context {
        name: "bare_prose",
        template: "deployed with {V} yesterday",
        plant: Plant::ShapedOnly,
        key: None,
    },
    Context {
        name: "bare_log",
        template: "2026-12-01T06:30:12Z DEBUG request sent with {V} (200 OK)",
        plant: Plant::ShapedOnly,
        key: None,
    },
];

fn camel(env: &str, upper_first: bool) -> String {
    let mut out = String::new();
    for (i, w) in env.split('_').enumerate() {
        let w = w.to_lowercase();
        let mut cs = w.chars();
        if let Some(c) = cs.next() {
            if i > 0 || upper_first {
                out.extend(c.to_uppercase());
            } else {
                out.push(c);
            }
            out.extend(cs);
        }
    }
    out
}

fn fill(t: &str, f: &Format, v: &str) -> String {
    t.replace("{K}", f.env)
        .replace("{kebab}", &f.env.to_lowercase().replace('_', "-"))
        .replace("{k}", &f.env.to_lowercase())
        .replace("{camel}", &camel(f.env, false))
        .replace("{Pascal}", &camel(f.env, true))
        .replace("{noun}", f.noun)
        .replace("{V}", v)
}

/// `true` when `hay` carries the secret or any 12-character piece of it.
fn leaks(hay: &str, secret: &str) -> bool {
    let chars: Vec<char> = secret.chars().collect();
    let n = chars.len().min(12);
    hay.contains(secret)
        || chars.windows(n).any(|w| {
            w.iter().all(|c| !c.is_whitespace()) && hay.contains(&w.iter().collect::<String>())
        })
}

fn catalog() -> Catalog {
    Catalog::from_value(&json!({
        "profiles": [{
            "contract_version": "1.0",
            "profile_id": "coder-default",
            "rein": "fake-rein",
            "model": "claude-sonnet-4-5",
            "sandbox_profile": "repo-rw",
            "tool_policy": {"allowed_tools": ["read_file", "run_task"]},
            "credential_refs": ["env:ANTHROPIC_API_KEY"]
        }],
        "reins": [{"rein_id": "fake-rein", "contract_version": "1.0", "tool_event_visibility": "complete"}]
    }))
    .expect("catalog")
}

/// Every string of `v` with the path of its field (`goal_refs/1`, keys included).
fn strings(v: &Value, path: &str, out: &mut Vec<(String, String)>) {
    match v {
        Value::String(s) => out.push((path.to_owned(), s.clone())),
        Value::Array(a) => a
            .iter()
            .enumerate()
            .for_each(|(i, x)| strings(x, &format!("{path}/{i}"), out)),
        Value::Object(m) => m.iter().for_each(|(k, x)| {
            out.push((format!("{path}/{k}#key"), k.clone()));
            strings(x, &format!("{path}/{k}"), out)
        }),
        _ => {}
    }
}

/// How the host answers: everything succeeds (`ok`), or every step after the session
/// start fails with a message.
#[derive(Clone, Copy, PartialEq)]
enum Path {
    Ok,
    Failing,
}

/// What one gateway execution produced: every evidence string with its field, and the
/// result's `tool_error`.
struct GatewayRun {
    evidence: Vec<(String, String)>,
    tool_error: Option<String>,
}

/// Drive one execution through the JSON input forms with `text` planted in every field
/// that takes text and `bare` (the value alone) in every identifier slot; `secret` also
/// goes into maps that never reach evidence.
fn run_gateway(text: &str, secret: &str, bare: &str, path: Path) -> GatewayRun {
    let mut gw = Gateway::new(GatewayConfig::new(catalog()));
    let execute = json!({
        "type": "execute",
        "request": {
            "harness_profile_ref": "coder-default",
            "repository": text,
            "title": text,
            "description": format!("Fix it. {text}"),
            "assignment_ref": text,
            "role_ref": bare,
            "duty_ref": format!("token:{bare}"),
            "goal_refs": [text, bare, format!("api_key:{bare}")],
            "resource_envelope_refs": [text, format!("password:{bare}")]
        },
        "inputs": {"prompt": text, "api_key": secret},
        "tool_calls": [
            {"call_id": "c1", "name": "read_file", "arguments": {"cmd": text, "token": secret}},
            {"call_id": "c2", "name": "run_task", "arguments": {"instruction": text}}
        ]
    });
    let mut pending = vec![execute];
    let mut result = None;
    let mut steps = 0;
    while let Some(input) = pending.pop() {
        steps += 1;
        assert!(steps < 64, "gateway did not finish");
        let input = GatewayInput::from_value(&input).expect("well-formed input");
        if gw.handle_input(steps, input).is_err() {
            continue;
        }
        while let Some(out) = gw.poll_output() {
            match out {
                GatewayOutput::Result(r) => result = Some(r),
                GatewayOutput::Action(a) => pending.push(answer(&a, text, bare, path)),
                _ => {}
            }
        }
    }
    let result = result.expect("a result");
    let mut evidence = Vec::new();
    strings(&result.evidence.to_value(), "", &mut evidence);
    GatewayRun {
        evidence,
        tool_error: result.tool_error,
    }
}

fn answer(a: &GatewayAction, text: &str, bare: &str, path: Path) -> Value {
    let fail = |ty: &str| json!({"type": ty, "message": text});
    match a {
        GatewayAction::CreateSandbox { .. } => {
            json!({"type": "sandbox_created", "sandbox": {"sandbox_id": bare}})
        }
        GatewayAction::StartSession { .. } => {
            json!({"type": "session_started", "session": {"rein_session": text, "token": bare}})
        }
        GatewayAction::DispatchTool { .. } if path == Path::Failing => fail("tool_dispatch_failed"),
        GatewayAction::DispatchTool { .. } => {
            json!({"type": "tool_dispatched", "result": {"ok": false, "output": {"stdout": text, "secret": bare}, "error": text}})
        }
        GatewayAction::EndSession { .. } if path == Path::Failing => fail("session_end_failed"),
        GatewayAction::EndSession { .. } => json!({"type": "session_ended", "summary": {
            "resolved_model": bare,
            "commit": bare,
            "artifacts": [text, bare, format!("secret:{bare}"), format!("build/{bare}.log")],
            "tool_event_visibility": "complete",
            "tool_event_count": 3
        }}),
        GatewayAction::DestroySandbox { .. } if path == Path::Failing => {
            fail("sandbox_destroy_failed")
        }
        GatewayAction::DestroySandbox { .. } => json!({"type": "sandbox_destroyed"}),
        _ => json!({"type": "answer", "value": null}),
    }
}

/// The texts a runner report and its progress carry when `text` is what the harness or
/// the hub said: `summary_business` and `failure_type` of reports (through
/// `runner_task::call`, the path of the runner and every binding), and the copied fields
/// of progress built from harness and local-run events.
fn report_texts(text: &str) -> Vec<String> {
    let calls = [
        json!({"report": {"task_id": "T-1", "outcome": {"type": "cancelled", "reason": text}}}),
        json!({"report": {"task_id": "T-1", "outcome": {"type": "failed", "failure_type": text}}}),
        json!({"report": {"task_id": "T-1", "outcome": {"type": "refused", "code": "unsafe", "reasons": [text]}}}),
        json!({"harness_event": {"type": "status", "state": text}}),
        json!({"harness_event": {"type": "tool", "name": text}}),
        json!({"local_event": {"kind": "event", "event": {"eventType": "runtime.phase.changed", "payload": {"phase": text}}}}),
        json!({"local_event": {"kind": "event", "event": {"eventType": "item.started", "itemId": text, "payload": {"kind": text}}}}),
    ];
    let mut out = Vec::new();
    for c in calls {
        let v = runner_task::call(&c).expect("a valid call");
        let mut all = Vec::new();
        strings(&v, "", &mut all);
        out.extend(all.into_iter().map(|(_, s)| s));
    }
    out
}

/// The class of an unshaped value, for [`OPAQUE_SLOTS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ValueClass {
    /// Hex digits only.
    Hex,
    /// `8-4-4-4-12` hex digits.
    Uuid,
    /// Letters, digits, `_` and `-` (base62 / base64url): the alphabet of random ids.
    RandomId,
    /// Anything else (punctuation, padding, spaces): never an identifier.
    Other,
}

fn value_class(v: &str) -> ValueClass {
    let is_uuid = v.len() == 36
        && v.char_indices().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => c == '-',
            _ => c.is_ascii_hexdigit(),
        });
    if !v.is_empty() && v.chars().all(|c| c.is_ascii_hexdigit()) {
        ValueClass::Hex
    } else if is_uuid {
        ValueClass::Uuid
    } else if v
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        ValueClass::RandomId
    } else {
        ValueClass::Other
    }
}

/// The identifier slots that take an unshaped value of a class verbatim (see the module
/// docs): `commit` takes hex; every `ref` slot takes hex, UUIDs and random-id alphabets
/// (the random-token check catches most random ones, not all); an artifact path takes a
/// segment of them. Evidence fields are named by their JSON path.
const OPAQUE_SLOTS: &[(ValueClass, &[&str])] = &[
    (
        ValueClass::Hex,
        &[
            "/commit",
            "/role_ref",
            "/goal_refs/1",
            "/sandbox_id",
            "/resolved_model",
            "/artifacts/3",
        ],
    ),
    (
        ValueClass::Uuid,
        &[
            "/role_ref",
            "/goal_refs/1",
            "/sandbox_id",
            "/resolved_model",
            "/artifacts/3",
        ],
    ),
    (
        ValueClass::RandomId,
        &[
            "/role_ref",
            "/goal_refs/1",
            "/sandbox_id",
            "/resolved_model",
            "/artifacts/3",
        ],
    ),
];

fn is_opaque_slot(class: ValueClass, field: &str) -> bool {
    OPAQUE_SLOTS
        .iter()
        .any(|(c, fields)| *c == class && fields.contains(&field))
}

#[derive(Default, Clone)]
struct Row {
    holdout: bool,
    planted: usize,
    text_caught: usize,
    key_lost: usize,
    evidence_runs: usize,
    evidence_leaked: usize,
    opaque: BTreeMap<String, usize>,
    tool_error_leaked: usize,
    report_leaked: usize,
    misses: Vec<String>,
}

/// Run every format through every context and path.
fn run_corpus() -> Vec<(&'static str, Row)> {
    let mut rng = Rng(0x5EED_0017);
    let mut rows = Vec::new();
    let known = formats();
    let holdout = holdout_formats();
    let all = known
        .iter()
        .map(|f| (f, false))
        .chain(holdout.iter().map(|f| (f, true)));
    for (f, is_holdout) in all {
        let mut row = Row {
            holdout: is_holdout,
            ..Row::default()
        };
        for c in CONTEXTS {
            if c.plant == Plant::ShapedOnly && !f.shaped {
                continue;
            }
            let (value, secret) = (f.gen)(&mut rng);
            let text = fill(c.template, f, &value);
            row.planted += 1;
            let (redacted, _) = safety::redact_secrets(&text);
            if leaks(&redacted, &secret) {
                row.misses.push(format!("text/{}: {redacted:?}", c.name));
            } else {
                row.text_caught += 1;
            }
            if let Some(k) = c.key {
                let k = fill(k, f, "");
                if !redacted.contains(&k) {
                    row.key_lost += 1;
                    row.misses
                        .push(format!("key lost/{} ({k:?}): {redacted:?}", c.name));
                }
            }
            for path in [Path::Ok, Path::Failing] {
                let run = run_gateway(&text, &secret, &value, path);
                row.evidence_runs += 1;
                let class = value_class(&value);
                let mut leaked = false;
                for (field, s) in &run.evidence {
                    if !leaks(s, &secret) {
                        continue;
                    }
                    // A holdout format the detector does not recognise is, in an
                    // identifier slot, as opaque as an unshaped value (reported).
                    if (!f.shaped || is_holdout) && is_opaque_slot(class, field) {
                        *row.opaque.entry(field.clone()).or_default() += 1;
                    } else {
                        leaked = true;
                        row.misses
                            .push(format!("evidence/{}{field}: {s:?}", c.name));
                    }
                }
                row.evidence_leaked += usize::from(leaked);
                if run.tool_error.as_deref().is_some_and(|e| leaks(e, &secret)) {
                    row.tool_error_leaked += 1;
                    row.misses.push(format!(
                        "tool_error/{}: {:?}",
                        c.name,
                        run.tool_error.unwrap_or_default()
                    ));
                }
            }
            let texts = report_texts(&text);
            if let Some(t) = texts.iter().find(|t| leaks(t, &secret)) {
                row.report_leaked += 1;
                row.misses.push(format!("report/{}: {t:?}", c.name));
            }
        }
        rows.push((f.name, row));
    }
    rows
}

/// Write one part of the report to `target/tmp/secret-corpus-<part>.md`; returns its path.
fn write_report(part: &str, text: &str) -> std::path::PathBuf {
    let path =
        std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("secret-corpus-{part}.md"));
    std::fs::write(&path, text).expect("write the report");
    path
}

fn add(t: &mut Row, r: &Row) {
    t.planted += r.planted;
    t.text_caught += r.text_caught;
    t.key_lost += r.key_lost;
    t.evidence_runs += r.evidence_runs;
    t.evidence_leaked += r.evidence_leaked;
    t.tool_error_leaked += r.tool_error_leaked;
    t.report_leaked += r.report_leaked;
    for (k, n) in &r.opaque {
        *t.opaque.entry(k.clone()).or_default() += n;
    }
}

#[test]
fn secret_corpus_never_reaches_evidence_or_reports() {
    let rows = run_corpus();
    let mut table = String::new();
    let _ = writeln!(
        table,
        "# Secret corpus: confusion table per format\n\n\
         planted = contexts; text = secrets removed by `redact_secrets`; evidence / \
         tool_error = gateway runs (2 per context) that leaked; report = contexts whose \
         report or progress leaked; opaque = evidence pass-throughs of an unshaped value \
         in an opaque identifier slot (documented, see the test's docs).\n"
    );
    let _ = writeln!(
        table,
        "| format | holdout | planted | text caught | text missed | key lost | evidence leaks | tool_error leaks | report leaks | opaque (slot: runs) |\n|---|---|---|---|---|---|---|---|---|---|"
    );
    let mut total = Row::default();
    let mut holdout_total = Row::default();
    let mut failures = Vec::new();
    for (name, r) in &rows {
        let opaque: Vec<String> = r.opaque.iter().map(|(k, n)| format!("{k}: {n}")).collect();
        let _ = writeln!(
            table,
            "| {name} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            if r.holdout { "yes" } else { "" },
            r.planted,
            r.text_caught,
            r.planted - r.text_caught,
            r.key_lost,
            r.evidence_leaked,
            r.tool_error_leaked,
            r.report_leaked,
            opaque.join(", ")
        );
        add(&mut total, r);
        if r.holdout {
            add(&mut holdout_total, r);
        }
        failures.extend(r.misses.iter().map(|m| format!("{name} {m}")));
    }
    let opaque_total: usize = total.opaque.values().sum();
    let _ = writeln!(
        table,
        "| **total** | | {} | {} | {} | {} | {} | {} | {} | {opaque_total} |",
        total.planted,
        total.text_caught,
        total.planted - total.text_caught,
        total.key_lost,
        total.evidence_leaked,
        total.tool_error_leaked,
        total.report_leaked,
    );
    let _ = writeln!(
        table,
        "\nHoldout ({} formats): text recall now {}/{}; evidence leaks {}, tool_error leaks {}, report leaks {}.",
        rows.iter().filter(|(_, r)| r.holdout).count(),
        holdout_total.text_caught,
        holdout_total.planted,
        holdout_total.evidence_leaked,
        holdout_total.tool_error_leaked,
        holdout_total.report_leaked
    );
    if !HOLDOUT_RECALL_BEFORE.is_empty() {
        let _ = writeln!(
            table,
            "\nHoldout recall before the generic rules (text caught / planted, evidence runs leaked):\n\n| format | text | evidence leaks |\n|---|---|---|"
        );
        for (name, caught, planted, ev) in HOLDOUT_RECALL_BEFORE {
            let _ = writeln!(table, "| {name} | {caught}/{planted} | {ev} |");
        }
    }
    if !failures.is_empty() {
        let _ = writeln!(table, "\n## Misses\n");
        for f in &failures {
            let _ = writeln!(table, "- {}", f.replace('\n', "\\n"));
        }
    }
    let path = write_report("formats", &table);
    println!("{table}");
    println!(
        "secret corpus: {} formats ({} holdout), {} plantings, text caught {}/{}, evidence leaks {} of {} runs, tool_error leaks {}, report leaks {}, opaque pass-throughs {opaque_total}; table: {}",
        rows.len(),
        rows.iter().filter(|(_, r)| r.holdout).count(),
        total.planted,
        total.text_caught,
        total.planted,
        total.evidence_leaked,
        total.evidence_runs,
        total.tool_error_leaked,
        total.report_leaked,
        path.display()
    );
    assert!(rows.len() >= 50 + 15);
    assert!(rows.iter().all(|(_, r)| r.planted >= 10));
    assert!(
        failures.is_empty(),
        "{} failures (table: {}):\n{}",
        failures.len(),
        path.display(),
        failures.join("\n")
    );
}

/// Benign lines by category.
type Categories = Vec<(&'static str, Vec<String>)>;

/// What agents print that is not a secret, by category: `(category, lines)`, plus the
/// identifier-shaped part for the evidence identifier check.
#[allow(clippy::too_many_lines)]
fn benign_corpus(rng: &mut Rng) -> (Categories, Vec<(IdentifierKind, String)>) {
    let fixed: Vec<String> = [
        "The API key is stored in the vault; never paste tokens into chat.",
        "Rotate the password every 90 days and keep secrets out of git.",
        "token_count=1234 max_tokens=4096 input_tokens: 812 output_tokens: 96",
        "\"max_tokens\": 8192, \"temperature\": 0.2",
        "usage: {\"input_tokens\": 1532, \"cache_read_input_tokens\": 10240}",
        "auth_type: oauth2",
        "auth: required",
        "password_min_length: 12",
        "token_ttl: 3600",
        "--token-file ./secrets/token.txt",
        "ssh_key_path: ~/.ssh/id_ed25519",
        "api_key_env: OPENAI_API_KEY",
        "secret_name: prod-db-credentials",
        "GITHUB_TOKEN: ${{ secrets.GITHUB_TOKEN }}",
        "export API_TOKEN=$API_TOKEN",
        "password: <redacted>",
        "token: ***",
        "api_key = \"${OPENAI_API_KEY}\"",
        "credential_refs: [\"env:ANTHROPIC_API_KEY\", \"vault:team/anthropic\"]",
        "Authorization header missing; expected a bearer token",
        "error: invalid token (expired)",
        "the token is expired, refresh it with `gh auth refresh`",
        "Bearer tokens are accepted by the gateway",
        "tokenizer: cl100k_base",
        "primary_key: id",
        "\"primaryKey\": \"id\"",
        "sort_key: created_at",
        "routing_key: orders.created",
        "public_key: ssh-ed25519 AAAAC3NzaC1lZDI1NTE5 bob@laptop",
        "idempotency_key: 2f1e7c3a",
        "cache_key: build-linux-x64",
        "test_token_refresh_expires_after_ttl ... ok",
        "mkdir -p src/login",
        "cp -p login.html dist/",
        "git log -p src/login.rs",
        "Password was successfully updated",
        "The password is stored in the vault",
        "password is checked",
        "client = OpenAI(api_key=os.environ[\"OPENAI_API_KEY\"])",
        "token=settings.TOKEN",
        "- name: LOG_LEVEL\n  value: debug",
        "{\"name\": \"API_TOKEN\", \"value\": \"${API_TOKEN}\"}",
        "Authorization: required for every endpoint",
        "password: must be at least 12 characters",
        "test tests::password_hashing_roundtrip ... ok",
        "fn verify_password(hash: &str, candidate: &str) -> bool {",
        "let token = lexer.next_token()?;",
        "if auth.is_none() { return Err(AuthError::Missing); }",
        "Token::Ident(name) => parse_ident(name),",
        "impl TokenStream for Parser<'_> {}",
        "class PasswordResetView(LoginRequiredMixin, FormView):",
        "const SECRET_HEADER = 'X-Hub-Signature-256';",
        "auth_method: \"oidc\"",
        "use_auth: true",
        "secret_scanning: enabled",
        "token_endpoint: https://auth.example.com/oauth/token",
        "docs: see https://docs.github.com/en/authentication/keeping-your-account-and-data-secure",
        "export PATH=/usr/local/cargo/bin:$PATH",
        "RUST_LOG=debug cargo test -p stapel-runner-protocol",
        "npm_config_cache=/tmp/.npm",
        "hf_transfer is enabled for faster downloads",
        "sk-learn-compatible-model-version2",
        "warning: unused variable: `token`",
        "error[E0425]: cannot find value `api_key` in this scope",
        "Password reset email sent to bob@example.com",
        "The secret to fast builds is caching.",
        "auth_port: 8443",
        "passwordless login is enabled",
        "key: value",
        "\"key\": \"src/main.rs\"",
        "keys: [a, b, c]",
        "secret: my-app-secret-name",
        "token: see the README",
        "--auth=oauth --auth-mode=device",
        "password=",
        "token = None",
        "pass: true",
        "first_pass: done",
        "password: required",
        "Password: incorrect, please try again",
        "{\"password\": \"This field is required.\"}",
        "{\"password\": [\"Ensure this field has at least 8 characters.\"]}",
        "\"password\": \"must be at least 12 characters long\"",
        "The password must contain a digit and a symbol.",
        "password: ${DB_PASSWORD}",
        "password hashing uses argon2id with m=19456",
        "Set the password field in the login form and submit.",
        "<password></password>",
        "<add key=\"Environment\" value=\"Production\" />",
        "<add key=\"ApiBaseUrl\" value=\"https://api.example.com\" />",
        "<add key=\"TokenLifetimeMinutes\" value=\"60\" />",
        "<input type=\"password\" name=\"password\" value=\"\" autocomplete=\"current-password\">",
        "Set `GITHUB_TOKEN` in the repository secrets before the release job runs.",
        "Tokens expire after one hour; refresh them with the refresh token flow.",
        "  ~ password = (sensitive value)",
        "  + token    = (known after apply)",
        "resource \"aws_secretsmanager_secret\" \"db_password\" {",
        "kubectl get secret db-creds -o jsonpath='{.data.password}'",
        "os.Setenv(\"LOG_LEVEL\", \"debug\")",
        "os.environ.get(\"API_KEY\", \"\")",
        "creds = load_credentials(profile=\"default\")",
        "pw = getpass.getpass()",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    let shell: Vec<String> = [
        "mkdir -p /tmp/build/out",
        "ssh -p 2222 deploy@build.example.com",
        "git log -p -n 3 -- src/auth.rs",
        "mysql -u root -p",
        "mysql -u app -h db.internal -P 3306 app_db",
        "docker login -u bob --password-stdin registry.example.com",
        "echo \"$CR_PAT\" | docker login ghcr.io -u bob --password-stdin",
        "curl -u \"$USER:$TOKEN\" https://api.example.com/v1/items",
        "curl -u bob: https://ftp.example.com/",
        "curl --user \"${NEXUS_USER}:${NEXUS_PASSWORD}\" -T app.jar https://nexus/repo/",
        "python -u train.py --epochs 3",
        "tar -xzf node-v20.11.1-linux-x64.tar.gz",
        "grep -rn password src/ --include=*.py",
        "psql -U app -h db -p 5432 -d app",
        "sshpass -f ~/.sshpass ssh deploy@host uptime",
        "pass show work/email",
        "pip install -U pip setuptools wheel",
        "cargo build --release -p stapel-runner",
        "npm ci --prefer-offline --no-audit",
        "helm upgrade --install api ./chart -f values.yaml --set image.tag=1.4.2",
        "az login --service-principal -u $AZURE_CLIENT_ID -p $AZURE_CLIENT_SECRET --tenant $AZURE_TENANT_ID",
        "gh auth login --with-token < token.txt",
        "openssl rand -hex 32 > .secret",
        "git config --global credential.helper store",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    let mut cats: BTreeMap<&'static str, Vec<String>> = BTreeMap::new();
    cats.insert("config_and_prose", fixed);
    cats.insert("shell_sessions", shell);
    let mut idents = Vec::new();
    let paths = [
        "src/lib.rs",
        "core/src/contract/safety.rs",
        "tests/fixtures/input.json",
        "docs/adr/0002-credentials.md",
        "bindings-python/python/stapel_runner_protocol/__init__.py",
        "src/auth/token_service.ts",
        "app/models/user_password.rb",
    ];
    let models = [
        "claude-sonnet-4-5-20250929",
        "claude-opus-4-1",
        "gpt-4o-2024-08-06",
        "gemini-2.5-pro",
        "llama-3.1-70b-instruct",
        "mistral-large-2411",
    ];
    let words = [
        "Request",
        "Handler",
        "Factory",
        "Token",
        "Session",
        "Parser",
        "Provider",
        "Password",
        "Reset",
        "Secret",
        "Key",
        "Auth",
        "Manager",
        "Builder",
        "Config",
        "Async",
        "Http",
        "Json",
        "Stream",
        "Cache",
        "Credential",
        "Refresh",
        "Access",
        "Api",
    ];
    let crates = [
        "serde",
        "serde_json",
        "tokio",
        "thiserror",
        "indexmap",
        "compact_str",
        "memchr",
        "pyo3",
        "napi",
        "uniffi",
        "proptest",
        "criterion",
    ];
    let b64url = |rng: &mut Rng, n| rng.from(B64URL, n);
    for i in 0..400 {
        let sha = rng.from(HEX, 40);
        let short = sha[..7].to_owned();
        let digest = format!("sha256:{}", rng.from(HEX, 64));
        let uuid = format!(
            "{}-{}-4{}-{}-{}",
            rng.from(HEX, 8),
            rng.from(HEX, 4),
            rng.from(HEX, 3),
            rng.from(HEX, 4),
            rng.from(HEX, 12)
        );
        let path = paths[rng.below(paths.len())];
        let model = models[rng.below(models.len())];
        let ts = format!(
            "2026-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
            rng.range(1, 12),
            rng.range(1, 28),
            rng.below(24),
            rng.below(60),
            rng.below(60),
            rng.below(1000)
        );
        let camel: String = (0..rng.range(2, 5))
            .map(|_| words[rng.below(words.len())])
            .collect();
        let snake = camel.chars().fold(String::new(), |mut s, c| {
            if c.is_uppercase() && !s.is_empty() {
                s.push('_');
            }
            s.push(c.to_ascii_lowercase());
            s
        });
        let n = rng.range(1, 99999);
        let krate = crates[rng.below(crates.len())];
        let ver = format!("{}.{}.{}", rng.below(3), rng.below(40), rng.below(20));
        let push =
            |cats: &mut BTreeMap<&'static str, Vec<String>>, cat: &'static str, line: String| {
                cats.entry(cat).or_default().push(line);
            };
        push(
            &mut cats,
            "git_output",
            match i % 6 {
                0 => format!("commit {sha}\nAuthor: Bob <bob@example.com>\nDate:   {ts}"),
                1 => format!("{short} (HEAD -> main, origin/main) fix(auth): handle expired tokens in {path}"),
                2 => format!("diff --git a/{path} b/{path}\nindex {short}..{} 100644", &rng.from(HEX, 7)),
                3 => format!("refs/heads/main -> {sha}"),
                4 => format!("Merge pull request #{n} from acme/{}", snake.replace('_', "-")),
                _ => format!("[{short}] refactor: rename {snake} to {}_v2", snake),
            },
        );
        push(
            &mut cats,
            "digests_and_ids",
            match i % 8 {
                0 => format!("image: ghcr.io/acme/app@{digest}"),
                1 => format!("cache hit: {digest} ({n} bytes)"),
                2 => format!(
                    "Digest: {digest}\nStatus: Downloaded newer image for ghcr.io/acme/app:1.4.2"
                ),
                3 => format!("container {} exited with code 0", rng.from(HEX, 64)),
                4 => format!("request_id={uuid} status=200 duration_ms={n}"),
                5 => format!("\"session_id\": \"{uuid}\", \"commit\": \"{sha}\""),
                6 => format!(
                    "created charge ch_{} for customer cus_{}",
                    rng.from(ALNUM, 24),
                    rng.from(ALNUM, 14)
                ),
                _ => format!(
                    "event evt_{} (ulid 01J{}) object id {}",
                    rng.from(ALNUM, 24),
                    rng.from("0123456789ABCDEFGHJKMNPQRSTVWXYZ", 23),
                    rng.from(HEX, 24)
                ),
            },
        );
        push(
            &mut cats,
            "api_object_ids",
            match i % 8 {
                0 => format!(
                    "message id msg_01{} stop_reason=end_turn",
                    rng.from(ALNUM, 22)
                ),
                1 => format!("tool_use id toolu_01{} name=read_file", rng.from(ALNUM, 22)),
                2 => format!("x-request-id: req_011C{}", rng.from(ALNUM, 20)),
                3 => format!(
                    "\"id\": \"chatcmpl-{}\", \"object\": \"chat.completion\"",
                    rng.from(ALNUM, 29)
                ),
                4 => format!("response resp_{} status=completed", rng.from(HEX, 48)),
                5 => format!(
                    "tool call call_{} -> thread_{}",
                    rng.from(ALNUM, 24),
                    rng.from(ALNUM, 24)
                ),
                6 => format!(
                    "uploaded file-{} (purpose=batch) batch_{}",
                    rng.from(ALNUM, 24),
                    rng.from(HEX, 32)
                ),
                _ => format!(
                    "PaymentIntent pi_{} for cus_{} (evt_{})",
                    rng.from(ALNUM, 24),
                    rng.from(ALNUM, 14),
                    rng.from(ALNUM, 24)
                ),
            },
        );
        push(
            &mut cats,
            "json_and_http_logs",
            match i % 4 {
                0 => format!(
                    "{{\"level\":\"info\",\"ts\":\"{ts}\",\"msg\":\"token refreshed\",\"user_id\":\"{uuid}\",\"trace_id\":\"{}\",\"span_id\":\"{}\"}}",
                    rng.from(HEX, 32),
                    rng.from(HEX, 16)
                ),
                1 => format!(
                    "10.0.{}.{} - - [01/Dec/2026:06:30:12 +0000] \"GET /api/v1/items?page={} HTTP/1.1\" 200 {n} \"-\" \"Mozilla/5.0\"",
                    rng.below(255),
                    rng.below(255),
                    rng.below(9)
                ),
                2 => format!("x-request-id: {uuid}\nx-amzn-trace-id: Root=1-{}-{}", rng.from(HEX, 8), rng.from(HEX, 24)),
                _ => format!("{ts} INFO session {uuid} started model={model} tokens={n}"),
            },
        );
        push(
            &mut cats,
            "build_and_test_output",
            match i % 8 {
                0 => format!("   Compiling {krate} v{ver}"),
                1 => format!(
                    "     Running unittests src/lib.rs (target/debug/deps/{krate}-{})",
                    rng.from(HEX, 16)
                ),
                2 => format!("test {snake}_returns_error_for_invalid_token ... ok"),
                3 => format!("added {n} packages, and audited {} packages in 4s", n + 1),
                4 => format!(
                    "tests/test_auth.py::test_{snake} PASSED [{:>3}%]",
                    rng.below(100)
                ),
                5 => format!("Successfully installed {krate}-{ver} requests-2.32.3"),
                6 => format!("    \"integrity\": \"sha512-{}==\"", rng.from(B64, 86)),
                _ => format!("{krate}=={ver} \\\n    --hash=sha256:{}", rng.from(HEX, 64)),
            },
        );
        push(
            &mut cats,
            "stack_traces",
            match i % 4 {
                0 => format!("    at {camel}.handle ({path}:{}:{})", rng.below(400), rng.below(80)),
                1 => format!("  File \"/app/{path}\", line {}, in {snake}\n    raise AuthError(\"token expired\")", rng.below(400)),
                2 => format!("thread 'main' panicked at {path}:{}:{}:\ncalled `Result::unwrap()` on an `Err` value: InvalidToken", rng.below(400), rng.below(80)),
                _ => format!("\tat com.example.auth.{camel}.refresh({camel}.java:{})", rng.below(400)),
            },
        );
        push(
            &mut cats,
            "go_sum_and_lockfiles",
            match i % 3 {
                0 => format!(
                    "github.com/acme/{} v{ver} h1:{}=",
                    snake.replace('_', "-"),
                    rng.from(B64, 43)
                ),
                1 => format!(
                    "github.com/acme/{} v{ver}/go.mod h1:{}=",
                    snake.replace('_', "-"),
                    rng.from(B64, 43)
                ),
                _ => format!(
                    "\"resolved\": \"https://registry.npmjs.org/{krate}/-/{krate}-{ver}.tgz\""
                ),
            },
        );
        if i % 4 == 0 {
            let body: Vec<String> = (0..6).map(|_| rng.from(B64, 64)).collect();
            push(
                &mut cats,
                "certificates_and_public_keys",
                match i % 16 {
                    0 => format!("-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----", body.join("\n")),
                    4 => format!("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI{} bob@laptop", rng.from(B64, 43)),
                    8 => format!("ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQ{} deploy@ci", rng.from(B64, 330)),
                    _ => format!("|1|{}=|{}= ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBB{}=", rng.from(B64, 27), rng.from(B64, 27), rng.from(B64, 86)),
                },
            );
            push(
                &mut cats,
                "data_uri_images",
                format!(
                    "<img alt=\"chart\" src=\"data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAA{}\">",
                    rng.from(B64, 240)
                ),
            );
        }
        push(
            &mut cats,
            "identifiers_and_prose",
            match i % 6 {
                0 => format!("let {snake} = {camel}::new(config);"),
                1 => format!("The model {model} used {n} tokens for the password reset flow."),
                2 => format!("token_count: {n}\nmax_tokens: 4096"),
                3 => format!("auth_type: bearer  # tokens are read from {path}"),
                4 => format!("  {snake}_key: {snake}_{n}"),
                _ => format!(
                    "fixture_{}.json and snapshot__{}__{}.snap",
                    b64url(rng, 12),
                    snake,
                    rng.below(99)
                ),
            },
        );
        idents.push((IdentifierKind::Commit, sha));
        idents.push((IdentifierKind::Commit, short));
        idents.push((IdentifierKind::Ref, digest));
        idents.push((IdentifierKind::Ref, uuid.clone()));
        idents.push((IdentifierKind::Artifact, path.to_owned()));
        idents.push((IdentifierKind::Ref, model.to_owned()));
        idents.push((IdentifierKind::Ref, camel.clone()));
        idents.push((
            IdentifierKind::Ref,
            format!("goal:{}", snake.replace('_', "-")),
        ));
        idents.push((
            IdentifierKind::Artifact,
            format!("artifact://{}/{}.patch", uuid, snake),
        ));
    }
    (cats.into_iter().collect(), idents)
}

#[test]
fn benign_corpus_is_rarely_redacted() {
    let mut rng = Rng(0xBE71_6417);
    let (cats, idents) = benign_corpus(&mut rng);
    let mut table = String::from(
        "# Benign corpus: false positives per category\n\n| category | lines | redacted | rate |\n|---|---|---|---|\n",
    );
    let (mut lines, mut fps) = (0usize, Vec::new());
    for (cat, items) in &cats {
        let mut n = 0;
        for l in items {
            let (out, spans) = safety::redact_secrets(l);
            if spans > 0 {
                n += 1;
                fps.push(format!("{cat}: {l:?} -> {out:?}"));
            }
        }
        lines += items.len();
        let _ = writeln!(
            table,
            "| {cat} | {} | {n} | {:.2} % |",
            items.len(),
            100.0 * n as f64 / items.len() as f64
        );
    }
    let mut ident_fp = Vec::new();
    for (kind, s) in &idents {
        let (out, changed) = safe_identifier_as(*kind, s);
        if changed {
            ident_fp.push(format!("{} {s:?} -> {out:?}", kind.as_str()));
        }
    }
    let text_rate = fps.len() as f64 / lines as f64;
    let ident_rate = ident_fp.len() as f64 / idents.len() as f64;
    let _ = writeln!(
        table,
        "| **total** | {lines} | {} | {:.2} % |\n\nidentifiers: {}, redacted {} ({:.2} %)",
        fps.len(),
        text_rate * 100.0,
        idents.len(),
        ident_fp.len(),
        ident_rate * 100.0
    );
    for f in fps.iter().chain(&ident_fp) {
        let _ = writeln!(table, "- false positive: {}", f.replace('\n', "\\n"));
    }
    let path = write_report("benign", &table);
    println!("{table}");
    println!(
        "benign corpus: {} categories, {lines} lines, {} redacted ({:.2} %); {} identifiers, {} redacted ({:.2} %); table: {}",
        cats.len(),
        fps.len(),
        text_rate * 100.0,
        idents.len(),
        ident_fp.len(),
        ident_rate * 100.0,
        path.display()
    );
    assert!(text_rate < 0.01, "text false positives: {fps:#?}");
    assert!(
        ident_rate < 0.01,
        "identifier false positives: {ident_fp:#?}"
    );
}

/// The misses an audit of the detector found by reading it, one line each: the secret
/// must go and the key must stay.
#[test]
fn known_misses_are_caught() {
    let cases: &[(&str, &str)] = &[
        ("curl -u admin:S3cr3tPass https://api.example.com/", "S3cr3tPass"),
        ("curl --user deploy:hunter2hunter2 https://x.example.com/", "hunter2hunter2"),
        ("curl --user=deploy:Tr0ub4dor3 https://x.example.com/", "Tr0ub4dor3"),
        ("mysql -u root -pS3cret123 app_db", "S3cret123"),
        ("mysqldump -h db -uroot -pHunter2x app > dump.sql", "Hunter2x"),
        ("docker login -u bob -p Xk9fQ2mZpL7v registry.example.com", "Xk9fQ2mZpL7v"),
        ("DB_PASS=Summer2024!", "Summer2024!"),
        ("SMTP_PASS=mailpass123", "mailpass123"),
        ("CREDS=admin:letmein99", "letmein99"),
        ("pw: hunter2hunter2", "hunter2hunter2"),
        ("<password>S3cret!pass</password>", "S3cret!pass"),
        ("<add key=\"ApiKey\" value=\"a1b2c3d4e5f6g7h8\" />", "a1b2c3d4e5f6g7h8"),
        ("<add name=\"password\" value=\"Winter2025#x\"/>", "Winter2025#x"),
        ("machine example.com login bob password hunter2hunter2", "hunter2hunter2"),
        ("PASSPHRASE=\"correct horse battery staple\"", "correct horse battery staple"),
        ("API_SECRET=correct-horse-battery-staple", "correct-horse-battery-staple"),
        (
            "\"primaryKey\": \"Xk9fQ2mZpL7vR4tY8wB1nC6dXk9fQ2mZpL7vR4tY8wB1nC6dXk9fQ2mZpL7vR4tY8wB1nC6dAbCdEfGhIjKlM==\"",
            "Xk9fQ2mZpL7vR4tY8wB1nC6dXk9fQ2mZpL7vR4tY8wB1nC6d",
        ),
        ("routing_key=3f2a9c1b8e7d6f5a4b3c2d1e0f9a8b7c", "3f2a9c1b8e7d6f5a4b3c2d1e0f9a8b7c"),
        ("password: letmeinplease", "letmeinplease"),
        (
            "bob,,AKIAIOSFODNN7EXAMPLE,wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY,https://acme.signin.aws.amazon.com/console",
            "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        ),
        (
            "DefaultEndpointsProtocol=https;AccountName=acme;AccountKey=Q7fZ2kLmN8pR4sT1vW6xY9aBc3D5eR2tQ7fZ2kLm+/==;EndpointSuffix=core.windows.net",
            "Q7fZ2kLmN8pR4sT1vW6xY9aBc3D5eR2t",
        ),
        (
            "Endpoint=sb://acme.servicebus.windows.net/;SharedAccessKeyName=Root;SharedAccessKey=Zm9vYmFyYmF6cXV4Zm9vYmFyYmF6cXV4Zm9vYmFy=",
            "Zm9vYmFyYmF6cXV4Zm9vYmFyYmF6cXV4Zm9vYmFy",
        ),
        ("Server=db;Uid=app;Pwd=Plain2Text!;", "Plain2Text!"),
        (
            "the token 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08 works",
            "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
        ),
        ("os.Setenv(\"GITHUB_TOKEN\", \"s3cr3t-t0ken-value\")", "s3cr3t-t0ken-value"),
        ("props.setProperty(\"password\", \"Hunter22!\");", "Hunter22!"),
        // A second review: values cut at `&`, `;` or quotes, name/value pairs, escaped
        // JSON, other Authorization schemes, camelCase keys, multi-word passwords,
        // `-p` after `-u`.
        ("DB_PASSWORD=n7&Qz!x2Lp", "Qz!x2Lp"),
        ("export DB_PASSWORD=S3cr3t&Extra!9", "Extra!9"),
        ("password: n7&Qz!x2Lp", "Qz!x2Lp"),
        ("--password=n7&Qz!x2Lp --verbose", "Qz!x2Lp"),
        ("- name: DB_PASSWORD\n  value: hunter2hunter2", "hunter2hunter2"),
        ("{\"name\": \"API_TOKEN\", \"value\": \"k7Rm2Qp9Zx4Lw8Vt\"}", "k7Rm2Qp9Zx4Lw8Vt"),
        ("{\"value\": \"k7Rm2Qp9Zx4Lw8Vt\", \"key\": \"api_key\"}", "k7Rm2Qp9Zx4Lw8Vt"),
        ("request body: {\\\"password\\\": \\\"hunter2x\\\"}", "hunter2x"),
        ("error: \\\"api_key\\\": \\\"k7Rm2Qp9Zx4Lw8Vt\\\"", "k7Rm2Qp9Zx4Lw8Vt"),
        (
            "Authorization: Splunk 4f1c2d3e-5a6b-4c7d-8e9f-0a1b2c3d4e5f",
            "4f1c2d3e-5a6b-4c7d-8e9f-0a1b2c3d4e5f",
        ),
        ("Authorization: SSWS 00QCjAl4MlV-WPXM2f7Hq9", "00QCjAl4MlV-WPXM2f7Hq9"),
        ("Authorization: Key 7f3e9a1c5b2d8e4f", "7f3e9a1c5b2d8e4f"),
        (
            "Proxy-Authorization: GenieKey 9b2e4c6a-1d3f-4a5b-8c7d-6e5f4a3b2c1d",
            "9b2e4c6a-1d3f-4a5b-8c7d-6e5f4a3b2c1d",
        ),
        ("{\"passWord\": \"Hunter2Hunter2\"}", "Hunter2Hunter2"),
        ("PassPhrase=Tr0ub4dor&3x", "Tr0ub4dor"),
        ("password: correct horse battery staple", "horse battery staple"),
        ("AUTH_HEADER=Token 9f8e7d6c5b4a", "9f8e7d6c5b4a"),
        ("mongosh -u admin -p S3cretPass", "S3cretPass"),
        ("redis-cli -h cache -a S3cretPass ping", "S3cretPass"),
    ];
    let mut failures = Vec::new();
    for (input, secret) in cases {
        let (out, _) = safety::redact_secrets(input);
        if out.contains(secret) {
            failures.push(format!("{input:?} -> {out:?}"));
        }
        if !safety::looks_like_credential(input) {
            failures.push(format!("looks_like_credential({input:?}) is false"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn redaction_keeps_the_key() {
    for (input, want) in [
        ("password=hunter2hunter2", "password=[redacted]"),
        (
            "export API_TOKEN=Q7fZ2kLmN8pR4sT1vW6xY9aBc3D5eR2t",
            "export API_TOKEN=[redacted]",
        ),
        (
            "{\"api_key\": \"abcd1234efgh5678\"}",
            "{\"api_key\": \"[redacted]\"}",
        ),
        (
            "Authorization: Bearer abc.def-123_456",
            "Authorization: Bearer [redacted]",
        ),
        ("--token s3cr3t-value next", "--token [redacted] next"),
        (
            "AccountKey=abc+/def==;EndpointSuffix=core.windows.net",
            "AccountKey=[redacted];EndpointSuffix=core.windows.net",
        ),
        (
            "postgres://app:pw1234@db/app",
            "postgres://app:[redacted]@db/app",
        ),
        (
            "curl -u admin:S3cr3tPass https://x/",
            "curl -u admin:[redacted] https://x/",
        ),
        (
            "mysql -uroot -pS3cret123 db",
            "mysql -uroot -p[redacted] db",
        ),
        (
            "<password>S3cret!pass</password>",
            "<password>[redacted]</password>",
        ),
        (
            "<add key=\"ApiKey\" value=\"a1b2c3d4e5f6g7h8\" />",
            "<add key=\"ApiKey\" value=\"[redacted]\" />",
        ),
        (
            "machine h login bob password hunter2hunter2",
            "machine h login bob password [redacted]",
        ),
        ("DB_PASSWORD=S3cr3t&Extra!9", "DB_PASSWORD=[redacted]"),
        (
            "https://x/cb?a=1&password=S3cr3tPass&b=2",
            "https://x/cb?a=1&password=[redacted]&b=2",
        ),
        (
            "Server=x;Password=S3cr3tPass;Database=z",
            "Server=x;Password=[redacted];Database=z",
        ),
        (
            "password: correct horse battery staple",
            "password: [redacted]",
        ),
        (
            "- name: DB_PASSWORD\n  value: hunter2hunter2",
            "- name: DB_PASSWORD\n  value: [redacted]",
        ),
        (
            "Authorization: Splunk 4f1c2d3e-5a6b-4c7d-8e9f-0a1b2c3d4e5f",
            "Authorization: Splunk [redacted]",
        ),
        (
            "mongosh -u admin -p S3cretPass",
            "mongosh -u admin -p [redacted]",
        ),
        ("no secrets here", "no secrets here"),
    ] {
        assert_eq!(safety::redact_secrets(input).0, want, "{input}");
    }
}

/// Inputs that once made the scan quadratic (a key in every value, many keys on one
/// line, unterminated quotes, many flags, attributes without values): the answers stay
/// right (the fuzz target `contract_inputs` watches the time).
#[test]
fn pathological_inputs() {
    let repeated = "password=".repeat(20_000);
    let spans = safety::find_secrets(&repeated);
    assert_eq!(spans.len(), 1, "one value, read after the first key");
    assert_eq!(spans[0].start, "password=".len());
    let many_keys = "token ".repeat(50_000);
    assert!(safety::find_secrets(&many_keys).is_empty());
    let open_quotes = "\"token\": \"".repeat(20_000);
    let (out, _) = safety::redact_secrets(&open_quotes);
    assert!(out.starts_with("\"token\": \""));
    let long_secret = format!("API_TOKEN={}", "Ab1".repeat(3000));
    let (out, n) = safety::redact_secrets(&long_secret);
    assert_eq!((out.as_str(), n), ("API_TOKEN=[redacted]", 1));
    let flags = "curl -u -u -u ".repeat(20_000);
    assert!(safety::find_secrets(&flags).is_empty());
    let attrs = "<add key=\"password\" ".repeat(20_000);
    assert!(safety::find_secrets(&attrs).is_empty());
    let values = " value=\"x\"".repeat(20_000);
    assert!(safety::find_secrets(&values).is_empty());
    let mysql = "mysql -p".repeat(20_000);
    let _ = safety::find_secrets(&mysql);
    // 1 MiB of `-----BEGIN` headers without a newline (each header once ran to the end
    // of the text) and of `;base64,` ranges with a key between them (each key was checked
    // against every range): no private key, no secret, and the text comes back whole.
    for unit in ["-----BEGIN-----END-----", ";base64, key "] {
        let text = unit.repeat((1 << 20) / unit.len());
        let (out, n) = safety::redact_secrets(&text);
        assert_eq!(n, 0, "{unit}");
        assert_eq!(out, text);
    }
    // Keys without a blank between them: the scheme word before each value was read to
    // the end of the text.
    for unit in ["password=a&", "DB_PASSWORD=(((("] {
        let text = unit.repeat((1 << 20) / unit.len());
        assert!(safety::find_secrets(&text).is_empty(), "{unit}");
    }
    // A certificate's header ends at its `-----`: "PRIVATE KEY" later on the line does
    // not make it a private key.
    let cert = "-----BEGIN CERTIFICATE-----MIIBszCCAVmgAwIBAgIU-----END CERTIFICATE----- (the PRIVATE KEY stays in the vault)";
    assert!(safety::find_secrets(cert).is_empty());
}
