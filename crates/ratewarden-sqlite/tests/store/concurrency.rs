//! Many tasks at one instant on one key, on one store or on two stores of
//! one file, admit exactly the limit.

use std::sync::Arc;

use ratewarden_core::{Acquire, Algorithm, Audit, Batch, Decision, Key, Policy, Store, Timestamp};
use ratewarden_sqlite::SqliteStore;
use rusqlite::Connection;
use tokio::sync::Barrier;

use crate::common::{at, int, key, open, policy, sql, temp_db};

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
