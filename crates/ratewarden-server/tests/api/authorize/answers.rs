//! The answers: 200 or a denial (429, or the status
//! `X-Ratewarden-Deny-Status` asks for) with the rate-limit headers, every
//! matching policy decided all or nothing, shadow policies, window edges
//! on the manual clock, and the route in OpenAPI.

use serde_json::json;

use super::{advertised, allowed, app, ask, denied, remaining, request, unmatched};
use crate::helpers::{
    PolicyToml, StoreKind, at, header, ok_json, policy, problem, retry_after, spawn_with_config,
};

fn pair() -> [PolicyToml; 2] {
    [
        policy("small")
            .fixed_window(1, "1m")
            .key(["client_ip"])
            .match_path("/a/*"),
        policy("big").fixed_window(5, "1h").key(["client_ip"]),
    ]
}

/// Every matching policy is decided, all or nothing: one header line each
/// with an item per policy, and a denial charges no policy.
pub async fn matching_policies_are_decided_all_or_nothing(store: StoreKind) {
    let app = app(store, &[], pair()).await;
    let headers = allowed(ask(&app, "/a/1").await).await;
    for (name, value) in [
        ("ratelimit-policy", "\"small\";q=1;w=60, \"big\";q=5;w=3600"),
        ("ratelimit", "\"small\";r=0;t=60, \"big\";r=4;t=3600"),
        ("x-ratelimit-limit", "1"),
        ("x-ratelimit-remaining", "0"),
        ("x-ratelimit-reset", "60"),
    ] {
        assert_eq!(headers.get_all(name).iter().count(), 1, "{name}: one line");
        assert_eq!(header(&headers, name), value, "{name}");
    }
    assert!(headers.get("retry-after").is_none());
    let (headers, body) = denied(ask(&app, "/a/2").await, 429).await;
    assert_eq!(body["status"], 429);
    assert_eq!(body["violated-policies"], json!(["small"]));
    assert_eq!(body["instance"], "/a/2");
    let results = body["results"].as_array().unwrap();
    assert_eq!(results.len(), 2, "{body}");
    assert_eq!(
        (&results[0]["policy"], &results[0]["allowed"]),
        (&json!("small"), &json!(false))
    );
    assert_eq!(results[0]["retry_after_ms"], 60_000);
    assert_eq!(
        (
            &results[1]["policy"],
            &results[1]["allowed"],
            &results[1]["remaining"]
        ),
        (&json!("big"), &json!(true), &json!(4)),
        "big alone would pass and was not charged"
    );
    assert_eq!(retry_after(&headers), 60);
    assert_eq!(
        header(&headers, "ratelimit")
            .matches("\"small\";r=0;t=60")
            .count(),
        1
    );
    assert_eq!(header(&headers, "x-ratelimit-remaining"), "0");
    assert_eq!(
        remaining(&app, "big", &["127.0.0.1"]).await,
        4,
        "the denial charged nothing"
    );
    let headers = allowed(ask(&app, "/b").await).await;
    assert_eq!(header(&headers, "ratelimit"), "\"big\";r=3;t=3600");
    for _ in 0..3 {
        allowed(ask(&app, "/b").await).await;
    }
    // Both deny: both named, and Retry-After is the longer wait.
    let (headers, body) = denied(ask(&app, "/a/3").await, 429).await;
    assert_eq!(body["violated-policies"], json!(["small", "big"]));
    assert_eq!(retry_after(&headers), 3600);
}

/// `X-Ratewarden-Deny-Status` picks 401, 403 or 429 for a denial; any
/// other value is a 400 that decides nothing.
pub async fn the_deny_status_header_picks_the_denial_status(store: StoreKind) {
    let app = app(store, &[], pair()).await;
    let with = |status: &'static str, uri: &'static str| {
        request(&app, "GET")
            .header("X-Forwarded-Uri", uri)
            .header("X-Ratewarden-Deny-Status", status)
            .send()
    };
    // Bad values, on a request that would pass and on one no policy matches.
    for bad in ["", "200", "500", "abc", "4030", "403, 401", "0x193"] {
        let (_, body) = problem(with(bad, "/a/1").await.unwrap(), 400).await;
        assert!(
            body["detail"]
                .as_str()
                .unwrap()
                .contains("X-Ratewarden-Deny-Status"),
            "{body}"
        );
        problem(with(bad, "/b").await.unwrap(), 400).await;
    }
    assert_eq!(
        remaining(&app, "small", &["127.0.0.1"]).await,
        1,
        "nothing charged"
    );
    assert_eq!(
        remaining(&app, "big", &["127.0.0.1"]).await,
        5,
        "nothing charged"
    );
    // Allowed answers are 200 whatever the header says.
    allowed(with("403", "/a/1").await.unwrap()).await;
    for (value, status) in [("401", 401), ("403", 403), ("429", 429)] {
        let (headers, body) = denied(with(value, "/a/1").await.unwrap(), status).await;
        assert_eq!(body["violated-policies"], json!(["small"]));
        assert_eq!(retry_after(&headers), 60, "{value}");
        assert!(headers.get("ratelimit").is_some(), "{value}");
    }
}

