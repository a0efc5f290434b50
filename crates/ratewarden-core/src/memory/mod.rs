//! The in-memory store: one process, no persistence, the fastest.
//!
//! State lives in shards (behind a mutex each), chosen by the key's hash,
//! so unrelated keys rarely contend. Inside a shard every policy name has
//! a space of its own, with one hash table per algorithm: state belongs to
//! (policy name, algorithm, key), so policies never share or clear each
//! other's counters. A decision of one check locks one shard, reads the
//! key's state, runs the pure algorithm and writes the next state; a batch
//! locks the shards of all its keys in ascending shard order (so two
//! batches never wait for each other in a cycle: no deadlock), decides
//! every item, applies the all-or-nothing rule ([`crate::batch`]) and
//! writes, then unlocks. Atomic either way, so it never over-admits.
//!
//! Memory stays bounded by the keys active recently: every entry records
//! when its state stops mattering (fixed window: the window's end; sliding
//! window: the end of the next window; GCRA: the theoretical arrival time;
//! sliding log: the newest event + W; saturating at the end of time), and a shard drops its expired
//! entries every [`SWEEP_EVERY`] operations, besides [`Store::prune`].
//! Keys of up to 15 bytes are stored inline in the entry (16 bytes);
//! longer ones take one more heap allocation.

mod compact_key;
mod log;
mod shard;
mod spaces;

use std::hash::BuildHasher;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;

use crate::{
    Acquire, Algorithm, Attempt, Batch, Decision, Key, KeyError, KeyMatch, Policy, Settlement,
    Store, StoreError, Timestamp,
};
use compact_key::Probe;
use shard::{Ctx, Next, Shard};

/// A shard drops its expired entries after this many operations.
pub const SWEEP_EVERY: u32 = 4096;

/// The hasher of every table (random per store).
pub(crate) type Hasher = foldhash::fast::RandomState;

/// The in-memory store. See the module docs for its guarantees.
#[derive(Debug)]
pub struct MemoryStore {
    shards: Box<[Mutex<Shard>]>,
    hasher: Hasher,
}

impl Default for MemoryStore {
    fn default() -> MemoryStore {
        MemoryStore::new()
    }
}

impl MemoryStore {
    /// A store with 64 shards.
    pub fn new() -> MemoryStore {
        MemoryStore::with_shards(64)
    }

    /// A store with `shards` shards (rounded up to a power of two, at least 1).
    pub fn with_shards(shards: usize) -> MemoryStore {
        let n = shards.max(1).next_power_of_two();
        MemoryStore {
            shards: (0..n).map(|_| Mutex::new(Shard::default())).collect(),
            hasher: Hasher::default(),
        }
    }

