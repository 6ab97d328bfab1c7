//! Restoring arbitrary or corrupted snapshot bytes never panics: it fails with a typed
//! error or yields a state on which every operation is safe. Also the consistency checks
//! of `restore` (types, attempts, bounds, seq space).

use proptest::prelude::*;
use serde_json::{json, Map};
use stapel_runner_protocol::sequencing::{ConnectionState, Role, SequencingConfig};
use stapel_runner_protocol::wire::{self, Message, TaskCancel, TaskProgress};

fn progress(task: &str, attempt: u64, n: u64) -> Message {
    let mut p = Map::new();
    p.insert("n".into(), json!(n));
    let mut m = TaskProgress::new(task, "state", p.into());
    m.attempt = attempt;
    m.into()
}

/// A runner state with kept frames, inbound streams (one with frames ahead), and a
/// tombstone.
fn sample() -> Vec<u8> {
    let mut hub = ConnectionState::new(Role::Hub);
    let mut runner = ConnectionState::new(Role::Runner);
    for t in ["T-1", "T-2", "T-3"] {
        for r in 0..3 {
            let m = hub
                .emit(TaskCancel::new(t, format!("r{r}")).into())
                .unwrap();
            if r != 1 {
                runner.receive(&m).unwrap();
            }
        }
        runner.emit(progress(t, 1, 1)).unwrap();
        runner.emit(progress(t, 2, 2)).unwrap();
    }
    runner.ack("T-1", Some(1), 1);
    runner.forget_task("T-3");
    runner.snapshot()
}

/// Every operation on a restored state, none may panic.
fn exercise(mut s: ConnectionState) {
    let bytes = s.snapshot();
    let again = ConnectionState::restore(&bytes).expect("a snapshot of a restored state restores");
    assert_eq!(again, s);
    let _ = s.resume_map();
    let _ = s.ack_positions();
    let _ = s.replay_from();
    let _ = s.unacked().count();
    let _ = s.memory_footprint();
    let role = s.role();
    let tasks: Vec<String> = s.tasks().map(|(t, _)| t.to_owned()).collect();
    for t in tasks.iter().chain([&"T-1".to_string(), &"T-3".to_string()]) {
        let mut resume = indexmap::IndexMap::new();
        resume.insert(t.clone(), wire::MAX_SAFE_INTEGER);
        let _ = s.replay_for(&resume);
        let _ = s.ack(t, Some(1), wire::MAX_SAFE_INTEGER);
        let _ = s.ack(t, None, u64::MAX);
        let _ = s.skip_to(t, None, u64::MAX);
        let _ = s.skip_to(t, Some(1), u64::MAX);
        for seq in [1, 2, wire::MAX_SAFE_INTEGER] {
            let mut c: Message = TaskCancel::new(t.as_str(), "x").into();
            c.set_seq(seq);
            let mut p = progress(t, 1, 0);
            p.set_seq(seq);
            let _ = s.receive(&c);
            let _ = s.receive(&p);
            let _ = s.classify(&c);
        }
        let _ = s.emit(if role == Role::Hub {
            TaskCancel::new(t.as_str(), "y").into()
        } else {
            progress(t, 1, 9)
        });
        s.forget_task(t);
    }
    let _ = s.snapshot();
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, .. ProptestConfig::default() })]

    /// Random byte flips and splices of a real snapshot.
    #[test]
    fn mutated_snapshots_never_panic(
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..8),
        cut in any::<prop::sample::Index>(),
        truncate in any::<bool>(),
    ) {
        let mut bytes = sample();
        for (i, b) in flips {
            let i = i.index(bytes.len());
            bytes[i] = b;
        }
        if truncate {
            bytes.truncate(cut.index(bytes.len()));
        }
        if let Ok(s) = ConnectionState::restore(&bytes) {
            exercise(s);
        }
    }

    /// Numbers replaced by extreme values: near and above 2^53, near u64::MAX.
    #[test]
    fn extreme_numbers_never_panic(which in any::<prop::sample::Index>(), pick in 0..6usize) {
        let text = String::from_utf8(sample()).unwrap();
        let values = [
            "0".to_string(),
            wire::MAX_SAFE_INTEGER.to_string(),
            (wire::MAX_SAFE_INTEGER + 1).to_string(),
            (u64::MAX - 10).to_string(),
            u64::MAX.to_string(),
            "4294967296".to_string(),
        ];
        // Positions of every run of digits outside strings is hard to find exactly;
        // replace any digit run (inside frames too), which also corrupts frames.
        let runs: Vec<(usize, usize)> = {
            let b = text.as_bytes();
            let mut v = Vec::new();
            let mut i = 0;
            while i < b.len() {
                if b[i].is_ascii_digit() {
                    let start = i;
                    while i < b.len() && b[i].is_ascii_digit() {
                        i += 1;
                    }
                    v.push((start, i));
                } else {
                    i += 1;
                }
            }
            v
        };
        let (a, b) = runs[which.index(runs.len())];
        let mutated = format!("{}{}{}", &text[..a], values[pick], &text[b..]);
        if let Ok(s) = ConnectionState::restore(mutated.as_bytes()) {
            exercise(s);
        }
    }

    /// Arbitrary bytes after the header.
    #[test]
    fn arbitrary_bodies_never_panic(body in proptest::collection::vec(any::<u8>(), 0..256)) {
        let mut bytes = b"stapel-seq-snapshot/1\n".to_vec();
        bytes.extend(body);
        if let Ok(s) = ConnectionState::restore(&bytes) {
            exercise(s);
        }
    }
}

