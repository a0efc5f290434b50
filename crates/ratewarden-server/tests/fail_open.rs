//! What the service answers when its store is unavailable: the operator's
//! `--on-store-error` policy, with nothing that claims a quota it did not
//! check (docs/semantics.md).

use std::sync::Arc;
use std::time::Duration;

use ratewarden_core::{ManualClock, Timestamp};
use ratewarden_server::cli::{Cli, Command};
use ratewarden_server::startup::Application;

async fn spawn(policy: &str) -> String {
    spawn_with(&["--on-store-error", policy]).await
}

async fn spawn_with(args: &[&str]) -> String {
    spawn_both(args).await.0
}

/// The HTTP base URL and the gRPC address (when `--grpc-listen` is given).
async fn spawn_both(args: &[&str]) -> (String, Option<String>) {
    let argv = ["ratewarden", "serve", "--listen", "127.0.0.1:0"]
        .iter()
        .chain(args);
    let cli = <Cli as clap::Parser>::try_parse_from(argv).expect("valid arguments");
    let Command::Serve(args) = cli.command else {
        panic!("serve arguments");
    };
    let settings = args.into_settings(Some("admin".into())).expect("settings");
    let clock = Arc::new(ManualClock::new(Timestamp::from_unix_secs(1_767_225_600)));
    let app = Application::with_store(
        settings,
        ratewarden_testkit::FailingStore::unavailable(),
        clock,
    )
    .await
    .expect("app");
    let base = format!("http://{}", app.local_addr());
    let grpc = app.grpc_addr().map(|a| format!("http://{a}"));
    tokio::spawn(app.run_until_stopped(std::future::pending()));
    (base, grpc)
}

/// Regression: failing open answered with `RateLimit: r=<limit>` headers,
/// advertising a full quota that no store had checked.
#[tokio::test]
async fn failing_open_lets_requests_through_without_advertising_a_quota() {
    let base = spawn("open").await;
    let client = reqwest::Client::new();
    for _ in 0..5 {
        let r = client
            .get(format!("{base}/ping"))
            .header("X-Client-Key", "a")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        for name in [
            "ratelimit",
            "ratelimit-policy",
            "x-ratelimit-remaining",
            "retry-after",
        ] {
            assert!(
                r.headers().get(name).is_none(),
                "{name} sent with an unchecked answer"
            );
        }
    }
    let r = client
        .post(format!("{base}/rate/check"))
        .header("X-User-Id", "7")
        .header("Content-Type", "application/json")
        .body(r#"{"endpoint":"/a"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.headers().get("ratelimit").is_none());
}

#[tokio::test]
async fn failing_closed_answers_503_problems_and_reads_and_resets_always_do() {
    for policy in ["closed", "open"] {
        let base = spawn(policy).await;
        let client = reqwest::Client::new();
        let mut answers = vec![
            client
                .get(format!("{base}/status?key=a"))
                .send()
                .await
                .unwrap(),
            client
                .get(format!("{base}/rate/status?endpoint=/a"))
                .header("X-User-Id", "7")
                .send()
                .await
                .unwrap(),
            client
                .delete(format!("{base}/rate/reset/7"))
                .header("X-Admin-Key", "admin")
                .send()
                .await
                .unwrap(),
        ];
        if policy == "closed" {
            answers.push(client.get(format!("{base}/ping")).send().await.unwrap());
        }
        for r in answers {
            assert_eq!(r.status(), 503, "{policy}");
            let ctype = r
                .headers()
                .get("content-type")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_owned();
            assert!(ctype.starts_with("application/problem+json"), "{ctype}");
            let body = r.text().await.unwrap();
            assert!(
                !body.contains("connection refused"),
                "the cause stays in the log: {body}"
            );
        }
    }
}

/// Each policy fails open or closed as it says (else as the global
/// setting says); a batch fails open only when all of its policies do.
#[tokio::test]
async fn each_policy_fails_open_or_closed_as_configured() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("rw.toml");
    std::fs::write(
        &config,
        r#"
on_store_error = "closed"

[[policies]]
name = "lenient"
algorithm = "gcra"
limit = 10
window = "1m"
on_store_error = "open"

[[policies]]
name = "strict"
algorithm = "gcra"
limit = 10
window = "1m"
"#,
    )
    .unwrap();
    let base = spawn_with(&["--config", config.to_str().unwrap()]).await;
    let client = reqwest::Client::new();
    let post = |body: serde_json::Value| client.post(format!("{base}/v1/check")).json(&body).send();
    let r = post(serde_json::json!({"policy": "lenient", "key": "k"}))
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(
        r.headers().get("ratelimit").is_none(),
        "no quota was checked"
    );
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(
        (&body["allowed"], &body["failed_open"]),
        (&true.into(), &true.into())
    );
    let r = post(serde_json::json!({"policy": "strict", "key": "k"}))
        .await
        .unwrap();
    assert_eq!(r.status(), 503, "the global default is closed");
    let both = serde_json::json!({"checks": [
        {"policy": "lenient", "key": "k"},
        {"policy": "strict", "key": "k"}
    ]});
    assert_eq!(post(both).await.unwrap().status(), 503);
    let r = client.get(format!("{base}/ping")).send().await.unwrap();
    assert_eq!(
        r.status(),
        503,
        "the seed policies follow the global default"
    );
}

