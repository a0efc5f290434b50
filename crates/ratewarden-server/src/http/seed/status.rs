//! `GET /status?key=K`: seed A's read-only counter of the policy `ping`.

use axum::Json;
use axum::extract::{RawQuery, State};
use ratewarden_core::Key;

use super::ping::{PING, WindowUsage};
use crate::http::extract::query_param;
use crate::http::problem::ApiError;
use crate::state::AppState;

/// The current window's usage of `key`, without counting this request.
#[utoipa::path(
    get,
    path = "/status",
    operation_id = "pingStatus",
    tag = "seed",
    params(("key" = String, Query, min_length = 1, max_length = 4096, description = "The client key, percent-encoded (4096 bytes at most)")),
    responses(
        (status = 200, description = "The current window's usage, not counted", body = WindowUsage),
        (status = 422, description = "key missing, empty or longer than 4096 bytes", body = crate::http::problem::Problem, content_type = "application/problem+json"),
        (status = 503, description = "The store is unavailable", body = crate::http::problem::Problem, content_type = "application/problem+json"),
    )
)]
pub async fn handle(
    State(state): State<AppState>,
    RawQuery(query): RawQuery,
) -> Result<Json<WindowUsage>, ApiError> {
    let raw = query_param(query.as_deref(), "key")?
        .filter(|k| !k.is_empty())
        .ok_or_else(|| {
            ApiError::unprocessable("query parameter 'key' is required, e.g. /status?key=alice")
        })?;
    let key = Key::single(&raw)
        .map_err(|e| ApiError::unprocessable(format!("'key' is not usable: {e}")))?;
    let status = state.limiter.status(PING, &key).await?;
    Ok(Json(WindowUsage::new(
        &raw,
        &status.policy.policy,
        &status.decision,
        status.now,
    )))
}
