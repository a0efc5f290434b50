//! Pruning deletes exactly what is due (windows, log events, audit rows),
//! in steps, answering decisions between them; the audit log's sampling.

use std::time::Duration;

use ratewarden_core::{Algorithm, Store, Timestamp};
use ratewarden_sqlite::{SqliteOptions, SqliteStore};
use rusqlite::Connection;

use crate::common::{
    NS, T0, acquire, acquire_audited, at, at_nanos, int, key, open, policy, rows, sql, temp_db,
};
use crate::{audit_rows, used, windows};

fn window_starts(conn: &Connection) -> Vec<String> {
    windows(conn).into_iter().map(|(_, _, s, _)| s).collect()
}

#[tokio::test]
async fn pruning_deletes_fixed_windows_older_than_two_windows_and_keeps_the_current_and_previous() {
    let (_dir, path) = temp_db();
    let store = open(&path);
    let p = policy(Algorithm::FixedWindow, 5, 60);
    let alice = key(["alice"]);
    let w = Duration::from_secs(60);
    acquire(&store, &p, &alice, Timestamp::from_unix_secs(T0 - 60)).await;
    for t in [0, 60, 120] {
        acquire(&store, &p, &alice, at(t)).await;
    }
    let conn = sql(&path);
    assert_eq!(rows(&conn, "rate_limit_windows"), 4);

    // At 00:02:01 the window of 00:00:00 is exactly two windows + 1 s old.
    let deleted = store
        .prune(Algorithm::FixedWindow, w, at(121))
        .await
        .unwrap();
    assert_eq!(deleted, 1);
    assert_eq!(
        window_starts(&conn),
        [
            "2026-01-01T00:00:00Z",
            "2026-01-01T00:01:00Z",
            "2026-01-01T00:02:00Z"
        ]
    );

    let deleted = store
        .prune(Algorithm::FixedWindow, w, at(122))
        .await
        .unwrap();
    assert_eq!(deleted, 1, "00:00:00 is now more than 2 W + 1 s old");
    assert_eq!(
        window_starts(&conn),
        ["2026-01-01T00:01:00Z", "2026-01-01T00:02:00Z"],
        "the previous and the current window are kept"
    );
    assert_eq!(used(&store, &p, &alice, at(122)).await, 1);

    let again = store
        .prune(Algorithm::FixedWindow, w, at(122))
        .await
        .unwrap();
    assert_eq!(again, 0);
    store.close().await;
}

#[tokio::test]
async fn pruning_deletes_sliding_log_events_exactly_one_window_old_and_keeps_newer_ones() {
    let (_dir, path) = temp_db();
    let store = open(&path);
    let p = policy(Algorithm::SlidingLog, 100, 10);
    let w = Duration::from_secs(10);
    let a = key(["1", "/a"]);
    let b = key(["2", "/b"]);
    for t in [at(0), at(5), at_nanos(10 * NS - 1)] {
        assert!(acquire(&store, &p, &a, t).await.allowed());
    }
    assert!(acquire(&store, &p, &b, at(3)).await.allowed());
    let conn = sql(&path);

    let before = store.status(&p, &a, at(10)).await.unwrap();
    assert_eq!(before.used, 2, "the event at 0 s has left at 10 s");
    let deleted = store.prune(Algorithm::SlidingLog, w, at(10)).await.unwrap();
    assert_eq!(deleted, 1, "the event exactly W old");
    assert_eq!(rows(&conn, "rate_events"), 3);
    let after = store.status(&p, &a, at(10)).await.unwrap();
    assert_eq!(after, before, "pruning changes no decision");

    let deleted = store
        .prune(Algorithm::SlidingLog, w, at_nanos(15 * NS - 1))
        .await
        .unwrap();
    assert_eq!(
        deleted, 1,
        "b's event at 3 s; a's at 5 s is 1 ns short of W"
    );
    let deleted = store.prune(Algorithm::SlidingLog, w, at(15)).await.unwrap();
    assert_eq!(deleted, 1, "a's event at 5 s");
    assert_eq!(used(&store, &p, &a, at(15)).await, 1);
    assert_eq!(used(&store, &p, &b, at(15)).await, 0);

    let fixed = store
        .prune(Algorithm::FixedWindow, w, at(1000))
        .await
        .unwrap();
    assert_eq!(fixed, 0);
    assert_eq!(
        rows(&conn, "rate_events"),
        1,
        "fixed-window pruning leaves events"
    );
    store.close().await;
}

