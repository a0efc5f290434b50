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
//! And by a count: the store holds at most [`MemoryStore::max_keys`]
//! entries ([`DEFAULT_MAX_KEYS`] unless [`MemoryStore::with_max_keys`]
//! says otherwise). At the bound a new key is a store failure
//! ([`StoreFull`]) after a sweep of what expired: keys that have state
//! are still decided exactly, and none is dropped to make room (`room.rs`
//! says why). Keys of up to 15 bytes are stored inline in the entry (16
//! bytes); longer ones take one more heap allocation.

mod compact_key;
mod ctx;
mod log;
mod room;
mod shard;
mod spaces;

use std::hash::BuildHasher;
use std::num::NonZeroU64;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;

use crate::{
    Acquire, Algorithm, Attempt, Batch, Decision, Key, KeyError, KeyMatch, Policy, Settlement,
    Store, StoreError, Timestamp,
};
use compact_key::Probe;
use ctx::Ctx;
pub use room::{DEFAULT_MAX_KEYS, SWEEP_GAP, StoreFull};
use room::{NoRoom, Room};
use shard::{Next, Presence, Shard};

/// A shard drops its expired entries after this many operations.
pub const SWEEP_EVERY: u32 = 4096;

/// The hasher of every table (random per store).
pub(crate) type Hasher = foldhash::fast::RandomState;

