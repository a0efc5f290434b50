//! `GET /healthz` (the process answers) and `GET /readyz` (the store
//! answers and the configuration is loaded; 503 problem details with the
//! reason and `Retry-After` otherwise), for load balancers and
//! Kubernetes probes; `/healthcheck`, envoyproxy/ratelimit's probe, as
//! the reference answers it.

use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::http::problem::ApiError;
use crate::state::AppState;

/// The longest a readiness probe waits for the store.
pub const READY_TIMEOUT: Duration = Duration::from_secs(1);

/// 200 `{"status":"ok"}` while the process serves.
pub async fn live() -> Json<serde_json::Value> {
    Json(json!({ "status": "ok" }))
}

/// 200 `{"status":"ready","store":KIND,"policies":N}` when the store
/// answered within [`READY_TIMEOUT`]; 503 problem details saying why
/// when it did not, or when the service is shutting down.
pub async fn ready(State(state): State<AppState>) -> Response {
    if state.stopping.is_cancelled() {
        return ApiError::service_unavailable("the service is shutting down").into_response();
    }
    let store = state.limiter.store().kind();
    match tokio::time::timeout(READY_TIMEOUT, state.limiter.ready()).await {
        Ok(Ok(())) => Json(json!({
            "status": "ready",
            "store": store,
            "policies": state.limiter.policies().len(),
        }))
        .into_response(),
        Ok(Err(e)) => {
            let cause =
                std::error::Error::source(&e).map_or_else(|| e.to_string(), ToString::to_string);
            ApiError::service_unavailable(format!("the {store} store cannot answer: {cause}"))
                .into_response()
        }
        Err(_) => ApiError::service_unavailable(format!(
            "the {store} store did not answer within {} ms",
            READY_TIMEOUT.as_millis()
        ))
        .into_response(),
    }
}

/// envoyproxy/ratelimit's health check, on any method as there: 200 with
/// the body `OK` (`text/plain; charset=utf-8`) while healthy, 500 with an
/// empty body while not. Not healthy once the service is shutting down
/// (the reference fails its check on SIGTERM), while the store does not
/// answer within [`READY_TIMEOUT`] (the reference does so with
/// `REDIS_HEALTH_CHECK_ACTIVE_CONNECTION`, and does not serve at all
/// before Redis first answers), and with `envoy_require_rules` while no
/// rules domain is loaded (`HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED`).
/// gRPC health answers NOT_SERVING in the same cases.
pub async fn healthcheck(State(state): State<AppState>) -> Response {
    let healthy = !state.stopping.is_cancelled()
        && state.envoy.has_required_rules()
        && matches!(
            tokio::time::timeout(READY_TIMEOUT, state.limiter.ready()).await,
            Ok(Ok(()))
        );
    if healthy {
        ([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], "OK").into_response()
    } else {
        StatusCode::INTERNAL_SERVER_ERROR.into_response()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use axum::body::to_bytes;
    use ratewarden_config::KeySource;
    use ratewarden_config::envoy::EnvoyConfig;
    use ratewarden_config::envoy::options::EnvoyOptions;
    use ratewarden_core::{ManualClock, MemoryStore, Store, Timestamp};
    use ratewarden_envoy::RateLimitService;
    use ratewarden_limiter::{FailureMode, Limiter, PolicySet};
    use tokio_util::sync::CancellationToken;

    use super::*;
    use crate::state::Shared;

    fn state(store: Arc<dyn Store>, options: EnvoyOptions) -> AppState {
        let clock = Arc::new(ManualClock::new(Timestamp::from_unix_secs(1_767_225_600)));
        let policies = PolicySet::new([]).expect("an empty set");
        let limiter = Arc::new(Limiter::new(store, clock, policies));
        let envoy = RateLimitService::new(
            Arc::clone(&limiter),
            Arc::new(EnvoyConfig::default()),
            FailureMode::Open,
        )
        .with_options(options);
        AppState::new(Shared {
            limiter,
            envoy: Arc::new(envoy),
            ping_key: KeySource::Header,
            trusted_proxies: ratewarden_http::TrustedProxies::new([]),
            admin_key: None,
            max_body_bytes: 1024,
            stopping: CancellationToken::new(),
        })
    }

    async fn answer(state: &AppState) -> (u16, String) {
        let response = healthcheck(State(state.clone())).await;
        let status = response.status().as_u16();
        let body = to_bytes(response.into_body(), 1024).await.expect("a body");
        (status, String::from_utf8_lossy(&body).into_owned())
    }

    /// As the reference fails its check on SIGTERM, so that a load
    /// balancer takes the instance out while it drains.
    #[tokio::test]
    async fn healthcheck_fails_once_the_service_is_shutting_down() {
        let state = state(Arc::new(MemoryStore::new()), EnvoyOptions::default());
        assert_eq!(answer(&state).await, (200, "OK".to_owned()));
        state.stopping.cancel();
        assert_eq!(answer(&state).await, (500, String::new()));
    }

    #[tokio::test]
    async fn healthcheck_fails_without_rules_when_rules_are_required() {
        let options = EnvoyOptions {
            require_rules: true,
            ..EnvoyOptions::default()
        };
        let state = state(Arc::new(MemoryStore::new()), options);
        assert_eq!(answer(&state).await, (500, String::new()));
    }
}
