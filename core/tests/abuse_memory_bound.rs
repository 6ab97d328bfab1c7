//! Bounded under abuse (issue 17): hostile input streamed through the hub session and
//! the local-run machine while a counting allocator records the peak of live heap bytes.
//!
//! The input, produced in chunks of about 1 MiB and never held whole:
//!
//! * hub: `task.progress` frames with payloads nested exactly at the decoder's depth
//!   limit (127 levels, the frame's own object included: accepted) and one level over it
//!   (refused as `not_json`), frames with strings just under the 64 KiB line bound, lines
//!   over the bound (dropped with `line_too_long`, resync at the next newline), many
//!   small frames, garbage lines, and ever new task ids (many tasks: the stream table is
//!   bounded by `max_streams`, beyond it a new task is refused with `too_many_streams`);
//! * local run: harness stdout with long `item.delta` texts, payloads nested exactly at
//!   the harness limit (124 levels: the runner re-emits events 3 levels deeper, within
//!   the decoders' 127) and many small `log` messages, stderr with over-long lines and garbage,
//!   and a controller flood: commands fresh, duplicated, reused with other content, with
//!   gaps, nested at and over the limit, over the controller's line bound, and garbage.
//!
//! Every chunk is checked on its own: the machine takes it (`handle_input` is `Ok`) and
//! answers every line the way it must — each valid frame delivered once, each refused
//! line reported with its code, each harness event re-emitted, each command line
//! answered by exactly one receipt or diagnostic — so a machine that silently stops
//! working fails, not only one that grows.
//!
//! The bound asserted is [`BOUND`] (16 MiB) of live heap above the baseline, for any input
//! size: the machines' own bounds (64 KiB lines, a 1 MiB ready queue, bounded streams,
//! outbox, held frames, ledger and log tail) plus one decoded frame and the test's own
//! 1 MiB chunk. Release builds feed 1 GiB to each machine — `scripts/test-all` runs
//! `cargo test --release -p stapel-runner-protocol --test abuse_memory_bound` — and debug
//! builds (`cargo test`) feed 32 MiB; the bound does not depend on the size. `ABUSE_MIB`
//! overrides both.

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::json;
use stapel_runner_protocol::local::{
    Input as LocalInput, LocalConfig, LocalRun, Output as LocalOutput, StreamMessage,
};
use stapel_runner_protocol::session::{Event, HubSession, Input, Machine, Output, SessionConfig};
use stapel_runner_protocol::wire::{encode, Hello, Message};

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call forwards to the system allocator unchanged; the counters are only
// bookkeeping.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let now = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            if new_size >= layout.size() {
                let now = LIVE.fetch_add(new_size - layout.size(), Ordering::Relaxed)
                    + (new_size - layout.size());
                PEAK.fetch_max(now, Ordering::Relaxed);
            } else {
                LIVE.fetch_sub(layout.size() - new_size, Ordering::Relaxed);
            }
        }
        p
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Most live heap above the baseline while a machine digests the hostile input.
const BOUND: usize = 16 * 1024 * 1024;

/// The decoders' nesting limit (the frame's own object is level 1).
const MAX_DEPTH: usize = stapel_runner_protocol::json::MAX_DEPTH;

/// The allocator counters are process-wide: the two tests take turns.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

const CHUNK: usize = 1 << 20;

fn total_bytes() -> usize {
    let mib = std::env::var("ABUSE_MIB")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(if cfg!(debug_assertions) { 32 } else { 1024 });
    mib << 20
}

/// A payload value nested `depth` levels deep.
fn nested(depth: usize) -> String {
    format!("{}1{}", "[".repeat(depth), "]".repeat(depth))
}

/// What one hub chunk must produce.
#[derive(Default, Debug, PartialEq)]
struct HubExpect {
    /// Frames of the fixed streams (`deep`, `long`, `small`): all delivered.
    delivered_fixed: u64,
    /// Frames of ever new tasks: each delivered or refused with `too_many_streams`.
    new_tasks: u64,
    /// Frames one level over the nesting limit: refused, `not_json`.
    too_deep: u64,
    /// Lines over the line bound: refused, `line_too_long`.
    too_long: u64,
    /// Garbage lines: refused (`not_json`).
    garbage: u64,
}

