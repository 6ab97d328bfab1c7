//! Regression tests for three hub bugs a review found: the bearer token in `Debug`
//! output, a pending connection dropped at the bound without its verdict, and one idle
//! runner too few evicted when the runner just added was registered before. Each has a
//! fixed example and, where cheap, a property over random input sequences.

use proptest::prelude::*;
use serde_json::json;
use stapel_runner_protocol::host::{
    BearerToken, HostConfig, HubHost, HubInput, HubOutput, Refusal, RunnerActivity,
};

fn bearer(name: &str, token: &str) -> Vec<(String, String)> {
    vec![
        ("Host".into(), "hub.example".into()),
        (name.into(), format!("Bearer {token}")),
    ]
}

fn drain(hub: &mut HubHost) -> Vec<HubOutput> {
    std::iter::from_fn(|| hub.poll_output()).collect()
}

fn config(v: serde_json::Value) -> HostConfig {
    HostConfig::from_value(&v).unwrap()
}

// ---- 1. no Debug output shows the token ----

#[test]
fn hub_input_debug_redacts_authorization_in_any_case() {
    for name in [
        "Authorization",
        "authorization",
        "AUTHORIZATION",
        "aUtHoRiZaTiOn",
    ] {
        for input in [
            HubInput::Request {
                conn: 1,
                headers: bearer(name, "s3cr3t-token"),
            },
            HubInput::Upgraded {
                conn: 1,
                headers: bearer(name, "s3cr3t-token"),
            },
        ] {
            let dbg = format!("{input:?} {input:#?}");
            assert!(!dbg.contains("s3cr3t"), "{name}: {dbg}");
            assert!(dbg.contains("<redacted>"), "{name}: {dbg}");
            // Other headers stay readable.
            assert!(dbg.contains("hub.example"), "{name}: {dbg}");
        }
    }
    // A header that is not `Authorization` is not redacted.
    let other = HubInput::Request {
        conn: 2,
        headers: vec![("X-Authorization".into(), "visible".into())],
    };
    assert!(format!("{other:?}").contains("visible"));
}

#[test]
fn hub_output_and_machine_debug_redact_the_token() {
    let mut hub = HubHost::new(&HostConfig::default()); // no table: Authenticate output
    hub.handle_input(
        0,
        HubInput::Request {
            conn: 1,
            headers: bearer("Authorization", "s3cr3t-token"),
        },
    )
    .unwrap();
    // The machine holds the output with the token in its queue.
    let dbg = format!("{hub:?} {hub:#?}");
    assert!(!dbg.contains("s3cr3t"), "HubHost: {dbg}");
    let out = hub.poll_output().unwrap();
    let dbg = format!("{out:?} {out:#?}");
    assert!(!dbg.contains("s3cr3t"), "HubOutput: {dbg}");
    assert!(dbg.contains("<redacted>"), "HubOutput: {dbg}");
    // The authenticator still gets the token itself.
    match out {
        HubOutput::Authenticate { conn: 1, token } => {
            assert_eq!(token.as_str(), "s3cr3t-token");
            assert_eq!(token, BearerToken::new("s3cr3t-token"));
            assert_ne!(token, BearerToken::new("s3cr3t-tokeN"));
            assert_eq!(token.into_string(), "s3cr3t-token");
        }
        other => panic!("unexpected {other:?}"),
    }
    // A table config's machine does not print its tokens either.
    let hub = HubHost::new(&config(json!({"tokens": {"s3cr3t-token": "R"}})));
    assert!(!format!("{hub:?}").contains("s3cr3t"));
}

#[derive(Debug, Clone)]
enum Op {
    Request(u64),
    Upgraded(u64),
    Answer(u64, bool),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0u64..5).prop_map(Op::Request),
        (0u64..5).prop_map(Op::Upgraded),
        (0u64..5, any::<bool>()).prop_map(|(c, ok)| Op::Answer(c, ok)),
    ]
}

fn token_of(conn: u64) -> String {
    format!("SeCrEt{conn}x")
}

fn headers_of(conn: u64) -> Vec<(String, String)> {
    bearer("authorization", &token_of(conn))
}

