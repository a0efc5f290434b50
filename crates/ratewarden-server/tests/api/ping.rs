//! GET /ping and GET /status: seed A's fixed window (docs/semantics.md §6).

use std::time::Duration;

use crate::helpers::{
    AppOptions, at, header, ok_json, problem, retry_after, spawn, spawn_app, spawn_app_with_args,
};

#[tokio::test]
async fn three_pings_pass_and_the_fourth_is_refused_with_the_default_limit() {
    let app = spawn_app().await;
    for i in 1..=3 {
        let (_, body) = ok_json(app.ping(Some("alice")).await).await;
        assert_eq!(body["count"], i);
    }
    problem(app.ping(Some("alice")).await, 429).await;
}

#[tokio::test]
async fn an_allowed_ping_reports_key_count_limit_remaining_window_and_reset() {
    let app = spawn_app().await;
    app.clock.set(at(15, 0));
    let (_, body) = ok_json(app.ping(Some("alice")).await).await;
    assert_eq!(
        body,
        serde_json::json!({
            "key": "alice",
            "count": 1,
            "limit": 3,
            "remaining": 2,
            "window_start": "2026-01-01T00:00:00Z",
            "window_seconds": 60,
            "reset_after": 45,
        })
    );
}

#[tokio::test]
async fn every_request_in_a_minute_shares_the_window_that_starts_on_the_minute() {
    let app = spawn_app().await;
    app.clock.set(at(45, 0));
    let (_, body) = ok_json(app.ping(Some("k")).await).await;
    assert_eq!(body["window_start"], "2026-01-01T00:00:00Z");
    app.clock.set(at(59, 999_999_999));
    let (_, body) = ok_json(app.ping(Some("k")).await).await;
    assert_eq!(body["window_start"], "2026-01-01T00:00:00Z");
    assert_eq!(body["count"], 2);
    app.clock.set(at(60, 0));
    let (_, body) = ok_json(app.ping(Some("k")).await).await;
    assert_eq!(body["window_start"], "2026-01-01T00:01:00Z");
    assert_eq!(body["count"], 1);
}

#[tokio::test]
async fn allowed_pings_carry_the_rate_limit_headers() {
    let app = spawn_app().await;
    app.clock.set(at(20, 0));
    let (headers, _) = ok_json(app.ping(Some("alice")).await).await;
    assert_eq!(header(&headers, "ratelimit-policy"), "\"ping\";q=3;w=60");
    assert_eq!(header(&headers, "ratelimit"), "\"ping\";r=2;t=40");
    assert_eq!(header(&headers, "x-ratelimit-limit"), "3");
    assert_eq!(header(&headers, "x-ratelimit-remaining"), "2");
    assert_eq!(header(&headers, "x-ratelimit-reset"), "40");
    let (headers, _) = ok_json(app.ping(Some("alice")).await).await;
    assert_eq!(header(&headers, "ratelimit"), "\"ping\";r=1;t=40");
    assert_eq!(header(&headers, "x-ratelimit-remaining"), "1");
}

#[tokio::test]
async fn a_refused_ping_is_a_rate_limit_problem_with_retry_after_and_rate_limit_headers() {
    let app = spawn_app().await;
    for _ in 0..3 {
        ok_json(app.ping(Some("alice")).await).await;
    }
    app.clock.set(at(45, 500_000_000));
    let (headers, body) = problem(app.ping(Some("alice")).await, 429).await;
    let kind = body["type"].as_str().expect("type");
    assert!(kind.ends_with("rate-limit-exceeded"), "{kind}");
    assert_eq!(body["title"], "Too Many Requests");
    assert_eq!(body["status"], 429);
    assert_eq!(body["instance"], "/ping");
    let detail = body["detail"].as_str().expect("detail");
    for part in ["3", "60s", "alice"] {
        assert!(detail.contains(part), "detail {detail:?} lacks {part:?}");
    }
    // 14.5 s until the window ends, rounded up.
    assert_eq!(retry_after(&headers), 15);
    assert_eq!(header(&headers, "ratelimit-policy"), "\"ping\";q=3;w=60");
    assert_eq!(header(&headers, "ratelimit"), "\"ping\";r=0;t=15");
    assert_eq!(header(&headers, "x-ratelimit-limit"), "3");
    assert_eq!(header(&headers, "x-ratelimit-remaining"), "0");
    assert_eq!(header(&headers, "x-ratelimit-reset"), "15");
}

#[tokio::test]
async fn retry_after_is_one_not_zero_in_the_last_nanosecond_of_the_window() {
    let app = spawn_app().await;
    for _ in 0..3 {
        ok_json(app.ping(Some("alice")).await).await;
    }
    app.clock.set(at(59, 999_999_999));
    let (headers, _) = problem(app.ping(Some("alice")).await, 429).await;
    assert_eq!(retry_after(&headers), 1);
}

#[tokio::test]
async fn the_last_nanosecond_of_the_window_still_refuses() {
    let app = spawn_app().await;
    for _ in 0..3 {
        ok_json(app.ping(Some("alice")).await).await;
    }
    app.clock.set(at(59, 999_999_999));
    problem(app.ping(Some("alice")).await, 429).await;
    let (_, body) = ok_json(app.status("alice").await).await;
    assert_eq!(body["window_start"], "2026-01-01T00:00:00Z");
    assert_eq!(body["count"], 4);
}

