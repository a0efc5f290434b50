//! `GET /v1/status?policy=P&key=K`: what a request of cost 1 would get
//! now. Changes nothing.

use axum::Json;
use axum::extract::{RawQuery, State};

use super::{CheckAnswer, key_from_parts, policy_param, status_answer};
use crate::http::extract::query_params;
use crate::http::problem::{ApiError, Problem};
use crate::state::AppState;

/// The status of one key: `allowed` (would a request of cost 1 pass now),
/// `remaining` (units that could pass now; a fresh key shows the limit).
#[utoipa::path(
    get,
    path = "/v1/status",
    operation_id = "readStatus",
    tag = "decisions",
    params(
        ("policy" = super::schema::PolicyName, Query, description = "The policy's name"),
        ("key" = Vec<super::schema::KeyPart>, Query, explode = true, min_items = 1, max_items = 4, description = "The key; repeat the parameter for a key of several parts (4096 bytes in all at most)"),
    ),
    responses(
        (status = 200, description = "The key's status", body = CheckAnswer),
        (status = 404, description = "No policy has that name", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "policy or key missing, empty or too long", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The store is unavailable", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn handle(
    State(state): State<AppState>,
    RawQuery(query): RawQuery,
) -> Result<Json<CheckAnswer>, ApiError> {
    let policy = policy_param(query.as_deref())?;
    let key = key_from_parts("key", &query_params(query.as_deref(), "key"))?;
    let status = state.limiter.status(&policy, &key).await?;
    Ok(Json(status_answer(&status)))
}