fn to_input(op: &Op) -> HubInput {
    match *op {
        Op::Request(conn) => HubInput::Request {
            conn,
            headers: headers_of(conn),
        },
        Op::Upgraded(conn) => HubInput::Upgraded {
            conn,
            headers: headers_of(conn),
        },
        Op::Answer(conn, ok) => HubInput::Authenticated {
            conn,
            runner_id: ok.then(|| format!("R{conn}")),
        },
    }
}

/// The connection a verdict output is for (`None` for `Authenticate` and `Evict`).
fn verdict_conn(o: &HubOutput) -> Option<u64> {
    match o {
        HubOutput::Accept { conn, .. }
        | HubOutput::Reject { conn, .. }
        | HubOutput::Refuse { conn, .. }
        | HubOutput::Attach { conn, .. } => Some(*conn),
        _ => None,
    }
}

proptest! {
    /// Over any input sequence (authenticator and table machines): no `Debug` of an
    /// input, an output or the machine contains a token.
    #[test]
    fn no_debug_shows_a_token(ops in prop::collection::vec(op(), 0..20), table in any::<bool>()) {
        let cfg = if table {
            config(json!({"tokens": {token_of(1): "R1", token_of(2): "R2"}, "max_pending_connections": 2}))
        } else {
            config(json!({"max_pending_connections": 2}))
        };
        let mut hub = HubHost::new(&cfg);
        for op in &ops {
            let input = to_input(op);
            let dbg = format!("{input:?}");
            prop_assert!(!dbg.contains("SeCrEt"), "input {}", dbg);
            let _ = hub.handle_input(0, input);
            let dbg = format!("{hub:?}");
            prop_assert!(!dbg.contains("SeCrEt"), "machine {}", dbg);
            for o in drain(&mut hub) {
                let dbg = format!("{o:?}");
                prop_assert!(!dbg.contains("SeCrEt"), "output {}", dbg);
            }
        }
    }
}

// ---- 2. a pending connection dropped at the bound gets its verdict ----

#[test]
fn dropped_upgraded_socket_awaiting_the_authenticator_is_refused() {
    let mut hub = HubHost::new(&config(json!({"max_pending_connections": 1})));
    // Socket 1 upgraded without the request check, awaiting the authenticator.
    hub.handle_input(
        0,
        HubInput::Upgraded {
            conn: 1,
            headers: bearer("Authorization", "a"),
        },
    )
    .unwrap();
    assert!(matches!(
        drain(&mut hub).as_slice(),
        [HubOutput::Authenticate { conn: 1, .. }]
    ));
    // Another connection arrives before the authenticator answers: socket 1 is closed
    // with 1008 at once, before the new connection's question.
    hub.handle_input(
        0,
        HubInput::Request {
            conn: 2,
            headers: bearer("Authorization", "b"),
        },
    )
    .unwrap();
    let out = drain(&mut hub);
    assert!(
        matches!(
            out.as_slice(),
            [
                HubOutput::Refuse {
                    conn: 1,
                    code: 1008,
                    refusal: Refusal::PendingEvicted,
                    ..
                },
                HubOutput::Authenticate { conn: 2, .. }
            ]
        ),
        "{out:?}"
    );
    assert_eq!(Refusal::PendingEvicted.code(), "pending_evicted");
    // The authenticator's late answer for socket 1 is refused and changes nothing.
    let r = hub.handle_input(
        0,
        HubInput::Authenticated {
            conn: 1,
            runner_id: Some("R".into()),
        },
    );
    assert_eq!(r.unwrap_err().code(), "unknown_connection");
    assert!(drain(&mut hub).is_empty());
    assert_eq!(hub.runners().count(), 0);
    assert_eq!(hub.pending_connections(), 1);
}

