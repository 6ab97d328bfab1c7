//! The JSONL framer: any chunking of the same bytes yields the same lines and errors as
//! one push, and the framer's memory stays bounded (partial line ≤ the line bound, the
//! ready queue within its bounds plus one step).
#![no_main]

use libfuzzer_sys::fuzz_target;
use stapel_runner_protocol::framing::{FramerConfig, LineFramer, LineResult};
use stapel_runner_protocol_fuzz::Bytes;

fn run(config: &FramerConfig, data: &[u8], cuts: &[usize]) -> Vec<LineResult> {
    let mut f = LineFramer::new(config.clone());
    let mut out = Vec::new();
    let mut at = 0;
    for &cut in cuts.iter().chain(std::iter::once(&data.len())) {
        let end = cut.clamp(at, data.len());
        let mut piece = &data[at..end];
        while !piece.is_empty() {
            let taken = f.push(piece).expect("not finished");
            piece = &piece[taken..];
            assert!(
                f.buffered_bytes() <= config.max_line_bytes.max(1) + 2,
                "partial line over the bound: {}",
                f.buffered_bytes()
            );
            assert!(f.ready_len() <= config.max_ready_lines.max(1) + 1);
            assert!(
                f.ready_bytes() <= config.max_ready_bytes + config.max_line_bytes.max(1) + 2,
                "ready bytes over the bound"
            );
            while let Some(item) = f.poll_line() {
                out.push(item);
            }
        }
        at = end;
    }
    f.finish();
    while let Some(item) = f.poll_line() {
        out.push(item);
    }
    out
}

fuzz_target!(|data: &[u8]| {
    let mut b = Bytes::new(data);
    let mut config = FramerConfig::with_max_line_bytes(1 + usize::from(b.byte() % 64));
    config.skip_empty_lines = b.byte().is_multiple_of(2);
    config.max_ready_lines = 1 + usize::from(b.byte() % 8);
    config.max_ready_bytes = usize::from(b.byte());
    let ncuts = usize::from(b.byte() % 16);
    let mut cuts: Vec<usize> = (0..ncuts).map(|_| usize::from(b.u16())).collect();
    let stream = b.rest();
    cuts.iter_mut().for_each(|c| *c %= stream.len().max(1));
    cuts.sort_unstable();
    let whole = run(&config, stream, &[]);
    let chunked = run(&config, stream, &cuts);
    assert_eq!(whole, chunked, "chunking changed the lines");
    let bytewise: Vec<usize> = (0..stream.len()).collect();
    if stream.len() <= 256 {
        assert_eq!(
            whole,
            run(&config, stream, &bytewise),
            "byte-wise push differs"
        );
    }
});
