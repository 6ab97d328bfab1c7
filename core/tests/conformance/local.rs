//! Area `local`: the local-run machine of seed 002, driven by controller and harness
//! bytes, process facts and timeouts. Every step compares the FULL output list and the
//! timer; an independent oracle (see [`Oracle`]) checks the envelope facts and the
//! lifecycle properties of seed 002 over the whole vector. Vocabulary:
//! `conformance/README.md`.

use std::collections::HashMap;

use serde_json::{json, Value};
use stapel_runner_protocol::local::{Input, LocalConfig, LocalRun, Output};

use crate::common::{hex, same, steps};

/// The bytes of `<key>` (JSON value → compact text plus `\n`), `<key>_text` (UTF-8 as is)
/// or `<key>_hex` (hex bytes as is).
fn bytes_of(input: &Value, key: &str) -> Result<Option<Vec<u8>>, String> {
    if let Some(v) = input.get(key) {
        return Ok(Some(format!("{v}\n").into_bytes()));
    }
    if let Some(s) = input.get(format!("{key}_text")) {
        return s
            .as_str()
            .map(|s| Some(s.as_bytes().to_vec()))
            .ok_or_else(|| format!("{key}_text must be a string"));
    }
    if let Some(s) = input.get(format!("{key}_hex")) {
        return hex(s
            .as_str()
            .ok_or_else(|| format!("{key}_hex must be a string"))?)
        .map(Some);
    }
    Ok(None)
}

fn opt_i32(v: &Value, key: &str) -> Result<Option<i32>, String> {
    match v.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(n) => n
            .as_i64()
            .and_then(|n| i32::try_from(n).ok())
            .map(Some)
            .ok_or_else(|| format!("{key} must be an integer or null")),
    }
}

fn parse_input(input: &Value) -> Result<Input, String> {
    if let Some(b) = bytes_of(input, "controller")? {
        return Ok(Input::ControllerBytes(b));
    }
    if input.get("controller_eof").is_some() {
        return Ok(Input::ControllerEof);
    }
    if let Some(b) = bytes_of(input, "harness")? {
        return Ok(Input::HarnessStdout(b));
    }
    if let Some(b) = bytes_of(input, "stderr")? {
        return Ok(Input::HarnessStderr(b));
    }
    if let Some(s) = input.get("harness_spawned") {
        let pid = s
            .get("pid")
            .and_then(Value::as_u64)
            .and_then(|p| u32::try_from(p).ok())
            .ok_or("harness_spawned needs a u32 pid")?;
        return Ok(Input::HarnessSpawned { pid });
    }
    if let Some(s) = input.get("harness_spawn_failed") {
        let message = s
            .get("message")
            .and_then(Value::as_str)
            .ok_or("harness_spawn_failed needs a message")?
            .to_owned();
        return Ok(Input::HarnessSpawnFailed { message });
    }
    if let Some(e) = input.get("harness_exited") {
        return Ok(Input::HarnessExited {
            code: opt_i32(e, "code")?,
            signal: opt_i32(e, "signal")?,
        });
    }
    if input.get("timeout").is_some() {
        return Ok(Input::Timeout);
    }
    Err(format!("unknown input {input}"))
}

fn parse_line(line: &str) -> Result<Value, String> {
    serde_json::from_str(line).map_err(|e| format!("output line is not JSON ({e}): {line}"))
}

/// The JSON form of an output (see the docs).
fn output_json(o: &Output) -> Result<Value, String> {
    Ok(match o {
        Output::ToController(l) => json!({"to_controller": parse_line(l)?}),
        Output::ToHarness(l) => json!({"to_harness": parse_line(l)?}),
        Output::Spawn(s) => json!({"spawn": {"program": s.program, "args": s.args,
            "env": s.env.iter().map(|(k, v)| json!([k, v])).collect::<Vec<_>>(), "new_process_group": s.new_process_group}}),
        Output::CloseHarnessStdin => json!({"close_harness_stdin": true}),
        Output::Signal { group, signal } => {
            json!({"signal": {"group": group, "signal": signal.as_str()}})
        }
        Output::Exit(c) => json!({"exit": c}),
        other => return Err(format!("unknown output {other:?}")),
    })
}