#[test]
fn dropped_request_awaiting_the_authenticator_is_rejected() {
    let mut hub = HubHost::new(&config(json!({"max_pending_connections": 1})));
    hub.handle_input(
        0,
        HubInput::Request {
            conn: 1,
            headers: bearer("Authorization", "a"),
        },
    )
    .unwrap();
    drain(&mut hub);
    hub.handle_input(
        0,
        HubInput::Upgraded {
            conn: 2,
            headers: bearer("Authorization", "b"),
        },
    )
    .unwrap();
    let out = drain(&mut hub);
    assert!(
        matches!(
            out.as_slice(),
            [
                HubOutput::Reject {
                    conn: 1,
                    status: 401,
                    refusal: Refusal::PendingEvicted,
                    ..
                },
                HubOutput::Authenticate { conn: 2, .. }
            ]
        ),
        "{out:?}"
    );
    // An accepted connection dropped for a newer one gets no output (it has its
    // verdict); its socket is checked again when it opens.
    hub.handle_input(
        0,
        HubInput::Authenticated {
            conn: 2,
            runner_id: Some("B".into()),
        },
    )
    .unwrap();
    assert!(matches!(
        drain(&mut hub).as_slice(),
        [HubOutput::Attach { conn: 2, .. }]
    ));
    let cfg = config(json!({"max_pending_connections": 1, "tokens": {"t": "T"}}));
    let mut hub = HubHost::new(&cfg);
    for conn in [1, 2] {
        hub.handle_input(
            0,
            HubInput::Request {
                conn,
                headers: bearer("Authorization", "t"),
            },
        )
        .unwrap();
        assert!(matches!(
            drain(&mut hub).as_slice(),
            [HubOutput::Accept { conn: c, .. }] if *c == conn
        ));
    }
}

proptest! {
    /// No obligation is lost: every connection the machine asks the authenticator about
    /// gets exactly one verdict — at the answer, or at once when a newer connection
    /// takes its place — and never more connections await an answer than the bound.
    /// An answer for a connection that awaits none is `unknown_connection` and does
    /// nothing.
    #[test]
    fn every_authenticate_gets_exactly_one_verdict(
        max_pending in 1usize..4,
        ops in prop::collection::vec(op(), 0..40),
    ) {
        let mut hub = HubHost::new(&config(json!({"max_pending_connections": max_pending})));
        // conn -> upgraded, for connections with an outstanding Authenticate
        let mut awaiting: std::collections::BTreeMap<u64, bool> = Default::default();
        for op in &ops {
            let result = hub.handle_input(0, to_input(op));
            let out = drain(&mut hub);
            if let Op::Answer(conn, ok) = *op {
                match awaiting.remove(&conn) {
                    Some(upgraded) => {
                        prop_assert!(result.is_ok());
                        let good = match (&out.as_slice(), upgraded, ok) {
                            (&[HubOutput::Accept { conn: c, .. }], false, true)
                            | (&[HubOutput::Attach { conn: c, .. }], true, true)
                            | (&[HubOutput::Reject { conn: c, refusal: Refusal::UnknownToken, .. }], false, false)
                            | (&[HubOutput::Refuse { conn: c, refusal: Refusal::UnknownToken, .. }], true, false) => *c == conn,
                            _ => false,
                        };
                        prop_assert!(good, "answer for {} (upgraded {}): {:?}", conn, upgraded, out);
                    }
                    None => {
                        prop_assert_eq!(result.map_err(|e| e.code()), Err("unknown_connection"));
                        prop_assert!(out.is_empty(), "{:?}", out);
                    }
                }
                continue;
            }
            let (this, upgraded) = match *op {
                Op::Request(c) => (c, false),
                Op::Upgraded(c) => (c, true),
                Op::Answer(..) => unreachable!(),
            };
            if result.is_err() {
                prop_assert!(out.is_empty());
                continue;
            }
            for o in &out {
                match o {
                    HubOutput::Authenticate { conn, token } => {
                        prop_assert_eq!(*conn, this);
                        prop_assert_eq!(token.as_str(), token_of(this));
                        prop_assert!(awaiting.insert(this, upgraded).is_none());
                    }
                    HubOutput::Evict { .. } => prop_assert!(false, "evict"),
                    o => {
                        let conn = verdict_conn(o).unwrap();
                        if conn == this {
                            continue;
                        }
                        // A verdict for an older connection: it was dropped at the bound
                        // while awaiting the authenticator.
                        let was_upgraded = awaiting.remove(&conn);
                        let good = matches!(
                            (o, was_upgraded),
                            (HubOutput::Reject { status: 401, refusal: Refusal::PendingEvicted, .. }, Some(false))
                                | (HubOutput::Refuse { code: 1008, refusal: Refusal::PendingEvicted, .. }, Some(true))
                        );
                        prop_assert!(good, "verdict {:?} for {} (awaiting {:?})", o, conn, was_upgraded);
                    }
                }
            }
            prop_assert!(awaiting.len() <= max_pending);
            prop_assert!(awaiting.len() <= hub.pending_connections());
        }
        // Answering every outstanding question gives each its verdict.
        for (conn, _) in std::mem::take(&mut awaiting) {
            hub.handle_input(0, HubInput::Authenticated { conn, runner_id: None }).unwrap();
            let out = drain(&mut hub);
            prop_assert_eq!(out.len(), 1);
            prop_assert_eq!(verdict_conn(&out[0]), Some(conn));
        }
    }
}

