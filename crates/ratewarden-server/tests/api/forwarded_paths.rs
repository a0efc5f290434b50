//! Which path `/v1/authorize` matches (docs/forward-auth.md, "Which path
//! is matched"): every spelling of a limited path in `X-Forwarded-Uri`
//! counts against its policy, a path with no single meaning is a 400
//! problem saying why, a denial names the path matched, and a key
//! parameter given twice is refused rather than guessed.

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

use reqwest::Response;

use crate::helpers::{StoreKind, TestApp, policies, policy, problem, spawn_with_config};

fn per_client_on_api() -> String {
    policies([policy("per-client")
        .fixed_window(3, "1h")
        .key(["client_ip"])
        .match_path("/api/*")])
}

async fn ask(app: &TestApp, uri: &str) -> Response {
    app.client
        .get(app.url("/v1/authorize"))
        .header("X-Forwarded-Uri", uri)
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn every_spelling_of_a_limited_path_counts_against_its_policy() {
    let app = spawn_with_config(StoreKind::Memory, &per_client_on_api()).await;
    for spelling in ["/%61pi/orders", "//api//orders", "/x/../api/orders"] {
        let r = ask(&app, spelling).await;
        assert_eq!(r.status(), 200, "{spelling}");
        assert!(r.headers().contains_key("ratelimit"), "{spelling}: charged");
    }
    for spelling in [
        "/api/orders",
        "/%61pi/orders",
        "//api/orders",
        "/x/../api/orders",
        "/api%2Forders",
        "/api;jsessionid=1/orders",
        "/%61%70%69/orders?x=1",
        "http://example.com//api/./orders",
    ] {
        let (_, body) = problem(ask(&app, spelling).await, 429).await;
        assert_eq!(body["instance"], "/api/orders", "{spelling}: {body}");
    }
    // A path outside the pattern stays outside it, however spelled.
    assert_eq!(ask(&app, "/%68ealth").await.status(), 200);
}

#[tokio::test]
async fn a_path_with_no_single_meaning_is_a_400_saying_why() {
    let app = spawn_with_config(StoreKind::Memory, &per_client_on_api()).await;
    for (path, why) in [
        ("/api/%2e%2e/api/orders", "encoded dot segment"),
        ("/api%2F..%2Fadmin", "encoded dot segment"),
        ("/api/..;/admin", "';' parameters"),
        ("/api%5C..%5Cadmin", "backslash"),
        ("/api/x%00", "control character"),
        ("/api/x%0d%0aSet-Cookie:%20a", "control character"),
        ("/../api/x", "above the root"),
        ("/api/%zz", "%XX"),
    ] {
        let (_, body) = problem(ask(&app, path).await, 400).await;
        let detail = body["detail"].as_str().unwrap();
        assert!(
            detail.contains("has no single meaning") && detail.contains(why),
            "{path}: {detail}"
        );
    }
    // Nothing was charged.
    for _ in 0..3 {
        assert_eq!(ask(&app, "/api/orders").await.status(), 200);
    }
}

#[tokio::test]
async fn a_path_no_pattern_reads_is_not_refused() {
    let config = policies([policy("everywhere")
        .fixed_window(10, "1h")
        .key(["client_ip"])]);
    let app = spawn_with_config(StoreKind::Memory, &config).await;
    assert_eq!(ask(&app, "/api/%2e%2e/x").await.status(), 200);
}

#[tokio::test]
async fn a_key_parameter_given_twice_is_refused_not_guessed() {
    let config = policies([policy("logins")
        .fixed_window(1, "1h")
        .key(["query:user"])
        .match_path("/login")]);
    let app = spawn_with_config(StoreKind::Memory, &config).await;
    assert_eq!(ask(&app, "/login?user=alice").await.status(), 200);
    assert_eq!(ask(&app, "/login?user=alice").await.status(), 429);
    // PHP reads the last value, Go the first: neither is guessed.
    let (_, body) = problem(ask(&app, "/login?user=mallory&user=alice").await, 400).await;
    assert!(
        body["detail"]
            .as_str()
            .unwrap()
            .contains("'user' is given more than once"),
        "{body}"
    );
}
