//! The layer around a tonic server (the gRPC health service), called with
//! the generated client over loopback TCP: allowed calls carry the
//! rate-limit metadata, the call over the limit is `RESOURCE_EXHAUSTED`
//! with `retry-after` and a `RetryInfo`, and every other answer of the
//! layer is a gRPC status too.

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use common::{FailingStore, MINUTE, build, clock, header, key, layer_of, literal, per_minute};
use ratewarden_core::Store;
use ratewarden_tower::{KeyPart, MissingKey, PolicyBuilder, RateLimitLayer};
use tonic::transport::server::TcpIncoming;
use tonic::transport::{Channel, Server};
use tonic::{Code, Request, Status};
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::{HealthCheckRequest, HealthCheckResponse};
use tonic_types::StatusExt;

const CHECK: &str = "/grpc.health.v1.Health/Check";

/// A health server behind `layer` on a loopback port, and a client of it.
struct Grpc {
    client: HealthClient<Channel>,
    layer: RateLimitLayer,
    server: tokio::task::JoinHandle<Result<(), tonic::transport::Error>>,
}

impl Grpc {
    async fn start(layer: RateLimitLayer) -> Grpc {
        let (_reporter, health) = tonic_health::server::health_reporter();
        let localhost: SocketAddr = "127.0.0.1:0".parse().expect("an address");
        let incoming = TcpIncoming::bind(localhost).expect("a port");
        let addr = incoming.local_addr().expect("the bound address");
        let server = Server::builder()
            .layer(layer.clone())
            .add_service(health)
            .serve_with_incoming(incoming);
        let server = tokio::spawn(server);
        let channel = Channel::from_shared(format!("http://{addr}"))
            .expect("a URI")
            .connect()
            .await
            .expect("a connection");
        Grpc {
            client: HealthClient::new(channel),
            layer,
            server,
        }
    }

    /// One `Check` call with `metadata`.
    async fn check_with(
        &self,
        metadata: &[(&'static str, &'static str)],
    ) -> Result<tonic::Response<HealthCheckResponse>, Status> {
        let mut request = Request::new(HealthCheckRequest {
            service: String::new(),
        });
        for (name, value) in metadata {
            request
                .metadata_mut()
                .insert(*name, value.parse().expect("ASCII metadata"));
        }
        self.client.clone().check(request).await
    }

    async fn check(&self) -> Result<tonic::Response<HealthCheckResponse>, Status> {
        self.check_with(&[]).await
    }

    async fn used(&self, policy: &str, key: &ratewarden_core::Key) -> u64 {
        self.layer
            .limiter()
            .status(policy, key)
            .await
            .expect("a status")
            .decision
            .used
    }
}

impl Drop for Grpc {
    fn drop(&mut self) {
        self.server.abort();
    }
}

fn metadata<'a>(status: &'a Status, name: &str) -> Option<&'a str> {
    status
        .metadata()
        .get(name)
        .map(|v| v.to_str().expect("ASCII metadata"))
}

#[track_caller]
fn refused(result: Result<tonic::Response<HealthCheckResponse>, Status>, code: Code) -> Status {
    match result {
        Ok(response) => panic!(
            "expected {code:?}, the call passed: {:?}",
            response.metadata()
        ),
        Err(status) => {
            assert_eq!(status.code(), code, "{status:?}");
            status
        }
    }
}

