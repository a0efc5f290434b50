//! The seed routes, over the default policies `ping` (GET /ping, GET
//! /status) and `check` (POST /rate/check, GET /rate/status, DELETE
//! /rate/reset/{userId}); see docs/semantics.md. One file per route, all
//! of the same shape: validate, build the key, ask the limiter, answer.

pub mod check;
pub mod ping;
pub mod reset;
pub mod status;
pub mod usage;

use axum::response::{IntoResponse, Response};
use ratewarden_core::{Outcome as CoreOutcome, Policy};
use ratewarden_limiter::{Basis, Outcome};
use serde::Serialize;

use super::allowed_json;
use super::problem::ApiError;
use ratewarden_http::headers::outcome_headers;

/// A seed route's answer to its one check: 200 with `body`, or 429 problem
/// details (`…rate-limit-exceeded`) with `Retry-After`; both with the
/// rate-limit headers, unless the request was let through unchecked
/// (fail open).
fn limited(outcome: &Outcome, body: impl Serialize, denied: impl FnOnce() -> String) -> Response {
    let Some(result) = outcome.results.first() else {
        return allowed_json(&body, None);
    };
    if result.basis == Basis::FailedOpen {
        // Unchecked: no quota to advertise.
        return allowed_json(&body, None);
    }
    let policy = &result.policy.policy;
    let decision = &result.decision;
    let retry_after = match decision.outcome {
        CoreOutcome::Allowed => return allowed_json(&body, Some(outcome)),
        CoreOutcome::Denied { retry_after } => retry_after,
        // A cost above the limit (limit 0, a kill switch): waiting does not
        // help; tell the client to come back after a window.
        CoreOutcome::Never => policy.quota.window(),
    };
    ApiError::rate_limited(denied(), retry_after, decision.limit, policy.quota.window())
        .with_headers(&outcome_headers(outcome))
        .into_response()
}

/// `"Rate limit of 3 requests per 60s exceeded"`, the seed's wording.
fn limit_text(policy: &Policy) -> String {
    let window = policy.quota.window();
    let window = if window.subsec_nanos() == 0 {
        format!("{}s", window.as_secs())
    } else {
        format!("{}ms", window.as_millis())
    };
    let limit = policy.quota.limit();
    let unit = if limit == 1 { "request" } else { "requests" };
    format!("Rate limit of {limit} {unit} per {window} exceeded")
}
