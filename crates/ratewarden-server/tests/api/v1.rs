//! The JSON decision API over HTTP, on every store (memory, SQLite, a
//! Redis of the test's own), against `serve --config FILE` with a manual
//! clock: every algorithm, batches all or nothing, shadow policies,
//! status, counters, policies, and every kind of bad input.

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::{
    ADMIN_KEY, StoreKind, TestApp, at, header, ok_json, policies, policy, problem, retry_after,
    spawn_with_config,
};

fn policies_of_every_kind() -> String {
    policies([
        policy("fixed").fixed_window(2, "1m"),
        policy("log").sliding_log(2, "1m"),
        policy("counter").sliding_window(2, "1m"),
        policy("bucket").gcra(2, "1m").burst(2),
        policy("global").fixed_window(3, "1h"),
        policy("dry").fixed_window(1, "1m").shadow(),
    ])
}

const QUOTA_EXCEEDED: &str = "https://iana.org/assignments/http-problem-types#quota-exceeded";

async fn app(store: StoreKind) -> TestApp {
    spawn_with_config(store, &policies_of_every_kind()).await
}

fn check(policy: &str, key: &str) -> Value {
    json!({ "policy": policy, "key": key })
}

/// Every algorithm through `/v1/check`: two allowed, the third denied with
/// the algorithm's exact wait (the clock stands at a window start).
pub async fn every_algorithm_decides_through_v1_check(store: StoreKind) {
    let app = app(store).await;
    for (policy, retry_ms) in [
        ("fixed", 60_000),
        ("log", 60_000),
        // curr + c > L: the next window, then half of it: 60 s + 30 s.
        ("counter", 90_000),
        // T = 30 s, burst 2: one interval after the burst.
        ("bucket", 30_000),
    ] {
        for remaining in [1, 0] {
            let (headers, body) = ok_json(app.v1_check(&check(policy, "alice")).await).await;
            assert_eq!(body["allowed"], true, "{policy}: {body}");
            assert_eq!(body["remaining"], remaining, "{policy}: {body}");
            assert_eq!(body["limit"], 2);
            assert_eq!(
                header(&headers, "ratelimit-policy"),
                format!("\"{policy}\";q=2;w=60")
            );
        }
        let (headers, body) = problem(app.v1_check(&check(policy, "alice")).await, 429).await;
        assert_eq!(body["type"], QUOTA_EXCEEDED, "{body}");
        assert_eq!(body["violated-policies"], json!([policy]));
        assert_eq!(body["policy"], policy);
        assert_eq!(body["allowed"], false);
        assert_eq!(body["retry_after_ms"], retry_ms, "{policy}: {body}");
        assert_eq!(retry_after(&headers), retry_ms / 1000);
        assert!(header(&headers, "ratelimit").starts_with(&format!("\"{policy}\";r=0;")));
        assert_eq!(header(&headers, "x-ratelimit-remaining"), "0");
        // Another key of the same policy has its own counter.
        ok_json(app.v1_check(&check(policy, "bob")).await).await;
    }
    // The window edge, to the nanosecond.
    app.clock.set(at(59, 999_999_999));
    problem(app.v1_check(&check("fixed", "alice")).await, 429).await;
    app.clock.set(at(60, 0));
    ok_json(app.v1_check(&check("fixed", "alice")).await).await;
}

