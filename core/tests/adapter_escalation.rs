//! Properties of the subprocess session's stop escalation, checked against a small
//! reference model over random host schedules (closes, faults, timer ticks, exits):
//!
//! * the escalation always ends — with the child's group killed (when it leads one) or
//!   its exit reported, or, for a child without a group, after KILL and a last grace;
//! * no TERM and no process signal follows `Exited`; the only signal after it is the
//!   one group KILL that reaps leftovers;
//! * `CloseStdin` comes first, `CloseStdout` exactly once and last;
//! * each step waits its grace: TERM no earlier than `grace_ms` after the stdin close,
//!   KILL no earlier than `grace_ms` after TERM, and `poll_timeout` says exactly when.

use proptest::prelude::*;
use stapel_runner_protocol::adapter::{
    SignalTarget, StopSignal, SubprocessConfig, SubprocessInput, SubprocessOutput,
    SubprocessSession, SubprocessState,
};

#[derive(Debug, Clone)]
enum Event {
    /// Let time pass, then feed `Timeout` if the machine's deadline has come.
    Tick(u64),
    /// Feed `Timeout` now, whether or not the deadline has come.
    EarlyTimeout,
    Close,
    Exit,
    StartTurn,
    Junk,
    Eof,
    WriteFail,
}

fn event() -> impl Strategy<Value = Event> {
    prop_oneof![
        4 => (0u64..3_000).prop_map(Event::Tick),
        1 => Just(Event::EarlyTimeout),
        2 => Just(Event::Close),
        1 => Just(Event::Exit),
        2 => Just(Event::StartTurn),
        1 => Just(Event::Junk),
        1 => Just(Event::Eof),
        1 => Just(Event::WriteFail),
    ]
}

/// One recorded output with the host time it was emitted at, and whether the child had
/// been reported exited by then.
#[derive(Debug, Clone)]
struct Step {
    at: u64,
    after_exit: bool,
    output: SubprocessOutput,
}

/// The reference model: what the escalation must look like, derived only from the
/// sequence of (time, kind) the test itself fed, not from the machine's state.
#[derive(Debug, Default)]
struct Model {
    /// Time the escalation began (stdin closed), if it did.
    began: Option<u64>,
    /// Times of TERM and KILL escalation signals.
    signals: Vec<(u64, StopSignal)>,
    exited_at: Option<u64>,
}

