//! `GET /dashboard`: a static page (no build step, nothing fetched from
//! elsewhere) that polls `GET /dashboard/data` every 2 seconds and draws
//! the decisions per policy, the store's latency and, for a client that
//! sends the admin key, the most-denied keys.
//!
//! The data is the decision layer's [`ratewarden_limiter::activity`]:
//! buckets of 10 seconds over the last 5 minutes, the last one still
//! running.

use std::net::SocketAddr;

use axum::Json;
use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use ratewarden_core::{Mode, Timestamp};
use ratewarden_limiter::activity::{BUCKET, Bucket, Counts};
use serde::Serialize;

use crate::http::admin;
use crate::http::problem::ApiError;
use crate::state::AppState;

/// The page, served as is.
const PAGE: &str = include_str!("dashboard.html");

/// How many most-denied keys the data lists.
pub const TOP_KEYS: usize = 20;

/// The page may run its own inline script and style and talk to this
/// origin only.
const CSP: &str = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; \
connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// `GET /dashboard`: the HTML page.
pub async fn page() -> Response {
    (
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/html; charset=utf-8"),
            ),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
            (
                header::CONTENT_SECURITY_POLICY,
                HeaderValue::from_static(CSP),
            ),
            (
                header::X_CONTENT_TYPE_OPTIONS,
                HeaderValue::from_static("nosniff"),
            ),
            (
                header::REFERRER_POLICY,
                HeaderValue::from_static("no-referrer"),
            ),
        ],
        PAGE,
    )
        .into_response()
}

/// What `GET /dashboard/data` answers.
#[derive(Debug, Serialize)]
pub struct Data {
    /// The server's time, RFC 3339 UTC.
    pub now: String,
    /// The length of a bucket, in seconds.
    pub bucket_seconds: u64,
    /// The kind of store.
    pub store: &'static str,
    /// Whether the last store call succeeded.
    pub store_ready: bool,
    /// Every policy in force, in configuration order.
    pub policies: Vec<PolicyData>,
    /// The store's latency per bucket, oldest first.
    pub store_latency: Vec<LatencyPoint>,
    /// The most-denied keys, most first; `null` without the admin key.
    pub top_denied: Option<Vec<TopKey>>,
}

/// One policy's figures.
#[derive(Debug, Serialize)]
pub struct PolicyData {
    /// The name.
    pub name: String,
    /// The algorithm.
    pub algorithm: &'static str,
    /// `enforce` or `shadow`.
    pub mode: &'static str,
    /// Units per window.
    pub limit: u64,
    /// The window, in seconds (rounded up).
    pub window_seconds: u64,
    /// The sums over `series`.
    pub totals: CountsData,
    /// Per bucket, oldest first.
    pub series: Vec<CountsPoint>,
}

/// Decisions.
#[derive(Debug, Default, Serialize)]
pub struct CountsData {
    /// Allowed.
    pub allowed: u64,
    /// Denied (or never allowed).
    pub denied: u64,
    /// Shadow-denied (let through).
    pub shadow_denied: u64,
    /// Allowed without the store (fail open).
    pub failed_open: u64,
}

impl From<Counts> for CountsData {
    fn from(c: Counts) -> CountsData {
        CountsData {
            allowed: c.allowed,
            denied: c.denied,
            shadow_denied: c.shadow_denied,
            failed_open: c.failed_open,
        }
    }
}

/// One bucket of a policy.
#[derive(Debug, Serialize)]
pub struct CountsPoint {
    /// When the bucket started, RFC 3339 UTC.
    pub at: String,
    /// Its decisions.
    #[serde(flatten)]
    pub counts: CountsData,
}

/// One bucket of the store's latency.
#[derive(Debug, Serialize)]
pub struct LatencyPoint {
    /// When the bucket started, RFC 3339 UTC.
    pub at: String,
    /// Store calls.
    pub decisions: u64,
    /// Their mean, in milliseconds.
    pub mean_ms: f64,
    /// The slowest, in milliseconds.
    pub max_ms: f64,
}

/// A key among the most denied.
#[derive(Debug, Serialize)]
pub struct TopKey {
    /// The policy that denied it.
    pub policy: String,
    /// The key: its parts, each cut to 64 characters and escaped
    /// ([`ratewarden_limiter::for_log`]), joined by ` · `.
    pub key: String,
    /// Denials counted: an estimate, at least the true count.
    pub denied: u64,
    /// At most the true count (`denied` less the count the key inherited
    /// when it replaced another in the table).
    pub at_least: u64,
}

/// `GET /dashboard/data`: the figures. The most-denied keys only with
/// the admin key (`X-Admin-Key`); a wrong key is 403 (and counted as a
/// refused admin request).
///
/// # Errors
/// 403 problem details when an `X-Admin-Key` is sent and is not the key.
pub async fn data(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let top = if headers.contains_key("x-admin-key") {
        admin::authorize(&state, &headers, peer, "dashboard keys")?;
        true
    } else {
        false
    };
    let limiter = &state.limiter;
    let now = limiter.now();
    let buckets = limiter.activity().buckets(now);
    let policies = limiter
        .policies()
        .iter()
        .map(|def| policy_data(def, &buckets))
        .collect();
    let store_latency = buckets
        .iter()
        .map(|b| LatencyPoint {
            at: rfc3339(b.at),
            decisions: b.store.decisions,
            mean_ms: b.store.mean_ms,
            max_ms: b.store.max_ms,
        })
        .collect();
    let top_denied = top.then(|| {
        limiter
            .activity()
            .most_denied(TOP_KEYS)
            .into_iter()
            .map(|k| TopKey {
                policy: k.policy.to_string(),
                key: k
                    .key
                    .parts()
                    .map(ratewarden_limiter::for_log)
                    .collect::<Vec<_>>()
                    .join(" · "),
                denied: k.denied,
                at_least: k.denied - k.overestimate,
            })
            .collect()
    });
    let data = Data {
        now: rfc3339(now),
        bucket_seconds: BUCKET.as_secs(),
        store: limiter.store().kind(),
        store_ready: !limiter.store_failing(),
        policies,
        store_latency,
        top_denied,
    };
    Ok((
        [(header::CACHE_CONTROL, HeaderValue::from_static("no-store"))],
        Json(data),
    )
        .into_response())
}

fn policy_data(def: &ratewarden_limiter::PolicyDef, buckets: &[Bucket]) -> PolicyData {
    let name = def.name();
    let mut totals = Counts::default();
    let series = buckets
        .iter()
        .map(|b| {
            let counts = b.policies.get(name).copied().unwrap_or_default();
            totals = totals.plus(counts);
            CountsPoint {
                at: rfc3339(b.at),
                counts: counts.into(),
            }
        })
        .collect();
    let quota = &def.policy.quota;
    PolicyData {
        name: name.to_owned(),
        algorithm: def.policy.algorithm.as_str(),
        mode: match def.policy.mode {
            Mode::Enforce => "enforce",
            Mode::Shadow => "shadow",
        },
        limit: quota.limit(),
        window_seconds: ratewarden_core::ceil_secs(quota.window()),
        totals: totals.into(),
        series,
    }
}

/// `2026-01-01T00:00:00Z`.
fn rfc3339(t: Timestamp) -> String {
    use time::format_description::well_known::Rfc3339;
    let nanos = i128::from(t.as_unix_nanos());
    time::OffsetDateTime::from_unix_timestamp_nanos(nanos - nanos % 1_000_000_000)
        .ok()
        .and_then(|dt| dt.format(&Rfc3339).ok())
        .unwrap_or_default()
}
