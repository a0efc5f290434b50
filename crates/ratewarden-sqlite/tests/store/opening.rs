//! Which files open: new ones, the seeds', and older ratewarden files,
//! migrated with their counts; which are refused, untouched: a newer
//! schema and other applications' databases.

use std::path::{Path, PathBuf};
use std::time::Duration;

use ratewarden_core::{Algorithm, Outcome, Policy, Store};
use ratewarden_sqlite::{SqliteError, SqliteOptions, SqliteStore};
use rusqlite::Connection;

use crate::common::{T0, acquire, at, int, key, open, policy, rows, sql, temp_db};
use crate::schema::{TABLES, assert_seed_schema};
use crate::user_tables;

#[tokio::test]
async fn a_database_with_a_newer_schema_version_is_refused() {
    let (_dir, path) = temp_db();
    {
        let conn = sql(&path);
        conn.pragma_update(None, "user_version", 99).unwrap();
    }
    let err = SqliteStore::open(&path, SqliteOptions::default()).unwrap_err();
    assert!(
        matches!(
            err,
            SqliteError::NewerSchema {
                found: 99,
                known: 4
            }
        ),
        "{err:?}"
    );
    let conn = sql(&path);
    assert_eq!(int(&conn, "PRAGMA user_version", []), 99, "left as found");
    assert!(user_tables(&conn).is_empty(), "no table was created");
    assert_eq!(journal_mode(&conn), "delete", "refused before WAL mode");
}

fn journal_mode(conn: &Connection) -> String {
    conn.query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .expect("read the journal mode")
}

/// Runs `setup` on a plain rusqlite connection to a new file at `path`,
/// then closes it.
fn prepare(path: &Path, setup: &str) {
    let conn = sql(path);
    conn.execute_batch(setup).expect("prepare the database");
}

/// The file's bytes and whether SQLite left a `-wal` or `-shm` beside it.
fn file_state(path: &Path) -> (Vec<u8>, bool, bool) {
    let side = |suffix: &str| {
        let mut p = path.as_os_str().to_owned();
        p.push(suffix);
        PathBuf::from(p).exists()
    };
    (
        std::fs::read(path).expect("read the database file"),
        side("-wal"),
        side("-shm"),
    )
}

/// Opening must fail with [`SqliteError::ForeignDatabase`] naming exactly
/// `foreign`, and leave the file byte for byte as it was.
fn assert_refused_untouched(path: &Path, foreign: &[&str]) {
    let before = file_state(path);
    let err = SqliteStore::open(path, SqliteOptions::default())
        .expect_err("another application's database is refused");
    match &err {
        SqliteError::ForeignDatabase { tables } => assert_eq!(tables, foreign),
        other => panic!("expected ForeignDatabase, got {other:?}"),
    }
    let message = err.to_string();
    for table in foreign {
        assert!(message.contains(table), "{message}");
    }
    assert_eq!(file_state(path), before, "the file is untouched");
}

#[tokio::test]
async fn a_foreign_database_is_refused_instead_of_getting_ratewarden_tables() {
    // Another application's file, user_version 0.
    let (_dir, path) = temp_db();
    prepare(
        &path,
        "CREATE TABLE users(id INTEGER); INSERT INTO users VALUES (7);",
    );
    assert_refused_untouched(&path, &["users"]);
    // Twice: the refusal left nothing behind that would let it in later.
    assert_refused_untouched(&path, &["users"]);
    let conn = sql(&path);
    assert_eq!(user_tables(&conn), ["users"], "no table was added");
    assert_eq!(int(&conn, "PRAGMA user_version", []), 0);
    assert_eq!(journal_mode(&conn), "delete", "not switched to WAL");
    assert_eq!(rows(&conn, "users"), 1);
}

