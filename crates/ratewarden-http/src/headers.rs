//! The rate-limit response headers, the same from every interface: the
//! IETF draft's `RateLimit-Policy` and `RateLimit`
//! (draft-ietf-httpapi-ratelimit-headers-10), one list item per policy,
//! each field one line with its items comma-separated (proxies such as
//! nginx 1.22 keep only a field's first line), the widely used
//! `X-RateLimit-*` trio of the most restrictive policy, and `Retry-After`.
//! All times are whole seconds, rounded up.

use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue};
use ratewarden_core::{Decision, Policy, ceil_secs};
use ratewarden_limiter::{CheckResult, Outcome};

use crate::fields::{FieldItem, push_limit_field, push_policy_field};

/// `RateLimit-Policy` (draft-ietf-httpapi-ratelimit-headers-10).
pub const RATELIMIT_POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
/// `RateLimit` (draft-ietf-httpapi-ratelimit-headers-10).
pub const RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");
/// `X-RateLimit-Limit`: the most restrictive policy's limit.
pub const X_RATELIMIT_LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit");
/// `X-RateLimit-Remaining`: what it still lets through now.
pub const X_RATELIMIT_REMAINING: HeaderName = HeaderName::from_static("x-ratelimit-remaining");
/// `X-RateLimit-Reset`: seconds until it is full again, rounded up.
pub const X_RATELIMIT_RESET: HeaderName = HeaderName::from_static("x-ratelimit-reset");

/// Sets `RateLimit-Policy: "<name>";q=<limit>;w=<window secs>, …` and
/// `RateLimit: "<name>";r=<remaining>;t=<secs until reset>, …` for every
/// `(policy, decision)`, and `X-RateLimit-Limit`, `X-RateLimit-Remaining`,
/// `X-RateLimit-Reset` (seconds until reset) of `most_restrictive`, in
/// `headers` (replacing earlier values). Nothing when there is no item.
pub fn insert_rate_limit_headers<'a>(
    headers: &mut HeaderMap,
    items: impl IntoIterator<Item = (&'a Policy, &'a Decision), IntoIter: Clone>,
    most_restrictive: Option<&Decision>,
) {
    let items = items.into_iter().map(|(policy, decision)| FieldItem {
        name: &policy.name,
        quota: decision.limit,
        window_secs: ceil_secs(policy.quota.window()),
        remaining: decision.remaining,
        reset_secs: ceil_secs(decision.reset_after),
    });
    // One buffer for every value, each header a slice of it: one
    // allocation for the five headers.
    let mut buf = String::with_capacity(160);
    push_policy_field(&mut buf, items.clone());
    let policies_end = buf.len();
    if policies_end == 0 {
        return;
    }
    push_limit_field(&mut buf, items);
    let mut ends = [buf.len(); 4];
    if let Some(d) = most_restrictive {
        let numbers = [d.limit, d.remaining, ceil_secs(d.reset_after)];
        let mut n = itoa::Buffer::new();
        for (end, number) in ends[1..].iter_mut().zip(numbers) {
            buf.push_str(n.format(number));
            *end = buf.len();
        }
    }
    let buf = Bytes::from(buf);
    let value = |from: usize, to: usize| {
        HeaderValue::from_maybe_shared(buf.slice(from..to))
            .unwrap_or_else(|_| HeaderValue::from_static(""))
    };
    headers.insert(RATELIMIT_POLICY, value(0, policies_end));
    headers.insert(RATELIMIT, value(policies_end, ends[0]));
    if most_restrictive.is_some() {
        headers.insert(X_RATELIMIT_LIMIT, value(ends[0], ends[1]));
        headers.insert(X_RATELIMIT_REMAINING, value(ends[1], ends[2]));
        headers.insert(X_RATELIMIT_RESET, value(ends[2], ends[3]));
    }
}

/// Sets the headers of an [`Outcome`] in `headers`: an item per advertised
/// policy ([`Outcome::advertised`]: counted, enforcing; clients must not
/// see or back off from a shadow policy's dry run), the most restrictive
/// of its results when a batch checks one policy for several keys (an
/// item names a policy, not a key), and the trio of the most restrictive
/// of all.
pub fn insert_outcome_headers(headers: &mut HeaderMap, outcome: &Outcome) {
    let mut advertised = outcome.advertised();
    // The common case, one advertised result, without the passes below.
    if let (Some(only), None) = (advertised.next(), advertised.next()) {
        headers.reserve(5);
        let pair = [(&only.policy.policy, &only.decision)];
        insert_rate_limit_headers(headers, pair, Some(&only.decision));
        return;
    }
    let advertised = || outcome.advertised();
    // Batches are small (64 checks at most): a quadratic pass needs no
    // allocation.
    let items = advertised()
        .enumerate()
        .filter(|&(i, r)| {
            !advertised()
                .take(i)
                .any(|seen| seen.policy.name() == r.policy.name())
        })
        .map(|(_, first)| {
            advertised()
                .filter(|r| r.policy.name() == first.policy.name())
                .fold(first, |most, r| {
                    if r.restrictiveness() < most.restrictiveness() {
                        r
                    } else {
                        most
                    }
                })
        })
        .map(|r: &CheckResult| (&r.policy.policy, &r.decision));
    let most = outcome.most_restrictive().map(|r| &r.decision);
    insert_rate_limit_headers(headers, items, most);
}

/// The headers of an [`Outcome`] ([`insert_outcome_headers`]) on their own.
pub fn outcome_headers(outcome: &Outcome) -> HeaderMap {
    let mut headers = HeaderMap::with_capacity(8);
    insert_outcome_headers(&mut headers, outcome);
    headers
}

/// `Retry-After` in whole seconds, rounded up, at least 1 (a wait below a
/// second must not read as "now").
pub fn retry_after_value(wait: Duration) -> HeaderValue {
    HeaderValue::from(ceil_secs(wait).max(1))
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
        let mut headers = HeaderMap::new();
        insert_rate_limit_headers(&mut headers, [(&a, &da), (&b, &db)], Some(&db));
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
        let mut none = HeaderMap::new();
        insert_rate_limit_headers(&mut none, [], None);
        assert!(none.is_empty());
    }
}
