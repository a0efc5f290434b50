//! The layer around an axum Router: what passes, what is refused and how,
//! every key part, several policies, store failures, missing keys, the
//! builder's errors, a layer over a limiter, SQLite, concurrency, and a
//! real socket. Time is a `ManualClock`, so window edges are exact.

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::routing::{get, post};
use bytes::Bytes;
use common::{
    FailingStore, MINUTE, START, build, clock, header, key, layer_of, literal, per_minute,
};
use http::{HeaderMap, Method, Request, StatusCode, Uri};
use ratewarden_core::{Algorithm, Key, ManualClock, MemoryStore, Policy, Quota};
use ratewarden_limiter::{FailureMode, Limiter, PolicyDef, PolicySet};
use ratewarden_sqlite::{SqliteOptions, SqliteStore};
use ratewarden_tower::{KeyPart, MissingKey, PolicyBuilder, RateLimitLayer, RateLimitLayerBuilder};
use serde_json::{Value, json};
use tower::ServiceExt;

const PEER: &str = "192.0.2.1:40000";
const QUOTA_EXCEEDED: &str = "https://iana.org/assignments/http-problem-types#quota-exceeded";

/// A Router whose every route (a fallback) answers `inner: METHOD PATH`
/// and counts its calls, wrapped in a rate-limit layer.
struct App {
    router: Router,
    calls: Arc<AtomicUsize>,
    layer: RateLimitLayer,
}

/// The counted inner service, without the layer.
fn inner(calls: &Arc<AtomicUsize>) -> Router {
    let calls = Arc::clone(calls);
    Router::new().fallback(move |method: Method, uri: Uri| {
        let calls = Arc::clone(&calls);
        async move {
            calls.fetch_add(1, Ordering::SeqCst);
            format!("inner: {method} {}", uri.path())
        }
    })
}

fn app(layer: RateLimitLayer) -> App {
    let calls = Arc::new(AtomicUsize::new(0));
    App {
        router: inner(&calls).layer(layer.clone()),
        calls,
        layer,
    }
}

/// A request from `peer` (no connection info when `None`).
fn request(peer: Option<&str>, method: &str, uri: &str, headers: &[(&str, &str)]) -> Request<Body> {
    let mut builder = Request::builder().method(method).uri(uri);
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    let mut request = builder.body(Body::empty()).expect("a valid request");
    if let Some(peer) = peer {
        let addr: SocketAddr = peer.parse().expect("a socket address");
        request.extensions_mut().insert(ConnectInfo(addr));
    }
    request
}

fn get_from(peer: &str, uri: &str) -> Request<Body> {
    request(Some(peer), "GET", uri, &[])
}

fn get_(uri: &str) -> Request<Body> {
    get_from(PEER, uri)
}

fn with_headers(uri: &str, headers: &[(&str, &str)]) -> Request<Body> {
    request(Some(PEER), "GET", uri, headers)
}

#[derive(Debug)]
struct Reply {
    status: StatusCode,
    headers: HeaderMap,
    body: Bytes,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .get(name)
            .map(|v| v.to_str().expect("an ASCII header"))
    }

    fn text(&self) -> &str {
        std::str::from_utf8(&self.body).expect("a UTF-8 body")
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text()))
    }

    fn has_rate_limit_headers(&self) -> bool {
        [
            "ratelimit-policy",
            "ratelimit",
            "x-ratelimit-limit",
            "x-ratelimit-remaining",
            "x-ratelimit-reset",
        ]
        .iter()
        .any(|h| self.headers.contains_key(*h))
    }

    /// Asserts a problem-details answer with `status` and type `kind`.
    #[track_caller]
    fn assert_problem(&self, status: StatusCode, kind: &str) -> Value {
        assert_eq!(self.status, status, "{}", self.text());
        assert_eq!(
            self.header("content-type"),
            Some("application/problem+json")
        );
        let body = self.json();
        assert_eq!(body["type"], kind, "{body}");
        assert_eq!(body["status"], status.as_u16(), "{body}");
        body
    }
}

impl App {
    async fn send(&self, request: Request<Body>) -> Reply {
        send(&self.router, request).await
    }

    fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    /// How many units `policy` has counted for `key`.
    async fn used(&self, policy: &str, key: &Key) -> u64 {
        let status = self
            .layer
            .limiter()
            .status(policy, key)
            .await
            .expect("a status");
        status.decision.used
    }

    /// Sends `request()` `n` times; the statuses.
    async fn statuses(&self, n: usize, request: impl Fn() -> Request<Body>) -> Vec<u16> {
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            out.push(self.send(request()).await.status.as_u16());
        }
        out
    }
}

async fn send(router: &Router, request: Request<Body>) -> Reply {
    let response = router.clone().oneshot(request).await.expect("infallible");
    let status = response.status();
    let headers = response.headers().clone();
    let body = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .expect("a body");
    Reply {
        status,
        headers,
        body,
    }
}

// ---------------------------------------------------------------------------
// Allowed, refused, allowed again

fn three_per_minute_per_client(clock: &ManualClock) -> App {
    app(build(layer_of(
        clock,
        [per_minute("api", 3, [KeyPart::ClientIp])],
    )))
}