    /// The number of keys with state, over every policy and algorithm.
    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| lock(s).len()).sum()
    }

    /// Whether no key has state.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// One check without the async wrapper (a batch of one): the memory
    /// store never waits and never fails.
    pub fn acquire_now(&self, policy: &Policy, key: &Key, attempt: Attempt) -> Decision {
        self.acquire_ctx(policy, &self.ctx(policy, key), attempt)
    }

    /// [`MemoryStore::acquire_now`] for the one-part key [`Key::single`]`(part)`,
    /// without building the [`Key`]: a short key's encoding is made on the
    /// stack, so a caller deciding many requests (`ratewarden replay`)
    /// allocates nothing per request.
    ///
    /// # Errors
    /// [`KeyError::TooLong`], as [`Key::single`], when `part` is longer
    /// than [`Key::MAX_BYTES`]; nothing is decided then.
    pub fn acquire_single_now(
        &self,
        policy: &Policy,
        part: &[u8],
        attempt: Attempt,
    ) -> Result<Decision, KeyError> {
        with_single_encoded(part, |encoded| {
            self.acquire_ctx(policy, &self.ctx_encoded(policy, encoded), attempt)
        })
    }

    /// [`MemoryStore::acquire_single_now`] for a caller that has the store
    /// to itself (`&mut`, so no other thread can touch it): the same
    /// decision on the same state, without taking the shard's lock, two
    /// atomic instructions that are about a fifth of a decision's time
    /// (BENCHMARKS.md). `ratewarden replay`'s deciding thread uses it.
    ///
    /// # Errors
    /// [`KeyError::TooLong`], as [`MemoryStore::acquire_single_now`].
    pub fn acquire_single_mut(
        &mut self,
        policy: &Policy,
        part: &[u8],
        attempt: Attempt,
    ) -> Result<Decision, KeyError> {
        with_single_encoded(part, |encoded| {
            self.acquire_encoded_mut(policy, encoded, attempt)
        })
    }

    fn acquire_encoded_mut(
        &mut self,
        policy: &Policy,
        encoded: &[u8],
        attempt: Attempt,
    ) -> Decision {
        let MemoryStore { shards, hasher } = self;
        let ctx = ctx_of(hasher, policy, encoded);
        let shard = shards[shard_of(ctx.hash, shards.len())]
            .get_mut()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        decide_alone(shard, hasher, policy, &ctx, attempt)
    }

    fn acquire_ctx(&self, policy: &Policy, ctx: &Ctx<'_>, attempt: Attempt) -> Decision {
        let mut shard = self.lock_shard(ctx.hash);
        decide_alone(&mut shard, &self.hasher, policy, ctx, attempt)
    }

    /// [`Store::acquire`] without the async wrapper: decides every item of
    /// `batch` all or nothing, under the locks of all their shards.
    pub fn acquire_batch_now(&self, batch: &Batch<'_>) -> Vec<Decision> {
        let now = batch.now();
        if let [item] = batch.items() {
            return vec![self.acquire_now(item.policy, item.key, attempt(item, now))];
        }
        let ctxs: Vec<Ctx<'_>> = batch
            .items()
            .iter()
            .map(|item| self.ctx(item.policy, item.key))
            .collect();
        let mut order: Vec<usize> = ctxs.iter().map(|c| self.shard_index(c.hash)).collect();
        order.sort_unstable();
        order.dedup();
        // Ascending shard order: no two batches can wait on each other.
        let mut guards: Vec<(usize, MutexGuard<'_, Shard>)> = order
            .into_iter()
            .map(|i| (i, lock(&self.shards[i])))
            .collect();
        // Every item's shard is among the locked ones, sorted by index.
        let find = |hash: u64, guards: &[(usize, MutexGuard<'_, Shard>)]| {
            let index = self.shard_index(hash);
            guards.partition_point(|(i, _)| *i < index)
        };
        let own: Vec<(Decision, Next)> = batch
            .items()
            .iter()
            .zip(&ctxs)
            .map(|(item, ctx)| {
                let at = find(ctx.hash, &guards);
                guards[at].1.decide(item.policy, ctx, attempt(item, now))
            })
            .collect();
        let settlement = Settlement::of(batch.items(), own.iter().map(|(d, _)| d));
        let mut decisions = Vec::with_capacity(own.len());
        for ((item, ctx), (decision, next)) in batch.items().iter().zip(&ctxs).zip(own) {
            let at = find(ctx.hash, &guards);
            let shard = &mut guards[at].1;
            let reported =
                settlement.report(item, decision, || shard.status(item.policy, ctx, now));
            if settlement.charges(item) {
                shard.write(item.policy, ctx, attempt(item, now), next);
            }
            decisions.push(reported);
        }
        for (_, shard) in &mut guards {
            shard.tick(now, &self.hasher);
        }
        decisions
    }

    /// [`Store::status`] without the async wrapper.
    pub fn status_now(&self, policy: &Policy, key: &Key, now: Timestamp) -> Decision {
        let ctx = self.ctx(policy, key);
        self.lock_shard(ctx.hash).status(policy, &ctx, now)
    }

    /// [`Store::reset`] without the async wrapper.
    pub fn reset_now(&self, policy: &Policy, keys: KeyMatch<'_>, now: Timestamp) -> u64 {
        let reset = |shard: &Mutex<Shard>| lock(shard).reset(policy, keys, now);
        match keys {
            KeyMatch::Exactly(key) => {
                let hash = self.hasher.hash_one(key.encoded());
                reset(&self.shards[self.shard_index(hash)])
            }
            KeyMatch::StartingWith(_) => self.shards.iter().map(reset).sum(),
        }
    }

    /// What finding the entry of (`policy`, `key`) takes.
    fn ctx<'a>(&'a self, policy: &'a Policy, key: &'a Key) -> Ctx<'a> {
        self.ctx_encoded(policy, key.encoded())
    }

    /// [`MemoryStore::ctx`] from a key's [`Key::encoded`] bytes.
    fn ctx_encoded<'a>(&'a self, policy: &'a Policy, encoded: &'a [u8]) -> Ctx<'a> {
        ctx_of(&self.hasher, policy, encoded)
    }

    fn shard_index(&self, hash: u64) -> usize {
        shard_of(hash, self.shards.len())
    }

    fn lock_shard(&self, hash: u64) -> MutexGuard<'_, Shard> {
        lock(&self.shards[self.shard_index(hash)])
    }
}