/// Why [`MemoryStore::acquire_single_now`] decided nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MemoryError {
    /// The key is longer than [`Key::MAX_BYTES`].
    #[error(transparent)]
    Key(#[from] KeyError),
    /// The store is full ([`StoreFull`]).
    #[error(transparent)]
    Full(#[from] StoreFull),
}

/// The in-memory store. See the module docs for its guarantees.
#[derive(Debug)]
pub struct MemoryStore {
    shards: Box<[Mutex<Shard>]>,
    hasher: Hasher,
    room: Room,
}

impl Default for MemoryStore {
    fn default() -> MemoryStore {
        MemoryStore::new()
    }
}

impl MemoryStore {
    /// A store with 64 shards and room for [`DEFAULT_MAX_KEYS`] keys.
    pub fn new() -> MemoryStore {
        MemoryStore::with_shards(64)
    }

    /// A store with `shards` shards (rounded up to a power of two, at
    /// least 1) and room for [`DEFAULT_MAX_KEYS`] keys.
    pub fn with_shards(shards: usize) -> MemoryStore {
        let n = shards.max(1).next_power_of_two();
        MemoryStore {
            shards: (0..n).map(|_| Mutex::new(Shard::default())).collect(),
            hasher: Hasher::default(),
            room: Room::new(DEFAULT_MAX_KEYS.get()),
        }
    }

    /// This store with room for at most `max_keys` entries (keys with
    /// state, counted per policy and algorithm, as [`MemoryStore::len`]).
    /// An entry takes 54 to 200 bytes and a sliding log 16 more per
    /// instant it holds events of (docs/design/memory-store.md#memory-per-key).
    ///
    /// At the bound, a check that would store a new key is a store
    /// failure, [`StoreFull`] ([`StoreError::Unavailable`] through
    /// [`Store`]), once the expired entries are swept (at most every
    /// [`SWEEP_GAP`] of the callers' clock): each policy's failure mode
    /// then decides (the limiter's fail open lets it through uncounted,
    /// fail closed refuses it). Keys that have state are decided exactly
    /// as ever; nothing is evicted to make room, so the bound never lets
    /// a key that is being limited start over. `NonZeroU64::MAX` is no
    /// bound at all (`ratewarden replay`).
    ///
    /// ```
    /// use std::num::NonZeroU64;
    /// use ratewarden_core::MemoryStore;
    ///
    /// let store = MemoryStore::new().with_max_keys(NonZeroU64::new(100_000).unwrap());
    /// assert_eq!(store.max_keys(), 100_000);
    /// ```
    pub fn with_max_keys(mut self, max_keys: NonZeroU64) -> MemoryStore {
        // Entries made before are kept and counted, past the bound too.
        self.room = self.room.resized(max_keys.get());
        self
    }

    /// The most entries this store holds ([`MemoryStore::with_max_keys`]).
    pub fn max_keys(&self) -> u64 {
        self.room.max()
    }

    /// How many checks found the store full ([`StoreFull`]) since it was
    /// made: each a new key refused (a batch counts once).
    pub fn keys_refused(&self) -> u64 {
        self.room.refused()
    }

    /// The number of keys with state, over every policy and algorithm
    /// (expired ones not yet swept included). Reads one counter.
    pub fn len(&self) -> usize {
        usize::try_from(self.room.held()).unwrap_or(usize::MAX)
    }

    /// Whether no key has state.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// One check without the async wrapper (a batch of one): the memory
    /// store never waits.
    ///
    /// # Errors
    /// [`StoreFull`] when the key has no state, the check would store
    /// some and the store is at its bound; nothing was decided then.
    pub fn acquire_now(
        &self,
        policy: &Policy,
        key: &Key,
        attempt: Attempt,
    ) -> Result<Decision, StoreFull> {
        self.acquire_ctx(policy, &self.ctx(policy, key), attempt)
    }

    /// [`MemoryStore::acquire_now`] for the one-part key [`Key::single`]`(part)`,
    /// without building the [`Key`]: a short key's encoding is made on the
    /// stack, so a caller deciding many requests (`ratewarden replay`)
    /// allocates nothing per request.
    ///
    /// # Errors
    /// [`MemoryError::Key`], as [`Key::single`], when `part` is longer
    /// than [`Key::MAX_BYTES`]; [`MemoryError::Full`] as
    /// [`MemoryStore::acquire_now`]. Nothing is decided then.
    pub fn acquire_single_now(
        &self,
        policy: &Policy,
        part: &[u8],
        attempt: Attempt,
    ) -> Result<Decision, MemoryError> {
        with_single_encoded(part, |encoded| {
            self.acquire_ctx(policy, &self.ctx_encoded(policy, encoded), attempt)
        })?
        .map_err(MemoryError::Full)
    }

    /// [`MemoryStore::acquire_single_now`] for a caller that has the store
    /// to itself (`&mut`, so no other thread can touch it): the same
    /// decision on the same state, without taking the shard's lock, two
    /// atomic instructions that are about a fifth of a decision's time
    /// (docs/design/memory-store.md#the-shards-lock). `ratewarden
    /// replay`'s deciding thread uses it.
    ///
    /// # Errors
    /// As [`MemoryStore::acquire_single_now`].
    pub fn acquire_single_mut(
        &mut self,
        policy: &Policy,
        part: &[u8],
        attempt: Attempt,
    ) -> Result<Decision, MemoryError> {
        with_single_encoded(part, |encoded| {
            self.acquire_encoded_mut(policy, encoded, attempt)
        })?
        .map_err(MemoryError::Full)
    }

    fn acquire_encoded_mut(
        &mut self,
        policy: &Policy,
        encoded: &[u8],
        attempt: Attempt,
    ) -> Result<Decision, StoreFull> {
        let MemoryStore {
            shards,
            hasher,
            room,
        } = self;
        let ctx = ctx_of(hasher, room, policy, encoded);
        let index = shard_of(ctx.hash, shards.len());
        let decided = decide_alone(owned(&mut shards[index]), hasher, policy, &ctx, attempt);
        if decided.is_ok() || !room.claim_sweep(attempt.now.as_unix_nanos()) {
            return decided.map_err(|NoRoom| room.refuse());
        }
        let freed: u64 = shards
            .iter_mut()
            .map(|shard| owned(shard).sweep(None, attempt.now, hasher, room))
            .sum();
        if freed > 0
            && let Ok(decision) =
                decide_alone(owned(&mut shards[index]), hasher, policy, &ctx, attempt)
        {
            return Ok(decision);
        }
        Err(room.refuse())
    }

    fn acquire_ctx(
        &self,
        policy: &Policy,
        ctx: &Ctx<'_>,
        attempt: Attempt,
    ) -> Result<Decision, StoreFull> {
        let decide = || {
            let mut shard = self.lock_shard(ctx.hash);
            decide_alone(&mut shard, &self.hasher, policy, ctx, attempt)
        };
        if let Ok(decision) = decide() {
            return Ok(decision);
        }
        if self.make_room(attempt.now)
            && let Ok(decision) = decide()
        {
            return Ok(decision);
        }
        Err(self.room.refuse())
    }

    /// The store is full: sweeps every shard with an expired entry, unless
    /// a sweep for room ran less than [`SWEEP_GAP`] ago (the shards hold
    /// no lock of the caller). True when it freed room.
    fn make_room(&self, now: Timestamp) -> bool {
        if !self.room.claim_sweep(now.as_unix_nanos()) {
            return false;
        }
        let freed: u64 = self
            .shards
            .iter()
            .map(|shard| lock(shard).sweep(None, now, &self.hasher, &self.room))
            .sum();
        freed > 0
    }

    /// [`Store::acquire`] without the async wrapper: decides every item of
    /// `batch` all or nothing, under the locks of all their shards.
    ///
    /// # Errors
    /// [`StoreFull`] when the batch would store a new key and the store
    /// is at its bound; nothing was decided then (all or nothing).
    pub fn acquire_batch_now(&self, batch: &Batch<'_>) -> Result<Vec<Decision>, StoreFull> {
        let now = batch.now();
        if let [item] = batch.items() {
            return Ok(vec![self.acquire_now(
                item.policy,
                item.key,
                attempt(item, now),
            )?]);
        }
        if let Ok(decisions) = self.try_batch(batch) {
            return Ok(decisions);
        }
        if self.make_room(now)
            && let Ok(decisions) = self.try_batch(batch)
        {
            return Ok(decisions);
        }
        Err(self.room.refuse())
    }

    /// One try of [`MemoryStore::acquire_batch_now`]: the room of every
    /// new key the batch stores is taken at once, before anything is
    /// written, so a batch is stored whole or not at all.
    fn try_batch(&self, batch: &Batch<'_>) -> Result<Vec<Decision>, NoRoom> {
        let now = batch.now();
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
        let own: Vec<(Decision, Next, Presence)> = batch
            .items()
            .iter()
            .zip(&ctxs)
            .map(|(item, ctx)| {
                let at = find(ctx.hash, &guards);
                guards[at].1.decide(item.policy, ctx, attempt(item, now))
            })
            .collect();
        let settlement = Settlement::of(batch.items(), own.iter().map(|(d, _, _)| d));
        let new_keys = batch
            .items()
            .iter()
            .zip(&own)
            .filter(|(item, (_, next, presence))| {
                settlement.charges(item)
                    && !matches!(next, Next::Nothing)
                    && *presence == Presence::New
            })
            .count();
        self.room.take(new_keys as u64)?;
        let mut decisions = Vec::with_capacity(own.len());
        for ((item, ctx), (decision, next, _)) in batch.items().iter().zip(&ctxs).zip(own) {
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
            shard.tick(now, &self.hasher, &self.room);
        }
        Ok(decisions)
    }

    /// [`Store::status`] without the async wrapper.
    pub fn status_now(&self, policy: &Policy, key: &Key, now: Timestamp) -> Decision {
        let ctx = self.ctx(policy, key);
        self.lock_shard(ctx.hash).status(policy, &ctx, now)
    }

    /// [`Store::reset`] without the async wrapper.
    pub fn reset_now(&self, policy: &Policy, keys: KeyMatch<'_>, now: Timestamp) -> u64 {
        let reset = |shard: &Mutex<Shard>| lock(shard).reset(policy, keys, now, &self.room);
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
        ctx_of(&self.hasher, &self.room, policy, encoded)
    }

    fn shard_index(&self, hash: u64) -> usize {
        shard_of(hash, self.shards.len())
    }

    fn lock_shard(&self, hash: u64) -> MutexGuard<'_, Shard> {
        lock(&self.shards[self.shard_index(hash)])
    }

    /// The entries of every table, counted one by one (tests: the count
    /// [`MemoryStore::len`] keeps must equal it).
    #[cfg(test)]
    fn counted(&self) -> usize {
        self.shards.iter().map(|s| lock(s).len()).sum()
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
fn ctx_of<'a>(
    hasher: &'a Hasher,
    room: &'a Room,
    policy: &'a Policy,
    encoded: &'a [u8],
) -> Ctx<'a> {
    Ctx {
        hash: hasher.hash_one(encoded),
        key: encoded,
        probe: Probe::new(encoded),
        hasher,
        quota: &policy.quota,
        room,
    }
}

