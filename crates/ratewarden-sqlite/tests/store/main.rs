//! Black-box tests of the SQLite store: decisions through the public
//! [`Store`](ratewarden_core::Store) API, and what lands in the seeds'
//! tables, read back with a separate rusqlite connection. Every test has
//! its own database file and explicit timestamps; nothing sleeps.
//!
//! One module per subject; this file holds what several of them read.

#[path = "../common/mod.rs"]
mod common;

mod closing;
mod concurrency;
mod fixed_window;
mod keys;
mod opening;
mod persistence;
mod prune;
mod reset;
mod schema;
mod sliding_log;
mod writes_nothing;

use std::time::Duration;

use ratewarden_core::{Key, Outcome, Policy, Store, Timestamp};
use ratewarden_sqlite::SqliteStore;
use rusqlite::Connection;

use common::select;

/// The names of the tables that are not SQLite's own, sorted.
fn user_tables(conn: &Connection) -> Vec<String> {
    select(
        conn,
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name",
        [],
        |r| r.get(0),
    )
}

/// `rate_limit_windows`: (type of key, key, window start, count), by key and start.
fn windows(conn: &Connection) -> Vec<(String, String, String, i64)> {
    select(
        conn,
        "SELECT typeof(key), CAST(key AS TEXT), window_start, count
             FROM rate_limit_windows ORDER BY key, window_start",
        [],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
    )
}

/// `api_calls`: (type of key, key, path, called at), oldest first.
fn audit_rows(conn: &Connection) -> Vec<(String, String, String, String)> {
    select(
        conn,
        "SELECT typeof(key), CAST(key AS TEXT), path, called_at FROM api_calls ORDER BY id",
        [],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
    )
}

/// A denial with `retry_after`.
fn denied(retry_after: Duration) -> Outcome {
    Outcome::Denied { retry_after }
}

/// `rate_events`: (type of user id, user id, type of endpoint, endpoint,
/// created at), oldest first.
fn events(conn: &Connection) -> Vec<(String, i64, String, String, String)> {
    select(
        conn,
        "SELECT typeof(user_id), user_id, typeof(endpoint), CAST(endpoint AS TEXT), created_at
             FROM rate_events ORDER BY id",
        [],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
    )
}

/// The count `status` reads for `k` under `p` at `now`.
async fn used(store: &SqliteStore, p: &Policy, k: &Key, now: Timestamp) -> u64 {
    store
        .status(p, k, now)
        .await
        .expect("the store answers")
        .used
}