fn snap(role: &str, config: &str, tasks: &str) -> String {
    format!("stapel-seq-snapshot/1\n{{\"role\":\"{role}\",\"config\":{{{config}}},\"tasks\":[{tasks}]}}")
}

#[test]
fn huge_watermarks_and_seqs_are_corrupt() {
    let cases = [
        format!(
            "{{\"task_id\":\"T\",\"outbound\":[],\"inbound\":[{{\"attempt\":null,\"watermark\":{},\"ahead\":[{}]}}]}}",
            u64::MAX - 10,
            u64::MAX
        ),
        format!(
            "{{\"task_id\":\"T\",\"outbound\":[],\"inbound\":[{{\"attempt\":null,\"watermark\":{},\"ahead\":[]}}]}}",
            wire::MAX_SAFE_INTEGER + 1
        ),
        format!(
            "{{\"task_id\":\"T\",\"outbound\":[{{\"attempt\":1,\"next_seq\":{},\"frames\":[]}}],\"inbound\":[]}}",
            wire::MAX_SAFE_INTEGER + 2
        ),
    ];
    for c in cases {
        let err = ConnectionState::restore(snap("runner", "", &c).as_bytes()).unwrap_err();
        assert_eq!(err.code(), "corrupt_snapshot", "{c}");
    }
    // next_seq may be exactly 2^53 (everything up to 2^53 − 1 emitted).
    let ok = format!(
        "{{\"task_id\":\"T\",\"outbound\":[{{\"attempt\":1,\"next_seq\":{},\"frames\":[]}}],\"inbound\":[]}}",
        wire::MAX_SAFE_INTEGER + 1
    );
    let mut s = ConnectionState::restore(snap("runner", "", &ok).as_bytes()).unwrap();
    assert_eq!(
        s.emit(progress("T", 1, 1)).unwrap_err().code(),
        "seq_exhausted"
    );
}

#[test]
fn inconsistent_streams_are_corrupt() {
    let mut r = ConnectionState::new(Role::Runner);
    let p = wire::encode(&r.emit(progress("T", 2, 1)).unwrap());
    let mut h = ConnectionState::new(Role::Hub);
    let c = wire::encode(&h.emit(TaskCancel::new("T", "x").into()).unwrap());
    let q = |f: &str| serde_json::to_string(f).unwrap();
    let bad = [
        // A progress frame in a hub's command stream.
        ("hub", format!("{{\"task_id\":\"T\",\"outbound\":[{{\"attempt\":null,\"next_seq\":2,\"frames\":[[1,{}]]}}],\"inbound\":[]}}", q(&p))),
        // A progress frame of attempt 2 in the stream of attempt 1.
        ("runner", format!("{{\"task_id\":\"T\",\"outbound\":[{{\"attempt\":1,\"next_seq\":2,\"frames\":[[1,{}]]}}],\"inbound\":[]}}", q(&p))),
        // A command frame in a runner's outbound stream.
        ("runner", format!("{{\"task_id\":\"T\",\"outbound\":[{{\"attempt\":1,\"next_seq\":2,\"frames\":[[1,{}]]}}],\"inbound\":[]}}", q(&c))),
        // A hub command stream with an attempt.
        ("hub", "{\"task_id\":\"T\",\"outbound\":[{\"attempt\":3,\"next_seq\":1,\"frames\":[]}],\"inbound\":[]}".to_string()),
        // A runner inbound (command) stream with an attempt.
        ("runner", "{\"task_id\":\"T\",\"outbound\":[],\"inbound\":[{\"attempt\":1,\"watermark\":1,\"ahead\":[]}]}".to_string()),
    ];
    for (role, t) in bad {
        let err = ConnectionState::restore(snap(role, "", &t).as_bytes()).unwrap_err();
        assert_eq!(err.code(), "corrupt_snapshot", "{role} {t}");
    }
    // The good forms restore.
    let good = format!("{{\"task_id\":\"T\",\"outbound\":[{{\"attempt\":2,\"next_seq\":2,\"frames\":[[1,{}]]}}],\"inbound\":[]}}", q(&p));
    ConnectionState::restore(snap("runner", "", &good).as_bytes()).unwrap();
}

#[test]
fn snapshots_beyond_their_bounds_are_corrupt() {
    let mut cfg = SequencingConfig::default();
    cfg.max_streams = 2;
    let mut s = ConnectionState::with_config(Role::Hub, cfg);
    s.emit(TaskCancel::new("A", "x").into()).unwrap();
    s.emit(TaskCancel::new("B", "x").into()).unwrap();
    let text = String::from_utf8(s.snapshot()).unwrap();
    assert!(ConnectionState::restore(text.as_bytes()).is_ok());
    let shrunk = text.replace("\"max_streams\":2", "\"max_streams\":1");
    assert_eq!(
        ConnectionState::restore(shrunk.as_bytes())
            .unwrap_err()
            .code(),
        "corrupt_snapshot"
    );
    let frames = text.replace("\"max_outbox_frames\":4096", "\"max_outbox_frames\":1");
    assert_eq!(
        ConnectionState::restore(frames.as_bytes())
            .unwrap_err()
            .code(),
        "corrupt_snapshot"
    );
    s.forget_task("A");
    s.forget_task("B");
    let text = String::from_utf8(s.snapshot()).unwrap();
    assert!(text.contains("\"forgotten\""));
    let restored = ConnectionState::restore(text.as_bytes()).unwrap();
    assert_eq!(restored, s);
    assert!(restored.is_forgotten("A"));
    let fewer = text.replace("\"max_tombstones\":10000", "\"max_tombstones\":1");
    assert_eq!(
        ConnectionState::restore(fewer.as_bytes())
            .unwrap_err()
            .code(),
        "corrupt_snapshot"
    );
}