#[tokio::test]
async fn the_next_window_allows_again_from_its_first_nanosecond() {
    let app = spawn_app().await;
    for _ in 0..4 {
        app.ping(Some("alice")).await;
    }
    app.clock.set(at(60, 0));
    let (_, body) = ok_json(app.ping(Some("alice")).await).await;
    assert_eq!(body["count"], 1);
    assert_eq!(body["remaining"], 2);
    assert_eq!(body["window_start"], "2026-01-01T00:01:00Z");
}

#[tokio::test]
async fn refused_attempts_are_counted_too() {
    let app = spawn_app().await;
    for _ in 0..5 {
        app.ping(Some("alice")).await;
    }
    let (_, body) = ok_json(app.status("alice").await).await;
    assert_eq!(body["count"], 5);
    assert_eq!(body["remaining"], 0);
    assert_eq!(body["limit"], 3);
}

#[tokio::test]
async fn a_missing_and_an_empty_client_key_share_the_key_127_0_0_1() {
    let app = spawn_app().await;
    let (_, body) = ok_json(app.ping(None).await).await;
    assert_eq!(body["key"], "127.0.0.1");
    let (_, body) = ok_json(app.ping(Some("")).await).await;
    assert_eq!(body["key"], "127.0.0.1");
    assert_eq!(body["count"], 2);
    let (_, body) = ok_json(app.status("127.0.0.1").await).await;
    assert_eq!(body["count"], 2);
}

#[tokio::test]
async fn keys_have_independent_counters() {
    let app = spawn_app().await;
    for _ in 0..4 {
        app.ping(Some("bob")).await;
    }
    let (_, body) = ok_json(app.ping(Some("carol")).await).await;
    assert_eq!(body["count"], 1);
}

#[tokio::test]
async fn status_reads_the_counter_without_incrementing_it() {
    let app = spawn_app().await;
    app.clock.set(at(10, 0));
    for _ in 0..2 {
        ok_json(app.ping(Some("dave")).await).await;
    }
    let (_, first) = ok_json(app.status("dave").await).await;
    let (_, second) = ok_json(app.status("dave").await).await;
    assert_eq!(first, second);
    assert_eq!(
        first,
        serde_json::json!({
            "key": "dave",
            "count": 2,
            "limit": 3,
            "remaining": 1,
            "window_start": "2026-01-01T00:00:00Z",
            "window_seconds": 60,
            "reset_after": 50,
        })
    );
    let (_, body) = ok_json(app.ping(Some("dave")).await).await;
    assert_eq!(body["count"], 3, "status must not have counted");
}

#[tokio::test]
async fn status_of_an_unknown_key_is_zero() {
    let app = spawn_app().await;
    let (_, body) = ok_json(app.status("nobody").await).await;
    assert_eq!(body["count"], 0);
    assert_eq!(body["remaining"], 3);
}

#[tokio::test]
async fn status_without_a_key_with_an_empty_key_or_with_two_keys_is_422() {
    let app = spawn_app().await;
    for path in [
        "/status",
        "/status?key=",
        "/status?key",
        "/status?other=x",
        "/status?key=a&key=b",
    ] {
        let (_, body) = problem(app.get(path).await, 422).await;
        assert_eq!(body["instance"], "/status", "{path}");
    }
}

#[tokio::test]
async fn each_allowed_ping_writes_one_audit_row_and_refused_ones_none() {
    let mut app = spawn_app().await;
    for _ in 0..5 {
        app.ping(Some("audited")).await;
    }
    app.ping(Some("other")).await;
    app.stop().await;
    let rows = app.count_rows(
        "SELECT COUNT(*) FROM api_calls WHERE key = ?1 AND path = '/ping'",
        ["audited"],
    );
    assert_eq!(rows, 3);
    assert_eq!(app.count_rows("SELECT COUNT(*) FROM api_calls", []), 4);
    let count: i64 = app
        .db()
        .query_row(
            "SELECT count FROM rate_limit_windows WHERE key = 'audited' AND window_start = '2026-01-01T00:00:00Z'",
            [],
            |r| r.get(0),
        )
        .expect("window row");
    assert_eq!(count, 5);
}

#[tokio::test]
async fn a_limit_of_zero_refuses_every_ping() {
    let app = spawn_app_with_args(&["--ping-limit", "0"]).await;
    for (key, secs) in [(Some("alice"), 0), (None, 30), (Some("bob"), 59)] {
        app.clock.set(at(secs, 0));
        let (headers, body) = problem(app.ping(key).await, 429).await;
        assert!(retry_after(&headers) >= 1, "{headers:?}");
        assert_eq!(body["title"], "Too Many Requests");
        assert_eq!(header(&headers, "x-ratelimit-limit"), "0");
        assert_eq!(header(&headers, "x-ratelimit-remaining"), "0");
    }
}

#[tokio::test]
async fn other_ping_limits_and_windows_are_reported_in_body_and_headers() {
    let app = spawn(
        AppOptions::args(&["--ping-limit", "2", "--ping-window", "10"]),
        |_| {},
    )
    .await;
    app.clock.advance(Duration::from_secs(3));
    let (headers, body) = ok_json(app.ping(Some("z")).await).await;
    assert_eq!(body["limit"], 2);
    assert_eq!(body["window_seconds"], 10);
    assert_eq!(body["reset_after"], 7);
    assert_eq!(header(&headers, "ratelimit-policy"), "\"ping\";q=2;w=10");
    ok_json(app.ping(Some("z")).await).await;
    let (headers, body) = problem(app.ping(Some("z")).await, 429).await;
    assert_eq!(retry_after(&headers), 7);
    let detail = body["detail"].as_str().expect("detail");
    assert!(detail.contains("2") && detail.contains("10s"), "{detail}");
}
