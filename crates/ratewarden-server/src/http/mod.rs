//! The HTTP interface: the seed routes ([`seed`]), the JSON decision API
//! ([`v1`]), Envoy's rate limit service in protobuf JSON ([`envoy`],
//! `POST /json`) and the OpenAPI document. Every handler turns its request into
//! checks for the [`ratewarden_limiter::Limiter`] and its answer into a
//! response; none touches a store.
//!
//! - [`problem`]: [`problem::ApiError`], RFC 9457 problem details.
//! - [`extract`]: input validation (the seed routes' table).
//! - [`json`]: every JSON body read strictly (a member given twice is a
//!   400).
//! - [`authorize`]: `/v1/authorize`, forward auth for nginx, Caddy and
//!   Traefik.
//! - [`key_source`]: which client a `/ping` counts against.
//! - [`admin`]: the fail-closed admin key check.
//! - [`ops`]: `/metrics`, `/healthz`, `/readyz`, `/healthcheck`,
//!   `/dashboard`.

pub mod admin;
pub mod authorize;
pub mod envoy;
pub mod extract;
pub mod json;
pub mod key_source;
pub mod openapi;
pub mod ops;
pub mod problem;
pub mod seed;
pub mod v1;

use std::panic::AssertUnwindSafe;
use std::task::Poll;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request};
use axum::http::{HeaderMap, HeaderValue, Method, header};
use axum::response::{IntoResponse, Response};
use tower::Service;
use tower_http::trace::{DefaultOnFailure, DefaultOnResponse, TraceLayer};
use tracing::Level;
use tracing::level_filters::LevelFilter;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use ratewarden_http::headers::insert_outcome_headers;
use ratewarden_limiter::Outcome;

use self::problem::ApiError;
use crate::state::AppState;

/// The longest a request may take, reading its body included; slower ones
/// get 408 problem details.
pub const REQUEST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Every route, with problem details for unknown routes (404), wrong
/// methods (405), slow requests (408), oversized bodies (413) and panics
/// (500): the service [`crate::conn::serve`] runs.
///
/// Not `Router::layer`s: each of those boxes the routes again and clones
/// the box per request, and `from_fn` and `HandleErrorLayer` box their
/// futures too. [`App::answer`] does the same work in one future.
#[derive(Debug, Clone)]
pub enum App {
    /// The access log is off (the level is fixed at startup): no span and
    /// no per-request line to build.
    Quiet(Router),
    /// The access log: a span and one line per answer, at debug only;
    /// server errors too (the decision layer logs store errors,
    /// summarised, and bugs are logged where they happen). The trace
    /// layer is outermost, as it sees every answer, a 408 or a panic's
    /// 500 included.
    Logged(Router),
}

/// See [`App`].
pub fn router(state: AppState) -> App {
    let body_limit = state.max_body_bytes;
    let (routes, api) = routes_and_api().split_for_parts();
    let routes = routes
        // Any method, so its route is outside `routes!`; the document
        // lists it from `openapi::base`.
        .route("/v1/authorize", axum::routing::any(authorize::handle))
        .merge(openapi::route(api))
        .merge(ops::routes())
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(state)
        // A layer, not a service around the router: axum only sends the
        // `Allow` of a 405 from a layered method fallback.
        .layer(DefaultBodyLimit::max(body_limit));
    // The subscriber is installed before the router is built and its
    // filter is not reloaded: below debug everywhere, neither the span nor
    // the line could be recorded.
    if LevelFilter::current() < LevelFilter::DEBUG {
        return App::Quiet(routes);
    }
    let logged = Router::new().fallback_service(Guarded(routes)).layer(
        TraceLayer::new_for_http()
            .make_span_with(access_span)
            .on_request(())
            .on_response(DefaultOnResponse::new().level(Level::DEBUG))
            .on_failure(DefaultOnFailure::new().level(Level::DEBUG)),
    );
    App::Logged(logged)
}

impl App {
    /// The answer to `request`; never an error (every failure is problem
    /// details).
    pub fn answer(&self, request: Request) -> impl Future<Output = Response> + Send + use<> {
        let app = self.clone();
        async move {
            match app {
                App::Quiet(routes) => guard(routes, request).await,
                App::Logged(mut logged) => match logged.call(request).await {
                    Ok(response) => response,
                    Err(never) => match never {},
                },
            }
        }
    }
}

