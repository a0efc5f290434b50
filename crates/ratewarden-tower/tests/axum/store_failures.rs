//! A store that cannot answer: fail open, fail closed, and a permanent
//! failure.

use std::sync::Arc;

use http::StatusCode;
use ratewarden_tower::{KeyPart, PolicyBuilder};

use crate::common::{FailingStore, build, clock, layer_of, literal, per_minute};
use crate::{App, app, get_};

fn on_failing_store(
    store: Arc<FailingStore>,
    policies: impl IntoIterator<Item = PolicyBuilder>,
) -> App {
    let clock = clock();
    app(build(layer_of(&clock, policies).store(store)))
}

#[tokio::test]
async fn a_fail_open_policy_lets_requests_through_without_headers_when_the_store_fails() {
    let app = on_failing_store(
        FailingStore::unavailable(),
        [per_minute("api", 1, [KeyPart::ClientIp]).fail_open()],
    );
    for _ in 0..3 {
        let reply = app.send(get_("/hello")).await;
        assert_eq!(reply.status, StatusCode::OK);
        assert_eq!(reply.text(), "inner: GET /hello");
        assert!(
            !reply.has_rate_limit_headers(),
            "no quota was checked: {:?}",
            reply.headers
        );
    }
    assert_eq!(app.calls(), 3);
}

#[tokio::test]
async fn a_fail_closed_policy_answers_503_with_retry_after_1_when_the_store_fails() {
    let app = on_failing_store(
        FailingStore::unavailable(),
        [per_minute("api", 1, [KeyPart::ClientIp]).fail_closed()],
    );
    let reply = app.send(get_("/hello")).await;
    let body = reply.assert_problem(
        StatusCode::SERVICE_UNAVAILABLE,
        "urn:ratewarden:problem:store-unavailable",
    );
    assert_eq!(reply.header("retry-after"), Some("1"));
    assert_eq!(body["title"], "Service Unavailable");
    assert_eq!(body["instance"], "/hello");
    assert!(!reply.has_rate_limit_headers());
    assert_eq!(app.calls(), 0);
}

#[tokio::test]
async fn one_fail_closed_policy_among_fail_open_ones_closes_the_request() {
    let app = on_failing_store(
        FailingStore::unavailable(),
        [
            per_minute("open", 1, [KeyPart::ClientIp]).fail_open(),
            per_minute("closed", 1, [literal("all")]).fail_closed(),
        ],
    );
    let reply = app.send(get_("/")).await;
    reply.assert_problem(
        StatusCode::SERVICE_UNAVAILABLE,
        "urn:ratewarden:problem:store-unavailable",
    );
    assert_eq!(app.calls(), 0);
}

#[tokio::test]
async fn a_permanent_store_failure_is_a_500_problem_even_when_failing_open() {
    let app = on_failing_store(
        FailingStore::broken(),
        [per_minute("api", 1, [KeyPart::ClientIp]).fail_open()],
    );
    let reply = app.send(get_("/")).await;
    reply.assert_problem(
        StatusCode::INTERNAL_SERVER_ERROR,
        "urn:ratewarden:problem:internal",
    );
    assert_eq!(reply.header("retry-after"), None);
    assert_eq!(app.calls(), 0);
}
