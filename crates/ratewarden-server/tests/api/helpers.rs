//! `spawn_app()`: the application on a free loopback port, a fresh SQLite
//! file in a temporary directory and a [`ManualClock`] the test moves;
//! [`policy`]: a configuration file's policies, built in code.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use ratewarden_config::Settings;
use ratewarden_core::{Clock, ManualClock, Timestamp};
use ratewarden_server::cli::{Cli, Command};
use ratewarden_server::startup::Application;
use ratewarden_testkit::redis_server::{RedisServer, TEST_STORE_TIMEOUT_MS};
use reqwest::header::HeaderMap;
use reqwest::{Response, StatusCode};
use serde_json::Value;
use tempfile::TempDir;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub use crate::every_store::StoreKind;
pub use policy::{PolicyToml, policies, policy};

mod policy;

/// The admin key every test server is given unless a test says otherwise.
pub const ADMIN_KEY: &str = "s3cret-admin-key";

/// 2026-01-01T00:00:00Z: a window start for every whole-minute window.
pub const START_SECS: u64 = 1_767_225_600;

/// One second in nanoseconds.
pub const SEC: u64 = 1_000_000_000;

/// [`START_SECS`] as a timestamp.
pub fn start() -> Timestamp {
    Timestamp::from_unix_secs(START_SECS)
}

/// `secs` after [`start`], plus `nanos`.
pub fn at(secs: u64, nanos: u64) -> Timestamp {
    Timestamp::from_unix_nanos(START_SECS * SEC + secs * SEC + nanos)
}

/// A running application and what a test needs to drive it.
pub struct TestApp {
    /// `http://127.0.0.1:PORT`.
    pub address: String,
    /// `http://127.0.0.1:PORT` of the gRPC server, when one was asked for
    /// (`--grpc-listen` in the options, or [`AppOptions::envoy`]).
    pub grpc: Option<String>,
    /// A client without a proxy.
    pub client: reqwest::Client,
    /// The SQLite file.
    pub db_path: PathBuf,
    /// The application's only clock.
    pub clock: ManualClock,
    dir: Arc<TempDir>,
    redis: Option<Arc<RedisServer>>,
    shutdown: Option<oneshot::Sender<()>>,
    server: Option<JoinHandle<std::io::Result<()>>>,
}

/// How to start an application.
pub struct AppOptions {
    /// Flags after `ratewarden serve` (`--listen` and `--db` are added).
    pub args: Vec<String>,
    /// What `RATEWARDEN_ADMIN_KEY` would hold.
    pub admin_key: Option<String>,
    /// A configuration file's text, written to the test's directory and
    /// given as `--config`.
    pub config: Option<String>,
    /// The store.
    pub store: StoreKind,
    /// Envoy rules (envoyproxy/ratelimit YAML), written to the test's
    /// directory and given as `--envoy-config`, with a gRPC server on a
    /// free port.
    pub envoy: Option<String>,
}

impl Default for AppOptions {
    fn default() -> AppOptions {
        AppOptions {
            args: Vec::new(),
            admin_key: Some(ADMIN_KEY.to_owned()),
            config: None,
            store: StoreKind::Sqlite,
            envoy: None,
        }
    }
}

/// The application on `store` with the configuration file `config`.
pub async fn spawn_with_config(store: StoreKind, config: &str) -> TestApp {
    let options = AppOptions {
        config: Some(config.to_owned()),
        store,
        ..AppOptions::default()
    };
    spawn(options, |_| {}).await
}

impl AppOptions {
    /// Default options plus these flags.
    pub fn args(args: &[&str]) -> AppOptions {
        AppOptions {
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            ..AppOptions::default()
        }
    }
}

/// The application with the default settings (the seeds' limits).
pub async fn spawn_app() -> TestApp {
    spawn_app_with(|_| {}).await
}

/// The application with default settings changed by `customize`.
pub async fn spawn_app_with(customize: impl FnOnce(&mut Settings)) -> TestApp {
    spawn(AppOptions::default(), customize).await
}

/// The application started as with `ratewarden serve ARGS`.
pub async fn spawn_app_with_args(args: &[&str]) -> TestApp {
    spawn(AppOptions::args(args), |_| {}).await
}

/// The application from `options`, then `customize`.
pub async fn spawn(options: AppOptions, customize: impl FnOnce(&mut Settings)) -> TestApp {
    let dir = Arc::new(tempfile::tempdir().expect("temporary directory"));
    let clock = ManualClock::new(start());
    launch(dir, clock, None, options, customize).await
}

/// Settings as `ratewarden serve` would build them from `options`, on
/// `127.0.0.1:0` with the database `db`.
pub fn settings(options: &AppOptions, db: &std::path::Path) -> Settings {
    let db = db.to_str().expect("UTF-8 temporary path").to_owned();
    let argv = [
        "ratewarden",
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--db",
        &db,
    ]
    .into_iter()
    .map(str::to_owned)
    .chain(options.args.iter().cloned());
    let Command::Serve(args) = Cli::try_parse_from(argv).expect("valid flags").command else {
        panic!("the arguments start with `serve`");
    };
    args.into_settings(options.admin_key.clone())
        .expect("valid settings")
}

