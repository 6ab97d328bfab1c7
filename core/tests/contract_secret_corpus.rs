//! Evidence redaction against a corpus of real-world secret formats (issue 17).
//!
//! **Secret corpus.** 76 token formats modelled on the public facts of secret-scanner
//! rule sets (prefixes, lengths and alphabets of GitHub, GitLab, Slack, OpenAI,
//! Anthropic, AWS, Google, Stripe, … tokens; PEM blocks, JWTs, connection strings and
//! unprefixed values that are secret only by context). Every value is generated here from
//! a seeded PRNG — none is a real secret. Each format is planted in 14–16 contexts (env
//! lines, `export`, YAML, JSON, `--flag v`, `--flag=v`, headers, connection strings,
//! TOML, `docker -e`, URL queries, prose, log lines, env dumps, bare words).
//!
//! Every planted text goes through the **real gateway evidence path**: the JSON input
//! forms a binding uses (`GatewayInput::from_value`), planted in the request's title,
//! description and every identifier, the rein inputs, the tool-call arguments, the
//! sandbox id, the session map, the tool output, the summary's identifiers and metadata,
//! and every `*_failed` message. The secret (and every 12-character piece of it) must not
//! appear in any evidence string. The same texts also go through
//! [`safety::redact_secrets`] directly: the secret must be gone while the key name that
//! made it secret stays.
//!
//! **Benign corpus.** What agents print: commit SHAs, `sha256:` digests, UUIDs, paths,
//! model names, timestamps, camelCase identifiers, prose about tokens and passwords,
//! base64-ish fixture names, token counts, config keys that are *about* secrets. Under
//! 1 % of it may be redacted (text) and under 1 % of the identifier-shaped part may be
//! redacted as an evidence identifier.
//!
//! Run with `--nocapture` to see the confusion table per format.

use serde_json::{json, Value};
use stapel_runner_protocol::contract::{
    safe_identifier_as, safety, Catalog, Gateway, GatewayAction, GatewayConfig, GatewayInput,
    GatewayOutput, IdentifierKind,
};

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

/// One planting context: a name and a template over `{K}` (env name), `{k}` (snake
/// case), `{kebab}`, `{noun}` and `{V}`. `shaped_only` contexts give no key, so only
/// formats recognisable by shape are planted there.
struct Context {
    name: &'static str,
    template: &'static str,
    shaped_only: bool,
}

const CONTEXTS: &[Context] = &[
    Context {
        name: "env",
        template: "{K}={V}",
        shaped_only: false,
    },
    Context {
        name: "export",
        template: "export {K}=\"{V}\"",
        shaped_only: false,
    },
    Context {
        name: "yaml",
        template: "service:\n  name: api\n  {k}: {V}\n  replicas: 3",
        shaped_only: false,
    },
    Context {
        name: "json",
        template: "{\"name\": \"svc\", \"{k}\": \"{V}\", \"region\": \"eu-west-1\"}",
        shaped_only: false,
    },
    Context {
        name: "cli_flag",
        template: "$ deploy --{kebab} {V} --verbose",
        shaped_only: false,
    },
    Context {
        name: "cli_flag_eq",
        template: "tool login --{kebab}={V}",
        shaped_only: false,
    },
    Context {
        name: "auth_header",
        template:
            "GET /v1/items HTTP/1.1\nHost: api.example.com\nAuthorization: Bearer {V}\nAccept: */*",
        shaped_only: false,
    },
    Context {
        name: "api_key_header",
        template: "curl -H 'X-Api-Key: {V}' https://api.example.com/v1",
        shaped_only: false,
    },
    Context {
        name: "conn_string",
        template:
            "Server=tcp:db.example.net,1433;Database=app;User ID=app;Password={V};Encrypt=True;",
        shaped_only: false,
    },
    Context {
        name: "toml",
        template: "[deploy]\n{k} = '{V}'\nregion = \"eu\"",
        shaped_only: false,
    },
    Context {
        name: "docker_env",
        template: "docker run --rm -e {K}={V} ghcr.io/acme/app:1.4.2",
        shaped_only: false,
    },
    Context {
        name: "url_query",
        template: "fetching https://api.example.com/v1/items?{k}={V}&page=2",
        shaped_only: false,
    },
    Context {
        name: "prose",
        template: "For the deploy, the {noun} is {V} (rotate it later).",
        shaped_only: false,
    },
    Context {
        name: "log_line",
        template: "2026-12-01T06:30:12Z INFO auth ok {k}={V} user=bob",
        shaped_only: false,
    },
    Context {
        name: "env_dump",
        template: "PATH=/usr/local/bin:/usr/bin\nHOME=/root\n{K}={V}\nLANG=C.UTF-8",
        shaped_only: false,
    },
    Context {
        name: "bare_prose",
        template: "deployed with {V} yesterday",
        shaped_only: true,
    },
];

