//! Helpers for the SQLite store's black-box tests: a fresh database file per
//! test, policies, explicit timestamps, and a plain rusqlite connection to
//! look at what the store wrote.

#![allow(dead_code)] // each test binary uses part of this

use std::path::{Path, PathBuf};
use std::time::Duration;

use ratewarden_core::{
    Acquire, Algorithm, Audit, Batch, Decision, Key, Policy, Quota, Store, Timestamp,
};
use ratewarden_sqlite::{SqliteOptions, SqliteStore};
use rusqlite::Connection;
use tempfile::TempDir;

/// 2026-01-01T00:00:00Z, a window start for every window that divides a day.
pub const T0: u64 = 1_767_225_600;

/// Nanoseconds per second.
pub const NS: u64 = 1_000_000_000;

/// The instant `secs` seconds after [`T0`].
pub fn at(secs: u64) -> Timestamp {
    Timestamp::from_unix_secs(T0 + secs)
}

/// The instant `nanos` nanoseconds after [`T0`].
pub fn at_nanos(nanos: u64) -> Timestamp {
    Timestamp::from_unix_nanos(T0 * NS + nanos)
}

/// A temporary directory (deleted when dropped) and a database path inside it.
pub fn temp_db() -> (TempDir, PathBuf) {
    let dir = TempDir::new().expect("create a temporary directory");
    let path = dir.path().join("ratewarden.db");
    (dir, path)
}

/// Opens the store at `path` with the default options.
pub fn open(path: &Path) -> SqliteStore {
    SqliteStore::open(path, SqliteOptions::default()).expect("open the SQLite store")
}

/// A policy of `limit` per `window_secs` seconds, with the seed route's
/// name for its algorithm so that its state lands in the seeds' tables:
/// `ping` for the fixed window (counting denied attempts, as seed A),
/// `check` for the sliding log, `test-<algorithm>` for the others.
pub fn policy(algorithm: Algorithm, limit: u64, window_secs: u64) -> Policy {
    let quota = Quota::new(limit, Duration::from_secs(window_secs)).expect("valid quota");
    match algorithm {
        Algorithm::FixedWindow => Policy::new("ping", algorithm, quota.counting_denied()),
        Algorithm::SlidingLog => Policy::new("check", algorithm, quota),
        _ => Policy::new(format!("test-{algorithm}"), algorithm, quota),
    }
}

/// Decides one check as a batch of one.
pub async fn acquire_one(store: &SqliteStore, check: Acquire<'_>, now: Timestamp) -> Decision {
    let decisions = store
        .acquire(&Batch::one(now, check))
        .await
        .expect("the store answers");
    decisions[0]
}

/// A key from its parts.
pub fn key<P: AsRef<[u8]>>(parts: impl IntoIterator<Item = P>) -> Key {
    Key::new(parts).expect("valid key")
}

/// One request of cost 1 for `key` at `now`, without an audit entry.
pub async fn acquire(store: &SqliteStore, policy: &Policy, key: &Key, now: Timestamp) -> Decision {
    acquire_one(store, Acquire::one(policy, key), now).await
}

/// One request of cost 1 for `key` at `now`, audited under `path`.
pub async fn acquire_audited(
    store: &SqliteStore,
    policy: &Policy,
    key: &Key,
    now: Timestamp,
    path: &str,
) -> Decision {
    let check = Acquire {
        audit: Some(Audit { path }),
        ..Acquire::one(policy, key)
    };
    acquire_one(store, check, now).await
}

/// A second, plain connection to the database file, for inspection.
pub fn sql(path: &Path) -> Connection {
    let conn = Connection::open(path).expect("open the database with rusqlite");
    conn.busy_timeout(Duration::from_secs(10))
        .expect("set a busy timeout");
    conn
}

/// The number of rows of `table`.
pub fn rows(conn: &Connection, table: &str) -> i64 {
    conn.query_row(&format!("SELECT COUNT(*) FROM {table}"), [], |r| r.get(0))
        .expect("count rows")
}

/// The single integer answer of `query` run with `params`.
pub fn int(conn: &Connection, query: &str, params: impl rusqlite::Params) -> i64 {
    conn.query_row(query, params, |r| r.get(0))
        .expect("an integer answer")
}

/// Every row `query` returns, each mapped by `row`.
pub fn select<T>(
    conn: &Connection,
    query: &str,
    params: impl rusqlite::Params,
    row: impl FnMut(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
) -> Vec<T> {
    let mut stmt = conn.prepare(query).expect("prepare the query");
    stmt.query_map(params, row)
        .expect("run the query")
        .collect::<Result<_, _>>()
        .expect("read the rows")
}

/// Every row of the store's three tables, as text, in a stable order: a
/// snapshot to compare before and after an operation.
pub fn snapshot(conn: &Connection) -> Vec<String> {
    let queries = [
        "SELECT 'w', quote(key), window_start, count FROM rate_limit_windows ORDER BY 2, 3",
        "SELECT 'a', id, quote(key), path || ' ' || called_at FROM api_calls ORDER BY id",
        "SELECT 'e', id, user_id, quote(endpoint) || ' ' || created_at FROM rate_events ORDER BY id",
    ];
    queries
        .into_iter()
        .flat_map(|query| {
            select(conn, query, [], |r| {
                let cells = (0..4)
                    .map(|i| Ok(format!("{:?}", r.get::<_, rusqlite::types::Value>(i)?)))
                    .collect::<rusqlite::Result<Vec<String>>>()?;
                Ok(cells.join("|"))
            })
        })
        .collect()
}
