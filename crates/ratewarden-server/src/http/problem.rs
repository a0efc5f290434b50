//! Every error as RFC 9457 problem details (`application/problem+json`),
//! from one [`ApiError`] type so handlers can use `?`.

use std::time::Duration;

use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use ratewarden_http::problem::PROBLEM_JSON;
use serde::Serialize;

/// The `Retry-After` of a 503, in seconds.
pub const UNAVAILABLE_RETRY_AFTER_SECS: u64 = 1;

pub use ratewarden_http::problem::{QUOTA_EXCEEDED, TYPE_PREFIX};

/// An RFC 9457 problem details document, as every error answer carries it
/// (`application/problem+json`). Denials add members: the seed routes
/// `limit`, `window_seconds` and `retry_after`; `/v1` `violated-policies`
/// and the check's fields (or `allowed` and `results` for a batch).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Problem {
    /// A URI naming the kind of problem: `urn:ratewarden:problem:<kind>`,
    /// or the IANA `quota-exceeded` type for a `/v1` denial.
    pub r#type: String,
    /// The status's name (RFC 9110 section 15), also the status line's
    /// reason phrase.
    pub title: String,
    /// The HTTP status code.
    pub status: u16,
    /// What went wrong, for a human; never SQL, a stack trace or a secret.
    pub detail: String,
    /// The request path.
    pub instance: Option<String>,
}

/// An error answer. The `detail` goes to the client, so it never carries
/// SQL, a stack trace or a secret; internal causes are logged instead.
#[derive(Debug, Clone)]
pub struct ApiError {
    status: StatusCode,
    /// `urn:ratewarden:problem:` + this, unless it is an absolute URI.
    kind: &'static str,
    title: &'static str,
    detail: String,
    headers: Vec<(HeaderName, HeaderValue)>,
    /// Boxed: most errors have none, and `Result<_, ApiError>` stays small.
    extensions: Box<serde_json::Map<String, serde_json::Value>>,
}

impl ApiError {
    fn new(
        status: StatusCode,
        kind: &'static str,
        title: &'static str,
        detail: impl Into<String>,
    ) -> ApiError {
        ApiError {
            status,
            kind,
            title,
            detail: detail.into(),
            headers: Vec::new(),
            extensions: Box::default(),
        }
    }

