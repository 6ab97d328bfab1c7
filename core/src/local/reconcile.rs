//! Terminal reconciliation (documented on the [`local`](super) module).
use serde_json::{json, Value};

use super::models::{
    terminal_proposal_is_valid, RunTerminalState, TurnTerminalState, WorkDisposition,
    TERMINAL_SCHEMA,
};

/// The operating-system fact about the harness process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ProcessExit {
    /// Exit code, `None` when killed by a signal.
    pub exit_code: Option<i32>,
    /// Signal number that ended the process, if any.
    pub signal: Option<i32>,
}

impl ProcessExit {
    /// `true` only for exit code 0 without a signal.
    pub(crate) fn success(self) -> bool {
        self.exit_code == Some(0) && self.signal.is_none()
    }

    /// `{exitCode, success, signal}`.
    pub(crate) fn to_value(self) -> Value {
        json!({"exitCode": self.exit_code, "success": self.success(), "signal": self.signal})
    }
}

/// Why the run is ending, as far as the runner knows. See the [module docs](self) for
/// the precedence when several are recorded ([`Intent::rank`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub(crate) enum Intent {
    /// Nothing but the harness's own behaviour.
    Natural,
    /// An accepted `turn.interrupt` or `turn.stop`.
    Interrupted,
    /// An accepted `run.cancel`.
    Cancelled,
    /// The controller closed its stream.
    ControllerClosed,
    /// The harness broke the protocol.
    ProtocolViolation,
    /// A pending runtime request was not resolved within `request_timeout_ms` (the
    /// original's interactive request timeout, which fails the run).
    RequestExpired,
}

impl Intent {
    /// Precedence: a recorded intent is replaced only by one of strictly higher rank
    /// (protocol violation 4, cancelled 3, interrupted 2, controller closed and request
    /// expired 1, natural 0).
    pub(crate) fn rank(self) -> u8 {
        match self {
            Intent::Natural => 0,
            Intent::ControllerClosed | Intent::RequestExpired => 1,
            Intent::Interrupted => 2,
            Intent::Cancelled => 3,
            Intent::ProtocolViolation => 4,
        }
    }

    /// The intent in force after `next` is recorded on top of `current`.
    pub(crate) fn merge(current: Option<Intent>, next: Intent) -> Intent {
        match current {
            Some(c) if c.rank() >= next.rank() => c,
            _ => next,
        }
    }
}

/// The derived terminal states and the reason code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Derived {
    /// `turnTerminalState`.
    pub turn: TurnTerminalState,
    /// `runTerminalState`.
    pub run: RunTerminalState,
    /// `reconciliation.reason`.
    pub reason: &'static str,
}

/// `reconciliation.reason` of a run ended as a harness protocol violation.
pub const REASON_PROTOCOL_VIOLATION: &str = "harness_protocol_violation";
/// `reconciliation.reason` of a run whose interactive request expired.
pub const REASON_REQUEST_EXPIRED: &str = "request_expired";
/// `reconciliation.reason` of a harness that exited with success but no result.
pub const REASON_RESULT_MISSING: &str = "semantic_result_missing";
/// `reconciliation.reason` of a harness process that failed (non-zero exit or signal).
pub const REASON_PROCESS_FAILED: &str = "harness_process_failed";
/// Every `reconciliation.reason` of a `failed` run.
pub const FAILED_RUN_REASONS: [&str; 4] = [
    REASON_PROTOCOL_VIOLATION,
    REASON_PROCESS_FAILED,
    REASON_RESULT_MISSING,
    REASON_REQUEST_EXPIRED,
];

/// Derive the canonical states from the runner's facts (see the [module table](self)).
pub(crate) fn derive(intent: Intent, exit: Option<&ProcessExit>, result_observed: bool) -> Derived {
    use RunTerminalState as R;
    use TurnTerminalState as T;
    let (turn, run, reason) = match intent {
        Intent::Interrupted => (T::Interrupted, R::Cancelled, "turn_interrupted"),
        Intent::Cancelled => (T::Cancelled, R::Cancelled, "run_cancelled"),
        Intent::ControllerClosed => (T::Cancelled, R::Cancelled, "controller_closed"),
        Intent::ProtocolViolation => (T::Failed, R::Failed, REASON_PROTOCOL_VIOLATION),
        Intent::RequestExpired => (T::Failed, R::Failed, REASON_REQUEST_EXPIRED),
        Intent::Natural => match exit {
            Some(e) if e.success() && result_observed => {
                (T::Completed, R::Succeeded, "successful_process_and_result")
            }
            Some(e) if e.success() => (T::Failed, R::Failed, REASON_RESULT_MISSING),
            _ => (T::Failed, R::Failed, REASON_PROCESS_FAILED),
        },
    };
    Derived { turn, run, reason }
}

fn disposition_of(v: Option<&Value>) -> Option<WorkDisposition> {
    v?.get("reportedWorkDisposition")?
        .as_str()
        .and_then(WorkDisposition::from_str)
}

