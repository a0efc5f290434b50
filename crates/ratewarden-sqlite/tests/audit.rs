//! The audit log's bounds (`src/audit.rs`): its retention and its size,
//! pruned with every prune of the store, and the counts of rows pruned.

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

mod common;

use std::time::Duration;

use common::{NS, T0, acquire_audited, at, key, policy, rows, sql, temp_db};
use ratewarden_core::{Algorithm, AuditPruned, Store, Timestamp};
use ratewarden_sqlite::{SqliteOptions, SqliteStore};

/// The ids of the audit rows kept, oldest first.
fn ids(conn: &rusqlite::Connection) -> Vec<i64> {
    common::select(conn, "SELECT id FROM api_calls ORDER BY id", [], |r| {
        r.get(0)
    })
}

#[tokio::test]
async fn past_its_size_bound_the_audit_log_loses_its_oldest_rows_first() {
    let (_dir, path) = temp_db();
    let options = SqliteOptions {
        audit_max_rows: 5,
        ..SqliteOptions::default()
    };
    let store = SqliteStore::open(&path, options).unwrap();
    let p = policy(Algorithm::FixedWindow, 1_000, 60);
    for i in 0..12 {
        let k = key([format!("client-{i}")]);
        acquire_audited(&store, &p, &k, at(i), "/ping").await;
    }
    let conn = sql(&path);
    assert_eq!(
        rows(&conn, "api_calls"),
        12,
        "nothing is pruned between prunes"
    );
    // Well within the retention (7 days): only the size bound prunes.
    let deleted = store
        .prune(Algorithm::FixedWindow, Duration::from_secs(60), at(12))
        .await
        .unwrap();
    assert_eq!(deleted, 7);
    assert_eq!(ids(&conn), [8, 9, 10, 11, 12], "the newest five");
    let keys: Vec<String> =
        common::select(&conn, "SELECT key FROM api_calls ORDER BY id", [], |r| {
            r.get(0)
        });
    assert_eq!(keys[0], "client-7");
    assert_eq!(
        store.audit_rows_pruned(),
        Some(AuditPruned {
            retention: 0,
            size: 7
        })
    );
    store.close().await;
}

/// A prune step deletes at most a few thousand rows; a prune runs steps
/// until none is left over the bound, however far past it the log is.
#[tokio::test]
async fn a_log_far_past_its_bound_is_pruned_down_to_it_in_steps() {
    let (_dir, path) = temp_db();
    let options = SqliteOptions {
        audit_max_rows: 100,
        ..SqliteOptions::default()
    };
    let store = SqliteStore::open(&path, options).unwrap();
    // Rows written straight into the file, as a flood would leave them.
    let conn = sql(&path);
    conn.execute_batch(
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 20000)
         INSERT INTO api_calls (key, path, called_at)
         SELECT 'k' || i, '/ping', '2026-01-01T00:00:00.000000000Z' FROM n;",
    )
    .unwrap();
    let deleted = store
        .prune(Algorithm::Gcra, Duration::from_secs(60), at(1))
        .await
        .unwrap();
    assert_eq!(deleted, 19_900);
    assert_eq!(rows(&conn, "api_calls"), 100);
    assert_eq!(ids(&conn).first(), Some(&19_901));
    store.close().await;
}

/// The audit log was pruned only with the fixed window's state: after a
/// reload that left no fixed-window policy (`ping_algorithm = "gcra"`),
/// the pruner no longer prunes fixed windows, and the rows written until
/// then were kept forever, past the retention and any bound.
#[tokio::test]
async fn every_algorithms_prune_prunes_the_audit_log() {
    for algorithm in Algorithm::ALL {
        let (_dir, path) = temp_db();
        let options = SqliteOptions {
            audit_retention: Duration::from_secs(3600),
            audit_max_rows: 2,
            ..SqliteOptions::default()
        };
        let store = SqliteStore::open(&path, options).unwrap();
        // Audit rows come with the seed's fixed window (`/ping`).
        let ping = policy(Algorithm::FixedWindow, 1_000, 60);
        let old = Timestamp::from_unix_nanos(T0 * NS - 3_601 * NS);
        acquire_audited(&store, &ping, &key(["old"]), old, "/ping").await;
        for i in 0..3 {
            let k = key([format!("new-{i}")]);
            acquire_audited(&store, &ping, &k, at(i), "/ping").await;
        }
        store
            .prune(algorithm, Duration::from_secs(60), at(3))
            .await
            .unwrap();
        let conn = sql(&path);
        assert_eq!(rows(&conn, "api_calls"), 2, "{algorithm}");
        assert_eq!(
            store.audit_rows_pruned(),
            Some(AuditPruned {
                retention: 1,
                size: 1
            }),
            "{algorithm}"
        );
        store.close().await;
    }
}
