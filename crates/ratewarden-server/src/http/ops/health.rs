//! `GET /healthz` (the process answers) and `GET /readyz` (the store
//! answers and the configuration is loaded; 503 problem details with the
//! reason and `Retry-After` otherwise), for load balancers and
//! Kubernetes probes.

use std::time::Duration;

use axum::Json;
use axum::extract::State;
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