/// A shadow policy is decided and counted but never denies, and is never
/// advertised in headers.
pub async fn a_shadow_policy_never_denies_nor_shows(store: StoreKind) {
    let app = app(
        store,
        &[],
        [
            policy("dry")
                .fixed_window(1, "1m")
                .shadow()
                .key(["literal:d"]),
            policy("real")
                .fixed_window(5, "1m")
                .key(["literal:r"])
                .match_path("/both"),
        ],
    )
    .await;
    for remaining_real in [4, 3, 2] {
        let headers = allowed(ask(&app, "/both").await).await;
        assert_eq!(advertised(&headers), ["real"]);
        assert_eq!(
            header(&headers, "ratelimit"),
            format!("\"real\";r={remaining_real};t=60")
        );
        assert!(headers.get("retry-after").is_none());
    }
    for _ in 0..3 {
        unmatched(ask(&app, "/dry-only").await).await;
    }
    let (_, status) = ok_json(app.get("/v1/status?policy=dry&key=d").await).await;
    assert_eq!(status["shadow_denied"], true, "it was counted: {status}");
}

/// A request an enforcing policy denies charges the shadow policy
/// beside it no more than any other; the denial's headers name only the
/// enforcing policy.
pub async fn a_denial_charges_no_shadow_policy(store: StoreKind) {
    let app = app(
        store,
        &[],
        [
            policy("dry")
                .fixed_window(5, "1m")
                .shadow()
                .key(["literal:d"]),
            policy("real").fixed_window(1, "1m").key(["literal:r"]),
        ],
    )
    .await;
    assert_eq!(advertised(&allowed(ask(&app, "/").await).await), ["real"]);
    for _ in 0..2 {
        let (headers, body) = denied(ask(&app, "/").await, 429).await;
        assert_eq!(body["violated-policies"], json!(["real"]));
        assert_eq!(advertised(&headers), ["real"]);
    }
    assert_eq!(
        remaining(&app, "dry", &["d"]).await,
        4,
        "charged once, by the allowed one"
    );
}

/// The window's edges on the manual clock: exactly `limit` pass, the next
/// is denied with the exact wait rounded up to whole seconds, and at the
/// window's end requests pass again.
pub async fn window_edges_are_exact(store: StoreKind) {
    let app = app(
        store,
        &[],
        [
            policy("edge")
                .fixed_window(3, "1m")
                .key(["client_ip"])
                .match_path("/fixed"),
            policy("steady")
                .gcra(2, "1m")
                .burst(1)
                .key(["client_ip"])
                .match_path("/gcra"),
            policy("closed")
                .fixed_window(0, "1m")
                .key(["client_ip"])
                .match_path("/never"),
            policy("plenty")
                .fixed_window(100, "1m")
                .key(["client_ip"])
                .match_path("/never"),
        ],
    )
    .await;
    app.clock.set(at(10, 250_000_000));
    for left in [2, 1, 0] {
        let headers = allowed(ask(&app, "/fixed").await).await;
        assert_eq!(
            header(&headers, "ratelimit"),
            format!("\"edge\";r={left};t=50")
        );
        assert_eq!(header(&headers, "x-ratelimit-reset"), "50");
    }
    let (headers, body) = denied(ask(&app, "/fixed").await, 429).await;
    assert_eq!(body["results"][0]["retry_after_ms"], 49_750);
    assert_eq!(retry_after(&headers), 50, "49.75 s rounded up");
    app.clock.set(at(59, 999_999_999));
    let (headers, _) = denied(ask(&app, "/fixed").await, 429).await;
    assert_eq!(retry_after(&headers), 1, "1 ns rounded up");
    app.clock.set(at(60, 0));
    let headers = allowed(ask(&app, "/fixed").await).await;
    assert_eq!(header(&headers, "ratelimit"), "\"edge\";r=2;t=60");

    // GCRA, one every 30 s.
    app.clock.set(at(120, 0));
    allowed(ask(&app, "/gcra").await).await;
    let (headers, _) = denied(ask(&app, "/gcra").await, 429).await;
    assert_eq!(retry_after(&headers), 30);
    app.clock.set(at(149, 500_000_000));
    let (headers, body) = denied(ask(&app, "/gcra").await, 429).await;
    assert_eq!(body["results"][0]["retry_after_ms"], 500);
    assert_eq!(retry_after(&headers), 1, "0.5 s rounded up");
    app.clock.set(at(150, 0));
    allowed(ask(&app, "/gcra").await).await;

    // Limit 0: it can never pass, so no Retry-After; and nothing charged.
    for _ in 0..2 {
        let (headers, body) = denied(ask(&app, "/never").await, 429).await;
        assert!(headers.get("retry-after").is_none(), "{headers:?}");
        assert_eq!(body["violated-policies"], json!(["closed"]));
        assert_eq!(body["results"][0]["never"], true, "{body}");
        assert!(body["detail"].as_str().unwrap().contains("never"), "{body}");
    }
    assert_eq!(remaining(&app, "plenty", &["127.0.0.1"]).await, 100);
}

/// `GET /openapi.json` documents `/v1/authorize`.
#[tokio::test]
async fn openapi_lists_authorize() {
    let app = spawn_with_config(StoreKind::Memory, "").await;
    let (_, doc) = ok_json(app.get("/openapi.json").await).await;
    let path = &doc["paths"]["/v1/authorize"];
    assert!(path.is_object(), "{}", doc["paths"]);
    // It answers every method, so every method is listed.
    for method in [
        "get", "put", "post", "delete", "options", "head", "patch", "trace",
    ] {
        assert!(path[method].is_object(), "{method}: {path}");
        let r = request(&app, &method.to_ascii_uppercase())
            .header("X-Forwarded-Uri", "/")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{method}");
    }
}

on_every_store!(
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    matching_policies_are_decided_all_or_nothing,
    the_deny_status_header_picks_the_denial_status,
    a_shadow_policy_never_denies_nor_shows,
    a_denial_charges_no_shadow_policy,
    window_edges_are_exact,
);
