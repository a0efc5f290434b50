//! The benchmark baseline: bare axum routes on the same runtime and HTTP
//! stack as ratewarden, so BENCHMARKS.md can quote ratewarden's throughput
//! as a ratio of them: `GET /ping` answers a small JSON 200; `GET
//! /ping-full` answers what ratewarden's `/ping` answers (the five
//! rate-limit headers and the seed's seven-field body, numbers rendered
//! per request) without deciding anything, so the cost of the answer's
//! shape is measured apart from the limiter's; `POST /v1/check` parses a
//! JSON body and answers an object of the size of a ratewarden check
//! answer.
//!
//! `cargo run --release --example bare -- 127.0.0.1:8090`

use axum::Router;
use axum::http::{HeaderMap, HeaderValue};
use axum::routing::{get, post};

/// `/ping-full`: ratewarden's `/ping` answer for the caller's
/// `X-Client-Key`, with fixed numbers (limit 1,000, 999 left, 42 s to the
/// window's end).
async fn ping_full(headers: HeaderMap) -> (HeaderMap, axum::Json<serde_json::Value>) {
    let key = headers
        .get("x-client-key")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("127.0.0.1");
    let (limit, remaining, reset, window) = (1000u64, 999u64, 42u64, 60u64);
    let mut out = HeaderMap::with_capacity(8);
    let number = |n: u64| HeaderValue::from(n);
    let field = |s: String| HeaderValue::try_from(s).unwrap_or(HeaderValue::from_static(""));
    out.insert(
        "ratelimit-policy",
        field(format!("\"ping\";q={limit};w={window}")),
    );
    out.insert(
        "ratelimit",
        field(format!("\"ping\";r={remaining};t={reset}")),
    );
    out.insert("x-ratelimit-limit", number(limit));
    out.insert("x-ratelimit-remaining", number(remaining));
    out.insert("x-ratelimit-reset", number(reset));
    let body = serde_json::json!({
        "key": key, "count": limit - remaining, "limit": limit, "remaining": remaining,
        "window_start": "2026-12-02T08:45:00Z", "window_seconds": window, "reset_after": reset
    });
    (out, axum::Json(body))
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:8090".into());
    let app = Router::new()
        .route(
            "/ping",
            get(|| async { axum::Json(serde_json::json!({"key": "127.0.0.1", "count": 1})) }),
        )
        .route("/ping-full", get(ping_full))
        .route(
            "/v1/check",
            post(
                |axum::Json(body): axum::Json<serde_json::Value>| async move {
                    axum::Json(serde_json::json!({
                        "policy": body["policy"], "allowed": true, "limit": 100, "remaining": 99,
                        "reset_after_ms": 600, "retry_after_ms": 0, "shadow_denied": false,
                        "never": false, "failed_open": false
                    }))
                },
            ),
        );
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    axum::serve(listener, app).await
}
