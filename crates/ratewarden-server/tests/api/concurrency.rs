//! Under any concurrency exactly `limit` requests of a window pass
//! (docs/semantics.md §2: increment/read-back and count/insert are atomic).

use std::sync::Arc;

use tokio::sync::Barrier;

use crate::helpers::{TestApp, at, spawn_app_with_args};

const PARALLEL: usize = 200;
const LIMIT: u64 = 20;
const ROUNDS: u64 = 5;

/// Sends `PARALLEL` requests at once (released together by a barrier) and
/// returns their status codes.
async fn burst<F, Fut>(app: &TestApp, send: F) -> Vec<u16>
where
    F: Fn(reqwest::Client, String) -> Fut,
    Fut: std::future::Future<Output = reqwest::Result<reqwest::Response>> + Send + 'static,
{
    let barrier = Arc::new(Barrier::new(PARALLEL));
    let mut tasks = Vec::with_capacity(PARALLEL);
    for _ in 0..PARALLEL {
        let request = send(app.client.clone(), app.address.clone());
        let barrier = Arc::clone(&barrier);
        tasks.push(tokio::spawn(async move {
            barrier.wait().await;
            request.await.map(|r| r.status().as_u16())
        }));
    }
    let mut codes = Vec::with_capacity(PARALLEL);
    for task in tasks {
        codes.push(task.await.expect("task").expect("request answered"));
    }
    codes
}

fn tally(codes: &[u16]) -> (usize, usize) {
    let ok = codes.iter().filter(|&&c| c == 200).count();
    let refused = codes.iter().filter(|&&c| c == 429).count();
    (ok, refused)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn exactly_the_limit_of_200_parallel_pings_for_one_key_pass_in_each_window() {
    let mut app = spawn_app_with_args(&["--ping-limit", &LIMIT.to_string()]).await;
    for round in 0..ROUNDS {
        app.clock.set(at(round * 60, 0));
        let codes = burst(&app, |client, address| async move {
            client
                .get(format!("{address}/ping"))
                .header("X-Client-Key", "burst")
                .send()
                .await
        })
        .await;
        let (ok, refused) = tally(&codes);
        assert_eq!(ok as u64, LIMIT, "round {round}: {ok} allowed");
        assert_eq!(
            ok + refused,
            PARALLEL,
            "round {round}: other codes {codes:?}"
        );
        let (_, body) = crate::helpers::ok_json(app.status("burst").await).await;
        assert_eq!(
            body["count"], PARALLEL as u64,
            "round {round}: every attempt counted"
        );
    }
    app.stop().await;
    let rows = app.count_rows("SELECT COUNT(*) FROM api_calls WHERE key = 'burst'", []);
    assert_eq!(
        rows as u64,
        LIMIT * ROUNDS,
        "one audit row per allowed ping"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn exactly_the_limit_of_200_parallel_checks_for_one_user_and_endpoint_pass() {
    let mut app = spawn_app_with_args(&["--check-limit", &LIMIT.to_string()]).await;
    for round in 0..ROUNDS {
        // A full window later every earlier event has left.
        app.clock.set(at(round * 60, 0));
        let codes = burst(&app, |client, address| async move {
            client
                .post(format!("{address}/rate/check"))
                .header("X-User-Id", "12")
                .header("Content-Type", "application/json")
                .body(r#"{"endpoint":"/hot"}"#)
                .send()
                .await
        })
        .await;
        let (ok, refused) = tally(&codes);
        assert_eq!(ok as u64, LIMIT, "round {round}: {ok} allowed");
        assert_eq!(
            ok + refused,
            PARALLEL,
            "round {round}: other codes {codes:?}"
        );
        let (_, body) = crate::helpers::ok_json(app.rate_status("12", "/hot").await).await;
        assert_eq!(
            body["count"], LIMIT,
            "round {round}: only allowed checks recorded"
        );
    }
    app.stop().await;
    // Earlier rounds may already be pruned; the last one is all there.
    let rows = app.count_rows(
        "SELECT COUNT(*) FROM rate_events
         WHERE user_id = 12 AND endpoint = '/hot' AND created_at >= '2026-01-01T00:04:00'",
        [],
    );
    assert_eq!(rows as u64, LIMIT, "one event per allowed check");
}
