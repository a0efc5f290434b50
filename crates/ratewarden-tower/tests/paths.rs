//! Which path the layer matches: every spelling of a limited path counts
//! against its policy (`/%61pi/x`, `//api/x`, `/x/../api/x`), a pattern
//! also fits the path as received (axum routes `/files/../x` to
//! `/files/{*rest}`), and a path with no single meaning is a 400 problem
//! where a policy reads it, not a guess.

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use common::{build, clock, key, layer_of, per_minute};
use http::{Request, StatusCode};
use ratewarden_tower::{KeyPart, RateLimitLayer};
use serde_json::Value;
use tower::ServiceExt;

struct App {
    router: Router,
    calls: Arc<AtomicUsize>,
    layer: RateLimitLayer,
}

impl App {
    fn new(layer: RateLimitLayer) -> App {
        let calls = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&calls);
        let router = Router::new()
            .fallback(move || {
                let calls = Arc::clone(&counted);
                async move {
                    calls.fetch_add(1, Ordering::SeqCst);
                    "inner"
                }
            })
            .layer(layer.clone());
        App {
            router,
            calls,
            layer,
        }
    }

    /// GET `uri` from 192.0.2.1: the status and the body.
    async fn get(&self, uri: &str) -> (StatusCode, Value) {
        let mut request = Request::get(uri)
            .body(Body::empty())
            .expect("a valid request");
        let peer: SocketAddr = "192.0.2.1:40000".parse().expect("an address");
        request.extensions_mut().insert(ConnectInfo(peer));
        let response = self
            .router
            .clone()
            .oneshot(request)
            .await
            .expect("infallible");
        let status = response.status();
        let body = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .expect("a body");
        (status, serde_json::from_slice(&body).unwrap_or(Value::Null))
    }

    fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

#[tokio::test]
async fn every_spelling_of_a_limited_path_counts_against_its_policy() {
    let clock = clock();
    let app = App::new(build(layer_of(
        &clock,
        [per_minute("api", 6, [KeyPart::ClientIp]).path("/api/*")],
    )));
    for spelling in [
        "/api/orders",
        "/%61pi/orders",
        "//api/orders",
        "/x/../api/orders",
        "/api%2Forders",
        "/api;v=1/orders",
    ] {
        assert_eq!(app.get(spelling).await.0, StatusCode::OK, "{spelling}");
    }
    for spelling in ["/api/orders", "/%61pi/orders", "//api//orders", "/./api/x"] {
        assert_eq!(
            app.get(spelling).await.0,
            StatusCode::TOO_MANY_REQUESTS,
            "{spelling}"
        );
    }
    assert_eq!(app.calls(), 6);
    // An unlimited path stays unlimited, whatever its spelling.
    assert_eq!(app.get("/%68ealth").await.0, StatusCode::OK);
}

#[tokio::test]
async fn a_path_key_is_the_normal_form() {
    let clock = clock();
    let app = App::new(build(layer_of(
        &clock,
        [per_minute("per-path", 1, [KeyPart::Path])],
    )));
    assert_eq!(app.get("/%6Frders/").await.0, StatusCode::OK);
    assert_eq!(
        app.get("//orders/./").await.0,
        StatusCode::TOO_MANY_REQUESTS
    );
    let used = app
        .layer
        .limiter()
        .status("per-path", &key("/orders/"))
        .await
        .expect("a status");
    assert_eq!(used.decision.used, 1);
}

#[tokio::test]
async fn a_pattern_also_fits_the_path_as_received() {
    let clock = clock();
    let app = App::new(build(layer_of(
        &clock,
        [per_minute("files", 1, [KeyPart::ClientIp]).path("/files/*")],
    )));
    assert_eq!(app.get("/files/a").await.0, StatusCode::OK);
    // Normal form `/x`; axum would route it to `/files/{*rest}`.
    assert_eq!(
        app.get("/files/../x").await.0,
        StatusCode::TOO_MANY_REQUESTS
    );
}

#[tokio::test]
async fn a_path_with_no_single_meaning_is_a_400_problem_where_a_pattern_reads_it() {
    let clock = clock();
    let app = App::new(build(layer_of(
        &clock,
        [per_minute("api", 1, [KeyPart::ClientIp]).path("/api/*")],
    )));
    for path in [
        "/api/%2e%2e/admin",
        "/%61pi/x/../../admin",
        "/api/..;/admin",
        "/api%5C..%5Cadmin",
        "/api/x%00",
        "/..",
    ] {
        let (status, body) = app.get(path).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{path}: {body}");
        assert_eq!(
            body["type"], "urn:ratewarden:problem:ambiguous-path",
            "{path}"
        );
        let detail = body["detail"].as_str().unwrap_or_default();
        assert!(
            detail.contains("policy 'api' cannot match it"),
            "{path}: {detail}"
        );
    }
    assert_eq!(app.calls(), 0);

    // Where no policy reads the path, the service decides what it means.
    let everywhere = App::new(build(layer_of(
        &clock,
        [per_minute("everywhere", 5, [KeyPart::ClientIp])],
    )));
    assert_eq!(everywhere.get("/api/%2e%2e/admin").await.0, StatusCode::OK);
}

#[tokio::test]
async fn a_repeated_key_parameter_is_a_400_problem() {
    let clock = clock();
    let app = App::new(build(layer_of(
        &clock,
        [per_minute("per-user", 1, [KeyPart::Query("user".into())])],
    )));
    let (status, body) = app.get("/login?user=mallory&user=alice").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["type"], "urn:ratewarden:problem:ambiguous-query");
    assert!(
        body["detail"]
            .as_str()
            .is_some_and(|d| d.contains("'user' is given more than once")),
        "{body}"
    );
    assert_eq!(app.calls(), 0);
}
