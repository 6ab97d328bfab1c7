//! Events per second through the real runner, and latency from the harness's write to the
//! controller's read of the canonical event line.
//!
//! `cargo bench -p stapel-runner --bench throughput` (env `BENCH_EVENTS`, default
//! 1,000,000; `BENCH_PACED_EVENTS`, default 20,000 for the paced latency run).
//!
//! Setup: `stapel-runner serve` drives `fake-harness --flood N`, which after `turn.start`
//! writes N small `item.delta` events, each stamped with CLOCK_MONOTONIC (`t_ns`) and
//! flushed on its own. This process is the controller: it reads every stream line, and for
//! each event computes `now - t_ns`. Two runs: saturated (the harness writes as fast as it
//! can; latency includes queueing in the pipes) and paced (one event every 100 µs, the harness sleeping in between; latency
//! is the per-event path).

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Instant;

const RUNNER: &str = env!("CARGO_BIN_EXE_stapel-runner");
const FAKE: &str = env!("CARGO_BIN_EXE_fake-harness");

fn now_ns() -> u64 {
    let t = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC).expect("clock");
    t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64
}

fn command(seq: u64, kind: &str, payload: &str) -> String {
    format!(
        r#"{{"schema":"paperclip.prp.command.v1","commandId":"c{seq}","controllerSeq":{seq},"type":"{kind}","issuedAt":"2026-01-01T00:00:00Z","payload":{payload}}}"#
    ) + "\n"
}

fn t_ns_of(line: &str) -> Option<u64> {
    let at = line.find("\"t_ns\":")? + 7;
    let digits: String = line[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

fn percentile(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i] as f64 / 1000.0
}

fn run(events: u64, interval_us: u64) {
    let mut harness_args = vec!["--harness".to_string(), FAKE.into()];
    for a in [
        "--flood".to_string(),
        events.to_string(),
        "--flood-interval-us".into(),
        interval_us.to_string(),
    ] {
        harness_args.extend(["--harness-arg".into(), a]);
    }
    let mut child = Command::new(RUNNER)
        .arg("serve")
        .args(&harness_args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn runner");
    let mut stdin = child.stdin.take().unwrap();
    stdin
        .write_all(
            [
                command(1, "run.prepare", "{}"),
                command(2, "session.open", "{}"),
                command(3, "turn.start", r#"{"turnId":"t1"}"#),
            ]
            .concat()
            .as_bytes(),
        )
        .unwrap();
    let reader = BufReader::with_capacity(1 << 16, child.stdout.take().unwrap());
    let mut latencies = Vec::with_capacity(events as usize);
    let mut first: Option<Instant> = None;
    let mut last = Instant::now();
    let mut terminal = false;
    for line in reader.lines() {
        let line = line.unwrap();
        if let Some(t) = t_ns_of(&line) {
            latencies.push(now_ns().saturating_sub(t));
            first.get_or_insert_with(Instant::now);
            last = Instant::now();
        } else if line.contains("\"run.terminal\"") {
            terminal = true;
            assert!(
                line.contains("\"runTerminalState\":\"succeeded\""),
                "run failed: {line}"
            );
        }
    }
    drop(stdin);
    child.wait().unwrap();
    assert!(terminal, "no run.terminal");
    assert_eq!(latencies.len() as u64, events, "events lost");
    let secs = first
        .map(|f| (last - f).as_secs_f64())
        .unwrap_or(0.0)
        .max(1e-9);
    latencies.sort_unstable();
    let mode = if interval_us == 0 {
        "saturated".to_string()
    } else {
        format!("paced 1/{interval_us}µs")
    };
    println!(
        "runner/{mode}: {events} events in {secs:.3} s = {:.0} events/s; harness write → controller read latency p50 {:.1} µs, p99 {:.1} µs, p99.9 {:.1} µs, max {:.1} µs",
        events as f64 / secs,
        percentile(&latencies, 0.50),
        percentile(&latencies, 0.99),
        percentile(&latencies, 0.999),
        percentile(&latencies, 1.0),
    );
}

fn main() {
    // `cargo test --benches` runs this with `--test`-like args; keep that fast.
    let quick = std::env::args().any(|a| a == "--test" || a == "--list");
    let env = |k: &str, d: u64| {
        std::env::var(k)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(d)
    };
    let (n, paced) = if quick {
        (1_000, 100)
    } else {
        (
            env("BENCH_EVENTS", 1_000_000),
            env("BENCH_PACED_EVENTS", 20_000),
        )
    };
    run(n, 0);
    run(paced, 100);
}