/// One check alone in its batch, on its key's shard.
fn decide_alone(
    shard: &mut Shard,
    hasher: &Hasher,
    policy: &Policy,
    ctx: &Ctx<'_>,
    attempt: Attempt,
) -> Result<Decision, NoRoom> {
    shard.tick(attempt.now, hasher, ctx.room);
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

/// A shard of a store the caller owns (no lock taken; poisoned as [`lock`]).
fn owned(shard: &mut Mutex<Shard>) -> &mut Shard {
    shard
        .get_mut()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[async_trait]
impl Store for MemoryStore {
    fn kind(&self) -> &'static str {
        "memory"
    }

    async fn entries(&self) -> Option<u64> {
        Some(self.room.held())
    }

    fn max_entries(&self) -> Option<u64> {
        Some(self.room.max())
    }

    fn entries_refused(&self) -> Option<u64> {
        Some(self.room.refused())
    }

    async fn acquire(&self, batch: &Batch<'_>) -> Result<Vec<Decision>, StoreError> {
        Ok(self.acquire_batch_now(batch)?)
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
            .map(|s| lock(s).sweep(Some(algorithm), now, &self.hasher, &self.room))
            .sum())
    }

    fn keeps_audit_log(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod room_tests;
#[cfg(test)]
mod tests;