/// The audit log's sampling: every allowed request (the seed's default),
/// one in N, or none; denied requests never; `audit_rows` counts what was
/// committed.
#[tokio::test]
async fn the_audit_log_keeps_every_one_in_n_allowed_requests_or_none() {
    let p = policy(Algorithm::FixedWindow, 7, 60);
    let alice = key(["alice"]);
    for (sample, expected) in [(1, 7), (3, 3), (0, 0)] {
        let (_dir, path) = temp_db();
        let options = SqliteOptions {
            audit_sample: sample,
            ..SqliteOptions::default()
        };
        let store = SqliteStore::open(&path, options).unwrap();
        for i in 0..9 {
            let d = acquire_audited(&store, &p, &alice, at(i), "/ping").await;
            assert_eq!(d.allowed(), i < 7, "request {i}");
        }
        assert_eq!(store.audit_rows(), Some(expected), "sample {sample}");
        store.close().await;
        let conn = sql(&path);
        assert_eq!(rows(&conn, "api_calls") as u64, expected, "sample {sample}");
        assert_eq!(
            int(&conn, "SELECT count FROM rate_limit_windows", []),
            9,
            "sampling changes no count"
        );
    }
}

/// A prune of more rows than one step takes (at most 4,000 per
/// statement) runs step after step until nothing is left, and answers
/// the total.
#[tokio::test]
async fn a_large_prune_runs_in_steps_and_deletes_everything_due() {
    let (_dir, path) = temp_db();
    let store = open(&path);
    let p = policy(Algorithm::SlidingLog, 100_000, 10);
    assert!(
        acquire(&store, &p, &key(["1", "/a"]), at(0))
            .await
            .allowed()
    );
    {
        let conn = sql(&path);
        conn.execute(
            "INSERT INTO rate_events (user_id, endpoint, created_at)
             WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 9999)
             SELECT i, '/a', '2026-01-01T00:00:00.000000000Z' FROM n",
            [],
        )
        .unwrap();
        assert_eq!(rows(&conn, "rate_events"), 10_000);
    }
    let deleted = store
        .prune(Algorithm::SlidingLog, Duration::from_secs(10), at(20))
        .await
        .unwrap();
    assert_eq!(deleted, 10_000);
    assert_eq!(rows(&sql(&path), "rate_events"), 0);
    store.close().await;
}

/// Decisions go on while a long prune runs: the prune yields the writer
/// between its steps, so decisions sent after it started are answered
/// (and stored exactly) before it finishes, not after.
#[tokio::test]
async fn decisions_are_answered_between_the_steps_of_a_long_prune() {
    let (_dir, path) = temp_db();
    let store = open(&path);
    {
        let conn = sql(&path);
        conn.execute(
            "INSERT INTO rate_events (user_id, endpoint, created_at)
             WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 50000)
             SELECT i % 5000, '/a', '2026-01-01T00:00:00.000000000Z' FROM n",
            [],
        )
        .unwrap();
    }
    let p = policy(Algorithm::FixedWindow, 1_000_000, 60);
    let alice = key(["alice"]);
    let prune = store.prune(Algorithm::SlidingLog, Duration::from_secs(10), at(20));
    tokio::pin!(prune);
    let mut meanwhile = 0;
    let deleted = loop {
        tokio::select! {
            biased;
            deleted = &mut prune => break deleted.unwrap(),
            d = acquire(&store, &p, &alice, at(20)) => {
                assert!(d.allowed());
                meanwhile += 1;
                assert_eq!(d.used, meanwhile, "decision {meanwhile}: counted exactly once");
            }
        }
    };
    assert_eq!(deleted, 50_000);
    assert!(
        meanwhile >= 3,
        "only {meanwhile} decisions answered during the prune"
    );
    store.close().await;
}

#[tokio::test]
async fn pruning_deletes_audit_rows_older_than_the_retention() {
    let (_dir, path) = temp_db();
    let options = SqliteOptions {
        audit_retention: Duration::from_secs(3600),
        ..SqliteOptions::default()
    };
    let store = SqliteStore::open(&path, options).unwrap();
    let p = policy(Algorithm::FixedWindow, 100, 60);
    let alice = key(["alice"]);
    let hour = 3600 * NS;
    let times = [
        Timestamp::from_unix_nanos(T0 * NS - hour - 1),
        Timestamp::from_unix_nanos(T0 * NS - hour),
        Timestamp::from_unix_secs(T0 - 1),
        at(0),
    ];
    for t in times {
        acquire_audited(&store, &p, &alice, t, "/ping").await;
    }
    let conn = sql(&path);
    assert_eq!(rows(&conn, "api_calls"), 4);
    let windows_before = rows(&conn, "rate_limit_windows");

    // A window long enough that no counter is old enough: only audit rows go.
    let deleted = store
        .prune(Algorithm::FixedWindow, Duration::from_secs(7200), at(0))
        .await
        .unwrap();
    assert_eq!(deleted, 1, "only the row older than an hour");
    let again = store
        .prune(Algorithm::SlidingLog, Duration::from_secs(60), at(0))
        .await
        .unwrap();
    assert_eq!(again, 0);
    let kept: Vec<String> = audit_rows(&conn).into_iter().map(|r| r.3).collect();
    assert_eq!(
        kept,
        [
            "2025-12-31T23:00:00.000000000Z",
            "2025-12-31T23:59:59.000000000Z",
            "2026-01-01T00:00:00.000000000Z",
        ]
    );
    assert_eq!(rows(&conn, "rate_limit_windows"), windows_before);
    store.close().await;
}
