//! `/v1/authorize`: forward auth for proxies (docs/forward-auth.md).
//! nginx `auth_request`, Caddy `forward_auth` and Traefik `ForwardAuth`
//! ask it about each client request before passing it on; it answers 200
//! (pass it on) or 429 (refuse it, with `Retry-After`).
//!
//! The original request is described by forwarded headers: the method by
//! `X-Forwarded-Method` (else this request's own method), the URI by
//! `X-Forwarded-Uri` (else `X-Original-URI`), the client by
//! `X-Forwarded-For`, believed only from `--trusted-proxy` peers and read
//! from the right. Every policy with `key` parts whose `match` fits is
//! decided, all or nothing, matched and keyed as the tower Layer does
//! ([`ratewarden_http::matching`], [`ratewarden_http::key`]).

use std::net::SocketAddr;

use axum::body::Body;
use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, HeaderName, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use ratewarden_core::Key;
use ratewarden_http::headers::outcome_headers;
use ratewarden_http::key::key_of;
use ratewarden_http::matching::applies;
use ratewarden_http::problem::denial;
use ratewarden_http::{KeyProblem, RequestFacts, RequestPath};
use ratewarden_limiter::{Check, PathError, PolicyDef, for_log};

use crate::http::problem::ApiError;
use crate::state::AppState;

/// The header by which a proxy asks for another status than 429 on a
/// denial: `401`, `403` or `429`. nginx's `auth_request` turns every
/// answer but 2xx, 401 and 403 into a 500, so its configuration asks for
/// 403 and maps it back to 429 (docs/forward-auth.md).
pub const DENY_STATUS: HeaderName = HeaderName::from_static("x-ratewarden-deny-status");

/// The headers `/v1/authorize` reads, for the OpenAPI document only (the
/// handler reads them from the `HeaderMap`, as forward auth must accept
/// what the schema cannot say: `X-Original-URI` in place of a missing
/// `X-Forwarded-Uri`). Strings, never null: a header is absent or a
/// string.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Header)]
#[allow(dead_code)]
struct ForwardedHeaders {
    /// The original request's method, an RFC 9110 token (nginx:
    /// `$request_method`); default: this request's method.
    #[param(
        rename = "X-Forwarded-Method",
        required = false,
        pattern = r"^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,32}$"
    )]
    forwarded_method: String,
    /// The original request's URI, `/path?query` (an absolute
    /// `http://host/path?query` is read for its path and query). When it
    /// is missing, `X-Original-URI` is read instead; one of the two is
    /// required.
    #[param(
        rename = "X-Forwarded-Uri",
        pattern = r"^/[A-Za-z0-9._~!$&'()*+,;=:@/?-]{0,1023}$"
    )]
    forwarded_uri: String,
    /// The original URI, as nginx configurations often send it; read when
    /// `X-Forwarded-Uri` is missing.
    #[param(
        rename = "X-Original-URI",
        required = false,
        pattern = r"^/[A-Za-z0-9._~!$&'()*+,;=:@/?-]{0,1023}$"
    )]
    original_uri: String,
    /// The client chain; believed only from a `--trusted-proxy` peer, read
    /// from the right.
    #[param(rename = "X-Forwarded-For", required = false)]
    forwarded_for: String,
    /// `401`, `403` or `429` (default): the status of a denial (nginx
    /// needs 403); another value is a 400.
    #[param(
        rename = "X-Ratewarden-Deny-Status",
        required = false,
        pattern = "^(401|403|429)$"
    )]
    deny_status: String,
}

