//! Runs the example app (`examples/axum_sqlite.rs`, compiled in as a
//! module) on a real socket and an SQLite file of its own, and talks to it
//! over HTTP: the two routes, their two policies, the missing-user answer,
//! and limits that survive a restart.
//!
//! The app decides on a `ManualClock`: on the system clock, a minute
//! boundary falling between the test's logins would reset the window of
//! `logins` and fail the test at random.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use ratewarden_core::Timestamp;
use ratewarden_tower::ManualClock;

#[allow(dead_code)] // its `main` is the example's, not the test's
#[path = "../examples/axum_sqlite.rs"]
mod example;

/// The example app serving `db` on a free port, and its base URL.
struct Example {
    server: tokio::task::JoinHandle<()>,
    url: String,
}

impl Example {
    async fn start(db: &Path, clock: &Arc<ManualClock>) -> Example {
        let store = example::open_store(&format!("sqlite:{}", db.display()))
            .expect("open the SQLite store");
        let clock = Arc::clone(clock) as Arc<dyn ratewarden_tower::Clock>;
        let app = example::app_on(store, clock).expect("the example's policies build");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a free port");
        let url = format!("http://{}", listener.local_addr().expect("its address"));
        let server = tokio::spawn(async move {
            let service = app.into_make_service_with_connect_info::<SocketAddr>();
            axum::serve(listener, service).await.expect("serve");
        });
        Example { server, url }
    }

    /// `POST /login`.
    async fn login(&self, http: &reqwest::Client) -> reqwest::Response {
        http.post(format!("{}/login", self.url))
            .send()
            .await
            .expect("POST /login")
    }
}

impl Drop for Example {
    fn drop(&mut self) {
        self.server.abort();
    }
}

#[tokio::test]
async fn the_example_limits_both_routes_and_keeps_its_counters_across_a_restart() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let db = dir.path().join("example.db");
    let http = reqwest::Client::new();
    // 2026-01-01T00:00:10Z: 50 s left of the minute-long window of `logins`.
    let clock = Arc::new(ManualClock::new(Timestamp::from_unix_secs(1_767_225_610)));

    let app = Example::start(&db, &clock).await;
    let anonymous = http
        .get(format!("{}/api/orders", app.url))
        .send()
        .await
        .expect("GET /api/orders");
    assert_eq!(
        anonymous.status(),
        401,
        "no user: the layer's missing-key answer"
    );
    assert_eq!(
        anonymous.headers()["content-type"],
        "application/problem+json"
    );
    let body: serde_json::Value = anonymous.json().await.expect("problem details");
    assert!(
        body["detail"].as_str().is_some_and(|d| d.contains("'api'")),
        "{body}"
    );

    let orders = http
        .get(format!("{}/api/orders", app.url))
        .bearer_auth("alice")
        .send()
        .await
        .expect("GET /api/orders as alice");
    assert_eq!(orders.status(), 200);
    assert_eq!(orders.headers()["ratelimit-policy"], "\"api\";q=100;w=1");
    assert_eq!(orders.headers()["ratelimit"], "\"api\";r=99;t=1");
    let body: serde_json::Value = orders.json().await.expect("the handler's JSON");
    assert_eq!(body["user"], "alice");

    for remaining in [2, 1, 0] {
        let login = app.login(&http).await;
        assert_eq!(login.status(), 200);
        // A fixed window aligned to the clock: t is what is left of it.
        assert_eq!(
            login.headers()["ratelimit"],
            format!("\"logins\";r={remaining};t=50").as_str()
        );
    }
    let refused = app.login(&http).await;
    assert_eq!(refused.status(), 429);
    assert_eq!(refused.headers()["retry-after"], "50");
    drop(app);

    // The counters live in the SQLite file: a restarted service still
    // refuses the same client within the window, to its last second …
    let app = Example::start(&db, &clock).await;
    clock.advance(Duration::from_secs(49));
    let again = app.login(&http).await;
    assert_eq!(again.status(), 429, "the window survives a restart");
    assert_eq!(again.headers()["retry-after"], "1");

    // … and the next window starts afresh.
    clock.advance(Duration::from_secs(1));
    let next = app.login(&http).await;
    assert_eq!(next.status(), 200, "a new window");
    assert_eq!(next.headers()["ratelimit"], "\"logins\";r=2;t=60");
}
