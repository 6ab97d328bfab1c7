//! Independent oracles for the host policy: the token rules and the eviction order
//! against small reference models written from the documented rules, constant-time
//! equality against `==`, and invariants of `SocketHost` over random input sequences.

// The model spells the rules the way the Python transport did (`lower()`), on purpose.
#![allow(clippy::manual_ignore_case_cmp)]

use proptest::prelude::*;
use stapel_runner_protocol::host::auth::{bearer_from_headers, constant_time_eq, TokenTable};
use stapel_runner_protocol::host::{
    HostConfig, HubHost, HubInput, HubOutput, InboundFrame, Refusal, RunnerActivity, SocketHost,
    SocketInput, SocketOutput,
};

/// The documented rules, written as Python's `transport_ws` spelled them before the
/// core took them over (`get_all`, `partition(" ")`, `lower()`, `strip()`).
fn model_token(headers: &[(String, String)]) -> Result<String, &'static str> {
    let values: Vec<&String> = headers
        .iter()
        .filter(|(n, _)| n.to_ascii_lowercase() == "authorization")
        .map(|(_, v)| v)
        .collect();
    if values.len() > 1 {
        return Err("duplicate_authorization");
    }
    let value = match values.first() {
        Some(v) if !v.is_empty() => v.as_str(),
        _ => return Err("missing_authorization"),
    };
    let (scheme, token) = match value.find(' ') {
        Some(i) => (&value[..i], &value[i + 1..]),
        None => (value, ""),
    };
    if scheme.to_ascii_lowercase() != "bearer" {
        return Err("not_bearer");
    }
    let token = token.trim_matches(|c: char| c.is_whitespace());
    if token.is_empty() {
        return Err("empty_token");
    }
    Ok(token.to_owned())
}

fn header() -> impl Strategy<Value = (String, String)> {
    let name = prop_oneof![
        Just("Authorization"),
        Just("authorization"),
        Just("AUTHORIZATION"),
        Just("X-Authorization"),
        Just("Host"),
    ];
    let scheme = prop_oneof![
        Just(""),
        Just("Bearer"),
        Just("bearer"),
        Just("bEaReR"),
        Just("Basic"),
        Just("Bearerx"),
        Just(" Bearer"),
    ];
    let sep = prop_oneof![Just(""), Just(" "), Just("  "), Just("\t")];
    let token = prop_oneof![
        Just(String::new()),
        Just(" ".to_owned()),
        Just("tok".to_owned()),
        Just("tok ".to_owned()),
        Just(" a b ".to_owned()),
        Just("t\u{a0}".to_owned()),
        "[a-z]{1,4}",
    ];
    (name, scheme, sep, token).prop_map(|(n, s, sep, t)| (n.to_owned(), format!("{s}{sep}{t}")))
}