async fn launch(
    dir: Arc<TempDir>,
    clock: ManualClock,
    redis: Option<Arc<RedisServer>>,
    mut options: AppOptions,
    customize: impl FnOnce(&mut Settings),
) -> TestApp {
    let db_path = dir.path().join("ratewarden.db");
    if let Some(text) = &options.config {
        let path = dir.path().join("ratewarden.toml");
        std::fs::write(&path, text).expect("write the configuration file");
        options.args.push("--config".into());
        options
            .args
            .push(path.to_str().expect("UTF-8 temporary path").into());
    }
    if let Some(text) = &options.envoy {
        let path = dir.path().join("ratelimit.yaml");
        std::fs::write(&path, text).expect("write the Envoy rules");
        options.args.push("--envoy-config".into());
        options
            .args
            .push(path.to_str().expect("UTF-8 temporary path").into());
        options
            .args
            .extend(["--grpc-listen".into(), "127.0.0.1:0".into()]);
    }
    let redis = match (options.store, redis) {
        (StoreKind::Redis, Some(server)) => Some(server),
        (StoreKind::Redis, None) => Some(Arc::new(RedisServer::start())),
        _ => None,
    };
    match (options.store, &redis) {
        (StoreKind::Memory, _) => options.args.extend(["--store".into(), "memory".into()]),
        (StoreKind::Redis, Some(server)) => {
            options.args.extend([
                "--store".into(),
                server.url(),
                "--store-timeout-ms".into(),
                TEST_STORE_TIMEOUT_MS.into(),
            ]);
            // The tests on Redis count exactly, and none is about the
            // failure policy (those use a failing store): fail closed, so
            // that a call that still fails shows as a 503 rather than as
            // an uncounted 200. Unless the test chose a policy itself.
            let chosen = options.args.iter().any(|a| a == "--on-store-error")
                || options
                    .config
                    .as_deref()
                    .is_some_and(|c| c.contains("on_store_error"));
            if !chosen {
                options
                    .args
                    .extend(["--on-store-error".into(), "closed".into()]);
            }
        }
        _ => {}
    }
    let mut settings = settings(&options, &db_path);
    customize(&mut settings);
    let app_clock: Arc<dyn Clock> = Arc::new(clock.clone());
    let app = Application::build(settings, app_clock)
        .await
        .expect("application starts");
    let address = format!("http://{}", app.local_addr());
    let grpc = app.grpc_addr().map(|a| format!("http://{a}"));
    let (stop, stopped) = oneshot::channel::<()>();
    let server = tokio::spawn(app.run_until_stopped(async move {
        let _ = stopped.await;
    }));
    let client = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(30))
        .build()
        .expect("HTTP client");
    TestApp {
        address,
        grpc,
        client,
        db_path,
        clock,
        dir,
        redis,
        shutdown: Some(stop),
        server: Some(server),
    }
}

impl TestApp {
    /// Stops the server, waiting until it has closed the database.
    pub async fn stop(&mut self) {
        if let Some(stop) = self.shutdown.take() {
            let _ = stop.send(());
        }
        if let Some(server) = self.server.take() {
            server
                .await
                .expect("server task does not panic")
                .expect("server stops cleanly");
        }
    }

    /// Stops this application and starts a new one on the same database
    /// file with the same clock, with `options`.
    pub async fn restart(mut self, options: AppOptions) -> TestApp {
        self.stop().await;
        let dir = Arc::clone(&self.dir);
        let clock = self.clock.clone();
        launch(dir, clock, self.redis.clone(), options, |_| {}).await
    }

    /// Opens the database directly (after [`TestApp::stop`], or read-only
    /// alongside the running server).
    pub fn db(&self) -> rusqlite::Connection {
        rusqlite::Connection::open(&self.db_path).expect("open the test database")
    }

    /// `SELECT COUNT(*) FROM ...` with parameters.
    pub fn count_rows(&self, sql: &str, params: impl rusqlite::Params) -> i64 {
        self.db()
            .query_row(sql, params, |r| r.get(0))
            .expect("count query")
    }

    /// `self.address` + `path_and_query`.
    pub fn url(&self, path_and_query: &str) -> String {
        format!("{}{path_and_query}", self.address)
    }

    /// `GET /ping`, with `X-Client-Key: key` unless `key` is `None`.
    pub async fn ping(&self, key: Option<&str>) -> Response {
        let mut request = self.client.get(self.url("/ping"));
        if let Some(key) = key {
            request = request.header("X-Client-Key", key);
        }
        request.send().await.expect("GET /ping")
    }

    /// `GET /status?key=` with `key` percent-encoded.
    pub async fn status(&self, key: &str) -> Response {
        self.get(&format!("/status?key={}", encode(key))).await
    }

