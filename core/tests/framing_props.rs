//! Property tests of the line framer: output is independent of chunking, matches a naive
//! reference model, the partial-line buffer never exceeds its bound, and the bounded
//! queue of ready lines (backpressure) changes nothing but when lines come out.

use proptest::prelude::*;
use stapel_runner_protocol::framing::{FramerConfig, LineFramer};

#[derive(Debug, PartialEq, Clone)]
enum Out {
    Line(String),
    TooLong(u64),
    BadUtf8(u64),
}

fn run(input: &[u8], cuts: &[usize], max: usize) -> Vec<Out> {
    let mut f = LineFramer::new(FramerConfig::with_max_line_bytes(max));
    let mut out = Vec::new();
    let mut start = 0;
    let mut points: Vec<usize> = cuts.iter().map(|c| c % (input.len() + 1)).collect();
    points.sort_unstable();
    points.push(input.len());
    for p in points {
        assert_eq!(f.push(&input[start..p]).unwrap(), p - start);
        assert!(
            f.buffered_bytes() <= max,
            "buffered {} > {max}",
            f.buffered_bytes()
        );
        start = p;
        drain(&mut f, &mut out);
    }
    f.finish();
    drain(&mut f, &mut out);
    out
}

fn drain(f: &mut LineFramer, out: &mut Vec<Out>) {
    use stapel_runner_protocol::framing::FramingError as E;
    while let Some(item) = f.poll_line() {
        out.push(match item {
            Ok(l) => Out::Line(l),
            Err(E::LineTooLong { line_number, .. }) => Out::TooLong(line_number),
            Err(E::InvalidUtf8 { line_number, .. }) => Out::BadUtf8(line_number),
            Err(e) => panic!("unexpected {e}"),
        });
    }
}

/// The obvious, unbounded implementation of the same rules.
fn reference(input: &[u8], max: usize) -> Vec<Out> {
    let mut out = Vec::new();
    let mut parts: Vec<&[u8]> = input.split(|b| *b == b'\n').collect();
    if parts.last().is_some_and(|l| l.is_empty()) {
        parts.pop();
    }
    for (i, raw) in parts.into_iter().enumerate() {
        let n = i as u64 + 1;
        if raw.len() > max {
            out.push(Out::TooLong(n));
            continue;
        }
        let line = raw.strip_suffix(b"\r").unwrap_or(raw);
        if line.is_empty() {
            continue;
        }
        match std::str::from_utf8(line) {
            Ok(s) => out.push(Out::Line(s.to_owned())),
            Err(_) => out.push(Out::BadUtf8(n)),
        }
    }
    out
}

fn bytes() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(
        prop_oneof![
            4 => prop::sample::select(b"ab{}\":,x".to_vec()),
            2 => Just(b'\n'),
            1 => Just(b'\r'),
            1 => prop::sample::select(vec![0xc3u8, 0xbc, 0xff, 0xe2, 0x98, 0x83]),
        ],
        0..400,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn chunking_does_not_change_output(input in bytes(), cuts in prop::collection::vec(any::<usize>(), 0..40), max in 1usize..40) {
        let whole = run(&input, &[], max);
        let chunked = run(&input, &cuts, max);
        prop_assert_eq!(&whole, &chunked);
        prop_assert_eq!(whole, reference(&input, max));
    }

    #[test]
    fn buffer_never_exceeds_bound(len in 0usize..5000, max in 1usize..64, chunk in 1usize..300) {
        let input = vec![b'z'; len];
        let mut f = LineFramer::new(FramerConfig::with_max_line_bytes(max));
        for c in input.chunks(chunk) {
            f.push(c).unwrap();
            prop_assert!(f.buffered_bytes() <= max);
            prop_assert!(f.ready_len() <= 1, "one oversized line yields at most one error");
        }
    }

    #[test]
    fn bounded_queue_changes_nothing_but_timing(
        input in bytes(),
        cuts in prop::collection::vec(any::<usize>(), 0..40),
        max in 1usize..40,
        max_lines in 1usize..4,
        max_bytes in 0usize..16,
    ) {
        let mut config = FramerConfig::with_max_line_bytes(max);
        config.max_ready_lines = max_lines;
        config.max_ready_bytes = max_bytes;
        let mut f = LineFramer::new(config.clone());
        let mut out = Vec::new();
        let mut start = 0;
        let mut points: Vec<usize> = cuts.iter().map(|c| c % (input.len() + 1)).collect();
        points.sort_unstable();
        points.push(input.len());
        for p in points {
            let mut rest = &input[start..p];
            start = p;
            loop {
                let taken = f.push(rest).unwrap();
                prop_assert!(taken <= rest.len());
                // Every push here follows a full drain: an empty queue always takes a step.
                prop_assert!(taken > 0 || rest.is_empty());
                prop_assert!(f.ready_len() <= max_lines);
                prop_assert!(f.ready_bytes() < max_bytes + max + 1);
                prop_assert!(f.buffered_bytes() <= max);
                prop_assert!(taken == rest.len() || f.is_full(), "a push stops only at a full queue");
                drain(&mut f, &mut out);
                rest = &rest[taken..];
                if rest.is_empty() {
                    break;
                }
            }
        }
        f.finish();
        drain(&mut f, &mut out);
        prop_assert_eq!(&out, &reference(&input, max));

        // `push_all` hands over the same items.
        let mut g = LineFramer::new(config);
        let mut all = Vec::new();
        g.push_all(&input, |item| all.push(item)).unwrap();
        g.finish();
        all.extend(std::iter::from_fn(|| g.poll_line()));
        let mut h = LineFramer::new(FramerConfig::with_max_line_bytes(max));
        let mut unbounded = Vec::new();
        h.push(&input).unwrap();
        h.finish();
        unbounded.extend(std::iter::from_fn(|| h.poll_line()));
        prop_assert_eq!(all, unbounded);
    }
}
