//! Forward auth, `/v1/authorize` (docs/forward-auth.md), black box, on
//! every store, and the helpers its modules share:
//! - [`forwarded`]: which request the forwarded headers describe (method,
//!   URI, client address behind trusted proxies), and bad ones.
//! - [`policies`]: which policies apply, by key and match, and with
//!   which key.
//! - [`answers`]: the 200 / 429 answers and their headers, all or
//!   nothing, shadow policies, window edges on the manual clock.
//! - [`store`]: 100 requests at once, and a store that fails.

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

mod answers;
mod forwarded;
mod policies;
mod store;

use reqwest::header::HeaderMap;
use reqwest::{Method, RequestBuilder, Response};
use serde_json::Value;

use crate::helpers::{
    self, PolicyToml, StoreKind, TestApp, encode, ok_json, problem, spawn_with_config,
};

const QUOTA_EXCEEDED: &str = "https://iana.org/assignments/http-problem-types#quota-exceeded";

const RATE_LIMIT_HEADERS: [&str; 6] = [
    "ratelimit-policy",
    "ratelimit",
    "x-ratelimit-limit",
    "x-ratelimit-remaining",
    "x-ratelimit-reset",
    "retry-after",
];

/// The application on `store` with `trusted_proxies = trusted` (none when
/// empty) and `policies`.
async fn app(
    store: StoreKind,
    trusted: &[&str],
    policies: impl IntoIterator<Item = PolicyToml>,
) -> TestApp {
    let mut config = String::new();
    if !trusted.is_empty() {
        let list: Vec<String> = trusted.iter().map(|t| format!("\"{t}\"")).collect();
        config.push_str(&format!("trusted_proxies = [{}]\n", list.join(", ")));
    }
    config.push_str(&helpers::policies(policies));
    spawn_with_config(store, &config).await
}

/// `METHOD /v1/authorize` (nothing forwarded yet).
fn request(app: &TestApp, method: &str) -> RequestBuilder {
    let method = Method::from_bytes(method.as_bytes()).unwrap();
    app.client.request(method, app.url("/v1/authorize"))
}

/// `GET /v1/authorize` for the original request `GET uri`.
async fn ask(app: &TestApp, uri: &str) -> Response {
    request(app, "GET")
        .header("X-Forwarded-Uri", uri)
        .send()
        .await
        .unwrap()
}

/// The header `name` as text, `None` when missing.
fn maybe(headers: &HeaderMap, name: &str) -> Option<String> {
    headers.get(name).map(|v| v.to_str().unwrap().to_owned())
}

/// Asserts a 200 with an empty body; returns its headers.
async fn allowed(response: Response) -> HeaderMap {
    let status = response.status();
    let headers = response.headers().clone();
    let body = response.text().await.unwrap();
    assert_eq!(status, 200, "body: {body}");
    assert!(body.is_empty(), "a 200 has no body: {body}");
    headers
}

/// Asserts a 200 without any rate-limit header (no policy applied).
async fn unmatched(response: Response) {
    let headers = allowed(response).await;
    for name in RATE_LIMIT_HEADERS {
        assert!(headers.get(name).is_none(), "{name} in {headers:?}");
    }
}

/// The names in `RateLimit-Policy`, in order (none when missing).
fn advertised(headers: &HeaderMap) -> Vec<String> {
    maybe(headers, "ratelimit-policy")
        .unwrap_or_default()
        .split(", ")
        .filter(|item| !item.is_empty())
        .map(|item| item.split(';').next().unwrap().trim_matches('"').to_owned())
        .collect()
}

/// Asserts a quota-exceeded denial with `status`; returns headers and body.
async fn denied(response: Response, status: u16) -> (HeaderMap, Value) {
    let (headers, body) = problem(response, status).await;
    assert_eq!(body["type"], QUOTA_EXCEEDED, "{body}");
    assert!(body["violated-policies"].is_array(), "{body}");
    assert!(body["results"].is_array(), "{body}");
    (headers, body)
}

/// `remaining` of `policy` for the key `parts`, read with `/v1/status`.
async fn remaining(app: &TestApp, policy: &str, parts: &[&str]) -> u64 {
    let keys: String = parts
        .iter()
        .map(|p| format!("&key={}", encode(p)))
        .collect();
    let (_, body) = ok_json(app.get(&format!("/v1/status?policy={policy}{keys}")).await).await;
    body["remaining"].as_u64().unwrap()
}
