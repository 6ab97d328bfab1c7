//! The fake harness: plays one of the local runner's fake-harness scripts over
//! stdin/stdout JSONL (`paperclip.fake_harness.command.v1` in,
//! `paperclip.fake_harness.message.v1` out) with the core's sans-IO script player. Both the
//! `fake-harness` binary and `stapel-runner fake-harness` run it.
//!
//! A `spawn_worker` step starts a worker process (the same executable with `--worker`) in
//! the harness's process group that sleeps until it is killed, to prove group cleanup.

use crate::scripts;
use stapel_runner_protocol::local::{PlayerConfig, PlayerInput, PlayerOutput, ScriptPlayer};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Command-line options of the fake harness.
#[derive(clap::Args, Debug, Clone)]
pub struct FakeArgs {
    /// Built-in script name (happy-path, permission-input, interrupted, error,
    /// duplicate-terminal, linger, oversized-line) or a path to a script file.
    #[arg(long, default_value = "happy-path")]
    pub script: String,
    /// Override the duration of every `delay` step, in milliseconds.
    #[arg(long)]
    pub delay_ms: Option<u64>,
    /// Internal: run as a lingering worker (sleep until killed).
    #[arg(long, hide = true)]
    pub worker: bool,
    /// Benchmark mode: after `turn.start`, emit this many small `item.delta` events (each
    /// carrying `t_ns`, CLOCK_MONOTONIC at write time), then the happy-path result and
    /// terminal, and exit 0.
    #[arg(long, value_name = "N")]
    pub flood: Option<u64>,
    /// Benchmark mode: wait this many microseconds between flood events (0: none).
    #[arg(long, default_value_t = 0)]
    pub flood_interval_us: u64,
}

/// Run the fake harness with `args`; returns the process exit code. `self_invocation` is
/// the argument prefix that re-invokes the fake harness from the current executable (used
/// to start the lingering worker of a `spawn_worker` step).
pub async fn run(args: FakeArgs, self_invocation: &[&str]) -> i32 {
    if args.worker {
        loop {
            tokio::time::sleep(Duration::from_secs(3600)).await;
        }
    }
    if let Some(n) = args.flood {
        return flood(n, args.flood_interval_us);
    }
    let script = match scripts::load(&args.script) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("fake-harness: {e}");
            return 2;
        }
    };
    let mut config = PlayerConfig::default();
    config.delay_override_ms = args.delay_ms;
    let mut player = ScriptPlayer::new(script, config);
    play(&mut player, self_invocation).await
}

async fn play(player: &mut ScriptPlayer, self_invocation: &[&str]) -> i32 {
    let mut stdin = tokio::io::stdin();
    let mut stdout = tokio::io::stdout();
    let mut buf = vec![0u8; 64 * 1024];
    let mut stdin_open = true;
    // The player's clock: milliseconds since it started.
    let start = tokio::time::Instant::now();
    let now_ms = || u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX);
    let mut input = Some(PlayerInput::Start);
    loop {
        if let Some(i) = input.take() {
            if let Err(e) = player.handle_input(now_ms(), i) {
                eprintln!("fake-harness: {e}");
                return 2;
            }
        }
        while let Some(output) = player.poll_output() {
            match output {
                PlayerOutput::Stdout(line) => {
                    let mut bytes = line.into_bytes();
                    bytes.push(b'\n');
                    if stdout.write_all(&bytes).await.is_err() || stdout.flush().await.is_err() {
                        return 1; // the runner is gone
                    }
                }
                PlayerOutput::SpawnWorker => input = Some(spawn_worker(self_invocation)),
                PlayerOutput::Exit(code) => return code,
                _ => {}
            }
        }
        if input.is_some() {
            continue;
        }
        let deadline = player.poll_timeout();
        let sleep = async {
            match deadline {
                Some(d) => tokio::time::sleep_until(start + Duration::from_millis(d)).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            r = stdin.read(&mut buf), if stdin_open => {
                input = Some(match r {
                    Ok(0) | Err(_) => { stdin_open = false; PlayerInput::StdinEof }
                    Ok(n) => PlayerInput::StdinBytes(buf[..n].to_vec()),
                });
            }
            () = sleep => input = Some(PlayerInput::Timeout),
        }
    }
}

fn spawn_worker(self_invocation: &[&str]) -> PlayerInput {
    let exe = std::env::current_exe().unwrap_or_else(|_| "fake-harness".into());
    match std::process::Command::new(exe)
        .args(self_invocation)
        .arg("--worker")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
    {
        Ok(child) => PlayerInput::WorkerSpawned { pid: child.id() },
        Err(e) => {
            eprintln!("fake-harness: cannot spawn worker: {e}");
            PlayerInput::WorkerSpawned { pid: 0 }
        }
    }
}