/// A batch denied by one policy charges no other; the denial names the
/// violated policy and each result says whether its own policy allowed it.
pub async fn a_denied_batch_charges_no_policy(store: StoreKind) {
    let app = app(store).await;
    let batch = |user: &str| json!({ "checks": [check("fixed", user), check("global", "all")] });
    for remaining in [2, 1] {
        let (headers, body) = ok_json(app.v1_check(&batch("a")).await).await;
        assert_eq!(body["allowed"], true);
        assert_eq!(body["results"][1]["remaining"], remaining, "{body}");
        assert_eq!(
            header(&headers, "ratelimit-policy"),
            "\"fixed\";q=2;w=60, \"global\";q=3;w=3600"
        );
    }
    let (_, body) = problem(app.v1_check(&batch("a")).await, 429).await;
    assert_eq!(body["allowed"], false);
    assert_eq!(body["violated-policies"], json!(["fixed"]));
    assert_eq!(body["results"][0]["allowed"], false);
    assert_eq!(
        body["results"][1]["allowed"], true,
        "global alone would pass"
    );
    assert_eq!(body["results"][1]["remaining"], 1, "and was not charged");
    let (_, status) = ok_json(app.get("/v1/status?policy=global&key=all").await).await;
    assert_eq!(status["remaining"], 1);
    let (_, body) = ok_json(app.v1_check(&batch("b")).await).await;
    assert_eq!(body["results"][1]["remaining"], 0);
    // One policy for several keys: one header item, the most restrictive.
    let two_keys = json!({ "checks": [check("log", "x"), check("log", "y"), check("log", "y")] });
    let (headers, _) = ok_json(app.v1_check(&two_keys).await).await;
    assert_eq!(header(&headers, "ratelimit-policy"), "\"log\";q=2;w=60");
    assert!(
        header(&headers, "ratelimit").starts_with("\"log\";r=0;"),
        "{headers:?}"
    );
    // Now global denies every user.
    let (_, body) = problem(app.v1_check(&batch("c")).await, 429).await;
    assert_eq!(body["violated-policies"], json!(["global"]));
    let (_, status) = ok_json(app.get("/v1/status?policy=fixed&key=c").await).await;
    assert_eq!(status["remaining"], 2, "fixed was not charged for c");
}

/// A shadow policy decides and counts but never denies; its would-be
/// denial is reported, and clients are not told about it in headers.
pub async fn a_shadow_policy_never_denies(store: StoreKind) {
    let app = app(store).await;
    let batch = json!({ "checks": [check("dry", "x"), check("bucket", "x")] });
    let (_, first) = ok_json(app.v1_check(&batch).await).await;
    assert_eq!(first["results"][0]["shadow_denied"], false);
    let (headers, second) = ok_json(app.v1_check(&batch).await).await;
    assert_eq!(second["allowed"], true);
    let dry = &second["results"][0];
    assert_eq!(
        (
            &dry["allowed"],
            &dry["shadow_denied"],
            &dry["retry_after_ms"]
        ),
        (&json!(true), &json!(true), &json!(0))
    );
    assert_eq!(
        header(&headers, "ratelimit-policy"),
        "\"bucket\";q=2;w=60",
        "a dry run is not advertised"
    );
    let (_, status) = ok_json(app.get("/v1/status?policy=dry&key=x").await).await;
    assert_eq!(status["shadow_denied"], true);
    assert_eq!(status["allowed"], true);
    // Alone, a shadow check is answered as allowed too.
    let (_, alone) = ok_json(app.v1_check(&check("dry", "x")).await).await;
    assert_eq!(alone["shadow_denied"], true);
}

/// A cost that can never pass is denied as `never`, without `Retry-After`.
pub async fn a_cost_that_can_never_pass_is_never(store: StoreKind) {
    let app = app(store).await;
    let body = json!({ "policy": "bucket", "key": "k", "cost": 3 });
    let (headers, body) = problem(app.v1_check(&body).await, 429).await;
    assert_eq!(body["never"], true);
    assert_eq!(body["retry_after_ms"], 0);
    assert!(headers.get("retry-after").is_none(), "{headers:?}");
    assert!(body["detail"].as_str().unwrap_or("").contains("never"));
    let big = json!({ "policy": "fixed", "key": "k", "cost": u64::MAX });
    let (_, body) = problem(app.v1_check(&big).await, 429).await;
    assert_eq!(body["never"], true);
    let (_, status) = ok_json(app.get("/v1/status?policy=fixed&key=k").await).await;
    assert_eq!(status["remaining"], 2, "a never charges nothing");
}

