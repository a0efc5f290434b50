//! POST /rate/check, GET /rate/status, DELETE /rate/reset/{userId}: seed
//! B's sliding log (docs/semantics.md §6), its status table and the seed's
//! attack list ATK-01 … ATK-12.

use serde_json::json;

use crate::helpers::{
    ADMIN_KEY, AppOptions, TestApp, at, encode, header, ok_json, problem, retry_after, spawn,
    spawn_app,
};

/// `n` allowed checks of (user, endpoint).
async fn fill(app: &TestApp, user: &str, endpoint: &str, n: usize) {
    for i in 0..n {
        let response = app.check(user, endpoint).await;
        assert_eq!(
            response.status(),
            200,
            "check {} of {n} for {user} {endpoint}",
            i + 1
        );
    }
}

/// The `count` that GET /rate/status reports for (user, endpoint).
async fn usage(app: &TestApp, user: &str, endpoint: &str) -> u64 {
    let (_, body) = ok_json(app.rate_status(user, endpoint).await).await;
    body["count"].as_u64().expect("count")
}

// ---------------------------------------------------------------- status table

#[tokio::test]
async fn status_table_200_an_allowed_check_reports_the_usage() {
    let app = spawn_app().await;
    let (headers, body) = ok_json(app.check("7", "/orders").await).await;
    assert_eq!(
        body,
        json!({
            "user_id": 7,
            "endpoint": "/orders",
            "count": 1,
            "limit": 10,
            "remaining": 9,
            "window_seconds": 60,
            "reset_after": 60,
        })
    );
    assert_eq!(header(&headers, "ratelimit-policy"), "\"check\";q=10;w=60");
    assert_eq!(header(&headers, "ratelimit"), "\"check\";r=9;t=60");
    assert_eq!(header(&headers, "x-ratelimit-limit"), "10");
    assert_eq!(header(&headers, "x-ratelimit-remaining"), "9");
    assert_eq!(header(&headers, "x-ratelimit-reset"), "60");
}

#[tokio::test]
async fn status_table_200_a_status_read_reports_the_usage_and_records_nothing() {
    let app = spawn_app().await;
    fill(&app, "7", "/orders", 3).await;
    app.clock.set(at(15, 0));
    let (_, first) = ok_json(app.rate_status("7", "/orders").await).await;
    let (_, second) = ok_json(app.rate_status("7", "/orders").await).await;
    assert_eq!(first, second);
    assert_eq!(
        first,
        json!({
            "user_id": 7,
            "endpoint": "/orders",
            "count": 3,
            "limit": 10,
            "remaining": 7,
            "window_seconds": 60,
            "reset_after": 45,
        })
    );
    let (_, empty) = ok_json(app.rate_status("8", "/orders").await).await;
    assert_eq!(empty["count"], 0);
    assert_eq!(empty["remaining"], 10);
}

#[tokio::test]
async fn status_table_200_a_reset_reports_how_many_counters_it_reset() {
    let app = spawn_app().await;
    fill(&app, "7", "/a", 2).await;
    fill(&app, "7", "/b", 3).await;
    let (_, body) = ok_json(app.reset("7", "", Some(ADMIN_KEY)).await).await;
    assert_eq!(
        body,
        json!({ "user_id": 7, "endpoint": null, "deleted": 2 }),
        "two endpoints (five events): two counters, on every store"
    );
}

