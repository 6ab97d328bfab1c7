//! A hub session rebuilt from its rows equals the live one: the same rows, and after a
//! reconnect the same outputs for the same runner frames (pings' nonces aside, which
//! count per session object).

use proptest::prelude::*;
use stapel_runner_protocol::session::{HubSession, Input, Machine, Output, SessionConfig};
use stapel_runner_protocol::store::{RowTracker, RowWrite, RunnerRows};
use stapel_runner_protocol::wire::{self, Message, TaskCancel};

#[derive(Debug, Clone)]
enum Op {
    /// The hub sends a command for task k.
    Cancel(u8),
    /// The runner sends progress seq `seq` of (task k, attempt a).
    Progress(u8, u8, u8),
    /// The runner acknowledges task k's commands through seq s.
    Ack(u8, u8),
    /// The host committed everything delivered.
    ConfirmAll,
    /// The application forgets task k if it is fully acknowledged.
    Forget(u8),
    /// A reconnect with a plain hello.
    Reconnect,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0u8..3).prop_map(Op::Cancel),
        6 => (0u8..3, 1u8..3, 1u8..6).prop_map(|(k, a, s)| Op::Progress(k, a, s)),
        2 => (0u8..3, 0u8..4).prop_map(|(k, s)| Op::Ack(k, s)),
        2 => Just(Op::ConfirmAll),
        1 => (0u8..3).prop_map(Op::Forget),
        1 => Just(Op::Reconnect),
    ]
}

fn task(k: u8) -> String {
    format!("T-{k}")
}

fn progress(k: u8, a: u8, s: u8) -> String {
    format!(
        r#"{{"schema_version":1,"type":"task.progress","task_id":"{}","seq":{s},"kind":"state","attempt":{a},"payload":{{"n":{s}}}}}"#,
        task(k)
    )
}

const HELLO: &str = r#"{"schema_version":1,"type":"hello","protocol_version":1,"project_id":"p","runner_version":"1"}"#;

