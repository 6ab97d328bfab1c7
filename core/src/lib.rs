//! # stapel-runner-protocol
//!
//! The sans-IO core of the Stapel runner protocols. It consumes bytes and inputs and
//! produces frames and actions; it never touches a socket, a process, a file or a clock.
//! Hosts (the tokio runner, the Python, Node and UniFFI bindings) perform the I/O.
//!
//! Areas:
//!
//! * [`wire`] — the seven hub-protocol messages of seed 000, their embedded
//!   `stapel-taskspecs` artifacts (TaskSpec, TaskReport, UsageSplit), validation and the
//!   deterministic, byte-stable codec;
//! * [`json`] — the ordered JSON value type of the messages' open objects (`payload`,
//!   `task`, `extra`, …): members in arrival order, inline short strings, no hashing;
//! * [`framing`] — the bounded JSONL line framer used by every newline-delimited stream;
//! * [`host`] — the connection host policy of WebSocket transports (token check, close
//!   or abort, binary frames, idle-runner eviction) as sans-IO machines;
//! * [`sequencing`] — per-(task, attempt) streams of seed 000: stamping, dedupe, resume,
//!   replay, acks, bounded windows, snapshots;
//! * [`session`] — the hub and runner connection machines over the sequencing state:
//!   hello with resume, replay, acks, keepalive and dead-peer detection;
//! * [`link`] — each side's whole connection driver (socket policy, session, reconnect
//!   schedule, event and backlog bounds, error codes) as one machine every host pumps;
//! * [`local`] — the local-runner protocol of seed 002 (commands, canonical events,
//!   supervision as actions, terminal reconciliation);
//! * [`reducer`] — folds canonical local-runner events into a session snapshot;
//! * [`admission`] — the trust model of the loopback live server (`stapel-runner live`):
//!   every HTTP request admitted or refused before route lookup, runs and streams capped;
//! * [`contract`] — the harness-execution contract of seed 001: strict models, profile
//!   resolution, the gateway lifecycle machine, evidence and redaction;
//! * [`adapter`] — the harness-adapter seam of seed 000: `RoleSpec`, the subprocess turn
//!   machine with its stop escalation, usage mapping;
//! * [`config`] — the one reader of configuration objects (unknown keys refused, coded
//!   errors);
//! * [`errors`] — the one error table: the exception class every binding raises for each
//!   error kind and code.
//!
//! # One shape for every machine
//!
//! Every state machine ([`session::HubSession`], [`session::RunnerSession`],
//! [`local::LocalRun`], [`contract::Gateway`], [`adapter::SubprocessSession`],
//! [`host::SocketHost`], [`host::HubHost`], [`link::RunnerLink`], [`link::HubLink`],
//! [`admission::Admission`], [`local::ScriptPlayer`]) has the same three
//! calls, so every binding exposes one shape:
//!
//! * `handle_input(now_ms, input)` — something happened (bytes, a process exit, a timer);
//!   `now_ms` is a monotonic clock of the host's choosing;
//! * `poll_output()` — the next thing to do (`None` once drained): perform it, and report
//!   its result as a new input;
//! * `poll_timeout()` — the deadline at which to feed the machine's `Timeout` input
//!   (`None`: no timer pending).
//!
//! Each machine documents its states and transitions as one table on its type.
//!
//! Every error type has a stable snake_case `code()`; conformance vectors in the
//! repository's `conformance/` folder assert on those codes, and every binding runs
//! every vector.
#![forbid(unsafe_code)]
#![deny(missing_docs)]
// No panics outside tests: bad input is an error value (no `unwrap`/`expect`/`panic!`,
// no unchecked indexing or slicing, no arithmetic that can overflow unchecked).
#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::indexing_slicing,
        clippy::arithmetic_side_effects,
        clippy::unreachable,
        clippy::todo,
        clippy::unimplemented
    )
)]

pub mod adapter;
pub mod admission;
pub mod config;
pub mod contract;
pub mod errors;
pub(crate) mod fields;
pub mod framing;
pub mod host;
pub mod json;
pub mod link;
pub mod local;
pub mod reducer;
pub mod runner_task;
pub mod sequencing;
pub mod session;
pub mod store;
pub mod wire;
