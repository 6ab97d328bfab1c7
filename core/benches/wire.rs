//! Codec throughput: decode+validate and encode of a ~250-byte usage progress frame and a
//! ~2 KiB task.assign. Reported as frames/s (elements) and bytes/s.
//!
//! The usage frame's group also times the anchors (`anchor_serde_json_typed`,
//! `anchor_sonic_rs_typed`): a plain typed-struct decode of the same frame, see
//! `common/anchors.rs`. `decode_validate` keeps the payload as validated text
//! (`wire::Payload`); `decode_validate_read` also reads `payload.usage` (building the
//! payload object), `decode_full_validate` is the value-tree decode without the fast path.
//!
//! Run: `cargo bench -p stapel-runner-protocol --bench wire`

#[path = "common/anchors.rs"]
mod anchors;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use stapel_runner_protocol::wire::{
    decode, decode_full, decode_owned, decode_str, encode, encode_into, peek_progress, Message,
};
use std::hint::black_box;
use std::time::Duration;

pub fn usage_frame() -> String {
    concat!(
        r#"{"schema_version":1,"type":"task.progress","task_id":"T-2026-11-30-0042","seq":1842,"kind":"usage","attempt":3,"#,
        r#""payload":{"usage":{"cache_read":1843200,"cache_write":40960,"fresh_input":5120,"output":20480,"thinking":8192},"#,
        r#""model":"claude-sonnet-4-5","call_id":"call_01JDX4R8Q7","turn":17}}"#
    )
    .to_string()
}

pub fn assign_frame() -> String {
    let criteria: Vec<String> = (1..=8)
        .map(|i| {
            format!(
                r#"{{"id":"C{i}","text":"Given a configured project When the operator runs check number {i} against the staging environment Then the result is reported"}}"#
            )
        })
        .collect();
    format!(
        concat!(
            r#"{{"schema_version":1,"type":"task.assign","task_id":"T-2026-11-30-0042","task":{{"schema_version":1,"id":"T-2026-11-30-0042","#,
            r#""type":"feature","goal":"Add a health endpoint that reports build metadata and dependency status","status":"QUEUED","#,
            r#""risk":["validation","concurrency"],"spec_refs":["spec/api.md#health","spec/ops.md#probes"],"depends_on":["T-0041"],"#,
            r#""criteria":[{}],"out_of_scope":["metrics export","auth changes"],"budget":{{"iterations":5,"tokens_m":4,"wall_min":45}},"#,
            r#""body":"The endpoint must be cheap, side-effect free and safe to call every second from the orchestrator's probes."}},"#,
            r#""role":"coder","invocation":{{"backend":"agent-sdk","model":"claude-sonnet-4-5","session":"per-task","#,
            r#""system_prompt_ref":"prompts/coder@17","allowed_tools":["Read","Edit","Bash","Grep"],"llm_base_url":"http://127.0.0.1:4000","#,
            r#""budget":{{"usd":3}}}},"seq":1,"attempt":3}}"#
        ),
        criteria.join(",")
    )
}

fn bench(c: &mut Criterion) {
    for (name, frame) in [
        ("usage_progress", usage_frame()),
        ("task_assign", assign_frame()),
    ] {
        let bytes = frame.as_bytes();
        let msg = decode(bytes, true).expect("bench frame is valid");
        let mut group = c.benchmark_group(format!("wire/{name}_{}B", bytes.len()));
        group.measurement_time(Duration::from_secs(4));
        group.warm_up_time(Duration::from_secs(1));
        group.throughput(Throughput::ElementsAndBytes {
            elements: 1,
            bytes: bytes.len() as u64,
        });
        group.bench_function("decode_validate", |b| {
            b.iter(|| decode(black_box(bytes), true).unwrap())
        });
        if name == "usage_progress" {
            group.bench_function("peek_progress", |b| {
                b.iter(|| peek_progress(black_box(&frame)).unwrap().seq)
            });
            group.bench_function("decode_str_validate", |b| {
                b.iter(|| decode_str(black_box(&frame), true).unwrap())
            });
            group.bench_function("decode_owned_validate", |b| {
                b.iter_batched(
                    || frame.clone(),
                    |f| decode_owned(f, true).unwrap(),
                    criterion::BatchSize::SmallInput,
                )
            });
            group.bench_function("decode_validate_read", |b| {
                b.iter(|| {
                    let Message::TaskProgress(m) = decode(black_box(bytes), true).unwrap() else {
                        unreachable!()
                    };
                    m.payload["usage"]["output"].as_u64()
                })
            });
            group.bench_function("decode_full_validate", |b| {
                b.iter(|| decode_full(black_box(&frame), true).unwrap())
            });
            group.bench_function("anchor_serde_json_typed", |b| {
                b.iter(|| anchors::serde_typed::<anchors::WirePayload>(black_box(&frame)))
            });
            group.bench_function("anchor_sonic_rs_typed", |b| {
                b.iter(|| anchors::sonic_typed::<anchors::WirePayload>(black_box(&frame)))
            });
        }
        group.bench_function("decode_tolerant", |b| {
            b.iter(|| decode(black_box(bytes), false).unwrap())
        });
        group.bench_function("encode", |b| b.iter(|| encode(black_box(&msg))));
        let mut buf = Vec::with_capacity(4096);
        group.bench_function("encode_into_reused_buffer", |b| {
            b.iter(|| {
                buf.clear();
                encode_into(black_box(&msg), &mut buf);
                buf.len()
            })
        });
        group.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
