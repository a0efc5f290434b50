//! What a deployment of envoyproxy/ratelimit relies on besides the
//! decisions: its `/healthcheck` probe, its optional `RateLimit-Limit` /
//! `-Remaining` / `-Reset` headers, and a bound on the descriptors of one
//! call.

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

use std::sync::Arc;

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use ratewarden_core::ManualClock;
use ratewarden_server::startup::Application;
use serde_json::{Value, json};
use tonic::transport::Channel;

use super::helpers::{AppOptions, StoreKind, TestApp, at, problem, settings, spawn, start};

const RULES: &str = r#"
domain: edge
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: path
    rate_limit: {unit: hour, requests_per_unit: 100}
  - key: always
    rate_limit: {unlimited: true}
"#;

async fn with(args: &[&str], rules: Option<&str>) -> TestApp {
    let app = spawn(
        AppOptions {
            envoy: rules.map(str::to_owned),
            store: StoreKind::Memory,
            ..AppOptions::args(args)
        },
        |_| {},
    )
    .await;
    // 10 s into a minute and an hour: a minute window ends 50 s later.
    app.clock.set(at(10, 0));
    app
}

async fn client(app: &TestApp) -> RateLimitServiceClient<Channel> {
    RateLimitServiceClient::connect(app.grpc.clone().expect("a gRPC server"))
        .await
        .expect("gRPC connects")
}

fn descriptor(key: &str, value: &str) -> RateLimitDescriptor {
    RateLimitDescriptor {
        entries: vec![Entry {
            key: key.into(),
            value: value.into(),
        }],
        ..RateLimitDescriptor::default()
    }
}

fn request(descriptors: Vec<RateLimitDescriptor>) -> RateLimitRequest {
    RateLimitRequest {
        domain: "edge".into(),
        descriptors,
        hits_addend: 0,
    }
}

/// `(key, value)` of each header an answer asks Envoy to add.
fn headers_of(
    response: &envoy_types::pb::envoy::service::ratelimit::v3::RateLimitResponse,
) -> Vec<(String, String)> {
    response
        .response_headers_to_add
        .iter()
        .map(|h| (h.key.clone(), h.value.clone()))
        .collect()
}

async fn healthcheck(app_base: &str, method: reqwest::Method) -> (u16, Option<String>, String) {
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let r = client
        .request(method, format!("{app_base}/healthcheck"))
        .send()
        .await
        .expect("/healthcheck answers");
    let status = r.status().as_u16();
    let ctype = r
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned());
    (status, ctype, r.text().await.unwrap())
}

/// Regression: `/healthcheck`, the probe of every envoyproxy/ratelimit
/// deployment, was a 404.
#[tokio::test]
async fn healthcheck_answers_ok_as_the_reference_on_any_method() {
    let app = with(&[], Some(RULES)).await;
    for method in [
        reqwest::Method::GET,
        reqwest::Method::HEAD,
        reqwest::Method::POST,
    ] {
        let (status, ctype, body) = healthcheck(&app.address, method.clone()).await;
        assert_eq!(status, 200, "{method}");
        assert_eq!(
            ctype.as_deref(),
            Some("text/plain; charset=utf-8"),
            "{method}"
        );
        let expected = if method == reqwest::Method::HEAD {
            ""
        } else {
            "OK"
        };
        assert_eq!(body, expected, "{method}");
    }
}

#[tokio::test]
async fn healthcheck_is_a_bare_500_while_the_store_cannot_answer() {
    let dir = tempfile::tempdir().unwrap();
    let settings = settings(&AppOptions::default(), &dir.path().join("unused.db"));
    let application = Application::with_store(
        settings,
        ratewarden_testkit::FailingStore::unavailable(),
        Arc::new(ManualClock::new(start())),
    )
    .await
    .unwrap();
    let base = format!("http://{}", application.local_addr());
    tokio::spawn(application.run_until_stopped(std::future::pending()));
    let (status, ctype, body) = healthcheck(&base, reqwest::Method::GET).await;
    assert_eq!((status, ctype, body.as_str()), (500, None, ""));
}

#[tokio::test]
async fn healthcheck_waits_for_a_rules_domain_when_rules_are_required() {
    let app = with(&["--envoy-require-rules"], None).await;
    let (status, _, body) = healthcheck(&app.address, reqwest::Method::GET).await;
    assert_eq!((status, body.as_str()), (500, ""));
    let app = with(&["--envoy-require-rules"], Some(RULES)).await;
    let (status, _, body) = healthcheck(&app.address, reqwest::Method::GET).await;
    assert_eq!((status, body.as_str()), (200, "OK"));
    let app = with(&["--envoy-require-rules", "false"], None).await;
    assert_eq!(healthcheck(&app.address, reqwest::Method::GET).await.0, 200);
}

