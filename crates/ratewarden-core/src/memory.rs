//! The in-memory store: one process, no persistence, the fastest.
//!
//! State lives in shards (a hash table each, behind a mutex), chosen by the
//! key's hash, so unrelated keys rarely contend. Each decision locks one
//! shard, reads the key's state, runs the pure algorithm and writes the next
//! state: atomic, so it never over-admits.
//!
//! Memory stays bounded by the keys active recently: every entry records
//! when its state stops mattering (fixed window: the window's end; sliding
//! window: the end of the next window; GCRA: the theoretical arrival time;
//! sliding log: the newest event + W; saturating at the end of time), and a shard drops its expired
//! entries every [`SWEEP_EVERY`] operations, besides [`Store::prune`].
//! Keys of up to 15 bytes are stored inline in the entry (16 bytes);
//! longer ones take one more heap allocation.

use std::collections::VecDeque;
use std::hash::BuildHasher;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use hashbrown::HashTable;

use crate::algorithm::fixed_window::{self, FixedWindowState};
use crate::algorithm::gcra::{self, GcraState};
use crate::algorithm::sliding_log::{self, LiveLog};
use crate::algorithm::sliding_window::{self, SlidingWindowState};
use crate::{
    Acquire, Algorithm, Attempt, Decision, Key, Policy, Quota, Store, StoreError, Timestamp,
};

/// A shard drops its expired entries after this many operations.
pub const SWEEP_EVERY: u32 = 4096;

