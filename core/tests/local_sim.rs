//! Virtual-time simulation of a local run: the [`LocalRun`] machine wired to the sans-IO
//! [`ScriptPlayer`] (no processes, no clock). Included by the `local_*` test files with
//! `#[path = "local_sim.rs"] mod local_sim;`; compiled on its own it only checks itself.
#![allow(dead_code)]

use std::collections::VecDeque;
use std::path::PathBuf;

use serde_json::{json, Value};
use stapel_runner_protocol::local::{
    CommandReceipt, Input, LocalConfig, LocalRun, Output, PlayerConfig, PlayerInput, PlayerOutput,
    Script, ScriptPlayer, SignalKind, StreamMessage,
};

/// Pid (= process group) of the simulated harness.
pub const PID: u32 = 4242;
/// Pid of the simulated worker.
pub const WORKER_PID: u32 = 4243;
const SIGTERM: i32 = 15;
const SIGKILL: i32 = 9;

/// Directory of the seven reference scripts (copied fixtures).
pub fn scripts_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../conformance/fixtures/paperclip-scripts")
}

/// Load one reference script by name.
pub fn script(name: &str) -> Script {
    let path = scripts_dir().join(format!("{name}.json"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    Script::parse(&text).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// A `paperclip.prp.command.v1` command value.
pub fn command(id: &str, seq: u64, ty: &str, payload: Value) -> Value {
    json!({"schema": "paperclip.prp.command.v1", "commandId": id, "controllerSeq": seq, "type": ty,
           "issuedAt": "2026-01-01T00:00:00.000Z", "payload": payload})
}

/// How the simulated harness process reacts to its environment.
#[derive(Debug, Clone, Copy, Default)]
pub struct HarnessModel {
    /// The process survives SIGTERM (only SIGKILL ends it).
    pub ignore_term: bool,
    /// The process does not notice its stdin closing.
    pub ignore_stdin_eof: bool,
    /// The process never speaks (no `ready`): it is spawned but the player is not started.
    pub silent: bool,
}

/// One recorded output of the machine, with the virtual time it was produced at.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub at: u64,
    pub output: Output,
}

pub struct Sim {
    pub run: LocalRun,
    script: Script,
    player_config: PlayerConfig,
    player: Option<ScriptPlayer>,
    pub model: HarnessModel,
    pub now: u64,
    /// Every output, in order.
    pub outputs: Vec<Recorded>,
    pub harness_alive: bool,
    pub harness_stdin_open: bool,
    pub worker_alive: bool,
    pub runner_exit: Option<i32>,
    run_deadline: Option<u64>,
    /// The player's `poll_timeout()` (a scripted delay or a bounded wait).
    player_deadline: Option<u64>,
    runner_inputs: VecDeque<Input>,
    player_inputs: VecDeque<PlayerInput>,
}

impl Sim {
    pub fn new(script_name: &str, config: LocalConfig) -> Self {
        Self::with_script(
            script(script_name),
            config,
            PlayerConfig::default(),
            HarnessModel::default(),
        )
    }

    pub fn with_script(
        script: Script,
        config: LocalConfig,
        player_config: PlayerConfig,
        model: HarnessModel,
    ) -> Self {
        Self {
            run: LocalRun::new(config).expect("valid config"),
            script,
            player_config,
            player: None,
            model,
            now: 0,
            outputs: Vec::new(),
            harness_alive: false,
            harness_stdin_open: false,
            worker_alive: false,
            runner_exit: None,
            run_deadline: None,
            player_deadline: None,
            runner_inputs: VecDeque::new(),
            player_inputs: VecDeque::new(),
        }
    }

    /// Send one command line to the runner.
    pub fn send(&mut self, cmd: &Value) {
        self.send_raw(format!("{cmd}\n").as_bytes());
    }

    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.runner_inputs
            .push_back(Input::ControllerBytes(bytes.to_vec()));
        self.pump();
    }

    pub fn close_controller(&mut self) {
        self.runner_inputs.push_back(Input::ControllerEof);
        self.pump();
    }

    fn harness_died(&mut self, code: Option<i32>, signal: Option<i32>) {
        if !self.harness_alive {
            return;
        }
        self.harness_alive = false;
        self.harness_stdin_open = false;
        self.player = None;
        self.player_deadline = None;
        self.player_inputs.clear();
        self.runner_inputs
            .push_back(Input::HarnessExited { code, signal });
    }

    /// Deliver queued inputs and perform outputs until nothing moves.
    pub fn pump(&mut self) {
        loop {
            let mut moved = false;
            while let Some(input) = self.runner_inputs.pop_front() {
                moved = true;
                self.run
                    .handle_input(self.now, input)
                    .expect("no local misuse in the simulation");
                while let Some(out) = self.run.poll_output() {
                    self.perform(out);
                }
                self.run_deadline = self.run.poll_timeout();
            }
            while let Some(input) = self.player_inputs.pop_front() {
                moved = true;
                let Some(player) = self.player.as_mut() else {
                    continue;
                };
                if player.handle_input(self.now, input).is_err() {
                    continue;
                }
                loop {
                    match self.player.as_mut().and_then(|p| p.poll_output()) {
                        None => break,
                        Some(PlayerOutput::Stdout(line)) => self
                            .runner_inputs
                            .push_back(Input::HarnessStdout(format!("{line}\n").into_bytes())),
                        Some(PlayerOutput::SpawnWorker) => {
                            self.worker_alive = true;
                            self.player_inputs
                                .push_back(PlayerInput::WorkerSpawned { pid: WORKER_PID });
                        }
                        Some(PlayerOutput::Exit(code)) => {
                            self.harness_died(Some(code), None);
                            break;
                        }
                        Some(_) => {}
                    }
                }
                if let Some(p) = self.player.as_ref() {
                    self.player_deadline = p.poll_timeout();
                }
            }
            if !moved {
                break;
            }
        }
    }

    fn perform(&mut self, out: Output) {
        self.outputs.push(Recorded {
            at: self.now,
            output: out.clone(),
        });
        match out {
            Output::ToHarness(line) if self.harness_alive && self.harness_stdin_open => {
                self.player_inputs
                    .push_back(PlayerInput::StdinBytes(format!("{line}\n").into_bytes()));
            }
            Output::Spawn(_) => {
                self.harness_alive = true;
                self.harness_stdin_open = true;
                self.runner_inputs
                    .push_back(Input::HarnessSpawned { pid: PID });
                if !self.model.silent {
                    self.player = Some(ScriptPlayer::new(
                        self.script.clone(),
                        self.player_config.clone(),
                    ));
                    self.player_inputs.push_back(PlayerInput::Start);
                }
            }
            Output::CloseHarnessStdin if self.harness_alive && self.harness_stdin_open => {
                self.harness_stdin_open = false;
                if !self.model.ignore_stdin_eof {
                    self.player_inputs.push_back(PlayerInput::StdinEof);
                }
            }
            Output::Signal { group, signal } => {
                assert_eq!(group, PID, "signals go to the harness group");
                match signal {
                    SignalKind::Term => {
                        if !self.model.ignore_term {
                            self.worker_alive = false;
                            self.harness_died(None, Some(SIGTERM));
                        }
                    }
                    SignalKind::Kill => {
                        self.worker_alive = false;
                        self.harness_died(None, Some(SIGKILL));
                    }
                }
            }
            Output::Exit(code) => self.runner_exit = Some(code),
            _ => {}
        }
    }

    /// Advance virtual time to the next deadline (runner timer or harness delay) and
    /// deliver it. `false` when nothing is scheduled.
    pub fn step_time(&mut self) -> bool {
        let Some(next) = self.next_deadline() else {
            return false;
        };
        self.now = self.now.max(next);
        if self.player_deadline.is_some_and(|d| d <= self.now) {
            self.player_deadline = None;
            self.player_inputs.push_back(PlayerInput::Timeout);
        }
        if self.run_deadline.is_some_and(|d| d <= self.now) {
            self.run_deadline = None;
            self.runner_inputs.push_back(Input::Timeout);
        }
        self.pump();
        true
    }

    /// Step time while something is scheduled, but never past `limit_ms` of virtual time.
    pub fn run_until(&mut self, limit_ms: u64) {
        while self.next_deadline().is_some_and(|d| d <= limit_ms) {
            self.step_time();
        }
    }

    /// Step time until only long timers (≥ 1 s away) remain: lets scripted delays play
    /// out without firing supervision deadlines.
    pub fn settle(&mut self) {
        while self
            .player_deadline
            .is_some_and(|d| d < self.now.saturating_add(1_000))
        {
            self.step_time();
        }
    }

    pub fn next_deadline(&self) -> Option<u64> {
        [self.run_deadline, self.player_deadline]
            .into_iter()
            .flatten()
            .min()
    }

    /// Every stream message sent to the controller, parsed.
    pub fn stream(&self) -> Vec<StreamMessage> {
        self.outputs
            .iter()
            .filter_map(|r| match &r.output {
                Output::ToController(l) => {
                    Some(StreamMessage::parse(l).expect("runner writes valid stream lines"))
                }
                _ => None,
            })
            .collect()
    }

    pub fn events(&self) -> Vec<Value> {
        self.stream()
            .into_iter()
            .filter_map(|m| {
                if let StreamMessage::Event(e) = m {
                    Some(e)
                } else {
                    None
                }
            })
            .collect()
    }

    pub fn event_types(&self) -> Vec<String> {
        self.events()
            .iter()
            .map(|e| e["eventType"].as_str().unwrap().to_owned())
            .collect()
    }

    pub fn events_of(&self, ty: &str) -> Vec<Value> {
        self.events()
            .into_iter()
            .filter(|e| e["eventType"] == ty)
            .collect()
    }

    pub fn position(&self, ty: &str) -> usize {
        self.event_types()
            .iter()
            .position(|t| t == ty)
            .unwrap_or_else(|| panic!("no {ty} event"))
    }

    pub fn receipts(&self) -> Vec<CommandReceipt> {
        self.stream()
            .into_iter()
            .filter_map(|m| {
                if let StreamMessage::CommandReceipt(r) = m {
                    Some(r)
                } else {
                    None
                }
            })
            .collect()
    }

    pub fn diagnostics(&self) -> Vec<(String, String)> {
        self.stream()
            .into_iter()
            .filter_map(|m| {
                if let StreamMessage::Diagnostic { level, message } = m {
                    Some((level.as_str().to_owned(), message))
                } else {
                    None
                }
            })
            .collect()
    }

    pub fn signals(&self) -> Vec<(u64, SignalKind)> {
        self.outputs
            .iter()
            .filter_map(|r| {
                if let Output::Signal { signal, .. } = r.output {
                    Some((r.at, signal))
                } else {
                    None
                }
            })
            .collect()
    }

    pub fn terminal(&self) -> Value {
        let t = self.events_of("run.terminal");
        assert_eq!(t.len(), 1, "exactly one run.terminal");
        t[0]["payload"].clone()
    }

    /// Send run.prepare, session.open and turn.start (seqs 1..3).
    pub fn start_turn(&mut self, turn_id: &str) {
        self.send(&command("cmd_prepare", 1, "run.prepare", json!({})));
        self.send(&command("cmd_open", 2, "session.open", json!({})));
        self.send(&command(
            "cmd_turn",
            3,
            "turn.start",
            json!({"turnId": turn_id, "text": "Run the fake driver."}),
        ));
    }
}

#[test]
fn the_simulation_itself_runs_a_script_to_completion() {
    let mut sim = Sim::new("happy-path", LocalConfig::default());
    sim.start_turn("turn_1");
    sim.settle();
    assert_eq!(sim.runner_exit, Some(0));
    assert!(!sim.harness_alive);
}
