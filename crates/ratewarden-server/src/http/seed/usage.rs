//! `GET /rate/status?endpoint=E`: seed B's usage read of the policy `check`.

use axum::Json;
use axum::extract::{RawQuery, State};
use axum::http::HeaderMap;
use ratewarden_core::ceil_secs;

use super::check::{CHECK, LogUsage, user_key};
use crate::http::extract::{self, query_param};
use crate::http::problem::ApiError;
use crate::state::AppState;

/// Current usage of (user, endpoint), recording nothing.
#[utoipa::path(
    get,
    path = "/rate/status",
    operation_id = "rateStatus",
    tag = "seed",
    params(
        ("X-User-Id" = crate::http::v1::schema::UserId, Header, description = "The user: ASCII digits for a number from 1 to 2^63 - 1, leading zeros allowed"),
        ("endpoint" = String, Query, min_length = 1, max_length = 128, description = "The endpoint, percent-encoded: 1 to 128 characters"),
    ),
    responses(
        (status = 200, description = "The usage, not recorded", body = LogUsage),
        (status = 400, description = "X-User-Id missing or invalid", body = crate::http::problem::Problem, content_type = "application/problem+json"),
        (status = 422, description = "endpoint missing, empty or over 128 characters", body = crate::http::problem::Problem, content_type = "application/problem+json"),
        (status = 503, description = "The store is unavailable", body = crate::http::problem::Problem, content_type = "application/problem+json"),
    )
)]
pub async fn handle(
    State(state): State<AppState>,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
) -> Result<Json<LogUsage>, ApiError> {
    let user_id = extract::user_id(&headers)?;
    let endpoint = extract::endpoint(query_param(query.as_deref(), "endpoint")?.as_deref())?;
    let key = user_key(user_id, &endpoint)?;
    let status = state.limiter.status(CHECK, &key).await?;
    let decision = status.decision;
    Ok(Json(LogUsage {
        user_id,
        endpoint,
        count: decision.used,
        limit: decision.limit,
        remaining: decision.remaining,
        window_seconds: ceil_secs(status.policy.policy.quota.window()),
        reset_after: ceil_secs(decision.reset_after),
    }))
}
