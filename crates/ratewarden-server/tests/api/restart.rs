//! Counters in SQLite survive a restart; a new limit applies to the
//! stored counts (docs/semantics.md).

use crate::helpers::{AppOptions, at, ok_json, problem, spawn_app};

#[tokio::test]
async fn ping_counts_survive_a_restart_on_the_same_database() {
    let app = spawn_app().await;
    app.clock.set(at(10, 0));
    ok_json(app.ping(Some("alice")).await).await;
    ok_json(app.ping(Some("alice")).await).await;
    let app = app.restart(AppOptions::default()).await;
    app.clock.set(at(20, 0));
    let (_, body) = ok_json(app.status("alice").await).await;
    assert_eq!(body["count"], 2);
    let (_, body) = ok_json(app.ping(Some("alice")).await).await;
    assert_eq!(body["count"], 3);
    assert_eq!(body["remaining"], 0);
    problem(app.ping(Some("alice")).await, 429).await;
}

#[tokio::test]
async fn sliding_log_events_survive_a_restart_on_the_same_database() {
    let app = spawn_app().await;
    for _ in 0..10 {
        ok_json(app.check("31", "/persist").await).await;
    }
    let app = app.restart(AppOptions::default()).await;
    app.clock.set(at(30, 0));
    let (headers, _) = problem(app.check("31", "/persist").await, 429).await;
    assert_eq!(crate::helpers::retry_after(&headers), 30);
    let (_, body) = ok_json(app.rate_status("31", "/persist").await).await;
    assert_eq!(body["count"], 10);
    app.clock.set(at(60, 0));
    ok_json(app.check("31", "/persist").await).await;
}

#[tokio::test]
async fn a_lower_ping_limit_after_a_restart_applies_to_the_stored_count() {
    let app = spawn_app().await;
    ok_json(app.ping(Some("bob")).await).await;
    ok_json(app.ping(Some("bob")).await).await;
    let app = app.restart(AppOptions::args(&["--ping-limit", "2"])).await;
    let (_, body) = ok_json(app.status("bob").await).await;
    assert_eq!(body["count"], 2);
    assert_eq!(body["limit"], 2);
    assert_eq!(body["remaining"], 0);
    let (_, body) = problem(app.ping(Some("bob")).await, 429).await;
    assert!(
        body["detail"]
            .as_str()
            .expect("detail")
            .contains("2 requests"),
        "{body}"
    );
}

#[tokio::test]
async fn a_higher_ping_limit_after_a_restart_applies_to_the_stored_count() {
    let app = spawn_app().await;
    for _ in 0..4 {
        app.ping(Some("carol")).await;
    }
    let app = app.restart(AppOptions::args(&["--ping-limit", "6"])).await;
    let (_, body) = ok_json(app.ping(Some("carol")).await).await;
    assert_eq!(body["count"], 5);
    assert_eq!(body["limit"], 6);
    ok_json(app.ping(Some("carol")).await).await;
    problem(app.ping(Some("carol")).await, 429).await;
}

#[tokio::test]
async fn a_lower_check_limit_after_a_restart_applies_to_the_stored_events() {
    let app = spawn_app().await;
    for _ in 0..5 {
        ok_json(app.check("32", "/persist").await).await;
    }
    let app = app.restart(AppOptions::args(&["--check-limit", "5"])).await;
    let (_, body) = ok_json(app.rate_status("32", "/persist").await).await;
    assert_eq!(body["count"], 5);
    assert_eq!(body["remaining"], 0);
    problem(app.check("32", "/persist").await, 429).await;
}

#[tokio::test]
async fn after_a_restart_with_a_lower_check_limit_retry_after_waits_for_enough_events_to_leave() {
    let app = spawn_app().await;
    for second in 0..10 {
        app.clock.set(at(second, 0));
        ok_json(app.check("33", "/persist").await).await;
    }
    let app = app.restart(AppOptions::args(&["--check-limit", "5"])).await;
    app.clock.set(at(20, 0));
    // 10 live events, limit 5: the 6th oldest (at 5 s) must leave first,
    // at 65 s.
    let (headers, _) = problem(app.check("33", "/persist").await, 429).await;
    assert_eq!(crate::helpers::retry_after(&headers), 45);
    app.clock.set(at(64, 999_999_999));
    problem(app.check("33", "/persist").await, 429).await;
    app.clock.set(at(65, 0));
    let (_, body) = ok_json(app.check("33", "/persist").await).await;
    assert_eq!(body["count"], 5);
}
