//! Several policies decided all or nothing, shadow mode and a limit of zero.

use std::time::Duration;

use http::StatusCode;
use ratewarden_tower::{KeyPart, PolicyBuilder};
use serde_json::json;

use crate::common::{MINUTE, build, clock, key, layer_of, literal, per_minute};
use crate::{QUOTA_EXCEEDED, app, get_, get_from};

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