/// Unknown policies are 404; bodies that are not JSON objects 400; every
/// missing or mistyped field 422 naming the field; all problem details.
pub async fn bad_input_gets_problem_details_naming_the_field(store: StoreKind) {
    let app = app(store).await;
    let (_, body) = problem(app.v1_check(&check("nope", "k")).await, 404).await;
    assert!(body["detail"].as_str().unwrap_or("").contains("'nope'"));
    let batch = json!({ "checks": [check("fixed", "k"), check("nope", "k")] });
    problem(app.v1_check(&batch).await, 404).await;
    let (_, status) = ok_json(app.get("/v1/status?policy=fixed&key=k").await).await;
    assert_eq!(
        status["remaining"], 2,
        "a batch naming an unknown policy decides nothing"
    );

    for (raw, field) in [("not json", ""), ("[1, 2]", ""), ("\"text\"", ""), ("", "")] {
        let r = app
            .client
            .post(app.url("/v1/check"))
            .header("Content-Type", "application/json")
            .body(raw)
            .send()
            .await
            .unwrap();
        problem(r, 400).await;
        let _ = field;
    }
    let many: Vec<Value> = (0..65).map(|i| check("fixed", &format!("k{i}"))).collect();
    for (body, field) in [
        (json!({ "key": "k" }), "'policy'"),
        (json!({ "policy": 7, "key": "k" }), "'policy'"),
        (json!({ "policy": "", "key": "k" }), "'policy'"),
        (json!({ "policy": "fixed" }), "'key'"),
        (json!({ "policy": "fixed", "key": "" }), "'key'"),
        (json!({ "policy": "fixed", "key": [] }), "'key'"),
        (json!({ "policy": "fixed", "key": [""] }), "'key'"),
        (json!({ "policy": "fixed", "key": ["a", 1] }), "'key[1]'"),
        (json!({ "policy": "fixed", "key": { "a": 1 } }), "'key'"),
        (
            json!({ "policy": "fixed", "key": "k", "cost": 0 }),
            "'cost'",
        ),
        (
            json!({ "policy": "fixed", "key": "k", "cost": -1 }),
            "'cost'",
        ),
        (
            json!({ "policy": "fixed", "key": "k", "cost": 1.5 }),
            "'cost'",
        ),
        (
            json!({ "policy": "fixed", "key": "k", "cost": null }),
            "'cost'",
        ),
        (
            json!({ "policy": "fixed", "key": "k", "cost": "1" }),
            "'cost'",
        ),
        (
            json!({ "policy": "fixed", "key": "k", "costs": 1 }),
            "'costs'",
        ),
        (
            json!({ "policy": "fixed", "key": "x".repeat(4097) }),
            "'key'",
        ),
        (json!({ "checks": [] }), "'checks'"),
        (json!({ "checks": many }), "'checks'"),
        (json!({ "checks": {} }), "'checks'"),
        (json!({ "checks": [7] }), "'checks[0]'"),
        (
            json!({ "checks": [{ "policy": "fixed", "key": "k", "cost": 0 }] }),
            "'checks[0].cost'",
        ),
        (
            json!({ "checks": [check("fixed", "k")], "policy": "fixed" }),
            "'policy'",
        ),
    ] {
        let (_, problem_body) = problem(app.v1_check(&body).await, 422).await;
        let detail = problem_body["detail"].as_str().unwrap_or("");
        assert!(detail.contains(field), "{body}: {detail}");
    }
    let r = app
        .client
        .post(app.url("/v1/check"))
        .header("Content-Type", "text/plain")
        .body(check("fixed", "k").to_string())
        .send()
        .await
        .unwrap();
    problem(r, 415).await;
    let r = app
        .client
        .post(app.url("/v1/check"))
        .header("Content-Type", "application/json")
        .body(format!(
            "{{\"policy\":\"fixed\",\"key\":\"{}\"}}",
            "x".repeat(20_000)
        ))
        .send()
        .await
        .unwrap();
    problem(r, 413).await;
    for query in [
        "",
        "?policy=fixed",
        "?key=k",
        "?policy=&key=k",
        "?policy=fixed&key=",
        "?policy=a&policy=b&key=k",
    ] {
        problem(app.get(&format!("/v1/status{query}")).await, 422).await;
    }
    problem(app.get("/v1/status?policy=nope&key=k").await, 404).await;
    let (_, body) = problem(app.get("/v1/nope").await, 404).await;
    assert_eq!(body["instance"], "/v1/nope");
    problem(app.get("/v1/check").await, 405).await;
}

