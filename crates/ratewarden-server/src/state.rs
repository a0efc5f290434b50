//! What every handler shares.

use std::sync::Arc;

use ratewarden_config::{AdminKey, KeySource};
use ratewarden_envoy::RateLimitService;
use ratewarden_http::TrustedProxies;
use ratewarden_limiter::Limiter;
use tokio_util::sync::CancellationToken;

/// Shared application state: one `Arc`, so the per-request clone axum
/// makes is a single reference-count increment.
#[derive(Debug, Clone)]
pub struct AppState(Arc<Shared>);

impl AppState {
    /// Wraps the shared parts.
    pub fn new(shared: Shared) -> AppState {
        AppState(Arc::new(shared))
    }
}

impl std::ops::Deref for AppState {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.0
    }
}

/// What [`AppState`] holds. Handlers decide through [`Shared::limiter`]
/// only; none touches the store.
#[derive(Debug)]
pub struct Shared {
    /// The decision layer (its policy set follows reloads).
    pub limiter: Arc<Limiter>,
    /// Envoy's rate limit service (`POST /json`; the same one gRPC
    /// serves), deciding through [`Shared::limiter`].
    pub envoy: Arc<RateLimitService>,
    /// Where GET /ping takes its key from.
    pub ping_key: KeySource,
    /// The proxies whose `X-Forwarded-For` is believed (`--trusted-proxy`):
    /// `/ping`'s `forwarded` key, `/v1/authorize`'s client address.
    pub trusted_proxies: TrustedProxies,
    /// `None`: every admin action is refused (fail closed).
    pub admin_key: Option<AdminKey>,
    /// Largest accepted request body, in bytes.
    pub max_body_bytes: usize,
    /// Cancelled when the service starts shutting down (`/readyz` then
    /// answers 503).
    pub stopping: CancellationToken,
}
