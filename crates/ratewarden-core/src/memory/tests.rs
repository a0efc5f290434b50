//! The memory store's unit tests.

use super::compact_key::CompactKey;
use super::*;
use crate::Quota;
use std::num::NonZeroU64;

fn policy(algorithm: Algorithm, limit: u64, window: Duration) -> Policy {
    Policy::new("t", algorithm, Quota::new(limit, window).unwrap())
}

fn at(ms: u64) -> Attempt {
    Attempt::one(Timestamp::from_unix_millis(ms))
}

#[test]
fn a_single_part_decides_on_the_same_state_as_its_key() {
    let store = MemoryStore::new();
    let p = policy(Algorithm::Gcra, 3, Duration::from_secs(1));
    for len in [0, 1, 15, 16, 127, 128, 300, Key::MAX_BYTES] {
        let part = vec![b'k'; len];
        let key = Key::single(&part).unwrap();
        let first = store.acquire_single_now(&p, &part, at(0)).unwrap();
        let second = store.acquire_now(&p, &key, at(0)).unwrap();
        assert_eq!((first.remaining, second.remaining), (2, 1), "{len}");
        assert_eq!(store.status_now(&p, &key, at(0).now).remaining, 1, "{len}");
    }
    let long = vec![b'k'; Key::MAX_BYTES + 1];
    assert_eq!(
        store.acquire_single_now(&p, &long, at(0)).unwrap_err(),
        MemoryError::Key(Key::single(&long).unwrap_err())
    );
}

/// The lock-free path for a store's only user decides on the same
/// state as the locked one, for every algorithm, short and long keys,
/// and sweeps as it goes.
#[test]
fn deciding_through_mut_is_deciding_through_the_locks() {
    for algorithm in Algorithm::ALL {
        let p = policy(algorithm, 3, Duration::from_secs(1));
        // One shard each, so both sweep after the same operations.
        let locked = MemoryStore::with_shards(1);
        let mut alone = MemoryStore::with_shards(1);
        for i in 0..3 * SWEEP_EVERY as u64 {
            let part = if i % 7 == 0 {
                vec![b'L'; 200 + (i % 3) as usize]
            } else {
                format!("k{}", i % 50).into_bytes()
            };
            let now = at(i / 10);
            let want = locked.acquire_single_now(&p, &part, now).unwrap();
            let got = if i % 2 == 0 {
                alone.acquire_single_mut(&p, &part, now).unwrap()
            } else {
                alone.acquire_single_now(&p, &part, now).unwrap()
            };
            assert_eq!(got, want, "{algorithm:?} request {i}");
        }
        assert_eq!(alone.len(), locked.len(), "{algorithm:?}");
    }
    let long = vec![b'k'; Key::MAX_BYTES + 1];
    let p = policy(Algorithm::Gcra, 3, Duration::from_secs(1));
    assert_eq!(
        MemoryStore::new()
            .acquire_single_mut(&p, &long, at(0))
            .unwrap_err(),
        MemoryError::Key(Key::single(&long).unwrap_err())
    );
}

#[test]
fn short_keys_are_inline_and_long_keys_round_trip() {
    let short = CompactKey::new(b"client-123");
    assert!(matches!(short, CompactKey::Inline { .. }));
    assert_eq!(short.as_bytes(), b"client-123");
    let long = vec![7u8; 300];
    assert_eq!(CompactKey::new(&long).as_bytes(), &long[..]);
    assert_eq!(std::mem::size_of::<CompactKey>(), 16);
    for (a, b) in [
        (&b""[..], &b""[..]),
        (&b"client-1"[..], &b"client-1"[..]),
        (&b"client-1"[..], &b"client-2"[..]),
        (&b"client-1"[..], &b"client-1\0"[..]),
        (&long[..], &long[..]),
        (&long[..], &long[..16]),
        (&long[..15], &long[..16]),
    ] {
        assert_eq!(
            Probe::new(a).matches(&CompactKey::new(b)),
            a == b,
            "{a:?} {b:?}"
        );
    }
    assert_eq!(std::mem::size_of::<(CompactKey, u64)>(), 24);
    for len in [15, 16] {
        let key = vec![b'x'; len];
        assert_eq!(CompactKey::new(&key).as_bytes(), &key[..]);
    }
}

#[test]
fn expired_state_is_swept_so_memory_follows_the_active_keys() {
    let store = MemoryStore::with_shards(1);
    for algorithm in Algorithm::ALL {
        let p = policy(algorithm, 5, Duration::from_secs(1));
        for i in 0..1000 {
            store
                .acquire_now(&p, &Key::single(format!("k{i}")).unwrap(), at(0))
                .unwrap();
        }
    }
    assert_eq!(store.len(), 4000);
    // Two windows later every state is as good as absent; enough
    // operations on the shard trigger a sweep.
    let p = policy(Algorithm::Gcra, 5, Duration::from_secs(1));
    let key = Key::single("late").unwrap();
    for _ in 0..SWEEP_EVERY {
        store.acquire_now(&p, &key, at(2_001)).unwrap();
    }
    let shard = lock(&store.shards[0]);
    let s = shard.spaces.named("t").expect("the space of t");
    assert_eq!(
        (s.fixed.len(), s.sliding.len(), s.gcra.len(), s.log.len()),
        (0, 0, 1, 0),
        "only the key active now is left"
    );
}

