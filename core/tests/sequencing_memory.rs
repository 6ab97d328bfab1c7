//! Inbound memory per stream, measured with a counting global allocator: 10,000 tasks ×
//! 1,000 in-order progress frames each on the hub. The live heap held by the
//! `ConnectionState` must not grow with the frame count, only with the stream count.
//!
//! Run `cargo test -p stapel-runner-protocol --test sequencing_memory -- --nocapture` to
//! see the figures.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

use stapel_runner_protocol::sequencing::{ConnectionState, Role};
use stapel_runner_protocol::wire::{Message, TaskProgress};

struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: delegates every call to the system allocator unchanged; only counts bytes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn live() -> isize {
    LIVE.load(Ordering::Relaxed)
}

const TASKS: usize = 10_000;
const FRAMES: u64 = 1_000;

#[test]
fn inbound_memory_is_per_stream_not_per_frame() {
    // One reusable message per task, ids like the hub's ("T-000042").
    let mut msgs: Vec<Message> = (0..TASKS)
        .map(|i| {
            let mut p = TaskProgress::new(format!("T-{i:06}"), "state", Default::default());
            p.attempt = 1;
            p.into()
        })
        .collect();

    let base = live();
    let mut hub = ConnectionState::new(Role::Hub);
    let receive_all = |hub: &mut ConnectionState, msgs: &mut [Message], seq: u64| {
        for m in msgs.iter_mut() {
            m.set_seq(seq);
            assert!(hub.receive(m).unwrap().is_new());
        }
    };
    receive_all(&mut hub, &mut msgs, 1);
    let after_first = live() - base;
    for seq in 2..=FRAMES {
        receive_all(&mut hub, &mut msgs, seq);
    }
    let after_all = live() - base;
    let per_stream = after_all as f64 / TASKS as f64;
    let estimate = hub.memory_footprint();
    println!(
        "inbound memory, {TASKS} streams × {FRAMES} frames: {after_all} bytes live \
         ({per_stream:.1} bytes/stream, counting allocator); after 1 frame/stream: \
         {after_first} bytes; memory_footprint() estimate: {estimate} bytes \
         ({:.1} bytes/stream)",
        estimate as f64 / TASKS as f64
    );
    assert_eq!(hub.resume_map().len(), TASKS);
    assert!(hub.resume_map().values().all(|w| *w == FRAMES));
    // Receiving 999 more frames per stream allocated nothing that stayed live.
    assert_eq!(after_all, after_first);
    // And the estimate is within 2× of the measurement.
    assert!(
        (estimate as f64) < 2.0 * after_all as f64 && (estimate as f64) > 0.5 * after_all as f64
    );

    // Worst case for one stream: a full out-of-order window stays bounded and anything
    // beyond it is refused without being recorded.
    let mut m: Message = {
        let mut p = TaskProgress::new("T-window", "state", Default::default());
        p.attempt = 1;
        p.into()
    };
    drop(hub);
    let mut hub = ConnectionState::new(Role::Hub);
    let before = live();
    let window = hub.config().inbound_window;
    for seq in 2..=window {
        m.set_seq(seq);
        assert!(hub.receive(&m).unwrap().is_new());
    }
    let full = live() - before;
    for seq in window + 1..window + 100 {
        m.set_seq(seq);
        assert_eq!(hub.receive(&m).unwrap_err().code(), "beyond_window");
    }
    assert_eq!(live() - before, full);
    println!("one stream with a full out-of-order window of {window}: {full} bytes");
    assert_eq!(hub.resume_map()["T-window"], 0);
}
