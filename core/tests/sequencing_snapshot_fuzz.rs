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
    runner.ack("T-1", Some(1), 1).unwrap();
    runner.forget_task("T-3");
    runner.snapshot()
}

/// The invariants every state must hold: bounds, counters equal to what is kept, every
/// kept frame decodes to its own stream and seq, and the snapshot round trip is exact.
fn check_invariants(s: &ConnectionState) {
    let c = s.config();
    let (out, inb) = s.stream_counts();
    assert!(
        out <= c.max_streams && inb <= c.max_streams,
        "streams {out}/{inb}"
    );
    assert!(s.forgotten_count() <= c.max_tombstones);
    assert!(s.outbox_frames() <= c.max_outbox_frames);
    let (mut n, mut bytes, mut streams_out, mut streams_in) = (0, 0, 0, 0);
    for (task, channel) in s.tasks() {
        assert!(!s.is_forgotten(task), "{task} is live and forgotten");
        for (attempt, log) in channel.outbound() {
            streams_out += 1;
            assert_eq!(attempt.is_some(), s.role() == Role::Runner);
            assert!(log.next_seq() >= 1 && log.next_seq() <= wire::MAX_SAFE_INTEGER + 1);
            let mut prev = 0;
            for f in log.kept() {
                assert!(f.seq > prev && f.seq < log.next_seq(), "kept seq {}", f.seq);
                prev = f.seq;
                let m = wire::decode(f.frame.as_bytes(), false).expect("kept frames decode");
                assert_eq!((m.task_id(), m.seq()), (Some(task), Some(f.seq)));
                n += 1;
                bytes += f.frame.len();
            }
        }
        for (attempt, t) in channel.inbound() {
            streams_in += 1;
            assert_eq!(attempt.is_some(), s.role() == Role::Hub);
            assert!(t.watermark() <= wire::MAX_SAFE_INTEGER);
            for a in t.ahead() {
                assert!(a > t.watermark() + 1 && a - t.watermark() <= c.inbound_window);
            }
        }
        assert_eq!(
            s.resume_map().get(task).copied(),
            channel.resume_position(),
            "resume_map and resume_position disagree for {task}"
        );
    }
    assert_eq!((streams_out, streams_in), (out, inb));
    assert_eq!((n, bytes), (s.outbox_frames(), s.outbox_bytes()));
    assert_eq!(s.unacked().count(), n);
    let snapshot = s.snapshot();
    let again = ConnectionState::restore(&snapshot).expect("a state's snapshot restores");
    assert_eq!(&again, s);
    assert_eq!(again.snapshot(), snapshot);
}

fn assert_code(what: &str, code: &str, allowed: &[&str]) {
    assert!(
        allowed.contains(&code),
        "{what}: unexpected error code {code}"
    );
}

const RECEIVE_CODES: &[&str] = &[
    "invalid_seq",
    "beyond_window",
    "too_many_streams",
    "wrong_direction",
];
const EMIT_CODES: &[&str] = &[
    "too_many_streams",
    "backpressure",
    "frame_too_large",
    "seq_exhausted",
];
const RESTORE_CODES: &[&str] = &[
    "not_a_snapshot",
    "unsupported_snapshot_version",
    "corrupt_snapshot",
];

/// Every operation on a restored state: none may panic, every error is typed with an
/// expected code, and the invariants hold after each one.
fn exercise(mut s: ConnectionState) {
    check_invariants(&s);
    let role = s.role();
    let tasks: Vec<String> = s.tasks().map(|(t, _)| t.to_owned()).collect();
    for t in tasks.iter().chain([&"T-1".to_string(), &"T-3".to_string()]) {
        let mut resume = indexmap::IndexMap::new();
        resume.insert(t.clone(), wire::MAX_SAFE_INTEGER);
        let replay = s.replay_for(&resume);
        assert!(replay.failed.is_empty(), "restored frames always re-stamp");
        check_invariants(&s);
        s.ack(t, Some(1), wire::MAX_SAFE_INTEGER)
            .expect("restored frames re-stamp");
        assert_eq!(
            s.ack(t, None, u64::MAX),
            Ok(0),
            "an ack above 2^53 - 1 is ignored"
        );
        for attempt in [None, Some(1)] {
            if let Err(e) = s.skip_to(t, attempt, u64::MAX) {
                assert_code("skip_to", e.code(), &["too_many_streams"]);
            }
        }
        check_invariants(&s);
        for seq in [1, 2, wire::MAX_SAFE_INTEGER] {
            let mut c: Message = TaskCancel::new(t.as_str(), "x").into();
            c.set_seq(seq);
            let mut p = progress(t, 1, 0);
            p.set_seq(seq);
            for m in [&c, &p] {
                let classified = s.classify(m);
                let received = s.receive(m);
                match (&classified, &received) {
                    (Ok(a), Ok(b)) => assert_eq!(a, b, "classify and receive agree"),
                    (Err(a), Err(b)) => assert_eq!(a.code(), b.code()),
                    _ => panic!("classify {classified:?} and receive {received:?} disagree"),
                }
                if let Err(e) = received {
                    assert_code("receive", e.code(), RECEIVE_CODES);
                }
            }
        }
        check_invariants(&s);
        let emitted = s.emit(if role == Role::Hub {
            TaskCancel::new(t.as_str(), "y").into()
        } else {
            progress(t, 1, 9)
        });
        if let Err(e) = emitted {
            assert_code("emit", e.code(), EMIT_CODES);
        }
        check_invariants(&s);
        let live = s.tasks().any(|(x, _)| x == t);
        assert_eq!(s.forget_task(t), live);
        assert!(!s.tasks().any(|(x, _)| x == t));
        if live {
            assert_eq!(s.is_forgotten(t), s.config().max_tombstones > 0);
        }
        check_invariants(&s);
    }
}

/// Restore `bytes`: a typed error with a snapshot code, or a state that passes
/// [`exercise`].
fn restore_checked(bytes: &[u8]) {
    match ConnectionState::restore(bytes) {
        Ok(s) => exercise(s),
        Err(e) => assert_code("restore", e.code(), RESTORE_CODES),
    }
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
        restore_checked(&bytes);
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
        restore_checked(mutated.as_bytes());
    }

    /// Arbitrary bytes after the header.
    #[test]
    fn arbitrary_bodies_never_panic(body in proptest::collection::vec(any::<u8>(), 0..256)) {
        let mut bytes = b"stapel-seq-snapshot/1\n".to_vec();
        bytes.extend(body);
        restore_checked(&bytes);
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
