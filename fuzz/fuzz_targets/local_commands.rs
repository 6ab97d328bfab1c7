//! Local-runner command parsing, canonical JSON and the command ledger, against an
//! independent reference.
//!
//! The input is a sequence of operations: structured commands from a small alphabet
//! (a few `commandId`s, `controllerSeq`s around the expected one, every command type,
//! payloads that are equal up to key order and whitespace or differ, fields outside the
//! canonical form such as `deadlineAt` or unknown ones, `controllerEpoch`), raw
//! controller lines, harness exits and controller EOF. Every line is fed to a real
//! [`LocalRun`] whose harness becomes ready at once, and checked against a reference
//! model of the ledger written from seed 002's rules (FACTS.md):
//!
//! * canonical JSON: the core's `canonical_json(ledger_value)` equals an independent
//!   canonicalisation (the typed command's six fields taken from the raw JSON, keys
//!   sorted by a `BTreeMap`, serialised by serde_json);
//! * order schema → duplicate → contiguity → record: a seen `commandId` with the same
//!   canonical text is `duplicate`, with a different one `rejected` (reused); an unseen
//!   id whose `controllerSeq` is not the next one is `rejected` (not contiguous); else it
//!   is recorded and the next seq advances, whatever dispatch says; a finished run
//!   answers every command as expired and records nothing;
//! * eviction oldest first beyond `ledger_max_entries` / `ledger_max_bytes` (id plus
//!   canonical text), so an evicted command retransmitted is a gap, never applied twice;
//! * after every step the ledger's `next_seq`, entry count, bytes and evictions equal
//!   the model's; every command line gets exactly one receipt of the predicted class;
//!   accepted `controllerSeq`s strictly increase (nothing applied twice).
//!
//! The raw lines also go through every local model parser (never a panic; what parses
//! re-parses from its own encoding to the same value) and the script reader.
#![no_main]

use std::collections::{BTreeMap, HashMap, VecDeque};

use libfuzzer_sys::fuzz_target;
use serde_json::{json, Map, Value};
use stapel_runner_protocol::local::{
    canonical_json, CommandEnvelope, HarnessCommand, HarnessMessage, Input, LocalConfig, LocalRun,
    Output, ReceiptStatus, Script, StreamMessage,
};
use stapel_runner_protocol_fuzz::{Bytes, MAX_CHUNK};

const SCHEMA: &str = "paperclip.prp.command.v1";
const DUPLICATE: &str = "equivalent command already applied";
const REUSED: &str = "commandId was reused with different data";
const NOT_CONTIGUOUS: &str = "controllerSeq is not contiguous";
const EXPIRED: &str =
    "This request expired because the local run already finished. Start a new run.";
const TYPES: &[&str] = &[
    "run.prepare",
    "run.attach",
    "session.open",
    "turn.start",
    "turn.steer",
    "turn.interrupt",
    "turn.stop",
    "request.resolve",
    "interaction.receipt",
    "semantic_tool.result",
    "session.snapshot",
    "session.close",
    "session.budget.increase",
    "session.destroy",
    "run.cancel",
    "runner.drain",
    "runner.suspend",
    "runner.shutdown",
    "no.such.type",
];

/// The reference canonical form: the same JSON value with every object's keys taken
/// through a `BTreeMap` (byte order) and inserted in that order (serde_json keeps
/// insertion order here), then serialised compactly by serde_json.
fn canon(v: &Value) -> Value {
    match v {
        Value::Array(a) => Value::Array(a.iter().map(canon).collect()),
        Value::Object(m) => {
            let sorted: BTreeMap<&String, &Value> = m.iter().collect();
            Value::Object(
                sorted
                    .into_iter()
                    .map(|(k, x)| (k.clone(), canon(x)))
                    .collect(),
            )
        }
        other => other.clone(),
    }
}

/// The reference canonical text of a command line's typed command: its `schema`,
/// `commandId`, `controllerSeq`, `type`, `issuedAt` and `payload`, from the raw JSON.
fn reference_canonical(raw: &Map<String, Value>) -> String {
    let mut typed = Map::new();
    for k in [
        "schema",
        "commandId",
        "controllerSeq",
        "type",
        "issuedAt",
        "payload",
    ] {
        if let Some(v) = raw.get(k) {
            typed.insert(k.to_owned(), v.clone());
        }
    }
    serde_json::to_string(&canon(&Value::Object(typed))).expect("serialisable")
}

/// What the ledger decides for a command (the reference).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    Fresh,
    Duplicate,
    Conflict,
    Gap,
    /// Answered before the ledger (expired, epoch, queue full, envelope errors).
    Before,
}

