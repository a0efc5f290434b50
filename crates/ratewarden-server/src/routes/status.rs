//! `GET /status?key=K`: seed A's read-only counter (SPEC section 1).

use axum::Json;
use axum::extract::{RawQuery, State};
use ratewarden_core::Key;

use super::ping::WindowUsage;
use crate::extract::query_param;
use crate::problem::ApiError;
use crate::state::AppState;

/// The current window's usage of `key`, without counting this request.
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
    let now = state.clock.now();
    let decision = state.store.status(&state.ping, &key, now).await?;
    Ok(Json(WindowUsage::new(&raw, &state.ping, &decision, now)))
}
