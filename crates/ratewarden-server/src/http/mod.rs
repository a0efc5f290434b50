//! The HTTP interface: the seed routes ([`seed`]), the JSON decision API
//! ([`v1`]), Envoy's rate limit service in protobuf JSON ([`envoy`],
//! `POST /json`) and the OpenAPI document. Every handler turns its request into
//! checks for the [`ratewarden_limiter::Limiter`] and its answer into a
//! response; none touches a store.
//!
//! - [`problem`]: [`problem::ApiError`], RFC 9457 problem details.
//! - [`extract`]: input validation (the seed routes' table).
//! - [`authorize`]: `/v1/authorize`, forward auth for nginx, Caddy and
//!   Traefik.
//! - [`key_source`]: which client a `/ping` counts against.
//! - [`admin`]: the fail-closed admin key check.
//! - [`ops`]: `/metrics`, `/healthz`, `/readyz`, `/dashboard`.

pub mod admin;
pub mod authorize;
pub mod envoy;
pub mod extract;
pub mod key_source;
pub mod openapi;
pub mod ops;
pub mod problem;
pub mod seed;
pub mod v1;

use axum::Router;
use axum::error_handling::HandleErrorLayer;
use axum::extract::DefaultBodyLimit;
use axum::http::Method;
use axum::response::IntoResponse;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::trace::{DefaultOnFailure, DefaultOnResponse, TraceLayer};
use tracing::Level;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use self::problem::ApiError;
use crate::state::AppState;

/// The longest a request may take, reading its body included; slower ones
/// get 408 problem details.
pub const REQUEST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Every route, with problem details for unknown routes (404), wrong
/// methods (405), slow requests (408), oversized bodies (413) and panics
/// (500).
pub fn router(state: AppState) -> Router {
    let body_limit = state.max_body_bytes;
    let (routes, api) = routes_and_api().split_for_parts();
    routes
        // Any method, so its route is outside `routes!`; the document
        // lists it from `openapi::base`.
        .route("/v1/authorize", axum::routing::any(authorize::handle))
        .merge(openapi::route(api))
        .merge(ops::routes())
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
        // The access log: a span and one line per answer, at debug only;
        // server errors too (the decision layer logs store errors,
        // summarised, and bugs are logged where they happen).
        .layer(
            TraceLayer::new_for_http()
                .make_span_with(access_span)
                .on_request(())
                .on_response(DefaultOnResponse::new().level(Level::DEBUG))
                .on_failure(DefaultOnFailure::new().level(Level::DEBUG)),
        )
}

/// Every route with its OpenAPI description, from the handlers'
/// `#[utoipa::path]` attributes: the document cannot drift from the
/// routes.
pub fn routes_and_api() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(openapi::base())
        .routes(routes!(seed::ping::handle))
        .routes(routes!(seed::status::handle))
        .routes(routes!(seed::check::handle))
        .routes(routes!(seed::usage::handle))
        .routes(routes!(seed::reset::handle))
        .routes(routes!(v1::check::handle))
        .routes(routes!(v1::status::handle))
        .routes(routes!(v1::counters::handle))
        .routes(routes!(v1::policies::handle))
        .routes(routes!(envoy::handle))
}

/// The span of one request in the debug access log: the method, the path
/// and the query, each cut to 64 characters and escaped (a query may
/// carry a key).
fn access_span(request: &axum::http::Request<axum::body::Body>) -> tracing::Span {
    let uri = request.uri();
    tracing::debug_span!(
        "request",
        method = %request.method(),
        path = ratewarden_limiter::for_log(uri.path().as_bytes()),
        query = uri.query().map(|q| ratewarden_limiter::for_log(q.as_bytes())),
    )
}

async fn not_found(method: Method, uri: axum::http::Uri) -> ApiError {
    ApiError::not_found(format!("no route for {method} {}", uri.path()))
}

async fn method_not_allowed(method: Method, uri: axum::http::Uri) -> ApiError {
    ApiError::method_not_allowed(format!("{} does not accept {method}", uri.path()))
}
