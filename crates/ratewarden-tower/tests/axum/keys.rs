//! Key parts, key functions, and the methods and path pattern that choose
//! the requests a policy applies to.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;

use axum::body::Body;
use http::{Request, StatusCode};
use ratewarden_core::Key;
use ratewarden_tower::{KeyPart, PolicyBuilder};

use crate::common::{MINUTE, build, clock, header, key, layer_of, literal, per_minute};
use crate::{App, PEER, app, get_, get_from, inner, request, with_headers};

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
