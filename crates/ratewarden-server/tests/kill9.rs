//! `ratewarden serve` on SQLite killed with SIGKILL under load, three
//! times on one file: after each kill the file passes `PRAGMA
//! integrity_check`, and nothing acknowledged is lost. Every `/ping` and
//! `/rate/check` answered 200 has its count and its audit row or event
//! stored; nothing is stored that was never sent (README, "Guarantees").
//!
//! Every request has a key of its own (a client key for `/ping`, a user
//! for `/rate/check`), so each answered request must be stored exactly
//! once, and one left unanswered by the kill at most once: no request's
//! rows can stand in for another's. Each kill comes after 3,000 answered
//! requests (however slow the machine) while 32 more are in flight,
//! between and during the writer's commits and the background
//! checkpoints (`--wal-autocheckpoint 64` makes the writer's own
//! checkpoints frequent too). The checks read copies of the file and its
//! write-ahead log, so that the next start finds the log exactly as the
//! kill left it and recovers it itself. A key gets one request, under
//! every default limit, and windows are an hour long: every answered
//! request is an allowed decision and nothing is pruned while the test
//! runs.

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

mod common;

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::Instance;

const CALLERS: usize = 32;
/// Answered requests before each kill.
const KILL_AFTER: usize = 3_000;

/// One request: its key (`ping:crash-L-N` or `check:USER`) and whether
/// it was answered 200.
type Sent = Vec<(String, bool)>;

/// The first user id of life `life`'s requests; its users end below the
/// next life's first.
fn first_user(life: usize) -> usize {
    life * 1_000_000_000
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sigkill_under_load_loses_nothing_acknowledged_and_keeps_the_file_intact() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("kill9.db");
    for life in 0..3 {
        let instance = Instance::serve(
            &[
                "--db",
                db.to_str().unwrap(),
                "--ping-window",
                "3600",
                "--check-window",
                "3600",
                "--wal-autocheckpoint",
                "64",
            ],
            &[],
        )
        .await;
        let answered = Arc::new(AtomicUsize::new(0));
        let callers: Vec<_> = (0..CALLERS)
            .map(|caller| {
                let base = instance.base.clone();
                tokio::spawn(load(base, life, caller, Arc::clone(&answered)))
            })
            .collect();
        // Thousands of decisions and several checkpoints, however slow the
        // machine; the deadline only stops a test whose server stopped.
        let deadline = Instant::now() + Duration::from_secs(60);
        while answered.load(Ordering::Relaxed) < KILL_AFTER && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        instance.signal("KILL");
        let mut sent = Sent::new();
        for caller in callers {
            sent.extend(caller.await.unwrap());
        }
        let answered = sent.iter().filter(|(_, ok)| *ok).count();
        assert!(
            answered >= KILL_AFTER,
            "kill {life}: only {answered} answered in a minute; its log:\n{}",
            instance.log()
        );
        assert!(
            answered < sent.len(),
            "kill {life}: no request was in flight at the kill"
        );
        drop(instance); // waits for the process to be gone
        let copy = tempfile::tempdir().unwrap();
        let checked = copy_database(&db, copy.path());
        assert_eq!(integrity_check(&checked), "ok", "after kill {life}");
        assert_each_answered_request_stored_once(&checked, &sent, life);
    }
}

/// One caller: `/ping` and `/rate/check` in turn, each request with a key
/// of its own, until the server stops answering.
async fn load(base: String, life: usize, caller: usize, answered: Arc<AtomicUsize>) -> Sent {
    let client = reqwest::Client::new();
    let mut sent = Sent::new();
    for n in 0.. {
        let (key, request) = if n % 2 == 0 {
            let client_key = format!("crash-{life}-{caller}-{n}");
            (
                format!("ping:{client_key}"),
                client
                    .get(format!("{base}/ping"))
                    .header("X-Client-Key", client_key),
            )
        } else {
            let user = first_user(life) + caller * 1_000_000 + n + 1;
            (
                format!("check:{user}"),
                client
                    .post(format!("{base}/rate/check"))
                    .header("X-User-Id", user.to_string())
                    .header("Content-Type", "application/json")
                    .body(r#"{"endpoint":"/crash"}"#),
            )
        };
        sent.push((key, false));
        let Ok(response) = request.send().await else {
            break; // killed: this request may or may not have been decided
        };
        let status = response.status();
        // A body cut off by the kill is not an acknowledgement.
        if response.bytes().await.is_err() {
            break;
        }
        let last = sent.last_mut().unwrap();
        assert_eq!(status, 200, "{}: every request is allowed", last.0);
        last.1 = true;
        answered.fetch_add(1, Ordering::Relaxed);
    }
    sent
}

/// Copies `db` and its write-ahead log (as the kill left them) into
/// `dir`; returns the copy's path.
fn copy_database(db: &Path, dir: &Path) -> std::path::PathBuf {
    let copy = dir.join("kill9.db");
    std::fs::copy(db, &copy).unwrap();
    let wal = db.with_extension("db-wal");
    if wal.exists() {
        std::fs::copy(&wal, copy.with_extension("db-wal")).unwrap();
    }
    copy
}

fn integrity_check(db: &Path) -> String {
    rusqlite::Connection::open(db)
        .unwrap()
        .query_row("PRAGMA integrity_check", [], |row| row.get(0))
        .unwrap()
}

/// Every answered request stored exactly once (its counter, and its audit
/// row or event), an unanswered one at most once, and nothing stored
/// under a key of this life that was never sent.
fn assert_each_answered_request_stored_once(db: &Path, sent: &Sent, life: usize) {
    let conn = rusqlite::Connection::open(db).unwrap();
    let stored = |sql: &str| -> HashMap<String, i64> {
        let mut statement = conn.prepare(sql).unwrap();
        let rows = statement
            .query_map([], |row| Ok((row.get::<_, String>(0)?, row.get(1)?)))
            .unwrap();
        rows.map(Result::unwrap).collect()
    };
    let (first, next) = (first_user(life), first_user(life + 1));
    let tables = [
        (
            "counter",
            "ping:",
            stored(&format!(
                "SELECT 'ping:' || key, SUM(count) FROM rate_limit_windows
                 WHERE key LIKE 'crash-{life}-%' GROUP BY key"
            )),
        ),
        (
            "audit rows",
            "ping:",
            stored(&format!(
                "SELECT 'ping:' || key, COUNT(*) FROM api_calls
                 WHERE key LIKE 'crash-{life}-%' AND path = '/ping' GROUP BY key"
            )),
        ),
        (
            "events",
            "check:",
            stored(&format!(
                "SELECT 'check:' || user_id, COUNT(*) FROM rate_events
                 WHERE user_id >= {first} AND user_id < {next} AND endpoint = '/crash'
                 GROUP BY user_id"
            )),
        ),
    ];
    let sent_keys: HashSet<&str> = sent.iter().map(|(k, _)| k.as_str()).collect();
    for (what, prefix, rows) in &tables {
        for key in rows.keys() {
            assert!(
                sent_keys.contains(key.as_str()),
                "after kill {life}: {what} stored for {key}, never sent"
            );
        }
        for (key, answered) in sent.iter().filter(|(k, _)| k.starts_with(prefix)) {
            let count = rows.get(key).copied().unwrap_or(0);
            let expected = if *answered { 1..=1 } else { 0..=1 };
            assert!(
                expected.contains(&count),
                "after kill {life}: {key} ({}) has {count} in {what}",
                if *answered { "answered" } else { "unanswered" }
            );
        }
    }
}
