//! The store behind the answers: 100 requests at once for one key, and a
//! store that cannot be reached (fail closed or open).

use std::sync::Arc;

use ratewarden_core::ManualClock;
use ratewarden_server::startup::Application;
use tokio::sync::Barrier;

use super::{RATE_LIMIT_HEADERS, app, request};
use crate::helpers::{self, AppOptions, StoreKind, at, header, policy, settings, start};

/// 100 authorize requests at once for one key against a limit of 10:
/// exactly 10 pass.
pub async fn exactly_the_limit_of_100_parallel_requests_pass(store: StoreKind) {
    const PARALLEL: usize = 100;
    let app = app(
        store,
        &["127.0.0.1/32"],
        [policy("burst")
            .fixed_window(10, "1m")
            .key(["client_ip"])
            .match_path("/api/*")],
    )
    .await;
    for round in 0..2 {
        app.clock.set(at(round * 60, 0));
        let barrier = Arc::new(Barrier::new(PARALLEL));
        let mut tasks = Vec::with_capacity(PARALLEL);
        for i in 0..PARALLEL {
            let request = request(&app, "GET")
                .header("X-Forwarded-Uri", format!("/api/{i}"))
                .header("X-Forwarded-For", "203.0.113.50")
                .send();
            let barrier = Arc::clone(&barrier);
            tasks.push(tokio::spawn(async move {
                barrier.wait().await;
                request.await.map(|r| r.status().as_u16())
            }));
        }
        let mut codes = Vec::with_capacity(PARALLEL);
        for task in tasks {
            codes.push(task.await.unwrap().unwrap());
        }
        let ok = codes.iter().filter(|&&c| c == 200).count();
        let refused = codes.iter().filter(|&&c| c == 429).count();
        assert_eq!((ok, refused), (10, 90), "round {round}: {codes:?}");
    }
}

/// An unreachable store: a policy that fails closed answers 503 problem
/// details; one that fails open lets the request through without
/// advertising a quota.
#[tokio::test]
async fn an_unreachable_store_fails_closed_with_503_or_open_without_headers() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("rw.toml");
    let policies = helpers::policies([
        policy("strict")
            .fixed_window(10, "1m")
            .key(["client_ip"])
            .match_path("/strict"),
        policy("lenient")
            .fixed_window(10, "1m")
            .on_store_error("open")
            .key(["client_ip"])
            .match_path("/*"),
    ]);
    std::fs::write(&config, format!("on_store_error = \"closed\"\n{policies}")).unwrap();
    let options = AppOptions::args(&["--config", config.to_str().unwrap()]);
    let settings = settings(&options, &dir.path().join("unused.db"));
    let clock = Arc::new(ManualClock::new(start()));
    let application = Application::with_store(
        settings,
        ratewarden_testkit::FailingStore::unavailable(),
        clock,
    )
    .await
    .unwrap();
    let base = format!("http://{}", application.local_addr());
    tokio::spawn(application.run_until_stopped(std::future::pending()));
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let send = |uri: &'static str| {
        client
            .get(format!("{base}/v1/authorize"))
            .header("X-Forwarded-Uri", uri)
            .send()
    };
    let r = send("/strict").await.unwrap();
    assert_eq!(r.status(), 503);
    let ctype = header(r.headers(), "content-type");
    assert_eq!(ctype, "application/problem+json");
    let body = r.text().await.unwrap();
    assert!(
        !body.contains("connection refused"),
        "the cause stays in the log: {body}"
    );
    let r = send("/lenient").await.unwrap();
    assert_eq!(r.status(), 200);
    for name in RATE_LIMIT_HEADERS {
        assert!(
            r.headers().get(name).is_none(),
            "{name}: no quota was checked"
        );
    }
}

on_every_store!(
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    exactly_the_limit_of_100_parallel_requests_pass,
);