fn fill(t: &str, f: &Format, v: &str) -> String {
    t.replace("{K}", f.env)
        .replace("{kebab}", &f.env.to_lowercase().replace('_', "-"))
        .replace("{k}", &f.env.to_lowercase())
        .replace("{noun}", f.noun)
        .replace("{V}", v)
}

/// The key the context names (kept readable after redaction), if it names one.
fn context_key(c: &Context, f: &Format) -> Option<String> {
    Some(match c.name {
        "env" | "export" | "docker_env" | "env_dump" => f.env.to_owned(),
        "yaml" | "json" | "toml" | "url_query" | "log_line" => f.env.to_lowercase(),
        "cli_flag" | "cli_flag_eq" => format!("--{}", f.env.to_lowercase().replace('_', "-")),
        "auth_header" => "Authorization: Bearer".to_owned(),
        "api_key_header" => "X-Api-Key".to_owned(),
        "conn_string" => "Password=".to_owned(),
        "prose" => f.noun.to_owned(),
        _ => return None,
    })
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

fn strings(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => out.push(s.clone()),
        Value::Array(a) => a.iter().for_each(|x| strings(x, out)),
        Value::Object(m) => m.iter().for_each(|(k, x)| {
            out.push(k.clone());
            strings(x, out)
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

/// Drive one execution through the JSON input forms with `text` and `secret` planted in
/// every field; returns every string of the evidence.
///
/// `bare` is the value as planted when its shape alone marks it as a secret: it is
/// planted on its own in every identifier slot too. (An unprefixed value such as 64 hex
/// digits or a UUID is, on its own, a well-shaped identifier — a commit, an id — and is
/// only a secret by context; those are planted with a key, `token:<v>`.)
fn run_gateway(text: &str, secret: &str, bare: &str, path: Path) -> Vec<String> {
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
            {"call_id": bare, "name": "run_task", "arguments": {"instruction": text}}
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
    let mut out = Vec::new();
    strings(&result.evidence.to_value(), &mut out);
    out
}

fn answer(a: &GatewayAction, text: &str, bare: &str, path: Path) -> Value {
    let secret = bare;
    let fail = |ty: &str| json!({"type": ty, "message": text});
    match a {
        GatewayAction::CreateSandbox { .. } => {
            json!({"type": "sandbox_created", "sandbox": {"sandbox_id": secret}})
        }
        GatewayAction::StartSession { .. } => {
            json!({"type": "session_started", "session": {"rein_session": text, "token": secret}})
        }
        GatewayAction::DispatchTool { .. } if path == Path::Failing => fail("tool_dispatch_failed"),
        GatewayAction::DispatchTool { .. } => {
            json!({"type": "tool_dispatched", "result": {"ok": true, "output": {"stdout": text, "secret": secret}, "error": text}})
        }
        GatewayAction::EndSession { .. } if path == Path::Failing => fail("session_end_failed"),
        GatewayAction::EndSession { .. } => json!({"type": "session_ended", "summary": {
            "resolved_model": secret,
            "commit": secret,
            "artifacts": [text, secret, format!("secret:{secret}"), format!("build/{secret}.log")],
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

#[derive(Default)]
struct Row {
    planted: usize,
    text_caught: usize,
    text_leaked: usize,
    key_lost: usize,
    evidence_leaked: usize,
}

#[test]
fn secret_corpus_never_reaches_evidence() {
    let mut rng = Rng(0x5EED_0017);
    let mut rows: Vec<(&str, Row)> = Vec::new();
    let mut failures = Vec::new();
    for f in formats() {
        let mut row = Row::default();
        for c in CONTEXTS {
            if c.shaped_only && !f.shaped {
                continue;
            }
            let (value, secret) = (f.gen)(&mut rng);
            let text = fill(c.template, &f, &value);
            row.planted += 1;
            let (redacted, _) = safety::redact_secrets(&text);
            if leaks(&redacted, &secret) {
                row.text_leaked += 1;
                failures.push(format!("text {} / {}: {redacted}", f.name, c.name));
            } else {
                row.text_caught += 1;
            }
            if let Some(k) = context_key(c, &f) {
                if !redacted.contains(&k) {
                    row.key_lost += 1;
                    failures.push(format!("key lost {} / {}: {redacted}", f.name, c.name));
                }
            }
            for path in [Path::Ok, Path::Failing] {
                let bare = if f.shaped {
                    value.clone()
                } else {
                    format!("token:{value}")
                };
                let evidence = run_gateway(&text, &secret, &bare, path);
                if evidence.iter().any(|s| leaks(s, &secret)) {
                    row.evidence_leaked += 1;
                    failures.push(format!(
                        "evidence {} / {}: {:?}",
                        f.name,
                        c.name,
                        evidence.iter().find(|s| leaks(s, &secret))
                    ));
                }
            }
        }
        rows.push((f.name, row));
    }
    println!(
        "{:<28} {:>7} {:>11} {:>11} {:>8} {:>14}",
        "format", "planted", "text_caught", "text_leaked", "key_lost", "evidence_leaks"
    );
    let mut total = Row::default();
    for (name, r) in &rows {
        println!(
            "{name:<28} {:>7} {:>11} {:>11} {:>8} {:>14}",
            r.planted, r.text_caught, r.text_leaked, r.key_lost, r.evidence_leaked
        );
        total.planted += r.planted;
        total.text_caught += r.text_caught;
        total.text_leaked += r.text_leaked;
        total.key_lost += r.key_lost;
        total.evidence_leaked += r.evidence_leaked;
    }
    println!(
        "{:<28} {:>7} {:>11} {:>11} {:>8} {:>14}",
        "TOTAL",
        total.planted,
        total.text_caught,
        total.text_leaked,
        total.key_lost,
        total.evidence_leaked
    );
    println!(
        "formats: {}; gateway runs: {}",
        rows.len(),
        total.planted * 2
    );
    assert!(rows.len() >= 50);
    assert!(rows.iter().all(|(_, r)| r.planted >= 10));
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// What agents print that is not a secret.
fn benign_corpus(rng: &mut Rng) -> (Vec<String>, Vec<(IdentifierKind, String)>) {
    let mut lines: Vec<String> = [
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
        "sort_key: created_at",
        "public_key: ssh-ed25519 AAAAC3NzaC1lZDI1NTE5 bob@laptop",
        "idempotency_key: 2f1e7c3a",
        "cache_key: build-linux-x64",
        "test_token_refresh_expires_after_ttl ... ok",
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
        "Compiling serde_json v1.0.140",
        "Finished `test` profile [unoptimized + debuginfo] target(s) in 12.31s",
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
        "model: claude-sonnet-4-5-20250929",
        "resolved_model=gpt-4o-2024-08-06",
        "git clone https://github.com/acme/widgets.git",
        "pip install 'stapel-taskspecs>=0.1,<0.2'",
        "docker pull ghcr.io/acme/app:1.4.2",
        "\"integrity\": \"sha512-Zl8vKF9QrQnE4bLHi5ZPGhT9yHNzS1m6XvB4xYq7ZcM0ZbP3b3m6p5a8Q7Cw4rRk1tL2hYcE9j0Wf8uXbQ9Qw==\"",
        "fixture: tests/fixtures/aGVsbG8gd29ybGQ.json",
        "fixtures/base64/SGVsbG9Xb3JsZA==.bin",
        "snapshot__parses_AbCdEf123_input.snap",
        "MyVeryLongRepositoryName2024 builds on XMLHttpRequestFactoryProvider2Impl",
        "Took 1.234s, 98.2% cache hits, 12 MiB RSS",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    let mut idents = Vec::new();
    let paths = [
        "src/lib.rs",
        "core/src/contract/safety.rs",
        "tests/fixtures/input.json",
        "docs/adr/0002-credentials.md",
        "bindings-python/python/stapel_runner_protocol/__init__.py",
    ];
    let models = [
        "claude-sonnet-4-5-20250929",
        "claude-opus-4-1",
        "gpt-4o-2024-08-06",
        "gemini-2.5-pro",
        "llama-3.1-70b-instruct",
    ];
    let words = [
        "Request", "Handler", "Factory", "Token", "Session", "Parser", "Provider", "Password",
        "Reset", "Secret", "Key", "Auth", "Manager", "Builder", "Config", "Async", "Http", "Json",
        "Stream", "Cache",
    ];
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
        let line = match i % 20 {
            0 => format!("commit {sha}\nAuthor: Bob <bob@example.com>\nDate:   {ts}"),
            1 => format!("[{short}] fix: handle expired tokens in {path}"),
            2 => format!("image: ghcr.io/acme/app@{digest}"),
            3 => format!("request_id={uuid} status=200 duration_ms={n}"),
            4 => format!("{ts} INFO session {uuid} started model={model}"),
            5 => format!("modified:   {path}"),
            6 => format!("let {snake} = {camel}::new(config);"),
            7 => format!("\"session_id\": \"{uuid}\", \"commit\": \"{sha}\""),
            8 => format!("test {snake}_returns_error_for_invalid_token ... ok"),
            9 => format!("container {} exited with code 0", rng.from(HEX, 64)),
            10 => format!("The model {model} used {n} tokens for the password reset flow."),
            11 => format!("cache hit: {digest} ({n} bytes)"),
            12 => format!("refs/heads/main -> {sha}"),
            13 => format!("token_count: {n}\nmax_tokens: 4096"),
            14 => format!("auth_type: bearer  # tokens are read from {path}"),
            15 => format!(
                "Downloaded {}-{}.{}.{}.tar.gz",
                snake.replace('_', "-"),
                rng.below(3),
                rng.below(30),
                rng.below(10)
            ),
            16 => format!("fixture_{}.json", b64_encode(camel.as_bytes(), true)),
            17 => format!(
                "    at {camel}.handle ({path}:{}:{})",
                rng.below(400),
                rng.below(80)
            ),
            18 => format!("  {snake}_key: {snake}_{n}"),
            _ => format!(
                "Merge pull request #{n} from acme/{}",
                snake.replace('_', "-")
            ),
        };
        lines.push(line);
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
    (lines, idents)
}

#[test]
fn benign_corpus_is_rarely_redacted() {
    let mut rng = Rng(0xBE71_6417);
    let (lines, idents) = benign_corpus(&mut rng);
    let mut text_fp = Vec::new();
    for l in &lines {
        let (out, n) = safety::redact_secrets(l);
        if n > 0 {
            text_fp.push(format!("{l:?} -> {out:?}"));
        }
    }
    let mut ident_fp = Vec::new();
    for (kind, s) in &idents {
        let (out, changed) = safe_identifier_as(*kind, s);
        if changed {
            ident_fp.push(format!("{} {s:?} -> {out:?}", kind.as_str()));
        }
    }
    let text_rate = text_fp.len() as f64 / lines.len() as f64;
    let ident_rate = ident_fp.len() as f64 / idents.len() as f64;
    println!(
        "benign text lines: {}, redacted: {} ({:.2} %)",
        lines.len(),
        text_fp.len(),
        text_rate * 100.0
    );
    println!(
        "benign identifiers: {}, redacted: {} ({:.2} %)",
        idents.len(),
        ident_fp.len(),
        ident_rate * 100.0
    );
    for f in text_fp.iter().chain(&ident_fp) {
        println!("  false positive: {f}");
    }
    assert!(text_rate < 0.01, "text false positives: {text_fp:#?}");
    assert!(
        ident_rate < 0.01,
        "identifier false positives: {ident_fp:#?}"
    );
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
        ("no secrets here", "no secrets here"),
    ] {
        assert_eq!(safety::redact_secrets(input).0, want, "{input}");
    }
}

/// Inputs that once made the scan quadratic (a key in every value, many keys on one
/// line, unterminated quotes): the answers stay right.
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
}
