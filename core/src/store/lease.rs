//! [`Lease`]: when a hub renews the leases of its runners, and when it must stop serving
//! them because it could not.

use std::collections::VecDeque;

use serde_json::Value;

use crate::config::{ConfigError, ConfigReader};

/// The lease timing of one hub process (all the runners it owns share it).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LeaseConfig {
    /// How long a lease lasts after the renewal that set it (database clock). Default
    /// 10000 ms; positive.
    pub lease_ms: u64,
    /// Renew this long after the last renewal started. Default 3000 ms; must be
    /// positive and leave `margin_ms` before the lease ends
    /// (`renew_every_ms + margin_ms < lease_ms`).
    pub renew_every_ms: u64,
    /// Stop serving this long before a lease can have expired (time to close the
    /// runners, and clock-rate slack). Default 2000 ms.
    pub margin_ms: u64,
    /// After a failed renewal, try again this much later. Default 500 ms; positive.
    pub retry_ms: u64,
}

impl Default for LeaseConfig {
    fn default() -> Self {
        Self {
            lease_ms: 10_000,
            renew_every_ms: 3_000,
            margin_ms: 2_000,
            retry_ms: 500,
        }
    }
}

impl LeaseConfig {
    /// The keys [`from_value`](Self::from_value) reads.
    pub const KEYS: [&'static str; 4] = ["lease_ms", "renew_every_ms", "margin_ms", "retry_ms"];

    /// Defaults overridden by the keys present in `value` (all optional non-negative
    /// integers).
    ///
    /// # Errors
    /// [`ConfigError`]: `not_an_object`, `unknown_key`, `wrong_type`, `out_of_range` (`0`
    /// for `lease_ms`, `renew_every_ms` or `retry_ms`; `renew_every_ms + margin_ms`
    /// not below `lease_ms`, reported on `renew_every_ms`).
    pub fn from_value(value: &Value) -> Result<Self, ConfigError> {
        let r = ConfigReader::new(value, &Self::KEYS)?;
        let d = Self::default();
        let positive = |key: &str| -> Result<Option<u64>, ConfigError> {
            match r.u64(key)? {
                Some(0) => Err(ConfigError::OutOfRange {
                    key: r.path(key),
                    expected: "positive integer",
                }),
                n => Ok(n),
            }
        };
        let c = Self {
            lease_ms: positive("lease_ms")?.unwrap_or(d.lease_ms),
            renew_every_ms: positive("renew_every_ms")?.unwrap_or(d.renew_every_ms),
            margin_ms: r.u64("margin_ms")?.unwrap_or(d.margin_ms),
            retry_ms: positive("retry_ms")?.unwrap_or(d.retry_ms),
        };
        if c.renew_every_ms.saturating_add(c.margin_ms) >= c.lease_ms {
            return Err(ConfigError::OutOfRange {
                key: r.path("renew_every_ms"),
                expected: "renew_every_ms + margin_ms below lease_ms",
            });
        }
        Ok(c)
    }

    /// The keys with their values.
    pub fn to_value(&self) -> Value {
        serde_json::json!({
            "lease_ms": self.lease_ms,
            "renew_every_ms": self.renew_every_ms,
            "margin_ms": self.margin_ms,
            "retry_ms": self.retry_ms,
        })
    }
}

/// What the host tells a [`Lease`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LeaseInput {
    /// The renewal asked for by [`LeaseOutput::Renew`] committed; its transaction began
    /// at local time `started_at` (the database set every lease of this hub to its
    /// `now()` + `lease_ms`, and its `now()` was not before `started_at`).
    Renewed {
        /// Local monotonic ms when the renewal's transaction began.
        started_at: u64,
    },
    /// The renewal failed (the database unreachable, the transaction refused).
    RenewFailed,
    /// [`Lease::poll_timeout`] passed (harmless at any time).
    Timeout,
}

/// What a [`Lease`] asks of the host.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LeaseOutput {
    /// Start a renewal now (report it with `Renewed` or `RenewFailed`).
    Renew,
    /// The leases may expire soon and could not be renewed: stop confirming, close every
    /// runner socket (see [`close_for`](super::close_for) `lease_expired`), take no
    /// runner until [`LeaseOutput::Held`].
    Expiring,
    /// After `Expiring`, a renewal committed: runners may be served again.
    Held,
}

