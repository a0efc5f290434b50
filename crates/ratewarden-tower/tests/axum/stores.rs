//! The same limit on SQLite, and 200 parallel requests letting exactly the
//! limit through on memory and on SQLite.

use std::sync::Arc;
use std::time::Duration;

use http::StatusCode;
use ratewarden_sqlite::{SqliteOptions, SqliteStore};
use ratewarden_tower::KeyPart;
use tower::ServiceExt;

use crate::common::{MINUTE, START, build, clock, layer_of, per_minute};
use crate::{App, QUOTA_EXCEEDED, app, get_};

#[tokio::test]
async fn the_same_limit_holds_on_sqlite() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let store = Arc::new(
        SqliteStore::open(dir.path().join("limits.db"), SqliteOptions::default()).expect("a store"),
    );
    let clock = clock();
    let app = app(build(
        layer_of(&clock, [per_minute("api", 3, [KeyPart::ClientIp])])
            .store(Arc::clone(&store) as _),
    ));
    let first = app.send(get_("/hello")).await;
    assert_eq!(first.header("ratelimit"), Some(r#""api";r=2;t=60"#));
    assert_eq!(app.statuses(3, || get_("/hello")).await, [200, 200, 429]);
    clock.advance(Duration::from_millis(20_500));
    let refused = app.send(get_("/hello")).await;
    refused.assert_problem(StatusCode::TOO_MANY_REQUESTS, QUOTA_EXCEEDED);
    assert_eq!(refused.header("retry-after"), Some("40"));
    clock.set(START.saturating_add(MINUTE));
    assert_eq!(app.send(get_("/hello")).await.status, StatusCode::OK);
    assert_eq!(app.calls(), 4);
    ratewarden_core::Store::close(store.as_ref()).await;
}

/// 200 requests for one key at once through clones of the Router.
async fn two_hundred_at_once(app: &App) -> (usize, usize) {
    let tasks: Vec<_> = (0..200)
        .map(|_| {
            let router = app.router.clone();
            tokio::spawn(async move {
                router
                    .oneshot(get_("/"))
                    .await
                    .expect("infallible")
                    .status()
            })
        })
        .collect();
    let (mut ok, mut refused) = (0, 0);
    for task in tasks {
        match task.await.expect("the task ran") {
            StatusCode::OK => ok += 1,
            StatusCode::TOO_MANY_REQUESTS => refused += 1,
            other => panic!("unexpected status {other}"),
        }
    }
    (ok, refused)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_parallel_requests_let_exactly_the_limit_through_on_memory() {
    let clock = clock();
    let app = app(build(layer_of(
        &clock,
        [per_minute("api", 25, [KeyPart::ClientIp])],
    )));
    assert_eq!(two_hundred_at_once(&app).await, (25, 175));
    assert_eq!(app.calls(), 25);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_parallel_requests_let_exactly_the_limit_through_on_sqlite() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let store = Arc::new(
        SqliteStore::open(dir.path().join("limits.db"), SqliteOptions::default()).expect("a store"),
    );
    let clock = clock();
    let app = app(build(
        layer_of(&clock, [per_minute("api", 25, [KeyPart::ClientIp])])
            .store(Arc::clone(&store) as _),
    ));
    assert_eq!(two_hundred_at_once(&app).await, (25, 175));
    assert_eq!(app.calls(), 25);
    ratewarden_core::Store::close(store.as_ref()).await;
}