/// Build the canonical `run.terminal` payload (`paperclip.prp.terminal.v1`).
///
/// `proposal` is the first harness terminal proposal (kept verbatim), `result` the first
/// semantic result (`None` when none was observed), `exit` the process fact (`None` when
/// no process ran).
pub(crate) fn reconcile_terminal(
    proposal: Option<&Value>,
    exit: Option<&ProcessExit>,
    result: Option<&Value>,
    intent: Intent,
) -> Value {
    let derived = derive(intent, exit, result.is_some());
    let proposal_valid = proposal.is_some_and(terminal_proposal_is_valid);
    let valid_proposal = proposal.filter(|_| proposal_valid);
    let from_result = disposition_of(result);
    let from_proposal = disposition_of(valid_proposal);
    let disposition = if derived.run == RunTerminalState::Succeeded {
        from_result
            .or(from_proposal)
            .unwrap_or(WorkDisposition::Done)
    } else {
        from_result
            .filter(|d| *d != WorkDisposition::Done)
            .or(from_proposal.filter(|d| *d != WorkDisposition::Done))
            .unwrap_or(WorkDisposition::Yielded)
    };
    let contradicted = valid_proposal.is_some_and(|p| {
        p["turnTerminalState"].as_str() != Some(derived.turn.as_str())
            || p["runTerminalState"].as_str() != Some(derived.run.as_str())
    });
    json!({
        "schema": TERMINAL_SCHEMA,
        "turnTerminalState": derived.turn.as_str(),
        "runTerminalState": derived.run.as_str(),
        "reportedWorkDisposition": disposition.as_str(),
        "harnessTerminalProposal": proposal.cloned().unwrap_or(Value::Null),
        "reconciliation": {
            "authority": "runner",
            "reason": derived.reason,
            "proposalValid": proposal_valid,
            "proposalContradicted": contradicted,
            "processExit": exit.copied().map(ProcessExit::to_value).unwrap_or(Value::Null),
            "semanticResultObserved": result.is_some(),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proposal(turn: &str, run: &str, d: &str) -> Value {
        json!({"schema": TERMINAL_SCHEMA, "turnTerminalState": turn, "runTerminalState": run, "reportedWorkDisposition": d})
    }

    #[test]
    fn nonzero_exit_overrides_a_success_proposal() {
        let p = proposal("completed", "succeeded", "done");
        let t = reconcile_terminal(
            Some(&p),
            Some(&ProcessExit {
                exit_code: Some(7),
                signal: None,
            }),
            None,
            Intent::Natural,
        );
        assert_eq!(t["turnTerminalState"], "failed");
        assert_eq!(t["runTerminalState"], "failed");
        assert_eq!(t["reportedWorkDisposition"], "yielded");
        assert_eq!(t["reconciliation"]["authority"], "runner");
        assert_eq!(t["reconciliation"]["proposalValid"], true);
        assert_eq!(t["reconciliation"]["proposalContradicted"], true);
        assert_eq!(
            t["harnessTerminalProposal"]["runTerminalState"],
            "succeeded"
        );
    }

    #[test]
    fn successful_process_and_result_override_a_failed_proposal() {
        let p = proposal("failed", "failed", "yielded");
        let r = json!({"reportedWorkDisposition": "done"});
        let t = reconcile_terminal(
            Some(&p),
            Some(&ProcessExit {
                exit_code: Some(0),
                signal: None,
            }),
            Some(&r),
            Intent::Natural,
        );
        assert_eq!(t["turnTerminalState"], "completed");
        assert_eq!(t["runTerminalState"], "succeeded");
        assert_eq!(t["reportedWorkDisposition"], "done");
        assert_eq!(
            t["reconciliation"]["reason"],
            "successful_process_and_result"
        );
        assert_eq!(t["reconciliation"]["proposalContradicted"], true);
    }

    #[test]
    fn intent_precedence() {
        use Intent as I;
        let all = [
            I::Natural,
            I::ControllerClosed,
            I::RequestExpired,
            I::Interrupted,
            I::Cancelled,
            I::ProtocolViolation,
        ];
        for a in all {
            assert_eq!(I::merge(None, a), a);
            assert_eq!(
                I::merge(Some(a), I::ProtocolViolation),
                I::ProtocolViolation
            );
            assert_eq!(
                I::merge(Some(I::ProtocolViolation), a),
                I::ProtocolViolation
            );
        }
        assert_eq!(I::merge(Some(I::Interrupted), I::Cancelled), I::Cancelled);
        assert_eq!(I::merge(Some(I::Cancelled), I::Interrupted), I::Cancelled);
        assert_eq!(
            I::merge(Some(I::Interrupted), I::ControllerClosed),
            I::Interrupted
        );
        assert_eq!(
            I::merge(Some(I::Cancelled), I::ControllerClosed),
            I::Cancelled
        );
        assert_eq!(
            I::merge(Some(I::ControllerClosed), I::RequestExpired),
            I::ControllerClosed
        );
        assert_eq!(
            I::merge(Some(I::RequestExpired), I::ControllerClosed),
            I::RequestExpired
        );
        assert_eq!(
            I::merge(Some(I::RequestExpired), I::Cancelled),
            I::Cancelled
        );
        let d = derive(I::RequestExpired, None, true);
        assert_eq!(
            (d.turn, d.run, d.reason),
            (
                TurnTerminalState::Failed,
                RunTerminalState::Failed,
                "request_expired"
            )
        );
    }

    #[test]
    fn invalid_proposal_is_kept_but_not_trusted() {
        let p = json!({"schema": TERMINAL_SCHEMA, "turnTerminalState": "exploded", "runTerminalState": "failed", "reportedWorkDisposition": "blocked"});
        let t = reconcile_terminal(
            Some(&p),
            Some(&ProcessExit {
                exit_code: Some(1),
                signal: None,
            }),
            None,
            Intent::Natural,
        );
        assert_eq!(t["reconciliation"]["proposalValid"], false);
        assert_eq!(t["reconciliation"]["proposalContradicted"], false);
        assert_eq!(t["reportedWorkDisposition"], "yielded");
        assert_eq!(t["harnessTerminalProposal"], p);
    }
}