/// Status reads change nothing; counters are reset by the admin only
/// (fail closed), exactly one key; the policies are listed.
pub async fn status_counters_and_policies(store: StoreKind) {
    let app = app(store).await;
    let (_, fresh) = ok_json(app.get("/v1/status?policy=log&key=a&key=b").await).await;
    assert_eq!(
        (&fresh["allowed"], &fresh["remaining"], &fresh["limit"]),
        (&json!(true), &json!(2), &json!(2))
    );
    let parts = json!({ "policy": "log", "key": ["a", "b"] });
    ok_json(app.v1_check(&parts).await).await;
    let (_, joined) = ok_json(app.get("/v1/status?policy=log&key=ab").await).await;
    assert_eq!(
        joined["remaining"], 2,
        "parts never collide with a joined string"
    );
    for _ in 0..2 {
        let (_, used) = ok_json(app.get("/v1/status?policy=log&key=a&key=b").await).await;
        assert_eq!(used["remaining"], 1, "a status read changes nothing");
    }
    let path = "/v1/counters?policy=log&key=a&key=b";
    problem(app.delete(path, None).await, 403).await;
    problem(app.delete(path, Some("wrong")).await, 403).await;
    problem(app.delete("/v1/counters?key=a", None).await, 403).await;
    problem(app.delete("/v1/counters?key=a", Some(ADMIN_KEY)).await, 422).await;
    problem(
        app.delete("/v1/counters?policy=nope&key=a", Some(ADMIN_KEY))
            .await,
        404,
    )
    .await;
    let (_, deleted) = ok_json(app.delete(path, Some(ADMIN_KEY)).await).await;
    assert_eq!(
        deleted,
        json!({ "policy": "log", "key": ["a", "b"], "deleted": 1 })
    );
    let (_, again) = ok_json(app.delete(path, Some(ADMIN_KEY)).await).await;
    assert_eq!(again["deleted"], 0);
    let (_, after) = ok_json(app.get("/v1/status?policy=log&key=a&key=b").await).await;
    assert_eq!(after["remaining"], 2);

    let (_, list) = ok_json(app.get("/v1/policies").await).await;
    let names: Vec<&str> = list["policies"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    assert_eq!(
        names,
        [
            "ping", "check", "fixed", "log", "counter", "bucket", "global", "dry"
        ]
    );
    let bucket = &list["policies"][5];
    assert_eq!(
        (&bucket["algorithm"], &bucket["burst"], &bucket["window_ms"]),
        (&json!("gcra"), &json!(2), &json!(60_000))
    );
    assert_eq!(list["policies"][7]["shadow"], true);
    assert_eq!(
        list["policies"][0]["count_denied"], true,
        "ping counts refused attempts"
    );
}

/// Regression: with `--ping-algorithm sliding_log`, `DELETE
/// /rate/reset/5` also cleared `/ping`'s counter of client key `5`.
pub async fn a_seed_reset_never_clears_another_policy(store: StoreKind) {
    let options = crate::helpers::AppOptions {
        store,
        ..crate::helpers::AppOptions::args(&["--ping-algorithm", "sliding_log"])
    };
    let app = crate::helpers::spawn(options, |_| {}).await;
    for _ in 0..3 {
        ok_json(app.ping(Some("5")).await).await;
    }
    ok_json(app.check("5", "/a").await).await;
    let (_, reset) = ok_json(app.reset("5", "", Some(ADMIN_KEY)).await).await;
    assert_eq!(reset["deleted"], 1);
    let (_, status) = ok_json(app.status("5").await).await;
    assert_eq!(status["count"], 3, "ping's counter for key 5 is untouched");
    assert_eq!(
        app.ping(Some("5")).await.status(),
        StatusCode::TOO_MANY_REQUESTS
    );
}

on_every_store!(
    every_algorithm_decides_through_v1_check,
    a_denied_batch_charges_no_policy,
    a_shadow_policy_never_denies,
    a_cost_that_can_never_pass_is_never,
    bad_input_gets_problem_details_naming_the_field,
    status_counters_and_policies,
    a_seed_reset_never_clears_another_policy,
);
