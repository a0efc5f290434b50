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

use std::collections::VecDeque;
use std::hash::BuildHasher;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use hashbrown::HashTable;

use crate::algorithm::fixed_window::{self, FixedWindowState};
use crate::algorithm::gcra::{self, GcraState};
use crate::algorithm::sliding_log::{self, LiveLog};
use crate::algorithm::sliding_window::{self, SlidingWindowState};
use crate::{
    Acquire, Algorithm, Attempt, Batch, Decision, Key, KeyMatch, Policy, Quota, Settlement, Store,
    StoreError, Timestamp,
};

/// A shard drops its expired entries after this many operations.
pub const SWEEP_EVERY: u32 = 4096;

type Hasher = foldhash::fast::RandomState;

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
        let ctx = self.ctx(policy, key);
        let mut shard = self.lock_shard(ctx.hash);
        shard.tick(attempt.now, &self.hasher);
        // Alone in its batch, an item is charged exactly when its algorithm
        // returns a next state: an allowed batch writes it, and a denied
        // one-item batch has a next state only for a fixed window that
        // counts denied attempts, which is charged anyway.
        shard.acquire(policy, &ctx, attempt)
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
        Ctx {
            hash: self.hasher.hash_one(key.encoded()),
            key: key.encoded(),
            hasher: &self.hasher,
            quota: &policy.quota,
        }
    }

    fn shard_index(&self, hash: u64) -> usize {
        // The top bits pick the shard; the tables use the low bits.
        (hash >> 48) as usize & (self.shards.len() - 1)
    }

    fn lock_shard(&self, hash: u64) -> MutexGuard<'_, Shard> {
        lock(&self.shards[self.shard_index(hash)])
    }
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

/// One policy name's state in one shard: a table per algorithm.
#[derive(Debug, Default)]
struct Space {
    fixed: Table<FixedEntry>,
    sliding: Table<SlidingEntry>,
    gcra: Table<u64>,
    log: Table<LogEntry>,
}

impl Space {
    fn len(&self) -> usize {
        self.fixed.len() + self.sliding.len() + self.gcra.len() + self.log.len()
    }
}

#[derive(Debug, Default)]
struct Shard {
    /// By policy name.
    spaces: hashbrown::HashMap<Arc<str>, Space, Hasher>,
    ops: u32,
}

/// What one operation needs to find its entry.
struct Ctx<'a> {
    hash: u64,
    key: &'a [u8],
    hasher: &'a Hasher,
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

    /// Stores `state` as the key's state.
    fn set<S: Copy>(&self, table: &mut Table<S>, state: S) {
        self.update(table, |_| (NO_DECISION, Some(state)));
    }

    /// The key's sliding-log entry, created empty when absent.
    fn log_entry<'t>(&self, table: &'t mut Table<LogEntry>) -> &'t mut LogEntry {
        let hasher = self.hasher;
        let entry = table.entry(
            self.hash,
            |(k, _)| k.as_bytes() == self.key,
            |(k, _)| hasher.hash_one(k.as_bytes()),
        );
        &mut entry
            .or_insert_with(|| (CompactKey::new(self.key), LogEntry::default()))
            .into_mut()
            .1
    }

    fn remove<S>(&self, table: &mut Table<S>) {
        if let Ok(entry) = table.find_entry(self.hash, |(k, _)| k.as_bytes() == self.key) {
            entry.remove();
        }
    }
}

/// A placeholder for [`Ctx::set`], whose decision nobody reads.
const NO_DECISION: Decision = Decision {
    outcome: crate::Outcome::Never,
    limit: 0,
    remaining: 0,
    used: 0,
    reset_after: Duration::ZERO,
};

/// What a batch item writes once the batch is settled.
#[derive(Debug, Clone, Copy)]
enum Next {
    Nothing,
    Fixed(FixedEntry),
    Sliding(SlidingEntry),
    Gcra(u64),
    /// Record the attempt's cost as events at its time.
    Record,
}

