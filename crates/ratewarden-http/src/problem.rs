//! RFC 9457 problem details, the body of every error answer, and the
//! denial of a request: type [`QUOTA_EXCEEDED`], the policies that denied
//! it and every check's [`CheckAnswer`], with `Retry-After` and the
//! rate-limit headers.

use http::header::{CONTENT_TYPE, RETRY_AFTER};
use http::{HeaderMap, HeaderValue, StatusCode};
use ratewarden_limiter::Outcome;
use serde::Serialize;
use serde_json::{Map, Value};

use crate::answer::CheckAnswer;
use crate::headers::{insert_outcome_headers, retry_after_value};

/// The URI prefix of ratewarden's problem types.
pub const TYPE_PREFIX: &str = "urn:ratewarden:problem:";

/// The problem type of a denial (draft-ietf-httpapi-ratelimit-headers).
pub const QUOTA_EXCEEDED: &str = "https://iana.org/assignments/http-problem-types#quota-exceeded";

/// The `Content-Type` of problem details.
pub const PROBLEM_JSON: &str = "application/problem+json";

/// An RFC 9457 problem details document as JSON bytes: `type` (`kind`
/// with [`TYPE_PREFIX`] unless it is an absolute URI), `title`, `status`,
/// `detail`, `instance` when given, then `extensions` as members.
pub fn problem_json(
    kind: &str,
    title: &str,
    status: StatusCode,
    detail: &str,
    instance: Option<&str>,
    extensions: &Map<String, Value>,
) -> Vec<u8> {
    #[derive(Serialize)]
    struct Body<'a> {
        r#type: String,
        title: &'a str,
        status: u16,
        detail: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        instance: Option<&'a str>,
        #[serde(flatten)]
        extensions: &'a Map<String, Value>,
    }
    let r#type = if kind.contains(':') {
        kind.to_owned()
    } else {
        format!("{TYPE_PREFIX}{kind}")
    };
    let body = Body {
        r#type,
        title,
        status: status.as_u16(),
        detail,
        instance,
        extensions,
    };
    serde_json::to_vec(&body).unwrap_or_default()
}

/// The names of the policies that denied `outcome`, each once, in order.
pub fn violated_policies(outcome: &Outcome) -> Vec<&str> {
    let mut violated: Vec<&str> = Vec::new();
    for r in outcome.denied_by() {
        if !violated.contains(&r.policy.name()) {
            violated.push(r.policy.name());
        }
    }
    violated
}

/// The `detail` of a denial: "the request is over the quota of policy
/// 'a'", or, when only checks that can never pass denied it, that it can
/// never pass.
pub fn denial_detail(outcome: &Outcome) -> String {
    let violated = violated_policies(outcome);
    let list = violated
        .iter()
        .map(|n| format!("'{n}'"))
        .collect::<Vec<_>>()
        .join(", ");
    let names = match violated.as_slice() {
        [_] => format!("policy {list}"),
        _ => format!("policies {list}"),
    };
    if outcome.denied_by().all(|r| r.never()) {
        format!(
            "the request can never pass {names}: its cost is above the limit (or the GCRA burst)"
        )
    } else {
        format!("the request is over the quota of {names}")
    }
}

/// A request's denial as `(headers, problem details body)`: type
/// [`QUOTA_EXCEEDED`], `status` (429, or the status a proxy asked for),
/// members `violated-policies` and `results` (every check's
/// [`CheckAnswer`]); headers `Content-Type: application/problem+json`,
/// `Retry-After` (seconds, rounded up, at least 1) unless only checks that
/// can never pass denied it, and the rate-limit headers.
pub fn denial(
    outcome: &Outcome,
    status: StatusCode,
    instance: Option<&str>,
) -> (HeaderMap, Vec<u8>) {
    let mut members = Map::new();
    members.insert(
        "violated-policies".into(),
        violated_policies(outcome).into(),
    );
    members.insert(
        "results".into(),
        serde_json::to_value(
            outcome
                .results
                .iter()
                .map(CheckAnswer::new)
                .collect::<Vec<_>>(),
        )
        .unwrap_or_default(),
    );
    let body = problem_json(
        QUOTA_EXCEEDED,
        "Too Many Requests",
        status,
        &denial_detail(outcome),
        instance,
        &members,
    );
    let mut headers = HeaderMap::with_capacity(8);
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON));
    if let Some(wait) = outcome.retry_after() {
        headers.insert(RETRY_AFTER, retry_after_value(wait));
    }
    insert_outcome_headers(&mut headers, outcome);
    (headers, body)
}
