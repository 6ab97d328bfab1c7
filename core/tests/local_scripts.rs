//! The seven reference scripts played through the local-run machine by the sans-IO
//! fake-harness player (no processes), checking the expectations of the reference facts.

#[path = "local_sim.rs"]
mod local_sim;

use local_sim::{command, script, scripts_dir, HarnessModel, Sim, PID, WORKER_PID};
use serde_json::{json, Value};
use stapel_runner_protocol::local::{
    LocalConfig, Output, PlayerConfig, ReceiptStatus, Script, SignalKind,
};
use stapel_runner_protocol::reducer::{replay, ReducerConfig, SessionReducer};

fn cfg() -> LocalConfig {
    let mut c = LocalConfig::default();
    c.log_max_lines = 3;
    c.log_max_bytes = 256;
    c
}

fn assert_common_invariants(sim: &Sim) {
    let events = sim.events();
    // Deterministic ids, contiguous sequence, nothing after run.terminal.
    for (i, e) in events.iter().enumerate() {
        let seq = i as u64 + 1;
        assert_eq!(e["sourceSeq"], seq);
        assert_eq!(e["sourceEventId"], format!("event_run_local_{seq:03}"));
        assert_eq!(e["sourceKind"], "runner");
        assert_eq!(e["schemaVersion"], 1);
        assert_eq!(e["runId"], "run_local");
        assert_eq!(e["normalizedSessionId"], "session_local");
    }
    assert_eq!(events.last().unwrap()["eventType"], "run.terminal");
    assert_eq!(
        events
            .iter()
            .filter(|e| e["eventType"] == "run.terminal")
            .count(),
        1
    );
    assert_eq!(
        events
            .iter()
            .filter(|e| e["eventType"] == "harness.exited")
            .count(),
        1
    );
    assert_eq!(sim.runner_exit, Some(0));
    // Live reduction equals the replay of the full list.
    let mut live = SessionReducer::new(ReducerConfig::for_run("run_local"));
    for e in &events {
        live.apply(e).expect("runner events reduce");
    }
    assert_eq!(
        live.snapshot(),
        replay(ReducerConfig::for_run("run_local"), &events)
    );
}

