//! `GET /rate/status?endpoint=E`: seed B's usage read (SPEC section 2).

use axum::Json;
use axum::extract::{RawQuery, State};
use axum::http::HeaderMap;
use ratewarden_core::ceil_secs;

use super::check::{LogUsage, user_key};
use crate::extract::{self, query_param};
use crate::problem::ApiError;
use crate::state::AppState;

/// Current usage of (user, endpoint), recording nothing.
pub async fn handle(
    State(state): State<AppState>,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
) -> Result<Json<LogUsage>, ApiError> {
    let user_id = extract::user_id(&headers)?;
    let endpoint = extract::endpoint(query_param(query.as_deref(), "endpoint")?.as_deref())?;
    let key = user_key(user_id, &endpoint)?;
    let decision = state
        .store
        .status(&state.check, &key, state.clock.now())
        .await?;
    Ok(Json(LogUsage {
        user_id,
        endpoint,
        count: decision.used,
        limit: decision.limit,
        remaining: decision.remaining,
        window_seconds: ceil_secs(state.check.quota.window()),
        reset_after: ceil_secs(decision.reset_after),
    }))
}
