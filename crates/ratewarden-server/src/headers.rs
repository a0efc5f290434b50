//! The rate-limit response headers (SPEC section 3, issue "seed service"):
//! the IETF draft's `RateLimit-Policy` and `RateLimit`, and the widely
//! used `X-RateLimit-*` trio. All times are whole seconds, rounded up.

use axum::http::{HeaderName, HeaderValue};
use ratewarden_core::{Decision, Policy, ceil_secs};

/// `RateLimit-Policy: "<name>";q=<limit>;w=<window secs>`,
/// `RateLimit: "<name>";r=<remaining>;t=<secs until reset>`,
/// `X-RateLimit-Limit`, `X-RateLimit-Remaining`, `X-RateLimit-Reset`
/// (seconds until reset).
pub fn rate_limit_headers(policy: &Policy, decision: &Decision) -> [(HeaderName, HeaderValue); 5] {
    let reset = ceil_secs(decision.reset_after);
    let window = ceil_secs(policy.quota.window());
    let value =
        |s: String| HeaderValue::try_from(s).unwrap_or_else(|_| HeaderValue::from_static(""));
    [
        (
            HeaderName::from_static("ratelimit-policy"),
            value(format!(
                "\"{}\";q={};w={window}",
                policy.name, decision.limit
            )),
        ),
        (
            HeaderName::from_static("ratelimit"),
            value(format!(
                "\"{}\";r={};t={reset}",
                policy.name, decision.remaining
            )),
        ),
        (
            HeaderName::from_static("x-ratelimit-limit"),
            HeaderValue::from(decision.limit),
        ),
        (
            HeaderName::from_static("x-ratelimit-remaining"),
            HeaderValue::from(decision.remaining),
        ),
        (
            HeaderName::from_static("x-ratelimit-reset"),
            HeaderValue::from(reset),
        ),
    ]
}
