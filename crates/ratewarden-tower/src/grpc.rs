//! gRPC answers: a refused call ends with `RESOURCE_EXHAUSTED`, a
//! `google.rpc.RetryInfo` detail (`grpc-status-details-bin`) and
//! `retry-after` metadata in whole seconds, plus the rate-limit headers as
//! metadata; the layer's other answers are gRPC statuses too, never an
//! HTTP error a gRPC client cannot read.

use bytes::Bytes;
use http::request::Parts;
use http::{HeaderMap, Response};
use http_body_util::Full;
use ratewarden_limiter::Outcome;
use tonic::Code;
use tonic_types::{ErrorDetails, StatusExt};

use ratewarden_http::headers::{outcome_headers, retry_after_value};
use ratewarden_http::problem::denial_detail;

/// Whether the request is a gRPC call (`Content-Type: application/grpc…`).
pub(crate) fn is_grpc(parts: &Parts) -> bool {
    parts
        .headers
        .get(http::header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/grpc"))
}

/// `RESOURCE_EXHAUSTED` for a denied call: the detail, a `RetryInfo` and
/// `retry-after` (seconds, rounded up, at least 1) when waiting helps, the
/// rate-limit headers.
pub(crate) fn resource_exhausted(outcome: &Outcome) -> Response<Full<Bytes>> {
    let wait = outcome.retry_after();
    let mut metadata = outcome_headers(outcome);
    if let Some(wait) = wait {
        metadata.insert("retry-after", retry_after_value(wait));
    }
    // No RetryInfo when waiting never helps: it would tell clients to retry.
    let details = match wait {
        Some(wait) => ErrorDetails::with_retry_info(Some(wait)),
        None => ErrorDetails::new(),
    };
    let status =
        tonic::Status::with_error_details(Code::ResourceExhausted, denial_detail(outcome), details);
    with_metadata(status, metadata)
}

/// A trailers-only gRPC answer with `code`, `message` and `metadata`.
pub(crate) fn status(code: Code, message: String, metadata: HeaderMap) -> Response<Full<Bytes>> {
    with_metadata(tonic::Status::new(code, message), metadata)
}

fn with_metadata(status: tonic::Status, metadata: HeaderMap) -> Response<Full<Bytes>> {
    let mut response = status.into_http::<Full<Bytes>>();
    response.headers_mut().extend(metadata);
    response
}
