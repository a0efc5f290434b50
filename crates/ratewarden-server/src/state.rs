//! What every handler shares.

use std::sync::Arc;

use ratewarden_core::{
    Acquire, Attempt, Audit, Clock, Decision, Key, Outcome, Policy, Store, Timestamp,
};

use crate::config::{AdminKey, FailurePolicy, KeySource};
use crate::problem::ApiError;
use crate::prune::Pruner;

/// Shared application state: one `Arc`, so the per-request clone axum
/// makes is a single reference-count increment.
#[derive(Debug, Clone)]
pub struct AppState(Arc<Shared>);

impl AppState {
    /// Wraps the shared parts.
    pub fn new(shared: Shared) -> AppState {
        AppState(Arc::new(shared))
    }
}

impl std::ops::Deref for AppState {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.0
    }
}

/// What [`AppState`] holds.
#[derive(Debug)]
pub struct Shared {
    /// Where limiter state lives.
    pub store: Arc<dyn Store>,
    /// The only source of "now" (a manual clock in tests).
    pub clock: Arc<dyn Clock>,
    /// GET /ping's fixed window.
    pub ping: Policy,
    /// POST /rate/check's sliding log.
    pub check: Policy,
    /// Where GET /ping takes its key from.
    pub ping_key: KeySource,
    /// Fail open or closed on transient store errors.
    pub on_store_error: FailurePolicy,
    /// `None`: every reset is refused.
    pub admin_key: Option<AdminKey>,
    /// Largest accepted request body, in bytes.
    pub max_body_bytes: usize,
    /// Deletes expired state; also sampled from requests.
    pub pruner: Arc<Pruner>,
}

impl Shared {
    /// Decides one request of cost 1 for `key` under `policy` now, and
    /// records it (with an audit row when `audit` is given and the request
    /// passes). On a transient store error the decision follows
    /// `--on-store-error`: open allows (logged, counted in metrics, and
    /// marked [`Basis::FailedOpen`]), closed is 503.
    ///
    /// # Errors
    /// [`ApiError`] 503 / 500 when the store fails and the request is not
    /// let through.
    pub async fn acquire(
        &self,
        policy: &Policy,
        key: &Key,
        audit: Option<Audit<'_>>,
    ) -> Result<Verdict, ApiError> {
        let now = self.clock.now();
        let request = Acquire {
            policy,
            key,
            attempt: Attempt::one(now),
            audit,
        };
        let result = self.store.acquire(request).await;
        self.pruner.sample();
        match result {
            Ok(decision) => Ok(Verdict {
                decision,
                now,
                basis: Basis::Counted,
            }),
            Err(e) if e.is_transient() && self.on_store_error == FailurePolicy::Open => {
                tracing::warn!(policy = %policy.name, %key, error = %e, "store unavailable; failing open");
                metrics::counter!("ratewarden_store_failures_total", "policy" => "open")
                    .increment(1);
                Ok(Verdict {
                    decision: fail_open(policy),
                    now,
                    basis: Basis::FailedOpen,
                })
            }
            Err(e) => {
                metrics::counter!("ratewarden_store_failures_total", "policy" => "closed")
                    .increment(1);
                Err(e.into())
            }
        }
    }
}

/// A decision as the service reports it.
#[derive(Debug, Clone, Copy)]
pub struct Verdict {
    /// The decision.
    pub decision: Decision,
    /// The instant it was made for.
    pub now: Timestamp,
    /// Whether the store counted it.
    pub basis: Basis,
}

/// How a [`Verdict`] was reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Basis {
    /// The store decided and recorded it.
    Counted,
    /// The store was unavailable and `--on-store-error open` let the request
    /// through unchecked: its numbers describe no real window, so no
    /// rate-limit headers are sent with it.
    FailedOpen,
}

/// The decision reported when failing open: allowed, nothing counted.
fn fail_open(policy: &Policy) -> Decision {
    Decision {
        outcome: Outcome::Allowed,
        limit: policy.quota.limit(),
        remaining: policy.quota.limit(),
        used: 0,
        reset_after: std::time::Duration::ZERO,
    }
}