/// Envoy's rate limit service over an unreachable store: gRPC health is
/// NOT_SERVING; a limit that fails closed answers UNAVAILABLE (so Envoy's
/// `failure_mode_deny` decides), one that fails open answers OK without
/// claiming a quota.
#[tokio::test]
async fn envoy_fails_open_or_closed_and_health_is_not_serving() {
    use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
    use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
    use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
    use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
    use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
    use tonic_health::pb::HealthCheckRequest;
    use tonic_health::pb::health_check_response::ServingStatus;
    use tonic_health::pb::health_client::HealthClient;

    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("rules.yaml");
    std::fs::write(
        &rules,
        "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 5}\n",
    )
    .unwrap();
    let request = RateLimitRequest {
        domain: "d".into(),
        descriptors: vec![RateLimitDescriptor {
            entries: vec![Entry {
                key: "k".into(),
                value: "v".into(),
            }],
            ..RateLimitDescriptor::default()
        }],
        hits_addend: 1,
    };
    for policy in ["closed", "open"] {
        let args = [
            "--on-store-error",
            policy,
            "--grpc-listen",
            "127.0.0.1:0",
            "--envoy-config",
            rules.to_str().unwrap(),
        ];
        let (_, grpc) = spawn_both(&args).await;
        let grpc = grpc.expect("a gRPC server");
        let channel = tonic::transport::Channel::from_shared(grpc.clone())
            .unwrap()
            .connect()
            .await
            .unwrap();
        let mut health = HealthClient::new(channel);
        let mut status = ServingStatus::Unknown;
        // The first health check runs as the server starts; how soon it
        // answers depends on the machine, so the wait is for the status,
        // with a deadline only a hang would reach.
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while std::time::Instant::now() < deadline {
            let r = health
                .check(HealthCheckRequest {
                    service: String::new(),
                })
                .await
                .unwrap()
                .into_inner();
            status = r.status();
            if status == ServingStatus::NotServing {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(status, ServingStatus::NotServing, "{policy}");
        let mut rls = RateLimitServiceClient::connect(grpc).await.unwrap();
        let answer = rls.should_rate_limit(request.clone()).await;
        if policy == "closed" {
            let status = answer.unwrap_err();
            assert_eq!(status.code(), tonic::Code::Unavailable);
            assert!(
                !status.message().contains("connection refused"),
                "the cause stays in the log"
            );
        } else {
            let r = answer.unwrap().into_inner();
            assert_eq!(r.overall_code, Code::Ok as i32);
            assert_eq!(r.statuses[0].current_limit, None, "no quota was checked");
            assert!(r.response_headers_to_add.is_empty());
        }
    }
}
