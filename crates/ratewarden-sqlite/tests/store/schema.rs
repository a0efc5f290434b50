//! The schema: exactly the seeds' tables, columns and indexes (and
//! ratewarden's own), and opening a file again changes nothing.

use ratewarden_core::{Algorithm, Store};
use rusqlite::Connection;

use crate::common::{acquire_audited, at, int, key, open, policy, rows, select, sql, temp_db};
use crate::user_tables;

/// (name, declared type, NOT NULL, default, position in the primary key).
type Column = (String, String, bool, Option<String>, i64);

fn columns(conn: &Connection, table: &str) -> Vec<Column> {
    select(
        conn,
        "SELECT name, type, \"notnull\", dflt_value, pk FROM pragma_table_info(?1) ORDER BY cid",
        [table],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
    )
}

fn column(name: &str, ty: &str, not_null: bool, default: Option<&str>, pk: i64) -> Column {
    (
        name.into(),
        ty.into(),
        not_null,
        default.map(Into::into),
        pk,
    )
}

/// The table an index belongs to and its columns, in order.
fn index(conn: &Connection, name: &str) -> (String, Vec<String>) {
    let table: String = conn
        .query_row(
            "SELECT tbl_name FROM sqlite_master WHERE type = 'index' AND name = ?1",
            [name],
            |r| r.get(0),
        )
        .unwrap_or_else(|e| panic!("index {name} is missing: {e}"));
    let cols = select(
        conn,
        "SELECT name FROM pragma_index_info(?1) ORDER BY seqno",
        [name],
        |r| r.get(0),
    );
    (table, cols)
}

/// Every schema object with its SQL, to compare before and after a reopen.
fn schema_objects(conn: &Connection) -> Vec<(String, String, Option<String>)> {
    select(
        conn,
        "SELECT type, name, sql FROM sqlite_master ORDER BY type, name",
        [],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
    )
}

/// Every table of a version 3 file.
pub(crate) const TABLES: [&str; 7] = [
    "api_calls",
    "rate_events",
    "rate_limit_windows",
    "rw_fixed_window",
    "rw_gcra",
    "rw_sliding_log",
    "rw_sliding_window",
];

pub(crate) fn assert_seed_schema(conn: &Connection) {
    assert_eq!(user_tables(conn), TABLES);
    for (table, key) in [
        ("rw_fixed_window", vec!["policy", "key"]),
        ("rw_sliding_log", vec!["policy", "key", "at"]),
        ("rw_sliding_window", vec!["policy", "key"]),
        ("rw_gcra", vec!["policy", "key"]),
    ] {
        let mut pk: Vec<(i64, String)> = columns(conn, table)
            .into_iter()
            .filter(|c| c.4 > 0)
            .map(|c| (c.4, c.0))
            .collect();
        pk.sort();
        let pk: Vec<String> = pk.into_iter().map(|(_, name)| name).collect();
        assert_eq!(pk, key, "{table}: state is namespaced by policy");
    }

    assert_eq!(
        columns(conn, "rate_limit_windows"),
        vec![
            column("key", "TEXT", true, None, 1),
            column("window_start", "TEXT", true, None, 2),
            column("count", "INTEGER", true, Some("0"), 0),
        ],
        "rate_limit_windows(key, window_start, count), PRIMARY KEY (key, window_start)"
    );
    // Version 4: the primary key is the table (one B-tree), so seed A's
    // index on the same columns would only duplicate it.
    let without_rowid: bool = conn
        .query_row(
            "SELECT wr FROM pragma_table_list WHERE name = 'rate_limit_windows'",
            [],
            |r| r.get(0),
        )
        .expect("rate_limit_windows exists");
    assert!(without_rowid, "rate_limit_windows is WITHOUT ROWID");
    assert_eq!(
        int(
            conn,
            "SELECT COUNT(*) FROM sqlite_master WHERE name = 'idx_rl_key_window'",
            []
        ),
        0,
        "no index duplicating the primary key"
    );

    let api_calls: Vec<(String, i64)> = columns(conn, "api_calls")
        .into_iter()
        .map(|(name, _, _, _, pk)| (name, pk))
        .collect();
    assert_eq!(
        api_calls,
        [
            ("id".to_owned(), 1),
            ("key".to_owned(), 0),
            ("path".to_owned(), 0),
            ("called_at".to_owned(), 0),
        ]
    );

    assert_eq!(
        columns(conn, "rate_events"),
        vec![
            column("id", "INTEGER", false, None, 1),
            column("user_id", "INTEGER", true, None, 0),
            column("endpoint", "TEXT", true, None, 0),
            column("created_at", "TEXT", true, None, 0),
        ]
    );
    let rate_events_sql: String = conn
        .query_row(
            "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'rate_events'",
            [],
            |r| r.get(0),
        )
        .expect("rate_events exists");
    assert!(
        rate_events_sql.to_uppercase().contains("AUTOINCREMENT"),
        "rate_events.id is INTEGER PRIMARY KEY AUTOINCREMENT: {rate_events_sql}"
    );
    assert_eq!(
        index(conn, "idx_rate_events_user_endpoint"),
        (
            "rate_events".into(),
            vec!["user_id".into(), "endpoint".into(), "created_at".into()]
        )
    );

    assert_eq!(int(conn, "PRAGMA user_version", []), 4);
    let journal_mode: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .expect("read the journal mode");
    assert_eq!(journal_mode, "wal");
}

#[tokio::test]
async fn the_schema_is_exactly_the_seeds_and_opening_again_changes_nothing() {
    let (_dir, path) = temp_db();
    let store = open(&path);
    let ping = policy(Algorithm::FixedWindow, 3, 60);
    acquire_audited(&store, &ping, &key(["alice"]), at(45), "/ping").await;
    store.close().await;

    let objects = {
        let conn = sql(&path);
        assert_seed_schema(&conn);
        schema_objects(&conn)
    };

    let store = open(&path);
    store.close().await;
    let store = open(&path);
    store.close().await;
    store.close().await; // closing twice is harmless

    let conn = sql(&path);
    assert_seed_schema(&conn);
    assert_eq!(schema_objects(&conn), objects, "reopening adds nothing");
    assert_eq!(rows(&conn, "rate_limit_windows"), 1, "reopening keeps data");
    assert_eq!(rows(&conn, "api_calls"), 1, "reopening keeps data");
}