proptest! {
    #[test]
    fn token_rules_match_the_model(headers in prop::collection::vec(header(), 0..4)) {
        let got = bearer_from_headers(&headers).map(str::to_owned).map_err(Refusal::code);
        prop_assert_eq!(got, model_token(&headers));
    }

    #[test]
    fn hub_refusals_and_acceptance_follow_the_model(
        headers in prop::collection::vec(header(), 0..4),
        upgraded in any::<bool>(),
    ) {
        let config = HostConfig::from_value(&serde_json::json!({"tokens": {"tok": "R"}})).unwrap();
        let mut hub = HubHost::new(&config);
        let input = if upgraded {
            HubInput::Upgraded { conn: 7, headers: headers.clone() }
        } else {
            HubInput::Request { conn: 7, headers: headers.clone() }
        };
        hub.handle_input(0, input).unwrap();
        let out = hub.poll_output();
        prop_assert!(hub.poll_output().is_none());
        let want = match model_token(&headers) {
            Ok(t) if t == "tok" => Ok(()),
            Ok(_) => Err("unknown_token"),
            Err(code) => Err(code),
        };
        match (out, want, upgraded) {
            (Some(HubOutput::Accept { conn: 7, runner_id }), Ok(()), false) => prop_assert_eq!(runner_id, "R"),
            (Some(HubOutput::Attach { conn: 7, runner_id, announce: true }), Ok(()), true) => prop_assert_eq!(runner_id, "R"),
            (Some(HubOutput::Reject { conn: 7, status: 401, refusal, .. }), Err(code), false) => prop_assert_eq!(refusal.code(), code),
            (Some(HubOutput::Refuse { conn: 7, code: 1008, refusal, .. }), Err(code), true) => prop_assert_eq!(refusal.code(), code),
            (out, want, up) => prop_assert!(false, "got {:?}, want {:?} (upgraded {})", out, want, up),
        }
    }

    #[test]
    fn constant_time_eq_is_eq(a in prop::collection::vec(any::<u8>(), 0..8), b in prop::collection::vec(any::<u8>(), 0..8)) {
        prop_assert_eq!(constant_time_eq(&a, &b), a == b);
        prop_assert!(constant_time_eq(&a, &a));
    }

    #[test]
    fn token_table_finds_exactly_the_known_tokens(
        tokens in prop::collection::btree_map("[a-c]{0,3}", "[A-C]{1,2}", 0..6),
        probe in "[a-c]{0,3}",
    ) {
        let table = TokenTable::new(tokens.clone());
        prop_assert_eq!(table.lookup(&probe), tokens.get(&probe).map(String::as_str));
    }

    /// Eviction against a plain model: a Vec in creation order; on each addition, drop
    /// registered runners the host no longer lists, then the oldest idle ones beyond
    /// the bound other than the new one. The host may drop a handle by itself (no
    /// input) and re-create it later while the registry still holds the runner, so the
    /// runner just added can be among the oldest.
    #[test]
    fn eviction_follows_the_model(
        max_idle in 0usize..4,
        ops in prop::collection::vec((0u8..8, prop::collection::vec(any::<bool>(), 8), any::<bool>()), 1..30),
    ) {
        let config = HostConfig::from_value(&serde_json::json!({"tokens": {}, "max_idle_runners": max_idle})).unwrap();
        let mut hub = HubHost::new(&config);
        let mut model: Vec<String> = Vec::new();
        let mut host: Vec<String> = Vec::new(); // the host's handles
        for (id, busy, drop) in ops {
            let id = format!("r{id}");
            if host.contains(&id) {
                if drop {
                    // the host drops the handle without telling the hub
                    host.retain(|r| *r != id);
                }
                continue; // the host adds a handle only once
            }
            host.push(id.clone());
            let idle_of = |r: &str| !busy[r[1..].parse::<usize>().unwrap()];
            let activity: Vec<RunnerActivity> = host
                .iter()
                .map(|r| RunnerActivity {
                    runner_id: r.clone(),
                    queued_events: u64::from(!idle_of(r)),
                    ..RunnerActivity::default()
                })
                .collect();
            hub.handle_input(0, HubInput::RunnerAdded { runner_id: id.clone(), activity }).unwrap();
            let mut evicted = Vec::new();
            while let Some(o) = hub.poll_output() {
                match o {
                    HubOutput::Evict { runner_id } => evicted.push(runner_id),
                    other => prop_assert!(false, "unexpected {:?}", other),
                }
            }
            // the model
            model.retain(|r| host.contains(r));
            if !model.contains(&id) {
                model.push(id.clone());
            }
            let idle: Vec<String> = model.iter().filter(|r| idle_of(r)).cloned().collect();
            let excess = idle.len().saturating_sub(max_idle);
            let want: Vec<String> = idle.into_iter().filter(|r| *r != id).take(excess).collect();
            model.retain(|r| !want.contains(r));
            prop_assert_eq!(&evicted, &want);
            host.retain(|r| !evicted.contains(r));
            prop_assert_eq!(hub.runners().collect::<Vec<_>>(), model.iter().map(String::as_str).collect::<Vec<_>>());
            prop_assert!(!evicted.contains(&id));
            // the bound holds after every addition (the new runner may be the one over it)
            let idle_left = model.iter().filter(|r| idle_of(r)).count();
            prop_assert!(idle_left <= max_idle.max(usize::from(idle_of(&id))));
        }
    }

    /// Over any input sequence: `Attach` at most once and first; `Detach` at most once,
    /// only after `Attach`, before any `Close`/`Abort`; nothing is delivered or sent
    /// after `Detach`; nothing at all after `Abort`; a `Close` deadline is
    /// `now + close_timeout_ms`.
    #[test]
    fn socket_invariants(inputs in prop::collection::vec((0u8..10, 0u64..5000), 0..40)) {
        let mut s = SocketHost::new(&HostConfig::default());
        let (mut attached, mut detached, mut ended, mut aborted) = (false, false, false, false);
        let mut now = 0u64;
        for (kind, dt) in inputs {
            now += dt;
            let input = match kind {
                0 => SocketInput::Opened,
                1 => SocketInput::Frame(InboundFrame::Text("t".into())),
                2 => SocketInput::Frame(InboundFrame::Binary(vec![0xff])),
                3 => SocketInput::Transmit("f".into()),
                4 => SocketInput::SessionClose("peer_timeout".into()),
                5 => SocketInput::SessionClose("hello_required".into()),
                6 => SocketInput::Close { code: 1000, reason: String::new() },
                7 => SocketInput::Failed,
                8 => SocketInput::SocketClosed,
                _ => SocketInput::Timeout,
            };
            let _ = s.handle_input(now, input);
            while let Some(o) = s.poll_output() {
                prop_assert!(!aborted, "output {:?} after abort", o);
                match o {
                    SocketOutput::Attach => { prop_assert!(!attached && !ended); attached = true; }
                    SocketOutput::Deliver(_) | SocketOutput::PeerError { .. } | SocketOutput::Send(_) => {
                        prop_assert!(attached && !detached && !ended);
                    }
                    SocketOutput::Detach => { prop_assert!(attached && !detached && !ended); detached = true; }
                    SocketOutput::Close { deadline_ms, .. } => {
                        prop_assert!(!ended);
                        prop_assert_eq!(deadline_ms, now + 2000);
                        ended = true;
                    }
                    SocketOutput::Abort => { aborted = true; ended = true; }
                    other => prop_assert!(false, "unknown output {:?}", other),
                }
            }
            prop_assert_eq!(s.is_open(), attached && !detached);
            if attached && ended { prop_assert!(detached); }
        }
    }
}

