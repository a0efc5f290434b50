//! `DELETE /rate/reset/{userId}[?endpoint=E]`: admin-only, fail-closed reset
//! of the policy `check`'s counters (seed B). Auth is checked before the
//! path.

use std::net::SocketAddr;

use axum::Json;
use axum::extract::rejection::PathRejection;
use axum::extract::{ConnectInfo, Path, RawQuery, State};
use axum::http::{HeaderMap, Uri};
use ratewarden_core::{Key, KeyMatch};
use serde::Serialize;

use super::check::{CHECK, user_key};
use crate::http::admin;
use crate::http::extract::{self, query_param};
use crate::http::problem::ApiError;
use crate::state::AppState;

/// What a reset deleted.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Reset {
    /// The user whose events were deleted.
    pub user_id: u64,
    /// The endpoint, or `null` for all of the user's endpoints.
    pub endpoint: Option<String>,
    /// How many counters (endpoints of the user) were reset: those whose
    /// sliding log still held a live event; the same count on every store.
    pub deleted: u64,
}

/// Deletes the user's events, all endpoints or one.
#[utoipa::path(
    delete,
    path = "/rate/reset/{user_id}",
    operation_id = "rateReset",
    tag = "seed",
    params(
        ("user_id" = crate::http::v1::schema::UserId, Path, description = "The user: ASCII digits for a number from 1 to 2^63 - 1 (anything else is 404)"),
        ("endpoint" = Option<String>, Query, min_length = 1, max_length = 128, description = "Reset only this endpoint (1 to 128 characters)"),
        ("X-Admin-Key" = String, Header, description = "The admin key (RATEWARDEN_ADMIN_KEY)"),
    ),
    responses(
        (status = 200, description = "Reset", body = Reset),
        (status = 403, description = "No admin key configured, none sent or a wrong one", body = crate::http::problem::Problem, content_type = "application/problem+json"),
        (status = 404, description = "The user id is not a positive integer", body = crate::http::problem::Problem, content_type = "application/problem+json"),
        (status = 422, description = "endpoint empty or over 128 characters", body = crate::http::problem::Problem, content_type = "application/problem+json"),
        (status = 503, description = "The store is unavailable", body = crate::http::problem::Problem, content_type = "application/problem+json"),
    )
)]
pub async fn handle(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    uri: Uri,
    path: Result<Path<String>, PathRejection>,
    RawQuery(query): RawQuery,
) -> Result<Json<Reset>, ApiError> {
    admin::authorize(&state, &headers, peer, "DELETE /rate/reset")?;
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
    let deleted = match &endpoint {
        Some(e) => {
            let key = user_key(user_id, e)?;
            state.limiter.reset(CHECK, KeyMatch::Exactly(&key)).await?
        }
        None => {
            let user = Key::single(user_id.to_string()).map_err(|e| ApiError::internal(&e))?;
            state
                .limiter
                .reset(CHECK, KeyMatch::StartingWith(&user))
                .await?
        }
    };
    let endpoint_shown = endpoint
        .as_deref()
        .map(|e| ratewarden_limiter::for_log(e.as_bytes()));
    tracing::info!(%peer, user_id, endpoint = ?endpoint_shown, deleted, "admin: counters reset");
    Ok(Json(Reset {
        user_id,
        endpoint,
        deleted,
    }))
}
