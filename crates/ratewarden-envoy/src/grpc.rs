//! The gRPC server: `envoy.service.ratelimit.v3.RateLimitService` and
//! `grpc.health.v1.Health`, which reports `NOT_SERVING` while the store
//! cannot answer (checked every [`HEALTH_INTERVAL`]), and with
//! `envoy_require_rules` while no rules domain is loaded.

use std::sync::Arc;
use std::time::Duration;

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server::{
    RateLimitService as RlsTrait, RateLimitServiceServer,
};
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tonic::transport::server::TcpIncoming;
use tonic::{Request, Response, Status};
use tonic_health::ServingStatus;

use crate::service::{RateLimitService, ServiceError};

/// How often gRPC health asks the store whether it can answer.
pub const HEALTH_INTERVAL: Duration = Duration::from_secs(1);

/// The service as tonic calls it.
#[derive(Debug, Clone)]
pub struct Grpc(pub Arc<RateLimitService>);

#[tonic::async_trait]
impl RlsTrait for Grpc {
    async fn should_rate_limit(
        &self,
        request: Request<RateLimitRequest>,
    ) -> Result<Response<RateLimitResponse>, Status> {
        self.0
            .should_rate_limit(request.get_ref())
            .await
            .map(Response::new)
            .map_err(status_of)
    }
}

/// The gRPC status of a [`ServiceError`].
pub fn status_of(e: ServiceError) -> Status {
    match e {
        ServiceError::InvalidArgument(message) => Status::invalid_argument(message),
        // The decision layer has logged store errors (summarised).
        ServiceError::Unavailable(_) => Status::unavailable("the rate limit store is unavailable"),
        ServiceError::Internal(cause) => {
            if !matches!(cause, ratewarden_limiter::CheckError::Failed(_)) {
                tracing::error!(error = %cause, "rate limit decision failed");
            }
            Status::internal("the rate limit store failed")
        }
    }
}

/// Serves Envoy's rate limit service and gRPC health on `listener` until
/// `stop`, then lets in-flight calls finish.
///
/// # Errors
/// The transport's error, if serving fails.
pub async fn serve(
    listener: TcpListener,
    service: Arc<RateLimitService>,
    stop: CancellationToken,
) -> Result<(), tonic::transport::Error> {
    let (reporter, health) = tonic_health::server::health_reporter();
    let watching = tokio::spawn(watch_health(Arc::clone(&service), reporter, stop.clone()));
    let incoming = TcpIncoming::from(listener).with_nodelay(Some(true));
    let served = tonic::transport::Server::builder()
        .add_service(health)
        .add_service(RateLimitServiceServer::new(Grpc(service)))
        .serve_with_incoming_shutdown(incoming, stop.cancelled_owned())
        .await;
    watching.abort();
    served
}

/// Keeps the health of `""` (the server) and of the rate limit service
/// at `SERVING` while the store answers (and, with `envoy_require_rules`,
/// a rules domain is loaded), `NOT_SERVING` otherwise.
async fn watch_health(
    service: Arc<RateLimitService>,
    reporter: tonic_health::server::HealthReporter,
    stop: CancellationToken,
) {
    let mut last: Option<bool> = None;
    loop {
        let ready = service.limiter().ready().await;
        let rules = service.has_required_rules();
        let up = ready.is_ok() && rules;
        if last != Some(up) {
            let status = if up {
                ServingStatus::Serving
            } else {
                ServingStatus::NotServing
            };
            match &ready {
                Ok(()) if rules => tracing::info!("gRPC health: SERVING"),
                Ok(()) => tracing::warn!(
                    "gRPC health: NOT_SERVING (no Envoy rules domain is loaded and \
                     envoy_require_rules is set)"
                ),
                Err(e) => {
                    tracing::warn!(error = %e, "gRPC health: NOT_SERVING (the store cannot answer)")
                }
            }
            reporter.set_service_status("", status).await;
            reporter
                .set_service_status("envoy.service.ratelimit.v3.RateLimitService", status)
                .await;
            last = Some(up);
        }
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(HEALTH_INTERVAL) => {}
        }
    }
}
