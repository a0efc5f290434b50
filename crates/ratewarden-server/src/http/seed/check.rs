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
#[derive(Debug, Serialize, utoipa::ToSchema)]
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

/// The body of `POST /rate/check`.
#[derive(Debug, serde::Deserialize, utoipa::ToSchema)]
#[allow(dead_code)] // documents the request shape; the handler reads JSON by hand
pub struct EndpointBody {
    /// 1 to 128 characters.
    #[schema(min_length = 1, max_length = 128)]
    pub endpoint: String,
}

/// Records one event for (user, endpoint) when under the limit; 200 or 429.
/// Checks the header before the body (seed B's order).
#[utoipa::path(
    post,
    path = "/rate/check",
    operation_id = "rateCheck",
    tag = "seed",
    params(("X-User-Id" = crate::http::v1::schema::UserId, Header, description = "The user: ASCII digits for a number from 1 to 2^63 - 1, leading zeros allowed")),
    request_body(content = EndpointBody, description = "The endpoint checked"),
    responses(
        (status = 200, description = "Allowed and recorded; the rate-limit headers", body = LogUsage),
        (status = 400, description = "X-User-Id missing or invalid, or the body is not a JSON object", body = crate::http::problem::Problem, content_type = "application/problem+json"),
        (status = 413, description = "The body is larger than --max-body-bytes", body = crate::http::problem::Problem, content_type = "application/problem+json"),
        (status = 415, description = "The body is not declared as JSON, or is in a content coding (gzip, …: the answer carries Accept-Encoding: identity)", body = crate::http::problem::Problem, content_type = "application/problem+json"),
        (status = 422, description = "endpoint missing, not a string, empty or over 128 characters", body = crate::http::problem::Problem, content_type = "application/problem+json"),
        (status = 429, description = "Over the limit: type …rate-limit-exceeded, Retry-After", body = crate::http::problem::Problem, content_type = "application/problem+json"),
        (status = 503, description = "The store is unavailable and the policy fails closed", body = crate::http::problem::Problem, content_type = "application/problem+json"),
    )
)]
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
