//! The stores' size bounds through a real `ratewarden serve`: the memory
//! store's `--max-keys` (a new key at the bound follows the failure mode,
//! the keys held are decided exactly) and the SQLite audit log's
//! `--audit-max-rows`, with their metrics and the start's log line.

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

mod common;

use std::time::{Duration, Instant};

use common::{Instance, avoid_window_edge};

const DAY: Duration = Duration::from_secs(86_400);

/// `GET /ping` as `key`: the status and whether it carried a quota.
async fn ping(client: &reqwest::Client, app: &Instance, key: &str) -> (u16, bool) {
    let r = client
        .get(format!("{}/ping", app.base))
        .header("X-Client-Key", key)
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.headers().contains_key("ratelimit"))
}

/// The value of the series `name{labels…}` in `/metrics` (labels as
/// written there, e.g. `store="memory"`).
async fn metric(client: &reqwest::Client, app: &Instance, series: &str) -> Option<f64> {
    let text = client
        .get(format!("{}/metrics", app.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

#[tokio::test]
async fn at_max_keys_a_new_key_follows_the_failure_mode_and_held_keys_are_decided_exactly() {
    let args = [
        "--max-keys",
        "2",
        "--ping-limit",
        "3",
        "--ping-window",
        "86400",
    ];
    let open = Instance::start("memory", &args).await;
    let closed = Instance::start(
        "memory",
        &[&args[..], &["--on-store-error", "closed"]].concat(),
    )
    .await;
    assert!(open.log().contains("max_keys=2"), "{}", open.log());
    let client = reqwest::Client::new();
    avoid_window_edge(DAY, Duration::from_secs(60)).await;
    for app in [&open, &closed] {
        assert_eq!(ping(&client, app, "a").await, (200, true));
        assert_eq!(ping(&client, app, "b").await, (200, true));
    }
    // A third key: allowed without a quota, or refused.
    assert_eq!(ping(&client, &open, "c").await, (200, false));
    assert_eq!(ping(&client, &closed, "c").await.0, 503);
    // The keys held count on to their limit of 3 and are refused past it.
    for app in [&open, &closed] {
        assert_eq!(ping(&client, app, "a").await, (200, true));
        assert_eq!(ping(&client, app, "a").await, (200, true));
        assert_eq!(ping(&client, app, "a").await.0, 429);
        let refused = r#"ratewarden_keys_refused_total{store="memory"}"#;
        assert_eq!(metric(&client, app, refused).await, Some(1.0));
        let max = r#"ratewarden_keys_max{store="memory"}"#;
        assert_eq!(metric(&client, app, max).await, Some(2.0));
        let keys = r#"ratewarden_keys{store="memory"}"#;
        assert_eq!(metric(&client, app, keys).await, Some(2.0));
    }
    assert!(
        open.log().contains("the memory store is full"),
        "the refusal is logged: {}",
        open.log()
    );
}

#[tokio::test]
async fn max_keys_comes_from_the_environment_and_zero_is_refused() {
    let app = Instance::serve(&["--store", "memory"], &[("RATEWARDEN_MAX_KEYS", "7")]).await;
    assert!(app.log().contains("max_keys=7"), "{}", app.log());
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_ratewarden"))
        .args(["serve", "--store", "memory", "--listen", "127.0.0.1:0"])
        .env("RATEWARDEN_MAX_KEYS", "0")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{err}");
    assert!(
        err.contains("RATEWARDEN_MAX_KEYS") && err.contains("0 would refuse every new key"),
        "{err}"
    );
}

#[tokio::test]
async fn the_audit_log_is_pruned_to_audit_max_rows_and_the_metric_counts_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("audit.db");
    let store = format!("sqlite:{}", db.display());
    // 8 s windows: the pruner runs every second.
    let app = Instance::start(
        &store,
        &[
            "--audit-max-rows",
            "5",
            "--ping-limit",
            "1000",
            "--ping-window",
            "8",
            "--check-window",
            "8",
        ],
    )
    .await;
    assert!(app.log().contains("audit_max_rows=5"), "{}", app.log());
    let client = reqwest::Client::new();
    for i in 0..12 {
        assert_eq!(ping(&client, &app, &format!("k{i}")).await.0, 200);
    }
    let pruned = r#"ratewarden_audit_rows_pruned_total{store="sqlite",reason="size"}"#;
    let deadline = Instant::now() + Duration::from_secs(60);
    while metric(&client, &app, pruned).await != Some(7.0) {
        assert!(
            Instant::now() < deadline,
            "no prune for size within 60 s: {:?}; log:\n{}",
            metric(&client, &app, pruned).await,
            app.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let conn = rusqlite::Connection::open(&db).unwrap();
    let keys: Vec<String> = conn
        .prepare("SELECT key FROM api_calls ORDER BY id")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(keys, ["k7", "k8", "k9", "k10", "k11"], "the newest five");
    assert!(
        app.log().contains("the audit log is at its size bound"),
        "{}",
        app.log()
    );
}
