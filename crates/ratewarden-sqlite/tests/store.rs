//! Black-box tests of the SQLite store: decisions through the public
//! [`Store`] API, and what lands in the seeds' tables, read back with a
//! separate rusqlite connection. Every test has its own database file and
//! explicit timestamps; nothing sleeps.

mod common;

use std::collections::HashSet;
use std::num::NonZeroU64;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use common::{
    NS, T0, acquire, acquire_audited, at, at_nanos, int, key, open, policy, rows, select, snapshot,
    sql, temp_db,
};
use ratewarden_core::{
    Acquire, Algorithm, Audit, Batch, Decision, Key, KeyMatch, Outcome, Policy, Store, StoreError,
    Timestamp,
};
use ratewarden_sqlite::{SqliteError, SqliteOptions, SqliteStore};
use rusqlite::Connection;
use tokio::sync::Barrier;

// ---------------------------------------------------------------------------
// 1. Schema
// ---------------------------------------------------------------------------

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

fn user_tables(conn: &Connection) -> Vec<String> {
    select(
        conn,
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name",
        [],
        |r| r.get(0),
    )
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
const TABLES: [&str; 7] = [
    "api_calls",
    "rate_events",
    "rate_limit_windows",
    "rw_fixed_window",
    "rw_gcra",
    "rw_sliding_log",
    "rw_sliding_window",
];

fn assert_seed_schema(conn: &Connection) {
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

// ---------------------------------------------------------------------------
// 2. Fixed window
// ---------------------------------------------------------------------------

fn windows(conn: &Connection) -> Vec<(String, String, String, i64)> {
    select(
        conn,
        "SELECT typeof(key), CAST(key AS TEXT), window_start, count
             FROM rate_limit_windows ORDER BY key, window_start",
        [],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
    )
}

fn audit_rows(conn: &Connection) -> Vec<(String, String, String, String)> {
    select(
        conn,
        "SELECT typeof(key), CAST(key AS TEXT), path, called_at FROM api_calls ORDER BY id",
        [],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
    )
}

fn window_row(start: &str, count: i64) -> (String, String, String, i64) {
    ("text".into(), "alice".into(), start.into(), count)
}

fn audit_row(called_at: &str) -> (String, String, String, String) {
    (
        "text".into(),
        "alice".into(),
        "/ping".into(),
        called_at.into(),
    )
}

fn denied(retry_after: Duration) -> Outcome {
    Outcome::Denied { retry_after }
}

#[tokio::test]
async fn fixed_window_allows_the_limit_then_denies_until_the_window_ends_and_counts_every_attempt()
{
    let (_dir, path) = temp_db();
    let store = open(&path);
    let ping = policy(Algorithm::FixedWindow, 3, 60);
    let alice = key(["alice"]);
    let now = Timestamp::from_unix_secs(1_767_225_645); // 2026-01-01T00:00:45Z
    assert_eq!(now, at(45));

    for n in 1..=3 {
        let d = acquire_audited(&store, &ping, &alice, now, "/ping").await;
        assert_eq!(d.outcome, Outcome::Allowed, "attempt {n}");
        assert_eq!((d.limit, d.used, d.remaining), (3, n, 3 - n));
        assert_eq!(d.reset_after, Duration::from_secs(15));
    }
    let fourth = acquire_audited(&store, &ping, &alice, now, "/ping").await;
    assert_eq!(
        fourth.outcome,
        denied(Duration::from_secs(15)),
        "retry_after = window end − now = 00:01:00 − 00:00:45"
    );
    assert_eq!((fourth.used, fourth.remaining), (4, 0));

    let one_ns_later = at_nanos(45 * NS + 1);
    let fifth = acquire_audited(&store, &ping, &alice, one_ns_later, "/ping").await;
    assert_eq!(
        fifth.outcome,
        denied(Duration::from_secs(15) - Duration::from_nanos(1)),
        "retry_after is exact to the nanosecond"
    );
    assert_eq!(fifth.used, 5);

    let conn = sql(&path);
    assert_eq!(
        windows(&conn),
        [window_row("2026-01-01T00:00:00Z", 5)],
        "one row for the window; rejected attempts are counted (L + 2 = 5)"
    );
    assert_eq!(
        audit_rows(&conn),
        vec![audit_row("2026-01-01T00:00:45.000000000Z"); 3],
        "one api_calls row per allowed attempt, none for denied ones"
    );

    let last_ns = acquire_audited(&store, &ping, &alice, at_nanos(60 * NS - 1), "/ping").await;
    assert_eq!(last_ns.outcome, denied(Duration::from_nanos(1)));

    let next = acquire_audited(&store, &ping, &alice, at(60), "/ping").await;
    assert_eq!(
        next.outcome,
        Outcome::Allowed,
        "the next window starts fresh"
    );
    assert_eq!((next.used, next.remaining), (1, 2));
    assert_eq!(next.reset_after, Duration::from_secs(60));

    assert_eq!(
        windows(&conn),
        [
            window_row("2026-01-01T00:00:00Z", 6),
            window_row("2026-01-01T00:01:00Z", 1),
        ]
    );
    let audit = audit_rows(&conn);
    assert_eq!(audit.len(), 4);
    assert_eq!(audit[3], audit_row("2026-01-01T00:01:00.000000000Z"));
    store.close().await;
}

// ---------------------------------------------------------------------------
// 3. Sliding log
// ---------------------------------------------------------------------------

fn events(conn: &Connection) -> Vec<(String, i64, String, String, String)> {
    select(
        conn,
        "SELECT typeof(user_id), user_id, typeof(endpoint), CAST(endpoint AS TEXT), created_at
             FROM rate_events ORDER BY id",
        [],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
    )
}

fn order_event(created_at: &str) -> (String, i64, String, String, String) {
    (
        "integer".into(),
        7,
        "text".into(),
        "/orders".into(),
        created_at.into(),
    )
}

#[tokio::test]
async fn sliding_log_records_allowed_checks_only_and_an_event_exactly_one_window_old_has_left() {
    let (_dir, path) = temp_db();
    let store = open(&path);
    let orders = policy(Algorithm::SlidingLog, 2, 10);
    let user7 = key(["7", "/orders"]);
    let e1 = at(45);
    let e2 = at_nanos(47 * NS + 250_000_000);

    let d = acquire(&store, &orders, &user7, e1).await;
    assert_eq!(d.outcome, Outcome::Allowed);
    assert_eq!((d.limit, d.used, d.remaining), (2, 1, 1));
    let d = acquire(&store, &orders, &user7, e2).await;
    assert_eq!(d.outcome, Outcome::Allowed);
    assert_eq!((d.used, d.remaining), (2, 0));

    let d = acquire(&store, &orders, &user7, at(48)).await;
    assert_eq!(
        d.outcome,
        denied(Duration::from_secs(7)),
        "retry_after = oldest (00:00:45) + 10 s − 00:00:48"
    );
    assert_eq!((d.used, d.remaining), (2, 0));

    let conn = sql(&path);
    assert_eq!(
        events(&conn),
        [
            order_event("2026-01-01T00:00:45.000000000Z"),
            order_event("2026-01-01T00:00:47.250000000Z"),
        ],
        "seed B's columns; the denied check is not recorded"
    );

    let just_before = acquire(&store, &orders, &user7, at_nanos(55 * NS - 1)).await;
    assert_eq!(
        just_before.outcome,
        denied(Duration::from_nanos(1)),
        "at e + W − 1 ns the oldest event still counts"
    );
    assert_eq!(rows(&conn, "rate_events"), 2);

    let at_edge = acquire(&store, &orders, &user7, at(55)).await;
    assert_eq!(
        at_edge.outcome,
        Outcome::Allowed,
        "an event exactly W old has left"
    );
    assert_eq!((at_edge.used, at_edge.remaining), (2, 0));
    assert_eq!(rows(&conn, "rate_events"), 3);

    let d = acquire(&store, &orders, &user7, at(56)).await;
    assert_eq!(
        d.outcome,
        denied(Duration::from_millis(1250)),
        "retry_after = oldest live (00:00:47.25) + 10 s − 00:00:56"
    );
    assert_eq!(rows(&conn, "rate_events"), 3);
    store.close().await;
}

// ---------------------------------------------------------------------------
// 4. Persistence
// ---------------------------------------------------------------------------

#[tokio::test]
async fn counts_survive_reopening_the_same_file() {
    let (_dir, path) = temp_db();
    let fixed = policy(Algorithm::FixedWindow, 3, 60);
    let sliding = policy(Algorithm::SlidingLog, 3, 60);
    let client = key(["alice"]);
    let user = key(["7", "/orders"]);

    let store = open(&path);
    for t in [1, 2] {
        assert!(acquire(&store, &fixed, &client, at(t)).await.allowed());
        assert!(acquire(&store, &sliding, &user, at(t)).await.allowed());
    }
    store.close().await;
    drop(store);

    let store = open(&path);
    let d = acquire(&store, &fixed, &client, at(3)).await;
    assert_eq!(d.outcome, Outcome::Allowed);
    assert_eq!((d.used, d.remaining), (3, 0), "two attempts were kept");
    let d = acquire(&store, &fixed, &client, at(4)).await;
    assert_eq!(d.outcome, denied(Duration::from_secs(56)));
    assert_eq!(d.used, 4);

    let d = acquire(&store, &sliding, &user, at(3)).await;
    assert_eq!(d.outcome, Outcome::Allowed);
    assert_eq!((d.used, d.remaining), (3, 0), "two events were kept");
    let d = acquire(&store, &sliding, &user, at(4)).await;
    assert_eq!(
        d.outcome,
        denied(Duration::from_secs(57)),
        "the oldest kept event (t = 1 s) leaves at 61 s"
    );
    store.close().await;
}

#[tokio::test]
async fn a_lower_limit_after_reopening_applies_to_the_stored_counts() {
    let (_dir, path) = temp_db();
    let client = key(["alice"]);
    let user = key(["7", "/orders"]);

    let store = open(&path);
    for algorithm in Algorithm::ALL {
        let three = policy(algorithm, 3, 60);
        for t in [1, 2] {
            assert!(acquire(&store, &three, &client, at(t)).await.allowed());
            assert!(acquire(&store, &three, &user, at(t)).await.allowed());
        }
    }
    store.close().await;

    let store = open(&path);
    for algorithm in Algorithm::ALL {
        let two = policy(algorithm, 2, 60);
        for k in [&client, &user] {
            let d = acquire(&store, &two, k, at(3)).await;
            assert!(
                !d.allowed(),
                "{algorithm} {k}: two stored units fill a limit of 2"
            );
        }
    }
    store.close().await;
}

// ---------------------------------------------------------------------------
// 5. Concurrency
// ---------------------------------------------------------------------------

const TASKS: usize = 200;
const ROUNDS: u64 = 5;
const LIMIT: u64 = 7;

/// `TASKS` spawned tasks, released together by a barrier, each acquiring
/// `key` at `now` on one of `stores` (round robin). Returns the decisions.
async fn stampede(
    stores: &[Arc<SqliteStore>],
    policy: &Arc<Policy>,
    key: &Key,
    now: Timestamp,
) -> Vec<Decision> {
    let barrier = Arc::new(Barrier::new(TASKS));
    let handles: Vec<_> = (0..TASKS)
        .map(|i| {
            let store = Arc::clone(&stores[i % stores.len()]);
            let policy = Arc::clone(policy);
            let key = key.clone();
            let barrier = Arc::clone(&barrier);
            tokio::spawn(async move {
                let check = Acquire {
                    audit: Some(Audit { path: "/ping" }),
                    ..Acquire::one(&policy, &key)
                };
                let batch = Batch::one(now, check);
                barrier.wait().await;
                store.acquire(&batch).await.map(|d| d[0])
            })
        })
        .collect();
    let mut decisions = Vec::with_capacity(TASKS);
    for handle in handles {
        decisions.push(
            handle
                .await
                .expect("the task finishes")
                .expect("the store answers"),
        );
    }
    decisions
}

/// Runs `ROUNDS` stampedes per algorithm with fresh keys and checks that
/// exactly `LIMIT` pass and exactly that much is stored.
/// The algorithms stored in the seeds' tables.
const SEED_ALGORITHMS: [Algorithm; 2] = [Algorithm::FixedWindow, Algorithm::SlidingLog];

async fn assert_stampedes_admit_exactly_the_limit(
    stores: &[Arc<SqliteStore>],
    conn: &Connection,
    prefix: u64,
) {
    for algorithm in SEED_ALGORITHMS {
        let policy = Arc::new(policy(algorithm, LIMIT, 60));
        for round in 0..ROUNDS {
            let user = prefix + round + 1;
            let client = format!("client-{user}");
            let k = match algorithm {
                Algorithm::FixedWindow => key([client.as_str()]),
                _ => key([user.to_string().as_str(), "/c"]),
            };
            let now = at(30 + round);
            let decisions = stampede(stores, &policy, &k, now).await;
            let allowed = decisions.iter().filter(|d| d.allowed()).count() as u64;
            assert_eq!(allowed, LIMIT, "{algorithm}, round {round}");
            for d in decisions.iter().filter(|d| !d.allowed()) {
                assert!(d.retry_after().is_some(), "{algorithm}: {d:?}");
            }
            match algorithm {
                Algorithm::FixedWindow => {
                    let calls = int(
                        conn,
                        "SELECT COUNT(*) FROM api_calls WHERE key = ?1",
                        [&client],
                    );
                    assert_eq!(calls as u64, LIMIT, "api_calls rows, round {round}");
                    let count = int(
                        conn,
                        "SELECT count FROM rate_limit_windows WHERE key = ?1",
                        [&client],
                    );
                    assert_eq!(count as usize, TASKS, "every attempt is counted");
                    let max_used = decisions.iter().map(|d| d.used).max();
                    assert_eq!(max_used, Some(TASKS as u64));
                }
                _ => {
                    let recorded = int(
                        conn,
                        "SELECT COUNT(*) FROM rate_events WHERE user_id = ?1 AND endpoint = '/c'",
                        [user as i64],
                    );
                    assert_eq!(recorded as u64, LIMIT, "rate_events rows, round {round}");
                }
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_acquires_of_one_key_at_one_instant_admit_exactly_the_limit() {
    let (_dir, path) = temp_db();
    let store = Arc::new(open(&path));
    let conn = sql(&path);
    assert_stampedes_admit_exactly_the_limit(&[Arc::clone(&store)], &conn, 0).await;
    store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_stores_on_one_file_admit_exactly_the_limit_together() {
    let (_dir, path) = temp_db();
    let a = Arc::new(open(&path));
    let b = Arc::new(open(&path));
    let conn = sql(&path);
    assert_stampedes_admit_exactly_the_limit(&[Arc::clone(&a), Arc::clone(&b)], &conn, 100).await;
    a.close().await;
    b.close().await;
}

// ---------------------------------------------------------------------------
// 6. Keys
// ---------------------------------------------------------------------------

/// Keys any client may send; none may share a counter with another.
fn adversarial_keys() -> Vec<Key> {
    let kib = "k".repeat(1024);
    let kib_other = format!("{}x", "k".repeat(1023));
    let joined = key(["ab", "c"]);
    let not_utf8 = key([b"ab".as_slice(), b"\xff"]);
    vec![
        key(["a"]),
        key([""]),
        key(["a:b"]),
        key(["a:b:c"]),
        key(["a b"]),
        key([" a b "]),
        key(["it's"]),
        key(["\"quoted\""]),
        key(["'; DROP TABLE rate_limit_windows;--"]),
        key(["*"]),
        key(["?"]),
        key(["[a-z]"]),
        key(["a*?[]"]),
        key(["%"]),
        key(["_"]),
        key(["café"]),
        key(["cafe\u{301}"]),
        key(["日本"]),
        key(["🦀"]),
        key(["a\0b"]),
        key(["a\0c"]),
        key([b"\xff".as_slice()]),
        key([b"\xff\xfe".as_slice()]),
        key([b"caf\xc3".as_slice()]),
        key([b"\x01\xff".as_slice()]),
        key([kib.as_str()]),
        key([kib_other.as_str()]),
        key(["ab", "c"]),
        key(["a", "bc"]),
        key(["abc"]),
        key(["a", "b", "c"]),
        key(["abc", ""]),
        key(["", "abc"]),
        // A one-part key whose bytes are another key's encoding.
        Key::single(joined.encoded()).expect("short enough"),
        Key::single(not_utf8.encoded()).expect("short enough"),
        not_utf8,
        // Seed B's shapes and their near misses.
        key(["7", "/orders"]),
        key(["7", "/orders "]),
        key(["7", "/Orders"]),
        key(["07", "/orders"]),
        key(["70", "/orders"]),
        key(["0", "/orders"]),
        key(["-7", "/orders"]),
        key(["+7", "/orders"]),
        key(["9223372036854775807", "/orders"]),
        key(["9223372036854775808", "/orders"]),
        key([b"7".as_slice(), b"/orders\xff"]),
        key(["7", "/orders", ""]),
        key(["7"]),
        key(["7/orders"]),
        key(["7", kib.as_str()]),
    ]
}

/// Exhausts each key in turn (limit 2): every key must still have its
/// full limit when its turn comes, and end with exactly its own usage.
async fn assert_every_key_has_its_own_counter(algorithm: Algorithm) {
    let (_dir, path) = temp_db();
    let store = open(&path);
    let p = policy(algorithm, 2, 60);
    let keys = adversarial_keys();
    let distinct: HashSet<&Key> = keys.iter().collect();
    assert_eq!(distinct.len(), keys.len(), "the test's keys are distinct");

    for k in &keys {
        for n in 1..=2 {
            let d = acquire(&store, &p, k, at(10)).await;
            assert_eq!(d.outcome, Outcome::Allowed, "{algorithm}: {k} attempt {n}");
            assert_eq!(d.used, n, "{algorithm}: {k} starts untouched");
        }
        let d = acquire(&store, &p, k, at(10)).await;
        assert!(!d.allowed(), "{algorithm}: {k} is exhausted after 2");
    }

    let expected_used = match algorithm {
        Algorithm::FixedWindow => 3, // the refused attempt is counted
        _ => 2,
    };
    for k in &keys {
        let d = store
            .status(&p, k, at(11))
            .await
            .expect("the store answers");
        assert_eq!(d.used, expected_used, "{algorithm}: {k} kept its own count");
    }

    let conn = sql(&path);
    let n = keys.len() as i64;
    match algorithm {
        Algorithm::FixedWindow => assert_eq!(rows(&conn, "rate_limit_windows"), n),
        _ => assert_eq!(rows(&conn, "rate_events"), 2 * n),
    }
    assert_eq!(user_tables(&conn), TABLES, "no key was executed as SQL");
    store.close().await;
}

#[tokio::test]
async fn every_key_gets_its_own_fixed_window_counter() {
    assert_every_key_has_its_own_counter(Algorithm::FixedWindow).await;
}

#[tokio::test]
async fn every_key_gets_its_own_sliding_log() {
    assert_every_key_has_its_own_counter(Algorithm::SlidingLog).await;
}

// ---------------------------------------------------------------------------
// 7. Reset
// ---------------------------------------------------------------------------

async fn used(store: &SqliteStore, p: &Policy, k: &Key, now: Timestamp) -> u64 {
    store
        .status(p, k, now)
        .await
        .expect("the store answers")
        .used
}

#[tokio::test]
async fn resetting_a_user_deletes_their_endpoints_and_no_other_users_events() {
    let (_dir, path) = temp_db();
    let store = open(&path);
    let p = policy(Algorithm::SlidingLog, 10, 60);
    let r1 = key(["21", "/r1"]);
    let r2 = key(["21", "/r2"]);
    let r1_deeper = key(["21", "/r1", "x"]);
    let bare = key(["21"]);
    let others = [
        key(["210", "/r1"]),
        key(["2", "/r1"]),
        key(["2", "1"]),
        key(["021", "/r1"]),
        key(["211"]),
        key(["21/r1"]),
    ];
    let seeded = [(&r1, 3), (&r2, 2), (&r1_deeper, 1), (&bare, 1)];
    for (k, n) in seeded {
        for i in 0..n {
            assert!(acquire(&store, &p, k, at(i)).await.allowed());
        }
    }
    for k in &others {
        assert!(acquire(&store, &p, k, at(0)).await.allowed());
    }
    let conn = sql(&path);
    assert_eq!(rows(&conn, "rate_events"), 7 + others.len() as i64);

    let now = at(5);
    let deleted = store
        .reset(&p, KeyMatch::StartingWith(&r1), now)
        .await
        .unwrap();
    assert_eq!(
        deleted, 2,
        "the endpoint (3 events) and a key below it (1 event): two counters"
    );
    assert_eq!(used(&store, &p, &r1, now).await, 0);
    assert_eq!(used(&store, &p, &r1_deeper, now).await, 0);
    assert_eq!(used(&store, &p, &r2, now).await, 2, "other endpoint kept");
    assert_eq!(used(&store, &p, &bare, now).await, 1);
    assert_eq!(
        int(
            &conn,
            "SELECT COUNT(*) FROM rate_events WHERE user_id = 21",
            []
        ),
        2
    );

    let user = Key::single("21").unwrap();
    let deleted = store
        .reset(&p, KeyMatch::StartingWith(&user), now)
        .await
        .unwrap();
    assert_eq!(deleted, 2, "/r2 (2 events) and the bare key (1 event)");
    assert_eq!(used(&store, &p, &r2, now).await, 0);
    assert_eq!(used(&store, &p, &bare, now).await, 0);
    assert_eq!(
        int(
            &conn,
            "SELECT COUNT(*) FROM rate_events WHERE user_id = 21",
            []
        ),
        0
    );
    for k in &others {
        assert_eq!(used(&store, &p, k, now).await, 1, "{k} is not user 21");
    }
    assert_eq!(rows(&conn, "rate_events"), others.len() as i64);

    let again = store
        .reset(&p, KeyMatch::StartingWith(&user), now)
        .await
        .unwrap();
    assert_eq!(again, 0, "nothing left to delete");
    let fixed = policy(Algorithm::FixedWindow, 10, 60);
    let wrong_algorithm = store
        .reset(&fixed, KeyMatch::StartingWith(&key(["210"])), now)
        .await
        .unwrap();
    assert_eq!(wrong_algorithm, 0);
    assert_eq!(rows(&conn, "rate_events"), others.len() as i64);
    store.close().await;
}

#[tokio::test]
async fn resetting_a_fixed_window_key_deletes_its_windows_and_restarts_its_count() {
    let (_dir, path) = temp_db();
    let store = open(&path);
    let p = policy(Algorithm::FixedWindow, 2, 60);
    let alice = key(["alice"]);
    let below = key(["alice", "/x"]);
    let others = [
        key(["alice2"]),
        key(["ALICE"]),
        key(["bob"]),
        key(["", "alice"]),
    ];
    for t in [0, 1, 2, 60, 61] {
        acquire(&store, &p, &alice, at(t)).await;
    }
    acquire(&store, &p, &below, at(0)).await;
    for k in &others {
        acquire(&store, &p, k, at(60)).await;
    }
    let conn = sql(&path);
    assert_eq!(rows(&conn, "rate_limit_windows"), 3 + others.len() as i64);
    assert!(!acquire(&store, &p, &alice, at(62)).await.allowed());

    let deleted = store
        .reset(&p, KeyMatch::StartingWith(&alice), at(62))
        .await
        .unwrap();
    assert_eq!(
        deleted, 1,
        "alice counts in the current window; the key below it only in an old one"
    );
    assert_eq!(
        rows(&conn, "rate_limit_windows"),
        others.len() as i64,
        "every window of alice and of the key below it is gone"
    );
    assert_eq!(used(&store, &p, &alice, at(62)).await, 0);
    let d = acquire(&store, &p, &alice, at(62)).await;
    assert_eq!(d.outcome, Outcome::Allowed, "the count restarts");
    assert_eq!(d.used, 1);
    for k in &others {
        assert_eq!(used(&store, &p, k, at(62)).await, 1, "{k} untouched");
    }
    assert_eq!(
        int(
            &conn,
            "SELECT COUNT(*) FROM rate_limit_windows WHERE key = 'alice'",
            []
        ),
        1
    );

    let never_seen = store
        .reset(&p, KeyMatch::Exactly(&key(["carol"])), at(62))
        .await
        .unwrap();
    assert_eq!(never_seen, 0);
    let log = policy(Algorithm::SlidingLog, 10, 60);
    let wrong_algorithm = store
        .reset(&log, KeyMatch::StartingWith(&alice), at(62))
        .await
        .unwrap();
    assert_eq!(wrong_algorithm, 0);
    assert_eq!(used(&store, &p, &alice, at(62)).await, 1);
    store.close().await;
}

// ---------------------------------------------------------------------------
// 8. Prune
// ---------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------
// 9. Status
// ---------------------------------------------------------------------------

#[tokio::test]
async fn status_never_writes_even_for_a_key_it_has_never_seen() {
    let (_dir, path) = temp_db();
    let store = open(&path);
    let fixed = policy(Algorithm::FixedWindow, 2, 60);
    let sliding = policy(Algorithm::SlidingLog, 2, 60);
    let alice = key(["alice"]);
    let user7 = key(["7", "/orders"]);
    for _ in 0..3 {
        acquire_audited(&store, &fixed, &alice, at(10), "/ping").await;
    }
    acquire(&store, &sliding, &user7, at(10)).await;
    acquire(&store, &sliding, &user7, at(11)).await;

    let conn = sql(&path);
    let before = snapshot(&conn);
    assert_eq!(before.len(), 1 + 2 + 2);

    let d = store.status(&fixed, &alice, at(20)).await.unwrap();
    assert_eq!(d.outcome, denied(Duration::from_secs(40)));
    assert_eq!((d.used, d.remaining), (3, 0));
    let d = store.status(&fixed, &alice, at(60)).await.unwrap();
    assert_eq!(d.outcome, Outcome::Allowed, "a new window");
    assert_eq!((d.used, d.remaining), (0, 2));
    let d = store.status(&sliding, &user7, at(20)).await.unwrap();
    assert_eq!(d.outcome, denied(Duration::from_secs(50)));
    assert_eq!((d.used, d.remaining), (2, 0));

    for algorithm in Algorithm::ALL {
        let p = policy(algorithm, 2, 60);
        for never_seen in [key(["nobody"]), key(["8", "/orders"]), key(["a", "b", "c"])] {
            for _ in 0..3 {
                let d = store.status(&p, &never_seen, at(20)).await.unwrap();
                assert_eq!(d.outcome, Outcome::Allowed, "{algorithm}: {never_seen}");
                assert_eq!((d.used, d.remaining), (0, 2));
            }
        }
    }
    assert_eq!(snapshot(&conn), before, "status changed no row");

    let d = acquire(&store, &fixed, &alice, at(20)).await;
    assert_eq!(d.used, 4, "status did not count as an attempt");
    store.close().await;
}

// ---------------------------------------------------------------------------
// 10. Versions, closing, impossible costs
// ---------------------------------------------------------------------------

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
    // The tester's repro: another application's file, user_version 0.
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

#[tokio::test]
async fn operations_after_close_fail_with_closed() {
    let (_dir, path) = temp_db();
    let store = open(&path);
    let p = policy(Algorithm::FixedWindow, 3, 60);
    let alice = key(["alice"]);
    store.close().await;

    let err = store
        .acquire(&Batch::one(at(0), Acquire::one(&p, &alice)))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Closed), "{err:?}");
    assert!(!err.is_transient());
    let err = store.status(&p, &alice, at(0)).await.unwrap_err();
    assert!(matches!(err, StoreError::Closed), "{err:?}");
    let err = store
        .reset(&p, KeyMatch::Exactly(&alice), at(0))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Closed), "{err:?}");
    let err = store
        .prune(Algorithm::FixedWindow, Duration::from_secs(60), at(0))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Closed), "{err:?}");
}

#[tokio::test]
async fn a_cost_above_the_limit_is_never_and_writes_nothing() {
    let (_dir, path) = temp_db();
    let store = open(&path);
    let alice = key(["alice"]);
    let user7 = key(["7", "/orders"]);
    for algorithm in Algorithm::ALL {
        let p = policy(algorithm, 3, 60);
        for k in [&alice, &user7] {
            let check = Acquire {
                cost: NonZeroU64::new(4).unwrap(),
                audit: Some(Audit { path: "/ping" }),
                ..Acquire::one(&p, k)
            };
            let d = store.acquire(&Batch::one(at(0), check)).await.unwrap()[0];
            assert_eq!(d.outcome, Outcome::Never, "{algorithm}: {k}");
            assert_eq!(d.retry_after(), None);
        }
    }
    let conn = sql(&path);
    assert!(snapshot(&conn).is_empty(), "{:?}", snapshot(&conn));
    store.close().await;
}

// ---------------------------------------------------------------------------
// 11. The in-use lock
// ---------------------------------------------------------------------------

/// Set in a child process (this test binary run again) to what it should
/// do: `probe:PATH` prints `in_use=true|false`; `read:PATH` opens a plain
/// connection on the file, reads, and closes it.
const CHILD_TASK: &str = "RATEWARDEN_SQLITE_TEST_CHILD";

/// The child's side; without [`CHILD_TASK`] it does nothing.
#[test]
fn child_process_task_runs_only_when_asked() {
    let Ok(task) = std::env::var(CHILD_TASK) else {
        return;
    };
    match task.split_once(':') {
        Some(("probe", path)) => {
            let in_use = SqliteStore::in_use(path).expect("probe the file");
            println!("in_use={in_use}");
        }
        Some(("read", path)) => {
            let conn = sql(Path::new(path));
            let n = int(&conn, "SELECT COUNT(*) FROM sqlite_master", []);
            conn.close().expect("close the connection");
            println!("tables={n}");
        }
        _ => panic!("unknown task {task:?}"),
    }
}

/// Runs `task` on `path` in another process and returns what it printed.
fn in_child(task: &str, path: &Path) -> String {
    let output = std::process::Command::new(std::env::current_exe().expect("the test binary"))
        .args([
            "--exact",
            "child_process_task_runs_only_when_asked",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(CHILD_TASK, format!("{task}:{}", path.display()))
        .output()
        .expect("the child runs");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// Whether another process finds the file in use.
fn in_use_elsewhere(path: &Path) -> bool {
    let out = in_child("probe", path);
    match (out.contains("in_use=true"), out.contains("in_use=false")) {
        (true, false) => true,
        (false, true) => false,
        _ => panic!("no probe answer in: {out}"),
    }
}

#[tokio::test]
async fn an_open_store_holds_its_file_in_use_until_it_is_closed() {
    let (_dir, path) = temp_db();
    assert!(!SqliteStore::in_use(&path).unwrap(), "a missing file");
    let store = open(&path);
    assert!(SqliteStore::in_use(&path).unwrap(), "in this process");
    assert!(in_use_elsewhere(&path), "in another process");
    // The lock is the file's, whatever path names it.
    let alias = path.parent().unwrap().join(".").join("ratewarden.db");
    assert!(in_use_elsewhere(&alias));
    let p = policy(Algorithm::FixedWindow, 3, 60);
    acquire(&store, &p, &key(["alice"]), at(0)).await;
    store.close().await;
    assert!(!in_use_elsewhere(&path), "released at close");
    assert!(!SqliteStore::in_use(&path).unwrap());
    // Probing changed nothing: the file opens again with its count.
    let store = open(&path);
    let d = acquire(&store, &p, &key(["alice"]), at(1)).await;
    assert_eq!(d.remaining, 1);
    store.close().await;
}

#[tokio::test]
async fn a_second_store_on_the_same_file_opens_and_the_file_stays_in_use_until_the_last_closes() {
    let (_dir, path) = temp_db();
    let first = open(&path);
    let second = SqliteStore::open(&path, SqliteOptions::default())
        .expect("a second store opens while the first holds the file");
    let p = policy(Algorithm::FixedWindow, 3, 60);
    let alice = key(["alice"]);
    acquire(&first, &p, &alice, at(0)).await;
    assert_eq!(acquire(&second, &p, &alice, at(0)).await.remaining, 1);
    first.close().await;
    assert!(in_use_elsewhere(&path), "the second store still holds it");
    assert_eq!(acquire(&second, &p, &alice, at(0)).await.remaining, 0);
    second.close().await;
    assert!(!in_use_elsewhere(&path));
}

/// Closing a descriptor of the file drops every POSIX lock the process
/// holds on it, SQLite's included. Regression guard: were the first
/// store's lock descriptor closed while the second store's connection is
/// open, that connection would lose its shared lock on the database, and
/// the next process to close a connection would think itself the last,
/// checkpoint and delete the WAL under it.
#[tokio::test]
async fn closing_one_store_keeps_the_sqlite_locks_of_another_on_the_same_file() {
    let (_dir, path) = temp_db();
    let wal = path.with_file_name("ratewarden.db-wal");
    let first = open(&path);
    let second = open(&path);
    let p = policy(Algorithm::FixedWindow, 3, 60);
    let alice = key(["alice"]);
    acquire(&second, &p, &alice, at(0)).await;
    first.close().await;
    in_child("read", &path);
    assert!(
        wal.exists(),
        "another process's last-closer checkpoint deleted the WAL of an open store"
    );
    assert_eq!(acquire(&second, &p, &alice, at(0)).await.remaining, 1);
    second.close().await;
    assert!(!wal.exists(), "the last store to close removes the WAL");
}
