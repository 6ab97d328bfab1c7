//! Heap allocations of the hub's steady-state receive/ack path, counted by a global
//! counting allocator.
//!
//! A hub session is fed validated `usage` progress frames for 100 tasks, one owned
//! `String` per frame (a WebSocket text message, `Input::Frame`), and every output is
//! drained and dropped, as a host does. The frames are built before counting starts (the
//! transport allocates them, not the session). Counted: every allocation made inside
//! `handle_input`, `poll_output` and dropping the outputs.
//!
//! * Receiving a frame allocates nothing: with acknowledgements held back, 20,000
//!   frames cost 0 allocations.
//! * Acknowledging costs a bounded number of allocations per acknowledgement ping (its
//!   frame), whatever the number of streams it acknowledges.
//!
//! Runs single-threaded (`harness = true`, but the counter is per thread).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use stapel_runner_protocol::session::{Event, HubSession, Input, Machine, Output, SessionConfig};
use stapel_runner_protocol::wire::{self, Hello, Message, TaskProgress, UsageSplit};

struct Counting;

thread_local! {
    static COUNT: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: forwards to the system allocator; the counter is a thread-local `Cell` that
// never allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = COUNT.try_with(|c| c.set(c.get() + 1));
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = COUNT.try_with(|c| c.set(c.get() + 1));
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

fn allocations() -> u64 {
    COUNT.with(Cell::get)
}

const TASKS: u64 = 100;

/// Frames `from..from + n` (round-robin over the tasks, seqs continuing per task).
fn frames(from: u64, n: u64) -> Vec<String> {
    (from..from + n)
        .map(|i| {
            let usage = UsageSplit {
                cache_read: 120_000 + i,
                cache_write: 4_096,
                fresh_input: 1_337,
                output: 2_048,
                thinking: 512,
            };
            let mut p = TaskProgress::usage(format!("T-2026-12-01-{:04}", i % TASKS), &usage);
            p.seq = i / TASKS + 1;
            p.attempt = 1;
            p.payload.insert("model", "claude-sonnet-4-5");
            p.payload.insert("turn", i / 7);
            wire::encode(&Message::TaskProgress(p))
        })
        .collect()
}

fn open_hub(cfg: SessionConfig) -> HubSession {
    let mut hub = HubSession::new(cfg);
    hub.handle_input(0, Input::Connected).unwrap();
    let hello = wire::encode(&Message::Hello(Hello::new("p-1", "0.1.0")));
    hub.handle_input(0, Input::Frame(hello)).unwrap();
    while hub.poll_output().is_some() {}
    hub
}

/// Feed `frames`, drain and drop every output; (received, transmitted).
fn ingest(hub: &mut HubSession, frames: Vec<String>, now: u64) -> (u64, u64) {
    let (mut received, mut transmitted) = (0, 0);
    for f in frames {
        hub.handle_input(now, Input::Frame(f)).unwrap();
        while let Some(o) = hub.poll_output() {
            match o {
                Output::Event(Event::Received(Message::TaskProgress(p))) => {
                    assert!(p.payload.is_unbuilt(), "the payload was built");
                    received += 1;
                }
                Output::Transmit(_) => transmitted += 1,
                other => panic!("unexpected output {other:?}"),
            }
        }
    }
    (received, transmitted)
}

#[test]
fn receiving_a_frame_allocates_nothing() {
    let mut cfg = SessionConfig::default();
    // Acknowledgements are measured below; here they never come due.
    cfg.ack_every_frames = u64::MAX;
    cfg.ack_delay_ms = u64::MAX / 4;
    cfg.ping_interval_ms = 0;
    let mut hub = open_hub(cfg);
    // Warm up: every stream exists, the output queue has grown.
    let (r, _) = ingest(&mut hub, frames(0, 2 * TASKS), 1);
    assert_eq!(r, 2 * TASKS);
    let batch = frames(2 * TASKS, 20_000);
    let before = allocations();
    let (received, transmitted) = ingest(&mut hub, batch, 2);
    let used = allocations() - before;
    assert_eq!((received, transmitted), (20_000, 0));
    println!("steady-state receive: {used} allocations for 20000 frames");
    assert_eq!(used, 0, "allocations while receiving 20,000 frames");
}

#[test]
fn acknowledging_allocates_per_ping_not_per_stream() {
    // The default: an acknowledgement every 1024 applied frames.
    let mut hub = open_hub(SessionConfig::default());
    let (r, _) = ingest(&mut hub, frames(0, 2_048), 1);
    assert_eq!(r, 2_048);
    let batch = frames(2_048, 20_480);
    let before = allocations();
    let (received, pings) = ingest(&mut hub, batch, 2);
    let used = allocations() - before;
    assert_eq!(received, 20_480);
    assert_eq!(pings, 20, "one ack ping per 1024 frames");
    println!(
        "steady-state receive + ack: {used} allocations for {received} frames and {pings} ack pings of {TASKS} streams each ({:.4} per frame)",
        used as f64 / received as f64
    );
    assert!(
        used <= pings * 4,
        "{used} allocations for {pings} acknowledgement pings"
    );
}