impl Shard {
    fn len(&self) -> usize {
        self.spaces.values().map(Space::len).sum()
    }

    /// Counts an operation; every [`SWEEP_EVERY`] operations drops the
    /// shard's expired entries.
    fn tick(&mut self, now: Timestamp, hasher: &Hasher) {
        self.ops += 1;
        if self.ops >= SWEEP_EVERY {
            self.ops = 0;
            self.sweep(None, now, hasher);
        }
    }

    fn space(&self, policy: &Policy) -> Option<&Space> {
        self.spaces.get(&*policy.name)
    }

    fn space_mut(&mut self, policy: &Policy) -> &mut Space {
        self.spaces.entry_ref(&*policy.name).or_default()
    }

    /// Decides and records one check, with one table lookup.
    fn acquire(&mut self, policy: &Policy, ctx: &Ctx<'_>, attempt: Attempt) -> Decision {
        let w = ctx.quota.window_nanos();
        let space = self.space_mut(policy);
        match policy.algorithm {
            Algorithm::FixedWindow => ctx.update(&mut space.fixed, |state| {
                let (d, next) = fixed_window::decide(state.map(|e| e.state), ctx.quota, attempt);
                (d, next.map(|s| fixed_entry(s, w)))
            }),
            Algorithm::SlidingWindow => ctx.update(&mut space.sliding, |state| {
                let (d, next) = sliding_window::decide(state.map(|e| e.state), ctx.quota, attempt);
                (d, next.map(|s| sliding_entry(s, w)))
            }),
            Algorithm::Gcra => ctx.update(&mut space.gcra, |state| {
                let (d, next) =
                    gcra::decide(state.map(|tat| GcraState { tat }), ctx.quota, attempt);
                (d, next.map(|s| s.tat))
            }),
            Algorithm::SlidingLog => {
                let entry = ctx.log_entry(&mut space.log);
                drop_dead(entry, ctx.quota, attempt.now);
                let decision = log_decide(entry, ctx.quota, attempt);
                if decision.allowed() {
                    record(entry, ctx.quota, attempt);
                }
                if entry.events.is_empty() {
                    ctx.remove(&mut space.log);
                }
                decision
            }
        }
    }

    /// A batch item's own decision and what it would write; changes nothing.
    fn decide(&self, policy: &Policy, ctx: &Ctx<'_>, attempt: Attempt) -> (Decision, Next) {
        let w = ctx.quota.window_nanos();
        let space = self.space(policy);
        match policy.algorithm {
            Algorithm::FixedWindow => {
                let state = space.and_then(|s| ctx.get(&s.fixed)).map(|e| e.state);
                let (d, next) = fixed_window::decide(state, ctx.quota, attempt);
                (
                    d,
                    next.map_or(Next::Nothing, |s| Next::Fixed(fixed_entry(s, w))),
                )
            }
            Algorithm::SlidingWindow => {
                let state = space.and_then(|s| ctx.get(&s.sliding)).map(|e| e.state);
                let (d, next) = sliding_window::decide(state, ctx.quota, attempt);
                (
                    d,
                    next.map_or(Next::Nothing, |s| Next::Sliding(sliding_entry(s, w))),
                )
            }
            Algorithm::Gcra => {
                let state = space
                    .and_then(|s| ctx.get(&s.gcra))
                    .map(|&tat| GcraState { tat });
                let (d, next) = gcra::decide(state, ctx.quota, attempt);
                (d, next.map_or(Next::Nothing, |s| Next::Gcra(s.tat)))
            }
            Algorithm::SlidingLog => {
                let empty = LogEntry::default();
                let entry = space.and_then(|s| ctx.get(&s.log)).unwrap_or(&empty);
                let d = log_decide(entry, ctx.quota, attempt);
                (
                    d,
                    if d.allowed() {
                        Next::Record
                    } else {
                        Next::Nothing
                    },
                )
            }
        }
    }

