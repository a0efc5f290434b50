//! `DELETE /v1/counters?policy=P&key=K`: admin only, fail closed; deletes
//! that key's state under that policy.

use std::net::SocketAddr;

use axum::Json;
use axum::extract::{ConnectInfo, RawQuery, State};
use axum::http::HeaderMap;
use ratewarden_core::KeyMatch;
use serde::Serialize;
use utoipa::ToSchema;

use super::{key_from_parts, policy_param};
use crate::http::admin;
use crate::http::extract::query_params;
use crate::http::problem::{ApiError, Problem};
use crate::state::AppState;

/// What a reset deleted.
#[derive(Debug, Serialize, ToSchema)]
pub struct Deleted {
    /// The policy.
    pub policy: String,
    /// The key's parts (bytes that are not UTF-8 shown as U+FFFD).
    pub key: Vec<String>,
    /// How many counters were reset: 1 when the key's state still held
    /// usage, else 0 (the same on every store).
    pub deleted: u64,
}

/// Deletes the key's state. The admin key is checked first.
#[utoipa::path(
    delete,
    path = "/v1/counters",
    operation_id = "resetCounters",
    tag = "admin",
    params(
        ("policy" = super::schema::PolicyName, Query, description = "The policy's name"),
        ("key" = Vec<super::schema::KeyPart>, Query, explode = true, min_items = 1, max_items = 4, description = "The key; repeat the parameter for a key of several parts (4096 bytes in all at most)"),
        ("X-Admin-Key" = String, Header, description = "The admin key (RATEWARDEN_ADMIN_KEY)"),
    ),
    responses(
        (status = 200, description = "Deleted", body = Deleted),
        (status = 403, description = "No admin key configured, none sent or a wrong one", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No policy has that name", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "policy or key missing, empty or too long", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The store is unavailable", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn handle(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
) -> Result<Json<Deleted>, ApiError> {
    admin::authorize(&state, &headers, peer, "DELETE /v1/counters")?;
    let policy = policy_param(query.as_deref())?;
    let parts = query_params(query.as_deref(), "key");
    let key = key_from_parts("key", &parts)?;
    let deleted = state
        .limiter
        .reset(&policy, KeyMatch::Exactly(&key))
        .await?;
    tracing::info!(
        %peer,
        policy,
        key = ratewarden_limiter::for_log(key.to_string().as_bytes()),
        deleted,
        "admin: counters deleted"
    );
    Ok(Json(Deleted {
        policy,
        key: parts
            .iter()
            .map(|p| String::from_utf8_lossy(p).into_owned())
            .collect(),
        deleted,
    }))
}
