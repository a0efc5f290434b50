//! `POST /rate/check`: seed B's sliding-log check (SPEC section 2).

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use ratewarden_core::{Key, ceil_secs};
use serde::Serialize;
use serde_json::Value;

use crate::extract::{self, JsonObject};
use crate::problem::ApiError;
use crate::state::AppState;

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
/// Checks the header before the body (SPEC section 2's order).
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
    let verdict = state.acquire(&state.check, &key, None).await?;
    let decision = verdict.decision;
    let body = LogUsage {
        user_id,
        count: decision.used,
        limit: decision.limit,
        remaining: decision.remaining,
        window_seconds: ceil_secs(state.check.quota.window()),
        reset_after: ceil_secs(decision.reset_after),
        endpoint,
    };
    let detail = || {
        format!(
            "{} for user {user_id} on endpoint {:?}.",
            super::limit_text(&state.check),
            body.endpoint
        )
    };
    Ok(super::limited(&state.check, &verdict, &body, detail))
}

/// The engine key of (user, endpoint): two parts, the id in canonical decimal.
pub fn user_key(user_id: u64, endpoint: &str) -> Result<Key, ApiError> {
    Key::new([user_id.to_string().as_bytes(), endpoint.as_bytes()])
        .map_err(|e| ApiError::internal(&e))
}