#[tokio::test]
async fn status_table_400_a_missing_or_invalid_user_id_on_check_and_status() {
    let app = spawn_app().await;
    problem(app.check_raw(None, Some(r#"{"endpoint":"/x"}"#)).await, 400).await;
    let response = app.get("/rate/status?endpoint=/x").await;
    problem(response, 400).await;
    for bad in ["abc", "0", "9223372036854775808"] {
        problem(app.check(bad, "/x").await, 400).await;
        problem(app.rate_status(bad, "/x").await, 400).await;
    }
}

#[tokio::test]
async fn status_table_400_no_body_or_a_body_that_is_not_a_json_object() {
    let app = spawn_app().await;
    problem(app.check_raw(Some("7"), None).await, 400).await;
    problem(app.check_raw(Some("7"), Some("[]")).await, 400).await;
}

#[tokio::test]
async fn status_table_422_an_endpoint_missing_not_a_string_or_empty() {
    let app = spawn_app().await;
    problem(app.check_raw(Some("7"), Some("{}")).await, 422).await;
    problem(
        app.check_raw(Some("7"), Some(r#"{"endpoint":1}"#)).await,
        422,
    )
    .await;
    problem(app.check("7", "").await, 422).await;
}

#[tokio::test]
async fn status_table_422_an_endpoint_longer_than_128_characters() {
    let app = spawn_app().await;
    problem(app.check("7", &"e".repeat(129)).await, 422).await;
}

#[tokio::test]
async fn status_table_422_rate_status_without_endpoint() {
    let app = spawn_app().await;
    let response = app
        .client
        .get(app.url("/rate/status"))
        .header("X-User-Id", "7")
        .send()
        .await
        .expect("GET");
    let (_, body) = problem(response, 422).await;
    assert_eq!(body["instance"], "/rate/status");
}

#[tokio::test]
async fn status_table_403_no_admin_key_header_or_a_wrong_one() {
    let app = spawn_app().await;
    problem(app.reset("7", "", None).await, 403).await;
    problem(app.reset("7", "", Some("wrong")).await, 403).await;
}

#[tokio::test]
async fn status_table_404_a_user_id_in_the_path_that_is_not_a_positive_integer() {
    let app = spawn_app().await;
    for bad in ["-1", "0", "abc", "null"] {
        let (_, body) = problem(app.reset(bad, "", Some(ADMIN_KEY)).await, 404).await;
        assert_eq!(body["instance"], format!("/rate/reset/{bad}"));
    }
}

#[tokio::test]
async fn status_table_429_over_the_limit() {
    let app = spawn_app().await;
    fill(&app, "7", "/orders", 10).await;
    let (headers, body) = problem(app.check("7", "/orders").await, 429).await;
    assert!(
        body["type"]
            .as_str()
            .expect("type")
            .ends_with("rate-limit-exceeded")
    );
    assert_eq!(body["title"], "Too Many Requests");
    assert_eq!(body["instance"], "/rate/check");
    let detail = body["detail"].as_str().expect("detail");
    for part in ["10", "60s", "7", "/orders"] {
        assert!(detail.contains(part), "detail {detail:?} lacks {part:?}");
    }
    assert_eq!(retry_after(&headers), 60);
    assert_eq!(header(&headers, "x-ratelimit-remaining"), "0");
}

#[tokio::test]
async fn auth_is_checked_before_the_path() {
    let app = spawn_app().await;
    for bad in ["abc", "-1", "0", "null"] {
        problem(app.reset(bad, "", None).await, 403).await;
        problem(app.reset(bad, "", Some("wrong")).await, 403).await;
    }
}

#[tokio::test]
async fn the_user_header_is_checked_before_the_body() {
    let app = spawn_app().await;
    problem(app.check_raw(Some("abc"), None).await, 400).await;
    problem(app.check_raw(Some("abc"), Some("{}")).await, 400).await;
    problem(app.check("abc", "").await, 400).await;
    problem(app.check_raw(None, Some("[1]")).await, 400).await;
}

// ---------------------------------------------------------------- ATK-01 … ATK-12

#[tokio::test]
async fn atk_01_a_missing_or_malformed_user_id_is_400() {
    let app = spawn_app().await;
    let (_, body) = problem(app.check_raw(None, Some(r#"{"endpoint":"/x"}"#)).await, 400).await;
    assert_eq!(body["instance"], "/rate/check");
    for bad in [
        "abc",
        "0",
        "000",
        "-5",
        "1.5",
        "99999999999999999999",
        "9223372036854775808",
        "",
        "+5",
        "5 5",
        "5\t5",
        "0x10",
        "1e3",
        "٣",
    ] {
        let response = app.check(bad, "/x").await;
        assert_eq!(response.status(), 400, "X-User-Id {bad:?}");
        problem(response, 400).await;
    }
    assert_eq!(usage(&app, "1", "/x").await, 0);
}

/// RFC 9110 section 5.5: whitespace around a field value is not part of it,
/// and the HTTP parser strips it before any handler runs, so `" 5"` on the
/// wire is the header value `5`. (`parse_user_id(b" 5")` is refused; see
/// the unit tests in `src/extract.rs`.)
#[tokio::test]
async fn atk_01_whitespace_around_the_user_id_header_is_http_padding_not_part_of_the_value() {
    let app = spawn_app().await;
    for padded in [" 5", "5 ", "\t5"] {
        let (_, body) = ok_json(app.check(padded, "/x").await).await;
        assert_eq!(body["user_id"], 5, "X-User-Id {padded:?}");
    }
    assert_eq!(usage(&app, "5", "/x").await, 3);
}

#[tokio::test]
async fn atk_01_leading_zeros_are_ignored_and_the_largest_id_is_accepted() {
    let app = spawn_app().await;
    let (_, body) = ok_json(app.check("05", "/x").await).await;
    assert_eq!(body["user_id"], 5);
    assert_eq!(usage(&app, "5", "/x").await, 1);
    assert_eq!(usage(&app, "0005", "/x").await, 1);
    let (_, body) = ok_json(app.check("9223372036854775807", "/x").await).await;
    assert_eq!(body["user_id"], 9_223_372_036_854_775_807_u64);
}

#[tokio::test]
async fn atk_02_an_empty_endpoint_is_422() {
    let app = spawn_app().await;
    let (_, body) = problem(app.check("13", "").await, 422).await;
    assert_eq!(body["instance"], "/rate/check");
    problem(app.rate_status("13", "").await, 422).await;
}

#[tokio::test]
async fn atk_03_a_129_character_endpoint_is_422_and_128_characters_pass() {
    let app = spawn_app().await;
    problem(app.check("14", &"e".repeat(129)).await, 422).await;
    problem(app.check("14", &"é".repeat(129)).await, 422).await;
    problem(app.rate_status("14", &"e".repeat(129)).await, 422).await;
    ok_json(app.check("14", &"e".repeat(128)).await).await;
    let (_, body) = ok_json(app.check("14", &"é".repeat(128)).await).await;
    assert_eq!(body["endpoint"], "é".repeat(128));
    assert_eq!(usage(&app, "14", &"é".repeat(128)).await, 1);
}

#[tokio::test]
async fn atk_04_sql_in_the_endpoint_is_an_ordinary_string() {
    let mut app = spawn_app().await;
    let evil = "'; DROP TABLE rate_events;--";
    let (_, body) = ok_json(app.check("15", evil).await).await;
    assert_eq!(body["endpoint"], evil);
    assert_eq!(usage(&app, "15", evil).await, 1);
    ok_json(app.check("15", "/still-works").await).await;
    let other = "x' OR '1'='1";
    ok_json(app.check("15", other).await).await;
    assert_eq!(usage(&app, "15", other).await, 1);
    assert_eq!(usage(&app, "15", "x").await, 0);
    let (_, body) = ok_json(
        app.reset(
            "15",
            &format!("?endpoint={}", encode(evil)),
            Some(ADMIN_KEY),
        )
        .await,
    )
    .await;
    assert_eq!(body["deleted"], 1);
    assert_eq!(usage(&app, "15", "/still-works").await, 1);
    app.stop().await;
    let rows = app.count_rows("SELECT COUNT(*) FROM rate_events WHERE user_id = 15", []);
    assert_eq!(rows, 2);
}

#[tokio::test]
async fn atk_04_like_wildcards_in_a_reset_endpoint_match_only_themselves() {
    let app = spawn_app().await;
    for endpoint in ["%", "_", "/a", "/b"] {
        fill(&app, "16", endpoint, 1).await;
    }
    for endpoint in ["%", "_"] {
        let query = format!("?endpoint={}", encode(endpoint));
        let (_, body) = ok_json(app.reset("16", &query, Some(ADMIN_KEY)).await).await;
        assert_eq!(body["deleted"], 1, "reset of {endpoint:?}");
    }
    assert_eq!(usage(&app, "16", "/a").await, 1);
    assert_eq!(usage(&app, "16", "/b").await, 1);
}

#[tokio::test]
async fn atk_05_a_reset_without_the_admin_key_is_403_and_deletes_nothing() {
    let app = spawn_app().await;
    fill(&app, "7", "/a", 2).await;
    let (_, body) = problem(app.reset("7", "", None).await, 403).await;
    assert_eq!(body["instance"], "/rate/reset/7");
    problem(app.reset("7", "?endpoint=/a", None).await, 403).await;
    assert_eq!(usage(&app, "7", "/a").await, 2);
}

#[tokio::test]
async fn atk_06_a_wrong_admin_key_is_403_and_deletes_nothing() {
    let app = spawn_app().await;
    fill(&app, "7", "/a", 2).await;
    let near_misses = [
        "wrong".to_owned(),
        String::new(),
        ADMIN_KEY[..ADMIN_KEY.len() - 1].to_owned(),
        format!("{ADMIN_KEY}x"),
        ADMIN_KEY.to_uppercase(),
        format!("{ADMIN_KEY}, {ADMIN_KEY}"),
    ];
    for key in &near_misses {
        let response = app.reset("7", "", Some(key)).await;
        assert_eq!(response.status(), 403, "X-Admin-Key {key:?}");
        problem(response, 403).await;
    }
    assert_eq!(usage(&app, "7", "/a").await, 2);
}

#[tokio::test]
async fn atk_07_a_negative_user_id_in_the_path_is_404() {
    let app = spawn_app().await;
    problem(app.reset("-1", "", Some(ADMIN_KEY)).await, 404).await;
}

#[tokio::test]
async fn atk_08_user_id_null_in_the_path_is_404() {
    let app = spawn_app().await;
    problem(app.reset("null", "", Some(ADMIN_KEY)).await, 404).await;
}

#[tokio::test]
async fn atk_09_a_user_id_that_is_not_digits_is_404() {
    let app = spawn_app().await;
    for bad in [
        "abc",
        "0",
        "1e3",
        "1.5",
        "+5",
        "0x10",
        "%20",
        "9223372036854775808",
    ] {
        let response = app.reset(bad, "", Some(ADMIN_KEY)).await;
        assert_eq!(response.status(), 404, "path user id {bad:?}");
        problem(response, 404).await;
    }
}

#[tokio::test]
async fn atk_10_status_without_an_endpoint_parameter_is_422() {
    let app = spawn_app().await;
    for path in [
        "/rate/status",
        "/rate/status?endpoint=",
        "/rate/status?other=1",
    ] {
        let response = app
            .client
            .get(app.url(path))
            .header("X-User-Id", "17")
            .send()
            .await
            .expect("GET");
        assert_eq!(response.status(), 422, "{path}");
        problem(response, 422).await;
    }
}

#[tokio::test]
async fn atk_11_a_check_without_a_body_or_with_a_body_that_is_not_an_object_is_400() {
    let app = spawn_app().await;
    let (_, body) = problem(app.check_raw(Some("16"), None).await, 400).await;
    assert_eq!(body["instance"], "/rate/check");
    for raw in [
        "",
        "{not json",
        "[1,2]",
        "\"/orders\"",
        "null",
        "42",
        "{\"endpoint\":\"/a\"",
    ] {
        let response = app.check_raw(Some("16"), Some(raw)).await;
        assert_eq!(response.status(), 400, "body {raw:?}");
        problem(response, 400).await;
    }
}

#[tokio::test]
async fn atk_12_a_body_without_a_string_endpoint_is_422() {
    let app = spawn_app().await;
    for raw in [
        "{}",
        r#"{"other":1}"#,
        r#"{"endpoint":5}"#,
        r#"{"endpoint":null}"#,
        r#"{"endpoint":true}"#,
        r#"{"endpoint":["/a"]}"#,
        r#"{"endpoint":{"x":1}}"#,
    ] {
        let response = app.check_raw(Some("13"), Some(raw)).await;
        assert_eq!(response.status(), 422, "body {raw}");
        problem(response, 422).await;
    }
}

// ---------------------------------------------------------------- fail closed

#[tokio::test]
async fn a_server_without_an_admin_key_refuses_every_reset() {
    for configured in [None, Some(String::new())] {
        let options = AppOptions {
            admin_key: configured.clone(),
            ..AppOptions::default()
        };
        let app = spawn(options, |_| {}).await;
        fill(&app, "7", "/a", 1).await;
        for sent in [None, Some(""), Some("anything"), Some(ADMIN_KEY)] {
            let response = app.reset("7", "", sent).await;
            assert_eq!(
                response.status(),
                403,
                "configured {configured:?}, sent {sent:?}"
            );
            problem(response, 403).await;
        }
        assert_eq!(usage(&app, "7", "/a").await, 1);
    }
}

// ---------------------------------------------------------------- sliding window

#[tokio::test]
async fn the_eleventh_check_is_refused_until_the_oldest_event_leaves_the_window() {
    let app = spawn_app().await;
    fill(&app, "7", "/orders", 1).await;
    app.clock.set(at(10, 250_000_000));
    fill(&app, "7", "/orders", 9).await;
    app.clock.set(at(20, 500_000_000));
    let (headers, _) = problem(app.check("7", "/orders").await, 429).await;
    // The first event leaves at 60 s: 39.5 s from now, rounded up.
    assert_eq!(retry_after(&headers), 40);
    // Every counted event has left at 70.25 s: 49.75 s from now.
    assert_eq!(header(&headers, "ratelimit"), "\"check\";r=0;t=50");
}

#[tokio::test]
async fn an_event_exactly_one_window_old_has_left_the_window() {
    let app = spawn_app().await;
    fill(&app, "7", "/orders", 1).await;
    app.clock.set(at(10, 250_000_000));
    fill(&app, "7", "/orders", 9).await;
    app.clock.set(at(60, 0));
    assert_eq!(usage(&app, "7", "/orders").await, 9);
    let (_, body) = ok_json(app.check("7", "/orders").await).await;
    assert_eq!(body["count"], 10);
    assert_eq!(body["remaining"], 0);
    let (headers, _) = problem(app.check("7", "/orders").await, 429).await;
    // The next oldest event (10.25 s) leaves at 70.25 s.
    assert_eq!(retry_after(&headers), 11);
}

#[tokio::test]
async fn an_event_one_nanosecond_short_of_one_window_old_still_counts() {
    let app = spawn_app().await;
    fill(&app, "7", "/orders", 1).await;
    app.clock.set(at(10, 250_000_000));
    fill(&app, "7", "/orders", 9).await;
    app.clock.set(at(59, 999_999_999));
    assert_eq!(usage(&app, "7", "/orders").await, 10);
    let (headers, _) = problem(app.check("7", "/orders").await, 429).await;
    assert_eq!(retry_after(&headers), 1);
}

#[tokio::test]
async fn refused_checks_are_not_recorded() {
    let mut app = spawn_app().await;
    fill(&app, "7", "/orders", 10).await;
    for _ in 0..5 {
        problem(app.check("7", "/orders").await, 429).await;
    }
    assert_eq!(usage(&app, "7", "/orders").await, 10);
    app.stop().await;
    let rows = app.count_rows(
        "SELECT COUNT(*) FROM rate_events WHERE user_id = 7 AND endpoint = '/orders'",
        [],
    );
    assert_eq!(rows, 10);
}

#[tokio::test]
async fn the_window_slides_as_old_events_leave_one_by_one() {
    let app = spawn_app().await;
    for second in 0..10 {
        app.clock.set(at(second * 5, 0));
        fill(&app, "7", "/slide", 1).await;
    }
    app.clock.set(at(50, 0));
    problem(app.check("7", "/slide").await, 429).await;
    app.clock.set(at(60, 0));
    fill(&app, "7", "/slide", 1).await;
    problem(app.check("7", "/slide").await, 429).await;
    app.clock.set(at(65, 0));
    fill(&app, "7", "/slide", 1).await;
    assert_eq!(usage(&app, "7", "/slide").await, 10);
}

#[tokio::test]
async fn users_and_endpoints_are_independent() {
    let app = spawn_app().await;
    fill(&app, "8", "/a", 10).await;
    problem(app.check("8", "/a").await, 429).await;
    let (_, body) = ok_json(app.check("8", "/b").await).await;
    assert_eq!(body["count"], 1);
    let (_, body) = ok_json(app.check("9", "/a").await).await;
    assert_eq!(body["count"], 1);
    let (_, body) = ok_json(app.check("80", "/a").await).await;
    assert_eq!(body["count"], 1);
}

#[tokio::test]
async fn a_reset_of_one_endpoint_leaves_the_other_endpoints_alone() {
    let app = spawn_app().await;
    fill(&app, "21", "/r1", 10).await;
    fill(&app, "21", "/r2", 10).await;
    fill(&app, "22", "/r1", 3).await;
    let (_, body) = ok_json(app.reset("21", "?endpoint=/r1", Some(ADMIN_KEY)).await).await;
    assert_eq!(
        body,
        json!({ "user_id": 21, "endpoint": "/r1", "deleted": 1 })
    );
    ok_json(app.check("21", "/r1").await).await;
    problem(app.check("21", "/r2").await, 429).await;
    assert_eq!(usage(&app, "22", "/r1").await, 3);
}

#[tokio::test]
async fn a_reset_without_an_endpoint_clears_every_endpoint_of_that_user_only() {
    let app = spawn_app().await;
    fill(&app, "1", "/r1", 4).await;
    fill(&app, "1", "/r2", 10).await;
    fill(&app, "11", "/r1", 2).await;
    fill(&app, "2", "/r1", 1).await;
    let (_, body) = ok_json(app.reset("1", "", Some(ADMIN_KEY)).await).await;
    assert_eq!(
        body,
        json!({ "user_id": 1, "endpoint": null, "deleted": 2 })
    );
    assert_eq!(usage(&app, "1", "/r1").await, 0);
    assert_eq!(usage(&app, "1", "/r2").await, 0);
    ok_json(app.check("1", "/r2").await).await;
    assert_eq!(usage(&app, "11", "/r1").await, 2);
    assert_eq!(usage(&app, "2", "/r1").await, 1);
    let (_, body) = ok_json(app.reset("1", "", Some(ADMIN_KEY)).await).await;
    assert_eq!(body["deleted"], 1);
    let (_, body) = ok_json(app.reset("3", "", Some(ADMIN_KEY)).await).await;
    assert_eq!(body["deleted"], 0);
}

#[tokio::test]
async fn a_reset_path_user_id_with_leading_zeros_is_that_user() {
    let app = spawn_app().await;
    fill(&app, "5", "/a", 2).await;
    let (_, body) = ok_json(app.reset("005", "", Some(ADMIN_KEY)).await).await;
    assert_eq!(
        body,
        json!({ "user_id": 5, "endpoint": null, "deleted": 1 })
    );
}

#[tokio::test]
async fn a_reset_endpoint_query_is_validated_like_an_endpoint() {
    let app = spawn_app().await;
    fill(&app, "7", "/a", 1).await;
    let too_long = format!("?endpoint={}", "e".repeat(129));
    for query in ["?endpoint=", too_long.as_str(), "?endpoint=/a&endpoint=/b"] {
        let response = app.reset("7", query, Some(ADMIN_KEY)).await;
        assert_eq!(response.status(), 422, "{query}");
        problem(response, 422).await;
    }
    assert_eq!(usage(&app, "7", "/a").await, 1);
    let query = format!("?endpoint={}", encode("/a b+c"));
    fill(&app, "7", "/a b+c", 1).await;
    let (_, body) = ok_json(app.reset("7", &query, Some(ADMIN_KEY)).await).await;
    assert_eq!(
        body,
        json!({ "user_id": 7, "endpoint": "/a b+c", "deleted": 1 })
    );
}

#[tokio::test]
async fn a_check_limit_of_zero_refuses_every_check_and_records_nothing() {
    let app = crate::helpers::spawn_app_with_args(&["--check-limit", "0"]).await;
    let (headers, body) = problem(app.check("7", "/orders").await, 429).await;
    assert!(retry_after(&headers) >= 1, "{headers:?}");
    assert_eq!(body["title"], "Too Many Requests");
    assert_eq!(header(&headers, "x-ratelimit-limit"), "0");
    let (_, body) = ok_json(app.rate_status("7", "/orders").await).await;
    assert_eq!(body["count"], 0);
    assert_eq!(body["limit"], 0);
    assert_eq!(body["remaining"], 0);
}

#[tokio::test]
async fn an_endpoint_with_a_nul_character_is_its_own_endpoint() {
    let app = spawn_app().await;
    let (_, body) = ok_json(app.check("7", "a\u{0}b").await).await;
    assert_eq!(body["endpoint"], "a\u{0}b");
    assert_eq!(usage(&app, "7", "a\u{0}b").await, 1);
    assert_eq!(usage(&app, "7", "a").await, 0);
    assert_eq!(usage(&app, "7", "a\u{0}").await, 0);
    let (_, body) = ok_json(app.reset("7", "?endpoint=a%00b", Some(ADMIN_KEY)).await).await;
    assert_eq!(body["deleted"], 1);
}

#[tokio::test]
async fn a_user_id_with_many_leading_zeros_is_still_that_user() {
    let app = spawn_app().await;
    let padded = format!("{}5", "0".repeat(40));
    let (_, body) = ok_json(app.check(&padded, "/x").await).await;
    assert_eq!(body["user_id"], 5);
    let (_, body) = ok_json(app.reset(&padded, "", Some(ADMIN_KEY)).await).await;
    assert_eq!(body["deleted"], 1);
}
