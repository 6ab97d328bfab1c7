//! Hub ingest throughput: framer + decode + dedupe + event, on one core.
//!
//! `cargo bench -p stapel-runner-protocol --bench sequencing`
//!
//! Groups:
//! * `hub_ingest/{validate,tolerant}/{jsonl_64k,jsonl_4k,ws_frames}` — a [`HubSession`]
//!   fed ~290-byte `usage` progress frames over 100 tasks, as JSONL bytes in 64 KiB or
//!   4 KiB chunks or as one `Input::Frame` per frame (a WebSocket text message, handed
//!   over as the owned `String` the transport produced: those strings are made before
//!   the timed loop), outputs drained after every input; throughput in frames/s.
//!   `validate` is the session default.
//! * `hub_ingest/anchor/{serde_json_typed,sonic_rs_typed}` — the same 20,000 frames
//!   decoded into a plain typed struct (`common/anchors.rs`), the cost a hub pays without
//!   this crate's validation, sequencing and events.
//! * `parts/*` — where the time goes: the framer alone, `wire::decode` alone (with and
//!   without validation), and `ConnectionState::receive` alone.
//!
//! Before the benchmarks, the inbound memory of 10,000 tasks × 1,000 frames is printed
//! (from `ConnectionState::memory_footprint`, an estimate from capacities; the
//! `sequencing_memory` test measures the same with a counting allocator).

#[path = "common/anchors.rs"]
mod anchors;

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use stapel_runner_protocol::framing::LineFramer;
use stapel_runner_protocol::sequencing::{ConnectionState, Role};
use stapel_runner_protocol::session::{Event, HubSession, Input, Machine, Output, SessionConfig};
use stapel_runner_protocol::wire::{self, Hello, Message, TaskProgress, UsageSplit};

const FRAMES: usize = 20_000;
const TASKS: usize = 100;

fn frames() -> Vec<String> {
    let mut out = Vec::with_capacity(FRAMES);
    let mut seqs = vec![0u64; TASKS];
    for i in 0..FRAMES {
        let t = i % TASKS;
        seqs[t] += 1;
        let usage = UsageSplit {
            cache_read: 120_000 + i as u64,
            cache_write: 4_096,
            fresh_input: 1_337,
            output: 2_048,
            thinking: 512,
        };
        let mut p = TaskProgress::usage(format!("T-{t:05}"), &usage);
        p.seq = seqs[t];
        p.attempt = 1;
        p.payload.insert("model", "claude-sonnet-4-5");
        p.payload.insert("turn", i as u64 / 7);
        out.push(wire::encode(&Message::TaskProgress(p)));
    }
    out
}

fn jsonl(frames: &[String], chunk: usize) -> Vec<Vec<u8>> {
    let mut all = Vec::new();
    for f in frames {
        all.extend_from_slice(f.as_bytes());
        all.push(b'\n');
    }
    all.chunks(chunk).map(<[u8]>::to_vec).collect()
}

fn open_hub(validate: bool) -> HubSession {
    let mut cfg = SessionConfig::default();
    cfg.validate = validate;
    let mut hub = HubSession::new(cfg);
    hub.handle_input(0, Input::Connected).unwrap();
    let hello = wire::encode(&Message::Hello(Hello::new("p-1", "0.1.0")));
    hub.handle_input(0, Input::Frame(hello)).unwrap();
    while hub.poll_output().is_some() {}
    hub
}

fn drain(hub: &mut HubSession) -> usize {
    let mut applied = 0;
    loop {
        match hub.poll_output() {
            Some(Output::Event(Event::Received(m))) => {
                black_box(&m);
                applied += 1;
            }
            None => return applied,
            _ => {}
        }
    }
}

/// One WebSocket text message per frame.
fn ingest_frames(hub: &mut HubSession, frames: Vec<String>) -> usize {
    let mut applied = 0;
    for f in frames {
        hub.handle_input(1, Input::Frame(f)).unwrap();
        applied += drain(hub);
    }
    applied
}

fn ingest(hub: &mut HubSession, chunks: &[Vec<u8>]) -> usize {
    let mut applied = 0;
    for c in chunks {
        hub.handle_input(1, Input::Bytes(c.clone())).unwrap();
        loop {
            match hub.poll_output() {
                Some(Output::Event(Event::Received(m))) => {
                    black_box(&m);
                    applied += 1;
                }
                None => break,
                _ => {}
            }
        }
    }
    applied
}

