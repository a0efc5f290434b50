//! The benchmark baseline: a bare axum route answering `GET /ping` with a
//! small JSON 200, on the same runtime and HTTP stack as ratewarden, so
//! BENCHMARKS.md can quote ratewarden's throughput as a ratio of it.
//!
//! `cargo run --release --example bare -- 127.0.0.1:8090`

use axum::Router;
use axum::routing::get;

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:8090".into());
    let app = Router::new().route(
        "/ping",
        get(|| async { axum::Json(serde_json::json!({"key": "127.0.0.1", "count": 1})) }),
    );
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    axum::serve(listener, app).await
}
