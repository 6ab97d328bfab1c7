//! Areas `store` and `lease`: what a hub persists of one runner (`store::RunnerRows`),
//! how the rows rebuild a hub session (`HubSession::from_rows`, also under a `HubLink`),
//! the writes each step needs before its outputs ([`NativeRowTracker`] over the core's
//! `RowTracker`), the hub's lease timing ([`NativeLease`] over `store::Lease`) and the
//! close of a runner socket for a store error (`store::close_for`). Rows and writes
//! cross as JSON text with the core's column names; every decision is the core's.

use napi::bindgen_prelude::External;
use napi_derive::napi;
use serde_json::{json, Value};
use stapel_runner_protocol::link::HubLink;
use stapel_runner_protocol::session::HubSession;
use stapel_runner_protocol::store::{
    self, Lease, LeaseConfig, LeaseInput, RowTracker, RowWrite, RunnerRows, StoreError,
};

use crate::errors::{bad_argument, config_error, fail, guard, parse_arg};
use crate::link::{link_config_of, LinkHandle};
use crate::session::{now_of, session_config, SessionHandle};
use crate::wire::num;

/// A store error as a thrown error (kind `store`: `StoreError`, `FencedError`).
fn store_error(e: &StoreError) -> napi::Error {
    fail("store", e.code(), e, Value::Null)
}

/// Rows from their JSON text (the core's JSON form of rows, `RunnerRows::from_json`);
/// a malformed value is `StoreError` `invalid_rows`.
fn rows_of(text: &str) -> napi::Result<RunnerRows> {
    let v = parse_arg("rows", text)?;
    RunnerRows::from_json(&v).map_err(|e| store_error(&e))
}

fn hub_of(session: &SessionHandle) -> napi::Result<&HubSession> {
    session
        .hub_session()
        .ok_or_else(|| bad_argument("session", "a runner session has no store rows"))
}

fn hub_link_of(link: &LinkHandle) -> napi::Result<&HubLink> {
    link.hub_link()
        .ok_or_else(|| bad_argument("link", "a runner link has no store rows"))
}

/// The rows a store holds for a hub session, as JSON text (sorted by key).
#[napi(ts_args_type = "session: ExternalObject<'Session'>")]
pub fn session_rows(session: &External<SessionHandle>) -> napi::Result<String> {
    guard(|| Ok(hub_of(session)?.rows().to_json().to_string()))
}

/// A hub session rebuilt from a store's rows (JSON text) with the session configuration
/// (JSON text); refused rows throw `StoreError` (`invalid_rows`).
#[napi(ts_return_type = "ExternalObject<'Session'>")]
pub fn session_from_rows(
    rows: String,
    config: Option<String>,
) -> napi::Result<External<SessionHandle>> {
    guard(|| {
        let config = session_config(config.as_deref())?;
        let rows = rows_of(&rows)?;
        let session = HubSession::from_rows(config, &rows).map_err(|e| store_error(&e))?;
        Ok(External::new(SessionHandle::hub(session)))
    })
}

/// The rows of a hub link's session, as JSON text.
#[napi(ts_args_type = "link: ExternalObject<'Link'>")]
pub fn link_rows(link: &External<LinkHandle>) -> napi::Result<String> {
    guard(|| Ok(hub_link_of(link)?.session().rows().to_json().to_string()))
}

/// A hub link over a session rebuilt from a store's rows (JSON text); `config` the JSON
/// text of the link configuration (its `session` object configures the session).
#[napi(ts_return_type = "ExternalObject<'Link'>")]
pub fn link_from_rows(rows: String, config: Option<String>) -> napi::Result<External<LinkHandle>> {
    guard(|| {
        let config = link_config_of(config.as_deref())?;
        let rows = rows_of(&rows)?;
        let session =
            HubSession::from_rows(config.session.clone(), &rows).map_err(|e| store_error(&e))?;
        Ok(External::new(LinkHandle::hub(HubLink::new(
            session, config,
        ))))
    })
}

/// The close of a runner socket whose hub hit the store error `code`: the JSON text of
/// `[close code, reason]`.
#[napi]
pub fn store_close_for(code: String) -> napi::Result<String> {
    guard(|| {
        let (c, r) = store::close_for(&code);
        Ok(json!([c, r]).to_string())
    })
}

/// The close code of a runner socket closed for a store error (the core's `CLOSE_STORE`).
#[napi]
pub fn store_close_code() -> u32 {
    u32::from(store::CLOSE_STORE)
}

/// Which rows a hub session's steps changed (the core's `RowTracker`): the writes to
/// commit before a step's outputs are performed.
#[napi]
pub struct NativeRowTracker {
    inner: RowTracker,
}

