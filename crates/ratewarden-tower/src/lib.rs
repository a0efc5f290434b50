//! A tower [`Layer`](tower_layer::Layer) that applies ratewarden's rate-limit
//! policies to any tower service: axum, tonic, hyper.
//!
//! Every request is decided before your service sees it, by ratewarden's
//! decision layer ([`ratewarden_limiter::Limiter`]): all policies that
//! apply are decided together, all or nothing, exactly under any
//! concurrency, on the memory store, SQLite or Redis (shared between
//! instances). Allowed requests reach your service and get the draft-10
//! `RateLimit-Policy` / `RateLimit` headers (and `X-RateLimit-*`) on its
//! response; refused ones get `429 Too Many Requests` with RFC 9457
//! problem details and `Retry-After` in seconds, or for gRPC
//! `RESOURCE_EXHAUSTED` with a `google.rpc.RetryInfo` and `retry-after`
//! metadata.
//!
//! # Quick start
//!
//! ```no_run
//! use std::net::SocketAddr;
//! use std::time::Duration;
//!
//! use axum::{Router, routing::get};
//! use ratewarden_tower::{KeyPart, PolicyBuilder, RateLimitLayer};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let layer = RateLimitLayer::builder()
//!     // 10 requests per second per client address, bursts of 20.
//!     .policy(
//!         PolicyBuilder::gcra("per-client")
//!             .limit(10)
//!             .per(Duration::from_secs(1))
//!             .burst(20)
//!             .key([KeyPart::ClientIp]),
//!     )
//!     .build()?;
//! let app = Router::new().route("/", get(|| async { "hello" })).layer(layer);
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
//! // The connection info gives `client_ip` its peer address.
//! axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>()).await?;
//! # Ok(())
//! # }
//! ```
//!
//! # Policies
//!
//! A policy is a named limit: an algorithm (fixed window, sliding log,
//! sliding window counter, GCRA), `limit` units `per` window, and how a
//! request becomes its key: [`KeyPart`]s (`header:NAME`, `client_ip`,
//! `path`, `method`, `query:NAME`, `literal:TEXT`, in order; an absent
//! header or parameter is the empty string) or a function of the request
//! ([`PolicyBuilder::key_fn`], [`RateLimitLayerBuilder::key_fn`]), and
//! optionally which requests it applies to (methods, a path pattern where
//! `*` matches any run of characters). Patterns fit the path's normal
//! form ([`ratewarden_limiter::normalise_path`]: `/%61pi/x`, `//api/x`
//! and `/x/../api/x` are `/api/x`) or the path as received, and a path
//! that servers read in different ways (an encoded `..`, a backslash) is
//! answered 400 where a policy reads it. Write them in code with
//! [`PolicyBuilder`], or hold a [`Limiter`]
//! built from ratewarden's configuration file and use
//! [`RateLimitLayer::from_limiter`].
//!
//! # What this layer does differently from tower_governor
//!
//! - Units are in the names: `.limit(10).per(Duration::from_secs(1))` is
//!   ten per second; nothing reads `per_second(n)` as "one every n
//!   seconds".
//! - `client_ip` behind proxies is the rightmost `X-Forwarded-For` hop
//!   that is not a trusted proxy ([`RateLimitLayerBuilder::trusted_proxies`]),
//!   never the leftmost, which the client writes itself; without trusted
//!   proxies the header is ignored.
//! - Idle keys cost nothing forever: the memory store drops expired state
//!   by itself, and about 1 % of decisions prune the store; there is no
//!   `retain_recent()` to call. A flood of new keys cannot grow it without
//!   bound either: it holds at most 2,000,000 keys
//!   ([`MemoryStore::with_max_keys`] sets another bound), and at the bound
//!   a new key follows its policy's failure mode while the keys held are
//!   decided exactly.
//! - A request without a key (no connection info, a key function that
//!   finds no user) gets a clear, configurable answer ([`MissingKey`]),
//!   never a panic or a 500.
//! - Fail open or closed per policy when the store cannot answer.
//!
//! # Layout
//! - `layer.rs`: [`RateLimitLayer`] and [`RateLimitService`]: which
//!   policies apply to a request and with what key, the decision, the
//!   headers on your response.
//! - `builder.rs`: [`RateLimitLayerBuilder`].
//! - `policy.rs`: [`PolicyBuilder`], a policy written in code, and
//!   [`KeyFn`].
//! - `answer.rs`: the layer's own answers (a 429, 503 or 500, the
//!   [`MissingKey`] answer) as problem details.
//! - `grpc.rs`: the same answers as gRPC statuses (feature `grpc`).
//!
//! How requests are matched and keyed, and how answers are written
//! (headers, problem details, [`TrustedProxies`]), is
//! [`ratewarden_http`]'s: the service's forward auth shares it, so the two
//! agree on every rule.

mod answer;
mod builder;
#[cfg(feature = "grpc")]
mod grpc;
mod layer;
mod policy;

pub use answer::MissingKey;
pub use builder::RateLimitLayerBuilder;
pub use http::request::Parts;
pub use layer::{RateLimitLayer, RateLimitService, ResponseBody};
pub use policy::{BuildError, KeyFn, PolicyBuilder};
pub use ratewarden_core::{
    Clock, Key, KeyMatch, ManualClock, MemoryStore, Store, StoreError, SystemClock,
};
pub use ratewarden_http::TrustedProxies;
pub use ratewarden_limiter::{FailureMode, KeyPart, Limiter, PolicyDef, PolicySet};
