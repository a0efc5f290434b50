//! `DELETE /rate/reset/{userId}[?endpoint=E]`: admin-only, fail-closed reset
//! of seed B's counters (SPEC section 2). Auth is checked before the path.

use axum::Json;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, Uri};
use ratewarden_core::{Algorithm, Key};
use serde::Serialize;
use subtle::ConstantTimeEq;

use super::check::user_key;
use crate::extract::{self, query_param};
use crate::problem::ApiError;
use crate::state::AppState;

/// What a reset deleted.
#[derive(Debug, Serialize)]
pub struct Reset {
    /// The user whose events were deleted.
    pub user_id: u64,
    /// The endpoint, or `null` for all of the user's endpoints.
    pub endpoint: Option<String>,
    /// How many recorded events were deleted.
    pub deleted: u64,
}

/// Deletes the user's events, all endpoints or one.
pub async fn handle(
    State(state): State<AppState>,
    headers: HeaderMap,
    uri: Uri,
    path: Result<Path<String>, PathRejection>,
    RawQuery(query): RawQuery,
) -> Result<Json<Reset>, ApiError> {
    authorize(&state, &headers)?;
    let raw = path.map(|Path(p)| p).unwrap_or_default();
    let user_id = extract::parse_user_id(raw.as_bytes()).ok_or_else(|| {
        // The path as sent: a segment that does not decode to UTF-8
        // (`%FF`) would otherwise show as ''.
        let sent = uri.path().rsplit('/').next().unwrap_or("");
        ApiError::not_found(format!(
            "no user '{}': user ids are positive integers",
            sent.escape_debug()
        ))
    })?;
    let endpoint = match query_param(query.as_deref(), "endpoint")? {
        Some(raw) => Some(extract::endpoint(Some(&raw))?),
        None => None,
    };
    let prefix = match &endpoint {
        Some(e) => user_key(user_id, e)?,
        None => Key::single(user_id.to_string()).map_err(|e| ApiError::internal(&e))?,
    };
    let deleted = state.store.reset(Algorithm::SlidingLog, &prefix).await?;
    tracing::info!(user_id, endpoint = ?endpoint, deleted, "counters reset");
    Ok(Json(Reset {
        user_id,
        endpoint,
        deleted,
    }))
}

/// 403 unless a key is configured and exactly one `X-Admin-Key` header
/// equals it (constant-time comparison).
fn authorize(state: &AppState, headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(expected) = &state.admin_key else {
        return Err(ApiError::forbidden(
            "resets are disabled: no admin key is configured on the server",
        ));
    };
    let mut sent = headers.get_all("x-admin-key").iter();
    match (sent.next(), sent.next()) {
        (Some(key), None) if bool::from(expected.as_bytes().ct_eq(key.as_bytes())) => Ok(()),
        (None, _) => Err(ApiError::forbidden("an X-Admin-Key header is required")),
        _ => Err(ApiError::forbidden("the X-Admin-Key is not valid")),
    }
}
