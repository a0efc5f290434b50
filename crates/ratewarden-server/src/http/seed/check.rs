//! `POST /rate/check`: seed B's sliding-log check, the policy `check`.

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use ratewarden_core::{Key, ceil_secs};
use serde::Serialize;
use serde_json::Value;

use ratewarden_limiter::Check;

use crate::http::extract::{self, JsonObject};
use crate::http::problem::ApiError;
use crate::state::AppState;

/// The seed route's policy.
pub const CHECK: &str = "check";

/// The body of `POST /rate/check` and `GET /rate/status`.
#[derive(Debug, Serialize)]
pub struct LogUsage {
    /// The user, from `X-User-Id`.
    pub user_id: u64,
    /// The endpoint checked.
    pub endpoint: String,
    /// Events in the sliding window.
    pub count: u64,
    /// Events allowed per window.
    pub limit: u64,
    /// Checks that can still pass now.
    pub remaining: u64,
    /// The window length, in seconds.
    pub window_seconds: u64,
    /// Seconds until every counted event has left the window, rounded up.
    pub reset_after: u64,
}

/// Records one event for (user, endpoint) when under the limit; 200 or 429.
/// Checks the header before the body (seed B's order).
pub async fn handle(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Result<JsonObject, ApiError>,
) -> Result<Response, ApiError> {
    let user_id = extract::user_id(&headers)?;
    let JsonObject(body) = body?;
    let endpoint = match body.get("endpoint") {
        None | Some(Value::Null) => return Err(ApiError::unprocessable("'endpoint' is required")),
        Some(Value::String(s)) => extract::endpoint(Some(s.as_bytes()))?,
        Some(_) => return Err(ApiError::unprocessable("'endpoint' must be a string")),
    };
    let key = user_key(user_id, &endpoint)?;
    let outcome = state.limiter.check(&[Check::one(CHECK, &key)]).await?;
    let result = outcome
        .results
        .first()
        .ok_or_else(|| ApiError::internal(&"no result"))?;
    let (policy, decision) = (&result.policy.policy, result.decision);
    let body = LogUsage {
        user_id,
        count: decision.used,
        limit: decision.limit,
        remaining: decision.remaining,
        window_seconds: ceil_secs(policy.quota.window()),
        reset_after: ceil_secs(decision.reset_after),
        endpoint,
    };
    let detail = || {
        format!(
            "{} for user {user_id} on endpoint {:?}.",
            super::limit_text(policy),
            body.endpoint
        )
    };
    Ok(super::limited(&outcome, &body, detail))
}

/// The engine key of (user, endpoint): two parts, the id in canonical decimal.
pub fn user_key(user_id: u64, endpoint: &str) -> Result<Key, ApiError> {
    Key::new([user_id.to_string().as_bytes(), endpoint.as_bytes()])
        .map_err(|e| ApiError::internal(&e))
}