/// Runs `f` on the [`Key::encoded`] bytes of [`Key::single`]`(part)`,
/// made on the stack for a short part (no allocation).
///
/// # Errors
/// [`KeyError::TooLong`] when `part` is longer than [`Key::MAX_BYTES`];
/// `f` is not run then.
fn with_single_encoded<R>(part: &[u8], f: impl FnOnce(&[u8]) -> R) -> Result<R, KeyError> {
    let mut buf = [0u8; crate::key::SHORT_SINGLE];
    if let Some(encoded) = crate::key::single_encoded_in(part, &mut buf) {
        return Ok(f(encoded));
    }
    let key = Key::single(part)?;
    Ok(f(key.encoded()))
}

/// The shard of a key's hash among `shards` (a power of two): the top
/// bits pick the shard; the tables use the low bits.
fn shard_of(hash: u64, shards: usize) -> usize {
    (hash >> 48) as usize & (shards - 1)
}

/// What finding the entry of (`policy`, the key `encoded`) takes.
fn ctx_of<'a>(hasher: &'a Hasher, policy: &'a Policy, encoded: &'a [u8]) -> Ctx<'a> {
    Ctx {
        hash: hasher.hash_one(encoded),
        key: encoded,
        probe: Probe::new(encoded),
        hasher,
        quota: &policy.quota,
    }
}

/// One check alone in its batch, on its key's shard.
fn decide_alone(
    shard: &mut Shard,
    hasher: &Hasher,
    policy: &Policy,
    ctx: &Ctx<'_>,
    attempt: Attempt,
) -> Decision {
    shard.tick(attempt.now, hasher);
    // Alone in its batch, an item is charged exactly when its algorithm
    // returns a next state: an allowed batch writes it, and a denied
    // one-item batch has a next state only for a fixed window that
    // counts denied attempts, which is charged anyway.
    shard.acquire(policy, ctx, attempt)
}

fn attempt(item: &Acquire<'_>, now: Timestamp) -> Attempt {
    Attempt {
        now,
        cost: item.cost,
    }
}