/// One chunk of hostile hub input (JSONL), about [`CHUNK`] bytes, and what it must
/// produce. `round` varies the task ids.
fn hub_chunk(round: usize, seqs: &mut HashMap<String, u64>) -> (Vec<u8>, HubExpect) {
    let mut out = String::with_capacity(CHUNK + 80 * 1024);
    let mut want = HubExpect::default();
    let mut i = 0usize;
    let mut frame = |task: &str, payload: String, out: &mut String| {
        let seq = seqs.entry(task.to_owned()).or_insert(0);
        *seq += 1;
        out.push_str(&format!(
            "{{\"schema_version\":1,\"type\":\"task.progress\",\"task_id\":\"{task}\",\"seq\":{seq},\"kind\":\"log\",\"payload\":{payload}}}\n"
        ));
    };
    while out.len() < CHUNK {
        match i % 7 {
            // Nesting exactly at the limit: frame (1) + payload (2) + arrays.
            0 => {
                frame(
                    "deep",
                    format!("{{\"v\":{}}}", nested(MAX_DEPTH - 2)),
                    &mut out,
                );
                want.delivered_fixed += 1;
            }
            // One level over the limit: refused whole, no seq used.
            1 => {
                out.push_str(&format!(
                    "{{\"schema_version\":1,\"type\":\"task.progress\",\"task_id\":\"over\",\"seq\":1,\"kind\":\"log\",\"payload\":{{\"v\":{}}}}}\n",
                    nested(MAX_DEPTH - 1)
                ));
                want.too_deep += 1;
            }
            // A string just under the 64 KiB line bound.
            2 => {
                frame(
                    "long",
                    format!("{{\"text\":\"{}\"}}", "x".repeat(65_000)),
                    &mut out,
                );
                want.delivered_fixed += 1;
            }
            // A line over the bound: dropped, resync at the newline.
            3 => {
                out.push_str(&"y".repeat(70_000));
                out.push('\n');
                want.too_long += 1;
            }
            // Many small frames.
            4 => {
                for _ in 0..200 {
                    frame("small", "{}".to_owned(), &mut out);
                }
                want.delivered_fixed += 200;
            }
            // Many tasks: a new task id every frame.
            5 => {
                for k in 0..200 {
                    let task = format!("task-{round}-{i}-{k}");
                    frame(&task, "{\"n\":1}".to_owned(), &mut out);
                }
                want.new_tasks += 200;
            }
            // Garbage and blank lines (blank lines are skipped).
            _ => {
                out.push_str("not json\n\n{\"type\":\n[[[[\n");
                want.garbage += 3;
            }
        }
        i += 1;
    }
    // Forget the per-task counters of the many one-frame tasks: the test's own map must
    // not grow with the input.
    seqs.retain(|k, _| !k.starts_with("task-"));
    (out.into_bytes(), want)
}

#[test]
fn hub_session_memory_stays_bounded() {
    let _turn = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let total = total_bytes();
    let mut hub = HubSession::new(SessionConfig::default());
    hub.handle_input(0, Input::Connected).unwrap();
    let hello = encode(&Message::Hello(Hello::new("p", "1.0.0")));
    hub.handle_input(0, Input::Bytes(format!("{hello}\n").into_bytes()))
        .unwrap();
    while hub.poll_output().is_some() {}
    let mut seqs = HashMap::new();
    let baseline = LIVE.load(Ordering::Relaxed);
    PEAK.store(baseline, Ordering::Relaxed);
    let started = std::time::Instant::now();
    let (mut fed, mut round, mut received, mut refused_tasks) = (0usize, 0usize, 0u64, 0u64);
    while fed < total {
        let (chunk, want) = hub_chunk(round, &mut seqs);
        fed += chunk.len();
        round += 1;
        hub.handle_input(round as u64, Input::Bytes(chunk))
            .unwrap_or_else(|e| panic!("chunk {round} refused: {}", e.code()));
        let mut got = HubExpect::default();
        while let Some(out) = hub.poll_output() {
            match out {
                Output::Event(Event::Received(m)) => {
                    received += 1;
                    if m.task_id().is_some_and(|t| t.starts_with("task-")) {
                        got.new_tasks += 1;
                    } else {
                        got.delivered_fixed += 1;
                    }
                }
                Output::Event(Event::PeerError { code, detail }) => match code.as_str() {
                    "too_many_streams" => {
                        got.new_tasks += 1;
                        refused_tasks += 1;
                    }
                    "line_too_long" => got.too_long += 1,
                    "not_json" if detail.contains("nested deeper") => got.too_deep += 1,
                    _ => got.garbage += 1,
                },
                _ => {}
            }
        }
        assert_eq!(got, want, "chunk {round}: what the hub answered");
    }
    let peak = PEAK.load(Ordering::Relaxed) - baseline;
    let secs = started.elapsed().as_secs_f64();
    println!(
        "hub: fed {} MiB in {secs:.1} s, {received} frames received, {refused_tasks} new tasks refused (too_many_streams), peak live heap above baseline {:.1} MiB (bound {} MiB)",
        fed >> 20,
        peak as f64 / 1048576.0,
        BOUND >> 20
    );
    assert!(peak <= BOUND, "peak {peak} bytes over the bound {BOUND}");
}

