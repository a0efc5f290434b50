//! The seeds' schema (docs/semantics.md §6 and §8), created idempotently and
//! versioned with `PRAGMA user_version` so later releases can migrate.
//!
//! `api_calls.id` is a plain `INTEGER PRIMARY KEY` (the rowid), not
//! `AUTOINCREMENT`: the audit row is written on every allowed request and
//! AUTOINCREMENT costs an extra table update each time; ids still increase.

use rusqlite::Connection;

use crate::SqliteError;

/// The schema version this release writes and understands.
pub(crate) const VERSION: i64 = 4;

/// Version 1: the seeds' tables. A new file gets `rate_limit_windows` in
/// its version 4 form at once
/// (`WITHOUT ROWID`, no `idx_rl_key_window`: see [`V4_WINDOWS`]).
const V1: &str = "
CREATE TABLE IF NOT EXISTS rate_limit_windows (
    key          TEXT    NOT NULL,
    window_start TEXT    NOT NULL,
    count        INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (key, window_start)
) WITHOUT ROWID;

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

/// Version 3: state namespaced by policy. Fixed windows and sliding logs
/// of policies other than the seed routes' get tables of their own; the
/// sliding window and GCRA tables gain a `policy` column in their primary
/// key ([`to_v3`] rebuilds them).
const V3: &str = "
CREATE TABLE IF NOT EXISTS rw_fixed_window (
    policy  TEXT    NOT NULL,
    key     BLOB    NOT NULL,
    window  INTEGER NOT NULL,
    count   INTEGER NOT NULL,
    expires INTEGER NOT NULL,
    PRIMARY KEY (policy, key)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS idx_rw_fixed_window_expires ON rw_fixed_window(expires);

CREATE TABLE IF NOT EXISTS rw_sliding_log (
    policy TEXT    NOT NULL,
    key    BLOB    NOT NULL,
    at     INTEGER NOT NULL,
    n      INTEGER NOT NULL,
    PRIMARY KEY (policy, key, at)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS idx_rw_sliding_log_at ON rw_sliding_log(at);
";

/// `rw_sliding_window` and `rw_gcra` as of version 3.
const V3_COUNTERS: &str = "
CREATE TABLE rw_sliding_window (
    policy  TEXT    NOT NULL,
    key     BLOB    NOT NULL,
    window  INTEGER NOT NULL,
    curr    INTEGER NOT NULL,
    prev    INTEGER NOT NULL,
    expires INTEGER NOT NULL,
    PRIMARY KEY (policy, key)
) WITHOUT ROWID;
CREATE INDEX idx_rw_sliding_window_expires ON rw_sliding_window(expires);

CREATE TABLE rw_gcra (
    policy TEXT    NOT NULL,
    key    BLOB    NOT NULL,
    tat    INTEGER NOT NULL,
    PRIMARY KEY (policy, key)
) WITHOUT ROWID;
CREATE INDEX idx_rw_gcra_tat ON rw_gcra(tat);
";

/// Version 4: `rate_limit_windows` as a `WITHOUT ROWID` table, the seed's
/// columns and primary key unchanged. A rowid table with a composite
/// primary key is two B-trees (the rows, and the key's automatic index),
/// and seed A's `idx_rl_key_window` on the same two columns was a third:
/// every new window wrote all three and every increment looked the row
/// up twice. Now the primary key is the table, one tree; the seed's index
/// duplicated the primary key, so it is dropped. [`to_v4`] rebuilds the
/// table, keeping every row.
const V4_WINDOWS: &str = "
CREATE TABLE rate_limit_windows_v4 (
    key          TEXT    NOT NULL,
    window_start TEXT    NOT NULL,
    count        INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (key, window_start)
) WITHOUT ROWID;
INSERT INTO rate_limit_windows_v4 (key, window_start, count)
    SELECT key, window_start, count FROM rate_limit_windows;
DROP TABLE rate_limit_windows;
ALTER TABLE rate_limit_windows_v4 RENAME TO rate_limit_windows;
CREATE INDEX idx_rl_window_start ON rate_limit_windows(window_start);
";

/// Every table ratewarden has ever created (versions 1 to 3). A table of
/// any other name, besides SQLite's own `sqlite_*` tables, belongs to
/// someone else.
pub(crate) const OWN_TABLES: [&str; 7] = [
    "rate_limit_windows",
    "api_calls",
    "rate_events",
    "rw_sliding_window",
    "rw_gcra",
    "rw_fixed_window",
    "rw_sliding_log",
];

/// Decides, by reading only, whether ratewarden may write to the database
/// at `conn`: a new (empty) file, a file holding only ratewarden's tables
/// (the seeds' files have `user_version` 0), or a ratewarden file of a
/// version it understands.
///
/// Refused: a file with tables or views of another application, unless
/// ratewarden already owns it (`user_version` above 0 and at least one of
/// [`OWN_TABLES`] present, so a table a user added to a ratewarden file is
/// tolerated); and a file from a newer release. Names compare as SQLite
/// does, ASCII case-insensitively.
///
/// # Errors
/// [`SqliteError::ForeignDatabase`], [`SqliteError::NewerSchema`], or
/// [`SqliteError::Sqlite`] when the file cannot be read (for example it is
/// not a database).
pub(crate) fn check_owner(conn: &Connection) -> Result<(), SqliteError> {
    let found: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    let mut own = false;
    let mut foreign = Vec::new();
    let mut names = conn.prepare(
        "SELECT name FROM main.sqlite_master WHERE type IN ('table', 'view') ORDER BY name",
    )?;
    let mut rows = names.query([])?;
    while let Some(row) = rows.next()? {
        let name: String = row.get(0)?;
        if is_internal(&name) {
            continue;
        }
        if OWN_TABLES.iter().any(|t| t.eq_ignore_ascii_case(&name)) {
            own = true;
        } else {
            foreign.push(name);
        }
    }
    // Only ratewarden sets `user_version` together with its tables.
    let claimed = found > 0 && own;
    if !foreign.is_empty() && !claimed {
        return Err(SqliteError::ForeignDatabase { tables: foreign });
    }
    if found > VERSION {
        return Err(SqliteError::NewerSchema {
            found,
            known: VERSION,
        });
    }
    Ok(())
}

/// SQLite's own tables (`sqlite_sequence`, `sqlite_stat1`, ...).
fn is_internal(name: &str) -> bool {
    name.get(..7)
        .is_some_and(|p| p.eq_ignore_ascii_case("sqlite_"))
}

/// Brings the database at `conn` to [`VERSION`], after checking again,
/// inside the write transaction, that the file is ratewarden's
/// ([`check_owner`]): another process may have changed it since it was
/// opened.
///
/// # Errors
/// [`SqliteError::ForeignDatabase`] for another application's database;
/// [`SqliteError::NewerSchema`] when the file was written by a newer
/// release; [`SqliteError::Sqlite`] when SQLite fails.
pub(crate) fn migrate(conn: &mut Connection) -> Result<(), SqliteError> {
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    check_owner(&tx)?;
    // Every step is idempotent (IF NOT EXISTS, or checks what is there),
    // so a file at any older version is brought up to date by running
    // them all.
    tx.execute_batch(V1)?;
    tx.execute_batch(V2)?;
    tx.execute_batch(V3)?;
    to_v3(&tx)?;
    to_v4(&tx)?;
    tx.pragma_update(None, "user_version", VERSION)?;
    tx.commit()?;
    Ok(())
}

/// Rebuilds a rowid `rate_limit_windows` as version 4's `WITHOUT ROWID`
/// table ([`V4_WINDOWS`]); a table already without rowid is left alone.
fn to_v4(conn: &Connection) -> rusqlite::Result<()> {
    let without_rowid: bool = conn.query_row(
        "SELECT wr FROM pragma_table_list WHERE schema = 'main' AND name = 'rate_limit_windows' COLLATE NOCASE",
        [],
        |r| r.get(0),
    )?;
    if !without_rowid {
        conn.execute_batch(V4_WINDOWS)?;
    }
    Ok(())
}

/// Namespaces version 2's state by policy. Before version 3 only the two
/// seed routes had state: `/ping` (one-part keys, any algorithm) and
/// `/rate/check` (a sliding log on `rate_events`, seed-shaped user ids).
/// So the old `rw_sliding_window` and `rw_gcra` rows, and the
/// `rate_events` rows of other key shapes (`user_id = 0`, written by
/// `/ping` as a sliding log), are all `ping`'s: they move to the policy
/// `ping`, and nothing counted is lost.
fn to_v3(conn: &Connection) -> rusqlite::Result<()> {
    let has_policy: bool = conn.query_row(
        "SELECT COUNT(*) > 0 FROM pragma_table_info('rw_gcra') WHERE name = 'policy'",
        [],
        |r| r.get(0),
    )?;
    if has_policy {
        return Ok(());
    }
    conn.execute_batch(
        "
ALTER TABLE rw_sliding_window RENAME TO rw_sliding_window_v2;
ALTER TABLE rw_gcra RENAME TO rw_gcra_v2;
DROP INDEX IF EXISTS idx_rw_sliding_window_expires;
DROP INDEX IF EXISTS idx_rw_gcra_tat;",
    )?;
    conn.execute_batch(V3_COUNTERS)?;
    conn.execute_batch(
        "
INSERT INTO rw_sliding_window (policy, key, window, curr, prev, expires)
    SELECT 'ping', key, window, curr, prev, expires FROM rw_sliding_window_v2;
INSERT INTO rw_gcra (policy, key, tat) SELECT 'ping', key, tat FROM rw_gcra_v2;
DROP TABLE rw_sliding_window_v2;
DROP TABLE rw_gcra_v2;
INSERT INTO rw_sliding_log (policy, key, at, n)
    SELECT 'ping', endpoint, at, COUNT(*) FROM (
        SELECT endpoint, unixepoch(substr(created_at, 1, 19)) * 1000000000
            + CAST(substr(created_at, 21, 9) AS INTEGER) AS at
        FROM rate_events WHERE user_id = 0
    ) WHERE at IS NOT NULL GROUP BY endpoint, at
    ON CONFLICT (policy, key, at) DO UPDATE SET n = n + excluded.n;
DELETE FROM rate_events WHERE user_id = 0;",
    )?;
    Ok(())
}