/// A table shrunk after a sweep must rehash each entry by its own hash:
/// rehashing every entry to 0 makes later lookups miss, and the key gets
/// a second, fresh entry.
#[test]
fn keys_are_found_again_after_a_sweep_shrinks_the_table() {
    let store = MemoryStore::with_shards(1);
    let p = policy(Algorithm::FixedWindow, 1, Duration::from_secs(1));
    for i in 0..1000 {
        store
            .acquire_now(&p, &Key::single(format!("old{i}")).unwrap(), at(0))
            .unwrap();
    }
    let key = Key::single("kept").unwrap();
    let long = policy(Algorithm::FixedWindow, 1, Duration::from_secs(3600));
    assert!(store.acquire_now(&long, &key, at(0)).unwrap().allowed());
    let rt = |f| futures_lite_block_on(f);
    assert_eq!(
        rt(store.prune(
            Algorithm::FixedWindow,
            Duration::ZERO,
            Timestamp::from_unix_millis(1000)
        )),
        1000
    );
    assert!(
        !store.acquire_now(&long, &key, at(1000)).unwrap().allowed(),
        "the key's count survived the shrink"
    );
    assert_eq!(store.len(), 1);
}

/// The store keeps the window index, not `(k+1)·W` / `(k+2)·W`: near the
/// end of time that product saturates, the index would read back wrong
/// and the sliding window admit without limit.
#[test]
fn window_state_survives_when_the_window_end_overflows() {
    let store = MemoryStore::new();
    let t = |n: u64| Attempt::one(Timestamp::from_unix_nanos(n));
    // (k+2)·W passes u64::MAX.
    let max = i64::MAX as u64;
    let p = policy(Algorithm::SlidingWindow, 2, Duration::from_nanos(max));
    let key = Key::single("sliding").unwrap();
    assert!(store.acquire_now(&p, &key, t(max - 1)).unwrap().allowed());
    assert!(store.acquire_now(&p, &key, t(max)).unwrap().allowed());
    assert!(!store.acquire_now(&p, &key, t(max)).unwrap().allowed());
    // The same kind for the fixed window: window 1 of W = 2^63 ends at 2^64.
    let p = policy(Algorithm::FixedWindow, 2, Duration::from_nanos(1 << 63));
    let key = Key::single("fixed").unwrap();
    let late = (1 << 63) + 5;
    assert!(store.acquire_now(&p, &key, t(late)).unwrap().allowed());
    assert!(store.acquire_now(&p, &key, t(late)).unwrap().allowed());
    assert!(!store.acquire_now(&p, &key, t(late)).unwrap().allowed());
}

#[test]
fn prune_drops_only_expired_entries_of_one_algorithm() {
    let store = MemoryStore::new();
    let fixed = policy(Algorithm::FixedWindow, 5, Duration::from_secs(1));
    let gcra = policy(Algorithm::Gcra, 5, Duration::from_secs(10));
    let key = Key::single("a").unwrap();
    store.acquire_now(&fixed, &key, at(500)).unwrap();
    store.acquire_now(&gcra, &key, at(500)).unwrap();
    let rt = |f| futures_lite_block_on(f);
    assert_eq!(
        rt(store.prune(
            Algorithm::FixedWindow,
            Duration::ZERO,
            Timestamp::from_unix_millis(999)
        )),
        0
    );
    assert_eq!(
        rt(store.prune(
            Algorithm::FixedWindow,
            Duration::ZERO,
            Timestamp::from_unix_millis(1000)
        )),
        1
    );
    assert_eq!(store.len(), 1, "the GCRA entry (tat 2.5 s) stays");
}

#[test]
fn the_sliding_log_keeps_runs_of_equal_times_compactly() {
    let store = MemoryStore::new();
    let p = policy(Algorithm::SlidingLog, 100, Duration::from_secs(1));
    let key = Key::single("a").unwrap();
    let big = Attempt {
        now: Timestamp::from_unix_millis(10),
        cost: NonZeroU64::new(40).unwrap(),
    };
    assert!(store.acquire_now(&p, &key, big).unwrap().allowed());
    assert!(store.acquire_now(&p, &key, big).unwrap().allowed());
    let d = store.acquire_now(&p, &key, big).unwrap();
    assert_eq!(d.retry_after(), Some(Duration::from_secs(1)));
    assert_eq!(
        store
            .status_now(&p, &key, Timestamp::from_unix_millis(10))
            .used,
        80
    );
}

#[test]
fn a_space_left_empty_by_a_sweep_is_dropped() {
    let store = MemoryStore::with_shards(1);
    let gone = Policy::new(
        "gone",
        Algorithm::Gcra,
        Quota::new(5, Duration::from_secs(1)).unwrap(),
    );
    store
        .acquire_now(&gone, &Key::single("a").unwrap(), at(0))
        .unwrap();
    let p = policy(Algorithm::Gcra, 5, Duration::from_secs(1));
    for _ in 0..SWEEP_EVERY {
        store
            .acquire_now(&p, &Key::single("b").unwrap(), at(5_000))
            .unwrap();
    }
    assert!(lock(&store.shards[0]).spaces.named("gone").is_none());
}

/// The memory store's futures complete on the first poll.
fn futures_lite_block_on<T>(f: impl std::future::Future<Output = Result<T, StoreError>>) -> T {
    let mut f = std::pin::pin!(f);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match f.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(Ok(v)) => v,
        other => panic!(
            "memory store future did not complete at once: {:?}",
            other.is_ready()
        ),
    }
}
