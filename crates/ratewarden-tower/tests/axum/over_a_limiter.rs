//! A layer over a `Limiter`: its policies, a layer key function, `only`,
//! and replacing the limiter's policies.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Router;
use axum::routing::{get, post};
use http::StatusCode;
use ratewarden_limiter::PolicySet;
use ratewarden_tower::{KeyPart, RateLimitLayer};
use serde_json::json;

use crate::common::{build, clock, literal};
use crate::{PEER, QUOTA_EXCEEDED, app, def, get_, memory_limiter, request, send, with_headers};

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