/// An independent model of seed 002's lifecycle facts, checked over every output of a
/// vector (FACTS.md: the canonical event envelope, the `terminal_emitted` latch, group
/// supervision, one receipt per command):
///
/// * every event has the `paperclip.prp.event.v1` envelope with `sourceSeq` 1, 2, 3, …,
///   `sourceEventId` `event_<runId>_<seq:03>`, the configured ids, `sourceKind` `runner`,
///   `schemaVersion` 1, the seed's priority table and `emittedAt` start + (seq−1)·step;
/// * at most one `run.terminal`, no event after it, and `exit` only after it (except
///   `exit 1` with no event at all: the controller closed before `run.prepare`);
/// * the spawn request is the configured program and args in a new process group with
///   exactly the allowed names of the offered environment, sorted by name;
/// * every signal targets the group of the reported `harness_spawned` pid, and none is
///   sent before it; KILL at most once;
/// * `harness.exited` reports the fed exit and whether a result was proposed;
///   `run.terminal` follows it directly, repeats both, derives its turn/run states from its
///   reason (FACTS.md's table), is decided by a protocol violation exactly when a
///   `runner.diagnostic` was emitted, and never calls an invalid proposal contradicted;
/// * every receipt answers a command line that was fed, at most as often as it was fed.
struct Oracle {
    /// The vector's config.
    config: Value,
    run_id: String,
    session_id: String,
    instance_id: String,
    clock_start_ms: u64,
    clock_step_ms: u64,
    next_seq: u64,
    terminal_seen: bool,
    pid: Option<u64>,
    kills: u32,
    /// Fed `(commandId, controllerSeq)` lines minus their receipts.
    unanswered: HashMap<(String, u64), i64>,
    /// Controller bytes after the last newline.
    partial: Vec<u8>,
    /// An `exit` was output.
    exited: bool,
    /// The `processExit` the fed `harness_exited` implies.
    exit: Option<Value>,
    /// A `run.result.proposed` was emitted.
    result_seen: bool,
    /// A `runner.diagnostic` (a protocol violation) was emitted.
    violation_seen: bool,
    /// The type of the previous event.
    last_event: String,
}

fn priority_of(event_type: &str) -> u64 {
    match event_type {
        "run.result.proposed"
        | "run.terminal"
        | "turn.completed"
        | "turn.failed"
        | "turn.interrupted"
        | "harness.exited" => 0,
        "item.delta" | "harness.diagnostic" | "runner.diagnostic" => 2,
        _ => 1,
    }
}

/// `unix_ms` as `YYYY-MM-DDTHH:MM:SS.mmmZ` (civil-from-days, independent of the core).
fn rfc3339(unix_ms: u64) -> String {
    let (secs, ms) = (unix_ms / 1000, unix_ms % 1000);
    let (days, sod) = ((secs / 86_400) as i64, secs % 86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{ms:03}Z",
        sod / 3600,
        sod / 60 % 60,
        sod % 60
    )
}

impl Oracle {
    fn new(config: &Value) -> Self {
        let s = |k: &str, d: &str| {
            config
                .get(k)
                .and_then(Value::as_str)
                .unwrap_or(d)
                .to_owned()
        };
        let n = |k: &str, d: u64| config.get(k).and_then(Value::as_u64).unwrap_or(d);
        Self {
            config: config.clone(),
            run_id: s("run_id", "run_local"),
            session_id: s("normalized_session_id", "session_local"),
            instance_id: s("source_instance_id", "runner_local"),
            clock_start_ms: n("clock_start_ms", 1_767_225_600_000),
            clock_step_ms: n("clock_step_ms", 1),
            next_seq: 1,
            terminal_seen: false,
            pid: None,
            kills: 0,
            unanswered: HashMap::new(),
            partial: Vec::new(),
            exited: false,
            exit: None,
            result_seen: false,
            violation_seen: false,
            last_event: String::new(),
        }
    }

