//! A policy whose key is missing or too long: the 400, `MissingKey::Skip`
//! and `Refuse`, and a different answer per policy.

use http::StatusCode;
use ratewarden_tower::{KeyPart, MissingKey, PolicyBuilder};

use crate::common::{MINUTE, build, clock, header, layer_of, literal, per_minute};
use crate::{app, get_, request, with_headers};

#[tokio::test]
async fn without_connect_info_a_client_ip_policy_answers_400_naming_the_policy() {
    let clock = clock();
    let app = app(build(layer_of(
        &clock,
        [per_minute("per-client", 1, [KeyPart::ClientIp])],
    )));
    let reply = app.send(request(None, "GET", "/where", &[])).await;
    let body = reply.assert_problem(
        StatusCode::BAD_REQUEST,
        "urn:ratewarden:problem:missing-key",
    );
    assert_eq!(body["title"], "Bad Request");
    let detail = body["detail"].as_str().unwrap_or_default();
    assert!(
        detail.starts_with(
            "the request has no key for policy 'per-client': the client's address is not known"
        ) && detail.contains("into_make_service_with_connect_info"),
        "the answer says how to fix it: {detail}"
    );
    assert_eq!(body["instance"], "/where");
    assert_eq!(app.calls(), 0);
}

#[tokio::test]
async fn missing_key_skip_passes_without_that_policy_while_the_others_apply() {
    let clock = clock();
    let layer = layer_of(
        &clock,
        [
            per_minute("per-client", 1, [KeyPart::ClientIp]),
            per_minute("global", 2, [literal("all")]),
        ],
    )
    .on_missing_key(MissingKey::Skip);
    let app = app(build(layer));
    let no_peer = || request(None, "GET", "/", &[]);
    let first = app.send(no_peer()).await;
    assert_eq!(first.status, StatusCode::OK);
    assert_eq!(
        first.header("ratelimit-policy"),
        Some(r#""global";q=2;w=60"#)
    );
    assert_eq!(
        app.statuses(2, no_peer).await,
        [200, 429],
        "global still applies"
    );
    assert_eq!(app.calls(), 2);
}

#[tokio::test]
async fn missing_key_refuse_answers_with_the_status_given() {
    let clock = clock();
    let layer = layer_of(&clock, [per_minute("per-client", 1, [KeyPart::ClientIp])])
        .on_missing_key(MissingKey::Refuse(StatusCode::UNAUTHORIZED));
    let app = app(build(layer));
    let reply = app.send(request(None, "GET", "/", &[])).await;
    let body = reply.assert_problem(
        StatusCode::UNAUTHORIZED,
        "urn:ratewarden:problem:missing-key",
    );
    assert_eq!(body["title"], "Unauthorized");
    assert!(
        body["detail"]
            .as_str()
            .is_some_and(|d| d.contains("'per-client'")),
        "{body}"
    );
    assert_eq!(app.calls(), 0);
}

#[tokio::test]
async fn a_key_fn_returning_none_gets_the_configured_missing_key_answer() {
    let policy = || {
        PolicyBuilder::fixed_window("per-user")
            .limit(1)
            .per(MINUTE)
            .key_fn(|parts: &http::request::Parts| {
                parts.headers.get("x-user").map(|v| v.as_bytes().to_vec())
            })
    };
    let clock = clock();
    let default = app(build(layer_of(&clock, [policy()])));
    let body = default.send(get_("/")).await.assert_problem(
        StatusCode::BAD_REQUEST,
        "urn:ratewarden:problem:missing-key",
    );
    assert_eq!(
        body["detail"],
        "the request has no key for policy 'per-user': the key function found no key"
    );

    let refuse = app(build(
        layer_of(&clock, [policy()]).on_missing_key(MissingKey::Refuse(StatusCode::FORBIDDEN)),
    ));
    refuse
        .send(get_("/"))
        .await
        .assert_problem(StatusCode::FORBIDDEN, "urn:ratewarden:problem:missing-key");

    let skip = app(build(
        layer_of(&clock, [policy()]).on_missing_key(MissingKey::Skip),
    ));
    let reply = skip.send(get_("/")).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert!(!reply.has_rate_limit_headers());
    assert_eq!(
        skip.statuses(2, || with_headers("/", &[("x-user", "u")]))
            .await,
        [200, 429]
    );
    assert_eq!(default.calls() + refuse.calls() + skip.calls(), 2);
}

#[tokio::test]
async fn a_key_longer_than_4096_bytes_is_refused_not_a_500() {
    let clock = clock();
    let app = app(build(layer_of(
        &clock,
        [per_minute("by-key", 1, [header("x-api-key")])],
    )));
    let long = "a".repeat(5000);
    let reply = app
        .send(with_headers("/", &[("x-api-key", long.as_str())]))
        .await;
    let body = reply.assert_problem(
        StatusCode::BAD_REQUEST,
        "urn:ratewarden:problem:key-too-long",
    );
    assert!(
        body["detail"]
            .as_str()
            .is_some_and(|d| d.contains("the maximum is 4096 bytes")),
        "{body}"
    );
    assert_eq!(app.calls(), 0);
}

/// `MissingKey::Skip` never skips a policy because the key the client
/// itself sent is too long, or any client would escape a `header:` or
/// `query:` policy by sending a value over 4096 bytes. A too-long key is
/// never "missing": it is refused with 400 whatever `MissingKey` says.
#[tokio::test]
async fn missing_key_skip_does_not_let_an_oversized_client_key_escape_the_limit() {
    let clock = clock();
    let layer = layer_of(&clock, [per_minute("by-key", 1, [header("x-api-key")])])
        .on_missing_key(MissingKey::Skip);
    let app = app(build(layer));
    let long = "a".repeat(5000);
    let statuses = app
        .statuses(3, || with_headers("/", &[("x-api-key", long.as_str())]))
        .await;
    assert_eq!(
        statuses,
        [400, 400, 400],
        "an oversized x-api-key is refused, never skipped"
    );
}

#[tokio::test]
async fn the_missing_key_answer_can_differ_per_policy() {
    let clock = clock();
    let by_user = ratewarden_tower::PolicyBuilder::fixed_window("by-user")
        .limit(5)
        .per(std::time::Duration::from_secs(60))
        .key_fn(|p: &ratewarden_tower::Parts| {
            p.headers.get("x-user").map(|v| v.as_bytes().to_vec())
        })
        .on_missing_key(MissingKey::Refuse(axum::http::StatusCode::UNAUTHORIZED));
    let by_key = per_minute("by-key", 5, [header("x-api-key")]);
    let layer = layer_of(&clock, [by_key])
        .policy(by_user)
        .on_missing_key(MissingKey::Skip);
    let app = app(build(layer));
    let statuses = app.statuses(1, || with_headers("/", &[])).await;
    assert_eq!(
        statuses,
        [401],
        "by-user's own answer, not the layer's Skip"
    );
    let statuses = app
        .statuses(1, || with_headers("/", &[("x-user", "u1")]))
        .await;
    assert_eq!(statuses, [200]);
}