/// The in-memory store. See the module docs for its guarantees.
#[derive(Debug)]
pub struct MemoryStore {
    shards: Box<[Mutex<Shard>]>,
    hasher: foldhash::fast::RandomState,
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
            hasher: foldhash::fast::RandomState::default(),
        }
    }

    /// The number of keys with state, over every algorithm.
    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| lock(s).len()).sum()
    }

    /// Whether no key has state.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// [`Store::acquire`] without the async wrapper: the memory store never
    /// waits and never fails.
    pub fn acquire_now(&self, policy: &Policy, key: &Key, attempt: Attempt) -> Decision {
        let (mut shard, ctx) = self.locate(policy, key);
        shard.ops += 1;
        if shard.ops >= SWEEP_EVERY {
            shard.ops = 0;
            shard.sweep(None, attempt.now, &self.hasher);
        }
        shard.acquire(policy.algorithm, &ctx, attempt)
    }

    /// [`Store::status`] without the async wrapper.
    pub fn status_now(&self, policy: &Policy, key: &Key, now: Timestamp) -> Decision {
        let (shard, ctx) = self.locate(policy, key);
        shard.status(policy.algorithm, &ctx, now)
    }

    /// The locked shard of `key`, and what finding its entry takes.
    fn locate<'a>(&'a self, policy: &'a Policy, key: &'a Key) -> (MutexGuard<'a, Shard>, Ctx<'a>) {
        let hash = self.hasher.hash_one(key.encoded());
        let ctx = Ctx {
            hash,
            key: key.encoded(),
            hasher: &self.hasher,
            quota: &policy.quota,
        };
        (self.shard(hash), ctx)
    }

    fn shard(&self, hash: u64) -> MutexGuard<'_, Shard> {
        // The top bits pick the shard; the table uses the low bits.
        let index = (hash >> 48) as usize & (self.shards.len() - 1);
        lock(&self.shards[index])
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
    async fn acquire(&self, request: Acquire<'_>) -> Result<Decision, StoreError> {
        Ok(self.acquire_now(request.policy, request.key, request.attempt))
    }

    async fn status(
        &self,
        policy: &Policy,
        key: &Key,
        now: Timestamp,
    ) -> Result<Decision, StoreError> {
        Ok(self.status_now(policy, key, now))
    }

    async fn reset(&self, algorithm: Algorithm, prefix: &Key) -> Result<u64, StoreError> {
        let prefix = prefix.encoded();
        Ok(self
            .shards
            .iter()
            .map(|s| lock(s).reset(algorithm, prefix))
            .sum())
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

/// A key's encoding in 16 bytes: inline when it fits in 15 bytes, else a
/// thin pointer to the heap. `InlineLen` has 16 values, so the other 240
/// values of its byte tell the two variants apart and the enum needs no
/// extra tag (checked by a test): a GCRA entry is 24 bytes.
#[derive(Debug, Clone)]
enum CompactKey {
    Inline { len: InlineLen, bytes: [u8; INLINE] },
    Heap(Box<Box<[u8]>>),
}

/// The longest key stored inline, in bytes.
const INLINE: usize = 15;

/// 0 ..= 15, the length of an inline key.
#[derive(Debug, Clone, Copy)]
#[repr(u8)]
#[rustfmt::skip]
enum InlineLen { L0, L1, L2, L3, L4, L5, L6, L7, L8, L9, L10, L11, L12, L13, L14, L15 }

impl InlineLen {
    const ALL: [InlineLen; 16] = [
        InlineLen::L0,
        InlineLen::L1,
        InlineLen::L2,
        InlineLen::L3,
        InlineLen::L4,
        InlineLen::L5,
        InlineLen::L6,
        InlineLen::L7,
        InlineLen::L8,
        InlineLen::L9,
        InlineLen::L10,
        InlineLen::L11,
        InlineLen::L12,
        InlineLen::L13,
        InlineLen::L14,
        InlineLen::L15,
    ];
}

impl CompactKey {
    fn new(key: &[u8]) -> CompactKey {
        match InlineLen::ALL.get(key.len()) {
            Some(&len) => {
                let mut bytes = [0u8; INLINE];
                bytes[..key.len()].copy_from_slice(key);
                CompactKey::Inline { len, bytes }
            }
            None => CompactKey::Heap(Box::new(key.into())),
        }
    }

    fn as_bytes(&self) -> &[u8] {
        match self {
            CompactKey::Inline { len, bytes } => &bytes[..*len as usize],
            CompactKey::Heap(b) => b,
        }
    }
}

/// One algorithm's table: entries of (key, state), where each state knows
/// its expiry.
type Table<S> = HashTable<(CompactKey, S)>;

trait Expiring {
    /// The instant (ns) from which this state is the same as no state.
    fn expires(&self) -> u64;
}

/// Fixed window: the state and its expiry, the window end `(k + 1)·W`
/// (saturating; the index is kept as such because the end cannot be
/// turned back into it once it saturates).
#[derive(Debug, Clone, Copy)]
struct FixedEntry {
    state: FixedWindowState,
    expires: u64,
}

impl Expiring for FixedEntry {
    fn expires(&self) -> u64 {
        self.expires
    }
}

/// Sliding window: the state and `(k + 2)·W`, when `curr` stops weighing
/// (saturating).
#[derive(Debug, Clone, Copy)]
struct SlidingEntry {
    state: SlidingWindowState,
    expires: u64,
}

impl Expiring for SlidingEntry {
    fn expires(&self) -> u64 {
        self.expires
    }
}

impl Expiring for u64 {
    fn expires(&self) -> u64 {
        *self
    }
}

/// Sliding log: run-length events `(at, count)`, oldest first, and the
/// newest event + W.
#[derive(Debug, Clone, Default)]
struct LogEntry {
    expires: u64,
    events: VecDeque<(u64, u64)>,
}

impl Expiring for LogEntry {
    fn expires(&self) -> u64 {
        self.expires
    }
}

#[derive(Debug, Default)]
struct Shard {
    fixed: Table<FixedEntry>,
    sliding: Table<SlidingEntry>,
    gcra: Table<u64>,
    log: Table<LogEntry>,
    ops: u32,
}

/// What one operation needs to find its entry.
struct Ctx<'a> {
    hash: u64,
    key: &'a [u8],
    hasher: &'a foldhash::fast::RandomState,
    quota: &'a Quota,
}

impl Ctx<'_> {
    fn get<'t, S>(&self, table: &'t Table<S>) -> Option<&'t S> {
        table
            .find(self.hash, |(k, _)| k.as_bytes() == self.key)
            .map(|(_, s)| s)
    }

    /// Runs `decide` on the key's state (`None`: absent) and stores the
    /// state it returns (`None`: leave as is), with one table lookup.
    fn update<S: Copy>(
        &self,
        table: &mut Table<S>,
        decide: impl FnOnce(Option<S>) -> (Decision, Option<S>),
    ) -> Decision {
        let hasher = self.hasher;
        let entry = table.entry(
            self.hash,
            |(k, _)| k.as_bytes() == self.key,
            |(k, _)| hasher.hash_one(k.as_bytes()),
        );
        match entry {
            hashbrown::hash_table::Entry::Occupied(mut slot) => {
                let (decision, next) = decide(Some(slot.get().1));
                if let Some(next) = next {
                    slot.get_mut().1 = next;
                }
                decision
            }
            hashbrown::hash_table::Entry::Vacant(slot) => {
                let (decision, next) = decide(None);
                if let Some(next) = next {
                    slot.insert((CompactKey::new(self.key), next));
                }
                decision
            }
        }
    }
}

