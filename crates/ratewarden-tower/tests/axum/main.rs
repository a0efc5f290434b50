//! The layer around an axum Router, one module per topic: what passes
//! and what is refused (`decisions`), every key part (`keys`), several
//! policies, shadow mode and a limit of zero (`policies`), store failures,
//! missing keys, the builder's errors, a layer over a limiter, SQLite and
//! concurrency (`stores`), and a real socket. Time is a `ManualClock`, so
//! window edges are exact. This file holds what the modules share: the
//! counted inner service, the app around it, requests and replies.

#[path = "../common/mod.rs"]
mod common;

mod builder;
mod decisions;
mod keys;
mod missing_keys;
mod over_a_limiter;
mod policies;
mod socket;
mod store_failures;
mod stores;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use bytes::Bytes;
use common::MINUTE;
use http::{HeaderMap, Method, Request, StatusCode, Uri};
use ratewarden_core::{Algorithm, Key, ManualClock, MemoryStore, Policy, Quota};
use ratewarden_limiter::{FailureMode, Limiter, PolicyDef, PolicySet};
use ratewarden_tower::{KeyPart, RateLimitLayer};
use serde_json::Value;
use tower::ServiceExt;

const PEER: &str = "192.0.2.1:40000";
const QUOTA_EXCEEDED: &str = "https://iana.org/assignments/http-problem-types#quota-exceeded";

/// A Router whose every route (a fallback) answers `inner: METHOD PATH`
/// and counts its calls, wrapped in a rate-limit layer.
struct App {
    router: Router,
    calls: Arc<AtomicUsize>,
    layer: RateLimitLayer,
}

/// The counted inner service, without the layer.
fn inner(calls: &Arc<AtomicUsize>) -> Router {
    let calls = Arc::clone(calls);
    Router::new().fallback(move |method: Method, uri: Uri| {
        let calls = Arc::clone(&calls);
        async move {
            calls.fetch_add(1, Ordering::SeqCst);
            format!("inner: {method} {}", uri.path())
        }
    })
}

fn app(layer: RateLimitLayer) -> App {
    let calls = Arc::new(AtomicUsize::new(0));
    App {
        router: inner(&calls).layer(layer.clone()),
        calls,
        layer,
    }
}

/// A request from `peer` (no connection info when `None`).
fn request(peer: Option<&str>, method: &str, uri: &str, headers: &[(&str, &str)]) -> Request<Body> {
    let mut builder = Request::builder().method(method).uri(uri);
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    let mut request = builder.body(Body::empty()).expect("a valid request");
    if let Some(peer) = peer {
        let addr: SocketAddr = peer.parse().expect("a socket address");
        request.extensions_mut().insert(ConnectInfo(addr));
    }
    request
}

fn get_from(peer: &str, uri: &str) -> Request<Body> {
    request(Some(peer), "GET", uri, &[])
}

fn get_(uri: &str) -> Request<Body> {
    get_from(PEER, uri)
}

fn with_headers(uri: &str, headers: &[(&str, &str)]) -> Request<Body> {
    request(Some(PEER), "GET", uri, headers)
}

#[derive(Debug)]
struct Reply {
    status: StatusCode,
    headers: HeaderMap,
    body: Bytes,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .get(name)
            .map(|v| v.to_str().expect("an ASCII header"))
    }

    fn text(&self) -> &str {
        std::str::from_utf8(&self.body).expect("a UTF-8 body")
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text()))
    }

    fn has_rate_limit_headers(&self) -> bool {
        [
            "ratelimit-policy",
            "ratelimit",
            "x-ratelimit-limit",
            "x-ratelimit-remaining",
            "x-ratelimit-reset",
        ]
        .iter()
        .any(|h| self.headers.contains_key(*h))
    }

    /// Asserts a problem-details answer with `status` and type `kind`.
    #[track_caller]
    fn assert_problem(&self, status: StatusCode, kind: &str) -> Value {
        assert_eq!(self.status, status, "{}", self.text());
        assert_eq!(
            self.header("content-type"),
            Some("application/problem+json")
        );
        let body = self.json();
        assert_eq!(body["type"], kind, "{body}");
        assert_eq!(body["status"], status.as_u16(), "{body}");
        body
    }
}

impl App {
    async fn send(&self, request: Request<Body>) -> Reply {
        send(&self.router, request).await
    }

    fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    /// How many units `policy` has counted for `key`.
    async fn used(&self, policy: &str, key: &Key) -> u64 {
        let status = self
            .layer
            .limiter()
            .status(policy, key)
            .await
            .expect("a status");
        status.decision.used
    }

    /// Sends `request()` `n` times; the statuses.
    async fn statuses(&self, n: usize, request: impl Fn() -> Request<Body>) -> Vec<u16> {
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            out.push(self.send(request()).await.status.as_u16());
        }
        out
    }
}

async fn send(router: &Router, request: Request<Body>) -> Reply {
    let response = router.clone().oneshot(request).await.expect("infallible");
    let status = response.status();
    let headers = response.headers().clone();
    let body = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .expect("a body");
    Reply {
        status,
        headers,
        body,
    }
}

/// A limiter on a memory store of its own, holding `defs`.
fn memory_limiter(clock: &ManualClock, defs: impl IntoIterator<Item = PolicyDef>) -> Arc<Limiter> {
    let set = PolicySet::new(defs).expect("distinct names");
    Arc::new(Limiter::new(
        Arc::new(MemoryStore::new()),
        Arc::new(clock.clone()),
        set,
    ))
}

/// A fixed window of `limit` per minute keyed by `key`, as a limiter holds it.
fn def(name: &str, limit: u64, key: impl IntoIterator<Item = KeyPart>) -> PolicyDef {
    let quota = Quota::new(limit, MINUTE).expect("a quota");
    let mut def = PolicyDef::new(
        Policy::new(name, Algorithm::FixedWindow, quota),
        FailureMode::Open,
    );
    def.key = key.into_iter().collect();
    def
}