#[napi]
impl NativeRowTracker {
    /// A tracker over the rows the store holds (JSON text; `null`: none).
    #[napi(constructor)]
    pub fn new(rows: Option<String>) -> napi::Result<Self> {
        guard(|| {
            let rows = match rows {
                Some(t) => rows_of(&t)?,
                None => RunnerRows::default(),
            };
            Ok(Self {
                inner: RowTracker::new(&rows),
            })
        })
    }

    /// The writes that make the store hold the hub session's rows, as the JSON text of
    /// an array (pending until `committed` or `failed`).
    #[napi(ts_args_type = "session: ExternalObject<'Session'>")]
    pub fn writes(&mut self, session: &External<SessionHandle>) -> napi::Result<String> {
        guard(|| {
            let hub = hub_of(session)?;
            Ok(self.writes_of(hub))
        })
    }

    /// [`writes`](Self::writes) for the session of a hub link.
    #[napi(ts_args_type = "link: ExternalObject<'Link'>")]
    pub fn link_writes(&mut self, link: &External<LinkHandle>) -> napi::Result<String> {
        guard(|| {
            let hub = hub_link_of(link)?.session();
            Ok(self.writes_of(hub))
        })
    }

    /// The last writes committed: the store holds them.
    #[napi]
    pub fn committed(&mut self) -> napi::Result<()> {
        guard(|| {
            self.inner.committed();
            Ok(())
        })
    }

    /// The last writes were rolled back: the next `writes` lists them again.
    #[napi]
    pub fn failed(&mut self) -> napi::Result<()> {
        guard(|| {
            self.inner.failed();
            Ok(())
        })
    }
}

impl NativeRowTracker {
    fn writes_of(&mut self, hub: &HubSession) -> String {
        let w = self.inner.writes(hub);
        Value::Array(w.iter().map(RowWrite::to_json).collect()).to_string()
    }
}

fn lease_config_of(config: Option<&str>) -> napi::Result<LeaseConfig> {
    let v = match config {
        Some(t) => parse_arg("config", t)?,
        None => json!({}),
    };
    LeaseConfig::from_value(&v).map_err(|e| config_error(&e))
}

/// The lease config as the core reads it (JSON text in and out).
#[napi]
pub fn lease_config(config: Option<String>) -> napi::Result<String> {
    guard(|| Ok(lease_config_of(config.as_deref())?.to_value().to_string()))
}

/// The lease timing of one hub process (the core's `store::Lease`).
#[napi]
pub struct NativeLease {
    inner: Lease,
}

#[napi]
impl NativeLease {
    /// `config`: JSON text of the lease config.
    #[napi(constructor)]
    pub fn new(config: Option<String>) -> napi::Result<Self> {
        guard(|| {
            Ok(Self {
                inner: Lease::new(lease_config_of(config.as_deref())?),
            })
        })
    }

    /// Feed one input: `kind` `renewed` (with `startedAt`), `renew_failed` or `timeout`.
    #[napi]
    pub fn handle(
        &mut self,
        now_ms: f64,
        kind: String,
        started_at: Option<f64>,
    ) -> napi::Result<()> {
        guard(|| {
            let now = now_of(now_ms)?;
            let input = match (kind.as_str(), started_at) {
                ("renewed", Some(t)) => LeaseInput::Renewed {
                    started_at: now_of(t)?,
                },
                ("renewed", None) => return Err(bad_argument("renewed", "needs started_at")),
                ("renew_failed", _) => LeaseInput::RenewFailed,
                ("timeout", _) => LeaseInput::Timeout,
                (other, _) => return Err(bad_argument("input", format!("type {other:?}"))),
            };
            self.inner.handle_input(now, input);
            Ok(())
        })
    }

    /// The next output's name (`renew`, `expiring`, `held`), or `null`.
    #[napi]
    pub fn poll_output(&mut self) -> napi::Result<Option<String>> {
        guard(|| Ok(self.inner.poll_output().map(|o| o.name().to_owned())))
    }

    /// When to feed `timeout`, or `null`.
    #[napi]
    pub fn poll_timeout(&self) -> napi::Result<Option<f64>> {
        guard(|| Ok(self.inner.poll_timeout().map(num)))
    }

    /// Whether the hub may serve its runners at `nowMs`.
    #[napi]
    pub fn is_held(&self, now_ms: f64) -> napi::Result<bool> {
        guard(|| Ok(self.inner.is_held(now_of(now_ms)?)))
    }

    /// The configuration as JSON text.
    #[napi]
    pub fn config(&self) -> napi::Result<String> {
        guard(|| Ok(self.inner.config().to_value().to_string()))
    }
}
