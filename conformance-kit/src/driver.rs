//! The case driver: one of the core's session machines (the kit's side of the
//! conversation), the current socket, and the transcript. Every frame the peer sends
//! goes through the machine, so the peer is judged by the core's rules (its decoder with
//! validation, its sequencing, its `PeerError` codes), not by the kit's.

use std::time::Duration;

use serde_json::{json, Value};
use stapel_runner_protocol::session::{Event, Input, Machine, Output};
use stapel_runner_protocol::wire::{self, Message};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::scenario::matches;
use crate::socket::{Conn, WsIn, WsOut};

/// Longest text kept per transcript entry (longer frames are cut, with their length).
const MAX_ENTRY_CHARS: usize = 1200;

/// One line of a case's transcript.
#[derive(Debug, Clone)]
pub struct Entry {
    /// Milliseconds since the case started.
    pub t_ms: u64,
    /// `in`, `in_binary`, `out`, `out_binary`, `event`, `peer_error`, `close`,
    /// `connected`, `disconnected`, `refused`, `process`, `note`.
    pub kind: &'static str,
    /// The frame or the text of the entry (cut at [`MAX_ENTRY_CHARS`]).
    pub text: String,
    /// The frame as JSON (inbound frames that parse), or the event as JSON.
    pub json: Option<Value>,
}

impl Entry {
    /// The JSON form in reports.
    pub fn to_json(&self) -> Value {
        json!({"t_ms": self.t_ms, "kind": self.kind, "text": self.text})
    }
}

/// A new socket (runner mode: accepted by the listener) or a refused one.
#[derive(Debug)]
pub enum Incoming {
    /// An upgrade that was accepted.
    Conn(Conn),
    /// An upgrade refused (wrong token): why.
    Refused(String),
    /// Runner mode: the runner process under test ended (`expected`: the kit ended it).
    Exited {
        /// The exit status as text.
        status: String,
        /// Whether the kit killed or stopped it.
        expected: bool,
    },
}

/// How the kit answers the peer's pings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pings {
    /// The kit's session answers (a pong with `ack`).
    Session,
    /// Not at all (the ping is not even given to the session).
    Ignore,
    /// A plain pong echoing the nonce, as a peer written to the seed alone sends.
    Plain,
}

/// The driver of one case.
pub struct Driver<M: Machine> {
    /// The kit's session machine.
    pub machine: M,
    start: Instant,
    /// The current socket.
    pub conn: Option<Conn>,
    /// Runner mode: sockets accepted by the listener.
    pub incoming: Option<mpsc::UnboundedReceiver<Incoming>>,
    /// The transcript.
    pub log: Vec<Entry>,
    /// How pings are answered.
    pub pings: Pings,
    /// The last sequenced frame the kit transmitted (for `repeat_last`).
    pub last_sequenced_out: Option<String>,
    /// Violation codes tolerated in every step (hub mode: `ack_ahead`, the hub knowing
    /// more of this runner than the kit's state, which a run does not persist).
    pub tolerated: Vec<&'static str>,
    /// Runner mode: the runner process ended on its own (its status). With no
    /// connection left nothing more can arrive, so a step waiting for the peer ends at
    /// once instead of at its `within_ms`.
    pub peer_exited: Option<String>,
    /// Hub mode: the hub's status hook, a file of JSON lines it appends as its
    /// application receives sequenced frames (`--status-file`; see
    /// [`status_records`]).
    pub status_file: Option<std::path::PathBuf>,
}

fn cut(s: &str) -> String {
    if s.chars().count() <= MAX_ENTRY_CHARS {
        s.to_string()
    } else {
        let head: String = s.chars().take(MAX_ENTRY_CHARS).collect();
        format!("{head}… ({} bytes)", s.len())
    }
}