#[tokio::test]
async fn a_foreign_database_is_refused_whatever_else_it_holds() {
    // Seed tables beside someone else's: at user_version 0 the file is
    // not known to be ratewarden's; every foreign table and view is named,
    // SQLite's own tables (sqlite_sequence, sqlite_stat1) are not.
    let (_dir, path) = temp_db();
    prepare(
        &path,
        "CREATE TABLE rate_events (id INTEGER PRIMARY KEY AUTOINCREMENT, user_id INTEGER NOT NULL,
             endpoint TEXT NOT NULL, created_at TEXT NOT NULL);
         INSERT INTO rate_events (user_id, endpoint, created_at) VALUES (1, '/x', 'now');
         CREATE TABLE Accounts (id INTEGER PRIMARY KEY, name TEXT);
         CREATE INDEX idx_accounts_name ON Accounts(name);
         CREATE VIEW v_recent AS SELECT * FROM rate_events;
         ANALYZE;",
    );
    assert_refused_untouched(&path, &["Accounts", "v_recent"]);

    // Another application that versions its schema with user_version too
    // (a ratewarden file always holds ratewarden's tables), even one
    // "newer" than ratewarden: named as foreign, not as a newer schema.
    for version in [1, 2, 3, 99] {
        let (_dir, path) = temp_db();
        prepare(
            &path,
            &format!("CREATE TABLE orders(id INTEGER); PRAGMA user_version = {version};"),
        );
        assert_refused_untouched(&path, &["orders"]);
    }

    // A WAL-mode foreign file: the main file is untouched as well.
    let (_dir, path) = temp_db();
    prepare(
        &path,
        "PRAGMA journal_mode = WAL; CREATE TABLE users(id INTEGER);",
    );
    let before = std::fs::read(&path).unwrap();
    let err = SqliteStore::open(&path, SqliteOptions::default()).unwrap_err();
    assert!(
        matches!(err, SqliteError::ForeignDatabase { .. }),
        "{err:?}"
    );
    assert_eq!(std::fs::read(&path).unwrap(), before);
    assert_eq!(user_tables(&sql(&path)), ["users"]);

    // Not a database at all: refused by SQLite, also untouched.
    let (_dir, path) = temp_db();
    std::fs::write(&path, "id,name\n1,alice\n").unwrap();
    let err = SqliteStore::open(&path, SqliteOptions::default()).unwrap_err();
    assert!(matches!(err, SqliteError::Sqlite(_)), "{err:?}");
    assert_eq!(std::fs::read(&path).unwrap(), b"id,name\n1,alice\n");
}

#[tokio::test]
async fn new_files_seed_files_and_ratewarden_files_still_open() {
    // An empty file (created by `touch`).
    let (_dir, path) = temp_db();
    std::fs::write(&path, b"").unwrap();
    open(&path).close().await;
    assert_seed_schema(&sql(&path));

    // A seed's file: only ratewarden's tables (any case), user_version 0,
    // SQLite's own statistics table.
    let (_dir, path) = temp_db();
    prepare(
        &path,
        "CREATE TABLE RATE_LIMIT_WINDOWS (key TEXT NOT NULL, window_start TEXT NOT NULL,
             count INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (key, window_start));
         INSERT INTO rate_limit_windows VALUES ('alice', '2026-01-01T00:00:00.000000000Z', 2);
         ANALYZE;",
    );
    open(&path).close().await;
    let conn = sql(&path);
    assert_eq!(int(&conn, "PRAGMA user_version", []), 4);
    assert_eq!(
        rows(&conn, "rate_limit_windows"),
        1,
        "the seed's data is kept"
    );
    drop(conn);

    // A version 3 file: rate_limit_windows a rowid table with seed A's
    // index. Version 4 rebuilds it without rowid; every count survives
    // and the store counts on from it.
    let (_dir, path) = temp_db();
    open(&path).close().await;
    prepare(
        &path,
        "DROP TABLE rate_limit_windows;
         CREATE TABLE rate_limit_windows (key TEXT NOT NULL, window_start TEXT NOT NULL,
             count INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (key, window_start));
         CREATE INDEX idx_rl_key_window ON rate_limit_windows(key, window_start);
         CREATE INDEX idx_rl_window_start ON rate_limit_windows(window_start);
         PRAGMA user_version = 3;",
    );
    let ping = policy(Algorithm::FixedWindow, 5, 60);
    let start = ratewarden_core::utc::seconds(at(0));
    {
        let conn = sql(&path);
        conn.execute(
            "INSERT INTO rate_limit_windows VALUES ('alice', ?1, 3), ('bob', ?1, 1)",
            [&start],
        )
        .unwrap();
    }
    let store = open(&path);
    let d = acquire(&store, &ping, &key(["alice"]), at(1)).await;
    assert_eq!((d.outcome, d.used), (Outcome::Allowed, 4), "alice's 3 kept");
    store.close().await;
    let conn = sql(&path);
    assert_eq!(int(&conn, "PRAGMA user_version", []), 4);
    assert_seed_schema(&conn);
    assert_eq!(rows(&conn, "rate_limit_windows"), 2);
    drop(conn);

    // A ratewarden file (version 3, then version 1) with a table its
    // operator added: ratewarden's own, so it keeps working.
    let (_dir, path) = temp_db();
    open(&path).close().await;
    prepare(&path, "CREATE TABLE notes(text TEXT);");
    let store = open(&path);
    let p = policy(Algorithm::Gcra, 1, 60);
    let d = acquire(&store, &p, &key(["alice"]), at(0)).await;
    assert_eq!(d.outcome, Outcome::Allowed);
    store.close().await;
    prepare(
        &path,
        "DROP TABLE rw_gcra; DROP TABLE rw_sliding_window; DROP TABLE rw_fixed_window;
         DROP TABLE rw_sliding_log; PRAGMA user_version = 1;",
    );
    open(&path).close().await;
    let conn = sql(&path);
    assert_eq!(int(&conn, "PRAGMA user_version", []), 4, "migrated");
    let mut expected: Vec<&str> = TABLES.to_vec();
    expected.push("notes");
    expected.sort_unstable();
    assert_eq!(user_tables(&conn), expected);
}

