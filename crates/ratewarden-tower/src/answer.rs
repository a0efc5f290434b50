//! The layer's own answers, given instead of your service's: a 429 for
//! a denial, 503 or 500 when the limiter cannot decide, and the answer
//! for a request without a key ([`MissingKey`]), as problem details or,
//! for a gRPC call, a gRPC status.

use bytes::Bytes;
use http::header::{CONTENT_TYPE, RETRY_AFTER};
use http::request::Parts;
use http::{HeaderMap, HeaderValue, Response, StatusCode};
use http_body_util::Full;
use ratewarden_http::KeyProblem;
use ratewarden_http::problem::{PROBLEM_JSON, denial, problem_json};
use ratewarden_limiter::{CheckError, Outcome};
use serde_json::Map;

/// What the layer answers when a request has no key for a policy: the
/// client address is unknown (no connection info), or a key function
/// returned `None`. Never a panic, never a 500.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MissingKey {
    /// Answer with this status and problem details naming the policy
    /// (gRPC: `UNAUTHENTICATED` for 401, `PERMISSION_DENIED` for 403,
    /// `INVALID_ARGUMENT` otherwise). The default is 400.
    Refuse(StatusCode),
    /// Let the request through without that policy (the others still
    /// apply).
    Skip,
}

impl Default for MissingKey {
    fn default() -> MissingKey {
        MissingKey::Refuse(StatusCode::BAD_REQUEST)
    }
}

/// The answer for a request without a usable key for `policy`: problem
/// details of kind `key-too-long`, `ambiguous-path`, `ambiguous-query` or
/// `missing-key` with `status` (gRPC: a status of its own).
pub(crate) fn missing_key(
    parts: &Parts,
    policy: &str,
    problem: &KeyProblem,
    status: StatusCode,
) -> Response<Full<Bytes>> {
    let detail = match problem {
        KeyProblem::TooLong(e) => {
            format!("the request's key for policy '{policy}' is unusable: {e}")
        }
        KeyProblem::Path(e) => format!(
            "the request's path has no single meaning, so policy '{policy}' cannot match it: {e}"
        ),
        KeyProblem::RepeatedParameter(_) => {
            format!("the request's key for policy '{policy}' is ambiguous: {problem}")
        }
        KeyProblem::NoClientIp | KeyProblem::NoKey => {
            format!("the request has no key for policy '{policy}': {problem}")
        }
    };
    #[cfg(feature = "grpc")]
    if crate::grpc::is_grpc(parts) {
        let code = match status {
            StatusCode::UNAUTHORIZED => tonic::Code::Unauthenticated,
            StatusCode::FORBIDDEN => tonic::Code::PermissionDenied,
            _ => tonic::Code::InvalidArgument,
        };
        return crate::grpc::status(code, detail, HeaderMap::new());
    }
    let kind = match problem {
        KeyProblem::TooLong(_) => "key-too-long",
        KeyProblem::Path(_) => "ambiguous-path",
        KeyProblem::RepeatedParameter(_) => "ambiguous-query",
        KeyProblem::NoClientIp | KeyProblem::NoKey => "missing-key",
    };
    problem_response(parts, status, kind, &detail, HeaderMap::new())
}

/// The answer to a denied request.
pub(crate) fn refusal(parts: &Parts, outcome: &Outcome) -> Response<Full<Bytes>> {
    #[cfg(feature = "grpc")]
    if crate::grpc::is_grpc(parts) {
        return crate::grpc::resource_exhausted(outcome);
    }
    let (headers, body) = denial(
        outcome,
        StatusCode::TOO_MANY_REQUESTS,
        Some(parts.uri.path()),
    );
    response(StatusCode::TOO_MANY_REQUESTS, headers, body)
}

/// The answer when the limiter could not decide: 503 with `Retry-After: 1`
/// (seconds) when the store is unavailable and a policy fails closed, 500
/// for a permanent store failure (both logged by the limiter).
pub(crate) fn failure(parts: &Parts, error: &CheckError) -> Response<Full<Bytes>> {
    let unavailable = matches!(error, CheckError::Unavailable(_));
    #[cfg(feature = "grpc")]
    if crate::grpc::is_grpc(parts) {
        let code = if unavailable {
            tonic::Code::Unavailable
        } else {
            tonic::Code::Internal
        };
        return crate::grpc::status(
            code,
            failure_detail(unavailable).to_owned(),
            HeaderMap::new(),
        );
    }
    if unavailable {
        let mut headers = HeaderMap::new();
        headers.insert(RETRY_AFTER, HeaderValue::from(1u64));
        problem_response(
            parts,
            StatusCode::SERVICE_UNAVAILABLE,
            "store-unavailable",
            failure_detail(true),
            headers,
        )
    } else {
        problem_response(
            parts,
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            failure_detail(false),
            HeaderMap::new(),
        )
    }
}

fn failure_detail(unavailable: bool) -> &'static str {
    if unavailable {
        "the rate-limit store is unavailable; try again shortly"
    } else {
        "the rate limiter failed to decide"
    }
}

fn problem_response(
    parts: &Parts,
    status: StatusCode,
    kind: &str,
    detail: &str,
    mut headers: HeaderMap,
) -> Response<Full<Bytes>> {
    let title = status.canonical_reason().unwrap_or("Error");
    let body = problem_json(
        kind,
        title,
        status,
        detail,
        Some(parts.uri.path()),
        &Map::new(),
    );
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON));
    response(status, headers, body)
}

fn response(status: StatusCode, headers: HeaderMap, body: Vec<u8>) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    *response.headers_mut() = headers;
    response
}