/// Lower-case hex of `b`.
pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The bytes of a lower-case or upper-case hex string (`None`: not hex).
pub fn unhex(s: &str) -> Option<Vec<u8>> {
    if s.len() % 2 != 0 {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

fn message_json(m: &Message) -> Value {
    serde_json::from_str(&wire::encode(m)).unwrap_or(Value::Null)
}

impl<M: Machine> Driver<M> {
    /// A driver over `machine`, its clock starting now.
    pub fn new(machine: M) -> Self {
        Self {
            machine,
            start: Instant::now(),
            conn: None,
            incoming: None,
            log: Vec::new(),
            pings: Pings::Session,
            last_sequenced_out: None,
            tolerated: Vec::new(),
            peer_exited: None,
            status_file: None,
        }
    }

    /// The machine's clock: milliseconds since the driver started.
    pub fn now_ms(&self) -> u64 {
        self.start.elapsed().as_millis() as u64
    }

    /// Add a transcript entry.
    pub fn note(&mut self, kind: &'static str, text: &str, json: Option<Value>) {
        let t_ms = self.now_ms();
        self.log.push(Entry {
            t_ms,
            kind,
            text: cut(text),
            json,
        });
    }

    /// Attach a new socket (replacing the current one) and tell the machine.
    pub fn attach(&mut self, conn: Conn) {
        if let Some(old) = self.conn.take() {
            let _ = old.tx.send(WsOut::Abort);
            self.note("disconnected", "replaced by a new connection", None);
            let now = self.now_ms();
            let _ = self.machine.handle_input(now, Input::Disconnected);
            self.drain();
        }
        self.conn = Some(conn);
        self.note("connected", "a WebSocket connection is up", None);
        let now = self.now_ms();
        let _ = self.machine.handle_input(now, Input::Connected);
        self.drain();
    }

    /// Drop the socket: `abort` without a close handshake (a cut), else with one.
    pub fn drop_conn(&mut self, abort: bool, why: &str) {
        if let Some(c) = self.conn.take() {
            let _ = c.tx.send(if abort { WsOut::Abort } else { WsOut::Close });
            self.note("disconnected", why, None);
            let now = self.now_ms();
            let _ = self.machine.handle_input(now, Input::Disconnected);
            self.drain();
        }
    }

    /// Send raw text on the socket, bypassing the machine.
    pub fn send_text(&mut self, text: String) {
        if let Some(tx) = self.conn.as_ref().map(|c| c.tx.clone()) {
            self.note("out", &text, None);
            let _ = tx.send(WsOut::Text(text));
        } else {
            self.note("note", "no connection: raw frame not sent", None);
        }
    }

    /// Send raw bytes as a binary message, bypassing the machine.
    pub fn send_binary(&mut self, bytes: Vec<u8>) {
        if let Some(tx) = self.conn.as_ref().map(|c| c.tx.clone()) {
            self.note("out_binary", &hex(&bytes), None);
            let _ = tx.send(WsOut::Binary(bytes));
        } else {
            self.note("note", "no connection: raw frame not sent", None);
        }
    }

    /// Feed a message to the machine as [`Input::Send`] (stamped, kept, transmitted).
    pub fn send_message(&mut self, m: Message) -> Result<(), String> {
        let now = self.now_ms();
        self.machine
            .send(now, m)
            .map_err(|e| format!("the kit's session refused the send: {}", e.code()))?;
        self.drain();
        Ok(())
    }

    /// Feed messages to the machine, but transmit the frames they produce in reverse
    /// order (out-of-order delivery).
    pub fn send_reversed(&mut self, ms: Vec<Message>) -> Result<(), String> {
        let mut frames = Vec::new();
        for m in ms {
            let now = self.now_ms();
            self.machine
                .send(now, m)
                .map_err(|e| format!("the kit's session refused the send: {}", e.code()))?;
            while let Some(o) = self.machine.poll_output() {
                match o {
                    Output::Transmit(f) => frames.push(f),
                    other => self.output(other),
                }
            }
        }
        for f in frames.into_iter().rev() {
            self.last_sequenced_out = Some(f.clone());
            self.send_text(f);
        }
        Ok(())
    }

    /// Perform everything the machine asks for now.
    pub fn drain(&mut self) {
        while let Some(o) = self.machine.poll_output() {
            self.output(o);
        }
    }

    fn output(&mut self, o: Output) {
        match o {
            Output::Transmit(f) => {
                if wire::decode_str(&f, false).is_ok_and(|m| m.message_type().is_sequenced()) {
                    self.last_sequenced_out = Some(f.clone());
                }
                self.send_text(f);
            }
            Output::Event(e) => self.event(e),
            Output::Close(reason) => {
                let code = reason.code().to_string();
                self.note(
                    "close",
                    &format!("the kit's session closes the connection: {code}"),
                    Some(json!({"code": code})),
                );
                self.drop_conn(false, &format!("closed by the kit: {code}"));
            }
        }
    }

    fn event(&mut self, e: Event) {
        match e {
            Event::Hello(h) => {
                let m = message_json(&Message::Hello(h));
                self.note(
                    "event",
                    "hello",
                    Some(json!({"event": "hello", "message": m})),
                );
            }
            Event::Received(m) => {
                let v = message_json(&m);
                self.note(
                    "event",
                    &format!("received {}", wire::encode(&m)),
                    Some(json!({"event": "received", "message": v})),
                );
            }
            Event::InboundGap(r) => self.note(
                "event",
                &format!("inbound_gap {r:?}"),
                Some(json!({"event": "inbound_gap"})),
            ),
            Event::OutboundResync(r) => self.note(
                "event",
                &format!("outbound_resync {r:?}"),
                Some(json!({"event": "outbound_resync"})),
            ),
            Event::PeerError { code, detail } => self.note(
                "peer_error",
                &format!("{code}: {detail}"),
                Some(json!({"code": code})),
            ),
            other => self.note("event", &format!("{other:?}"), None),
        }
    }

    fn inbound(&mut self, m: WsIn) {
        match m {
            WsIn::Text(s) => {
                let parsed: Option<Value> = serde_json::from_str(&s).ok();
                self.note("in", &s, parsed.clone());
                let is_ping = parsed
                    .as_ref()
                    .and_then(|v| v.get("type"))
                    .and_then(Value::as_str)
                    == Some("ping");
                if is_ping && self.pings == Pings::Ignore {
                    self.note("note", "ping not answered (this step ignores pings)", None);
                    return;
                }
                if is_ping && self.pings == Pings::Plain {
                    let nonce = parsed
                        .as_ref()
                        .and_then(|v| v.get("nonce"))
                        .cloned()
                        .unwrap_or(Value::Null);
                    let pong = if nonce.is_null() {
                        json!({"schema_version": 1, "type": "pong"})
                    } else {
                        json!({"schema_version": 1, "type": "pong", "nonce": nonce})
                    };
                    self.send_text(pong.to_string());
                    return;
                }
                let now = self.now_ms();
                let _ = self.machine.handle_input(now, Input::Frame(s));
                self.drain();
            }
            WsIn::Binary(b) => {
                self.note("in_binary", &hex(&b), None);
                // The link's rule: a binary message is decoded strictly as UTF-8.
                match String::from_utf8(b) {
                    Ok(s) => {
                        let now = self.now_ms();
                        let _ = self.machine.handle_input(now, Input::Frame(s));
                        self.drain();
                    }
                    Err(_) => self.note(
                        "peer_error",
                        "invalid_utf8: a binary message that is not UTF-8",
                        Some(json!({"code": "invalid_utf8"})),
                    ),
                }
            }
            WsIn::Closed(why) => {
                self.conn = None;
                self.note("disconnected", &why, None);
                let now = self.now_ms();
                let _ = self.machine.handle_input(now, Input::Disconnected);
                self.drain();
            }
        }
    }

    /// Run the conversation until `done` holds (then `true`) or `deadline` passes
    /// (then `done`'s last answer).
    pub async fn pump(&mut self, deadline: Instant, done: impl Fn(&Self) -> bool) -> bool {
        loop {
            if done(self) {
                return true;
            }
            if self.peer_exited.is_some() && self.conn.is_none() {
                return false;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            let timer = self
                .machine
                .poll_timeout()
                .map(|ms| self.start + Duration::from_millis(ms))
                .unwrap_or(deadline)
                .min(deadline);
            let conn = &mut self.conn;
            let incoming = &mut self.incoming;
            tokio::select! {
                m = async { match conn { Some(c) => c.rx.recv().await, None => std::future::pending().await } } => {
                    match m {
                        Some(m) => self.inbound(m),
                        None => self.inbound(WsIn::Closed("the socket task ended".into())),
                    }
                }
                c = async { match incoming { Some(r) => r.recv().await, None => std::future::pending().await } } => {
                    match c {
                        Some(Incoming::Conn(c)) => self.attach(c),
                        Some(Incoming::Refused(why)) => self.note("refused", &why, None),
                        Some(Incoming::Exited { status, expected }) => {
                            if expected {
                                self.note("process", &format!("the runner ended: {status}"), None);
                            } else {
                                self.note("process", &format!("the runner exited on its own: {status}"), None);
                                self.peer_exited = Some(status);
                            }
                        }
                        None => self.incoming = None,
                    }
                }
                _ = tokio::time::sleep_until(timer) => {
                    let now = self.now_ms();
                    if self.machine.poll_timeout().is_some_and(|t| t <= now) {
                        let _ = self.machine.handle_input(now, Input::Timeout);
                        self.drain();
                    }
                }
            }
        }
    }

    /// Run the conversation for `ms` milliseconds.
    pub async fn wait(&mut self, ms: u64) {
        let deadline = Instant::now() + Duration::from_millis(ms);
        self.pump(deadline, |_| false).await;
    }

    /// Wait for `expect` (its positive keys) from transcript entry `from` on, at most
    /// `within_ms` (the step's `within_ms`, default 10 s); then, for `quiet_ms`, keep the
    /// conversation going and check the negative keys. Returns the failures.
    pub async fn check(&mut self, from: usize, expect: &Value, dup_base: u64) -> Vec<String> {
        let within = expect
            .get("within_ms")
            .and_then(Value::as_u64)
            .unwrap_or(10_000);
        let deadline = Instant::now() + Duration::from_millis(within);
        self.pump(deadline, |d| {
            d.positives(from, expect, dup_base).is_empty() || d.settled(from, expect)
        })
        .await;
        let mut failures = self.positives(from, expect, dup_base);
        if !failures.is_empty() {
            if let Some(st) = &self.peer_exited {
                failures.push(format!("the runner process exited on its own ({st})"));
            }
        }
        if let Some(q) = expect.get("quiet_ms").and_then(Value::as_u64) {
            self.wait(q).await;
        }
        failures.extend(self.negatives(from, expect));
        failures
    }

    fn since(&self, from: usize) -> &[Entry] {
        &self.log[from.min(self.log.len())..]
    }

    fn events(&self, from: usize, name: &str) -> Vec<&Value> {
        self.since(from)
            .iter()
            .filter(|e| e.kind == "event")
            .filter_map(|e| e.json.as_ref())
            .filter(|j| j.get("event").and_then(Value::as_str) == Some(name))
            .collect()
    }

    fn inbound_frames(&self, from: usize) -> Vec<&Value> {
        self.since(from)
            .iter()
            .filter(|e| e.kind == "in")
            .filter_map(|e| e.json.as_ref())
            .collect()
    }

    fn has(&self, from: usize, kind: &str) -> bool {
        self.since(from).iter().any(|e| e.kind == kind)
    }

    /// The status hook's records of `task` against the progress seqs the kit sent for
    /// it in this case: each sent seq recorded exactly once, and in increasing order
    /// (records of seqs below the case's first belong to earlier runs and are ignored).
    fn delivered_once(&self, task: &str) -> Result<(), String> {
        let Some(path) = &self.status_file else {
            return Err("the hub exposes no status hook (hub --status-file)".into());
        };
        let mut sent: Vec<u64> = self
            .log
            .iter()
            .filter(|e| e.kind == "out")
            .filter_map(|e| serde_json::from_str::<Value>(&e.text).ok())
            .filter(|j| j["type"] == "task.progress" && j["task_id"] == task)
            .filter_map(|j| j["seq"].as_u64())
            .collect();
        sent.sort_unstable();
        sent.dedup();
        let Some(&first) = sent.first() else {
            return Err(format!("the kit sent no progress of {task}"));
        };
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("status hook {}: {e}", path.display()))?;
        let got: Vec<u64> = status_records(&text)
            .into_iter()
            .filter(|(t, seq)| t == task && *seq >= first)
            .map(|(_, seq)| seq)
            .collect();
        if got == sent {
            Ok(())
        } else {
            Err(format!(
                "the hub's status hook recorded seqs {got:?} of {task}; the kit sent {sent:?} (each once, in order)"
            ))
        }
    }

    /// Whether waiting longer cannot help: the step expects a hello and the peer's
    /// hello since the step began does not match it.
    fn settled(&self, from: usize, expect: &Value) -> bool {
        // A hub without a status hook will not grow one.
        if expect.get("status_hook") == Some(&Value::Bool(true)) && self.status_file.is_none() {
            return true;
        }
        expect.get("hello").is_some_and(|h| {
            self.events(from, "hello")
                .first()
                .is_some_and(|e| !matches(h, e.get("message")))
        })
    }

    fn positives(&self, from: usize, expect: &Value, dup_base: u64) -> Vec<String> {
        let mut f = Vec::new();
        let want = |k: &str| expect.get(k).is_some_and(|v| v != &Value::Bool(false));
        if want("status_hook") && self.status_file.is_none() {
            f.push("the hub exposes no status hook (hub --status-file)".into());
        }
        if let Some(task) = expect
            .get("status_delivered_once")
            .and_then(|v| v.get("task_id"))
            .and_then(Value::as_str)
        {
            if let Err(e) = self.delivered_once(task) {
                f.push(e);
            }
        }
        if want("connected") && !self.has(from, "connected") {
            f.push("expected a (new) connection from the peer".into());
        }
        if want("disconnected") && !self.has(from, "disconnected") {
            f.push("expected the connection to end".into());
        }
        if let Some(r) = expect.get("refused") {
            let refused = self.since(from).iter().find(|e| e.kind == "refused");
            match refused {
                None => f.push("expected the upgrade to be refused".into()),
                Some(e) => {
                    if let Some(st) = r.get("status").and_then(Value::as_u64) {
                        if !e.text.contains(&format!("HTTP {st}")) {
                            f.push(format!("expected HTTP {st}, got: {}", e.text));
                        }
                    }
                }
            }
        }
        if let Some(h) = expect.get("hello") {
            // The peer's next hello is the one judged: a session says hello once.
            match self.events(from, "hello").first() {
                None => f.push("expected a valid hello".into()),
                Some(e) if !matches(h, e.get("message")) => f.push(format!(
                    "expected a hello matching {h}, got {}",
                    e["message"]
                )),
                Some(_) => {}
            }
        }
        if let Some(Value::Array(pats)) = expect.get("received") {
            let got: Vec<Value> = self
                .events(from, "received")
                .into_iter()
                .map(|e| e["message"].clone())
                .collect();
            if !matches(&Value::Array(pats.clone()), Some(&Value::Array(got))) {
                f.push(format!(
                    "expected delivered messages matching {}",
                    Value::Array(pats.clone())
                ));
            }
        }
        if let Some(Value::Array(pats)) = expect.get("frames") {
            let got: Vec<Value> = self.inbound_frames(from).into_iter().cloned().collect();
            if !matches(&Value::Array(pats.clone()), Some(&Value::Array(got))) {
                f.push(format!(
                    "expected frames from the peer matching {}",
                    Value::Array(pats.clone())
                ));
            }
        }
        for ev in ["inbound_gap", "outbound_resync"] {
            if want(ev) && self.events(from, ev).is_empty() {
                f.push(format!("expected the kit's session to report {ev}"));
            }
        }
        if let Some(Value::Array(alts)) = expect.get("any_of") {
            if !alts
                .iter()
                .any(|a| self.positives(from, a, dup_base).is_empty())
            {
                f.push(format!("expected one of {}", Value::Array(alts.clone())));
            }
        }
        if let Some(n) = expect.get("duplicates_at_least").and_then(Value::as_u64) {
            let d = self.machine.stats().duplicates - dup_base;
            if d < n {
                f.push(format!(
                    "expected at least {n} re-sent (duplicate) frames, got {d}"
                ));
            }
        }
        f
    }

    fn negatives(&self, from: usize, expect: &Value) -> Vec<String> {
        let mut f = Vec::new();
        if let Some(Value::Array(pats)) = expect.get("not_received") {
            for p in pats {
                let allowed = p.get("$at_most").and_then(Value::as_u64).unwrap_or(0) as usize;
                let mut pat = p.clone();
                if let Some(o) = pat.as_object_mut() {
                    o.remove("$at_most");
                }
                let n = self
                    .events(from, "received")
                    .iter()
                    .filter(|e| matches(&pat, e.get("message")))
                    .count();
                if n > allowed {
                    f.push(format!(
                        "delivered {n} message(s) matching {p} (at most {allowed})"
                    ));
                }
            }
        }
        if let Some(Value::Array(pats)) = expect.get("not_frames") {
            for p in pats {
                if self
                    .inbound_frames(from)
                    .iter()
                    .any(|e| matches(p, Some(e)))
                {
                    f.push(format!("the peer sent a frame matching {p}"));
                }
            }
        }
        if expect.get("still_connected") == Some(&Value::Bool(true))
            && (self.conn.is_none() || self.has(from, "disconnected"))
        {
            f.push("the connection ended".into());
        }
        let tolerated: Vec<&str> = expect
            .get("peer_errors")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        for e in self.since(from) {
            let code = e
                .json
                .as_ref()
                .and_then(|j| j.get("code"))
                .and_then(Value::as_str)
                .unwrap_or("");
            if (e.kind == "peer_error" || e.kind == "close")
                && !tolerated.contains(&code)
                && !self.tolerated.contains(&code)
            {
                f.push(format!("the core's session found a violation: {}", e.text));
            }
        }
        f
    }
}

/// The `(task_id, seq)` records of a status hook's text: one JSON object per line; a
/// member whose value is an object with a string `task_id` and an integer `seq` is one
/// sequenced frame the hub's application received (the reference hubs' stdout lines
/// `{"progress": {…}}`, `{"report": {…}}` and `{"received": <message>}` are such
/// records). Other lines are skipped.
pub fn status_records(text: &str) -> Vec<(String, u64)> {
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|v| match v {
            Value::Object(o) => Some(o),
            _ => None,
        })
        .flat_map(|o| o.into_iter().map(|(_, x)| x))
        .filter_map(|x| {
            Some((
                x.get("task_id")?.as_str()?.to_string(),
                x.get("seq")?.as_u64()?,
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use stapel_runner_protocol::session::{RunnerSession, SessionConfig};
    use stapel_runner_protocol::wire::Hello;

    fn driver_with(sent: &[u64], status: &str) -> (Driver<RunnerSession>, std::path::PathBuf) {
        let mut d = Driver::new(RunnerSession::new(
            Hello::new("p", "0"),
            SessionConfig::default(),
        ));
        for seq in sent {
            d.note("out", &format!(r#"{{"schema_version":1,"type":"task.progress","task_id":"T","seq":{seq},"attempt":1,"kind":"state","payload":{{}}}}"#), None);
        }
        let path = std::env::temp_dir().join(format!(
            "kit-status-{}-{}",
            std::process::id(),
            fastrand::u64(..)
        ));
        std::fs::write(&path, status).unwrap();
        d.status_file = Some(path.clone());
        (d, path)
    }

    #[test]
    fn status_records_take_members_with_task_id_and_seq() {
        let text = "{\"listening\": \"ws://x/\"}\nnot json\n{\"progress\": {\"task_id\": \"T\", \"seq\": 2}}\n{\"received\": {\"type\": \"task.report\", \"task_id\": \"U\", \"seq\": 7}}\n{\"hello\": {\"project_id\": \"p\"}}\n";
        assert_eq!(
            status_records(text),
            vec![("T".to_string(), 2), ("U".to_string(), 7)]
        );
    }

    #[test]
    fn delivered_once_needs_every_sent_seq_once_in_order() {
        let line = |s: u64| format!("{{\"progress\": {{\"task_id\": \"T\", \"seq\": {s}}}}}\n");
        let ok = format!("{}{}{}", line(1), line(2), line(3));
        // A duplicate sent twice (1 and 2 were sent again) is recorded once.
        let (d, p) = driver_with(&[1, 2, 2, 3, 1], &ok);
        assert_eq!(d.delivered_once("T"), Ok(()));
        let _ = std::fs::remove_file(p);
        for bad in [
            format!("{}{}{}{}", line(1), line(2), line(2), line(3)), // applied twice
            format!("{}{}{}", line(1), line(3), line(2)),            // out of order
            format!("{}{}", line(1), line(3)),                       // one missing
        ] {
            let (d, p) = driver_with(&[1, 2, 3], &bad);
            assert!(d.delivered_once("T").is_err(), "{bad}");
            let _ = std::fs::remove_file(p);
        }
        // Records of an earlier run (below the case's first seq) are not this case's.
        let (d, p) = driver_with(
            &[5, 6],
            &format!("{}{}{}", line(5), line(5), line(6)).replacen(&line(5), &line(4), 1),
        );
        assert_eq!(d.delivered_once("T"), Ok(()));
        let _ = std::fs::remove_file(p);
        // No hook: an error that says so.
        let mut d = driver_with(&[1], "").0;
        d.status_file = None;
        assert!(d.delivered_once("T").unwrap_err().contains("status hook"));
    }
}