/// A poisoned shard only means another thread panicked mid-update of plain
/// integers; the data is still well-formed, so keep serving.
fn lock(shard: &Mutex<Shard>) -> MutexGuard<'_, Shard> {
    shard
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[async_trait]
impl Store for MemoryStore {
    fn kind(&self) -> &'static str {
        "memory"
    }

    async fn entries(&self) -> Option<u64> {
        Some(self.len() as u64)
    }

    async fn acquire(&self, batch: &Batch<'_>) -> Result<Vec<Decision>, StoreError> {
        Ok(self.acquire_batch_now(batch))
    }

    async fn status(
        &self,
        policy: &Policy,
        key: &Key,
        now: Timestamp,
    ) -> Result<Decision, StoreError> {
        Ok(self.status_now(policy, key, now))
    }

    async fn reset(
        &self,
        policy: &Policy,
        keys: KeyMatch<'_>,
        now: Timestamp,
    ) -> Result<u64, StoreError> {
        Ok(self.reset_now(policy, keys, now))
    }

    /// Drops every expired entry of `algorithm`; the entries know their own
    /// expiry, so `longest_window` is not needed.
    async fn prune(
        &self,
        algorithm: Algorithm,
        _longest_window: Duration,
        now: Timestamp,
    ) -> Result<u64, StoreError> {
        Ok(self
            .shards
            .iter()
            .map(|s| lock(s).sweep(Some(algorithm), now, &self.hasher))
            .sum())
    }

    fn keeps_audit_log(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
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
            let second = store.acquire_now(&p, &key, at(0));
            assert_eq!((first.remaining, second.remaining), (2, 1), "{len}");
            assert_eq!(store.status_now(&p, &key, at(0).now).remaining, 1, "{len}");
        }
        let long = vec![b'k'; Key::MAX_BYTES + 1];
        assert_eq!(
            store.acquire_single_now(&p, &long, at(0)).unwrap_err(),
            Key::single(&long).unwrap_err()
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
            Key::single(&long).unwrap_err()
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
                store.acquire_now(&p, &Key::single(format!("k{i}")).unwrap(), at(0));
            }
        }
        assert_eq!(store.len(), 4000);
        // Two windows later every state is as good as absent; enough
        // operations on the shard trigger a sweep.
        let p = policy(Algorithm::Gcra, 5, Duration::from_secs(1));
        let key = Key::single("late").unwrap();
        for _ in 0..SWEEP_EVERY {
            store.acquire_now(&p, &key, at(2_001));
        }
        let shard = lock(&store.shards[0]);
        let s = shard.spaces.named("t").expect("the space of t");
        assert_eq!(
            (s.fixed.len(), s.sliding.len(), s.gcra.len(), s.log.len()),
            (0, 0, 1, 0),
            "only the key active now is left"
        );
    }

    /// Regression: shrinking a table after a sweep rehashed every entry to
    /// 0, so later lookups missed and the key got a second, fresh entry.
    #[test]
    fn keys_are_found_again_after_a_sweep_shrinks_the_table() {
        let store = MemoryStore::with_shards(1);
        let p = policy(Algorithm::FixedWindow, 1, Duration::from_secs(1));
        for i in 0..1000 {
            store.acquire_now(&p, &Key::single(format!("old{i}")).unwrap(), at(0));
        }
        let key = Key::single("kept").unwrap();
        let long = policy(Algorithm::FixedWindow, 1, Duration::from_secs(3600));
        assert!(store.acquire_now(&long, &key, at(0)).allowed());
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
            !store.acquire_now(&long, &key, at(1000)).allowed(),
            "the key's count survived the shrink"
        );
        assert_eq!(store.len(), 1);
    }

    /// Regression: the memory store kept `(k+1)·W` / `(k+2)·W` instead of
    /// the window index; near the end of time that product saturated, the
    /// index read back wrong and the sliding window admitted without limit.
    #[test]
    fn window_state_survives_when_the_window_end_overflows() {
        let store = MemoryStore::new();
        let t = |n: u64| Attempt::one(Timestamp::from_unix_nanos(n));
        // The testkit's failing input: (k+2)·W passes u64::MAX.
        let max = i64::MAX as u64;
        let p = policy(Algorithm::SlidingWindow, 2, Duration::from_nanos(max));
        let key = Key::single("sliding").unwrap();
        assert!(store.acquire_now(&p, &key, t(max - 1)).allowed());
        assert!(store.acquire_now(&p, &key, t(max)).allowed());
        assert!(!store.acquire_now(&p, &key, t(max)).allowed());
        // The same kind for the fixed window: window 1 of W = 2^63 ends at 2^64.
        let p = policy(Algorithm::FixedWindow, 2, Duration::from_nanos(1 << 63));
        let key = Key::single("fixed").unwrap();
        let late = (1 << 63) + 5;
        assert!(store.acquire_now(&p, &key, t(late)).allowed());
        assert!(store.acquire_now(&p, &key, t(late)).allowed());
        assert!(!store.acquire_now(&p, &key, t(late)).allowed());
    }

    #[test]
    fn prune_drops_only_expired_entries_of_one_algorithm() {
        let store = MemoryStore::new();
        let fixed = policy(Algorithm::FixedWindow, 5, Duration::from_secs(1));
        let gcra = policy(Algorithm::Gcra, 5, Duration::from_secs(10));
        let key = Key::single("a").unwrap();
        store.acquire_now(&fixed, &key, at(500));
        store.acquire_now(&gcra, &key, at(500));
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
        assert!(store.acquire_now(&p, &key, big).allowed());
        assert!(store.acquire_now(&p, &key, big).allowed());
        let d = store.acquire_now(&p, &key, big);
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
        store.acquire_now(&gone, &Key::single("a").unwrap(), at(0));
        let p = policy(Algorithm::Gcra, 5, Duration::from_secs(1));
        for _ in 0..SWEEP_EVERY {
            store.acquire_now(&p, &Key::single("b").unwrap(), at(5_000));
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
}
