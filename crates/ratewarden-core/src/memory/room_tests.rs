//! The memory store at its bound (`room.rs`).

use std::num::NonZeroU64;
use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::{Clock, ManualClock, Quota};

fn bounded(max_keys: u64) -> MemoryStore {
    MemoryStore::new().with_max_keys(NonZeroU64::new(max_keys).unwrap())
}

fn policy(name: &str, algorithm: Algorithm, limit: u64, window: Duration) -> Policy {
    Policy::new(name, algorithm, Quota::new(limit, window).unwrap())
}

fn key(name: &str) -> Key {
    Key::single(name).unwrap()
}

/// 2026-01-01T00:00:00Z on a manual clock.
fn clock() -> ManualClock {
    ManualClock::new(Timestamp::from_unix_secs(1_767_225_600))
}

#[test]
fn a_full_store_refuses_a_new_key_and_decides_the_keys_it_holds_exactly() {
    for algorithm in Algorithm::ALL {
        let store = bounded(3);
        let clock = clock();
        let p = policy("p", algorithm, 2, Duration::from_secs(60));
        let one = |k: &str| store.acquire_now(&p, &key(k), Attempt::one(clock.now()));
        for k in ["a", "b", "c"] {
            assert!(one(k).unwrap().allowed(), "{algorithm}: {k}");
        }
        assert_eq!(
            one("d"),
            Err(StoreFull { max_keys: 3 }),
            "{algorithm}: a fourth key"
        );
        assert_eq!(store.keys_refused(), 1, "{algorithm}");
        // The keys held go on exactly: one more each, then denied.
        for k in ["a", "b", "c"] {
            assert!(one(k).unwrap().allowed(), "{algorithm}: {k} again");
            assert!(!one(k).unwrap().allowed(), "{algorithm}: {k} over");
        }
        assert_eq!(one("d"), Err(StoreFull { max_keys: 3 }), "{algorithm}");
        assert_eq!((store.len(), store.counted()), (3, 3), "{algorithm}");
        // Reads never need room.
        let fresh = MemoryStore::new().status_now(&p, &key("d"), clock.now());
        assert_eq!(store.status_now(&p, &key("d"), clock.now()), fresh);
    }
}

#[test]
fn a_check_that_stores_nothing_is_decided_at_the_bound() {
    let store = bounded(1);
    let clock = clock();
    let p = policy("p", Algorithm::FixedWindow, 1, Duration::from_secs(60));
    assert!(
        store
            .acquire_now(&p, &key("a"), Attempt::one(clock.now()))
            .unwrap()
            .allowed()
    );
    // A limit of 0 never passes and stores nothing, so needs no room; nor
    // does a cost over the limit.
    let never = policy("never", Algorithm::SlidingLog, 0, Duration::from_secs(60));
    let d = store
        .acquire_now(&never, &key("b"), Attempt::one(clock.now()))
        .unwrap();
    assert_eq!(d.outcome, crate::Outcome::Never);
    let costly = Attempt {
        now: clock.now(),
        cost: NonZeroU64::new(5).unwrap(),
    };
    let d = store.acquire_now(&p, &key("c"), costly).unwrap();
    assert_eq!(d.outcome, crate::Outcome::Never);
    assert_eq!(store.keys_refused(), 0);
}

#[test]
fn expired_entries_make_room_for_new_keys() {
    for algorithm in Algorithm::ALL {
        let store = bounded(3);
        let clock = clock();
        let short = policy("short", algorithm, 5, Duration::from_secs(1));
        let long = policy("long", algorithm, 5, Duration::from_secs(3600));
        let one = |p: &Policy, k: &str| store.acquire_now(p, &key(k), Attempt::one(clock.now()));
        one(&long, "kept").unwrap();
        one(&short, "a").unwrap();
        one(&short, "b").unwrap();
        assert!(one(&short, "c").is_err(), "{algorithm}");
        // Every state of `short` has expired two windows later; `long`'s
        // has not, and it is decided on its count.
        clock.advance(Duration::from_secs(2));
        assert!(one(&short, "c").unwrap().allowed(), "{algorithm}");
        assert!(one(&short, "d").unwrap().allowed(), "{algorithm}");
        assert_eq!(one(&long, "kept").unwrap().remaining, 3, "{algorithm}");
        assert_eq!((store.len(), store.counted()), (3, 3), "{algorithm}");
    }
}

