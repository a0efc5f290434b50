//! The HTTP routes: one file per handler, all with the same shape
//! (extract and validate, one store call, answer).

mod check;
mod ping;
mod reset;
mod status;
mod usage;

use axum::Router;
use axum::error_handling::HandleErrorLayer;
use axum::extract::DefaultBodyLimit;
use axum::http::Method;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use ratewarden_core::{Outcome, Policy, Timestamp};
use serde::Serialize;
use time::OffsetDateTime;
use time::format_description::FormatItem;
use time::macros::format_description;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::trace::TraceLayer;

use crate::headers::rate_limit_headers;
use crate::problem::{self, ApiError};
use crate::state::{AppState, Basis, Verdict};

/// The longest a request may take, reading its body included; slower ones
/// get 408 problem details.
pub const REQUEST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Every route, with problem details for unknown routes (404), wrong
/// methods (405), slow requests (408), oversized bodies (413) and panics
/// (500).
pub fn router(state: AppState) -> Router {
    let body_limit = state.max_body_bytes;
    Router::new()
        .route("/ping", get(ping::handle))
        .route("/status", get(status::handle))
        .route("/rate/check", post(check::handle))
        .route("/rate/status", get(usage::handle))
        .route("/rate/reset/{user_id}", delete(reset::handle))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(state)
        .layer(DefaultBodyLimit::max(body_limit))
        .layer(
            tower::ServiceBuilder::new()
                .layer(HandleErrorLayer::new(|_: tower::BoxError| async {
                    ApiError::request_timeout(REQUEST_TIMEOUT)
                }))
                .layer(tower::timeout::TimeoutLayer::new(REQUEST_TIMEOUT)),
        )
        .layer(axum::middleware::from_fn(problem::with_instance))
        .layer(CatchPanicLayer::custom(|_| {
            ApiError::internal(&"a handler panicked").into_response()
        }))
        .layer(TraceLayer::new_for_http())
}

async fn not_found(method: Method, uri: axum::http::Uri) -> ApiError {
    ApiError::not_found(format!("no route for {method} {}", uri.path()))
}

async fn method_not_allowed(method: Method, uri: axum::http::Uri) -> ApiError {
    ApiError::method_not_allowed(format!("{} does not accept {method}", uri.path()))
}

/// A rate-limited route's answer: 200 with `body`, or 429 problem details
/// with `Retry-After`; both with the rate-limit headers, unless the
/// request was let through unchecked (fail open).
fn limited(
    policy: &Policy,
    verdict: &Verdict,
    body: impl Serialize,
    denied: impl FnOnce() -> String,
) -> Response {
    let decision = &verdict.decision;
    if verdict.basis == Basis::FailedOpen {
        // Unchecked: no quota to advertise.
        return axum::Json(body).into_response();
    }
    let headers = rate_limit_headers(policy, decision);
    let retry_after = match decision.outcome {
        Outcome::Allowed => return (headers, axum::Json(body)).into_response(),
        Outcome::Denied { retry_after } => retry_after,
        // A cost above the limit (limit 0, a kill switch): waiting does not
        // help; tell the client to come back after a window.
        Outcome::Never => policy.quota.window(),
    };
    ApiError::rate_limited(denied(), retry_after, decision.limit, policy.quota.window())
        .with_headers(headers)
        .into_response()
}

/// `"Rate limit of 3 requests per 60s exceeded"`, the seed's wording.
fn limit_text(policy: &Policy) -> String {
    let window = policy.quota.window();
    let window = if window.subsec_nanos() == 0 {
        format!("{}s", window.as_secs())
    } else {
        format!("{}ms", window.as_millis())
    };
    let limit = policy.quota.limit();
    let unit = if limit == 1 { "request" } else { "requests" };
    format!("Rate limit of {limit} {unit} per {window} exceeded")
}

/// `2026-01-01T00:00:00Z` (UTC, whole seconds).
fn iso_seconds(t: Timestamp) -> String {
    const FORMAT: &[FormatItem<'static>] =
        format_description!("[year]-[month]-[day]T[hour]:[minute]:[second]Z");
    let secs = (t.as_unix_nanos() / 1_000_000_000) as i64;
    OffsetDateTime::from_unix_timestamp(secs)
        .ok()
        .and_then(|dt| dt.format(FORMAT).ok())
        .unwrap_or_default()
}
