//! The I/O shell around `stapel-runner-protocol`'s local-run machine (seed 002): the
//! `stapel-runner` and `fake-harness` binaries and the pieces they share.
//!
//! * [`host`] — executes the machine's outputs with real processes and pipes;
//! * [`supervisor`] — spawn with a cleared environment in a new process group, group
//!   signals, child-subreaper adoption of escaped grandchildren;
//! * [`controller`] — the built-in controller (the seed's mock core) for `stapel-runner run`;
//! * [`pretty`] — the human-readable view of the event stream;
//! * [`scripts`] — the seven built-in fake-harness scripts;
//! * [`fake`] — the fake harness (`fake-harness`, or `stapel-runner fake-harness`);
//! * [`connect`] — `stapel-runner connect`, the connected runner of seed 000, with
//!   [`ws`] (outbound WebSocket, token, TLS), [`task`] (performs the outputs of the
//!   core's `TaskRun`: the per-task sandbox directory, the harness, the report),
//!   [`store`] (the atomic, locked state directory) and [`exec`] (the `harness-exec`
//!   wrapper: each harness in its own user + PID namespace, so it and its escapees die
//!   with the task and with the runner);
//! * [`live`] — `stapel-runner live`: seed 002's browser live mode, a loopback HTTP
//!   server whose every request the core's admission machine judges, serving the page
//!   (which validates and reduces every event with the core's browser build) and
//!   driving runs through [`host`];
//! * [`wspump`] — one WebSocket as a task that does what a link says (the runner's and
//!   the test hub's sockets);
//! * [`testhub`] — a minimal hub over the core's `HubLink` for tests and benchmarks
//!   (optionally durable: restarted from its persisted state).
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod connect;
pub mod controller;
pub mod exec;
pub mod fake;
pub mod host;
pub mod live;
pub mod pretty;
pub mod scripts;
pub mod store;
pub mod supervisor;
pub mod task;
pub mod testhub;
pub mod ws;
pub mod wspump;
