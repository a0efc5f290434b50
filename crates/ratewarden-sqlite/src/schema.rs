//! The seeds' schema (SPEC sections 1 and 2), created idempotently and
//! versioned with `PRAGMA user_version` so later releases can migrate.
//!
//! `api_calls.id` is a plain `INTEGER PRIMARY KEY` (the rowid), not
//! `AUTOINCREMENT`: the audit row is written on every allowed request and
//! AUTOINCREMENT costs an extra table update each time; ids still increase.

use rusqlite::Connection;

use crate::SqliteError;

/// The schema version this release writes and understands.
pub(crate) const VERSION: i64 = 2;

const V1: &str = "
CREATE TABLE IF NOT EXISTS rate_limit_windows (
    key          TEXT    NOT NULL,
    window_start TEXT    NOT NULL,
    count        INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (key, window_start)
);
CREATE INDEX IF NOT EXISTS idx_rl_key_window ON rate_limit_windows(key, window_start);

CREATE TABLE IF NOT EXISTS api_calls (
    id        INTEGER PRIMARY KEY,
    key       TEXT    NOT NULL,
    path      TEXT    NOT NULL,
    called_at TEXT    NOT NULL
);
CREATE INDEX IF NOT EXISTS idx_api_calls_called_at ON api_calls(called_at);

CREATE TABLE IF NOT EXISTS rate_events (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id    INTEGER NOT NULL,
    endpoint   TEXT    NOT NULL,
    created_at TEXT    NOT NULL
);
CREATE INDEX IF NOT EXISTS idx_rate_events_user_endpoint
    ON rate_events (user_id, endpoint, created_at);

-- ratewarden's additions: pruning deletes by time alone, which the seeds'
-- indexes (key first) cannot serve; without these every prune scans the table.
CREATE INDEX IF NOT EXISTS idx_rl_window_start ON rate_limit_windows(window_start);
CREATE INDEX IF NOT EXISTS idx_rate_events_created_at ON rate_events(created_at);
";

/// Version 2: tables for the algorithms the seeds do not have. Keys are
/// `Key::encoded()` BLOBs; times are INTEGER nanoseconds since the epoch.
const V2: &str = "
CREATE TABLE IF NOT EXISTS rw_sliding_window (
    key     BLOB    NOT NULL PRIMARY KEY,
    window  INTEGER NOT NULL,
    curr    INTEGER NOT NULL,
    prev    INTEGER NOT NULL,
    expires INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS idx_rw_sliding_window_expires ON rw_sliding_window(expires);

CREATE TABLE IF NOT EXISTS rw_gcra (
    key BLOB    NOT NULL PRIMARY KEY,
    tat INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS idx_rw_gcra_tat ON rw_gcra(tat);
";

/// Brings the database at `conn` to [`VERSION`].
///
/// # Errors
/// [`SqliteError::NewerSchema`] when the file was written by a newer
/// release; [`SqliteError::Sqlite`] when SQLite fails.
pub(crate) fn migrate(conn: &mut Connection) -> Result<(), SqliteError> {
    let found: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if found > VERSION {
        return Err(SqliteError::NewerSchema {
            found,
            known: VERSION,
        });
    }
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    // Every step is idempotent (IF NOT EXISTS), so a file at any older
    // version is brought up to date by running them all.
    tx.execute_batch(V1)?;
    tx.execute_batch(V2)?;
    tx.pragma_update(None, "user_version", VERSION)?;
    tx.commit()?;
    Ok(())
}
