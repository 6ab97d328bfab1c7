//! Bounded under abuse (issue 17): hostile input streamed through the hub session and
//! the local-run machine while a counting allocator records the peak of live heap bytes.
//!
//! The input, produced in chunks of about 1 MiB and never held whole:
//!
//! * hub: `task.progress` frames with payloads nested at the decoder's depth limit,
//!   frames with strings just under the 64 KiB line bound, lines over the bound (dropped
//!   with `line_too_long`, resync at the next newline), many small frames, garbage lines,
//!   and ever new task ids (many tasks: the stream table is bounded by `max_streams`);
//! * local run: harness stdout with long `item.delta` texts, deeply nested payloads and
//!   many small `log` messages, and stderr with over-long lines and garbage.
//!
//! The bound asserted is [`BOUND`] (16 MiB) of live heap above the baseline, for any input
//! size: the machines' own bounds (64 KiB lines, a 1 MiB ready queue, bounded streams,
//! outbox, held frames and log tail) plus one decoded frame and the test's own 1 MiB
//! chunk (measured: about 5 MiB for the hub and 4 MiB for the local run). Release
//! builds feed 1 GiB to each machine
//! (`cargo test --release -p stapel-runner-protocol --test abuse_memory_bound`); debug
//! builds (`cargo test`, CI) feed 32 MiB — the bound does not depend on the size.
//! `ABUSE_MIB` overrides both.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::json;
use stapel_runner_protocol::local::{Input as LocalInput, LocalConfig, LocalRun};
use stapel_runner_protocol::session::{HubSession, Input, Machine, SessionConfig};
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

/// One chunk of hostile hub input (JSONL), about [`CHUNK`] bytes. `round` varies seqs
/// and task ids.
fn hub_chunk(round: usize, seqs: &mut std::collections::HashMap<String, u64>) -> Vec<u8> {
    let mut out = String::with_capacity(CHUNK + 80 * 1024);
    let mut i = 0usize;
    let mut frame = |task: &str, payload: String, out: &mut String| {
        let seq = seqs.entry(task.to_owned()).or_insert(0);
        *seq += 1;
        out.push_str(&format!(
            "{{\"schema_version\":1,\"type\":\"task.progress\",\"task_id\":\"{task}\",\"seq\":{seq},\"kind\":\"log\",\"payload\":{payload}}}\n"
        ));
    };
    while out.len() < CHUNK {
        match i % 6 {
            // Deep nesting just under the decoder's limit.
            0 => frame("deep", format!("{{\"v\":{}}}", nested(120)), &mut out),
            // A string just under the 64 KiB line bound.
            1 => frame(
                "long",
                format!("{{\"text\":\"{}\"}}", "x".repeat(65_000)),
                &mut out,
            ),
            // A line over the bound: dropped, resync at the newline.
            2 => {
                out.push_str(&"y".repeat(70_000));
                out.push('\n');
            }
            // Many small frames.
            3 => {
                for _ in 0..200 {
                    frame("small", "{}".to_owned(), &mut out);
                }
            }
            // Many tasks: a new task id every frame.
            4 => {
                for k in 0..200 {
                    let task = format!("task-{round}-{i}-{k}");
                    frame(&task, "{\"n\":1}".to_owned(), &mut out);
                }
            }
            // Garbage and blank lines.
            _ => out.push_str("not json\n\n{\"type\":\n[[[[\n"),
        }
        i += 1;
    }
    // Forget the per-task counters of the many one-frame tasks: the test's own map must
    // not grow with the input.
    seqs.retain(|k, _| !k.starts_with("task-"));
    out.into_bytes()
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
    let mut seqs = std::collections::HashMap::new();
    let baseline = LIVE.load(Ordering::Relaxed);
    PEAK.store(baseline, Ordering::Relaxed);
    let (mut fed, mut round, mut received) = (0usize, 0usize, 0u64);
    while fed < total {
        let chunk = hub_chunk(round, &mut seqs);
        fed += chunk.len();
        round += 1;
        let _ = hub.handle_input(round as u64, Input::Bytes(chunk));
        while let Some(out) = hub.poll_output() {
            if matches!(
                out,
                stapel_runner_protocol::session::Output::Event(
                    stapel_runner_protocol::session::Event::Received(_)
                )
            ) {
                received += 1;
            }
        }
    }
    let peak = PEAK.load(Ordering::Relaxed) - baseline;
    println!(
        "hub: fed {} MiB, {received} frames received, peak live heap above baseline {:.1} MiB (bound {} MiB)",
        fed >> 20,
        peak as f64 / 1048576.0,
        BOUND >> 20
    );
    assert!(
        received > 0,
        "the hub applied nothing: the input was not exercised"
    );
    assert!(peak <= BOUND, "peak {peak} bytes over the bound {BOUND}");
}

fn local_chunk(seq: &mut u64) -> (Vec<u8>, Vec<u8>) {
    let mut out = String::with_capacity(CHUNK + 80 * 1024);
    let mut err = String::new();
    let mut i = 0usize;
    let mut msg = |ty: &str, payload: serde_json::Value, out: &mut String| {
        *seq += 1;
        out.push_str(
            &json!({"schema": "paperclip.fake_harness.message.v1", "messageSeq": *seq, "type": ty, "payload": payload})
                .to_string(),
        );
        out.push('\n');
    };
    while out.len() < CHUNK {
        match i % 4 {
            0 => msg(
                "event",
                json!({"eventType": "item.delta", "turnId": "t1", "itemId": "i1", "payload": {"text": "x".repeat(60_000)}}),
                &mut out,
            ),
            1 => {
                let deep: serde_json::Value = serde_json::from_str(&nested(100)).unwrap();
                msg(
                    "event",
                    json!({"eventType": "item.delta", "turnId": "t1", "itemId": "i1", "payload": {"deep": deep}}),
                    &mut out,
                )
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
            _ => {
                err.push_str(&"z".repeat(70_000));
                err.push_str("\nnot json\n");
            }
        }
        i += 1;
    }
    (out.into_bytes(), err.into_bytes())
}

#[test]
fn local_run_memory_stays_bounded() {
    let _turn = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let total = total_bytes();
    let mut run = LocalRun::new(LocalConfig::default()).unwrap();
    let prepare = json!({"schema": "paperclip.prp.command.v1", "commandId": "cmd_1", "controllerSeq": 1,
        "type": "run.prepare", "issuedAt": "t", "payload": {}});
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
    let (mut fed, mut seq, mut lines) = (0usize, 1u64, 0u64);
    while fed < total {
        let (out, err) = local_chunk(&mut seq);
        fed += out.len() + err.len();
        let _ = run.handle_input(1, LocalInput::HarnessStdout(out));
        let _ = run.handle_input(1, LocalInput::HarnessStderr(err));
        while run.poll_output().is_some() {
            lines += 1;
        }
    }
    let peak = PEAK.load(Ordering::Relaxed) - baseline;
    println!(
        "local run: fed {} MiB, {lines} outputs, finished: {}, peak live heap above baseline {:.1} MiB (bound {} MiB)",
        fed >> 20,
        run.is_finished(),
        peak as f64 / 1048576.0,
        BOUND >> 20
    );
    assert!(
        !run.is_finished(),
        "the run ended early: the input was not exercised"
    );
    assert!(lines > 0);
    assert!(peak <= BOUND, "peak {peak} bytes over the bound {BOUND}");
}