impl Shard {
    fn len(&self) -> usize {
        self.fixed.len() + self.sliding.len() + self.gcra.len() + self.log.len()
    }

    fn acquire(&mut self, algorithm: Algorithm, ctx: &Ctx<'_>, attempt: Attempt) -> Decision {
        let w = ctx.quota.window_nanos();
        match algorithm {
            Algorithm::FixedWindow => ctx.update(&mut self.fixed, |state| {
                let (d, next) = fixed_window::decide(state.map(|e| e.state), ctx.quota, attempt);
                (d, next.map(|s| fixed_entry(s, w)))
            }),
            Algorithm::SlidingWindow => ctx.update(&mut self.sliding, |state| {
                let (d, next) = sliding_window::decide(state.map(|e| e.state), ctx.quota, attempt);
                (d, next.map(|s| sliding_entry(s, w)))
            }),
            Algorithm::Gcra => ctx.update(&mut self.gcra, |state| {
                let (d, next) =
                    gcra::decide(state.map(|tat| GcraState { tat }), ctx.quota, attempt);
                (d, next.map(|s| s.tat))
            }),
            Algorithm::SlidingLog => {
                let hasher = ctx.hasher;
                let entry = match self
                    .log
                    .find_mut(ctx.hash, |(k, _)| k.as_bytes() == ctx.key)
                {
                    Some((_, e)) => e,
                    None => {
                        let fresh = (CompactKey::new(ctx.key), LogEntry::default());
                        let slot = self
                            .log
                            .insert_unique(ctx.hash, fresh, |(k, _)| hasher.hash_one(k.as_bytes()));
                        &mut slot.into_mut().1
                    }
                };
                let d = log_decide(entry, ctx.quota, attempt, true);
                if entry.events.is_empty() {
                    self.log_remove(ctx);
                }
                d
            }
        }
    }

    fn status(&self, algorithm: Algorithm, ctx: &Ctx<'_>, now: Timestamp) -> Decision {
        match algorithm {
            Algorithm::FixedWindow => {
                fixed_window::status(ctx.get(&self.fixed).map(|e| e.state), ctx.quota, now)
            }
            Algorithm::SlidingWindow => {
                sliding_window::status(ctx.get(&self.sliding).map(|e| e.state), ctx.quota, now)
            }
            Algorithm::Gcra => gcra::status(
                ctx.get(&self.gcra).map(|&tat| GcraState { tat }),
                ctx.quota,
                now,
            ),
            Algorithm::SlidingLog => {
                let mut entry = ctx.get(&self.log).cloned().unwrap_or_default();
                log_decide(&mut entry, ctx.quota, Attempt::one(now), false)
            }
        }
    }

    fn log_remove(&mut self, ctx: &Ctx<'_>) {
        if let Ok(entry) = self
            .log
            .find_entry(ctx.hash, |(k, _)| k.as_bytes() == ctx.key)
        {
            entry.remove();
        }
    }

    fn reset(&mut self, algorithm: Algorithm, prefix: &[u8]) -> u64 {
        fn drop_prefixed<S>(table: &mut Table<S>, prefix: &[u8]) -> u64 {
            let before = table.len();
            table.retain(|(k, _)| !k.as_bytes().starts_with(prefix));
            (before - table.len()) as u64
        }
        match algorithm {
            Algorithm::FixedWindow => drop_prefixed(&mut self.fixed, prefix),
            Algorithm::SlidingWindow => drop_prefixed(&mut self.sliding, prefix),
            Algorithm::Gcra => drop_prefixed(&mut self.gcra, prefix),
            Algorithm::SlidingLog => drop_prefixed(&mut self.log, prefix),
        }
    }