    /// Writes what [`Shard::decide`] returned.
    fn write(&mut self, policy: &Policy, ctx: &Ctx<'_>, attempt: Attempt, next: Next) {
        if matches!(next, Next::Nothing) {
            return;
        }
        let space = self.space_mut(policy);
        match next {
            Next::Nothing => {}
            Next::Fixed(e) => ctx.set(&mut space.fixed, e),
            Next::Sliding(e) => ctx.set(&mut space.sliding, e),
            Next::Gcra(tat) => ctx.set(&mut space.gcra, tat),
            Next::Record => {
                let entry = ctx.log_entry(&mut space.log);
                drop_dead(entry, ctx.quota, attempt.now);
                record(entry, ctx.quota, attempt);
            }
        }
    }

    fn status(&self, policy: &Policy, ctx: &Ctx<'_>, now: Timestamp) -> Decision {
        let space = self.space(policy);
        match policy.algorithm {
            Algorithm::FixedWindow => fixed_window::status(
                space.and_then(|s| ctx.get(&s.fixed)).map(|e| e.state),
                ctx.quota,
                now,
            ),
            Algorithm::SlidingWindow => sliding_window::status(
                space.and_then(|s| ctx.get(&s.sliding)).map(|e| e.state),
                ctx.quota,
                now,
            ),
            Algorithm::Gcra => gcra::status(
                space
                    .and_then(|s| ctx.get(&s.gcra))
                    .map(|&tat| GcraState { tat }),
                ctx.quota,
                now,
            ),
            Algorithm::SlidingLog => {
                let empty = LogEntry::default();
                let entry = space.and_then(|s| ctx.get(&s.log)).unwrap_or(&empty);
                log_status(entry, ctx.quota, now)
            }
        }
    }

    /// Deletes the selected keys of `policy`; returns how many held usage
    /// at `now`.
    fn reset(&mut self, policy: &Policy, keys: KeyMatch<'_>, now: Timestamp) -> u64 {
        fn drop_selected<S>(
            table: &mut Table<S>,
            keys: KeyMatch<'_>,
            in_use: impl Fn(&S) -> bool,
        ) -> u64 {
            let selected = |k: &CompactKey| match keys {
                KeyMatch::Exactly(key) => k.as_bytes() == key.encoded(),
                KeyMatch::StartingWith(prefix) => k.as_bytes().starts_with(prefix.encoded()),
            };
            let mut live = 0;
            table.retain(|(k, s)| {
                let drop = selected(k);
                live += u64::from(drop && in_use(s));
                !drop
            });
            live
        }
        let Some(space) = self.spaces.get_mut(&*policy.name) else {
            return 0;
        };
        let quota = &policy.quota;
        let live = match policy.algorithm {
            Algorithm::FixedWindow => drop_selected(&mut space.fixed, keys, |e| {
                fixed_window::in_use(e.state, quota, now)
            }),
            Algorithm::SlidingWindow => drop_selected(&mut space.sliding, keys, |e| {
                sliding_window::in_use(e.state, quota, now)
            }),
            Algorithm::Gcra => drop_selected(&mut space.gcra, keys, |&tat| {
                gcra::in_use(GcraState { tat }, now)
            }),
            Algorithm::SlidingLog => drop_selected(&mut space.log, keys, |e| {
                e.events.back().is_some_and(|&(at, _)| {
                    sliding_log::is_live(quota, Timestamp::from_unix_nanos(at), now)
                })
            }),
        };
        if space.len() == 0 {
            self.spaces.remove(&*policy.name);
        }
        live
    }