    /// Note the command lines of a controller input (any chunking; a line counts once it
    /// is complete).
    fn feed(&mut self, input: &Value) -> Result<(), String> {
        let Some(bytes) = bytes_of(input, "controller")? else {
            return Ok(());
        };
        self.partial.extend_from_slice(&bytes);
        while let Some(end) = self.partial.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = self.partial.drain(..=end).collect();
            let Ok(cmd) = serde_json::from_slice::<Value>(&line) else {
                continue;
            };
            if let (Some(id), Some(seq)) = (
                cmd.get("commandId").and_then(Value::as_str),
                cmd.get("controllerSeq").and_then(Value::as_u64),
            ) {
                *self.unanswered.entry((id.to_owned(), seq)).or_default() += 1;
            }
        }
        Ok(())
    }

    /// The spawn request: the configured program and args in a new process group, and
    /// exactly the allowed names of the offered environment, sorted by name (FACTS.md:
    /// `env_clear()`, then only the allowed names).
    fn spawn(&self, sp: &Value) -> Result<(), String> {
        let c = &self.config;
        let program = c
            .get("harness_program")
            .cloned()
            .unwrap_or(json!("fake-harness"));
        let args = c.get("harness_args").cloned().unwrap_or(json!([]));
        let allow = c.get("env_allow").cloned().unwrap_or(json!(["PATH"]));
        let offered = c.get("harness_env").cloned().unwrap_or(json!({}));
        let mut env: Vec<Value> = offered
            .as_object()
            .into_iter()
            .flatten()
            .filter(|(k, _)| allow.as_array().into_iter().flatten().any(|a| a == *k))
            .map(|(k, v)| json!([k, v]))
            .collect();
        env.sort_by(|a, b| a[0].as_str().cmp(&b[0].as_str()));
        let want = json!({"program": program, "args": args, "env": env, "new_process_group": true});
        if *sp != want {
            return Err(format!("spawn {sp} != {want}"));
        }
        Ok(())
    }

    /// Once the run is over, every fed command line has had exactly one receipt.
    fn finish(&self) -> Result<(), String> {
        if !self.exited {
            return Ok(());
        }
        match self.unanswered.iter().find(|(_, n)| **n != 0) {
            Some((key, n)) => Err(format!(
                "command {key:?} has {n} unanswered line(s) at the end"
            )),
            None => Ok(()),
        }
    }

    /// Note the facts of an input the machine accepted.
    fn accepted(&mut self, input: &Value) {
        if let Some(p) = input.get("harness_spawned").and_then(|s| s.get("pid")) {
            self.pid = p.as_u64();
        }
        if let Some(e) = input.get("harness_exited") {
            let code = e.get("code").cloned().unwrap_or(Value::Null);
            let signal = e.get("signal").cloned().unwrap_or(Value::Null);
            let success = code == 0 && signal.is_null();
            self.exit = Some(json!({"exitCode": code, "success": success, "signal": signal}));
        }
    }

    fn event(&mut self, e: &Value) -> Result<(), String> {
        if self.terminal_seen {
            return Err(format!("event after run.terminal: {e}"));
        }
        let seq = self.next_seq;
        let et = e["eventType"].as_str().ok_or("event without eventType")?;
        let want = [
            ("schema", json!("paperclip.prp.event.v1")),
            (
                "sourceEventId",
                json!(format!("event_{}_{seq:03}", self.run_id)),
            ),
            ("sourceSeq", json!(seq)),
            ("sourceInstanceId", json!(self.instance_id)),
            ("sourceKind", json!("runner")),
            ("runId", json!(self.run_id)),
            ("normalizedSessionId", json!(self.session_id)),
            ("schemaVersion", json!(1)),
            ("priority", json!(priority_of(et))),
            (
                "emittedAt",
                json!(rfc3339(
                    self.clock_start_ms + (seq - 1) * self.clock_step_ms
                )),
            ),
        ];
        for (k, v) in want {
            if e.get(k) != Some(&v) {
                return Err(format!("event {seq}: {k} is {:?}, want {v}", e.get(k)));
            }
        }
        if !e["payload"].is_object() {
            return Err(format!("event {seq}: payload is not an object"));
        }
        self.lifecycle(et, &e["payload"])
            .map_err(|m| format!("event {seq} ({et}): {m}"))?;
        self.next_seq += 1;
        self.terminal_seen = et == "run.terminal";
        self.last_event = et.to_owned();
        Ok(())
    }

    /// The finalization facts: `harness.exited` reports the exit the host fed, and
    /// `run.terminal` follows it directly, repeats that exit, states whether a result was
    /// proposed and derives its states from its reason as seed 002 does.
    fn lifecycle(&mut self, et: &str, p: &Value) -> Result<(), String> {
        match et {
            "run.result.proposed" => self.result_seen = true,
            "runner.diagnostic" => self.violation_seen = true,
            "harness.exited" => {
                let want = self.exit.clone().ok_or("no harness_exited was fed")?;
                if p["processExit"] != want {
                    return Err(format!("processExit {} != fed {want}", p["processExit"]));
                }
                if p["semanticResultObserved"] != self.result_seen {
                    return Err("semanticResultObserved disagrees with the events".into());
                }
            }
            "run.terminal" => {
                let r = &p["reconciliation"];
                if self.exit.is_some() && self.last_event != "harness.exited" {
                    return Err("run.terminal does not follow harness.exited".into());
                }
                let exit = self.exit.clone().unwrap_or(Value::Null);
                if r["processExit"] != exit || r["authority"] != "runner" {
                    return Err(format!("reconciliation {r} disagrees with the exit {exit}"));
                }
                if r["semanticResultObserved"] != self.result_seen {
                    return Err("semanticResultObserved disagrees with the events".into());
                }
                let reason = r["reason"].as_str().unwrap_or_default();
                let (turn, run) = match reason {
                    "turn_interrupted" => ("interrupted", "cancelled"),
                    "run_cancelled" | "controller_closed" => ("cancelled", "cancelled"),
                    "successful_process_and_result" => ("completed", "succeeded"),
                    "harness_protocol_violation"
                    | "harness_process_failed"
                    | "semantic_result_missing"
                    | "request_expired" => ("failed", "failed"),
                    other => return Err(format!("unknown reason {other:?}")),
                };
                if p["turnTerminalState"] != turn || p["runTerminalState"] != run {
                    return Err(format!("states do not follow the reason {reason}"));
                }
                if (reason == "harness_protocol_violation") != self.violation_seen {
                    return Err("a violation must decide the terminal, and only a violation".into());
                }
                let success = exit["success"] == true;
                if reason == "successful_process_and_result" && !(success && self.result_seen) {
                    return Err("success without a successful exit and a result".into());
                }
                if r["proposalContradicted"] == true && r["proposalValid"] != true {
                    return Err("an invalid proposal cannot be contradicted".into());
                }
                if p["harnessTerminalProposal"].is_null() && r["proposalValid"] != false {
                    return Err("no proposal, yet proposalValid".into());
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn output(&mut self, o: &Value) -> Result<(), String> {
        if let Some(m) = o.get("to_controller") {
            if m["schema"] != "paperclip.runner.stream.v1" {
                return Err(format!("stream line with schema {}", m["schema"]));
            }
            let msg = &m["message"];
            match msg["kind"].as_str() {
                Some("event") => self.event(&msg["event"])?,
                Some("command_receipt") => {
                    let key = (
                        msg["commandId"].as_str().unwrap_or_default().to_owned(),
                        msg["controllerSeq"].as_u64().unwrap_or_default(),
                    );
                    let left = self.unanswered.entry(key.clone()).or_default();
                    *left -= 1;
                    if *left < 0 {
                        return Err(format!("receipt {key:?} answers no fed command"));
                    }
                }
                Some("diagnostic") => {}
                other => return Err(format!("unknown stream message kind {other:?}")),
            }
        }
        if let Some(sp) = o.get("spawn") {
            self.spawn(sp)?;
        }
        if let Some(s) = o.get("signal") {
            if self.pid.is_none() || s["group"].as_u64() != self.pid {
                return Err(format!(
                    "signal {s} does not target the spawned group {:?}",
                    self.pid
                ));
            }
            if s["signal"] == "KILL" {
                self.kills += 1;
                if self.kills > 1 {
                    return Err("a second KILL".into());
                }
            }
        }
        if let Some(code) = o.get("exit") {
            self.exited = true;
            let before_prepare = code == 1 && self.next_seq == 1;
            if !self.terminal_seen && !before_prepare {
                return Err(format!("exit {code} without run.terminal"));
            }
        }
        Ok(())
    }
}

pub fn run(vector: &Value) -> Result<(), String> {
    let config_value = vector.get("config").cloned().unwrap_or_else(|| json!({}));
    let config = LocalConfig::from_value(&config_value);
    if crate::common::check_config(vector, config.as_ref().err().map(|e| (e.code(), e.key())))? {
        return Ok(());
    }
    let config = config.map_err(|e| e.to_string())?;
    let mut machine = LocalRun::new(config).map_err(|e| e.to_string())?;
    let mut oracle = Oracle::new(&config_value);
    let mut now = 0u64;
    for (i, input, expect) in steps(vector) {
        if let Some(n) = input.get("now_ms") {
            now = n
                .as_u64()
                .ok_or(format!("step {i}: now_ms must be a u64"))?;
        }
        let parsed = parse_input(input).map_err(|e| format!("step {i}: {e}"))?;
        oracle.feed(input).map_err(|e| format!("step {i}: {e}"))?;
        let error = match machine.handle_input(now, parsed) {
            Ok(()) => Value::Null,
            Err(e) => json!(e.code()),
        };
        if error.is_null() {
            oracle.accepted(input);
        }
        let mut outputs = Vec::new();
        while let Some(o) = machine.poll_output() {
            let o = output_json(&o).map_err(|e| format!("step {i}: {e}"))?;
            oracle
                .output(&o)
                .map_err(|e| format!("step {i}: oracle: {e}"))?;
            outputs.push(o);
        }
        let timeout = json!(machine.poll_timeout());
        for key in ["outputs", "timeout"] {
            if expect.get(key).is_none() {
                return Err(format!("step {i}: expect has no {key:?}"));
            }
        }
        same(
            i,
            "error",
            &error,
            expect.get("error").unwrap_or(&Value::Null),
        )?;
        same(i, "outputs", &Value::Array(outputs), &expect["outputs"])?;
        same(i, "timeout", &timeout, &expect["timeout"])?;
    }
    oracle.finish()
}