/// A value for one host config key: what the model reads it as.
#[derive(Debug, Clone)]
enum CfgValue {
    Int(i64),
    Float,
    Text,
    Null,
    Table(Vec<(String, String)>),
    BadTable,
}

impl CfgValue {
    fn json(&self) -> serde_json::Value {
        match self {
            CfgValue::Int(n) => serde_json::json!(n),
            CfgValue::Float => serde_json::json!(1.5),
            CfgValue::Text => serde_json::json!("5"),
            CfgValue::Null => serde_json::Value::Null,
            CfgValue::Table(pairs) => serde_json::Value::Object(
                pairs
                    .iter()
                    .map(|(t, r)| (t.clone(), serde_json::json!(r)))
                    .collect(),
            ),
            CfgValue::BadTable => serde_json::json!({"secret": 1}),
        }
    }
}

fn cfg_value() -> impl Strategy<Value = CfgValue> {
    prop_oneof![
        (-2i64..4).prop_map(CfgValue::Int),
        Just(CfgValue::Float),
        Just(CfgValue::Text),
        Just(CfgValue::Null),
        prop::collection::vec(("[a-c]{1,2}", "[A-C]"), 0..3).prop_map(CfgValue::Table),
        Just(CfgValue::BadTable),
    ]
}

/// The one config policy, written from conformance/README.md for the host keys: the
/// first unknown key (object order) is refused; else every bad value is a candidate
/// refusal (the policy does not order them); else the config with the given values over
/// the defaults, `tokens` described by its entry count.
fn model_config(
    entries: &[(String, CfgValue)],
) -> Result<serde_json::Value, Vec<(&'static str, String)>> {
    const KEYS: [&str; 6] = [
        "close_timeout_ms",
        "max_idle_runners",
        "max_pending_connections",
        "max_queued_events",
        "max_backlog_bytes",
        "tokens",
    ];
    if let Some((k, _)) = entries.iter().find(|(k, _)| !KEYS.contains(&k.as_str())) {
        return Err(vec![("unknown_key", k.clone())]);
    }
    let mut out = serde_json::json!({
        "close_timeout_ms": 2000, "max_idle_runners": 1024,
        "max_pending_connections": 1024, "max_queued_events": 1024,
        "max_backlog_bytes": 1_048_576, "tokens": null,
    });
    let mut bad = Vec::new();
    for (k, v) in entries {
        let min = if k.starts_with("max_p") || k.starts_with("max_q") || k.starts_with("max_b") {
            1
        } else {
            0
        };
        match (k.as_str(), v) {
            ("tokens", CfgValue::Null) => out["tokens"] = serde_json::Value::Null,
            ("tokens", CfgValue::Table(pairs)) => {
                let distinct: std::collections::BTreeSet<&String> =
                    pairs.iter().map(|(t, _)| t).collect();
                out["tokens"] = serde_json::json!(distinct.len());
            }
            ("tokens", _) => bad.push(("wrong_type", k.clone())),
            (_, CfgValue::Int(n)) if *n >= min => out[k.as_str()] = serde_json::json!(n),
            (_, CfgValue::Int(_)) => bad.push(("out_of_range", k.clone())),
            _ => bad.push(("wrong_type", k.clone())),
        }
    }
    if bad.is_empty() {
        Ok(out)
    } else {
        Err(bad)
    }
}

proptest! {
    #[test]
    fn host_config_follows_the_one_config_policy(
        entries in prop::collection::btree_map(
            prop_oneof![
                Just("close_timeout_ms".to_owned()),
                Just("max_idle_runners".to_owned()),
                Just("max_pending_connections".to_owned()),
                Just("max_queued_events".to_owned()),
                Just("max_backlog_bytes".to_owned()),
                Just("tokens".to_owned()),
                Just("close_timeout".to_owned()),
                Just("machine".to_owned()),
            ],
            cfg_value(),
            0..5,
        ),
    ) {
        let entries: Vec<(String, CfgValue)> = entries.into_iter().collect();
        let object: serde_json::Map<String, serde_json::Value> =
            entries.iter().map(|(k, v)| (k.clone(), v.json())).collect();
        let got = HostConfig::from_value(&serde_json::Value::Object(object));
        match (got, model_config(&entries)) {
            (Ok(c), Ok(want)) => prop_assert_eq!(c.to_value(), want),
            (Err(e), Err(candidates)) => prop_assert!(
                candidates.contains(&(e.code(), e.key().to_owned())),
                "got {} {:?}, want one of {:?}", e.code(), e.key(), candidates
            ),
            (got, want) => prop_assert!(false, "got {:?}, want {:?}", got.map(|c| c.to_value()), want),
        }
    }
}
