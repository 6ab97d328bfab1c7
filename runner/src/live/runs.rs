//! One live run: the local-run host loop of `stapel-runner run` in a task, its retained
//! stream, and the channels through which a person's actions reach its controller.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::{json, Map, Value};
use stapel_runner_protocol::admission::AdmissionInput;
use stapel_runner_protocol::local::CommandType;
use tokio::sync::{mpsc, oneshot, watch};

use super::{Shared, MAX_RUN_HISTORY_BYTES};
use crate::controller::{AutoController, OperatorPlan};
use crate::host::{self, Controller, HostOptions, Steer, TaskLink, View};

/// One retained stream message: its SSE event name and data (compact JSON, one line).
#[derive(Debug, Clone)]
pub(crate) struct Message {
    pub(crate) event: &'static str,
    pub(crate) data: Arc<str>,
}

#[derive(Debug, Default)]
pub(crate) struct Log {
    pub(crate) messages: Vec<Message>,
    bytes: usize,
    /// The host loop returned: no message will follow.
    pub(crate) done: bool,
    /// Evicted: its streams end.
    pub(crate) gone: bool,
    cancel_asked: bool,
    dropped: u64,
}

/// A run the server keeps.
#[derive(Debug)]
pub(crate) struct RunState {
    pub(crate) run: String,
    pub(crate) session: String,
    pub(crate) script: String,
    log: Mutex<Log>,
    /// Bumped on every change of the log.
    changed: watch::Sender<u64>,
    steer: Mutex<Option<mpsc::Sender<Steer>>>,
    cancel: Mutex<Option<mpsc::Sender<String>>>,
}

fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The SSE event of one `paperclip.runner.stream.v1` line: `event` (the canonical
/// event), `receipt` (a command receipt) or `diagnostic` (a runner diagnostic), with the
/// envelope's message as data (the event itself for `event`).
fn message_of(line: &str) -> Option<Message> {
    let v: Value = serde_json::from_str(line).ok()?;
    let m = v.get("message")?;
    let (event, data) = match m.get("kind")?.as_str()? {
        "event" => ("event", m.get("event")?.to_string()),
        "command_receipt" => ("receipt", m.to_string()),
        "diagnostic" => ("diagnostic", m.to_string()),
        _ => return None,
    };
    Some(Message {
        event,
        data: data.into(),
    })
}

impl RunState {
    pub(crate) fn log(&self) -> MutexGuard<'_, Log> {
        locked(&self.log)
    }

    pub(crate) fn subscribe(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    fn bump(&self) {
        self.changed.send_modify(|n| *n = n.wrapping_add(1));
    }

    fn push(&self, line: &str) {
        let Some(msg) = message_of(line) else { return };
        let mut cancel = false;
        {
            let mut log = self.log();
            let size = msg.data.len();
            if log.bytes > MAX_RUN_HISTORY_BYTES.saturating_mul(2) {
                log.dropped = log.dropped.saturating_add(1);
                return;
            }
            log.bytes = log.bytes.saturating_add(size);
            log.messages.push(msg);
            if log.bytes > MAX_RUN_HISTORY_BYTES && !log.cancel_asked {
                log.cancel_asked = true;
                cancel = true;
            }
        }
        if cancel {
            eprintln!(
                "stapel-runner live: run {} passed {MAX_RUN_HISTORY_BYTES} bytes of stream; cancelling it",
                self.run
            );
            if let Some(c) = locked(&self.cancel).as_ref() {
                let _ = c.try_send("history_limit".into());
            }
        }
        self.bump();
    }

    fn finish(&self) {
        {
            let mut log = self.log();
            log.done = true;
            if log.dropped > 0 {
                eprintln!(
                    "stapel-runner live: run {} dropped {} stream messages past its bound",
                    self.run, log.dropped
                );
            }
        }
        *locked(&self.steer) = None;
        *locked(&self.cancel) = None;
        self.bump();
    }

    /// Evicted by the admission machine: its streams end.
    pub(crate) fn evict(&self) {
        self.log().gone = true;
        self.bump();
    }

    /// End the run as a closed controller would (shutdown).
    pub(crate) fn close_controller(&self) {
        *locked(&self.steer) = None;
        *locked(&self.cancel) = None;
    }

    /// Queue a person's command for the controller; its `commandId`, or `None` when the
    /// run no longer takes commands.
    pub(crate) async fn steer(
        &self,
        kind: CommandType,
        payload: Map<String, Value>,
    ) -> Option<String> {
        let tx = locked(&self.steer).clone()?;
        let (reply, answer) = oneshot::channel();
        tx.send(Steer {
            kind,
            payload,
            reply,
        })
        .await
        .ok()?;
        answer.await.ok()
    }

    /// The receipt of `command_id` once it is in the stream (`None`: the run ended
    /// without one, or `timeout` passed).
    pub(crate) async fn receipt(&self, command_id: &str, timeout: Duration) -> Option<Value> {
        let mut rx = self.subscribe();
        let mut seen = 0usize;
        let wait = async {
            loop {
                {
                    let log = self.log();
                    for m in log.messages.get(seen..).unwrap_or_default() {
                        if m.event == "receipt" {
                            if let Ok(v) = serde_json::from_str::<Value>(&m.data) {
                                if v.get("commandId").and_then(Value::as_str) == Some(command_id) {
                                    return Some(v);
                                }
                            }
                        }
                    }
                    seen = log.messages.len();
                    if log.done || log.gone {
                        return None;
                    }
                }
                if rx.changed().await.is_err() {
                    return None;
                }
            }
        };
        tokio::time::timeout(timeout, wait).await.ok().flatten()
    }

    /// The start answer's body.
    pub(crate) fn started_body(&self) -> Value {
        json!({
            "runId": self.run,
            "sessionId": self.session,
            "script": self.script,
            "events": format!("/api/runs/{}/events", self.run),
            "actions": format!("/api/runs/{}/actions", self.run),
        })
    }
}

/// Start a run: its state (registered with the server) and the task that drives it.
pub(crate) fn start(
    shared: &Arc<Shared>,
    run: String,
    session: String,
    script: String,
) -> Arc<RunState> {
    let (steer_tx, steer_rx) = mpsc::channel::<Steer>(16);
    let (cancel_tx, cancel_rx) = mpsc::channel::<String>(1);
    let (lines_tx, mut lines_rx) = mpsc::channel::<String>(64);
    let (changed, _) = watch::channel(0u64);
    let state = Arc::new(RunState {
        run: run.clone(),
        session: session.clone(),
        script: script.clone(),
        log: Mutex::new(Log::default()),
        changed,
        steer: Mutex::new(Some(steer_tx)),
        cancel: Mutex::new(Some(cancel_tx)),
    });
    shared.lock().runs.insert(run.clone(), state.clone());
    let opts = shared.options();
    let config = (opts.make_config)(&script, &run, &session);
    // The built-in controller prepares the run, opens the session and starts the turn;
    // a person answers the requests and interrupts (through `steer`).
    let plan = OperatorPlan {
        turn_text: format!("Play the {script} script."),
        turn_id: "turn_live_1".into(),
        interrupt_after: None,
        answer_requests: false,
        ..OperatorPlan::default()
    };
    let host_opts = HostOptions {
        config,
        controller: Controller::Auto(AutoController::new(plan)),
        view: View::Jsonl,
        drain_after_exit: Duration::from_millis(250),
        controller_stall: Duration::from_secs(10),
        wrapper: opts.wrapper.clone(),
        task: Some(TaskLink {
            lines: lines_tx,
            cancel: cancel_rx,
            cwd: None,
            steer: Some(steer_rx),
        }),
    };
    let task_state = state.clone();
    let task_shared = shared.clone();
    let task = tokio::spawn(async move {
        let host = host::run(host_opts);
        tokio::pin!(host);
        let mut host_done = false;
        loop {
            tokio::select! {
                r = &mut host, if !host_done => {
                    host_done = true;
                    if let Err(e) = r {
                        eprintln!("stapel-runner live: run {} could not start: {e}", task_state.run);
                    }
                }
                line = lines_rx.recv() => match line {
                    Some(l) => task_state.push(&l),
                    None => break,
                },
            }
        }
        if !host_done {
            let _ = host.await;
        }
        task_state.finish();
        task_shared.feed(AdmissionInput::RunEnded {
            run: task_state.run.clone(),
        });
    });
    let mut tasks = locked(&shared.run_tasks);
    tasks.retain(|t| !t.is_finished());
    tasks.push(task);
    state
}
