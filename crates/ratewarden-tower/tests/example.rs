//! Runs the example app (`examples/axum_sqlite.rs`, compiled in as a
//! module) on a real socket and an SQLite file of its own, and talks to it
//! over HTTP: the two routes, their two policies, the missing-user answer,
//! and limits that survive a restart.

use std::net::SocketAddr;
use std::path::Path;

#[allow(dead_code)] // its `main` is the example's, not the test's
#[path = "../examples/axum_sqlite.rs"]
mod example;

/// The example app serving `db` on a free port, and its base URL.
struct Example {
    server: tokio::task::JoinHandle<()>,
    url: String,
}

impl Example {
    async fn start(db: &Path) -> Example {
        let store = example::open_store(&format!("sqlite:{}", db.display()))
            .expect("open the SQLite store");
        let app = example::app(store).expect("the example's policies build");
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

    let app = Example::start(&db).await;
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
        let login = http
            .post(format!("{}/login", app.url))
            .send()
            .await
            .expect("POST /login");
        assert_eq!(login.status(), 200);
        // A fixed window aligned to the clock: t is what is left of it.
        let item = login.headers()["ratelimit"]
            .to_str()
            .expect("ASCII")
            .to_owned();
        let prefix = format!("\"logins\";r={remaining};t=");
        let t: u64 = item
            .strip_prefix(&prefix)
            .and_then(|t| t.parse().ok())
            .unwrap_or_else(|| panic!("RateLimit {item:?}, expected {prefix}<secs>"));
        assert!((1..=60).contains(&t), "{item}");
    }
    let refused = http
        .post(format!("{}/login", app.url))
        .send()
        .await
        .expect("the 4th POST /login");
    assert_eq!(refused.status(), 429);
    let wait: u64 = refused.headers()["retry-after"]
        .to_str()
        .expect("ASCII")
        .parse()
        .expect("whole seconds");
    assert!((1..=60).contains(&wait), "Retry-After {wait}");
    drop(app);

    // The counters live in the SQLite file: a restarted service still
    // refuses the same client within the window.
    let app = Example::start(&db).await;
    let again = http
        .post(format!("{}/login", app.url))
        .send()
        .await
        .expect("POST /login after the restart");
    assert_eq!(again.status(), 429, "the window survives a restart");
}
