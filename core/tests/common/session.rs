//! The one session test harness: a hub and a runner session in virtual time, joined by
//! a link the test controls frame by frame (in the spirit of quinn-proto's
//! `tests/util.rs`). The test plugs in
//!
//! * an [`Observer`]: its oracle, told of every transmitted frame, every event and every
//!   message a session accepted for sending (with what it stamped);
//! * a [`Link`]: how a frame that is delivered is fed to the receiving session (whole
//!   frame or JSONL bytes).
//!
//! Frame fates (deliver, drop, duplicate, reorder), reconnects, restarts and settling
//! are the harness's; what counts as correct is the observer's.

use std::collections::VecDeque;

use stapel_runner_protocol::sequencing::ConnectionState;
use stapel_runner_protocol::session::{
    Event, HubSession, Input, Machine, Output, RunnerSession, SessionConfig, SessionError, Stamped,
};
use stapel_runner_protocol::wire::{Hello, Message};

/// What happens to the next frame in flight in one direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    /// Delivered.
    Deliver,
    /// Lost.
    Drop,
    /// Delivered, and a copy stays in flight.
    Duplicate,
    /// Swapped with the frame behind it (nothing is delivered now).
    Reorder,
}

/// The test's oracle.
pub trait Observer {
    /// A frame the hub (`from_hub`) or the runner transmitted.
    fn transmitted(&mut self, from_hub: bool, frame: &str) {
        let _ = (from_hub, frame);
    }
    /// An event of the hub (`at_hub`) or the runner.
    fn event(&mut self, at_hub: bool, event: Event);
    /// A message the hub (`at_hub`) or the runner accepted for sending.
    fn accepted(&mut self, at_hub: bool, stamped: &Stamped) {
        let _ = (at_hub, stamped);
    }
}

/// How a delivered frame reaches the receiving session.
pub trait Link {
    /// The input carrying `frame`.
    fn input(&mut self, frame: String) -> Input {
        Input::Frame(frame)
    }
}

/// Every frame as one whole frame (a WebSocket text message).
#[derive(Debug, Default, Clone, Copy)]
pub struct WholeFrames;

impl Link for WholeFrames {}

/// Half the frames as whole frames, half (odd lengths) as JSONL bytes through the
/// session's framer.
#[derive(Debug, Default, Clone, Copy)]
pub struct MixedFraming;

impl Link for MixedFraming {
    fn input(&mut self, frame: String) -> Input {
        if frame.len() % 2 == 0 {
            Input::Frame(frame)
        } else {
            Input::Bytes(format!("{frame}\n").into_bytes())
        }
    }
}

/// Every output a session has now, in order.
pub fn outputs(machine: &mut dyn Machine) -> Vec<Output> {
    std::iter::from_fn(|| machine.poll_output()).collect()
}

/// What [`drain`] took from a session.
pub struct Drained {
    /// The frames it transmitted, in order.
    pub frames: Vec<String>,
    /// Whether it asked to close.
    pub close: bool,
    /// How many outputs it had.
    pub outputs: usize,
}

/// Drain one session: frames are returned, events go to the observer.
pub fn drain(machine: &mut dyn Machine, at_hub: bool, obs: &mut impl Observer) -> Drained {
    let mut d = Drained {
        frames: Vec::new(),
        close: false,
        outputs: 0,
    };
    while let Some(o) = machine.poll_output() {
        d.outputs += 1;
        match o {
            Output::Transmit(f) => {
                obs.transmitted(at_hub, &f);
                d.frames.push(f);
            }
            Output::Event(e) => obs.event(at_hub, e),
            Output::Close(_) => d.close = true,
        }
    }
    d
}

/// Pump frames both ways over a perfect link (whole frames) at `now` until neither
/// session has an output: the runner's outputs first (its frames fed to the hub), then
/// the hub's. A close request is a test failure.
pub fn pump(hub: &mut dyn Machine, runner: &mut dyn Machine, now: u64, obs: &mut impl Observer) {
    for _ in 0..10_000 {
        let from_runner = drain(runner, false, obs);
        assert!(!from_runner.close, "runner closed");
        for f in from_runner.frames {
            hub.handle_input(now, Input::Frame(f)).unwrap();
        }
        let from_hub = drain(hub, true, obs);
        assert!(!from_hub.close, "hub closed");
        for f in from_hub.frames {
            runner.handle_input(now, Input::Frame(f)).unwrap();
        }
        if from_runner.outputs == 0 && from_hub.outputs == 0 {
            return;
        }
    }
    panic!("did not settle");
}