/// Regression: no option gave the reference's
/// `LIMIT_RESPONSE_HEADERS_ENABLED` headers.
#[tokio::test]
async fn limit_headers_describe_the_most_restrictive_descriptor() {
    let app = with(&["--envoy-limit-headers", "on"], Some(RULES)).await;
    let mut grpc = client(&app).await;
    let ask = |descriptors| request(descriptors);
    let call = ask(vec![
        descriptor("always", "x"),
        descriptor("path", "/a"),
        descriptor("user", "alice"),
    ]);
    let first = grpc
        .should_rate_limit(call.clone())
        .await
        .unwrap()
        .into_inner();
    let headers = headers_of(&first);
    // The IETF fields stay; the reference's three follow.
    assert_eq!(headers[0].0, "RateLimit-Policy");
    assert_eq!(headers[1].0, "RateLimit");
    assert_eq!(
        headers[2..],
        [
            ("RateLimit-Limit".to_owned(), "5".to_owned()),
            ("RateLimit-Remaining".to_owned(), "4".to_owned()),
            ("RateLimit-Reset".to_owned(), "50".to_owned()),
        ],
        "the user limit (4 left of 5) is closer than the path's (99 of 100)"
    );
    for _ in 0..4 {
        grpc.should_rate_limit(call.clone()).await.unwrap();
    }
    let denied = grpc.should_rate_limit(call).await.unwrap().into_inner();
    assert_eq!(denied.overall_code, Code::OverLimit as i32);
    assert_eq!(
        headers_of(&denied)[2..],
        [
            ("RateLimit-Limit".to_owned(), "5".to_owned()),
            ("RateLimit-Remaining".to_owned(), "0".to_owned()),
            ("RateLimit-Reset".to_owned(), "50".to_owned()),
        ]
    );
    // Without a limited descriptor there is nothing to describe.
    let unlimited = grpc
        .should_rate_limit(ask(vec![descriptor("always", "y")]))
        .await
        .unwrap()
        .into_inner();
    assert!(
        headers_of(&unlimited).is_empty(),
        "{:?}",
        headers_of(&unlimited)
    );

    // Renamed, and on POST /json too.
    let app = with(
        &[
            "--envoy-limit-headers",
            "X-RateLimit-Limit,X-RateLimit-Remaining,X-RateLimit-Reset",
        ],
        Some(RULES),
    )
    .await;
    let r = app
        .client
        .post(app.url("/json"))
        .json(&json!({"domain": "edge", "descriptors": [{"entries": [{"key": "path", "value": "/b"}]}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let body: Value = r.json().await.unwrap();
    let added = body["responseHeadersToAdd"].as_array().unwrap();
    let names: Vec<&str> = added.iter().map(|h| h["key"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "RateLimit-Policy",
            "RateLimit",
            "X-RateLimit-Limit",
            "X-RateLimit-Remaining",
            "X-RateLimit-Reset"
        ]
    );
    assert_eq!(added[4]["value"], "3590", "to the end of the hour");

    // Off by default.
    let app = with(&[], Some(RULES)).await;
    let mut grpc = client(&app).await;
    let answer = grpc
        .should_rate_limit(ask(vec![descriptor("user", "bob")]))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(headers_of(&answer).len(), 2, "{:?}", headers_of(&answer));
}

/// Regression: a gRPC call could carry 20,000 descriptors (decided in
/// 0.79 s) where `/v1/check` takes 64 checks.
#[tokio::test]
async fn a_call_with_more_descriptors_than_the_cap_is_invalid() {
    let app = with(&[], Some(RULES)).await;
    let mut grpc = client(&app).await;
    let many = |n: usize| {
        request(
            (0..n)
                .map(|i| descriptor("path", &format!("/{i}")))
                .collect(),
        )
    };
    let ok = grpc
        .should_rate_limit(many(256))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(ok.statuses.len(), 256);
    let refused = grpc.should_rate_limit(many(257)).await.unwrap_err();
    assert_eq!(refused.code(), tonic::Code::InvalidArgument);
    assert!(
        refused.message().contains("257 descriptors") && refused.message().contains("256"),
        "{}",
        refused.message()
    );

    let app = with(&["--envoy-max-descriptors", "2"], Some(RULES)).await;
    let mut grpc = client(&app).await;
    assert!(grpc.should_rate_limit(many(2)).await.is_ok());
    let refused = grpc.should_rate_limit(many(3)).await.unwrap_err();
    assert_eq!(refused.code(), tonic::Code::InvalidArgument);
    let entries = |n: usize| {
        (0..n)
            .map(|i| json!({"entries": [{"key": "path", "value": format!("/{i}")}]}))
            .collect::<Vec<_>>()
    };
    let r = app
        .client
        .post(app.url("/json"))
        .json(&json!({"domain": "edge", "descriptors": entries(3)}))
        .send()
        .await
        .unwrap();
    let (_, body) = problem(r, 400).await;
    assert!(
        body["detail"].as_str().unwrap().contains("at most 2"),
        "{body}"
    );
}
