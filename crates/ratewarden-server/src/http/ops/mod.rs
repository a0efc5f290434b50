//! The operator's routes: `GET /metrics` (Prometheus), `GET /healthz`,
//! `GET /readyz`, envoyproxy/ratelimit's `/healthcheck` and the live
//! `GET /dashboard`. None needs a key; the
//! dashboard's most-denied keys need the admin key.
//!
//! - [`metrics`]: the Prometheus recorder (installed once per process)
//!   and its exposition.
//! - [`health`]: liveness and readiness.
//! - [`dashboard`]: the static page and the JSON it reads.

pub mod dashboard;
pub mod health;
pub mod metrics;

use axum::Router;
use axum::routing::get;

use crate::state::AppState;

/// The operator's routes (not in the OpenAPI document of the JSON API).
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/metrics", get(metrics::handle))
        .route("/healthz", get(health::live))
        .route("/readyz", get(health::ready))
        .route("/healthcheck", axum::routing::any(health::healthcheck))
        .route("/dashboard", get(dashboard::page))
        .route("/dashboard/data", get(dashboard::data))
}