    /// Drops entries expired at `now` (of one algorithm, or of all).
    fn sweep(
        &mut self,
        algorithm: Option<Algorithm>,
        now: Timestamp,
        hasher: &foldhash::fast::RandomState,
    ) -> u64 {
        fn expire_table<S: Expiring>(
            table: &mut Table<S>,
            now: u64,
            hasher: &foldhash::fast::RandomState,
        ) -> u64 {
            let before = table.len();
            table.retain(|(_, s)| s.expires() > now);
            // Give memory back after a burst of keys; entries are rehashed
            // with the same hasher that placed them.
            if table.capacity() > 64 && table.len() < table.capacity() / 4 {
                table.shrink_to_fit(|(k, _)| hasher.hash_one(k.as_bytes()));
            }
            (before - table.len()) as u64
        }
        let now = now.as_unix_nanos();
        let wanted = |a: Algorithm| algorithm.is_none_or(|x| x == a);
        let mut dropped = 0;
        if wanted(Algorithm::FixedWindow) {
            dropped += expire_table(&mut self.fixed, now, hasher);
        }
        if wanted(Algorithm::SlidingWindow) {
            dropped += expire_table(&mut self.sliding, now, hasher);
        }
        if wanted(Algorithm::Gcra) {
            dropped += expire_table(&mut self.gcra, now, hasher);
        }
        if wanted(Algorithm::SlidingLog) {
            dropped += expire_table(&mut self.log, now, hasher);
        }
        dropped
    }
}

fn fixed_entry(state: FixedWindowState, w: u64) -> FixedEntry {
    FixedEntry {
        state,
        expires: state.window.saturating_add(1).saturating_mul(w),
    }
}

fn sliding_entry(state: SlidingWindowState, w: u64) -> SlidingEntry {
    SlidingEntry {
        state,
        expires: state.window.saturating_add(2).saturating_mul(w),
    }
}

/// Sliding log on a run-length event list: drops dead events, decides,
/// and records when allowed and `record` is set (status does not record).
fn log_decide(entry: &mut LogEntry, quota: &Quota, attempt: Attempt, record: bool) -> Decision {
    let now = attempt.now;
    while let Some(&(at, _)) = entry.events.front() {
        if sliding_log::is_live(quota, Timestamp::from_unix_nanos(at), now) {
            break;
        }
        entry.events.pop_front();
    }
    let log = LiveLog {
        count: entry.events.iter().map(|&(_, n)| n).sum(),
        newest: entry
            .events
            .back()
            .map(|&(at, _)| Timestamp::from_unix_nanos(at)),
    };
    let nth_oldest = |j: u64| {
        let mut seen = 0u64;
        for &(at, n) in &entry.events {
            seen += n;
            if seen >= j {
                return Ok::<_, std::convert::Infallible>(Timestamp::from_unix_nanos(at));
            }
        }
        Ok(log.newest.unwrap_or(now))
    };
    let decision = if record {
        sliding_log::decide(log, nth_oldest, quota, attempt)
    } else {
        sliding_log::status(log, nth_oldest, quota, now)
    };
    let Ok(decision) = decision;
    if record && decision.allowed() {
        let at = now.as_unix_nanos();
        let cost = attempt.cost.get();
        match entry.events.back_mut() {
            Some((last, n)) if *last == at => *n += cost,
            _ => entry.events.push_back((at, cost)),
        }
        entry.expires = at.saturating_add(quota.window_nanos());
    }
    decision
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::num::NonZeroU64;

    fn policy(algorithm: Algorithm, limit: u64, window: Duration) -> Policy {
        Policy {
            name: "t".into(),
            algorithm,
            quota: Quota::new(limit, window).unwrap(),
        }
    }

    fn at(ms: u64) -> Attempt {
        Attempt::one(Timestamp::from_unix_millis(ms))
    }

    #[test]
    fn short_keys_are_inline_and_long_keys_round_trip() {
        let short = CompactKey::new(b"client-123");
        assert!(matches!(short, CompactKey::Inline { .. }));
        assert_eq!(short.as_bytes(), b"client-123");
        let long = vec![7u8; 300];
        assert_eq!(CompactKey::new(&long).as_bytes(), &long[..]);
        assert_eq!(std::mem::size_of::<CompactKey>(), 16);
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
        let s = lock(&store.shards[0]);
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