/// A hub, a runner, the frames in flight between them and the applications' queues of
/// messages the sessions refused for now (backpressure).
pub struct World<O, L = WholeFrames> {
    /// The config of both sessions (and of restarted ones).
    pub config: SessionConfig,
    /// The runner's hello template.
    pub hello: Hello,
    /// The hub session.
    pub hub: HubSession,
    /// The runner session.
    pub runner: RunnerSession,
    /// Virtual time.
    pub now: u64,
    /// Whether a transport is up.
    pub connected: bool,
    /// Frames in flight to the hub, in order.
    pub to_hub: VecDeque<String>,
    /// Frames in flight to the runner, in order.
    pub to_runner: VecDeque<String>,
    /// Messages the hub's application still wants to send.
    pub hub_pending: VecDeque<Message>,
    /// Messages the runner's application still wants to send.
    pub runner_pending: VecDeque<Message>,
    /// The oracle.
    pub obs: O,
    /// The link.
    pub link: L,
}

impl<O: Observer, L: Link> World<O, L> {
    /// Two fresh sessions, not connected.
    pub fn new(config: SessionConfig, obs: O, link: L) -> Self {
        let hello = Hello::new("p-1", "0.1.0");
        Self {
            hub: HubSession::new(config.clone()),
            runner: RunnerSession::new(hello.clone(), config.clone()),
            config,
            hello,
            now: 0,
            connected: false,
            to_hub: VecDeque::new(),
            to_runner: VecDeque::new(),
            hub_pending: VecDeque::new(),
            runner_pending: VecDeque::new(),
            obs,
            link,
        }
    }

    /// Drain both sessions' outputs onto the link (frames are lost while disconnected)
    /// and into the observer; a close request disconnects.
    pub fn collect(&mut self) {
        let from_hub = drain(&mut self.hub, true, &mut self.obs);
        if self.connected {
            self.to_runner.extend(from_hub.frames);
        }
        let from_runner = drain(&mut self.runner, false, &mut self.obs);
        if self.connected {
            self.to_hub.extend(from_runner.frames);
        }
        if from_hub.close || from_runner.close {
            self.disconnect();
        }
    }

