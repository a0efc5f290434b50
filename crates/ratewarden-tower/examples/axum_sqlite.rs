//! An axum service with two routes and two policies, on the SQLite store.
//!
//! - `GET /api/orders` needs `Authorization: Bearer <user>` (a stand-in for
//!   real authentication, done by a middleware that puts the [`User`] into
//!   the request's extensions). Policy `api`: GCRA, 100 requests per
//!   second per user, bursts of 100, keyed by that user with a key
//!   function; a request without a user gets 401 from the layer.
//! - `POST /login`. Policy `logins`: a fixed window of 3 attempts per 60
//!   seconds per client address, refused attempts counted, failing closed
//!   (503) when the store cannot answer.
//!
//! ```text
//! cargo run --release -p ratewarden-tower --example axum_sqlite -- [LISTEN] [STORE]
//! ```
//!
//! LISTEN defaults to `127.0.0.1:3000`; STORE is `sqlite:PATH` (default
//! `sqlite:./example.db`), `memory`, or `none` (the same routes without
//! the layer: the benchmark's baseline). Prints `listening on ADDR` when
//! ready.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::Request;
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::{get, post};
use axum::{Json, Router};
use ratewarden_sqlite::{SqliteOptions, SqliteStore};
use ratewarden_tower::{
    Clock, KeyPart, MemoryStore, MissingKey, PolicyBuilder, RateLimitLayer, Store, SystemClock,
};

/// The authenticated user, put into the request's extensions by
/// [`authenticate`].
#[derive(Debug, Clone)]
struct User(String);

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let listen = args.next().unwrap_or_else(|| "127.0.0.1:3000".into());
    let store = open_store(&args.next().unwrap_or_else(|| "sqlite:./example.db".into()))?;
    let app = app(store)?;
    let listener = tokio::net::TcpListener::bind(&listen).await?;
    println!("listening on {}", listener.local_addr()?);
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .await?;
    Ok(())
}

/// The store STORE names: `sqlite:PATH`, `memory`, or `none` (no layer).
pub fn open_store(arg: &str) -> Result<Option<Arc<dyn Store>>, Box<dyn std::error::Error>> {
    Ok(match arg {
        "none" => None,
        "memory" => Some(Arc::new(MemoryStore::new())),
        other => match other.strip_prefix("sqlite:") {
            Some(path) => Some(Arc::new(SqliteStore::open(path, SqliteOptions::default())?)),
            None => {
                return Err(format!("STORE is sqlite:PATH, memory or none, not '{other}'").into());
            }
        },
    })
}

/// The routes, rate limited on `store` (none: without the layer), on the
/// system clock.
pub fn app(store: Option<Arc<dyn Store>>) -> Result<Router, ratewarden_tower::BuildError> {
    app_on(store, Arc::new(SystemClock))
}

/// As [`app`], deciding on `clock`. Its test gives a `ManualClock`, so
/// that the minute-long window of `logins` cannot end in the middle of it.
pub fn app_on(
    store: Option<Arc<dyn Store>>,
    clock: Arc<dyn Clock>,
) -> Result<Router, ratewarden_tower::BuildError> {
    let mut app = Router::new()
        .route("/api/orders", get(orders))
        .route("/login", post(login));
    if let Some(store) = store {
        app = app.layer(rate_limits(store, clock)?);
    }
    // Outermost, so it runs before the rate limit layer sees the request.
    Ok(app.layer(middleware::from_fn(authenticate)))
}

/// The two policies.
fn rate_limits(
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
) -> Result<RateLimitLayer, ratewarden_tower::BuildError> {
    RateLimitLayer::builder()
        .store(store)
        .clock(clock)
        .policy(
            PolicyBuilder::gcra("api")
                .limit(100)
                .per(Duration::from_secs(1))
                .burst(100)
                .path("/api/*")
                .key_fn(|parts| parts.extensions.get::<User>().map(|u| u.0.clone())),
        )
        .policy(
            PolicyBuilder::fixed_window("logins")
                .limit(3)
                .per(Duration::from_secs(60))
                .count_denied()
                .methods(["POST"])
                .path("/login")
                .key([KeyPart::ClientIp])
                .fail_closed(),
        )
        // A request to /api/* without a user: 401, not a shared counter.
        .on_missing_key(MissingKey::Refuse(StatusCode::UNAUTHORIZED))
        .build()
}

/// Puts the bearer token's user into the request's extensions.
async fn authenticate(mut request: Request, next: Next) -> Response {
    let user = request
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .filter(|u| !u.is_empty())
        .map(|u| User(u.to_owned()));
    if let Some(user) = user {
        request.extensions_mut().insert(user);
    }
    next.run(request).await
}

async fn orders(request: Request) -> Json<serde_json::Value> {
    let user = request.extensions().get::<User>().map(|u| u.0.clone());
    Json(serde_json::json!({ "user": user, "orders": [{ "id": 1, "total_cents": 4200 }] }))
}

async fn login() -> Json<serde_json::Value> {
    Json(serde_json::json!({ "token": "demo" }))
}
