//! `GET /ping`: the fixed-window route of seed A (docs/semantics.md), the
//! policy `ping`.

use std::net::SocketAddr;

use axum::extract::{ConnectInfo, Request, State};
use axum::response::Response;
use ratewarden_core::algorithm::fixed_window;
use ratewarden_core::{Audit, Decision, Key, Policy, Timestamp, ceil_secs};
use serde::Serialize;

use ratewarden_limiter::Check;

use crate::http::key_source::client_key;
use crate::http::problem::ApiError;
use crate::state::AppState;

/// The seed route's policy.
pub const PING: &str = "ping";

/// The body of `GET /ping` and `GET /status`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct WindowUsage {
    /// The client key (invalid UTF-8 replaced by U+FFFD).
    pub key: String,
    /// Attempts in the current window, refused ones included.
    pub count: u64,
    /// Requests allowed per window.
    pub limit: u64,
    /// Requests that can still pass in this window.
    pub remaining: u64,
    /// The current window's start, UTC `YYYY-MM-DDTHH:MM:SSZ`.
    pub window_start: String,
    /// The window length, in seconds.
    pub window_seconds: u64,
    /// Seconds until the window ends, rounded up.
    pub reset_after: u64,
}

impl WindowUsage {
    /// The usage of `key` under `policy` as `decision` reports it at `now`.
    pub fn new(key: &[u8], policy: &Policy, decision: &Decision, now: Timestamp) -> WindowUsage {
        let k = fixed_window::window_index(&policy.quota, now);
        WindowUsage {
            key: String::from_utf8_lossy(key).into_owned(),
            count: decision.used,
            limit: decision.limit,
            remaining: decision.remaining,
            window_start: ratewarden_core::utc::seconds(fixed_window::window_start(
                &policy.quota,
                k,
            )),
            window_seconds: ceil_secs(policy.quota.window()),
            reset_after: ceil_secs(decision.reset_after),
        }
    }
}

/// Counts the request against its client key; 200 or 429.
#[utoipa::path(
    get,
    path = "/ping",
    operation_id = "ping",
    tag = "seed",
    params(("X-Client-Key" = Option<String>, Header, max_length = 4096, description = "The client key (any bytes, 4096 at most; 127.0.0.1 when missing or empty), unless --ping-key says otherwise")),
    responses(
        (status = 200, description = "Allowed and counted; the rate-limit headers", body = WindowUsage),
        (status = 400, description = "The client key is longer than 4096 bytes", body = crate::http::problem::Problem, content_type = "application/problem+json"),
        (status = 429, description = "Over the limit: type …rate-limit-exceeded, Retry-After", body = crate::http::problem::Problem, content_type = "application/problem+json"),
        (status = 503, description = "The store is unavailable and the policy fails closed", body = crate::http::problem::Problem, content_type = "application/problem+json"),
    )
)]
pub async fn handle(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    // The request itself rather than axum's `HeaderMap` extractor, which
    // copies every header.
    request: Request,
) -> Result<Response, ApiError> {
    let headers = request.headers();
    let raw = client_key(&state.ping_key, &state.trusted_proxies, headers, peer);
    let key = Key::single(&raw)
        .map_err(|e| ApiError::bad_request(format!("the client key is not usable: {e}")))?;
    let check = Check {
        audit: Some(Audit { path: "/ping" }),
        ..Check::one(PING, &key)
    };
    let outcome = state.limiter.check(&[check]).await?;
    let result = outcome
        .results
        .first()
        .ok_or_else(|| ApiError::internal(&"no result"))?;
    let policy = &result.policy.policy;
    let body = WindowUsage::new(&raw, policy, &result.decision, outcome.now);
    Ok(super::limited(&outcome, body, || {
        format!(
            "{} for key '{}'.",
            super::limit_text(policy),
            raw.escape_ascii()
        )
    }))
}