    /// 400: a malformed request (header, body).
    pub fn bad_request(detail: impl Into<String>) -> ApiError {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "bad-request",
            "Bad Request",
            detail,
        )
    }

    /// 403: missing or wrong admin key, or none configured (fail closed).
    pub fn forbidden(detail: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::FORBIDDEN, "forbidden", "Forbidden", detail)
    }

    /// 404: no such route or resource.
    pub fn not_found(detail: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, "not-found", "Not Found", detail)
    }

    /// 405: the route exists, the method does not.
    pub fn method_not_allowed(detail: impl Into<String>) -> ApiError {
        ApiError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "method-not-allowed",
            "Method Not Allowed",
            detail,
        )
    }

    /// 408: the request (its body included) took longer than `limit`.
    pub fn request_timeout(limit: std::time::Duration) -> ApiError {
        ApiError::new(
            StatusCode::REQUEST_TIMEOUT,
            "request-timeout",
            "Request Timeout",
            format!(
                "the request was not complete within {} seconds",
                limit.as_secs()
            ),
        )
    }

    /// 413: the body is over `--max-body-bytes`.
    pub fn payload_too_large(limit: usize) -> ApiError {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload-too-large",
            "Content Too Large",
            format!("the request body is larger than the limit of {limit} bytes"),
        )
    }

    /// 415: a body that does not claim to be JSON.
    pub fn unsupported_media_type(detail: impl Into<String>) -> ApiError {
        ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported-media-type",
            "Unsupported Media Type",
            detail,
        )
    }

    /// 415 for a body in a content coding the server does not read (any
    /// but `identity`), with `Accept-Encoding: identity` (RFC 9110
    /// §15.5.16, §12.5.3).
    pub fn unsupported_content_coding(detail: impl Into<String>) -> ApiError {
        let mut e = ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported-content-coding",
            "Unsupported Media Type",
            detail,
        );
        e.headers.push((
            header::ACCEPT_ENCODING,
            HeaderValue::from_static("identity"),
        ));
        e
    }

    /// 422: well-formed but invalid input (a missing or too long parameter).
    pub fn unprocessable(detail: impl Into<String>) -> ApiError {
        ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "validation-failed",
            "Unprocessable Content",
            detail,
        )
    }

    /// 429 with `Retry-After` in whole seconds, rounded up (docs/semantics.md §6).
    pub fn rate_limited(
        detail: String,
        retry_after: Duration,
        limit: u64,
        window: Duration,
    ) -> ApiError {
        let secs = ratewarden_core::ceil_secs(retry_after).max(1);
        let mut e = ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            "rate-limit-exceeded",
            "Too Many Requests",
            detail,
        );
        e.headers
            .push((header::RETRY_AFTER, HeaderValue::from(secs)));
        e.extensions.insert("limit".into(), limit.into());
        e.extensions.insert(
            "window_seconds".into(),
            ratewarden_core::ceil_secs(window).into(),
        );
        e.extensions.insert("retry_after".into(), secs.into());
        e
    }

    /// 429 for a `/v1` denial: type [`QUOTA_EXCEEDED`], with `Retry-After`
    /// (seconds, rounded up, at least 1) when waiting helps, and
    /// `extensions` as members.
    pub fn quota_exceeded(
        detail: String,
        retry_after: Option<Duration>,
        extensions: serde_json::Map<String, serde_json::Value>,
    ) -> ApiError {
        let mut e = ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            QUOTA_EXCEEDED,
            "Too Many Requests",
            detail,
        );
        if let Some(wait) = retry_after {
            e.headers.push((
                header::RETRY_AFTER,
                ratewarden_http::headers::retry_after_value(wait),
            ));
        }
        e.extensions = Box::new(extensions);
        e
    }

    /// 503 with `Retry-After: 1` (seconds): the store is unavailable and
    /// the operation must not pretend. Not logged here: the decision
    /// layer logs store errors, summarised.
    pub fn unavailable() -> ApiError {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "store-unavailable",
            "Service Unavailable",
            "the rate-limit store is unavailable; try again shortly",
        )
        .retry_after_secs(UNAVAILABLE_RETRY_AFTER_SECS)
    }

    /// 503 with `Retry-After: 1` (seconds): the service cannot serve this
    /// now (not ready, shutting down, no metrics recorder).
    pub fn service_unavailable(detail: impl Into<String>) -> ApiError {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            "Service Unavailable",
            detail,
        )
        .retry_after_secs(UNAVAILABLE_RETRY_AFTER_SECS)
    }

    /// 500 for a permanent store failure, which the decision layer has
    /// logged (summarised); the client gets a generic text.
    pub fn store_failed() -> ApiError {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "Internal Server Error",
            "the server failed to handle the request",
        )
    }

    fn retry_after_secs(mut self, secs: u64) -> ApiError {
        self.headers
            .push((header::RETRY_AFTER, HeaderValue::from(secs)));
        self
    }

    /// 500: a bug. The cause is logged, the client gets a generic text.
    pub fn internal(cause: &dyn std::fmt::Display) -> ApiError {
        tracing::error!(%cause, "internal error");
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "Internal Server Error",
            "the server failed to handle the request",
        )
    }

    /// Adds response headers (the rate-limit headers of a 429).
    pub fn with_headers(mut self, headers: &HeaderMap) -> ApiError {
        self.headers
            .extend(headers.iter().map(|(n, v)| (n.clone(), v.clone())));
        self
    }

    /// The HTTP status.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The response, with `instance` set to the request path when known.
    fn render(self, instance: Option<&str>) -> Response {
        let json = ratewarden_http::problem::problem_json(
            self.kind,
            self.title,
            self.status,
            &self.detail,
            instance,
            &self.extensions,
        );
        let mut response = (self.status, json).into_response();
        // The status line says what the title says (hyper would send the
        // `http` crate's older names: "Payload Too Large" for 413).
        if let Ok(reason) = hyper::ext::ReasonPhrase::try_from(self.title.as_bytes()) {
            response.extensions_mut().insert(reason);
        }
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON));
        headers.extend(self.headers);
        response
    }
}

/// The body lacks `instance` here: the error is also kept in the response's
/// extensions, and [`with_instance`] (applied to every answer by
/// [`crate::http::App`]) renders it again with the request path.
impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = self.clone().render(None);
        response.extensions_mut().insert(self);
        response
    }
}

/// Fills in the problem `instance` (`path`, the request's) of an
/// [`ApiError`] response, whichever handler or fallback produced it.
pub fn with_instance(mut response: Response, path: &str) -> Response {
    let Some(error) = response.extensions_mut().remove::<ApiError>() else {
        return response;
    };
    let mut rendered = error.render(Some(path));
    // Headers the router added after the error was rendered stay (axum's
    // `Allow` of a 405); the length is the new body's.
    let added: Vec<HeaderName> = response
        .headers()
        .keys()
        .filter(|&name| name != header::CONTENT_LENGTH && !rendered.headers().contains_key(name))
        .cloned()
        .collect();
    for name in added {
        for value in response.headers().get_all(&name) {
            rendered.headers_mut().append(name.clone(), value.clone());
        }
    }
    // Last, where axum puts it on the answers of its routes (and so also
    // on a 408).
    if let Some(length) = axum::body::HttpBody::size_hint(rendered.body()).exact() {
        rendered
            .headers_mut()
            .insert(header::CONTENT_LENGTH, HeaderValue::from(length));
    }
    rendered
}

/// The decision layer's errors: an unknown policy is 404, an unavailable
/// store 503, a failed one 500.
impl From<ratewarden_limiter::CheckError> for ApiError {
    fn from(e: ratewarden_limiter::CheckError) -> ApiError {
        use ratewarden_limiter::CheckError;
        match e {
            CheckError::UnknownPolicy(name) => {
                ApiError::not_found(format!("no policy is named '{name}'"))
            }
            CheckError::Unavailable(_) => ApiError::unavailable(),
            CheckError::Failed(_) => ApiError::store_failed(),
        }
    }
}
