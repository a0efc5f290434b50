//! The general decision API, `/v1` (docs/api.md): decide checks of any
//! policy, read a key's status, reset counters (admin), list policies.
//! Every route turns its input into checks or reads for the limiter and
//! renders the answer; the shapes live here.

pub mod check;
pub mod counters;
pub mod policies;
pub mod schema;
pub mod status;

use ratewarden_core::{Key, Mode, ceil_millis};
use ratewarden_limiter::{Basis, CheckResult};
use serde::Serialize;
use utoipa::ToSchema;

use super::problem::ApiError;

/// The most checks one batch may hold.
pub const MAX_CHECKS: usize = 64;

/// One check's answer (also the status of a key).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct CheckAnswer {
    /// The policy's name.
    #[schema(example = "api")]
    pub policy: String,
    /// Whether this policy lets the request pass (a shadow policy always
    /// does). In a denied batch: whether it would have.
    pub allowed: bool,
    /// The policy's limit, in units per window (GCRA: the limit, not the
    /// burst).
    #[schema(example = 100)]
    pub limit: u64,
    /// Units that could still pass now.
    #[schema(example = 99)]
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

    /// The answer of a status read: `status` for a request of cost 1.
    pub fn of_status(status: &ratewarden_limiter::Status) -> CheckAnswer {
        let shadow = status.policy.policy.mode == Mode::Shadow;
        CheckAnswer::new(&CheckResult {
            policy: std::sync::Arc::clone(&status.policy),
            decision: status.decision,
            shadow_denied: shadow && !status.decision.allowed(),
            basis: Basis::Counted,
        })
    }
}

/// A key from its parts' bytes, as the API takes keys.
///
/// # Errors
/// 422 naming `field` for no part, one empty part, or a key longer than
/// the maximum.
pub fn key_from_parts(field: &str, parts: &[Vec<u8>]) -> Result<Key, ApiError> {
    match parts {
        [] => Err(ApiError::unprocessable(format!(
            "'{field}' is required and needs at least one part"
        ))),
        [only] if only.is_empty() => Err(ApiError::unprocessable(format!(
            "'{field}' must not be empty"
        ))),
        parts => Key::new(parts)
            .map_err(|e| ApiError::unprocessable(format!("'{field}' is not usable: {e}"))),
    }
}

/// Exactly one value of query parameter `policy`.
///
/// # Errors
/// 422 when it is missing, empty or repeated.
pub fn policy_param(query: Option<&str>) -> Result<String, ApiError> {
    let policy = super::extract::query_param(query, "policy")?
        .ok_or_else(|| ApiError::unprocessable("query parameter 'policy' is required"))?;
    if policy.is_empty() {
        return Err(ApiError::unprocessable(
            "query parameter 'policy' must not be empty",
        ));
    }
    String::from_utf8(policy)
        .map_err(|_| ApiError::unprocessable("query parameter 'policy' must be UTF-8"))
}
