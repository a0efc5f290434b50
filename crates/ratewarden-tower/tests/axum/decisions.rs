//! Allowed, refused, allowed again: the answers of one policy, its
//! headers, the window edge and GCRA's even refill.

use std::time::Duration;

use http::StatusCode;
use ratewarden_core::ManualClock;
use ratewarden_tower::{KeyPart, PolicyBuilder};
use serde_json::json;

use crate::common::{MINUTE, START, build, clock, layer_of, literal, per_minute};
use crate::{App, QUOTA_EXCEEDED, app, get_};

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
