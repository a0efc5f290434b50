//! Decisions per second through the Redis store with many callers, for
//! `scripts/bench-peers.sh redis-anchor`, which runs redis-benchmark of
//! redis-cell's `CL.THROTTLE` and of the store's own script beside it.
//!
//! `RW_REDIS_URL=redis://127.0.0.1:PORT/0 cargo bench -p ratewarden-bench --bench redis_throughput`
//! (without `RW_REDIS_URL` it prints how to run it and exits).

use std::sync::Arc;
use std::time::Instant;

use ratewarden_bench::{keys, open_policy};
use ratewarden_core::{Acquire, Algorithm, Batch, Clock, Store, SystemClock};
use ratewarden_redis::{RedisConfig, RedisStore};

const CALLERS: usize = 64;
const PER_CALLER: usize = 3_000;

fn main() {
    let Ok(url) = std::env::var("RW_REDIS_URL") else {
        println!(
            "set RW_REDIS_URL=redis://127.0.0.1:PORT/0 (see scripts/bench-peers.sh redis-anchor)"
        );
        return;
    };
    let algorithm = std::env::var("RW_ALGORITHM")
        .ok()
        .and_then(|a| a.parse::<Algorithm>().ok())
        .unwrap_or(Algorithm::Gcra);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        // A loaded machine can hold a call past the service's 100 ms
        // default: a benchmark should measure, not fail.
        let config = RedisConfig::from_url(&url)
            .expect("a redis:// URL")
            .with_timeout(std::time::Duration::from_secs(5));
        let store = Arc::new(RedisStore::new(config).expect("store"));
        let policy = Arc::new(open_policy(algorithm));
        let keys = Arc::new(keys(10_000));
        let started = Instant::now();
        let mut tasks = Vec::with_capacity(CALLERS);
        for caller in 0..CALLERS {
            let (store, policy, keys) =
                (Arc::clone(&store), Arc::clone(&policy), Arc::clone(&keys));
            tasks.push(tokio::spawn(async move {
                for i in 0..PER_CALLER {
                    let key = &keys[(caller * PER_CALLER + i) % keys.len()];
                    let batch = Batch::one(SystemClock.now(), Acquire::one(&policy, key));
                    store.acquire(&batch).await.expect("decision");
                }
            }));
        }
        for task in tasks {
            task.await.expect("caller");
        }
        let total = (CALLERS * PER_CALLER) as f64;
        println!(
            "{algorithm}: {:.0} decisions/s ({CALLERS} callers)",
            total / started.elapsed().as_secs_f64()
        );
    });
}
