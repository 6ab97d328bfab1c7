//! A built-in local controller, in the role of seed 002's mock core: it prepares the run,
//! opens a session, starts one turn, answers runtime requests with scripted responses,
//! optionally interrupts the turn, and stops at the terminal event.
//!
//! It performs no I/O: [`AutoController::start`] and [`AutoController::observe`] return
//! the command lines to feed to the runner's controller input, so every command still goes
//! through the local-run machine's ledger exactly as a real controller's would.

use serde_json::{json, Value};
use stapel_runner_protocol::local::{CommandType, RunnerCommand};

/// What the operator does during the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperatorPlan {
    /// Prompt text of the turn.
    pub turn_text: String,
    /// Turn id sent with `turn.start`.
    pub turn_id: String,
    /// Interrupt the turn right after the first canonical event of this type, if any.
    pub interrupt_after: Option<String>,
    /// Answer to `input` requests.
    pub input_answer: String,
    /// Answer runtime requests at all (`false`: a person answers them through
    /// [`AutoController::steer`], as on the live page).
    pub answer_requests: bool,
}

impl Default for OperatorPlan {
    fn default() -> Self {
        Self {
            turn_text: "Run the scripted fake-harness turn.".into(),
            turn_id: "turn_local_1".into(),
            interrupt_after: None,
            input_answer: "local trace".into(),
            answer_requests: true,
        }
    }
}

/// The built-in controller's state.
#[derive(Debug, Clone)]
pub struct AutoController {
    plan: OperatorPlan,
    next_seq: u64,
    opened: bool,
    turn_started: bool,
    interrupted: bool,
    terminal_seen: bool,
}

impl AutoController {
    /// A controller following `plan`.
    pub fn new(plan: OperatorPlan) -> Self {
        Self {
            plan,
            next_seq: 1,
            opened: false,
            turn_started: false,
            interrupted: false,
            terminal_seen: false,
        }
    }

    /// `true` once `run.terminal` was observed.
    pub fn saw_terminal(&self) -> bool {
        self.terminal_seen
    }

    fn command(&mut self, kind: CommandType, payload: Value) -> String {
        let seq = self.next_seq;
        self.next_seq += 1;
        let mut cmd = RunnerCommand::new(format!("cmd_auto_{seq:03}"), seq, kind);
        if let Value::Object(p) = payload {
            cmd.payload = p;
        }
        let mut line = cmd.to_value().to_string();
        line.push('\n');
        line
    }

    /// A command chosen from outside (a person on the live page): the next `commandId`
    /// and `controllerSeq`, so it goes through the machine's ledger like every other
    /// command. Returns `(commandId, line)`.
    pub fn steer(
        &mut self,
        kind: CommandType,
        payload: serde_json::Map<String, Value>,
    ) -> (String, String) {
        let id = format!("cmd_auto_{:03}", self.next_seq);
        (id, self.command(kind, Value::Object(payload)))
    }

    /// A `run.cancel` command (the hub cancelled the task): the machine ends the harness
    /// and the run terminates as cancelled.
    pub fn cancel(&mut self, reason: &str) -> String {
        self.command(CommandType::RunCancel, json!({"reason": reason}))
    }

    /// The first command: `run.prepare`.
    pub fn start(&mut self) -> Vec<String> {
        vec![self.command(CommandType::RunPrepare, json!({}))]
    }

    /// Look at one `paperclip.runner.stream.v1` line the runner wrote and return the
    /// commands to send in response.
    pub fn observe(&mut self, stream_line: &str) -> Vec<String> {
        let Ok(v) = serde_json::from_str::<Value>(stream_line) else {
            return Vec::new();
        };
        let msg = &v["message"];
        if msg["kind"] != "event" {
            return Vec::new();
        }
        let event = &msg["event"];
        let event_type = event["eventType"].as_str().unwrap_or_default();
        let mut out = Vec::new();
        match event_type {
            "harness.ready" if !self.opened => {
                self.opened = true;
                out.push(self.command(CommandType::SessionOpen, json!({})));
            }
            "session.started" if !self.turn_started => {
                self.turn_started = true;
                let payload = json!({"turnId": self.plan.turn_id, "text": self.plan.turn_text});
                out.push(self.command(CommandType::TurnStart, payload));
            }
            "runtime_request.created" if self.plan.answer_requests => {
                let request = &event["payload"]["request"];
                let id = request["requestId"].as_str().unwrap_or_default().to_owned();
                let response = match request["type"].as_str() {
                    Some("permission") => {
                        let choice = request["choices"][0]["key"].as_str().unwrap_or("allow");
                        json!({"choice": choice})
                    }
                    _ => json!({"text": self.plan.input_answer}),
                };
                out.push(self.command(
                    CommandType::RequestResolve,
                    json!({"requestId": id, "response": response}),
                ));
            }
            "run.terminal" => self.terminal_seen = true,
            _ => {}
        }
        if !self.interrupted && self.plan.interrupt_after.as_deref() == Some(event_type) {
            self.interrupted = true;
            out.push(self.command(
                CommandType::TurnInterrupt,
                json!({"turnId": self.plan.turn_id, "reason": "operator"}),
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(t: &str, payload: Value) -> String {
        json!({"schema":"paperclip.runner.stream.v1","message":{"kind":"event","event":{"eventType":t,"payload":payload}}})
            .to_string()
    }

    #[test]
    fn drives_prepare_open_turn_and_answers_requests_in_sequence() {
        let mut c = AutoController::new(OperatorPlan {
            interrupt_after: Some("item.started".into()),
            ..OperatorPlan::default()
        });
        let mut lines = c.start();
        lines.extend(c.observe(&event("harness.ready", json!({}))));
        lines.extend(c.observe(&event("harness.ready", json!({}))));
        lines.extend(c.observe(&event("session.started", json!({}))));
        lines.extend(c.observe(&event(
            "runtime_request.created",
            json!({"request":{"requestId":"r1","type":"permission","choices":[{"key":"allow"},{"key":"deny"}]}}),
        )));
        lines.extend(c.observe(&event("item.started", json!({}))));
        lines.extend(c.observe(&event("item.started", json!({}))));
        let cmds: Vec<Value> = lines
            .iter()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let kinds: Vec<&str> = cmds.iter().map(|c| c["type"].as_str().unwrap()).collect();
        assert_eq!(
            kinds,
            [
                "run.prepare",
                "session.open",
                "turn.start",
                "request.resolve",
                "turn.interrupt"
            ]
        );
        let seqs: Vec<u64> = cmds
            .iter()
            .map(|c| c["controllerSeq"].as_u64().unwrap())
            .collect();
        assert_eq!(seqs, [1, 2, 3, 4, 5]);
        assert_eq!(
            cmds[3]["payload"],
            json!({"requestId":"r1","response":{"choice":"allow"}})
        );
        assert!(!c.saw_terminal());
        c.observe(&event("run.terminal", json!({})));
        assert!(c.saw_terminal());
    }
}
