//! The memory store's bound: at most `max_keys` entries (keys with state,
//! per policy and algorithm), counted across every shard.
//!
//! Why a count of entries, and one for the whole store: an entry is 54 to
//! 200 bytes (docs/design/memory-store.md#memory-per-key), so a count bounds
//! memory within a small factor, is exact under any key distribution,
//! however small the bound (a bound per shard would refuse keys while
//! other shards have room), and costs one compare-and-swap per new key;
//! updating a key that has state touches nothing here.
//!
//! At the bound a new key is a store failure ([`StoreFull`]), which each
//! policy's failure mode turns into an answer (fail open: allowed without
//! being counted; fail closed: refused); live state is never dropped to
//! make room, so a key that has state is decided exactly as before and a
//! flood of new keys cannot reset the counter of a key being limited (as
//! evicting the least recently used entry would, nginx's
//! `limit_req_zone`). Before refusing, the store drops its expired
//! entries: every shard whose earliest expiry has passed is swept, at
//! most once every [`SWEEP_GAP`] of the callers' clock, so that a flood
//! at the bound costs a sweep per gap, not one per request.

use std::num::NonZeroU64;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The default bound: 2,000,000 entries, about 200 to 400 MB of memory
/// (docs/stores.md#the-memory-stores-bound).
pub const DEFAULT_MAX_KEYS: NonZeroU64 = match NonZeroU64::new(2_000_000) {
    Some(n) => n,
    None => unreachable!(),
};

/// The shortest time, on the callers' clock, between two sweeps that a
/// full store runs to find room.
pub const SWEEP_GAP: Duration = Duration::from_millis(100);

/// The memory store holds its maximum of entries and none of them had
/// expired at its last sweep: a new key could not be stored, and nothing
/// was decided. A store failure: [`crate::StoreError::Unavailable`] through
/// the [`crate::Store`] trait, so that each policy's failure mode decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the memory store is full: it holds its maximum of {max_keys} keys and none has expired")]
pub struct StoreFull {
    /// The store's bound ([`crate::MemoryStore::max_keys`]).
    pub max_keys: u64,
}

impl From<StoreFull> for crate::StoreError {
    fn from(e: StoreFull) -> crate::StoreError {
        crate::StoreError::Unavailable(e.to_string())
    }
}

/// A new entry found no room (inside the store, before [`StoreFull`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct NoRoom;

/// The bound and how much of it is taken.
#[derive(Debug)]
pub(super) struct Room {
    max: u64,
    /// Entries held now, every shard together.
    held: AtomicU64,
    /// New keys refused at the bound since the store was made.
    refused: AtomicU64,
    /// The callers' clock (ns) from which the next sweep for room may run.
    next_sweep: AtomicU64,
}

impl Room {
    pub(super) fn new(max: u64) -> Room {
        Room {
            max,
            held: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            next_sweep: AtomicU64::new(0),
        }
    }

    /// This room with the bound `max`, its entries and refusals kept.
    pub(super) fn resized(&self, max: u64) -> Room {
        Room {
            max,
            held: AtomicU64::new(self.held()),
            refused: AtomicU64::new(self.refused()),
            next_sweep: AtomicU64::new(0),
        }
    }

    pub(super) fn max(&self) -> u64 {
        self.max
    }

    pub(super) fn held(&self) -> u64 {
        self.held.load(Ordering::Relaxed)
    }

    pub(super) fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    /// Takes room for `n` new entries, all or none.
    ///
    /// # Errors
    /// [`NoRoom`] when fewer than `n` are left; nothing is taken then.
    pub(super) fn take(&self, n: u64) -> Result<(), NoRoom> {
        self.held
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |held| {
                held.checked_add(n).filter(|&after| after <= self.max)
            })
            .map(drop)
            .map_err(|_| NoRoom)
    }

    /// `n` entries were dropped.
    pub(super) fn give_back(&self, n: u64) {
        if n > 0 {
            self.held.fetch_sub(n, Ordering::Relaxed);
        }
    }

    /// Counts a refused new key (or a refused batch that had new keys).
    pub(super) fn refuse(&self) -> StoreFull {
        self.refused.fetch_add(1, Ordering::Relaxed);
        StoreFull { max_keys: self.max }
    }

    /// Whether a sweep for room may run at `now_ns`, claiming it if so:
    /// at most one every [`SWEEP_GAP`].
    pub(super) fn claim_sweep(&self, now_ns: u64) -> bool {
        let gap = u64::try_from(SWEEP_GAP.as_nanos()).unwrap_or(u64::MAX);
        let next = self.next_sweep.load(Ordering::Relaxed);
        now_ns >= next
            && self
                .next_sweep
                .compare_exchange(
                    next,
                    now_ns.saturating_add(gap),
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                )
                .is_ok()
    }
}