fn run(group: bool, grace: u64, events: &[Event]) -> Result<(), TestCaseError> {
    let mut s = SubprocessSession::new(SubprocessConfig::default().grace_ms(grace));
    let mut now = 0u64;
    let mut exited = false;
    let mut trace: Vec<Step> = Vec::new();
    let feed = |s: &mut SubprocessSession,
                now: u64,
                exited: bool,
                trace: &mut Vec<Step>,
                input: SubprocessInput| {
        let _ = s.handle_input(now, input);
        while let Some(output) = s.poll_output() {
            trace.push(Step {
                at: now,
                after_exit: exited,
                output,
            });
        }
    };
    feed(
        &mut s,
        now,
        exited,
        &mut trace,
        SubprocessInput::Spawned {
            pid: Some(100),
            process_group: group,
        },
    );
    for e in events {
        let before = s.poll_timeout();
        match e {
            Event::Tick(d) => {
                now += d;
                if s.poll_timeout().is_some_and(|t| now >= t) {
                    feed(&mut s, now, exited, &mut trace, SubprocessInput::Timeout);
                }
            }
            Event::EarlyTimeout => {
                let n = trace.len();
                feed(&mut s, now, exited, &mut trace, SubprocessInput::Timeout);
                if before.is_some_and(|t| now < t) {
                    prop_assert_eq!(trace.len(), n, "a Timeout before the deadline acted");
                    prop_assert_eq!(s.poll_timeout(), before);
                }
            }
            Event::Close => feed(&mut s, now, exited, &mut trace, SubprocessInput::Close),
            Event::Exit => {
                if !exited && s.state() != SubprocessState::Closed {
                    exited = true;
                    feed(&mut s, now, exited, &mut trace, SubprocessInput::Exited);
                }
            }
            Event::StartTurn => feed(
                &mut s,
                now,
                exited,
                &mut trace,
                SubprocessInput::StartTurn { prompt: "p".into() },
            ),
            Event::Junk => feed(
                &mut s,
                now,
                exited,
                &mut trace,
                SubprocessInput::Stdout(b"not json\n".to_vec()),
            ),
            Event::Eof => feed(&mut s, now, exited, &mut trace, SubprocessInput::Eof),
            Event::WriteFail => feed(
                &mut s,
                now,
                exited,
                &mut trace,
                SubprocessInput::StdinWriteFailed {
                    message: "EPIPE".into(),
                },
            ),
        }
    }
    // Finish: close, then let every deadline pass. At most three waits remain.
    feed(&mut s, now, exited, &mut trace, SubprocessInput::Close);
    for _ in 0..3 {
        if let Some(t) = s.poll_timeout() {
            now = now.max(t);
            feed(&mut s, now, exited, &mut trace, SubprocessInput::Timeout);
        }
    }
    prop_assert_eq!(s.state(), SubprocessState::Closed, "{:?}", trace);
    prop_assert_eq!(s.poll_timeout(), None);

    // Build the model from the trace's stop actions.
    let mut model = Model::default();
    let stops: Vec<&Step> = trace
        .iter()
        .filter(|st| {
            matches!(
                st.output,
                SubprocessOutput::CloseStdin
                    | SubprocessOutput::Signal { .. }
                    | SubprocessOutput::CloseStdout
            )
        })
        .collect();
    prop_assert!(
        matches!(
            stops.first().map(|s| &s.output),
            Some(SubprocessOutput::CloseStdin)
        ),
        "the escalation starts by closing stdin: {:?}",
        stops
    );
    prop_assert!(matches!(
        stops.last().map(|s| &s.output),
        Some(SubprocessOutput::CloseStdout)
    ));
    prop_assert!(
        matches!(
            trace.last().map(|s| &s.output),
            Some(SubprocessOutput::CloseStdout)
        ),
        "close_stdout is the last output"
    );
    let close_stdin = stops
        .iter()
        .filter(|s| s.output == SubprocessOutput::CloseStdin)
        .count();
    let close_stdout = stops
        .iter()
        .filter(|s| s.output == SubprocessOutput::CloseStdout)
        .count();
    prop_assert_eq!((close_stdin, close_stdout), (1, 1));
    model.began = stops.first().map(|s| s.at);
    model.exited_at = trace.iter().find(|s| s.after_exit).map(|s| s.at);

    let middle = stops.get(1..stops.len() - 1).unwrap_or_default();
    // A child leading a group always ends with its group killed: the signal right
    // before close_stdout. Everything between is the TERM/KILL escalation.
    let escalation = if group {
        let Some((last, rest)) = middle.split_last() else {
            return Err(TestCaseError::fail(format!(
                "no final group KILL: {stops:?}"
            )));
        };
        prop_assert_eq!(
            &last.output,
            &SubprocessOutput::Signal {
                target: SignalTarget::Group,
                signal: StopSignal::Kill,
            }
        );
        rest
    } else {
        middle
    };
    let target = if group {
        SignalTarget::Group
    } else {
        SignalTarget::Process
    };
    let expected = [StopSignal::Term, StopSignal::Kill];
    prop_assert!(escalation.len() <= 2);
    for (step, want) in escalation.iter().zip(expected) {
        let SubprocessOutput::Signal { target: t, signal } = step.output else {
            return Err(TestCaseError::fail(format!(
                "unexpected stop action {step:?}"
            )));
        };
        prop_assert_eq!((t, signal), (target, want));
        // No TERM and no process signal after the exit.
        prop_assert!(!step.after_exit, "signal after exit: {:?}", stops);
        model.signals.push((step.at, signal));
    }
    // Timing: each signal waits a full grace after the previous stop action.
    let mut prev = model.began.unwrap_or(0);
    for (at, _) in &model.signals {
        prop_assert!(*at >= prev + grace, "signal at {at} before {prev}+{grace}");
        prev = *at;
    }
    // Without an exit, the session only closes after the whole escalation ran.
    if model.exited_at.is_none() {
        prop_assert_eq!(model.signals.len(), 2, "{:?}", stops);
        let end = stops.last().map_or(0, |s| s.at);
        prop_assert!(end >= prev + grace);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn escalation_always_ends_properly(
        group in any::<bool>(),
        grace in prop_oneof![Just(0u64), 1u64..5_000],
        events in prop::collection::vec(event(), 0..24),
    ) {
        run(group, grace, &events)?;
    }
}

#[test]
fn poll_timeout_tracks_each_stage() {
    let mut s = SubprocessSession::new(SubprocessConfig::default().grace_ms(100));
    s.handle_input(
        0,
        SubprocessInput::Spawned {
            pid: None,
            process_group: false,
        },
    )
    .unwrap();
    assert_eq!(s.poll_timeout(), None);
    s.handle_input(7, SubprocessInput::Close).unwrap();
    assert_eq!(s.poll_timeout(), Some(107));
    s.handle_input(150, SubprocessInput::Timeout).unwrap();
    // The next deadline counts from when TERM was sent, not from the old deadline.
    assert_eq!(s.poll_timeout(), Some(250));
    assert_eq!(
        s.poll_output(),
        Some(SubprocessOutput::CloseStdin),
        "outputs stay queued until polled"
    );
}

#[test]
fn deadlines_saturate_at_the_end_of_the_clock() {
    let mut s = SubprocessSession::new(SubprocessConfig::default().grace_ms(u64::MAX));
    s.handle_input(
        0,
        SubprocessInput::Spawned {
            pid: None,
            process_group: true,
        },
    )
    .unwrap();
    s.handle_input(u64::MAX - 1, SubprocessInput::Close)
        .unwrap();
    assert_eq!(s.poll_timeout(), Some(u64::MAX));
    s.handle_input(u64::MAX, SubprocessInput::Timeout).unwrap();
    assert_eq!(s.poll_timeout(), Some(u64::MAX));
}
