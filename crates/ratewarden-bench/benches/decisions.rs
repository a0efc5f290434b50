//! One decision, per algorithm and store; GCRA beside governor.
//!
//! `cargo bench -p ratewarden-bench --bench decisions`

use std::num::NonZeroU32;
use std::sync::Arc;

use std::hint::black_box;

use criterion::{BatchSize, BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use ratewarden_bench::{keys, open_policy};
use ratewarden_core::{
    Acquire, Algorithm, Attempt, Batch, Clock, MemoryStore, Policy, Store, SystemClock,
};
use ratewarden_sqlite::{SqliteOptions, SqliteStore};

const KEYS: usize = 10_000;

fn memory(c: &mut Criterion) {
    let keys = keys(KEYS);
    let mut group = c.benchmark_group("memory");
    group.throughput(Throughput::Elements(1));
    for algorithm in Algorithm::ALL {
        let store = MemoryStore::new();
        let policy = open_policy(algorithm);
        let mut i = 0usize;
        group.bench_function(BenchmarkId::new(algorithm.as_str(), "10k keys"), |b| {
            b.iter(|| {
                i = (i + 1) % KEYS;
                store.acquire_now(&policy, &keys[i], Attempt::one(SystemClock.now()))
            })
        });
    }
    group.finish();
}

fn sqlite(c: &mut Criterion) {
    let keys = keys(KEYS);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let dir = tempfile::tempdir().expect("temp dir");
    let store: Arc<dyn Store> = Arc::new(
        SqliteStore::open(dir.path().join("bench.db"), SqliteOptions::default()).expect("open"),
    );
    let mut group = c.benchmark_group("sqlite");
    group.throughput(Throughput::Elements(1));
    for algorithm in Algorithm::ALL {
        let policy = open_policy(algorithm);
        let mut i = 0usize;
        group.bench_function(
            BenchmarkId::new(algorithm.as_str(), "10k keys, one caller"),
            |b| {
                b.iter(|| {
                    i = (i + 1) % KEYS;
                    let batch = Batch::one(SystemClock.now(), Acquire::one(&policy, &keys[i]));
                    runtime.block_on(store.acquire(&batch)).expect("decision")
                })
            },
        );
    }
    group.finish();
    runtime.block_on(store.close());
}

/// A flood of new keys: each decision stores a key the store has not
/// seen, so each takes room under the store's bound; 10,000 of them into
/// a fresh store per iteration (making the store is not timed).
fn memory_new_keys(c: &mut Criterion) {
    let keys = keys(KEYS);
    let mut group = c.benchmark_group("memory_new_keys");
    group.throughput(Throughput::Elements(KEYS as u64));
    for algorithm in [Algorithm::FixedWindow, Algorithm::Gcra] {
        let policy = open_policy(algorithm);
        group.bench_function(BenchmarkId::new(algorithm.as_str(), "10k new keys"), |b| {
            b.iter_batched(
                MemoryStore::new,
                |store| {
                    let now = SystemClock.now();
                    for key in &keys {
                        let _ = black_box(store.acquire_now(&policy, key, Attempt::one(now)));
                    }
                    store
                },
                BatchSize::LargeInput,
            )
        });
    }
    group.finish();
}

/// A batch of three checks (one per policy: per key, per key on another
/// algorithm, and one global key) against a batch of one, memory store:
/// what all-or-nothing over several shards costs.
fn memory_batches(c: &mut Criterion) {
    let keys = keys(KEYS);
    let global = ratewarden_core::Key::single("global").expect("a short key");
    let mut group = c.benchmark_group("memory_batch");
    group.throughput(Throughput::Elements(1));
    let store = MemoryStore::new();
    let per_key = open_policy(Algorithm::Gcra);
    let window = Policy::new("window", Algorithm::SlidingWindow, per_key.quota);
    let all = Policy::new("all", Algorithm::FixedWindow, per_key.quota);
    let mut i = 0usize;
    group.bench_function("1 check (gcra)", |b| {
        b.iter(|| {
            i = (i + 1) % KEYS;
            let batch = Batch::one(SystemClock.now(), Acquire::one(&per_key, &keys[i]));
            store.acquire_batch_now(&batch)
        })
    });
    group.bench_function("3 checks (gcra + sliding_window + fixed_window)", |b| {
        b.iter(|| {
            i = (i + 1) % KEYS;
            let checks = [
                Acquire::one(&per_key, &keys[i]),
                Acquire::one(&window, &keys[i]),
                Acquire::one(&all, &global),
            ];
            store.acquire_batch_now(&Batch::new(SystemClock.now(), checks))
        })
    });
    group.finish();
}

/// The memory store's GCRA and governor's keyed GCRA, same keys, same run.
/// Both read the clock once per decision.
fn gcra_vs_governor(c: &mut Criterion) {
    let keys = keys(KEYS);
    let names: Vec<String> = (0..KEYS).map(|i| format!("client-{i}")).collect();
    let mut group = c.benchmark_group("gcra_vs_governor");
    group.throughput(Throughput::Elements(1));

    let store = MemoryStore::new();
    let policy = open_policy(Algorithm::Gcra);
    let mut i = 0usize;
    group.bench_function("ratewarden memory gcra", |b| {
        b.iter(|| {
            i = (i + 1) % KEYS;
            store.acquire_now(&policy, &keys[i], Attempt::one(SystemClock.now()))
        })
    });

    let per_second = NonZeroU32::new(1_000_000_000).expect("non-zero");
    let governor = governor::RateLimiter::keyed(governor::Quota::per_second(per_second));
    let mut j = 0usize;
    group.bench_function("governor keyed", |b| {
        b.iter(|| {
            j = (j + 1) % KEYS;
            governor.check_key(&names[j])
        })
    });

    // The limiters alone, without reading a clock: ratewarden at a fixed
    // instant, governor on its manual clock.
    let now = SystemClock.now();
    group.bench_function("ratewarden memory gcra, fixed time", |b| {
        b.iter(|| {
            i = (i + 1) % KEYS;
            store.acquire_now(&policy, &keys[i], Attempt::one(now))
        })
    });
    let fake = governor::clock::FakeRelativeClock::default();
    let governor =
        governor::RateLimiter::dashmap_with_clock(governor::Quota::per_second(per_second), fake);
    group.bench_function("governor keyed, fake clock", |b| {
        b.iter(|| {
            j = (j + 1) % KEYS;
            governor.check_key(&names[j])
        })
    });
    group.bench_function("SystemClock::now alone", |b| b.iter(|| SystemClock.now()));
    group.bench_function("SystemTime::now (the OS clock)", |b| b.iter(os_time));
    group.finish();
}

/// What `SystemClock` read on every call before it anchored a counter to
/// it: the OS clock.
#[allow(clippy::disallowed_methods)] // measuring the OS clock itself
fn os_time() -> std::time::SystemTime {
    std::time::SystemTime::now()
}

criterion_group!(
    benches,
    memory,
    memory_new_keys,
    memory_batches,
    gcra_vs_governor,
    sqlite
);
criterion_main!(benches);
