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
//! sliding log: the newest event + W), and a shard drops its expired
//! entries every [`SWEEP_EVERY`] operations, besides [`Store::prune`].
//! Keys of up to 22 bytes are stored inline in the entry.

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
        let hash = self.hasher.hash_one(key.encoded());
        let mut shard = self.shard(hash);
        shard.ops += 1;
        if shard.ops >= SWEEP_EVERY {
            shard.ops = 0;
            shard.sweep(None, attempt.now);
        }
        let ctx = Ctx {
            hash,
            key: key.encoded(),
            hasher: &self.hasher,
            quota: &policy.quota,
        };
        shard.acquire(policy.algorithm, &ctx, attempt)
    }

    /// [`Store::status`] without the async wrapper.
    pub fn status_now(&self, policy: &Policy, key: &Key, now: Timestamp) -> Decision {
        let hash = self.hasher.hash_one(key.encoded());
        let shard = self.shard(hash);
        let ctx = Ctx {
            hash,
            key: key.encoded(),
            hasher: &self.hasher,
            quota: &policy.quota,
        };
        shard.status(policy.algorithm, &ctx, now)
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
            .map(|s| lock(s).sweep(Some(algorithm), now))
            .sum())
    }

    fn keeps_audit_log(&self) -> bool {
        false
    }
}

/// A key's encoding, inline when it fits in 22 bytes.
#[derive(Debug, Clone)]
enum CompactKey {
    Inline { len: u8, bytes: [u8; 22] },
    Heap(Box<[u8]>),
}

impl CompactKey {
    fn new(key: &[u8]) -> CompactKey {
        if key.len() <= 22 {
            let mut bytes = [0u8; 22];
            bytes[..key.len()].copy_from_slice(key);
            CompactKey::Inline {
                len: key.len() as u8,
                bytes,
            }
        } else {
            CompactKey::Heap(key.into())
        }
    }

    fn as_bytes(&self) -> &[u8] {
        match self {
            CompactKey::Inline { len, bytes } => &bytes[..usize::from(*len)],
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

/// Fixed window: the window end instead of its index, so expiry needs no
/// quota. `k = end / W − 1`.
#[derive(Debug, Clone, Copy)]
struct FixedEntry {
    end: u64,
    count: u64,
}

impl Expiring for FixedEntry {
    fn expires(&self) -> u64 {
        self.end
    }
}

/// Sliding window: `expires = (k + 2)·W`, when `curr` stops weighing.
#[derive(Debug, Clone, Copy)]
struct SlidingEntry {
    expires: u64,
    curr: u64,
    prev: u64,
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

    /// Writes `state` (`Some`) or leaves the entry as it is (`None`).
    fn put<S>(&self, table: &mut Table<S>, state: Option<S>) {
        let Some(state) = state else { return };
        let hasher = self.hasher;
        match table.find_mut(self.hash, |(k, _)| k.as_bytes() == self.key) {
            Some((_, s)) => *s = state,
            None => {
                table.insert_unique(self.hash, (CompactKey::new(self.key), state), |(k, _)| {
                    hasher.hash_one(k.as_bytes())
                });
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
            Algorithm::FixedWindow => {
                let state = ctx.get(&self.fixed).map(|e| fixed_state(e, w));
                let (d, next) = fixed_window::decide(state, ctx.quota, attempt);
                ctx.put(&mut self.fixed, next.map(|s| fixed_entry(s, w)));
                d
            }
            Algorithm::SlidingWindow => {
                let state = ctx.get(&self.sliding).map(|e| sliding_state(e, w));
                let (d, next) = sliding_window::decide(state, ctx.quota, attempt);
                ctx.put(&mut self.sliding, next.map(|s| sliding_entry(s, w)));
                d
            }
            Algorithm::Gcra => {
                let state = ctx.get(&self.gcra).map(|&tat| GcraState { tat });
                let (d, next) = gcra::decide(state, ctx.quota, attempt);
                ctx.put(&mut self.gcra, next.map(|s| s.tat));
                d
            }
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
        let w = ctx.quota.window_nanos();
        match algorithm {
            Algorithm::FixedWindow => fixed_window::status(
                ctx.get(&self.fixed).map(|e| fixed_state(e, w)),
                ctx.quota,
                now,
            ),
            Algorithm::SlidingWindow => sliding_window::status(
                ctx.get(&self.sliding).map(|e| sliding_state(e, w)),
                ctx.quota,
                now,
            ),
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
    fn sweep(&mut self, algorithm: Option<Algorithm>, now: Timestamp) -> u64 {
        fn expire<S: Expiring>(table: &mut Table<S>, now: u64) -> u64 {
            let before = table.len();
            table.retain(|(_, s)| s.expires() > now);
            if table.capacity() > 64 && table.len() < table.capacity() / 4 {
                table.shrink_to_fit(|_| 0);
            }
            (before - table.len()) as u64
        }
        let now = now.as_unix_nanos();
        let wanted = |a: Algorithm| algorithm.is_none_or(|x| x == a);
        let mut dropped = 0;
        if wanted(Algorithm::FixedWindow) {
            dropped += expire(&mut self.fixed, now);
        }
        if wanted(Algorithm::SlidingWindow) {
            dropped += expire(&mut self.sliding, now);
        }
        if wanted(Algorithm::Gcra) {
            dropped += expire(&mut self.gcra, now);
        }
        if wanted(Algorithm::SlidingLog) {
            dropped += expire(&mut self.log, now);
        }
        dropped
    }
}

fn fixed_state(e: &FixedEntry, w: u64) -> FixedWindowState {
    FixedWindowState {
        window: (e.end / w).saturating_sub(1),
        count: e.count,
    }
}

fn fixed_entry(s: FixedWindowState, w: u64) -> FixedEntry {
    FixedEntry {
        end: s.window.saturating_add(1).saturating_mul(w),
        count: s.count,
    }
}

fn sliding_state(e: &SlidingEntry, w: u64) -> SlidingWindowState {
    SlidingWindowState {
        window: (e.expires / w).saturating_sub(2),
        curr: e.curr,
        prev: e.prev,
    }
}

fn sliding_entry(s: SlidingWindowState, w: u64) -> SlidingEntry {
    SlidingEntry {
        expires: s.window.saturating_add(2).saturating_mul(w),
        curr: s.curr,
        prev: s.prev,
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
