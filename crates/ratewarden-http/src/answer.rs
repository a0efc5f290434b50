//! One check's answer as JSON: the shape of the JSON API's checks and
//! statuses and of a denial's `results`.

use ratewarden_core::ceil_millis;
use ratewarden_limiter::{Basis, CheckResult};
use serde::Serialize;

/// One check's answer, the shape every JSON answer uses (the JSON API's
/// checks and statuses, a denial's `results`).
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct CheckAnswer {
    /// The policy's name.
    #[cfg_attr(feature = "utoipa", schema(example = "api"))]
    pub policy: String,
    /// Whether this policy lets the request pass (a shadow policy always
    /// does). In a denied batch: whether it would have.
    pub allowed: bool,
    /// The policy's limit, in units per window (GCRA: the limit, not the
    /// burst).
    #[cfg_attr(feature = "utoipa", schema(example = 100))]
    pub limit: u64,
    /// Units that could still pass now.
    #[cfg_attr(feature = "utoipa", schema(example = 99))]
    pub remaining: u64,
    /// Milliseconds until the key's state is back to full, rounded up.
    pub reset_after_ms: u64,
    /// Milliseconds until the same request would pass, rounded up; 0 when
    /// allowed or when it can never pass.
    pub retry_after_ms: u64,
    /// A shadow policy would have denied this request.
    pub shadow_denied: bool,
    /// The request can never pass: its cost is above the limit (or the
    /// GCRA burst).
    pub never: bool,
    /// The store could not be reached and the policy fails open: allowed
    /// without counting (`limit` and `remaining` describe no window).
    pub failed_open: bool,
}

impl CheckAnswer {
    /// The answer of `result`.
    pub fn new(result: &CheckResult) -> CheckAnswer {
        CheckAnswer {
            policy: result.policy.name().to_owned(),
            allowed: result.allowed(),
            limit: result.decision.limit,
            remaining: result.decision.remaining,
            reset_after_ms: ceil_millis(result.decision.reset_after),
            retry_after_ms: result.retry_after().map_or(0, ceil_millis),
            shadow_denied: result.shadow_denied,
            never: result.never(),
            failed_open: result.basis == Basis::FailedOpen,
        }
    }
}