/// The benchmark harness: the fake harness's preamble, `n` events, result, terminal.
fn flood(n: u64, interval_us: u64) -> i32 {
    use stapel_runner_protocol::framing::LineFramer;
    use stapel_runner_protocol::local::{
        HarnessCommand, HarnessMessage, HarnessMessageType, ScriptStep,
    };
    use std::io::{Read, Write};

    let happy = scripts::load("happy-path").expect("built-in script");
    let payload_of = |want: &str| {
        happy.steps.iter().find_map(|s| match (s, want) {
            (ScriptStep::Result { payload }, "result")
            | (ScriptStep::Terminal { payload }, "terminal") => Some(payload.clone()),
            _ => None,
        })
    };
    let (result, terminal) = (payload_of("result"), payload_of("terminal"));
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let mut seq = 0u64;
    let mut send = |out: &mut std::io::BufWriter<std::io::StdoutLock<'_>>,
                    t: HarnessMessageType,
                    payload: serde_json::Value| {
        seq += 1;
        let map = match payload {
            serde_json::Value::Object(m) => m,
            _ => serde_json::Map::new(),
        };
        let line = HarnessMessage::new(seq, t, map).to_line();
        out.write_all(line.as_bytes())
            .and_then(|()| out.write_all(b"\n"))
            .and_then(|()| out.flush())
    };
    let event = |event_type: &str, turn: &str, payload: serde_json::Value| {
        let mut e = serde_json::json!({"eventType": event_type, "payload": payload});
        if !turn.is_empty() {
            e["turnId"] = turn.into();
        }
        e
    };
    if send(
        &mut out,
        HarnessMessageType::Ready,
        serde_json::json!({"version": "1.0.0", "script": "flood"}),
    )
    .is_err()
    {
        return 1;
    }
    let mut framer = LineFramer::default();
    let mut stdin = std::io::stdin().lock();
    let mut buf = [0u8; 4096];
    let mut turn_id = None;
    let mut opened = false;
    while turn_id.is_none() {
        let got = match stdin.read(&mut buf) {
            Ok(0) | Err(_) => return 1,
            Ok(k) => k,
        };
        let mut lines = Vec::new();
        if framer
            .push_all(&buf[..got], |item| lines.extend(item.ok()))
            .is_err()
        {
            return 1;
        }
        for line in lines {
            let Ok(cmd) = HarnessCommand::parse(&line) else {
                continue;
            };
            let kind = cmd.command_type.as_str();
            if kind == "session.open" && !opened {
                opened = true;
                let started = event(
                    "session.started",
                    "",
                    serde_json::json!({"driverSessionId": "driver_phase2_fake"}),
                );
                let _ = send(&mut out, HarnessMessageType::Event, started);
                let phase = event(
                    "runtime.phase.changed",
                    "",
                    serde_json::json!({"phase": "executing"}),
                );
                let _ = send(&mut out, HarnessMessageType::Event, phase);
            } else if kind == "turn.start" && opened {
                let id = cmd
                    .payload
                    .get("turnId")
                    .and_then(|v| v.as_str())
                    .unwrap_or("turn_flood")
                    .to_owned();
                let _ = send(
                    &mut out,
                    HarnessMessageType::Event,
                    event("turn.started", &id, serde_json::json!({})),
                );
                turn_id = Some(id);
            }
        }
    }
    let turn = turn_id.unwrap_or_default();
    let interval = std::time::Duration::from_micros(interval_us);
    let mut next = std::time::Instant::now();
    for _ in 0..n {
        if interval_us > 0 {
            // Sleep rather than spin: a spinning harness would steal the runner's core.
            next += interval;
            if let Some(wait) = next.checked_duration_since(std::time::Instant::now()) {
                std::thread::sleep(wait);
            }
        }
        let t_ns = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
            .map(|t| t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64)
            .unwrap_or(0);
        let mut e = event(
            "item.delta",
            &turn,
            serde_json::json!({"text": "x", "t_ns": t_ns}),
        );
        e["itemId"] = "item_flood".into();
        if send(&mut out, HarnessMessageType::Event, e).is_err() {
            return 1;
        }
    }
    let _ = send(
        &mut out,
        HarnessMessageType::Result,
        serde_json::json!({"result": result}),
    );
    let _ = send(
        &mut out,
        HarnessMessageType::Terminal,
        serde_json::json!({"terminal": terminal}),
    );
    0
}