fn hello_with(resume: &[(u8, u8)]) -> String {
    let entries: Vec<String> = resume
        .iter()
        .map(|(k, s)| format!(r#""{}":{s}"#, task(*k)))
        .collect();
    format!(
        r#"{{"schema_version":1,"type":"hello","protocol_version":1,"project_id":"p","runner_version":"1","resume":{{{}}}}}"#,
        entries.join(",")
    )
}

/// Drain the outputs; frames with their ping/pong nonce blanked, and the replayed
/// commands grouped by task (streams are independent: rows keep no order across tasks,
/// only each stream's own).
fn drain(s: &mut HubSession) -> Vec<String> {
    let mut out = drain_raw(s);
    let mut commands: Vec<(String, String)> = Vec::new();
    out.retain(|line| match line.strip_prefix("transmit ") {
        Some(f) if f.contains(r#""type":"task.cancel""#) => {
            let t = f
                .split(r#""task_id":""#)
                .nth(1)
                .unwrap_or("")
                .split('"')
                .next()
                .unwrap_or("");
            commands.push((t.to_owned(), line.clone()));
            false
        }
        _ => true,
    });
    commands.sort_by(|a, b| a.0.cmp(&b.0)); // stable: each task keeps its order
                                            // Everything else in a canonical order (events and notices of several tasks come in
                                            // the state's task order), lists inside pings sorted.
    let timeout = out.pop();
    let mut rest: Vec<String> = out.iter().map(|l| canonical(l)).collect();
    rest.sort();
    rest.extend(commands.into_iter().map(|(_, l)| l));
    rest.extend(timeout);
    rest
}

fn canonical(line: &str) -> String {
    let Some(f) = line.strip_prefix("transmit ") else {
        return line.to_owned();
    };
    let Ok(mut v) = serde_json::from_str::<serde_json::Value>(f) else {
        return line.to_owned();
    };
    for key in ["ack", "replay_from"] {
        if let Some(list) = v.get_mut(key).and_then(|l| l.as_array_mut()) {
            list.sort_by_key(|e| e.to_string());
        }
    }
    format!("transmit {v}")
}

fn drain_raw(s: &mut HubSession) -> Vec<String> {
    let mut out = Vec::new();
    while let Some(o) = s.poll_output() {
        out.push(match o {
            Output::Transmit(f) => match wire::decode(f.as_bytes(), false) {
                Ok(Message::Ping(mut p)) => {
                    p.nonce = None;
                    format!("transmit {}", wire::encode(&Message::Ping(p)))
                }
                _ => format!("transmit {f}"),
            },
            other => format!("{other:?}"),
        });
    }
    out.push(format!("timeout {:?}", s.poll_timeout()));
    out
}

/// Confirm every delivered position (what a host does once its store committed).
fn confirm_all(s: &mut HubSession, now: u64) {
    let streams: Vec<(String, Option<u64>, u64)> = s
        .state()
        .tasks()
        .flat_map(|(t, c)| {
            c.inbound()
                .map(move |(a, tr)| (t.to_owned(), a, tr.watermark()))
        })
        .collect();
    for (t, a, w) in streams {
        if w > 0 {
            s.handle_input(
                now,
                Input::Confirm {
                    task_id: t,
                    attempt: a,
                    seq: w,
                },
            )
            .unwrap();
        }
    }
}

fn config() -> SessionConfig {
    SessionConfig::from_value(&serde_json::json!({"durable_acks": true})).unwrap()
}

fn apply(s: &mut HubSession, now: u64, op: &Op) {
    match op {
        Op::Cancel(k) => {
            let _ = s.send(now, TaskCancel::new(task(*k), "stop").into());
        }
        Op::Progress(k, a, q) => {
            let _ = s.handle_input(now, Input::Frame(progress(*k, *a, *q)));
        }
        Op::Ack(k, q) => {
            let ping = format!(
                r#"{{"schema_version":1,"type":"ping","nonce":99,"ack":[{{"task_id":"{}","seq":{q}}}]}}"#,
                task(*k)
            );
            let _ = s.handle_input(now, Input::Frame(ping));
        }
        Op::ConfirmAll => confirm_all(s, now),
        Op::Forget(k) => {
            let t = task(*k);
            // Safe once the task's commands are acknowledged and its frames applied.
            let rows = s.rows();
            let applied = s.state().tasks().filter(|(n, _)| *n == t).all(|(_, c)| {
                c.inbound().all(|(a, tr)| {
                    rows.inbound.iter().any(|r| {
                        r.task_id == t && Some(r.attempt) == a && r.through == tr.watermark()
                    })
                })
            });
            if applied && s.state().is_fully_acknowledged(&t) {
                s.state_mut().forget_task(&t);
            }
        }
        Op::Reconnect => {
            let _ = s.handle_input(now, Input::Disconnected);
            let _ = s.handle_input(now, Input::Connected);
            let _ = s.handle_input(now, Input::Frame(HELLO.into()));
        }
    }
    let _ = drain(s);
}

/// What the store holds after applying `writes` to `held`.
fn apply_writes(held: &RunnerRows, writes: &[RowWrite], inbound: &RunnerRows) -> RunnerRows {
    let mut rows = held.clone();
    for w in writes {
        match w {
            RowWrite::PutTask(t) => {
                rows.tasks.retain(|r| r.task_id != t.task_id);
                rows.tasks.push(t.clone());
            }
            RowWrite::PutCommand(c) => {
                rows.commands
                    .retain(|r| !(r.task_id == c.task_id && r.seq == c.seq));
                rows.commands.push(c.clone());
            }
            RowWrite::DeleteCommands { task_id, through } => rows
                .commands
                .retain(|r| !(&r.task_id == task_id && r.seq <= *through)),
            RowWrite::DeleteTask { task_id } => {
                rows.tasks.retain(|r| &r.task_id != task_id);
                rows.commands.retain(|r| &r.task_id != task_id);
            }
        }
    }
    // Inbound rows are the apply transactions' (taken from the session here).
    rows.inbound = inbound.inbound.clone();
    rows.sorted()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn a_session_rebuilt_from_its_rows_equals_the_live_one(
        ops in proptest::collection::vec(op(), 0..40),
        resume in proptest::collection::vec((0u8..3, 0u8..4), 0..3),
        later in proptest::collection::vec((0u8..3, 1u8..3, 1u8..7), 0..12),
    ) {
        let mut live = HubSession::new(config());
        live.handle_input(0, Input::Connected).unwrap();
        live.handle_input(0, Input::Frame(HELLO.into())).unwrap();
        let _ = drain(&mut live);
        // The store, kept by the tracker's writes after every step.
        let mut tracker = RowTracker::new(&RunnerRows::default());
        let mut held = RunnerRows::default();
        for (i, o) in ops.iter().enumerate() {
            apply(&mut live, i as u64 + 1, o);
            let writes = tracker.writes(&live);
            tracker.committed();
            held = apply_writes(&held, &writes, &live.rows());
            prop_assert_eq!(&held, &live.rows(), "after {:?}", o);
        }
        let now = 1000;
        confirm_all(&mut live, now);
        let _ = drain(&mut live);
        let rows = live.rows();
        let mut rebuilt = HubSession::from_rows(config(), &rows).unwrap();
        prop_assert_eq!(rebuilt.rows(), rows.clone());

        // The same runner reconnects to both.
        let _ = live.handle_input(now, Input::Disconnected);
        let _ = drain(&mut live);
        // A runner declares at most what it was sent (every sent command is in the rows:
        // they are written before it is sent). A declaration beyond that means the rows
        // are older than the runner's view, where a rebuilt session deliberately treats
        // what it stamps before the hello as provisional (see `HubSession::with_state`).
        let mut resume: Vec<(u8, u8)> = resume
            .into_iter()
            .map(|(k, q)| {
                let sent = rebuilt
                    .state()
                    .outbound_log(&task(k), None)
                    .map_or(0, |l| l.last_seq());
                (k, q.min(u8::try_from(sent).unwrap_or(u8::MAX)))
            })
            .collect();
        resume.sort();
        resume.dedup_by_key(|(k, _)| *k);
        let hello = hello_with(&resume);
        for s in [&mut live, &mut rebuilt] {
            s.handle_input(now, Input::Connected).unwrap();
            s.handle_input(now, Input::Frame(hello.clone())).unwrap();
        }
        prop_assert_eq!(drain(&mut live), drain(&mut rebuilt));
        for (j, (k, a, q)) in later.iter().enumerate() {
            let t = now + 1 + j as u64;
            for s in [&mut live, &mut rebuilt] {
                let _ = s.handle_input(t, Input::Frame(progress(*k, *a, *q)));
            }
            prop_assert_eq!(drain(&mut live), drain(&mut rebuilt), "frame {:?}", (k, a, q));
        }
        prop_assert_eq!(live.rows(), rebuilt.rows());
    }
}