/// A version 2 file: before policies, `/ping` was the only user of the
/// sliding window and GCRA tables and of `rate_events` rows with
/// `user_id = 0` (a sliding-log `/ping`). Opening it moves that state to
/// the policy `ping`, and every count survives.
#[tokio::test]
async fn a_version_2_file_keeps_its_counts_under_the_ping_policy() {
    let (_dir, path) = temp_db();
    let alice = key(["alice"]);
    prepare(
        &path,
        "CREATE TABLE rate_events (id INTEGER PRIMARY KEY AUTOINCREMENT, user_id INTEGER NOT NULL,
             endpoint TEXT NOT NULL, created_at TEXT NOT NULL);
         CREATE TABLE rw_sliding_window (key BLOB NOT NULL PRIMARY KEY, window INTEGER NOT NULL,
             curr INTEGER NOT NULL, prev INTEGER NOT NULL, expires INTEGER NOT NULL) WITHOUT ROWID;
         CREATE INDEX idx_rw_sliding_window_expires ON rw_sliding_window(expires);
         CREATE TABLE rw_gcra (key BLOB NOT NULL PRIMARY KEY, tat INTEGER NOT NULL) WITHOUT ROWID;
         CREATE INDEX idx_rw_gcra_tat ON rw_gcra(tat);
         PRAGMA user_version = 2;",
    );
    {
        let conn = sql(&path);
        let encoded = alice.encoded();
        let minute = (T0 / 60) as i64;
        conn.execute(
            "INSERT INTO rw_sliding_window VALUES (?1, ?2, 3, 0, ?3)",
            rusqlite::params![encoded, minute, (minute + 2) * 60_000_000_000],
        )
        .unwrap();
        conn.execute(
            "INSERT INTO rw_gcra VALUES (?1, ?2)",
            rusqlite::params![encoded, (T0 as i64 + 40) * 1_000_000_000],
        )
        .unwrap();
        for (user, endpoint, at) in [
            (
                0,
                rusqlite::types::Value::Blob(encoded.to_vec()),
                "2026-01-01T00:00:01.000000000Z",
            ),
            (
                0,
                rusqlite::types::Value::Blob(encoded.to_vec()),
                "2026-01-01T00:00:01.000000000Z",
            ),
            (
                0,
                rusqlite::types::Value::Blob(encoded.to_vec()),
                "2026-01-01T00:00:02.500000000Z",
            ),
            (
                7,
                rusqlite::types::Value::Text("/orders".into()),
                "2026-01-01T00:00:03.000000000Z",
            ),
        ] {
            conn.execute(
                "INSERT INTO rate_events (user_id, endpoint, created_at) VALUES (?1, ?2, ?3)",
                rusqlite::params![user, endpoint, at],
            )
            .unwrap();
        }
    }
    let store = open(&path);
    let quota = |limit| ratewarden_core::Quota::new(limit, Duration::from_secs(60)).unwrap();
    let now = at(10);
    let sliding = Policy::new("ping", Algorithm::SlidingWindow, quota(5));
    assert_eq!(store.status(&sliding, &alice, now).await.unwrap().used, 3);
    let gcra = Policy::new("ping", Algorithm::Gcra, quota(60));
    assert_eq!(store.status(&gcra, &alice, now).await.unwrap().used, 30);
    let log = Policy::new("ping", Algorithm::SlidingLog, quota(5));
    let d = store.status(&log, &alice, now).await.unwrap();
    assert_eq!((d.used, d.remaining), (3, 2), "the three events of ping");
    let check = policy(Algorithm::SlidingLog, 10, 60);
    let d = store
        .status(&check, &key(["7", "/orders"]), now)
        .await
        .unwrap();
    assert_eq!(d.used, 1, "seed B's event stays in rate_events");
    for other in ["check", "api"] {
        let p = Policy::new(other, Algorithm::SlidingWindow, quota(5));
        assert_eq!(store.status(&p, &alice, now).await.unwrap().used, 0);
    }
    store.close().await;
    let conn = sql(&path);
    assert_seed_schema(&conn);
    assert_eq!(rows(&conn, "rate_events"), 1);
}