fn class_of(status: ReceiptStatus, detail: &str) -> Class {
    match (status, detail) {
        (ReceiptStatus::Duplicate, d) => {
            assert_eq!(d, DUPLICATE, "duplicate receipt detail");
            Class::Duplicate
        }
        (_, REUSED) => Class::Conflict,
        (_, NOT_CONTIGUOUS) => Class::Gap,
        (_, d)
            if d == EXPIRED
                || d.starts_with("controllerEpoch requires")
                || d == "unsupported command schema"
                || d.starts_with("invalid command")
                || d.starts_with("unsupported command type")
                || d.contains("command queue is full") =>
        {
            Class::Before
        }
        _ => Class::Fresh,
    }
}

/// The reference ledger (seed 002 rules, with the documented bounds).
struct Model {
    max_entries: usize,
    max_bytes: usize,
    entries: HashMap<String, String>,
    order: VecDeque<String>,
    bytes: usize,
    next_seq: u64,
    evicted: u64,
}

impl Model {
    fn predict(&self, id: &str, canonical: &str, seq: u64) -> Class {
        match self.entries.get(id) {
            Some(c) if c == canonical => Class::Duplicate,
            Some(_) => Class::Conflict,
            None if seq != self.next_seq => Class::Gap,
            None => Class::Fresh,
        }
    }

    fn record(&mut self, id: &str, canonical: &str) {
        self.entries.insert(id.to_owned(), canonical.to_owned());
        self.order.push_back(id.to_owned());
        self.bytes += id.len() + canonical.len();
        self.next_seq += 1;
        while self.entries.len() > self.max_entries
            || (self.bytes > self.max_bytes && self.entries.len() > 1)
        {
            let Some(old) = self.order.pop_front() else {
                break;
            };
            if let Some(c) = self.entries.remove(&old) {
                self.bytes -= old.len() + c.len();
                self.evicted += 1;
            }
        }
    }
}