/// What one local-run chunk must produce.
#[derive(Default, Debug, PartialEq)]
struct LocalExpect {
    /// Harness `event` lines: each re-emitted as one canonical event.
    events: u64,
    /// Controller lines with a usable `commandId` and `controllerSeq`: one receipt each.
    receipts: u64,
    /// Other controller lines (not JSON, too deep, too long, no id): one diagnostic each.
    diagnostics: u64,
}

fn command(id: &str, seq: u64, ty: &str, payload: serde_json::Value) -> String {
    json!({"schema": "paperclip.prp.command.v1", "commandId": id, "controllerSeq": seq,
        "type": ty, "issuedAt": "2026-01-01T00:00:00Z", "payload": payload})
    .to_string()
}

/// One chunk of hostile local-run input: harness stdout, harness stderr and controller
/// bytes, about [`CHUNK`] bytes together, and what they must produce. `seq` numbers the
/// harness messages, `next` is the next `controllerSeq`.
fn local_chunk(seq: &mut u64, next: &mut u64) -> (Vec<u8>, Vec<u8>, Vec<u8>, LocalExpect) {
    let mut out = String::with_capacity(CHUNK + 80 * 1024);
    let mut err = String::new();
    let mut ctl = String::new();
    let mut want = LocalExpect::default();
    let mut i = 0usize;
    let mut msg = |ty: &str, payload: serde_json::Value, out: &mut String| {
        *seq += 1;
        out.push_str(
            &json!({"schema": "paperclip.fake_harness.message.v1", "messageSeq": *seq, "type": ty, "payload": payload})
                .to_string(),
        );
        out.push('\n');
    };
    while out.len() + err.len() + ctl.len() < CHUNK {
        match i % 5 {
            0 => {
                msg(
                    "event",
                    json!({"eventType": "item.delta", "turnId": "t1", "itemId": "i1", "payload": {"text": "x".repeat(60_000)}}),
                    &mut out,
                );
                want.events += 1;
            }
            1 => {
                // Message (1) + payload (2) + event payload (3) + arrays: exactly the harness
                // limit (the decoders' less the 3 levels the runner wraps around it).
                let deep: serde_json::Value =
                    serde_json::from_str(&nested(MAX_DEPTH - 3 - 3)).unwrap();
                msg(
                    "event",
                    json!({"eventType": "item.delta", "turnId": "t1", "itemId": "i1", "payload": {"deep": deep}}),
                    &mut out,
                );
                want.events += 1;
            }
            2 => {
                for _ in 0..100 {
                    msg(
                        "log",
                        json!({"stream": "stdout", "text": "hello"}),
                        &mut out,
                    );
                }
            }
            3 => {
                err.push_str(&"z".repeat(70_000));
                err.push_str("\nnot json\n");
            }
            _ => {
                // The controller flood: fresh commands (not implemented locally: recorded,
                // then rejected), a retransmission (duplicate), a reused id with other
                // content and a gap (rejected), commands nested at the limit (receipt)
                // and over it, an over-long line, garbage (diagnostics).
                for _ in 0..50 {
                    let id = format!("c{next}");
                    let fresh = command(&id, *next, "runner.drain", json!({"n": 1}));
                    ctl.push_str(&fresh);
                    ctl.push('\n');
                    ctl.push_str(&fresh);
                    ctl.push('\n');
                    ctl.push_str(&command(&id, *next, "runner.drain", json!({"n": 2})));
                    ctl.push('\n');
                    ctl.push_str(&command("gap", *next + 5, "runner.drain", json!({})));
                    ctl.push('\n');
                    *next += 1;
                    want.receipts += 4;
                }
                // Command (1) + payload (2) + arrays: exactly the limit; then over it.
                let deep: serde_json::Value = serde_json::from_str(&nested(MAX_DEPTH - 2)).unwrap();
                ctl.push_str(&command(
                    &format!("c{next}"),
                    *next,
                    "runner.drain",
                    json!({"v": deep}),
                ));
                ctl.push('\n');
                *next += 1;
                want.receipts += 1;
                let over = command("over", *next, "runner.drain", json!({"v": 1}))
                    .replace("{\"v\":1}", &format!("{{\"v\":{}}}", nested(MAX_DEPTH - 1)));
                ctl.push_str(&over);
                ctl.push('\n');
                ctl.push_str(&"q".repeat(70_000));
                ctl.push('\n');
                ctl.push_str("not json\n{\"commandId\": 7}\n");
                want.diagnostics += 4;
            }
        }
        i += 1;
    }
    (out.into_bytes(), err.into_bytes(), ctl.into_bytes(), want)
}