    /// The earlier timer deadline of the two sessions.
    pub fn deadline(&self) -> Option<u64> {
        assert!(!self.hub.has_output(), "collect drained the hub");
        assert!(!self.runner.has_output(), "collect drained the runner");
        match (self.hub.poll_timeout(), self.runner.poll_timeout()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Bring a transport up (no-op when up).
    pub fn connect(&mut self) {
        if self.connected {
            return;
        }
        self.connected = true;
        self.hub.handle_input(self.now, Input::Connected).unwrap();
        self.runner
            .handle_input(self.now, Input::Connected)
            .unwrap();
        self.collect();
    }

    /// Take the transport down, losing the frames in flight (no-op when down).
    pub fn disconnect(&mut self) {
        if !self.connected {
            return;
        }
        self.connected = false;
        self.drop_link();
    }

    /// Lose the frames in flight and tell both sessions the transport is gone.
    pub fn drop_link(&mut self) {
        self.to_hub.clear();
        self.to_runner.clear();
        self.hub
            .handle_input(self.now, Input::Disconnected)
            .unwrap();
        self.runner
            .handle_input(self.now, Input::Disconnected)
            .unwrap();
        self.collect();
    }

    /// Deliver (or drop, duplicate, reorder) the next frame in one direction.
    pub fn deliver(&mut self, to_hub: bool, fate: Fate) {
        let q = if to_hub {
            &mut self.to_hub
        } else {
            &mut self.to_runner
        };
        let Some(frame) = q.pop_front() else {
            return;
        };
        match fate {
            Fate::Drop => return,
            Fate::Duplicate => q.push_front(frame.clone()),
            Fate::Reorder => {
                if let Some(next) = q.pop_front() {
                    q.push_front(frame);
                    q.push_front(next);
                    return;
                }
            }
            Fate::Deliver => {}
        }
        let input = self.link.input(frame);
        let r = if to_hub {
            self.hub.handle_input(self.now, input)
        } else {
            self.runner.handle_input(self.now, input)
        };
        r.unwrap();
        self.collect();
    }

    /// The hub's application wants to send `msg`.
    pub fn hub_send(&mut self, msg: Message) {
        self.hub_pending.push_back(msg);
        self.flush_pending();
    }

    /// The runner's application wants to send `msg`.
    pub fn runner_send(&mut self, msg: Message) {
        self.runner_pending.push_back(msg);
        self.flush_pending();
    }

    /// Retry the applications' queued messages, in order, until one is refused again
    /// with `backpressure` (any other refusal fails the test).
    pub fn flush_pending(&mut self) {
        let now = self.now;
        send_queued(
            &mut self.hub,
            true,
            now,
            &mut self.hub_pending,
            &mut self.obs,
        );
        send_queued(
            &mut self.runner,
            false,
            now,
            &mut self.runner_pending,
            &mut self.obs,
        );
        self.collect();
    }

    /// Let `ms` pass: both sessions' timers run, queued messages are retried.
    pub fn advance(&mut self, ms: u64) {
        self.now += ms;
        self.hub.handle_input(self.now, Input::Timeout).unwrap();
        self.runner.handle_input(self.now, Input::Timeout).unwrap();
        self.collect();
        self.flush_pending();
    }

    /// Advance to the next deadline of either session (1 ms when none).
    pub fn advance_to_deadline(&mut self) {
        match self.deadline() {
            Some(d) => self.advance(d.saturating_sub(self.now)),
            None => self.advance(1),
        }
    }

    /// Persist, drop and restore the runner (transport down).
    pub fn restart_runner(&mut self) {
        self.disconnect();
        let state = ConnectionState::restore(&self.runner.state().snapshot()).unwrap();
        assert_eq!(&state, self.runner.state());
        self.runner = RunnerSession::with_state(self.hello.clone(), self.config.clone(), state);
    }

    /// Persist, drop and restore the hub (transport down).
    pub fn restart_hub(&mut self) {
        self.disconnect();
        let state = ConnectionState::restore(&self.hub.state().snapshot()).unwrap();
        assert_eq!(&state, self.hub.state());
        self.hub = HubSession::with_state(self.config.clone(), state);
    }

    /// `true` when nothing is in flight, queued or kept for replay.
    pub fn quiet(&self) -> bool {
        self.to_hub.is_empty()
            && self.to_runner.is_empty()
            && self.hub_pending.is_empty()
            && self.runner_pending.is_empty()
            && self.hub.state().outbox_frames() == 0
            && self.runner.state().outbox_frames() == 0
    }

    /// Deliver everything in flight over a perfect link, hub-bound frames first.
    pub fn deliver_all(&mut self) {
        while !self.to_hub.is_empty() || !self.to_runner.is_empty() {
            let to_hub = !self.to_hub.is_empty();
            self.deliver(to_hub, Fate::Deliver);
        }
    }

    /// Reconnect cleanly and run a perfect link until [`quiet`](Self::quiet). Time
    /// passes by `step_ms` when given, else to the next deadline.
    pub fn settle(&mut self, step_ms: Option<u64>, max_rounds: usize) {
        self.disconnect();
        self.connect();
        for _ in 0..max_rounds {
            if !self.connected {
                self.connect();
            }
            if !self.to_hub.is_empty() {
                self.deliver(true, Fate::Deliver);
                continue;
            }
            if !self.to_runner.is_empty() {
                self.deliver(false, Fate::Deliver);
                continue;
            }
            self.flush_pending();
            if self.quiet() {
                return;
            }
            match step_ms {
                Some(ms) => self.advance(ms),
                None => self.advance_to_deadline(),
            }
        }
        panic!("link did not settle");
    }
}

/// Send queued messages through [`Machine::send`] until one is refused with
/// `backpressure` (it goes back to the front); the observer learns what was stamped.
fn send_queued(
    machine: &mut dyn Machine,
    at_hub: bool,
    now: u64,
    queue: &mut VecDeque<Message>,
    obs: &mut impl Observer,
) {
    while let Some(m) = queue.pop_front() {
        match machine.send(now, m) {
            Ok(stamped) => obs.accepted(at_hub, &stamped),
            Err(SessionError::Emit(e)) if e.code() == "backpressure" => {
                queue.push_front(e.into_message());
                break;
            }
            Err(e) => panic!("send refused: {e}"),
        }
    }
}
