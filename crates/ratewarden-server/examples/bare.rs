//! The benchmark baseline: bare axum routes on the same runtime and HTTP
//! stack as ratewarden, so BENCHMARKS.md can quote ratewarden's throughput
//! as a ratio of them: `GET /ping` answers a small JSON 200, `POST
//! /v1/check` parses a JSON body and answers an object of the size of a
//! ratewarden check answer.
//!
//! `cargo run --release --example bare -- 127.0.0.1:8090`

use axum::Router;
use axum::routing::{get, post};

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