#[test]
fn all_seven_scripts_load_and_names_match_files() {
    let mut names: Vec<String> = std::fs::read_dir(scripts_dir())
        .unwrap()
        .map(|e| {
            e.unwrap()
                .path()
                .file_stem()
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    names.sort();
    assert_eq!(names.len(), 7);
    for n in &names {
        assert_eq!(&script(n).name, n);
    }
    assert_eq!(Script::parse(r#"{"schema":"paperclip.fake_harness.script.v2","name":"x","steps":[{"kind":"exit","code":0}]}"#).unwrap_err().code(), "unsupported_schema");
    assert_eq!(
        Script::parse(
            r#"{"schema":"paperclip.fake_harness.script.v1","name":"x","steps":[{"kind":"dance"}]}"#
        )
        .unwrap_err()
        .code(),
        "unknown_value"
    );
    assert_eq!(
        Script::parse(r#"{"schema":"paperclip.fake_harness.script.v1","name":"x","steps":[]}"#)
            .unwrap_err()
            .code(),
        "invalid_field"
    );
}

#[test]
fn happy_path() {
    let mut sim = Sim::new("happy-path", cfg());
    sim.start_turn("turn_1");
    sim.settle();
    assert_common_invariants(&sim);
    let types = sim.event_types();
    assert_eq!(
        &types[..4],
        [
            "runtime.phase.changed",
            "workspace.ready",
            "harness.starting",
            "harness.ready"
        ]
    );
    assert!(types.contains(&"item.completed".to_string()));
    let executing = types
        .iter()
        .enumerate()
        .position(|(i, t)| {
            t == "runtime.phase.changed" && sim.events()[i]["payload"]["phase"] == "executing"
        })
        .unwrap();
    assert!(
        sim.position("session.started") < executing && executing < sim.position("turn.started")
    );
    assert!(sim
        .events()
        .iter()
        .any(|e| e["itemId"] == "item_phase2_file"));
    assert_eq!(
        sim.events_of("run.result.proposed")[0]["payload"]["reportedWorkDisposition"],
        "done"
    );
    assert!(sim.position("run.result.proposed") < sim.position("harness.exited"));
    assert!(sim.position("harness.exited") < sim.position("run.terminal"));
    let exited = &sim.events_of("harness.exited")[0]["payload"];
    assert_eq!(
        exited["processExit"],
        json!({"exitCode": 0, "success": true, "signal": null})
    );
    assert_eq!(exited["semanticResultObserved"], true);
    assert_eq!(exited["logs"]["lines"].as_array().unwrap().len(), 3);
    assert_eq!(exited["logs"]["droppedLines"], 2);
    assert!(exited["logs"]["retainedBytes"].as_u64().unwrap() <= 256);
    assert_eq!(exited["logs"]["lines"][2], "stdout: verification passed");
    let t = sim.terminal();
    assert_eq!(
        (
            t["turnTerminalState"].as_str(),
            t["runTerminalState"].as_str()
        ),
        (Some("completed"), Some("succeeded"))
    );
    assert_eq!(t["reportedWorkDisposition"], "done");
    assert_eq!(
        t["reconciliation"]["reason"],
        "successful_process_and_result"
    );
    assert_eq!(t["reconciliation"]["proposalContradicted"], false);
    assert!(sim
        .receipts()
        .iter()
        .all(|r| r.status == ReceiptStatus::Accepted));
    // The harness got the three forwarded commands.
    let to_harness: Vec<Value> = sim
        .outputs
        .iter()
        .filter_map(|r| {
            if let Output::ToHarness(l) = &r.output {
                Some(serde_json::from_str(l).unwrap())
            } else {
                None
            }
        })
        .collect();
    assert_eq!(
        to_harness
            .iter()
            .map(|c| c["type"].as_str().unwrap())
            .collect::<Vec<_>>(),
        ["session.open", "turn.start"]
    );
    assert_eq!(to_harness[1]["schema"], "paperclip.fake_harness.command.v1");
    // The turn started by the controller is the one the items belong to.
    assert_eq!(sim.events_of("item.completed")[0]["turnId"], "turn_1");
    // The happy path needs the scripted 15 ms delay and no supervision timer.
    assert_eq!(sim.now, 15);
    // Natural exit: one KILL sweep of the group, no TERM.
    assert_eq!(sim.signals(), vec![(15, SignalKind::Kill)]);
}

#[test]
fn repeated_turn_start_gets_exactly_one_duplicate_receipt() {
    let mut sim = Sim::new("happy-path", cfg());
    sim.send(&command("cmd_prepare", 1, "run.prepare", json!({})));
    sim.send(&command("cmd_open", 2, "session.open", json!({})));
    let turn = command(
        "cmd_turn",
        3,
        "turn.start",
        json!({"turnId": "turn_1", "text": "go"}),
    );
    sim.send(&turn);
    sim.send(&turn);
    sim.settle();
    assert_common_invariants(&sim);
    let dups: Vec<_> = sim
        .receipts()
        .into_iter()
        .filter(|r| r.status == ReceiptStatus::Duplicate)
        .collect();
    assert_eq!(dups.len(), 1);
    assert_eq!(dups[0].command_id, "cmd_turn");
    assert_eq!(dups[0].detail, "equivalent command already applied");
    assert_eq!(sim.events_of("turn.started").len(), 1);
    assert_eq!(sim.events_of("turn.submitted").len(), 1);
    assert_eq!(sim.events_of("run.result.proposed").len(), 1);
}

#[test]
fn permission_and_input_round_trip() {
    let mut sim = Sim::new("permission-input", cfg());
    sim.start_turn("turn_1");
    let mut seq = 4;
    for _ in 0..4 {
        sim.settle();
        let created = sim.events_of("runtime_request.created");
        let resolved = sim.events_of("runtime_request.resolved").len();
        if created.len() > resolved {
            let rid = created[resolved]["payload"]["request"]["requestId"]
                .as_str()
                .unwrap()
                .to_owned();
            sim.send(&command(
                &format!("cmd_resolve_{seq}"),
                seq,
                "request.resolve",
                json!({"requestId": rid, "response": {"choice": "allow"}}),
            ));
            seq += 1;
        }
    }
    sim.settle();
    assert_common_invariants(&sim);
    let types: Vec<Value> = sim
        .events_of("runtime_request.created")
        .iter()
        .map(|e| e["payload"]["request"]["type"].clone())
        .collect();
    assert_eq!(types, [json!("permission"), json!("input")]);
    let resolved = sim.events_of("runtime_request.resolved");
    assert_eq!(resolved.len(), 2);
    assert_eq!(
        resolved[0]["payload"]["requestId"],
        "request_local_runner_permission"
    );
    assert_eq!(
        resolved[0]["payload"]["response"],
        json!({"choice": "allow"})
    );
    assert_eq!(sim.terminal()["runTerminalState"], "succeeded");
    // Resolving an unknown request is rejected.
    let mut sim2 = Sim::new("permission-input", cfg());
    sim2.start_turn("turn_1");
    sim2.send(&command(
        "cmd_bad",
        4,
        "request.resolve",
        json!({"requestId": "nope"}),
    ));
    let last = sim2.receipts().pop().unwrap();
    assert_eq!(
        (last.status, last.detail.as_str()),
        (ReceiptStatus::Rejected, "request nope is not pending")
    );
}

#[test]
fn interrupted_turn_is_cancelled_with_yielded_work_and_exit_130() {
    let mut sim = Sim::new("interrupted", cfg());
    sim.start_turn("turn_1");
    sim.settle();
    assert!(
        sim.events_of("run.terminal").is_empty(),
        "the script waits for the interrupt"
    );
    sim.send(&command("cmd_interrupt", 4, "turn.interrupt", json!({})));
    sim.settle();
    assert_common_invariants(&sim);
    assert_eq!(sim.events_of("turn.interrupted").len(), 1);
    assert_eq!(
        sim.events_of("turn.interrupted")[0]["payload"]["reason"],
        "operator"
    );
    assert_eq!(sim.events_of("run.result.proposed").len(), 1);
    assert_eq!(
        sim.events_of("harness.exited")[0]["payload"]["processExit"]["exitCode"],
        130
    );
    let t = sim.terminal();
    assert_eq!(t["turnTerminalState"], "interrupted");
    assert_eq!(t["runTerminalState"], "cancelled");
    assert_eq!(t["reportedWorkDisposition"], "yielded");
    assert_eq!(t["reconciliation"]["reason"], "turn_interrupted");
    assert_eq!(t["reconciliation"]["proposalContradicted"], false);
}

#[test]
fn error_exit_is_separate_from_the_yielded_result() {
    let mut sim = Sim::new("error", cfg());
    sim.start_turn("turn_1");
    sim.settle();
    assert_common_invariants(&sim);
    let exited = &sim.events_of("harness.exited")[0]["payload"];
    assert_eq!(
        exited["processExit"],
        json!({"exitCode": 7, "success": false, "signal": null})
    );
    assert_eq!(
        exited["logs"]["lines"],
        json!(["stderr: scripted harness failure"])
    );
    assert_eq!(
        sim.events_of("run.result.proposed")[0]["payload"]["reportedWorkDisposition"],
        "yielded"
    );
    let t = sim.terminal();
    assert_eq!(t["runTerminalState"], "failed");
    assert_eq!(t["turnTerminalState"], "failed");
    assert_eq!(t["reportedWorkDisposition"], "yielded");
    assert_eq!(t["reconciliation"]["reason"], "harness_process_failed");
    assert_eq!(t["reconciliation"]["semanticResultObserved"], true);
}

#[test]
fn duplicate_terminal_is_ignored_and_diagnosed() {
    let mut sim = Sim::new("duplicate-terminal", cfg());
    sim.start_turn("turn_1");
    sim.settle();
    assert_common_invariants(&sim);
    let diags = sim.events_of("harness.diagnostic");
    assert_eq!(diags.len(), 1);
    assert_eq!(diags[0]["payload"]["code"], "duplicate_terminal_ignored");
    assert_eq!(
        diags[0]["payload"]["message"],
        "Duplicate terminal event ignored; the first terminal event remains authoritative."
    );
    let t = sim.terminal();
    assert_eq!(
        t["harnessTerminalProposal"]["runTerminalState"], "succeeded",
        "the first proposal stays authoritative"
    );
    assert_eq!(t["runTerminalState"], "succeeded");
}

#[test]
fn linger_worker_is_killed_with_the_group_after_the_grace() {
    let mut c = cfg();
    c.shutdown_grace_ms = 50;
    let model = HarnessModel {
        ignore_term: true,
        ignore_stdin_eof: true,
        silent: false,
    };
    let mut sim = Sim::with_script(script("linger"), c, PlayerConfig::default(), model);
    sim.start_turn("turn_1");
    sim.settle();
    assert!(sim.worker_alive);
    assert!(sim
        .run
        .log_tail()
        .lines()
        .any(|l| l.contains(&format!("\"workerPid\":{WORKER_PID}"))));
    sim.now = 100;
    sim.close_controller();
    assert_eq!(sim.signals(), vec![(100, SignalKind::Term)]);
    assert!(
        sim.harness_alive && sim.worker_alive,
        "TERM is ignored by this harness"
    );
    assert!(sim
        .outputs
        .iter()
        .any(|r| r.output == Output::CloseHarnessStdin));
    sim.run_until(1_000);
    assert_eq!(
        sim.signals(),
        vec![(100, SignalKind::Term), (150, SignalKind::Kill)]
    );
    assert!(!sim.harness_alive && !sim.worker_alive);
    assert_common_invariants(&sim);
    let exited = &sim.events_of("harness.exited")[0]["payload"];
    assert_eq!(
        exited["processExit"],
        json!({"exitCode": null, "success": false, "signal": 9})
    );
    let t = sim.terminal();
    assert_eq!(
        (
            t["turnTerminalState"].as_str(),
            t["runTerminalState"].as_str()
        ),
        (Some("cancelled"), Some("cancelled"))
    );
    assert_eq!(t["reconciliation"]["reason"], "controller_closed");
}

#[test]
fn linger_worker_is_reaped_when_the_leader_dies_on_term() {
    let mut sim = Sim::with_script(
        script("linger"),
        cfg(),
        PlayerConfig::default(),
        HarnessModel {
            ignore_stdin_eof: true,
            ..HarnessModel::default()
        },
    );
    sim.start_turn("turn_1");
    sim.settle();
    sim.send(&command("cmd_cancel", 4, "run.cancel", json!({})));
    // TERM ended the leader; the KILL sweep of the group follows at once.
    assert_eq!(
        sim.signals(),
        vec![(0, SignalKind::Term), (0, SignalKind::Kill)]
    );
    assert!(!sim.worker_alive);
    assert_common_invariants(&sim);
    assert_eq!(sim.terminal()["reconciliation"]["reason"], "run_cancelled");
}

#[test]
fn oversized_stdout_frame_fails_the_run() {
    let mut c = cfg();
    c.max_line_bytes = 512;
    let mut sim = Sim::new("oversized-line", c);
    sim.start_turn("turn_1");
    sim.settle();
    assert_common_invariants(&sim);
    let diag = &sim.events_of("runner.diagnostic")[0]["payload"];
    assert_eq!(diag["code"], "stdout_frame_too_long");
    assert!(diag["message"]
        .as_str()
        .unwrap()
        .contains("exceeded 512 bytes"));
    assert_eq!(sim.signals()[0].1, SignalKind::Term);
    let exited = &sim.events_of("harness.exited")[0]["payload"];
    assert_eq!(
        exited["logs"]["lines"][0],
        "stdout: [harness stdout frame exceeded 512 bytes]"
    );
    let t = sim.terminal();
    assert_eq!(
        (
            t["turnTerminalState"].as_str(),
            t["runTerminalState"].as_str()
        ),
        (Some("failed"), Some("failed"))
    );
    assert_eq!(t["reconciliation"]["reason"], "harness_protocol_violation");
}

#[test]
fn controller_eof_terminates_then_kills_after_the_grace() {
    let mut c = cfg();
    c.shutdown_grace_ms = 300;
    let model = HarnessModel {
        ignore_term: true,
        ignore_stdin_eof: true,
        silent: false,
    };
    let mut sim = Sim::with_script(script("interrupted"), c, PlayerConfig::default(), model);
    sim.start_turn("turn_1");
    sim.settle();
    sim.now = 40;
    sim.close_controller();
    assert_eq!(sim.signals(), vec![(40, SignalKind::Term)]);
    assert_eq!(sim.next_deadline(), Some(340));
    sim.run_until(10_000);
    assert_eq!(
        sim.signals(),
        vec![(40, SignalKind::Term), (340, SignalKind::Kill)]
    );
    assert_common_invariants(&sim);
    assert_eq!(
        sim.events_of("harness.exited")[0]["payload"]["processExit"]["success"],
        false
    );
    assert_eq!(
        sim.terminal()["reconciliation"]["reason"],
        "controller_closed"
    );
}

#[test]
fn controller_close_with_a_cooperative_harness() {
    let mut sim = Sim::new("interrupted", cfg());
    sim.start_turn("turn_1");
    sim.settle();
    sim.close_controller();
    assert_common_invariants(&sim);
    assert_eq!(
        sim.events_of("harness.exited")[0]["payload"]["processExit"]["success"],
        false
    );
    let t = sim.terminal();
    assert_eq!(t["runTerminalState"], "cancelled");
    assert_eq!(t["reconciliation"]["reason"], "controller_closed");
}

#[test]
fn commands_after_completion_are_answered_as_expired() {
    let mut sim = Sim::new("happy-path", cfg());
    sim.start_turn("turn_1");
    sim.settle();
    let before = sim.events().len();
    sim.send(&command(
        "cmd_late",
        4,
        "turn.start",
        json!({"turnId": "turn_2"}),
    ));
    sim.send(&command(
        "cmd_turn",
        3,
        "turn.start",
        json!({"turnId": "turn_1", "text": "Run the fake driver."}),
    ));
    let receipts = sim.receipts();
    let late = &receipts[receipts.len() - 2..];
    for r in late {
        assert_eq!(r.status, ReceiptStatus::Rejected);
        assert_eq!(
            r.detail,
            "This request expired because the local run already finished. Start a new run."
        );
    }
    assert_eq!(sim.events().len(), before, "nothing after run.terminal");
}

#[test]
fn harness_environment_is_an_explicit_allow_list() {
    let mut c = cfg();
    for (k, v) in [
        ("PATH", "/usr/bin"),
        ("PAPERCLIP_API_KEY", "s1"),
        ("OPENAI_API_KEY", "s2"),
        ("EMAIL_AGENTMAIL_GENERAL_API_KEY", "s3"),
        ("HOME", "/root"),
    ] {
        c.harness_env.insert(k.into(), v.into());
    }
    let mut sim = Sim::new("happy-path", c);
    sim.send(&command("cmd_prepare", 1, "run.prepare", json!({})));
    let spawn = sim
        .outputs
        .iter()
        .find_map(|r| {
            if let Output::Spawn(s) = &r.output {
                Some(s.clone())
            } else {
                None
            }
        })
        .unwrap();
    assert_eq!(
        spawn.env,
        vec![("PATH".to_string(), "/usr/bin".to_string())]
    );
    assert!(spawn.new_process_group);
    assert_eq!(spawn.program, "fake-harness");
}

#[test]
fn a_silent_harness_misses_the_ready_deadline() {
    let model = HarnessModel {
        silent: true,
        ..HarnessModel::default()
    };
    let mut sim = Sim::with_script(script("happy-path"), cfg(), PlayerConfig::default(), model);
    sim.send(&command("cmd_prepare", 1, "run.prepare", json!({})));
    sim.send(&command("cmd_open", 2, "session.open", json!({})));
    assert!(
        sim.receipts().is_empty(),
        "the prepare receipt waits for ready; session.open is queued"
    );
    assert_eq!(sim.next_deadline(), Some(2_000));
    sim.run_until(10_000);
    assert_common_invariants(&sim);
    let receipts = sim.receipts();
    assert_eq!(receipts[0].status, ReceiptStatus::Rejected);
    assert_eq!(
        receipts[0].detail,
        "harness did not send ready within 2000 ms"
    );
    assert_eq!(
        (receipts[1].command_id.as_str(), receipts[1].detail.as_str()),
        ("cmd_open", "the harness is not running")
    );
    assert_eq!(
        sim.events_of("runner.diagnostic")[0]["payload"]["code"],
        "harness_ready_timeout"
    );
    assert_eq!(
        sim.terminal()["reconciliation"]["reason"],
        "harness_protocol_violation"
    );
    assert_eq!(sim.signals()[0], (2_000, SignalKind::Term));
    let _ = PID;
}

#[test]
fn delay_override_replaces_script_delays() {
    let mut pc = PlayerConfig::default();
    pc.delay_override_ms = Some(1);
    let mut sim = Sim::with_script(script("happy-path"), cfg(), pc, HarnessModel::default());
    sim.start_turn("turn_1");
    sim.settle();
    assert_eq!(sim.now, 1);
    assert_common_invariants(&sim);
}
