//! The rate-limit response headers: the IETF draft's `RateLimit-Policy`
//! and `RateLimit` (draft-ietf-httpapi-ratelimit-headers-10), one list
//! item per policy, each field one line with its items comma-separated
//! (proxies such as nginx 1.22 keep only a field's first line), and the
//! widely used `X-RateLimit-*` trio of the most restrictive policy. All
//! times are whole seconds, rounded up.

use axum::http::{HeaderName, HeaderValue};
use ratewarden_core::{Decision, Policy, ceil_secs};
use ratewarden_limiter::{CheckResult, Outcome};

/// `RateLimit-Policy: "<name>";q=<limit>;w=<window secs>, …`,
/// `RateLimit: "<name>";r=<remaining>;t=<secs until reset>, …` for every
/// `(policy, decision)`, and `X-RateLimit-Limit`, `X-RateLimit-Remaining`,
/// `X-RateLimit-Reset` (seconds until reset) of `most_restrictive`.
/// Nothing when there is no item.
pub fn rate_limit_headers<'a>(
    items: impl IntoIterator<Item = (&'a Policy, &'a Decision)>,
    most_restrictive: Option<&Decision>,
) -> Vec<(HeaderName, HeaderValue)> {
    let mut policies = String::new();
    let mut limits = String::new();
    for (policy, decision) in items {
        if !policies.is_empty() {
            policies.push_str(", ");
            limits.push_str(", ");
        }
        let name = sf_string(&policy.name);
        let window = ceil_secs(policy.quota.window()).max(1);
        policies.push_str(&format!("{name};q={};w={window}", decision.limit));
        let reset = ceil_secs(decision.reset_after);
        limits.push_str(&format!("{name};r={};t={reset}", decision.remaining));
    }
    let mut headers = Vec::with_capacity(5);
    if policies.is_empty() {
        return headers;
    }
    let value =
        |s: String| HeaderValue::try_from(s).unwrap_or_else(|_| HeaderValue::from_static(""));
    headers.push((HeaderName::from_static("ratelimit-policy"), value(policies)));
    headers.push((HeaderName::from_static("ratelimit"), value(limits)));
    if let Some(d) = most_restrictive {
        headers.extend([
            (
                HeaderName::from_static("x-ratelimit-limit"),
                HeaderValue::from(d.limit),
            ),
            (
                HeaderName::from_static("x-ratelimit-remaining"),
                HeaderValue::from(d.remaining),
            ),
            (
                HeaderName::from_static("x-ratelimit-reset"),
                HeaderValue::from(ceil_secs(d.reset_after)),
            ),
        ]);
    }
    headers
}

/// The headers of an [`Outcome`]: an item per advertised policy
/// ([`Outcome::advertised`]: counted, enforcing; clients must not see or
/// back off from a shadow policy's dry run), the most restrictive of its
/// results when a batch checks one policy for several keys (an item names
/// a policy, not a key), and the trio of the most restrictive of all.
pub fn outcome_headers(outcome: &Outcome) -> Vec<(HeaderName, HeaderValue)> {
    let mut per_policy: Vec<&CheckResult> = Vec::new();
    for r in outcome.advertised() {
        match per_policy
            .iter_mut()
            .find(|seen| seen.policy.name() == r.policy.name())
        {
            Some(seen) if r.restrictiveness() < seen.restrictiveness() => *seen = r,
            Some(_) => {}
            None => per_policy.push(r),
        }
    }
    let most = outcome.most_restrictive().map(|r| &r.decision);
    let items = per_policy.iter().map(|r| (&r.policy.policy, &r.decision));
    rate_limit_headers(items, most)
}

/// `name` as a structured-field string (RFC 8941): quoted, `\` and `"`
/// escaped, other characters outside printable ASCII left out.
fn sf_string(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 2);
    out.push('"');
    for c in name.chars().filter(|c| (' '..='~').contains(c)) {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratewarden_core::{Algorithm, Outcome as Core, Quota};
    use std::time::Duration;

    #[test]
    fn one_line_per_field_with_an_item_per_policy() {
        let a = Policy::new(
            "a",
            Algorithm::Gcra,
            Quota::new(10, Duration::from_millis(1500)).unwrap(),
        );
        let b = Policy::new(
            "b\"x",
            Algorithm::FixedWindow,
            Quota::new(3, Duration::from_secs(60)).unwrap(),
        );
        let d = |remaining, ms| Decision {
            outcome: Core::Allowed,
            limit: 10,
            remaining,
            used: 0,
            reset_after: Duration::from_millis(ms),
        };
        let (da, db) = (d(4, 1), d(2, 42_000));
        let headers = rate_limit_headers([(&a, &da), (&b, &db)], Some(&db));
        let text: Vec<String> = headers
            .iter()
            .map(|(n, v)| format!("{n}: {}", v.to_str().unwrap()))
            .collect();
        assert_eq!(
            text,
            [
                "ratelimit-policy: \"a\";q=10;w=2, \"b\\\"x\";q=10;w=60",
                "ratelimit: \"a\";r=4;t=1, \"b\\\"x\";r=2;t=42",
                "x-ratelimit-limit: 10",
                "x-ratelimit-remaining: 2",
                "x-ratelimit-reset: 42",
            ]
        );
        assert!(rate_limit_headers([], None).is_empty());
    }
}
