//! `POST /json`: Envoy's rate limit service in protobuf JSON, as
//! envoyproxy/ratelimit serves it for clients that cannot speak gRPC (a
//! Lua filter, a script). The same decisions as the gRPC service.

use axum::Json;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use ratewarden_envoy::ServiceError;
use ratewarden_envoy::json::{JsonRequest, JsonResponse, parse_request, render_response};

use crate::http::extract::body_bytes;
use crate::http::problem::ApiError;
use crate::state::AppState;

/// Decides a `RateLimitRequest`; 200 (OK) or 429 (OVER_LIMIT) with the
/// `RateLimitResponse`. Any content type is read as JSON, as the
/// reference server does.
#[utoipa::path(
    post,
    path = "/json",
    operation_id = "envoyShouldRateLimit",
    tag = "envoy",
    request_body(content = JsonRequest, description = "A RateLimitRequest in protobuf JSON (camelCase or proto field names)", content_type = "application/json"),
    responses(
        (status = 200, description = "overallCode OK", body = JsonResponse),
        (status = 400, description = "Not a RateLimitRequest, a member given twice, an empty domain, no descriptors or more than --envoy-max-descriptors (256 by default), a limit with an unknown unit, isNegativeHits", body = crate::http::problem::Problem, content_type = "application/problem+json"),
        (status = 413, description = "The body is larger than --max-body-bytes", body = crate::http::problem::Problem, content_type = "application/problem+json"),
        (status = 415, description = "The body is in a content coding (gzip, …: the answer carries Accept-Encoding: identity)", body = crate::http::problem::Problem, content_type = "application/problem+json"),
        (status = 429, description = "overallCode OVER_LIMIT", body = JsonResponse),
        (status = 503, description = "The store is unavailable and a limit fails closed", body = crate::http::problem::Problem, content_type = "application/problem+json"),
    )
)]
pub async fn handle(State(state): State<AppState>, request: Request) -> Result<Response, ApiError> {
    let body = body_bytes(request, &state).await?;
    // Read strictly first: a member given twice is refused, as on every
    // JSON body (the protobuf JSON reader below would take one of them).
    crate::http::json::parse(&body).map_err(|e| {
        ApiError::bad_request(format!(
            "the body is not a RateLimitRequest in protobuf JSON: {e}"
        ))
    })?;
    let request = parse_request(&body).map_err(|e| {
        ApiError::bad_request(format!(
            "the body is not a RateLimitRequest in protobuf JSON: {e}"
        ))
    })?;
    let response = state
        .envoy
        .should_rate_limit(&request)
        .await
        .map_err(|e| match e {
            ServiceError::InvalidArgument(message) => ApiError::bad_request(message),
            ServiceError::Unavailable(cause) | ServiceError::Internal(cause) => cause.into(),
        })?;
    let status = if response.overall_code == Code::OverLimit as i32 {
        StatusCode::TOO_MANY_REQUESTS
    } else {
        StatusCode::OK
    };
    Ok((status, Json(render_response(&response))).into_response())
}