// ---- 3. idle eviction never counts the new runner among the evicted ----

fn idle(id: &str) -> RunnerActivity {
    RunnerActivity {
        runner_id: id.into(),
        ..RunnerActivity::default()
    }
}

#[test]
fn re_added_runner_registered_first_still_evicts_the_excess() {
    let mut hub = HubHost::new(&config(json!({"max_idle_runners": 1})));
    // n connects first (registered by its Attach), then a is added.
    hub.handle_input(
        0,
        HubInput::Upgraded {
            conn: 1,
            headers: bearer("Authorization", "x"),
        },
    )
    .unwrap();
    hub.handle_input(
        0,
        HubInput::Authenticated {
            conn: 1,
            runner_id: Some("n".into()),
        },
    )
    .unwrap();
    let busy_n = RunnerActivity {
        sockets: 1,
        ..idle("n")
    };
    hub.handle_input(
        0,
        HubInput::RunnerAdded {
            runner_id: "n".into(),
            activity: vec![busy_n.clone()],
        },
    )
    .unwrap();
    hub.handle_input(
        0,
        HubInput::RunnerAdded {
            runner_id: "a".into(),
            activity: vec![busy_n, idle("a")],
        },
    )
    .unwrap();
    drain(&mut hub);
    assert_eq!(hub.runners().collect::<Vec<_>>(), ["n", "a"]);
    // The host re-creates n's handle: n (oldest) and a are idle, one may stay; n is the
    // runner just added, so a goes.
    hub.handle_input(
        0,
        HubInput::RunnerAdded {
            runner_id: "n".into(),
            activity: vec![idle("n"), idle("a")],
        },
    )
    .unwrap();
    assert_eq!(
        drain(&mut hub),
        [HubOutput::Evict {
            runner_id: "a".into()
        }]
    );
    assert_eq!(hub.runners().collect::<Vec<_>>(), ["n"]);
}

#[test]
fn re_added_runner_counts_but_the_excess_comes_from_the_others() {
    // Three idle, one may stay: two go, both of them others (the old code evicted one).
    let mut hub = HubHost::new(&config(json!({"max_idle_runners": 1, "tokens": {}})));
    let busy = |id: &str| RunnerActivity {
        kept_frames: 1,
        ..idle(id)
    };
    for (id, activity) in [
        ("n", vec![busy("n")]),
        ("a", vec![busy("n"), busy("a")]),
        ("b", vec![busy("n"), busy("a"), busy("b")]),
    ] {
        hub.handle_input(
            0,
            HubInput::RunnerAdded {
                runner_id: id.into(),
                activity,
            },
        )
        .unwrap();
        assert!(drain(&mut hub).is_empty());
    }
    hub.handle_input(
        0,
        HubInput::RunnerAdded {
            runner_id: "n".into(),
            activity: vec![idle("n"), idle("a"), idle("b")],
        },
    )
    .unwrap();
    assert_eq!(
        drain(&mut hub),
        [
            HubOutput::Evict {
                runner_id: "a".into()
            },
            HubOutput::Evict {
                runner_id: "b".into()
            }
        ]
    );
    assert_eq!(hub.runners().collect::<Vec<_>>(), ["n"]);
}