    /// Drops entries expired at `now` (of one algorithm, or of all), and
    /// the spaces left empty.
    fn sweep(&mut self, algorithm: Option<Algorithm>, now: Timestamp, hasher: &Hasher) -> u64 {
        fn expire_table<S: Expiring>(table: &mut Table<S>, now: u64, hasher: &Hasher) -> u64 {
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
        for space in self.spaces.values_mut() {
            if wanted(Algorithm::FixedWindow) {
                dropped += expire_table(&mut space.fixed, now, hasher);
            }
            if wanted(Algorithm::SlidingWindow) {
                dropped += expire_table(&mut space.sliding, now, hasher);
            }
            if wanted(Algorithm::Gcra) {
                dropped += expire_table(&mut space.gcra, now, hasher);
            }
            if wanted(Algorithm::SlidingLog) {
                dropped += expire_table(&mut space.log, now, hasher);
            }
        }
        self.spaces.retain(|_, space| space.len() > 0);
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

/// Drops the events that have left the window at `now`, oldest first.
fn drop_dead(entry: &mut LogEntry, quota: &Quota, now: Timestamp) {
    while let Some(&(at, _)) = entry.events.front() {
        if sliding_log::is_live(quota, Timestamp::from_unix_nanos(at), now) {
            break;
        }
        entry.events.pop_front();
    }
}

/// Records `attempt.cost` events at `attempt.now` (run-length: one pair
/// per instant).
fn record(entry: &mut LogEntry, quota: &Quota, attempt: Attempt) {
    let at = attempt.now.as_unix_nanos();
    let cost = attempt.cost.get();
    match entry.events.back_mut() {
        Some((last, n)) if *last == at => *n += cost,
        _ => entry.events.push_back((at, cost)),
    }
    entry.expires = at.saturating_add(quota.window_nanos());
}

/// The live events at `now` (skipping dead ones that were not dropped
/// yet), oldest first.
fn live_events<'e>(
    entry: &'e LogEntry,
    quota: &'e Quota,
    now: Timestamp,
) -> impl Iterator<Item = (u64, u64)> + Clone + 'e {
    entry.events.iter().copied().skip_while(move |&(at, _)| {
        !sliding_log::is_live(quota, Timestamp::from_unix_nanos(at), now)
    })
}

/// The summary and the `j`-th oldest accessor of the live events.
fn log_view<'e>(
    entry: &'e LogEntry,
    quota: &'e Quota,
    now: Timestamp,
) -> (
    LiveLog,
    impl FnOnce(u64) -> Result<Timestamp, std::convert::Infallible> + 'e,
) {
    let live = live_events(entry, quota, now);
    let log = LiveLog {
        count: live.clone().map(|(_, n)| n).sum(),
        newest: live
            .clone()
            .last()
            .map(|(at, _)| Timestamp::from_unix_nanos(at)),
    };
    let nth_oldest = move |j: u64| {
        let mut seen = 0u64;
        for (at, n) in live {
            seen += n;
            if seen >= j {
                return Ok(Timestamp::from_unix_nanos(at));
            }
        }
        Ok(log.newest.unwrap_or(now))
    };
    (log, nth_oldest)
}

/// Sliding log: the decision for `attempt`; records nothing.
fn log_decide(entry: &LogEntry, quota: &Quota, attempt: Attempt) -> Decision {
    let (log, nth_oldest) = log_view(entry, quota, attempt.now);
    let Ok(decision) = sliding_log::decide(log, nth_oldest, quota, attempt);
    decision
}

/// Sliding log: the status at `now`.
fn log_status(entry: &LogEntry, quota: &Quota, now: Timestamp) -> Decision {
    let (log, nth_oldest) = log_view(entry, quota, now);
    let Ok(decision) = sliding_log::status(log, nth_oldest, quota, now);
    decision
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::num::NonZeroU64;

    fn policy(algorithm: Algorithm, limit: u64, window: Duration) -> Policy {
        Policy::new("t", algorithm, Quota::new(limit, window).unwrap())
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
        let shard = lock(&store.shards[0]);
        let s = &shard.spaces["t"];
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
        assert!(!lock(&store.shards[0]).spaces.contains_key("gone"));
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
