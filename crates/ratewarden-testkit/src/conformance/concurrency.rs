//! Atomicity: concurrent requests for one key never over-admit.

use std::sync::Arc;

use ratewarden_core::{Acquire, Algorithm, Attempt, Outcome, Policy, Store, Timestamp};
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
    let policy = Arc::new(Policy {
        name: "conformance".into(),
        algorithm,
        quota: quota(LIMIT, 60 * SEC).with_burst(LIMIT),
    });
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
                    barrier.wait().await;
                    store
                        .acquire(Acquire {
                            policy: &policy,
                            key: &key,
                            attempt: Attempt::one(now),
                            audit: None,
                        })
                        .await
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