impl LeaseOutput {
    /// The output's stable name: `renew`, `expiring`, `held`.
    pub fn name(&self) -> &'static str {
        match self {
            LeaseOutput::Renew => "renew",
            LeaseOutput::Expiring => "expiring",
            LeaseOutput::Held => "held",
        }
    }
}

/// The lease timing of one hub process (sans-IO): when to renew, and when the hub must
/// stop serving its runners because its leases may expire.
///
/// A lease's expiry is the database's clock; the hub only knows its own. A renewal whose
/// transaction began at local time `t` set every lease to at least `t + lease_ms` in the
/// database's time (its `now()` was not earlier than `t`), so the hub may serve until
/// `t + lease_ms − margin_ms` locally and no longer.
///
/// # Transitions
///
/// | state | input | outputs | to |
/// |---|---|---|---|
/// | `Unheld` (new) | any, first poll | `Renew` | `Unheld`, renewing |
/// | renewing | `Renewed{t}` | (`Held` after `Expiring`) | `Held` until `t + lease_ms − margin_ms`; next renewal at `t + renew_every_ms` |
/// | renewing | `RenewFailed` | — | next renewal at `now + retry_ms` |
/// | not renewing | `Timeout` at or after the next renewal | `Renew` | renewing |
/// | `Held` | `Timeout` at or after `t + lease_ms − margin_ms` | `Expiring` | `Unheld` |
///
/// A `Renewed` whose end is already past (a renewal that took too long) holds nothing.
/// Renewals never overlap: one is asked for only when the previous one was reported.
#[derive(Debug, Clone)]
pub struct Lease {
    config: LeaseConfig,
    /// Held until this local time (exclusive); `None`: not held.
    held_until: Option<u64>,
    renewing: bool,
    next_renew: u64,
    /// `Expiring` was emitted and no renewal has held the lease since.
    expired: bool,
    out: VecDeque<LeaseOutput>,
}

impl Lease {
    /// A lease not yet held; the first poll asks for a renewal.
    pub fn new(config: LeaseConfig) -> Self {
        let mut lease = Self {
            config,
            held_until: None,
            renewing: false,
            next_renew: 0,
            expired: false,
            out: VecDeque::new(),
        };
        lease.step(0);
        lease
    }

    /// The configuration.
    pub fn config(&self) -> &LeaseConfig {
        &self.config
    }

    /// Feed one input at local time `now_ms`.
    pub fn handle_input(&mut self, now_ms: u64, input: LeaseInput) {
        match input {
            LeaseInput::Renewed { started_at } if self.renewing => {
                self.renewing = false;
                self.next_renew = started_at.saturating_add(self.config.renew_every_ms);
                let until = started_at
                    .saturating_add(self.config.lease_ms)
                    .saturating_sub(self.config.margin_ms);
                if until > now_ms {
                    self.held_until = Some(self.held_until.map_or(until, |h| h.max(until)));
                    if self.expired {
                        self.expired = false;
                        self.out.push_back(LeaseOutput::Held);
                    }
                }
            }
            LeaseInput::RenewFailed if self.renewing => {
                self.renewing = false;
                self.next_renew = now_ms.saturating_add(self.config.retry_ms);
            }
            // A report of no renewal in flight, or a timer: only the deadlines matter.
            _ => {}
        }
        self.step(now_ms);
    }

    fn step(&mut self, now: u64) {
        if let Some(until) = self.held_until {
            if now >= until {
                self.held_until = None;
                self.expired = true;
                self.out.push_back(LeaseOutput::Expiring);
            }
        }
        if !self.renewing && now >= self.next_renew {
            self.renewing = true;
            self.out.push_back(LeaseOutput::Renew);
        }
    }

    /// The next output, or `None`.
    pub fn poll_output(&mut self) -> Option<LeaseOutput> {
        self.out.pop_front()
    }

    /// When to feed [`LeaseInput::Timeout`]: the next renewal (when none is in flight) or
    /// the end of the held time, whichever comes first.
    pub fn poll_timeout(&self) -> Option<u64> {
        let renew = (!self.renewing).then_some(self.next_renew);
        match (renew, self.held_until) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// `true` while the hub may serve its runners at local time `now_ms` (confirm
    /// applied frames, take over runners).
    pub fn is_held(&self, now_ms: u64) -> bool {
        self.held_until.is_some_and(|h| now_ms < h)
    }
}