/// A 200 with `body` as JSON (`Content-Type: application/json`) and, when
/// `outcome` is given, its rate-limit headers ([`insert_outcome_headers`]).
///
/// Built in one go for the decision routes' hot path: the body serialised
/// into one buffer sized for their answers (axum's `Json` starts at 128
/// bytes and grows), the header map sized for every header such an answer
/// carries (it would otherwise grow twice), and `Content-Length` set here
/// (axum then need not format it). A body that cannot be serialised (none
/// of the routes' types can fail) is a 500 problem.
pub fn allowed_json(body: &impl serde::Serialize, outcome: Option<&Outcome>) -> Response {
    let mut bytes = Vec::with_capacity(384);
    if let Err(e) = serde_json::to_writer(&mut bytes, body) {
        return ApiError::internal(&e).into_response();
    }
    let mut headers = HeaderMap::with_capacity(8);
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(bytes.len()));
    if let Some(outcome) = outcome {
        insert_outcome_headers(&mut headers, outcome);
    }
    let mut response = Response::new(axum::body::Body::from(bytes));
    *response.headers_mut() = headers;
    response
}

/// `routes`' answer to `request` with the error handling every answer
/// gets: a panic is a 500 (without `instance`, as it may have happened
/// anywhere), a request slower than [`REQUEST_TIMEOUT`] (its body
/// included) a 408, and every [`ApiError`] response gets the request path
/// as its `instance` ([`problem::with_instance`]).
async fn guard(mut routes: Router, request: Request) -> Response {
    // A `Uri` clone shares its buffer: no copy on the hot path.
    let uri = request.uri().clone();
    // Axum's routers are always ready.
    let Ok(routed) = std::panic::catch_unwind(AssertUnwindSafe(|| routes.call(request))) else {
        return panicked();
    };
    let mut routed = std::pin::pin!(routed);
    let caught = std::future::poll_fn(|cx| {
        match std::panic::catch_unwind(AssertUnwindSafe(|| routed.as_mut().poll(cx))) {
            Ok(Poll::Ready(answer)) => Poll::Ready(Some(answer)),
            Ok(Poll::Pending) => Poll::Pending,
            Err(_) => Poll::Ready(None),
        }
    });
    // The timer is only registered if the answer is not ready at the
    // first poll.
    let response = match tokio::time::timeout(REQUEST_TIMEOUT, caught).await {
        Ok(Some(Ok(response))) => response,
        Ok(Some(Err(never))) => match never {},
        Ok(None) => return panicked(),
        Err(_) => ApiError::request_timeout(REQUEST_TIMEOUT).into_response(),
    };
    problem::with_instance(response, uri.path())
}

fn panicked() -> Response {
    ApiError::internal(&"a handler panicked").into_response()
}

/// [`guard`] as a service, under the access log's trace layer.
#[derive(Debug, Clone)]
struct Guarded(Router);

impl Service<Request> for Guarded {
    type Response = Response;
    type Error = std::convert::Infallible;
    type Future = std::pin::Pin<
        Box<dyn Future<Output = Result<Response, std::convert::Infallible>> + Send + 'static>,
    >;

    fn poll_ready(&mut self, _: &mut std::task::Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let routes = self.0.clone();
        // Boxed: debug logging only.
        Box::pin(async move { Ok(guard(routes, request).await) })
    }
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

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use axum::http::StatusCode;
    use axum::routing::get;

    use super::*;

    /// A handler that panics while it is polled gets the 500 problem
    /// details (the work of tower-http's `CatchPanicLayer` before `App`);
    /// a route's own error keeps its `instance`.
    #[tokio::test]
    async fn a_panic_is_a_500_and_errors_carry_their_instance() {
        async fn boom() -> &'static str {
            tokio::task::yield_now().await;
            panic!("a bug")
        }
        async fn refused() -> ApiError {
            ApiError::not_found("nothing here".to_owned())
        }
        let routes = Router::new()
            .route("/boom", get(boom))
            .route("/refused", get(refused));
        let request = |path: &str| Request::get(path).body(Body::empty()).unwrap();

        let panicked = guard(routes.clone(), request("/boom")).await;
        assert_eq!(panicked.status(), StatusCode::INTERNAL_SERVER_ERROR);
        let body = axum::body::to_bytes(panicked.into_body(), 4096)
            .await
            .unwrap();
        let problem: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(problem["status"], 500);
        assert!(problem.get("instance").is_none(), "{problem}");

        let refused = guard(routes, request("/refused")).await;
        assert_eq!(refused.status(), StatusCode::NOT_FOUND);
        let body = axum::body::to_bytes(refused.into_body(), 4096)
            .await
            .unwrap();
        let problem: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(problem["instance"], "/refused");
    }
}