/// A full store sweeps for room at most once per [`SWEEP_GAP`], so a
/// flood at the bound costs one sweep per gap: for up to that long after
/// an entry expires, a new key may still be refused (the bound errs
/// towards refusing, never towards dropping live state).
#[test]
fn a_full_store_sweeps_for_room_at_most_once_per_gap() {
    let store = bounded(2);
    let clock = clock();
    let p = policy("p", Algorithm::FixedWindow, 5, Duration::from_secs(1));
    let one = |k: &str| store.acquire_now(&p, &key(k), Attempt::one(clock.now()));
    one("a").unwrap();
    one("b").unwrap();
    // Refused, after a sweep that found nothing expired.
    clock.advance(Duration::from_millis(950));
    assert!(one("c").is_err());
    // The window ended at 1 s: expired, but the last sweep was 50 ms ago.
    clock.advance(SWEEP_GAP / 2);
    assert!(one("c").is_err());
    clock.advance(SWEEP_GAP / 2);
    assert!(one("c").unwrap().allowed());
    assert_eq!(store.keys_refused(), 2);
}

#[test]
fn a_batch_with_a_new_key_at_the_bound_is_refused_whole() {
    let store = bounded(2);
    let clock = clock();
    let p = policy("p", Algorithm::Gcra, 10, Duration::from_secs(60));
    let q = policy("q", Algorithm::SlidingWindow, 10, Duration::from_secs(60));
    let (a, b, c) = (key("a"), key("b"), key("c"));
    let batch = |checks: Vec<Acquire<'_>>| {
        let batch = Batch::new(clock.now(), checks);
        store.acquire_batch_now(&batch)
    };
    batch(vec![Acquire::one(&p, &a), Acquire::one(&q, &a)]).unwrap();
    // Room for none of (p, b) and (q, c): nothing of the batch is charged.
    let before = store.status_now(&p, &a, clock.now());
    let refused = batch(vec![
        Acquire::one(&p, &a),
        Acquire::one(&p, &b),
        Acquire::one(&q, &c),
    ]);
    assert_eq!(refused, Err(StoreFull { max_keys: 2 }));
    assert_eq!(
        store.status_now(&p, &a, clock.now()),
        before,
        "p:a untouched"
    );
    // A batch of keys the store holds is decided as ever.
    let d = batch(vec![Acquire::one(&p, &a), Acquire::one(&q, &a)]).unwrap();
    assert!(d.iter().all(Decision::allowed));
    assert_eq!(
        (store.len(), store.counted(), store.keys_refused()),
        (2, 2, 1)
    );
    // Through the trait: a transient failure, which the limiter's
    // failure modes turn into an answer.
    let e = futures_block_on(Store::acquire(
        &store,
        &Batch::one(clock.now(), Acquire::one(&p, &b)),
    ))
    .unwrap_err();
    assert!(e.is_transient(), "{e}");
    assert!(e.to_string().contains("the memory store is full"), "{e}");
}

#[test]
fn resets_and_emptied_logs_give_their_room_back() {
    let store = bounded(2);
    let clock = clock();
    let p = policy("p", Algorithm::FixedWindow, 5, Duration::from_secs(60));
    let one = |k: &str| store.acquire_now(&p, &key(k), Attempt::one(clock.now()));
    one("a").unwrap();
    one("b").unwrap();
    assert!(one("c").is_err());
    assert_eq!(
        store.reset_now(&p, KeyMatch::Exactly(&key("a")), clock.now()),
        1
    );
    assert!(one("c").unwrap().allowed());
    // A sliding log whose events all left the window is dropped when
    // its key is next decided and denied nothing: here a cost over the
    // limit, which records nothing.
    let log = policy("log", Algorithm::SlidingLog, 5, Duration::from_secs(1));
    for k in ["b", "c"] {
        store.reset_now(&p, KeyMatch::Exactly(&key(k)), clock.now());
    }
    assert!(store.is_empty());
    store
        .acquire_now(&log, &key("l"), Attempt::one(clock.now()))
        .unwrap();
    assert_eq!(store.len(), 1);
    clock.advance(Duration::from_secs(2));
    let over = Attempt {
        now: clock.now(),
        cost: NonZeroU64::new(6).unwrap(),
    };
    store.acquire_now(&log, &key("l"), over).unwrap();
    assert_eq!((store.len(), store.counted()), (0, 0));
}