/// One structured command line (a JSON object written in one of several equivalent
/// forms) and whether it carries a `controllerEpoch`.
fn structured(b: &mut Bytes<'_>, next_seq: u64) -> (String, bool) {
    let id = format!("c{}", b.byte() % 6);
    let k = b.byte();
    let seq: u64 = match k % 5 {
        0 | 1 => next_seq,
        2 => next_seq.saturating_sub(1),
        3 => next_seq + 1,
        _ => u64::from(b.byte() % 8),
    };
    let ty = TYPES[usize::from(b.byte()) % TYPES.len()];
    let shape = b.byte();
    let payload = match shape % 5 {
        0 => json!({}),
        1 => json!({"text": "hi", "n": [1, 2, {"b": true, "a": null}]}),
        // The same content as 1 in another key order: the same canonical text.
        2 => serde_json::from_str(r#"{"n":[1,2,{"a":null,"b":true}],"text":"hi"}"#).unwrap(),
        3 => json!({"text": "hi", "n": [2, 1]}),
        _ => json!({"requestId": "r1", "decision": "allow", "é": "ü"}),
    };
    let issued = if shape & 0x10 == 0 {
        "2026-01-01T00:00:00Z"
    } else {
        "2026-01-01T00:00:01Z"
    };
    let mut fields: Vec<(&str, Value)> = vec![
        ("schema", SCHEMA.into()),
        ("commandId", id.into()),
        ("controllerSeq", seq.into()),
        ("type", ty.into()),
        ("issuedAt", issued.into()),
        ("payload", payload),
    ];
    let extras = b.byte();
    // Fields outside the canonical form: a retransmission differing only in them is a
    // duplicate.
    if extras & 1 != 0 {
        fields.push(("deadlineAt", "2026-01-02T00:00:00Z".into()));
    }
    if extras & 2 != 0 {
        fields.push(("x-trace", json!({"hop": extras})));
    }
    let epoch = extras & 0x1c == 0x1c;
    if epoch {
        fields.push(("controllerEpoch", "e1".into()));
    }
    if extras & 4 != 0 {
        fields.reverse();
    }
    let mut line = String::from("{");
    for (i, (key, v)) in fields.iter().enumerate() {
        if i > 0 {
            line.push_str(if extras & 0x20 != 0 { ", " } else { "," });
        }
        line.push_str(&serde_json::to_string(key).unwrap());
        line.push(':');
        if extras & 0x40 != 0 {
            line.push(' ');
        }
        line.push_str(&serde_json::to_string(v).unwrap());
    }
    line.push('}');
    (line, epoch)
}

const READY: &str = r#"{"schema":"paperclip.fake_harness.message.v1","messageSeq":1,"type":"ready","payload":{"version":"1.0.0"}}"#;

/// Drain the run's outputs into `receipts`; a `Spawn` is answered at once with a spawned
/// harness that says `ready`.
fn drain(run: &mut LocalRun, now: u64, receipts: &mut Vec<(String, u64, ReceiptStatus, String)>) {
    loop {
        let mut spawn = false;
        while let Some(out) = run.poll_output() {
            match out {
                Output::ToController(line) => {
                    let msg = StreamMessage::parse(&line).expect("the runner's own lines parse");
                    if let StreamMessage::CommandReceipt(r) = msg {
                        receipts.push((r.command_id, r.controller_seq, r.status, r.detail));
                    }
                }
                Output::Spawn(_) => spawn = true,
                _ => {}
            }
        }
        if !spawn {
            return;
        }
        run.handle_input(now, Input::HarnessSpawned { pid: 42 })
            .expect("spawn pending");
        let _ = run.handle_input(now, Input::HarnessStdout(format!("{READY}\n").into_bytes()));
    }
}

fn check_parsers(line: &str) {
    if let Ok(m) = HarnessMessage::parse(line) {
        assert_eq!(HarnessMessage::parse(&m.to_line()).ok(), Some(m));
    }
    if let Ok(c) = HarnessCommand::parse(line) {
        assert_eq!(HarnessCommand::parse(&c.to_line()).ok(), Some(c));
    }
    if let Ok(s) = StreamMessage::parse(line) {
        assert_eq!(StreamMessage::parse(&s.to_line()).ok(), Some(s));
    }
}

fuzz_target!(|data: &[u8]| {
    let mut b = Bytes::new(data);
    let mut config = LocalConfig::default();
    config.max_line_bytes = 4096;
    config.max_controller_line_bytes = 4096;
    config.ledger_max_entries = 1 + usize::from(b.byte() % 8);
    config.ledger_max_bytes = 256 + 64 * usize::from(b.byte() % 16);
    let Ok(mut run) = LocalRun::new(config.clone()) else {
        return;
    };
    let mut model = Model {
        max_entries: config.ledger_max_entries.max(1),
        max_bytes: config.ledger_max_bytes.max(1),
        entries: HashMap::new(),
        order: VecDeque::new(),
        bytes: 0,
        next_seq: 1,
        evicted: 0,
    };
    let mut last_accepted: Option<u64> = None;
    let mut pending_prepare: Option<(String, u64)> = None;
    let mut eof = false;
    let mut now = 0u64;
    let mut steps = 0;
    while !b.is_empty() && steps < 64 {
        steps += 1;
        now += 1;
        let op = b.byte() % 8;
        let (line, structured_line, epoch) = match op {
            0..=4 => {
                let (l, e) = structured(&mut b, model.next_seq);
                (l, true, e)
            }
            5 => {
                let raw =
                    String::from_utf8_lossy(b.chunk(MAX_CHUNK / 2)).replace(['\n', '\r'], " ");
                check_parsers(&raw);
                let _ = Script::parse(&raw);
                (raw, false, false)
            }
            6 => {
                let _ = run.handle_input(
                    now,
                    Input::HarnessExited {
                        code: Some(i32::from(b.byte() % 3)),
                        signal: None,
                    },
                );
                expect_no_command_receipts(&mut run, now, &mut pending_prepare, &mut last_accepted);
                continue;
            }
            _ => {
                if b.byte().is_multiple_of(4) {
                    eof = true;
                    let _ = run.handle_input(now, Input::ControllerEof);
                    expect_no_command_receipts(
                        &mut run,
                        now,
                        &mut pending_prepare,
                        &mut last_accepted,
                    );
                }
                continue;
            }
        };
        let finished_before = run.is_finished();
        // The reference reading of the line: strict JSON, an object with a usable
        // commandId and controllerSeq, and (when the core's envelope reader accepts it)
        // the canonical text, checked against the core's.
        let parsed = stapel_runner_protocol::wire::parse_value(line.as_bytes()).ok();
        let raw_obj: Option<Map<String, Value>> = parsed.as_ref().and_then(|_| {
            serde_json::from_str::<Value>(&line)
                .ok()
                .and_then(|v| v.as_object().cloned())
        });
        // A line over the controller's line bound is dropped by the framer (a
        // diagnostic): it never reaches the ledger.
        let fits = line.len() < config.max_controller_line_bytes;
        let envelope = raw_obj
            .as_ref()
            .filter(|_| fits)
            .and_then(|o| CommandEnvelope::from_value(&Value::Object(o.clone())).ok());
        let reference = raw_obj.as_ref().map(reference_canonical);
        if let (Some(env), Some(reference)) = (&envelope, &reference) {
            assert_eq!(
                &canonical_json(&env.ledger_value()),
                reference,
                "canonical JSON differs from the reference for {line:?}"
            );
        }
        if structured_line {
            assert!(
                envelope.is_some(),
                "a structured command is a valid envelope: {line}"
            );
        }
        let result = run.handle_input(
            now,
            Input::ControllerBytes(format!("{line}\n").into_bytes()),
        );
        if eof {
            assert!(result.is_err(), "controller bytes after EOF are refused");
            continue;
        }
        result.expect("controller bytes before EOF are taken");
        let mut receipts = Vec::new();
        drain(&mut run, now, &mut receipts);
        check_deferred(&mut receipts, &mut pending_prepare, &mut last_accepted);
        let Some(env) = envelope else {
            // Not an envelope: answered before the ledger (receipt or diagnostic).
            for (_, _, status, detail) in &receipts {
                assert_eq!(
                    class_of(*status, detail),
                    Class::Before,
                    "{line:?}: {detail}"
                );
            }
            assert!(receipts.len() <= 1);
            continue;
        };
        let canonical = reference.expect("an envelope has a reference form");
        let mut predicted = model.predict(&env.command_id, &canonical, env.controller_seq);
        if finished_before || epoch || env.controller_epoch.is_some() {
            predicted = Class::Before;
        }
        let deferred = predicted == Class::Fresh && env.type_text == "run.prepare";
        let mine: Vec<_> = receipts
            .iter()
            .filter(|(id, seq, _, _)| *id == env.command_id && *seq == env.controller_seq)
            .collect();
        assert_eq!(
            mine.len(),
            receipts.len(),
            "receipts for other commands: {receipts:?} (line {line:?})"
        );
        match mine.as_slice() {
            [] => {
                assert!(
                    deferred,
                    "no receipt for {line:?} (predicted {predicted:?})"
                );
                pending_prepare = Some((env.command_id.clone(), env.controller_seq));
            }
            [(_, seq, status, detail)] => {
                let got = class_of(*status, detail);
                assert_eq!(got, predicted, "{line:?}: receipt {status:?} {detail:?}");
                if got == Class::Before {
                    if detail == EXPIRED {
                        assert!(finished_before, "expired before the run finished");
                    }
                } else if *status == ReceiptStatus::Accepted {
                    accept(&mut last_accepted, *seq);
                }
            }
            more => panic!("{} receipts for one command: {more:?}", more.len()),
        }
        if predicted == Class::Fresh {
            model.record(&env.command_id, &canonical);
        }
        let l = run.ledger();
        assert_eq!(l.next_seq(), model.next_seq, "next controllerSeq");
        assert_eq!(l.len(), model.entries.len(), "ledger entries");
        assert_eq!(l.bytes(), model.bytes, "ledger bytes");
        assert_eq!(l.evicted(), model.evicted, "ledger evictions");
        assert!(l.len() <= model.max_entries);
    }
});

fn accept(last: &mut Option<u64>, seq: u64) {
    if let Some(prev) = *last {
        assert!(seq > prev, "seq {seq} accepted after {prev}");
    }
    *last = Some(seq);
}

/// Drains the run after an input that is no command (an exit, EOF): the only receipt it
/// may produce is the deferred one of a pending `prepare`.
fn expect_no_command_receipts(
    run: &mut LocalRun,
    now: u64,
    pending: &mut Option<(String, u64)>,
    last: &mut Option<u64>,
) {
    let mut receipts = Vec::new();
    drain(run, now, &mut receipts);
    check_deferred(&mut receipts, pending, last);
    assert!(
        receipts.is_empty(),
        "receipts without a command: {receipts:?}"
    );
}

/// The deferred receipt of `run.prepare` (once the harness is ready or gone): take it out
/// of `receipts` and check it answers the pending prepare.
fn check_deferred(
    receipts: &mut Vec<(String, u64, ReceiptStatus, String)>,
    pending: &mut Option<(String, u64)>,
    last: &mut Option<u64>,
) {
    let Some((id, seq)) = pending.clone() else {
        return;
    };
    if let Some(i) = receipts
        .iter()
        .position(|(i, s, _, _)| *i == id && *s == seq)
    {
        let (_, seq, status, detail) = receipts.remove(i);
        assert_eq!(
            class_of(status, &detail),
            Class::Fresh,
            "deferred receipt {detail}"
        );
        if status == ReceiptStatus::Accepted {
            accept(last, seq);
        }
        *pending = None;
    }
}
