//! Atomicity: concurrent requests for one key never over-admit.

use std::sync::Arc;

use ratewarden_core::{Acquire, Algorithm, Batch, Outcome, Policy, Store, Timestamp};
use tokio::sync::Barrier;

use super::{SEC, T0, key, quota};

/// Concurrent tasks per round.
const TASKS: usize = 100;
/// The limit (and GCRA burst).
const LIMIT: u64 = 10;
/// Rounds, each on a fresh key.
const ROUNDS: u64 = 3;

/// 100 tasks acquire one key at one instant with limit 10 (cost 1; GCRA
/// burst 10): exactly 10 pass and the others are denied, three times
/// over. Run it on a multi-thread runtime so the tasks really race.
pub async fn concurrent_acquires_admit_exactly_the_limit(
    store: Arc<dyn Store>,
    algorithm: Algorithm,
) {
    let policy = Arc::new(Policy::new(
        super::seed_name(algorithm),
        algorithm,
        quota(LIMIT, 60 * SEC).with_burst(LIMIT),
    ));
    for round in 0..ROUNDS {
        let key = Arc::new(key(["concurrency".as_bytes(), &round.to_be_bytes()]));
        let now = Timestamp::from_unix_nanos(T0 + round * 3600 * SEC + 7);
        let barrier = Arc::new(Barrier::new(TASKS));
        let tasks: Vec<_> = (0..TASKS)
            .map(|_| {
                let (store, policy, key, barrier) = (
                    Arc::clone(&store),
                    Arc::clone(&policy),
                    Arc::clone(&key),
                    Arc::clone(&barrier),
                );
                tokio::spawn(async move {
                    let batch = Batch::one(now, Acquire::one(&policy, &key));
                    barrier.wait().await;
                    let decisions = store.acquire(&batch).await?;
                    decisions
                        .first()
                        .copied()
                        .ok_or_else(|| ratewarden_core::StoreError::Failed("no decision".into()))
                })
            })
            .collect();
        let (mut allowed, mut denied) = (0u64, 0u64);
        for task in tasks {
            let decision = task
                .await
                .expect("an acquiring task panicked")
                .unwrap_or_else(|e| panic!("{algorithm}: acquire failed: {e}"));
            match decision.outcome {
                Outcome::Allowed => allowed += 1,
                Outcome::Denied { .. } => denied += 1,
                Outcome::Never => panic!("{algorithm}: cost 1 under limit {LIMIT} was Never"),
            }
        }
        assert_eq!(
            (allowed, denied),
            (LIMIT, TASKS as u64 - LIMIT),
            "{algorithm}, round {round}: {TASKS} concurrent requests at one instant, limit {LIMIT}"
        );
        let status = store
            .status(&policy, &key, now)
            .await
            .unwrap_or_else(|e| panic!("{algorithm}: status failed: {e}"));
        assert_eq!(
            (status.allowed(), status.remaining),
            (false, 0),
            "{algorithm}, round {round}: status after the race"
        );
    }
}

/// Users in [`concurrent_batches_admit_exactly_each_limit`].
const USERS: usize = 4;
/// Each user's limit there; `USERS · PER_USER` exceeds the global limit.
const PER_USER: u64 = 4;

/// 120 tasks at one instant each send a batch of two checks, a global
/// limit of 10 on one key and a per-user limit of 4 on one of 4 user
/// keys (in either order within the batch, so lock ordering is tested).
/// Exactly 10 batches pass (the users' limits add up to more, so only the
/// global limit binds), no user passes more than 4, and the stored usage
/// is exactly what the allowed batches charged: denied batches left no
/// charge on either policy. The global policy is the algorithm under
/// test, the users' the next algorithm, so every pair is exercised.
pub async fn concurrent_batches_admit_exactly_each_limit(
    store: Arc<dyn Store>,
    algorithm: Algorithm,
) {
    const TASKS: usize = 120;
    let next = Algorithm::ALL[(Algorithm::ALL
        .iter()
        .position(|a| *a == algorithm)
        .unwrap_or(0)
        + 1)
        % Algorithm::ALL.len()];
    let global = Arc::new(Policy::new("global", algorithm, quota(LIMIT, 60 * SEC)));
    let user = Arc::new(Policy::new("user", next, quota(PER_USER, 60 * SEC)));
    let now = Timestamp::from_unix_nanos(T0 + 11);
    let g = Arc::new(key(["all"]));
    let users: Arc<Vec<_>> = Arc::new((0..USERS).map(|i| key([format!("u{i}")])).collect());
    let barrier = Arc::new(Barrier::new(TASKS));
    let tasks: Vec<_> = (0..TASKS)
        .map(|i| {
            let (store, global, user, g, users, barrier) = (
                Arc::clone(&store),
                Arc::clone(&global),
                Arc::clone(&user),
                Arc::clone(&g),
                Arc::clone(&users),
                Arc::clone(&barrier),
            );
            tokio::spawn(async move {
                let u = &users[i % USERS];
                let mut checks = vec![Acquire::one(&global, &g), Acquire::one(&user, u)];
                if i % 2 == 1 {
                    checks.reverse();
                }
                let batch = Batch::new(now, checks);
                barrier.wait().await;
                let decisions = store.acquire(&batch).await?;
                let allowed = decisions.iter().all(|d| d.allowed());
                Ok::<_, ratewarden_core::StoreError>((i % USERS, allowed))
            })
        })
        .collect();
    let mut per_user = [0u64; USERS];
    for task in tasks {
        let (u, allowed) = task
            .await
            .expect("a batching task panicked")
            .unwrap_or_else(|e| panic!("{algorithm} + {next}: batch failed: {e}"));
        per_user[u] += u64::from(allowed);
    }
    let total: u64 = per_user.iter().sum();
    let what = format!("{algorithm} global + {next} per user, {TASKS} concurrent batches");
    assert_eq!(total, LIMIT, "{what}: allowed batches {per_user:?}");
    for (u, admitted) in per_user.iter().enumerate() {
        assert!(
            *admitted <= PER_USER,
            "{what}: user {u} admitted {admitted}"
        );
        let status = store
            .status(&user, &users[u], now)
            .await
            .unwrap_or_else(|e| panic!("{what}: status failed: {e}"));
        assert_eq!(
            status.remaining,
            PER_USER - admitted,
            "{what}: user {u} was charged for denied batches"
        );
    }
    let status = store
        .status(&global, &g, now)
        .await
        .unwrap_or_else(|e| panic!("{what}: status failed: {e}"));
    assert_eq!(status.remaining, 0, "{what}: the global limit is used up");
}
