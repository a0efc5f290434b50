//! `ratewarden serve` on SQLite killed with SIGKILL under load, three
//! times on one file: the file passes `PRAGMA integrity_check` after each
//! kill, and nothing acknowledged is lost. Every `/ping` and
//! `/rate/check` answered 200 is in the counters and its audit row or
//! event is stored; nothing is stored that was never sent (README,
//! "Guarantees").
//!
//! A kill lands while many requests are in flight, between and during the
//! writer's commits and the background checkpoints (`--wal-autocheckpoint
//! 64` makes the writer's own checkpoints frequent too). Limits are far
//! above what the test sends, so every answered request is an allowed
//! decision, and the windows are an hour long, so nothing is pruned while
//! the test runs; counts are summed over windows, so a window edge during
//! the test changes nothing.

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

mod common;

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::Instance;

const PING_KEYS: usize = 8;
const USERS: usize = 8;
const CALLERS: usize = 32;

/// Per key (`ping:crash-N`, `check:N`): requests sent, and answered 200.
#[derive(Default)]
struct Tally {
    sent: HashMap<String, i64>,
    acknowledged: HashMap<String, i64>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sigkill_under_load_loses_nothing_acknowledged_and_keeps_the_file_intact() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("kill9.db");
    let db_arg = db.to_str().unwrap();
    let tally = Arc::new(Mutex::new(Tally::default()));
    for life in 0..3 {
        let instance = Instance::serve(
            &[
                "--db",
                db_arg,
                "--ping-limit",
                "1000000",
                "--ping-window",
                "3600",
                "--check-limit",
                "1000000",
                "--check-window",
                "3600",
                "--wal-autocheckpoint",
                "64",
            ],
            &[],
        )
        .await;
        let base = instance.base.clone();
        let callers: Vec<_> = (0..CALLERS)
            .map(|caller| tokio::spawn(load(base.clone(), caller, Arc::clone(&tally))))
            .collect();
        // Enough for thousands of decisions and several checkpoints.
        tokio::time::sleep(Duration::from_millis(800)).await;
        instance.signal("KILL");
        for caller in callers {
            caller.await.unwrap();
        }
        drop(instance); // waits for the process to be gone
        assert_eq!(integrity_check(&db), "ok", "after kill {life}");
        assert_stored_within_sent_and_acknowledged(&db, &tally.lock().unwrap(), life);
    }
    let tally = tally.lock().unwrap();
    let acknowledged: i64 = tally.acknowledged.values().sum();
    assert!(
        acknowledged > 1_000,
        "the load made too few decisions to test anything: {acknowledged}"
    );
}

/// One caller: `/ping` and `/rate/check` in turn, over the keys, until the
/// server stops answering.
async fn load(base: String, caller: usize, tally: Arc<Mutex<Tally>>) {
    let client = reqwest::Client::new();
    for n in caller.. {
        let (key, request) = if n % 2 == 0 {
            let client_key = format!("crash-{}", n % PING_KEYS);
            (
                format!("ping:{client_key}"),
                client
                    .get(format!("{base}/ping"))
                    .header("X-Client-Key", client_key),
            )
        } else {
            let user = n % USERS + 1;
            (
                format!("check:{user}"),
                client
                    .post(format!("{base}/rate/check"))
                    .header("X-User-Id", user.to_string())
                    .header("Content-Type", "application/json")
                    .body(r#"{"endpoint":"/crash"}"#),
            )
        };
        *tally.lock().unwrap().sent.entry(key.clone()).or_default() += 1;
        let Ok(response) = request.send().await else {
            return; // killed: this request may or may not have been decided
        };
        let status = response.status();
        // A body cut off by the kill is not an acknowledgement.
        if response.bytes().await.is_err() {
            return;
        }
        assert_eq!(status, 200, "{key}: every request is allowed");
        *tally.lock().unwrap().acknowledged.entry(key).or_default() += 1;
    }
}

fn open(db: &Path) -> rusqlite::Connection {
    rusqlite::Connection::open(db).unwrap()
}

fn integrity_check(db: &Path) -> String {
    open(db)
        .query_row("PRAGMA integrity_check", [], |row| row.get(0))
        .unwrap()
}

/// For every key: acknowledged ≤ stored ≤ sent, for the counters and for
/// the audit rows (`/ping`) or events (`/rate/check`).
fn assert_stored_within_sent_and_acknowledged(db: &Path, tally: &Tally, life: usize) {
    let conn = open(db);
    let stored =
        |sql: &str, key: &str| -> i64 { conn.query_row(sql, [key], |r| r.get(0)).unwrap() };
    for (key, &sent) in &tally.sent {
        let acknowledged = tally.acknowledged.get(key).copied().unwrap_or(0);
        let counts: Vec<(&str, i64)> = if let Some(client_key) = key.strip_prefix("ping:") {
            vec![
                (
                    "counter",
                    stored(
                        "SELECT COALESCE(SUM(count), 0) FROM rate_limit_windows WHERE key = ?1",
                        client_key,
                    ),
                ),
                (
                    "audit rows",
                    stored(
                        "SELECT COUNT(*) FROM api_calls WHERE key = ?1 AND path = '/ping'",
                        client_key,
                    ),
                ),
            ]
        } else {
            let user = key.strip_prefix("check:").unwrap();
            vec![(
                "events",
                stored(
                    "SELECT COUNT(*) FROM rate_events WHERE user_id = CAST(?1 AS INTEGER) AND endpoint = '/crash'",
                    user,
                ),
            )]
        };
        for (what, stored) in counts {
            assert!(
                acknowledged <= stored && stored <= sent,
                "after kill {life}, {key}: {what} {stored}, acknowledged {acknowledged}, sent {sent}"
            );
        }
    }
}