#[tokio::test]
async fn allowed_calls_succeed_and_carry_the_ratelimit_metadata() {
    let clock = clock();
    let grpc = Grpc::start(build(layer_of(
        &clock,
        [per_minute("rpc", 2, [KeyPart::ClientIp])],
    )))
    .await;
    for remaining in [1, 0] {
        let response = grpc.check().await.expect("an allowed call");
        assert_eq!(response.get_ref().status(), ServingStatus::Serving);
        let md = response.metadata();
        assert_eq!(
            md.get("ratelimit-policy").map(|v| v.to_str().ok()),
            Some(Some(r#""rpc";q=2;w=60"#))
        );
        let expected = format!(r#""rpc";r={remaining};t=60"#);
        assert_eq!(
            md.get("ratelimit").and_then(|v| v.to_str().ok()),
            Some(expected.as_str())
        );
        assert_eq!(
            md.get("x-ratelimit-remaining")
                .and_then(|v| v.to_str().ok()),
            Some(remaining.to_string().as_str())
        );
    }
    // The key is the TCP peer tonic reports (`TcpConnectInfo`).
    assert_eq!(grpc.used("rpc", &key("127.0.0.1")).await, 2);
}

#[tokio::test]
async fn the_call_over_the_limit_is_resource_exhausted_with_retry_after_and_retry_info() {
    let clock = clock();
    let grpc = Grpc::start(build(layer_of(
        &clock,
        [per_minute("rpc", 2, [KeyPart::ClientIp])],
    )))
    .await;
    grpc.check().await.expect("allowed");
    grpc.check().await.expect("allowed");
    clock.advance(Duration::from_millis(500));
    let status = refused(grpc.check().await, Code::ResourceExhausted);
    assert_eq!(
        status.message(),
        "the request is over the quota of policy 'rpc'"
    );
    assert_eq!(
        metadata(&status, "retry-after"),
        Some("60"),
        "59.5 s rounded up"
    );
    assert_eq!(metadata(&status, "ratelimit"), Some(r#""rpc";r=0;t=60"#));
    let retry = status.get_details_retry_info().expect("a RetryInfo detail");
    assert_eq!(retry.retry_delay, Some(Duration::from_millis(59_500)));
    assert_eq!(
        grpc.used("rpc", &key("127.0.0.1")).await,
        2,
        "the refused call was not counted"
    );

    clock.advance(Duration::from_millis(59_500));
    grpc.check()
        .await
        .expect("allowed again in the next window");
}

#[tokio::test]
async fn a_metadata_header_key_counts_each_tenant_apart() {
    let clock = clock();
    let grpc = Grpc::start(build(layer_of(
        &clock,
        [per_minute("per-tenant", 1, [header("x-tenant")])],
    )))
    .await;
    grpc.check_with(&[("x-tenant", "acme")])
        .await
        .expect("acme's first call");
    let status = refused(
        grpc.check_with(&[("x-tenant", "acme")]).await,
        Code::ResourceExhausted,
    );
    assert!(status.message().contains("'per-tenant'"), "{status:?}");
    grpc.check_with(&[("x-tenant", "globex")])
        .await
        .expect("another tenant");
    assert_eq!(grpc.used("per-tenant", &key("acme")).await, 1);
}

#[tokio::test]
async fn a_path_policy_applies_only_to_the_grpc_methods_it_matches() {
    let clock = clock();
    let policies = [
        per_minute("per-method", 1, [KeyPart::Path]).path("/grpc.health.v1.Health/*"),
        per_minute("elsewhere", 0, [literal("all")]).path("/other.Service/*"),
    ];
    let grpc = Grpc::start(build(layer_of(&clock, policies))).await;
    let response = grpc.check().await.expect("the first Check");
    assert_eq!(
        response
            .metadata()
            .get("ratelimit-policy")
            .and_then(|v| v.to_str().ok()),
        Some(r#""per-method";q=1;w=60"#),
        "`elsewhere` does not apply"
    );
    let status = refused(grpc.check().await, Code::ResourceExhausted);
    assert!(status.message().contains("'per-method'"), "{status:?}");
    assert_eq!(grpc.used("per-method", &key(CHECK)).await, 1);
}

#[tokio::test]
async fn a_fail_closed_policy_on_a_failing_store_is_unavailable() {
    let clock = clock();
    let layer = layer_of(
        &clock,
        [per_minute("rpc", 5, [KeyPart::ClientIp]).fail_closed()],
    )
    .store(FailingStore::unavailable());
    let grpc = Grpc::start(build(layer)).await;
    let status = refused(grpc.check().await, Code::Unavailable);
    assert!(
        status.message().contains("store is unavailable"),
        "{status:?}"
    );
}

#[tokio::test]
async fn a_fail_open_policy_on_a_failing_store_lets_calls_through_without_metadata() {
    let clock = clock();
    let layer = layer_of(
        &clock,
        [per_minute("rpc", 1, [KeyPart::ClientIp]).fail_open()],
    )
    .store(FailingStore::unavailable());
    let grpc = Grpc::start(build(layer)).await;
    for _ in 0..3 {
        let response = grpc.check().await.expect("failed open");
        assert!(response.metadata().get("ratelimit").is_none());
        assert!(response.metadata().get("x-ratelimit-remaining").is_none());
    }
}

fn per_user() -> PolicyBuilder {
    PolicyBuilder::fixed_window("per-user")
        .limit(5)
        .per(MINUTE)
        .key_fn(|parts: &http::request::Parts| {
            parts.headers.get("x-user").map(|v| v.as_bytes().to_vec())
        })
}

#[tokio::test]
async fn a_missing_key_is_invalid_argument_naming_the_policy() {
    let clock = clock();
    let grpc = Grpc::start(build(layer_of(&clock, [per_user()]))).await;
    let status = refused(grpc.check().await, Code::InvalidArgument);
    assert_eq!(
        status.message(),
        "the request has no key for policy 'per-user': the key function found no key"
    );
    grpc.check_with(&[("x-user", "u1")])
        .await
        .expect("a call with a user");
}

#[tokio::test]
async fn a_missing_key_refused_with_401_or_403_is_unauthenticated_or_permission_denied() {
    let clock = clock();
    let unauthorized = layer_of(&clock, [per_user()])
        .on_missing_key(MissingKey::Refuse(http::StatusCode::UNAUTHORIZED));
    let grpc = Grpc::start(build(unauthorized)).await;
    refused(grpc.check().await, Code::Unauthenticated);
    let forbidden = layer_of(&clock, [per_user()])
        .on_missing_key(MissingKey::Refuse(http::StatusCode::FORBIDDEN));
    let grpc = Grpc::start(build(forbidden)).await;
    refused(grpc.check().await, Code::PermissionDenied);
    let skip = layer_of(&clock, [per_user()]).on_missing_key(MissingKey::Skip);
    let grpc = Grpc::start(build(skip)).await;
    grpc.check().await.expect("skipped");
}

#[tokio::test]
async fn a_call_that_can_never_pass_has_no_retry_after() {
    let clock = clock();
    let grpc = Grpc::start(build(layer_of(
        &clock,
        [per_minute("closed-door", 0, [literal("all")])],
    )))
    .await;
    let status = refused(grpc.check().await, Code::ResourceExhausted);
    assert!(status.message().contains("can never pass"), "{status:?}");
    assert_eq!(metadata(&status, "retry-after"), None);
}

/// A call that can never pass (limit 0) carries no `RetryInfo`: one
/// without a delay tells gRPC clients (AIP-193) the call is retryable.
/// Like the HTTP answer's missing `Retry-After`, it is left out when
/// waiting never helps.
#[tokio::test]
async fn a_call_that_can_never_pass_carries_no_retry_info() {
    let clock = clock();
    let grpc = Grpc::start(build(layer_of(
        &clock,
        [per_minute("closed-door", 0, [literal("all")])],
    )))
    .await;
    let status = refused(grpc.check().await, Code::ResourceExhausted);
    let retry = status.get_details_retry_info();
    assert!(
        retry.is_none(),
        "waiting never helps, yet the status carries {retry:?}"
    );
}

#[tokio::test]
async fn grpc_limits_hold_on_sqlite_too() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let store = Arc::new(
        ratewarden_sqlite::SqliteStore::open(
            dir.path().join("limits.db"),
            ratewarden_sqlite::SqliteOptions::default(),
        )
        .expect("a store"),
    );
    let clock = clock();
    let layer = layer_of(&clock, [per_minute("rpc", 1, [KeyPart::ClientIp])])
        .store(Arc::clone(&store) as _);
    let grpc = Grpc::start(build(layer)).await;
    grpc.check().await.expect("allowed");
    refused(grpc.check().await, Code::ResourceExhausted);
    drop(grpc);
    store.close().await;
}