#[tokio::test]
async fn allowed_requests_get_the_rate_limit_headers_on_the_inner_response() {
    let clock = clock();
    let app = three_per_minute_per_client(&clock);
    for remaining in [2, 1, 0] {
        let reply = app.send(get_("/hello")).await;
        assert_eq!(reply.status, StatusCode::OK);
        assert_eq!(
            reply.text(),
            "inner: GET /hello",
            "the inner body is intact"
        );
        assert_eq!(
            reply.header("content-type"),
            Some("text/plain; charset=utf-8")
        );
        assert_eq!(reply.header("ratelimit-policy"), Some(r#""api";q=3;w=60"#));
        let expected = format!(r#""api";r={remaining};t=60"#);
        assert_eq!(reply.header("ratelimit"), Some(expected.as_str()));
        assert_eq!(reply.header("x-ratelimit-limit"), Some("3"));
        assert_eq!(
            reply.header("x-ratelimit-remaining"),
            Some(remaining.to_string().as_str())
        );
        assert_eq!(reply.header("x-ratelimit-reset"), Some("60"));
    }
    assert_eq!(app.calls(), 3);
}

#[tokio::test]
async fn over_the_limit_is_a_429_problem_with_retry_after_rounded_up() {
    let clock = clock();
    let app = three_per_minute_per_client(&clock);
    assert_eq!(app.statuses(3, || get_("/hello")).await, [200, 200, 200]);
    // 39.5 s are left of the window: Retry-After rounds up to 40.
    clock.advance(Duration::from_millis(20_500));
    let reply = app.send(get_("/hello")).await;
    let body = reply.assert_problem(StatusCode::TOO_MANY_REQUESTS, QUOTA_EXCEEDED);
    assert_eq!(reply.header("retry-after"), Some("40"));
    assert_eq!(reply.header("ratelimit"), Some(r#""api";r=0;t=40"#));
    assert_eq!(reply.header("x-ratelimit-remaining"), Some("0"));
    assert_eq!(body["title"], "Too Many Requests");
    assert_eq!(body["instance"], "/hello");
    assert_eq!(body["violated-policies"], json!(["api"]));
    assert_eq!(
        body["detail"],
        "the request is over the quota of policy 'api'"
    );
    let result = &body["results"][0];
    assert_eq!(result["policy"], "api");
    assert_eq!(result["allowed"], false);
    assert_eq!(result["retry_after_ms"], 39_500);
}

#[tokio::test]
async fn a_refused_request_never_reaches_the_service() {
    let clock = clock();
    let app = three_per_minute_per_client(&clock);
    let statuses = app.statuses(10, || get_("/hello")).await;
    assert_eq!(statuses, [200, 200, 200, 429, 429, 429, 429, 429, 429, 429]);
    assert_eq!(app.calls(), 3, "only the allowed requests were served");
}

#[tokio::test]
async fn at_the_window_edge_requests_pass_again() {
    let clock = clock();
    let app = three_per_minute_per_client(&clock);
    assert_eq!(app.statuses(3, || get_("/hello")).await, [200, 200, 200]);
    clock.set(START.saturating_add(MINUTE - Duration::from_nanos(1)));
    let last_moment = app.send(get_("/hello")).await;
    assert_eq!(last_moment.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(
        last_moment.header("retry-after"),
        Some("1"),
        "a nanosecond rounds up to a second"
    );
    clock.set(START.saturating_add(MINUTE));
    let next_window = app.send(get_("/hello")).await;
    assert_eq!(next_window.status, StatusCode::OK);
    assert_eq!(next_window.header("ratelimit"), Some(r#""api";r=2;t=60"#));
    assert_eq!(app.calls(), 4);
}

#[tokio::test]
async fn a_gcra_burst_refuses_with_at_least_one_second_and_refills_evenly() {
    let clock = clock();
    let policy = PolicyBuilder::gcra("burst")
        .limit(10)
        .per(Duration::from_secs(1))
        .burst(2)
        .key([literal("all")]);
    let app = app(build(layer_of(&clock, [policy])));
    assert_eq!(app.statuses(2, || get_("/")).await, [200, 200]);
    let refused = app.send(get_("/")).await;
    let body = refused.assert_problem(StatusCode::TOO_MANY_REQUESTS, QUOTA_EXCEEDED);
    assert_eq!(
        refused.header("retry-after"),
        Some("1"),
        "100 ms is never 0 seconds"
    );
    assert_eq!(body["results"][0]["retry_after_ms"], 100);
    clock.advance(Duration::from_millis(100));
    assert_eq!(app.send(get_("/")).await.status, StatusCode::OK);
}

// ---------------------------------------------------------------------------
// Key parts

#[tokio::test]
async fn a_header_key_counts_each_value_apart_and_an_absent_header_is_one_shared_counter() {
    let clock = clock();
    let app = app(build(layer_of(
        &clock,
        [per_minute("by-key", 1, [header("X-Api-Key")])],
    )));
    let with_key = |k: &'static str| move || with_headers("/", &[("x-api-key", k)]);
    assert_eq!(app.statuses(2, with_key("alpha")).await, [200, 429]);
    assert_eq!(app.statuses(2, with_key("beta")).await, [200, 429]);
    assert_eq!(
        app.statuses(2, || get_("/")).await,
        [200, 429],
        "no header: the empty key"
    );
    assert_eq!(
        app.send(with_headers("/", &[("x-api-key", "")]))
            .await
            .status,
        StatusCode::TOO_MANY_REQUESTS,
        "an empty header is the same empty key"
    );
    // Header names compare case-insensitively.
    assert_eq!(
        app.send(with_headers("/", &[("X-API-KEY", "gamma")]))
            .await
            .status,
        StatusCode::OK
    );
    assert_eq!(app.used("by-key", &key("gamma")).await, 1);
    assert_eq!(app.used("by-key", &key("")).await, 1);
    assert_eq!(app.calls(), 4);
}

#[tokio::test]
async fn a_client_ip_key_is_the_connection_peer_without_its_port() {
    let clock = clock();
    let app = app(build(layer_of(
        &clock,
        [per_minute("per-client", 1, [KeyPart::ClientIp])],
    )));
    assert_eq!(
        app.send(get_from("192.0.2.1:1000", "/")).await.status,
        StatusCode::OK
    );
    assert_eq!(
        app.send(get_from("192.0.2.1:2000", "/")).await.status,
        StatusCode::TOO_MANY_REQUESTS,
        "another port of the same host"
    );
    assert_eq!(
        app.send(get_from("[::ffff:192.0.2.1]:3000", "/"))
            .await
            .status,
        StatusCode::TOO_MANY_REQUESTS,
        "an IPv4-mapped IPv6 peer is the same client"
    );
    assert_eq!(
        app.send(get_from("192.0.2.2:1000", "/")).await.status,
        StatusCode::OK
    );
    assert_eq!(
        app.send(get_from("[2001:db8::1]:443", "/")).await.status,
        StatusCode::OK
    );
    assert_eq!(app.used("per-client", &key("192.0.2.1")).await, 1);
    assert_eq!(app.used("per-client", &key("2001:db8::1")).await, 1);
}

#[tokio::test]
async fn a_plain_socket_addr_extension_also_gives_the_client_ip() {
    let clock = clock();
    let app = app(build(layer_of(
        &clock,
        [per_minute("per-client", 1, [KeyPart::ClientIp])],
    )));
    let mut request = request(None, "GET", "/", &[]);
    request
        .extensions_mut()
        .insert("198.51.100.7:9".parse::<SocketAddr>().expect("an address"));
    assert_eq!(app.send(request).await.status, StatusCode::OK);
    assert_eq!(app.used("per-client", &key("198.51.100.7")).await, 1);
}

#[tokio::test]
async fn behind_a_trusted_proxy_the_client_is_the_rightmost_untrusted_hop() {
    let clock = clock();
    let layer = layer_of(&clock, [per_minute("per-client", 1, [KeyPart::ClientIp])])
        .trusted_proxies(["10.0.0.0/8".parse().expect("a CIDR")]);
    let app = app(build(layer));
    let via_proxy = |xff: &str| {
        request(
            Some("10.0.0.5:5000"),
            "GET",
            "/",
            &[("x-forwarded-for", xff)],
        )
    };
    let first = app.send(via_proxy("6.6.6.6, 203.0.113.9, 10.1.1.1")).await;
    assert_eq!(first.status, StatusCode::OK);
    assert_eq!(app.used("per-client", &key("203.0.113.9")).await, 1);
    assert_eq!(
        app.used("per-client", &key("6.6.6.6")).await,
        0,
        "never the leftmost hop"
    );
    assert_eq!(
        app.used("per-client", &key("10.0.0.5")).await,
        0,
        "not the proxy"
    );
    // The client rewrites the leftmost hop: still the same key.
    let spoofed = app.send(via_proxy("7.7.7.7, 203.0.113.9, 10.1.1.1")).await;
    assert_eq!(spoofed.status, StatusCode::TOO_MANY_REQUESTS);
    // The same client, straight to the service.
    assert_eq!(
        app.send(get_from("203.0.113.9:1234", "/")).await.status,
        StatusCode::TOO_MANY_REQUESTS
    );
    // Another client behind the proxy.
    assert_eq!(
        app.send(via_proxy("203.0.113.10")).await.status,
        StatusCode::OK
    );
    // An untrusted peer's header is ignored.
    let forged = request(
        Some("198.51.100.1:1"),
        "GET",
        "/",
        &[("x-forwarded-for", "203.0.113.77")],
    );
    assert_eq!(app.send(forged).await.status, StatusCode::OK);
    assert_eq!(app.used("per-client", &key("198.51.100.1")).await, 1);
    assert_eq!(app.used("per-client", &key("203.0.113.77")).await, 0);
}

#[tokio::test]
async fn without_trusted_proxies_x_forwarded_for_is_ignored() {
    let clock = clock();
    let app = app(build(layer_of(
        &clock,
        [per_minute("per-client", 1, [KeyPart::ClientIp])],
    )));
    let from_proxy = |xff: &str| {
        request(
            Some("10.0.0.5:5000"),
            "GET",
            "/",
            &[("x-forwarded-for", xff)],
        )
    };
    assert_eq!(app.send(from_proxy("1.1.1.1")).await.status, StatusCode::OK);
    assert_eq!(
        app.send(from_proxy("2.2.2.2")).await.status,
        StatusCode::TOO_MANY_REQUESTS,
        "a new header value is no new client"
    );
    assert_eq!(app.used("per-client", &key("10.0.0.5")).await, 1);
}

#[tokio::test]
async fn a_path_key_counts_each_path_apart_without_the_query() {
    let clock = clock();
    let app = app(build(layer_of(
        &clock,
        [per_minute("per-path", 1, [KeyPart::Path])],
    )));
    assert_eq!(app.send(get_("/a")).await.status, StatusCode::OK);
    assert_eq!(
        app.send(get_("/a?page=2")).await.status,
        StatusCode::TOO_MANY_REQUESTS
    );
    assert_eq!(
        app.send(get_from("192.0.2.99:1", "/a")).await.status,
        StatusCode::TOO_MANY_REQUESTS
    );
    assert_eq!(app.send(get_("/b")).await.status, StatusCode::OK);
    assert_eq!(app.used("per-path", &key("/a")).await, 1);
}

#[tokio::test]
async fn a_method_key_counts_each_method_apart() {
    let clock = clock();
    let app = app(build(layer_of(
        &clock,
        [per_minute("per-method", 1, [KeyPart::Method])],
    )));
    assert_eq!(
        app.send(request(Some(PEER), "GET", "/x", &[])).await.status,
        StatusCode::OK
    );
    assert_eq!(
        app.send(request(Some(PEER), "GET", "/y", &[])).await.status,
        StatusCode::TOO_MANY_REQUESTS
    );
    let post = app.send(request(Some(PEER), "POST", "/x", &[])).await;
    assert_eq!(post.status, StatusCode::OK);
    assert_eq!(post.text(), "inner: POST /x");
    assert_eq!(app.used("per-method", &key("GET")).await, 1);
    assert_eq!(app.used("per-method", &key("POST")).await, 1);
}

#[tokio::test]
async fn a_query_key_is_the_value_percent_decoded() {
    let clock = clock();
    let app = app(build(layer_of(
        &clock,
        [per_minute("per-user", 1, [KeyPart::Query("user".into())])],
    )));
    assert_eq!(
        app.send(get_("/s?a=1&user=al%20ice&b=2")).await.status,
        StatusCode::OK
    );
    assert_eq!(app.used("per-user", &key("al ice")).await, 1);
    assert_eq!(
        app.send(get_("/s?user=al+ice")).await.status,
        StatusCode::TOO_MANY_REQUESTS,
        "`+` is a space too"
    );
    assert_eq!(app.send(get_("/s?user=bob")).await.status, StatusCode::OK);
    // No parameter (or no query) is the empty key, shared.
    assert_eq!(app.send(get_("/s?x=1")).await.status, StatusCode::OK);
    assert_eq!(
        app.send(get_("/s")).await.status,
        StatusCode::TOO_MANY_REQUESTS
    );
    assert_eq!(app.used("per-user", &key("")).await, 1);
}

#[tokio::test]
async fn a_literal_key_is_one_counter_for_everyone() {
    let clock = clock();
    let app = app(build(layer_of(
        &clock,
        [per_minute("global", 2, [literal("all")])],
    )));
    assert_eq!(
        app.send(get_from("192.0.2.1:1", "/a")).await.status,
        StatusCode::OK
    );
    assert_eq!(
        app.send(request(Some("192.0.2.2:1"), "POST", "/b", &[]))
            .await
            .status,
        StatusCode::OK
    );
    assert_eq!(
        app.send(get_from("192.0.2.3:1", "/c")).await.status,
        StatusCode::TOO_MANY_REQUESTS
    );
    assert_eq!(app.used("global", &key("all")).await, 2);
}

#[tokio::test]
async fn several_parts_make_one_key_in_order() {
    let clock = clock();
    let parts = [
        header("x-tenant"),
        KeyPart::Method,
        KeyPart::Path,
        literal("v1"),
    ];
    let app = app(build(layer_of(
        &clock,
        [per_minute("tenant-route", 1, parts)],
    )));
    let call = |tenant: &str, method: &str, uri: &str| {
        request(Some(PEER), method, uri, &[("x-tenant", tenant)])
    };
    assert_eq!(
        app.send(call("t1", "GET", "/a")).await.status,
        StatusCode::OK
    );
    assert_eq!(
        app.send(call("t1", "GET", "/a")).await.status,
        StatusCode::TOO_MANY_REQUESTS
    );
    assert_eq!(
        app.send(call("t2", "GET", "/a")).await.status,
        StatusCode::OK
    );
    assert_eq!(
        app.send(call("t1", "POST", "/a")).await.status,
        StatusCode::OK
    );
    assert_eq!(
        app.send(call("t1", "GET", "/b")).await.status,
        StatusCode::OK
    );
    let expected = Key::new(["t1", "GET", "/a", "v1"]).expect("a key");
    assert_eq!(app.used("tenant-route", &expected).await, 1);
}

/// The user an earlier authentication layer found.
#[derive(Debug, Clone)]
struct UserId(String);

/// A stand-in for authentication: `Authorization: Bearer NAME` is user NAME.
fn authenticate(mut request: Request<Body>) -> Request<Body> {
    let user = request
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(|u| UserId(u.to_owned()));
    if let Some(user) = user {
        request.extensions_mut().insert(user);
    }
    request
}

#[tokio::test]
async fn a_key_fn_reads_the_user_an_earlier_layer_put_in_the_extensions() {
    let clock = clock();
    let policy = PolicyBuilder::sliding_log("per-user")
        .limit(2)
        .per(MINUTE)
        .key_fn(|parts: &http::request::Parts| {
            parts.extensions.get::<UserId>().map(|u| u.0.clone())
        });
    let layer = build(layer_of(&clock, [policy]));
    let calls = Arc::new(AtomicUsize::new(0));
    // The last layer added runs first: authentication, then the limit.
    let router = inner(&calls)
        .layer(layer.clone())
        .layer(tower::util::MapRequestLayer::new(authenticate));
    let app = App {
        router,
        calls,
        layer,
    };
    let as_user = |u: &'static str| move || with_headers("/", &[("authorization", u)]);
    assert_eq!(
        app.statuses(3, as_user("Bearer alice")).await,
        [200, 200, 429]
    );
    assert_eq!(app.statuses(1, as_user("Bearer bob")).await, [200]);
    assert_eq!(app.used("per-user", &key("alice")).await, 2);
    let anonymous = app.send(get_("/private")).await;
    let body = anonymous.assert_problem(
        StatusCode::BAD_REQUEST,
        "urn:ratewarden:problem:missing-key",
    );
    assert_eq!(
        body["detail"],
        "the request has no key for policy 'per-user': the key function found no key"
    );
    assert_eq!(body["instance"], "/private");
    assert_eq!(app.calls(), 3);
}

#[tokio::test]
async fn a_key_fn_can_read_a_header() {
    let clock = clock();
    let policy = PolicyBuilder::fixed_window("per-token")
        .limit(1)
        .per(MINUTE)
        .key_fn(|parts: &http::request::Parts| {
            parts.headers.get("x-token").map(|v| v.as_bytes().to_vec())
        });
    let app = app(build(layer_of(&clock, [policy])));
    assert_eq!(
        app.statuses(2, || with_headers("/", &[("x-token", "t-1")]))
            .await,
        [200, 429]
    );
    assert_eq!(
        app.statuses(1, || with_headers("/", &[("x-token", "t-2")]))
            .await,
        [200]
    );
}

#[tokio::test]
async fn methods_and_a_path_pattern_choose_the_requests_a_policy_applies_to() {
    let clock = clock();
    let policy = per_minute("writes", 1, [literal("w")])
        .methods(["POST", "PUT"])
        .path("/api/*");
    let app = app(build(layer_of(&clock, [policy])));
    let call = |method: &str, uri: &str| request(Some(PEER), method, uri, &[]);
    let first = app.send(call("POST", "/api/orders")).await;
    assert_eq!(first.status, StatusCode::OK);
    assert!(first.has_rate_limit_headers());
    assert_eq!(
        app.send(call("PUT", "/api/orders/7/items")).await.status,
        StatusCode::TOO_MANY_REQUESTS,
        "`*` matches across `/`"
    );
    for (method, uri) in [
        ("GET", "/api/orders"),
        ("POST", "/api"),
        ("POST", "/apix"),
        ("POST", "/other"),
    ] {
        for _ in 0..3 {
            let reply = app.send(call(method, uri)).await;
            assert_eq!(
                reply.status,
                StatusCode::OK,
                "{method} {uri} is not limited"
            );
            assert!(
                !reply.has_rate_limit_headers(),
                "{method} {uri}: no policy applied"
            );
        }
    }
    assert_eq!(app.calls(), 13);
}

// ---------------------------------------------------------------------------
// Two policies

#[tokio::test]
async fn two_policies_decide_all_or_nothing_and_a_denial_charges_neither() {
    let clock = clock();
    let hourly = PolicyBuilder::fixed_window("hourly")
        .limit(10)
        .per(Duration::from_secs(3600))
        .key([KeyPart::ClientIp]);
    let app = app(build(layer_of(
        &clock,
        [per_minute("burst", 2, [KeyPart::ClientIp]), hourly],
    )));
    let client = key("192.0.2.1");
    assert_eq!(app.statuses(1, || get_("/")).await, [200]);
    let second = app.send(get_("/")).await;
    assert_eq!(
        second.header("ratelimit-policy"),
        Some(r#""burst";q=2;w=60, "hourly";q=10;w=3600"#)
    );
    assert_eq!(
        second.header("ratelimit"),
        Some(r#""burst";r=0;t=60, "hourly";r=8;t=3600"#)
    );
    // The trio is the most restrictive policy's.
    assert_eq!(second.header("x-ratelimit-limit"), Some("2"));
    assert_eq!(second.header("x-ratelimit-remaining"), Some("0"));
    assert_eq!(second.header("x-ratelimit-reset"), Some("60"));

    for _ in 0..3 {
        let refused = app.send(get_("/")).await;
        let body = refused.assert_problem(StatusCode::TOO_MANY_REQUESTS, QUOTA_EXCEEDED);
        assert_eq!(body["violated-policies"], json!(["burst"]));
        assert_eq!(body["results"][1]["policy"], "hourly");
        assert_eq!(body["results"][1]["allowed"], true);
        assert_eq!(
            refused.header("ratelimit"),
            Some(r#""burst";r=0;t=60, "hourly";r=8;t=3600"#)
        );
    }
    assert_eq!(
        app.used("hourly", &client).await,
        2,
        "the refused requests charged hourly nothing"
    );
    clock.advance(MINUTE);
    let next = app.send(get_("/")).await;
    assert_eq!(next.status, StatusCode::OK);
    assert_eq!(
        next.header("ratelimit"),
        Some(r#""burst";r=1;t=60, "hourly";r=7;t=3540"#)
    );
    assert_eq!(app.calls(), 3);
}

#[tokio::test]
async fn a_request_refused_by_the_second_policy_charges_the_first_nothing() {
    let clock = clock();
    let app = app(build(layer_of(
        &clock,
        [
            per_minute("per-client", 5, [KeyPart::ClientIp]),
            per_minute("global", 2, [literal("all")]),
        ],
    )));
    assert_eq!(
        app.send(get_from("192.0.2.1:1", "/")).await.status,
        StatusCode::OK
    );
    assert_eq!(
        app.send(get_from("192.0.2.2:1", "/")).await.status,
        StatusCode::OK
    );
    let refused = app.send(get_from("192.0.2.1:1", "/")).await;
    let body = refused.assert_problem(StatusCode::TOO_MANY_REQUESTS, QUOTA_EXCEEDED);
    assert_eq!(body["violated-policies"], json!(["global"]));
    assert_eq!(app.used("per-client", &key("192.0.2.1")).await, 1);
}

// ---------------------------------------------------------------------------
// Store failures

fn on_failing_store(
    store: Arc<FailingStore>,
    policies: impl IntoIterator<Item = PolicyBuilder>,
) -> App {
    let clock = clock();
    app(build(layer_of(&clock, policies).store(store)))
}

#[tokio::test]
async fn a_fail_open_policy_lets_requests_through_without_headers_when_the_store_fails() {
    let app = on_failing_store(
        FailingStore::unavailable(),
        [per_minute("api", 1, [KeyPart::ClientIp]).fail_open()],
    );
    for _ in 0..3 {
        let reply = app.send(get_("/hello")).await;
        assert_eq!(reply.status, StatusCode::OK);
        assert_eq!(reply.text(), "inner: GET /hello");
        assert!(
            !reply.has_rate_limit_headers(),
            "no quota was checked: {:?}",
            reply.headers
        );
    }
    assert_eq!(app.calls(), 3);
}

#[tokio::test]
async fn a_fail_closed_policy_answers_503_with_retry_after_1_when_the_store_fails() {
    let app = on_failing_store(
        FailingStore::unavailable(),
        [per_minute("api", 1, [KeyPart::ClientIp]).fail_closed()],
    );
    let reply = app.send(get_("/hello")).await;
    let body = reply.assert_problem(
        StatusCode::SERVICE_UNAVAILABLE,
        "urn:ratewarden:problem:store-unavailable",
    );
    assert_eq!(reply.header("retry-after"), Some("1"));
    assert_eq!(body["title"], "Service Unavailable");
    assert_eq!(body["instance"], "/hello");
    assert!(!reply.has_rate_limit_headers());
    assert_eq!(app.calls(), 0);
}

#[tokio::test]
async fn one_fail_closed_policy_among_fail_open_ones_closes_the_request() {
    let app = on_failing_store(
        FailingStore::unavailable(),
        [
            per_minute("open", 1, [KeyPart::ClientIp]).fail_open(),
            per_minute("closed", 1, [literal("all")]).fail_closed(),
        ],
    );
    let reply = app.send(get_("/")).await;
    reply.assert_problem(
        StatusCode::SERVICE_UNAVAILABLE,
        "urn:ratewarden:problem:store-unavailable",
    );
    assert_eq!(app.calls(), 0);
}

#[tokio::test]
async fn a_permanent_store_failure_is_a_500_problem_even_when_failing_open() {
    let app = on_failing_store(
        FailingStore::broken(),
        [per_minute("api", 1, [KeyPart::ClientIp]).fail_open()],
    );
    let reply = app.send(get_("/")).await;
    reply.assert_problem(
        StatusCode::INTERNAL_SERVER_ERROR,
        "urn:ratewarden:problem:internal",
    );
    assert_eq!(reply.header("retry-after"), None);
    assert_eq!(app.calls(), 0);
}

// ---------------------------------------------------------------------------
// Missing keys

#[tokio::test]
async fn without_connect_info_a_client_ip_policy_answers_400_naming_the_policy() {
    let clock = clock();
    let app = app(build(layer_of(
        &clock,
        [per_minute("per-client", 1, [KeyPart::ClientIp])],
    )));
    let reply = app.send(request(None, "GET", "/where", &[])).await;
    let body = reply.assert_problem(
        StatusCode::BAD_REQUEST,
        "urn:ratewarden:problem:missing-key",
    );
    assert_eq!(body["title"], "Bad Request");
    let detail = body["detail"].as_str().unwrap_or_default();
    assert!(
        detail.starts_with(
            "the request has no key for policy 'per-client': the client's address is not known"
        ) && detail.contains("into_make_service_with_connect_info"),
        "the answer says how to fix it: {detail}"
    );
    assert_eq!(body["instance"], "/where");
    assert_eq!(app.calls(), 0);
}

#[tokio::test]
async fn missing_key_skip_passes_without_that_policy_while_the_others_apply() {
    let clock = clock();
    let layer = layer_of(
        &clock,
        [
            per_minute("per-client", 1, [KeyPart::ClientIp]),
            per_minute("global", 2, [literal("all")]),
        ],
    )
    .on_missing_key(MissingKey::Skip);
    let app = app(build(layer));
    let no_peer = || request(None, "GET", "/", &[]);
    let first = app.send(no_peer()).await;
    assert_eq!(first.status, StatusCode::OK);
    assert_eq!(
        first.header("ratelimit-policy"),
        Some(r#""global";q=2;w=60"#)
    );
    assert_eq!(
        app.statuses(2, no_peer).await,
        [200, 429],
        "global still applies"
    );
    assert_eq!(app.calls(), 2);
}

#[tokio::test]
async fn missing_key_refuse_answers_with_the_status_given() {
    let clock = clock();
    let layer = layer_of(&clock, [per_minute("per-client", 1, [KeyPart::ClientIp])])
        .on_missing_key(MissingKey::Refuse(StatusCode::UNAUTHORIZED));
    let app = app(build(layer));
    let reply = app.send(request(None, "GET", "/", &[])).await;
    let body = reply.assert_problem(
        StatusCode::UNAUTHORIZED,
        "urn:ratewarden:problem:missing-key",
    );
    assert_eq!(body["title"], "Unauthorized");
    assert!(
        body["detail"]
            .as_str()
            .is_some_and(|d| d.contains("'per-client'")),
        "{body}"
    );
    assert_eq!(app.calls(), 0);
}

#[tokio::test]
async fn a_key_fn_returning_none_gets_the_configured_missing_key_answer() {
    let policy = || {
        PolicyBuilder::fixed_window("per-user")
            .limit(1)
            .per(MINUTE)
            .key_fn(|parts: &http::request::Parts| {
                parts.headers.get("x-user").map(|v| v.as_bytes().to_vec())
            })
    };
    let clock = clock();
    let default = app(build(layer_of(&clock, [policy()])));
    let body = default.send(get_("/")).await.assert_problem(
        StatusCode::BAD_REQUEST,
        "urn:ratewarden:problem:missing-key",
    );
    assert_eq!(
        body["detail"],
        "the request has no key for policy 'per-user': the key function found no key"
    );

    let refuse = app(build(
        layer_of(&clock, [policy()]).on_missing_key(MissingKey::Refuse(StatusCode::FORBIDDEN)),
    ));
    refuse
        .send(get_("/"))
        .await
        .assert_problem(StatusCode::FORBIDDEN, "urn:ratewarden:problem:missing-key");

    let skip = app(build(
        layer_of(&clock, [policy()]).on_missing_key(MissingKey::Skip),
    ));
    let reply = skip.send(get_("/")).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert!(!reply.has_rate_limit_headers());
    assert_eq!(
        skip.statuses(2, || with_headers("/", &[("x-user", "u")]))
            .await,
        [200, 429]
    );
    assert_eq!(default.calls() + refuse.calls() + skip.calls(), 2);
}

#[tokio::test]
async fn a_key_longer_than_4096_bytes_is_refused_not_a_500() {
    let clock = clock();
    let app = app(build(layer_of(
        &clock,
        [per_minute("by-key", 1, [header("x-api-key")])],
    )));
    let long = "a".repeat(5000);
    let reply = app
        .send(with_headers("/", &[("x-api-key", long.as_str())]))
        .await;
    let body = reply.assert_problem(
        StatusCode::BAD_REQUEST,
        "urn:ratewarden:problem:key-too-long",
    );
    assert!(
        body["detail"]
            .as_str()
            .is_some_and(|d| d.contains("the maximum is 4096 bytes")),
        "{body}"
    );
    assert_eq!(app.calls(), 0);
}

/// `MissingKey::Skip` never skips a policy because the key the client
/// itself sent is too long, or any client would escape a `header:` or
/// `query:` policy by sending a value over 4096 bytes. A too-long key is
/// never "missing": it is refused with 400 whatever `MissingKey` says.
#[tokio::test]
async fn missing_key_skip_does_not_let_an_oversized_client_key_escape_the_limit() {
    let clock = clock();
    let layer = layer_of(&clock, [per_minute("by-key", 1, [header("x-api-key")])])
        .on_missing_key(MissingKey::Skip);
    let app = app(build(layer));
    let long = "a".repeat(5000);
    let statuses = app
        .statuses(3, || with_headers("/", &[("x-api-key", long.as_str())]))
        .await;
    assert_eq!(
        statuses,
        [400, 400, 400],
        "an oversized x-api-key is refused, never skipped"
    );
}

// ---------------------------------------------------------------------------
// Shadow mode and a limit of zero

#[tokio::test]
async fn a_shadow_policy_never_denies_and_is_not_advertised() {
    let clock = clock();
    let app = app(build(layer_of(
        &clock,
        [
            per_minute("dry-run", 1, [KeyPart::ClientIp]).shadow(),
            per_minute("real", 10, [KeyPart::ClientIp]),
        ],
    )));
    for _ in 0..5 {
        let reply = app.send(get_("/")).await;
        assert_eq!(reply.status, StatusCode::OK);
        assert_eq!(
            reply.header("ratelimit-policy"),
            Some(r#""real";q=10;w=60"#),
            "only the enforcing policy"
        );
    }
    assert_eq!(app.calls(), 5);
    assert_eq!(
        app.used("dry-run", &key("192.0.2.1")).await,
        1,
        "a would-be denial charges nothing"
    );
    assert_eq!(app.used("real", &key("192.0.2.1")).await, 5);
}

#[tokio::test]
async fn a_limit_of_zero_is_a_429_without_retry_after() {
    let clock = clock();
    let app = app(build(layer_of(
        &clock,
        [per_minute("closed-door", 0, [literal("all")])],
    )));
    let reply = app.send(get_("/")).await;
    let body = reply.assert_problem(StatusCode::TOO_MANY_REQUESTS, QUOTA_EXCEEDED);
    assert_eq!(reply.header("retry-after"), None, "waiting never helps");
    assert_eq!(body["violated-policies"], json!(["closed-door"]));
    assert!(
        body["detail"]
            .as_str()
            .is_some_and(|d| d.contains("can never pass")),
        "{body}"
    );
    assert_eq!(body["results"][0]["never"], true);
    clock.advance(MINUTE * 10);
    assert_eq!(
        app.send(get_("/")).await.status,
        StatusCode::TOO_MANY_REQUESTS
    );
    assert_eq!(app.calls(), 0);
}

// ---------------------------------------------------------------------------
// Builder errors

fn build_error(builder: RateLimitLayerBuilder) -> String {
    builder.build().expect_err("an invalid layer").to_string()
}

fn memory_limiter(clock: &ManualClock, defs: impl IntoIterator<Item = PolicyDef>) -> Arc<Limiter> {
    let set = PolicySet::new(defs).expect("distinct names");
    Arc::new(Limiter::new(
        Arc::new(MemoryStore::new()),
        Arc::new(clock.clone()),
        set,
    ))
}

/// A fixed window of `limit` per minute keyed by `key`, as a limiter holds it.
fn def(name: &str, limit: u64, key: impl IntoIterator<Item = KeyPart>) -> PolicyDef {
    let quota = Quota::new(limit, MINUTE).expect("a quota");
    let mut def = PolicyDef::new(
        Policy::new(name, Algorithm::FixedWindow, quota),
        FailureMode::Open,
    );
    def.key = key.into_iter().collect();
    def
}

#[test]
fn builder_mistakes_are_errors_naming_the_policy_and_the_value() {
    let clock = clock();
    let no_window = PolicyBuilder::fixed_window("api")
        .limit(3)
        .key([KeyPart::ClientIp]);
    let e = build_error(layer_of(&clock, [no_window]));
    assert!(
        e.contains("policy 'api'") && e.contains(".per(window)"),
        "{e}"
    );

    let no_limit = PolicyBuilder::gcra("api")
        .per(MINUTE)
        .key([KeyPart::ClientIp]);
    let e = build_error(layer_of(&clock, [no_limit]));
    assert!(
        e.contains("policy 'api'") && e.contains(".limit(units)"),
        "{e}"
    );

    let burst = PolicyBuilder::sliding_log("logins")
        .limit(3)
        .per(MINUTE)
        .burst(5)
        .key([KeyPart::Path]);
    let e = build_error(layer_of(&clock, [burst]));
    assert!(
        e.contains("policy 'logins'") && e.contains("burst 5 is for gcra only"),
        "{e}"
    );

    let e = build_error(layer_of(
        &clock,
        [PolicyBuilder::gcra("keyless").limit(1).per(MINUTE)],
    ));
    assert!(
        e.contains("policy 'keyless'") && e.contains("needs a key"),
        "{e}"
    );

    let e = build_error(layer_of(
        &clock,
        [per_minute("api", 1, [KeyPart::Path]).methods(["get"])],
    ));
    assert!(e.contains("policy 'api'") && e.contains("'get'"), "{e}");

    let e = build_error(layer_of(
        &clock,
        [
            per_minute("api", 1, [KeyPart::Path]),
            per_minute("api", 2, [KeyPart::Path]),
        ],
    ));
    assert!(e.contains("'api'") && e.contains("used twice"), "{e}");

    let e = build_error(layer_of(&clock, [per_minute("api", 1, [KeyPart::Path])]).only(["nope"]));
    assert_eq!(e, "no policy is named 'nope'");

    let e = build_error(
        layer_of(&clock, [per_minute("api", 1, [KeyPart::Path])]).key_fn("ghost", |_| Some("k")),
    );
    assert_eq!(e, "no policy is named 'ghost'");

    let e = build_error(RateLimitLayer::builder().policy(per_minute("a b", 1, [KeyPart::Path])));
    assert!(e.contains("'a b' is not a policy name"), "{e}");
}

#[test]
fn store_clock_and_policy_settings_on_a_layer_from_a_limiter_are_errors() {
    let clock = clock();
    let limiter = || memory_limiter(&clock, [def("api", 1, [KeyPart::ClientIp])]);
    let e = build_error(RateLimitLayer::from_limiter(limiter()).policy(per_minute(
        "more",
        1,
        [KeyPart::Path],
    )));
    assert!(
        e.contains(".policy(..)") && e.contains("RateLimitLayer::builder()"),
        "{e}"
    );
    let e =
        build_error(RateLimitLayer::from_limiter(limiter()).store(Arc::new(MemoryStore::new())));
    assert!(e.contains(".store(..)"), "{e}");
    let e = build_error(RateLimitLayer::from_limiter(limiter()).clock(Arc::new(clock.clone())));
    assert!(e.contains(".clock(..)"), "{e}");
    let e = build_error(RateLimitLayer::from_limiter(limiter()).only(["api", "nope"]));
    assert_eq!(e, "no policy is named 'nope'");
}

// ---------------------------------------------------------------------------
// A layer over a limiter

#[tokio::test]
async fn a_layer_from_a_limiter_applies_its_policies_that_have_key_parts() {
    let clock = clock();
    // `json-api` has no key parts: its callers give the key (the JSON API);
    // it never applies to requests the layer sees.
    let limiter = memory_limiter(
        &clock,
        [def("api", 2, [KeyPart::ClientIp]), def("json-api", 0, [])],
    );
    let app = app(build(RateLimitLayer::from_limiter(Arc::clone(&limiter))));
    let first = app.send(get_("/")).await;
    assert_eq!(first.status, StatusCode::OK);
    assert_eq!(first.header("ratelimit-policy"), Some(r#""api";q=2;w=60"#));
    assert_eq!(app.statuses(2, || get_("/")).await, [200, 429]);
    assert!(Arc::ptr_eq(app.layer.limiter(), &limiter));
}

#[tokio::test]
async fn a_layer_key_fn_gives_a_limiter_policy_without_key_parts_its_key() {
    let clock = clock();
    let limiter = memory_limiter(&clock, [def("per-user", 1, [])]);
    let layer = RateLimitLayer::from_limiter(limiter)
        .key_fn("per-user", |parts: &http::request::Parts| {
            parts.headers.get("x-user").map(|v| v.as_bytes().to_vec())
        });
    let app = app(build(layer));
    assert_eq!(
        app.statuses(2, || with_headers("/", &[("x-user", "ann")]))
            .await,
        [200, 429]
    );
    assert_eq!(
        app.statuses(1, || with_headers("/", &[("x-user", "ben")]))
            .await,
        [200]
    );
    assert_eq!(app.send(get_("/")).await.status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn replacing_the_limiters_policies_takes_effect_on_the_next_request() {
    let clock = clock();
    let limiter = memory_limiter(&clock, [def("api", 1, [KeyPart::ClientIp])]);
    let app = app(build(RateLimitLayer::from_limiter(Arc::clone(&limiter))));
    assert_eq!(app.statuses(2, || get_("/")).await, [200, 429]);

    // A higher limit: the counter is kept (1 used of 3).
    limiter.replace_policies(PolicySet::new([def("api", 3, [KeyPart::ClientIp])]).expect("a set"));
    let raised = app.send(get_("/")).await;
    assert_eq!(raised.status, StatusCode::OK);
    assert_eq!(raised.header("ratelimit-policy"), Some(r#""api";q=3;w=60"#));
    assert_eq!(raised.header("ratelimit"), Some(r#""api";r=1;t=60"#));

    // A new match: only /api/* is limited now.
    let mut scoped = def("api", 3, [KeyPart::ClientIp]);
    scoped.matcher = Some(ratewarden_limiter::RequestMatch {
        methods: None,
        path: Some(ratewarden_limiter::PathPattern::new("/api/*").expect("a pattern")),
    });
    limiter.replace_policies(PolicySet::new([scoped]).expect("a set"));
    assert_eq!(app.statuses(3, || get_("/home")).await, [200, 200, 200]);
    assert_eq!(app.statuses(2, || get_("/api/x")).await, [200, 429]);

    // No policy left: nothing is limited.
    limiter.replace_policies(PolicySet::default());
    let free = app.send(get_("/api/x")).await;
    assert_eq!(free.status, StatusCode::OK);
    assert!(!free.has_rate_limit_headers());
}

#[tokio::test]
async fn only_restricts_each_layer_to_its_named_policies() {
    let clock = clock();
    let limiter = memory_limiter(
        &clock,
        [
            def("reads", 2, [literal("r")]),
            def("writes", 1, [literal("w")]),
        ],
    );
    let only = |name: &str| build(RateLimitLayer::from_limiter(Arc::clone(&limiter)).only([name]));
    let calls = Arc::new(AtomicUsize::new(0));
    let (c1, c2) = (Arc::clone(&calls), Arc::clone(&calls));
    let router = Router::new()
        .route(
            "/read",
            get(move || async move {
                c1.fetch_add(1, Ordering::SeqCst);
                "read"
            })
            .layer(only("reads")),
        )
        .route(
            "/write",
            post(move || async move {
                c2.fetch_add(1, Ordering::SeqCst);
                "written"
            })
            .layer(only("writes")),
        );
    let read = || request(Some(PEER), "GET", "/read", &[]);
    let write = || request(Some(PEER), "POST", "/write", &[]);
    let first_write = send(&router, write()).await;
    assert_eq!(first_write.status, StatusCode::OK);
    assert_eq!(first_write.text(), "written");
    assert_eq!(
        first_write.header("ratelimit-policy"),
        Some(r#""writes";q=1;w=60"#)
    );
    let refused = send(&router, write()).await;
    let body = refused.assert_problem(StatusCode::TOO_MANY_REQUESTS, QUOTA_EXCEEDED);
    assert_eq!(body["violated-policies"], json!(["writes"]));
    for _ in 0..2 {
        let reply = send(&router, read()).await;
        assert_eq!(
            reply.status,
            StatusCode::OK,
            "reads are not charged by writes"
        );
        assert_eq!(
            reply.header("ratelimit-policy"),
            Some(r#""reads";q=2;w=60"#)
        );
    }
    assert_eq!(
        send(&router, read()).await.status,
        StatusCode::TOO_MANY_REQUESTS
    );
    assert_eq!(calls.load(Ordering::SeqCst), 3);
}

// ---------------------------------------------------------------------------
// SQLite

#[tokio::test]
async fn the_same_limit_holds_on_sqlite() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let store = Arc::new(
        SqliteStore::open(dir.path().join("limits.db"), SqliteOptions::default()).expect("a store"),
    );
    let clock = clock();
    let app = app(build(
        layer_of(&clock, [per_minute("api", 3, [KeyPart::ClientIp])])
            .store(Arc::clone(&store) as _),
    ));
    let first = app.send(get_("/hello")).await;
    assert_eq!(first.header("ratelimit"), Some(r#""api";r=2;t=60"#));
    assert_eq!(app.statuses(3, || get_("/hello")).await, [200, 200, 429]);
    clock.advance(Duration::from_millis(20_500));
    let refused = app.send(get_("/hello")).await;
    refused.assert_problem(StatusCode::TOO_MANY_REQUESTS, QUOTA_EXCEEDED);
    assert_eq!(refused.header("retry-after"), Some("40"));
    clock.set(START.saturating_add(MINUTE));
    assert_eq!(app.send(get_("/hello")).await.status, StatusCode::OK);
    assert_eq!(app.calls(), 4);
    ratewarden_core::Store::close(store.as_ref()).await;
}

// ---------------------------------------------------------------------------
// Concurrency

/// 200 requests for one key at once through clones of the Router.
async fn two_hundred_at_once(app: &App) -> (usize, usize) {
    let tasks: Vec<_> = (0..200)
        .map(|_| {
            let router = app.router.clone();
            tokio::spawn(async move {
                router
                    .oneshot(get_("/"))
                    .await
                    .expect("infallible")
                    .status()
            })
        })
        .collect();
    let (mut ok, mut refused) = (0, 0);
    for task in tasks {
        match task.await.expect("the task ran") {
            StatusCode::OK => ok += 1,
            StatusCode::TOO_MANY_REQUESTS => refused += 1,
            other => panic!("unexpected status {other}"),
        }
    }
    (ok, refused)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_parallel_requests_let_exactly_the_limit_through_on_memory() {
    let clock = clock();
    let app = app(build(layer_of(
        &clock,
        [per_minute("api", 25, [KeyPart::ClientIp])],
    )));
    assert_eq!(two_hundred_at_once(&app).await, (25, 175));
    assert_eq!(app.calls(), 25);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_parallel_requests_let_exactly_the_limit_through_on_sqlite() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let store = Arc::new(
        SqliteStore::open(dir.path().join("limits.db"), SqliteOptions::default()).expect("a store"),
    );
    let clock = clock();
    let app = app(build(
        layer_of(&clock, [per_minute("api", 25, [KeyPart::ClientIp])])
            .store(Arc::clone(&store) as _),
    ));
    assert_eq!(two_hundred_at_once(&app).await, (25, 175));
    assert_eq!(app.calls(), 25);
    ratewarden_core::Store::close(store.as_ref()).await;
}

// ---------------------------------------------------------------------------
// A real socket

#[tokio::test]
async fn over_a_real_socket_the_peer_address_is_the_key() {
    let clock = clock();
    let app = app(build(layer_of(
        &clock,
        [per_minute("api", 2, [KeyPart::ClientIp])],
    )));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a port");
    let addr = listener.local_addr().expect("an address");
    let service = app
        .router
        .clone()
        .into_make_service_with_connect_info::<SocketAddr>();
    let server = tokio::spawn(async move { axum::serve(listener, service).await });
    let client = reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("a client");
    let url = format!("http://{addr}/hello");

    let first = client.get(&url).send().await.expect("an answer");
    assert_eq!(first.status(), StatusCode::OK);
    assert_eq!(first.headers()["ratelimit"], r#""api";r=1;t=60"#);
    assert_eq!(first.text().await.expect("a body"), "inner: GET /hello");
    assert_eq!(
        client.get(&url).send().await.expect("an answer").status(),
        StatusCode::OK
    );

    clock.advance(Duration::from_millis(500));
    let refused = client.get(&url).send().await.expect("an answer");
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(refused.headers()["retry-after"], "60");
    assert_eq!(
        refused.headers()["content-type"],
        "application/problem+json"
    );
    let body: Value =
        serde_json::from_slice(&refused.bytes().await.expect("a body")).expect("JSON");
    assert_eq!(body["instance"], "/hello");
    assert_eq!(body["violated-policies"], json!(["api"]));

    assert_eq!(app.used("api", &key("127.0.0.1")).await, 2);
    assert_eq!(app.calls(), 2);
    server.abort();
}

#[tokio::test]
async fn the_missing_key_answer_can_differ_per_policy() {
    let clock = clock();
    let by_user = ratewarden_tower::PolicyBuilder::fixed_window("by-user")
        .limit(5)
        .per(std::time::Duration::from_secs(60))
        .key_fn(|p: &ratewarden_tower::Parts| {
            p.headers.get("x-user").map(|v| v.as_bytes().to_vec())
        })
        .on_missing_key(MissingKey::Refuse(axum::http::StatusCode::UNAUTHORIZED));
    let by_key = per_minute("by-key", 5, [header("x-api-key")]);
    let layer = layer_of(&clock, [by_key])
        .policy(by_user)
        .on_missing_key(MissingKey::Skip);
    let app = app(build(layer));
    let statuses = app.statuses(1, || with_headers("/", &[])).await;
    assert_eq!(
        statuses,
        [401],
        "by-user's own answer, not the layer's Skip"
    );
    let statuses = app
        .statuses(1, || with_headers("/", &[("x-user", "u1")]))
        .await;
    assert_eq!(statuses, [200]);
}