/// Decides the forwarded request: 200 (no body) with the rate-limit
/// headers when every matching policy allows it, 200 without them when no
/// policy applies, 429 problem details when one denies it.
#[utoipa::path(
    get,
    path = "/v1/authorize",
    operation_id = "authorize",
    description = "Forward auth. Any method is accepted and answered alike (nginx, Caddy and Traefik send GET); without X-Forwarded-Method the authorize request's own method is the original one.",
    tag = "forward-auth",
    params(ForwardedHeaders),
    responses(
        (status = 200, description = "Allowed (or no policy applies): RateLimit-Policy, RateLimit and X-RateLimit-* headers when a policy applied; no body"),
        (status = 400, description = "No X-Forwarded-Uri or X-Original-URI, a URI or method that does not parse, a key over 4096 bytes, a bad X-Ratewarden-Deny-Status", body = crate::http::problem::Problem, content_type = "application/problem+json"),
        (status = 429, description = "Denied (type …#quota-exceeded, or the status X-Ratewarden-Deny-Status asked for): violated-policies, results, Retry-After unless it can never pass, the rate-limit headers", body = crate::http::problem::Problem, content_type = "application/problem+json"),
        (status = 503, description = "The store is unavailable and a policy fails closed", body = crate::http::problem::Problem, content_type = "application/problem+json"),
    )
)]
pub async fn handle(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    method: Method,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let deny_status = deny_status(&headers)?;
    let method = forwarded_method(&headers, &method)?;
    let uri = forwarded_uri(&headers)?;
    let path = RequestPath::new(uri.path());
    let facts = RequestFacts {
        method: &method,
        path: &path,
        query: uri.query(),
        headers: &headers,
        client_ip: Some(state.trusted_proxies.client_ip(peer.ip(), &headers)),
    };
    let set = state.limiter.policies();
    let mut applied: Vec<(&std::sync::Arc<PolicyDef>, Key)> = Vec::new();
    for def in set.iter() {
        if !applies(def, facts.method, &path).map_err(|e| unmatchable(&path, &e))? {
            continue;
        }
        let key = key_of(&def.key, &facts).map_err(|e| match e {
            KeyProblem::Path(e) => unmatchable(&path, &e),
            e => ApiError::bad_request(format!(
                "the request has no usable key for policy '{}': {e}",
                def.name()
            )),
        })?;
        applied.push((def, key));
    }
    if applied.is_empty() {
        return Ok(StatusCode::OK.into_response());
    }
    let checks: Vec<Check<'_>> = applied
        .iter()
        .map(|(def, key)| Check::one(*def, key))
        .collect();
    let outcome = state.limiter.check(&checks).await?;
    if outcome.allowed {
        return Ok((outcome_headers(&outcome), Body::empty()).into_response());
    }
    // The path the policies matched.
    let instance = path.normal().unwrap_or(path.received());
    let (headers, body) = denial(&outcome, deny_status, Some(instance));
    Ok((deny_status, headers, body).into_response())
}

/// The 400 for a forwarded path without a normal form
/// (docs/forward-auth.md, "Which path is matched").
fn unmatchable(path: &RequestPath<'_>, e: &PathError) -> ApiError {
    ApiError::bad_request(format!(
        "the forwarded path '{}' has no single meaning, so it is not matched against the \
         policies: {e}",
        for_log(path.received().as_bytes())
    ))
}

/// The status a denial is answered with.
fn deny_status(headers: &HeaderMap) -> Result<StatusCode, ApiError> {
    let Some(value) = headers.get(&DENY_STATUS) else {
        return Ok(StatusCode::TOO_MANY_REQUESTS);
    };
    match value.as_bytes() {
        b"401" => Ok(StatusCode::UNAUTHORIZED),
        b"403" => Ok(StatusCode::FORBIDDEN),
        b"429" => Ok(StatusCode::TOO_MANY_REQUESTS),
        other => Err(ApiError::bad_request(format!(
            "X-Ratewarden-Deny-Status must be 401, 403 or 429, not '{}'",
            for_log(other)
        ))),
    }
}

/// `X-Forwarded-Method`, else the request's own method.
fn forwarded_method(headers: &HeaderMap, own: &Method) -> Result<String, ApiError> {
    let Some(value) = headers.get("x-forwarded-method") else {
        return Ok(own.as_str().to_owned());
    };
    Method::from_bytes(value.as_bytes())
        .map(|m| m.as_str().to_owned())
        .map_err(|_| {
            ApiError::bad_request(format!(
                "X-Forwarded-Method '{}' is not a method",
                for_log(value.as_bytes())
            ))
        })
}

/// `X-Forwarded-Uri`, else `X-Original-URI`: origin form (`/path?query`)
/// or absolute form (`http://host/path?query`, RFC 9112 §3.2.2: a proxy
/// may forward the form it received), read for its path and query.
fn forwarded_uri(headers: &HeaderMap) -> Result<Uri, ApiError> {
    let (name, value) = match (
        headers.get("x-forwarded-uri"),
        headers.get("x-original-uri"),
    ) {
        (Some(v), _) => ("X-Forwarded-Uri", v),
        (None, Some(v)) => ("X-Original-URI", v),
        (None, None) => {
            return Err(ApiError::bad_request(
                "forward auth needs the original request's URI in X-Forwarded-Uri (nginx: \
                 proxy_set_header X-Forwarded-Uri $request_uri; the proxy must set it, and \
                 X-Forwarded-Method, itself, or a client can send its own) or X-Original-URI",
            ));
        }
    };
    let bytes = value.as_bytes();
    let uri = Uri::try_from(bytes)
        .ok()
        .filter(|u| u.path().starts_with('/'));
    uri.ok_or_else(|| {
        ApiError::bad_request(format!(
            "{name} '{}' is not a request URI (/path?query)",
            for_log(bytes)
        ))
    })
}