#[test]
fn local_run_memory_stays_bounded() {
    let _turn = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let total = total_bytes();
    let mut run = LocalRun::new(LocalConfig::default()).unwrap();
    let prepare = command("cmd_1", 1, "run.prepare", json!({}));
    run.handle_input(
        0,
        LocalInput::ControllerBytes(format!("{prepare}\n").into_bytes()),
    )
    .unwrap();
    run.handle_input(0, LocalInput::HarnessSpawned { pid: 7 })
        .unwrap();
    let ready = json!({"schema": "paperclip.fake_harness.message.v1", "messageSeq": 1, "type": "ready", "payload": {"version": "1.0.0"}});
    run.handle_input(
        0,
        LocalInput::HarnessStdout(format!("{ready}\n").into_bytes()),
    )
    .unwrap();
    while run.poll_output().is_some() {}
    let baseline = LIVE.load(Ordering::Relaxed);
    PEAK.store(baseline, Ordering::Relaxed);
    let started = std::time::Instant::now();
    let (mut fed, mut seq, mut next, mut chunks) = (0usize, 1u64, 2u64, 0u64);
    let (mut events, mut receipts) = (0u64, 0u64);
    while fed < total {
        let (out, err, ctl, want) = local_chunk(&mut seq, &mut next);
        fed += out.len() + err.len() + ctl.len();
        chunks += 1;
        for (what, input) in [
            ("stdout", LocalInput::HarnessStdout(out)),
            ("stderr", LocalInput::HarnessStderr(err)),
            ("controller", LocalInput::ControllerBytes(ctl)),
        ] {
            run.handle_input(chunks, input)
                .unwrap_or_else(|e| panic!("chunk {chunks} ({what}) refused: {e}"));
        }
        let mut got = LocalExpect::default();
        while let Some(o) = run.poll_output() {
            let LocalOutput::ToController(line) = o else {
                panic!("chunk {chunks}: unexpected output {o:?}");
            };
            match StreamMessage::parse(&line).expect("the runner's own lines parse") {
                StreamMessage::Event(_) => got.events += 1,
                StreamMessage::CommandReceipt(_) => got.receipts += 1,
                StreamMessage::Diagnostic { .. } => got.diagnostics += 1,
                _ => {}
            }
        }
        events += got.events;
        receipts += got.receipts;
        assert_eq!(got, want, "chunk {chunks}: what the run answered");
        assert!(!run.is_finished(), "chunk {chunks}: the run ended");
        assert!(run.ledger().len() <= LocalConfig::default().ledger_max_entries);
    }
    let peak = PEAK.load(Ordering::Relaxed) - baseline;
    let secs = started.elapsed().as_secs_f64();
    println!(
        "local run: fed {} MiB in {secs:.1} s, {events} events, {receipts} receipts, ledger {} entries ({} evicted), peak live heap above baseline {:.1} MiB (bound {} MiB)",
        fed >> 20,
        run.ledger().len(),
        run.ledger().evicted(),
        peak as f64 / 1048576.0,
        BOUND >> 20
    );
    assert!(peak <= BOUND, "peak {peak} bytes over the bound {BOUND}");
}