fn print_memory() {
    let mut hub = ConnectionState::new(Role::Hub);
    let mut msgs: Vec<Message> = (0..10_000)
        .map(|i| {
            let mut p = TaskProgress::new(format!("T-{i:06}"), "state", Default::default());
            p.attempt = 1;
            p.into()
        })
        .collect();
    let mut sizes = Vec::new();
    for seq in 1..=1_000u64 {
        for m in msgs.iter_mut() {
            m.set_seq(seq);
            hub.receive(m).unwrap();
        }
        if seq == 1 || seq == 1_000 {
            sizes.push(hub.memory_footprint());
        }
    }
    println!(
        "inbound memory: 10,000 tasks x 1,000 frames: {} bytes ({:.1} bytes/stream; after 1 frame/stream: {} bytes)",
        sizes[1],
        sizes[1] as f64 / 10_000.0,
        sizes[0]
    );
}

fn bench(c: &mut Criterion) {
    print_memory();
    let frames = frames();
    let avg = frames.iter().map(String::len).sum::<usize>() / frames.len();
    println!("frame size: {avg} bytes on average; {FRAMES} frames over {TASKS} tasks");
    let chunks = jsonl(&frames, 64 * 1024);
    let small_chunks = jsonl(&frames, 4 * 1024);

    let mut g = c.benchmark_group("hub_ingest");
    g.throughput(Throughput::Elements(FRAMES as u64));
    for (name, validate) in [("validate", true), ("tolerant", false)] {
        // Sanity: every frame is applied exactly once.
        assert_eq!(ingest(&mut open_hub(validate), &chunks), FRAMES);
        assert_eq!(
            ingest_frames(&mut open_hub(validate), frames.clone()),
            FRAMES
        );
        g.bench_function(format!("{name}/jsonl_64k"), |b| {
            b.iter_batched(
                || open_hub(validate),
                |mut hub| ingest(&mut hub, &chunks),
                BatchSize::LargeInput,
            )
        });
        g.bench_function(format!("{name}/jsonl_4k"), |b| {
            b.iter_batched(
                || open_hub(validate),
                |mut hub| ingest(&mut hub, &small_chunks),
                BatchSize::LargeInput,
            )
        });
        g.bench_function(format!("{name}/ws_frames"), |b| {
            b.iter_batched(
                || (open_hub(validate), frames.clone()),
                |(mut hub, owned)| ingest_frames(&mut hub, owned),
                BatchSize::LargeInput,
            )
        });
    }
    g.bench_function("anchor/serde_json_typed", |b| {
        b.iter(|| {
            for f in &frames {
                black_box(anchors::serde_typed::<anchors::IngestPayload>(f));
            }
        })
    });
    g.bench_function("anchor/sonic_rs_typed", |b| {
        b.iter(|| {
            for f in &frames {
                black_box(anchors::sonic_typed::<anchors::IngestPayload>(f));
            }
        })
    });
    g.finish();

    let mut g = c.benchmark_group("parts");
    g.throughput(Throughput::Elements(FRAMES as u64));
    g.bench_function("framer", |b| {
        b.iter(|| {
            let mut f = LineFramer::default();
            let mut n = 0;
            for c in &chunks {
                f.push(c).unwrap();
                while let Some(l) = f.poll_line() {
                    black_box(l.unwrap());
                    n += 1;
                }
            }
            n
        })
    });
    for (name, validate) in [("decode_validate", true), ("decode_tolerant", false)] {
        g.bench_function(name, |b| {
            b.iter(|| {
                for f in &frames {
                    black_box(wire::decode(f.as_bytes(), validate).unwrap());
                }
            })
        });
    }
    let decoded: Vec<Message> = frames
        .iter()
        .map(|f| wire::decode(f.as_bytes(), false).unwrap())
        .collect();
    g.bench_function("receive", |b| {
        b.iter_batched(
            || ConnectionState::new(Role::Hub),
            |mut s| {
                for m in &decoded {
                    black_box(s.receive(m).unwrap());
                }
                s
            },
            BatchSize::LargeInput,
        )
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = bench
}
criterion_main!(benches);