    /// `POST /v1/check` with the JSON `body`.
    pub async fn v1_check(&self, body: &Value) -> Response {
        self.client
            .post(self.url("/v1/check"))
            .json(body)
            .send()
            .await
            .expect("POST /v1/check")
    }

    /// `DELETE path_and_query` with `X-Admin-Key: admin_key` unless `None`.
    pub async fn delete(&self, path_and_query: &str, admin_key: Option<&str>) -> Response {
        let mut request = self.client.delete(self.url(path_and_query));
        if let Some(key) = admin_key {
            request = request.header("X-Admin-Key", key);
        }
        request.send().await.expect("DELETE")
    }

    /// `GET path_and_query` (sent as is).
    pub async fn get(&self, path_and_query: &str) -> Response {
        self.client
            .get(self.url(path_and_query))
            .send()
            .await
            .expect("GET")
    }

    /// `POST /rate/check` as user `user` (no header when `None`) with a JSON
    /// body (no body when `None`).
    pub async fn check_raw(&self, user: Option<&str>, body: Option<&str>) -> Response {
        let mut request = self
            .client
            .post(self.url("/rate/check"))
            .header("Content-Type", "application/json");
        if let Some(user) = user {
            request = request.header("X-User-Id", user);
        }
        if let Some(body) = body {
            request = request.body(body.to_owned());
        }
        request.send().await.expect("POST /rate/check")
    }

    /// `POST /rate/check` as user `user` with `{"endpoint": endpoint}`.
    pub async fn check(&self, user: &str, endpoint: &str) -> Response {
        let body = serde_json::json!({ "endpoint": endpoint }).to_string();
        self.check_raw(Some(user), Some(&body)).await
    }

    /// `GET /rate/status?endpoint=` (percent-encoded) as user `user`.
    pub async fn rate_status(&self, user: &str, endpoint: &str) -> Response {
        self.client
            .get(self.url(&format!("/rate/status?endpoint={}", encode(endpoint))))
            .header("X-User-Id", user)
            .send()
            .await
            .expect("GET /rate/status")
    }

    /// `DELETE /rate/reset/{user}{query}` with `X-Admin-Key: admin_key`
    /// unless `None`.
    pub async fn reset(&self, user: &str, query: &str, admin_key: Option<&str>) -> Response {
        let mut request = self
            .client
            .delete(self.url(&format!("/rate/reset/{user}{query}")));
        if let Some(key) = admin_key {
            request = request.header("X-Admin-Key", key);
        }
        request.send().await.expect("DELETE /rate/reset")
    }
}

impl Drop for TestApp {
    fn drop(&mut self) {
        if let Some(stop) = self.shutdown.take() {
            let _ = stop.send(());
        }
    }
}

/// Percent-encodes every byte outside RFC 3986's unreserved characters
/// (so `+` is sent as `%2B`, not read as a space).
pub fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 3);
    for &b in s.as_bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The header `name` as text; panics when missing.
pub fn header(headers: &HeaderMap, name: &str) -> String {
    headers
        .get(name)
        .unwrap_or_else(|| panic!("header {name} missing from {headers:?}"))
        .to_str()
        .expect("ASCII header")
        .to_owned()
}

/// Asserts a 200 JSON answer and returns its headers and body.
pub async fn ok_json(response: Response) -> (HeaderMap, Value) {
    let status = response.status();
    let headers = response.headers().clone();
    let text = response.text().await.expect("body");
    assert_eq!(status, StatusCode::OK, "body: {text}");
    let body = serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"));
    (headers, body)
}

/// Asserts an RFC 9457 problem with `status` (content type, `type`,
/// `title`, `status`, `detail`, `instance`), that it leaks no SQL or
/// panic text, and returns its headers and body.
pub async fn problem(response: Response, status: u16) -> (HeaderMap, Value) {
    let actual = response.status();
    let headers = response.headers().clone();
    let text = response.text().await.expect("body");
    assert_eq!(actual.as_u16(), status, "body: {text}");
    let ctype = headers
        .get("content-type")
        .map(|v| v.to_str().unwrap_or_default().to_owned())
        .unwrap_or_default();
    assert_eq!(ctype, "application/problem+json", "content type of {text}");
    assert_no_leak(&text);
    let body: Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"));
    assert_eq!(body["status"], status, "{body}");
    for field in ["type", "title", "detail", "instance"] {
        assert!(
            body[field].as_str().is_some_and(|s| !s.is_empty()),
            "problem lacks {field}: {body}"
        );
    }
    (headers, body)
}

/// No error body carries SQL, driver names or panic messages (docs/semantics.md §6).
pub fn assert_no_leak(text: &str) {
    for word in ["SELECT", "INSERT", "rusqlite", "panicked"] {
        assert!(!text.contains(word), "error body leaks {word:?}: {text}");
    }
}

/// The `Retry-After` header as a number of seconds.
pub fn retry_after(headers: &HeaderMap) -> u64 {
    header(headers, "retry-after")
        .parse()
        .expect("Retry-After in whole seconds")
}