#[test]
fn the_count_of_keys_follows_every_operation() {
    let store = MemoryStore::with_shards(4).with_max_keys(NonZeroU64::new(40).unwrap());
    let clock = clock();
    let policies: Vec<Policy> = Algorithm::ALL
        .into_iter()
        .map(|a| policy(a.as_str(), a, 3, Duration::from_millis(700)))
        .collect();
    let rt = |f| futures_block_on(f);
    for i in 0..3_000u64 {
        let p = &policies[(i % 4) as usize];
        let k = key(&format!("k{}", i * 7 % 97));
        match i % 11 {
            0 => {
                store.reset_now(p, KeyMatch::Exactly(&k), clock.now());
            }
            1 => {
                let q = &policies[((i + 1) % 4) as usize];
                let other = key(&format!("k{}", i % 13));
                let batch = Batch::new(clock.now(), [Acquire::one(p, &k), Acquire::one(q, &other)]);
                let _ = store.acquire_batch_now(&batch);
            }
            2 => {
                rt(store.prune(p.algorithm, Duration::ZERO, clock.now())).unwrap();
            }
            _ => {
                let _ = store.acquire_now(p, &k, Attempt::one(clock.now()));
            }
        }
        clock.advance(Duration::from_millis(i % 5));
        assert_eq!(store.len(), store.counted(), "after operation {i}");
        assert!(store.len() <= 40, "after operation {i}");
    }
    assert!(store.keys_refused() > 0, "the run reached the bound");
}

/// Many threads adding keys at once never store more than the bound, and
/// every key stored was answered: the count is exact under contention.
#[test]
fn many_parallel_callers_never_exceed_the_bound() {
    const MAX: u64 = 1_000;
    const THREADS: u64 = 8;
    const KEYS: u64 = 1_000;
    let store = Arc::new(bounded(MAX));
    let now = clock().now();
    let p = policy("p", Algorithm::Gcra, 10, Duration::from_secs(60));
    let q = policy("q", Algorithm::FixedWindow, 10, Duration::from_secs(60));
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let (store, p, q) = (Arc::clone(&store), p.clone(), q.clone());
            std::thread::spawn(move || {
                let mut stored = 0u64;
                for i in 0..KEYS {
                    let k = key(&format!("{t}-{i}"));
                    if i % 3 == 0 {
                        // Two new entries at once, or none.
                        let batch = Batch::new(now, [Acquire::one(&p, &k), Acquire::one(&q, &k)]);
                        if store.acquire_batch_now(&batch).is_ok() {
                            stored += 2;
                        }
                    } else if store.acquire_now(&p, &k, Attempt::one(now)).is_ok() {
                        stored += 1;
                    }
                }
                stored
            })
        })
        .collect();
    let stored: u64 = threads.into_iter().map(|t| t.join().unwrap()).sum();
    assert_eq!(store.len() as u64, stored, "every entry was answered");
    assert_eq!(store.counted() as u64, stored);
    assert!(stored <= MAX, "{stored} entries stored");
    // Room for one more entry at most is left when the last callers all
    // wanted two.
    assert!(
        stored >= MAX - 1,
        "{stored} entries stored: refused with room left"
    );
}

#[test]
fn an_owner_deciding_without_locks_keeps_the_same_bound() {
    let mut store = MemoryStore::with_shards(1).with_max_keys(NonZeroU64::new(2).unwrap());
    let clock = clock();
    let p = policy("p", Algorithm::Gcra, 5, Duration::from_secs(1));
    let mut one = |k: &[u8]| store.acquire_single_mut(&p, k, Attempt::one(clock.now()));
    one(b"a").unwrap();
    one(b"b").unwrap();
    assert_eq!(one(b"c"), Err(MemoryError::Full(StoreFull { max_keys: 2 })));
    assert!(one(b"a").unwrap().allowed());
    clock.advance(Duration::from_secs(5));
    assert!(one(b"c").unwrap().allowed());
    assert_eq!((store.len(), store.counted()), (1, 1));
}

#[test]
fn the_default_bound_is_documented_and_none_is_no_bound() {
    assert_eq!(MemoryStore::new().max_keys(), DEFAULT_MAX_KEYS.get());
    assert_eq!(
        MemoryStore::new().with_max_keys(NonZeroU64::MAX).max_keys(),
        u64::MAX
    );
}

/// The memory store's futures complete on the first poll.
fn futures_block_on<T>(
    f: impl std::future::Future<Output = Result<T, StoreError>>,
) -> Result<T, StoreError> {
    let mut f = std::pin::pin!(f);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match f.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(r) => r,
        std::task::Poll::Pending => panic!("memory store future did not complete at once"),
    }
}
