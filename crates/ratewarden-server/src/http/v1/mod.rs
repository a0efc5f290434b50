//! The general decision API, `/v1` (docs/api.md): decide checks of any
//! policy, read a key's status, reset counters (admin), list policies.
//! Every route turns its input into checks or reads for the limiter and
//! renders the answer; the shapes live here.

pub mod check;
pub mod counters;
pub mod policies;
pub mod schema;
pub mod status;

use ratewarden_core::{Key, Mode};
use ratewarden_limiter::{Basis, CheckResult};

use super::problem::ApiError;

/// The most checks one batch may hold.
pub const MAX_CHECKS: usize = 64;

pub use ratewarden_http::CheckAnswer;

/// The answer of a status read: `status` for a request of cost 1.
pub fn status_answer(status: &ratewarden_limiter::Status) -> CheckAnswer {
    let shadow = status.policy.policy.mode == Mode::Shadow;
    CheckAnswer::new(&CheckResult {
        policy: std::sync::Arc::clone(&status.policy),
        decision: status.decision,
        shadow_denied: shadow && !status.decision.allowed(),
        basis: Basis::Counted,
    })
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
