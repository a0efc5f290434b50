//! The headers of an answer, which Envoy's filter adds to the client's
//! response: always the IETF `RateLimit-Policy` and `RateLimit` fields,
//! one item per limit; with `envoy_limit_headers`, also envoyproxy/
//! ratelimit's `RateLimit-Limit`, `-Remaining` and `-Reset` of the most
//! restrictive descriptor.

use envoy_types::pb::envoy::config::core::v3::HeaderValue;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{Code, DescriptorStatus};
use ratewarden_config::envoy::options::LimitHeaders;
use ratewarden_http::fields::{FieldItem, field_values};

/// The most items `RateLimit-Policy` and `RateLimit` carry.
const MAX_HEADER_ITEMS: usize = 16;

/// The longest item name in those headers, in bytes.
const MAX_HEADER_NAME: usize = 128;

/// `RateLimit-Policy` and `RateLimit`, one item per name (the most
/// restrictive status when several descriptors share a rule's name). At
/// most [`MAX_HEADER_ITEMS`] items, the most restrictive ones, with
/// names cut to [`MAX_HEADER_NAME`] bytes: a thousand descriptors with
/// long values would otherwise make headers of megabytes, which Envoy
/// refuses.
pub(crate) fn header_values(items: Vec<FieldItem<'_>>) -> Vec<HeaderValue> {
    let mut unique: Vec<FieldItem<'_>> = Vec::with_capacity(items.len());
    for item in items {
        match unique.iter_mut().find(|u| u.name == item.name) {
            Some(u)
                if (item.remaining, std::cmp::Reverse(item.reset_secs))
                    < (u.remaining, std::cmp::Reverse(u.reset_secs)) =>
            {
                *u = item;
            }
            Some(_) => {}
            None => unique.push(item),
        }
    }
    if unique.len() > MAX_HEADER_ITEMS {
        unique.sort_by_key(|u| (u.remaining, std::cmp::Reverse(u.reset_secs)));
        unique.truncate(MAX_HEADER_ITEMS);
    }
    for u in &mut unique {
        if u.name.len() > MAX_HEADER_NAME {
            let mut end = MAX_HEADER_NAME;
            while !u.name.is_char_boundary(end) {
                end -= 1;
            }
            u.name = &u.name[..end];
        }
    }
    let Some((policy, limit)) = field_values(unique) else {
        return Vec::new();
    };
    vec![
        HeaderValue {
            key: "RateLimit-Policy".into(),
            value: policy,
            ..HeaderValue::default()
        },
        HeaderValue {
            key: "RateLimit".into(),
            value: limit,
            ..HeaderValue::default()
        },
    ]
}

/// envoyproxy/ratelimit's three headers, named by `names`, of the
/// descriptor it picks: among the statuses with a limit, the first with
/// the least `limit_remaining`, unless a status is OVER_LIMIT, when the
/// last such one is taken (the reference's loop in
/// `service/ratelimit.go`). The limit is its `requests_per_unit`, the
/// remaining its `limit_remaining`, the reset its
/// `duration_until_reset` in whole seconds (for a fixed window, as the
/// reference computes it, the time to the window's end). Nothing when no
/// status has a limit.
pub(crate) fn limit_headers(
    names: &LimitHeaders,
    statuses: &[DescriptorStatus],
) -> Vec<HeaderValue> {
    let mut chosen: Option<&DescriptorStatus> = None;
    let mut least = u32::MAX;
    for status in statuses {
        if status.current_limit.is_some() && status.limit_remaining < least {
            chosen = Some(status);
            least = status.limit_remaining;
        }
        if status.code == Code::OverLimit as i32 {
            chosen = Some(status);
            least = 0;
        }
    }
    let Some(status) = chosen else {
        return Vec::new();
    };
    let Some(limit) = &status.current_limit else {
        return Vec::new();
    };
    let reset = status.duration_until_reset.map_or(0, |d| d.seconds.max(0));
    let header = |key: &str, value: String| HeaderValue {
        key: key.to_owned(),
        value,
        ..HeaderValue::default()
    };
    vec![
        header(&names.limit, limit.requests_per_unit.to_string()),
        header(&names.remaining, status.limit_remaining.to_string()),
        header(&names.reset, reset.to_string()),
    ]
}

#[cfg(test)]
mod tests {
    use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::RateLimit;
    use envoy_types::pb::google::protobuf::Duration as ProtoDuration;

    use super::*;

    fn status(code: Code, limit: Option<u32>, remaining: u32, reset: i64) -> DescriptorStatus {
        DescriptorStatus {
            code: code as i32,
            current_limit: limit.map(|n| RateLimit {
                requests_per_unit: n,
                ..RateLimit::default()
            }),
            limit_remaining: remaining,
            duration_until_reset: Some(ProtoDuration {
                seconds: reset,
                nanos: 0,
            }),
            ..DescriptorStatus::default()
        }
    }

    fn values(statuses: &[DescriptorStatus]) -> Vec<(String, String)> {
        limit_headers(&LimitHeaders::default(), statuses)
            .into_iter()
            .map(|h| (h.key, h.value))
            .collect()
    }

    #[test]
    fn the_most_restrictive_descriptor_is_the_least_remaining_or_the_last_over_limit() {
        let pairs = |l: &str, r: &str, t: &str| {
            vec![
                ("RateLimit-Limit".to_owned(), l.to_owned()),
                ("RateLimit-Remaining".to_owned(), r.to_owned()),
                ("RateLimit-Reset".to_owned(), t.to_owned()),
            ]
        };
        // Unlimited and unmatched descriptors (no limit) never count.
        assert_eq!(
            values(&[
                status(Code::Ok, None, u32::MAX, 0),
                status(Code::Ok, Some(10), 7, 30),
                status(Code::Ok, Some(100), 3, 50),
                status(Code::Ok, Some(5), 3, 10),
            ]),
            pairs("100", "3", "50"),
            "the first with the least remaining"
        );
        assert_eq!(
            values(&[
                status(Code::OverLimit, Some(1), 0, 20),
                status(Code::Ok, Some(10), 0, 5),
                status(Code::OverLimit, Some(2), 0, 40),
                status(Code::Ok, Some(10), 4, 5),
            ]),
            pairs("2", "0", "40"),
            "the last over the limit"
        );
        assert!(values(&[status(Code::Ok, None, 0, 0)]).is_empty());
        let custom = LimitHeaders::new(
            "X-RateLimit-Limit",
            "X-RateLimit-Remaining",
            "X-RateLimit-Reset",
        )
        .unwrap();
        let keys: Vec<String> = limit_headers(&custom, &[status(Code::Ok, Some(1), 1, 1)])
            .into_iter()
            .map(|h| h.key)
            .collect();
        assert_eq!(
            keys,
            [
                "X-RateLimit-Limit",
                "X-RateLimit-Remaining",
                "X-RateLimit-Reset"
            ]
        );
    }
}
