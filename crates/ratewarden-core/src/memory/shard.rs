//! One shard: a space per policy name, a table per algorithm, and the
//! operations on one key's entry under the shard's lock.

use std::hash::BuildHasher;

use hashbrown::HashTable;

use super::compact_key::CompactKey;
use super::ctx::Ctx;
use super::log::{LogEntry, drop_dead, log_decide, log_status, record};
use super::room::{NoRoom, Room};
use super::spaces::Spaces;
use super::{Hasher, SWEEP_EVERY};
use crate::algorithm::fixed_window::{self, FixedWindowState};
use crate::algorithm::gcra::{self, GcraState};
use crate::algorithm::sliding_log;
use crate::algorithm::sliding_window::{self, SlidingWindowState};
use crate::{Algorithm, Attempt, Decision, KeyMatch, Policy, Timestamp};

/// One algorithm's table: entries of (key, state), where each state knows
/// its expiry.
pub(super) type Table<S> = HashTable<(CompactKey, S)>;

pub(super) trait Expiring {
    /// The instant (ns) from which this state is the same as no state.
    fn expires(&self) -> u64;
}

/// Fixed window: the state and its expiry, the window end `(k + 1)·W`
/// (saturating; the index is kept as such because the end cannot be
/// turned back into it once it saturates).
#[derive(Debug, Clone, Copy)]
pub(super) struct FixedEntry {
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
pub(super) struct SlidingEntry {
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

/// One policy name's state in one shard: a table per algorithm.
#[derive(Debug, Default)]
pub(super) struct Space {
    pub(super) fixed: Table<FixedEntry>,
    pub(super) sliding: Table<SlidingEntry>,
    pub(super) gcra: Table<u64>,
    pub(super) log: Table<LogEntry>,
}

impl Space {
    pub(super) fn len(&self) -> usize {
        self.fixed.len() + self.sliding.len() + self.gcra.len() + self.log.len()
    }
}

#[derive(Debug)]
pub(super) struct Shard {
    /// By policy name.
    pub(super) spaces: Spaces,
    pub(super) ops: u32,
    /// No entry expires before this instant (ns): the earliest expiry of
    /// the entries the last sweep kept, lowered by every write since. A
    /// sweep before it would find nothing to drop.
    pub(super) soonest: u64,
}

impl Default for Shard {
    fn default() -> Shard {
        Shard {
            spaces: Spaces::default(),
            ops: 0,
            soonest: u64::MAX,
        }
    }
}

/// Whether a batch item's entry exists: a new one needs room.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Presence {
    Held,
    New,
}

impl Presence {
    fn of<T>(state: Option<T>) -> Presence {
        if state.is_some() {
            Presence::Held
        } else {
            Presence::New
        }
    }
}

/// What a batch item writes once the batch is settled.
#[derive(Debug, Clone, Copy)]
pub(super) enum Next {
    Nothing,
    Fixed(FixedEntry),
    Sliding(SlidingEntry),
    Gcra(u64),
    /// Record the attempt's cost as events at its time.
    Record,
}

impl Shard {
    /// The entries of every table, counted (tests).
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.spaces.iter().map(Space::len).sum()
    }

    /// Counts an operation; every [`SWEEP_EVERY`] operations drops the
    /// shard's expired entries.
    pub(super) fn tick(&mut self, now: Timestamp, hasher: &Hasher, room: &Room) {
        self.ops += 1;
        if self.ops >= SWEEP_EVERY {
            self.ops = 0;
            self.sweep(None, now, hasher, room);
        }
    }

    fn space(&self, policy: &Policy) -> Option<&Space> {
        self.spaces.get(&policy.name)
    }

    /// Decides and records one check, with one table lookup.
    ///
    /// # Errors
    /// [`NoRoom`] when the key has no entry, the check would create one
    /// and the store is at its bound; nothing changed then.
    pub(super) fn acquire(
        &mut self,
        policy: &Policy,
        ctx: &Ctx<'_>,
        attempt: Attempt,
    ) -> Result<Decision, NoRoom> {
        let w = ctx.quota.window_nanos();
        let Shard {
            spaces, soonest, ..
        } = self;
        let space = spaces.get_or_insert(&policy.name);
        match policy.algorithm {
            Algorithm::FixedWindow => ctx.update(&mut space.fixed, soonest, |state| {
                let (d, next) = fixed_window::decide(state.map(|e| e.state), ctx.quota, attempt);
                (d, next.map(|s| fixed_entry(s, w)))
            }),
            Algorithm::SlidingWindow => ctx.update(&mut space.sliding, soonest, |state| {
                let (d, next) = sliding_window::decide(state.map(|e| e.state), ctx.quota, attempt);
                (d, next.map(|s| sliding_entry(s, w)))
            }),
            Algorithm::Gcra => ctx.update(&mut space.gcra, soonest, |state| {
                let (d, next) =
                    gcra::decide(state.map(|tat| GcraState { tat }), ctx.quota, attempt);
                (d, next.map(|s| s.tat))
            }),
            Algorithm::SlidingLog => ctx.log_acquire(&mut space.log, soonest, attempt),
        }
    }

    /// A batch item's own decision, what it would write and whether its
    /// entry exists; changes nothing.
    pub(super) fn decide(
        &self,
        policy: &Policy,
        ctx: &Ctx<'_>,
        attempt: Attempt,
    ) -> (Decision, Next, Presence) {
        let w = ctx.quota.window_nanos();
        let space = self.space(policy);
        match policy.algorithm {
            Algorithm::FixedWindow => {
                let state = space.and_then(|s| ctx.get(&s.fixed)).map(|e| e.state);
                let (d, next) = fixed_window::decide(state, ctx.quota, attempt);
                (
                    d,
                    next.map_or(Next::Nothing, |s| Next::Fixed(fixed_entry(s, w))),
                    Presence::of(state),
                )
            }
            Algorithm::SlidingWindow => {
                let state = space.and_then(|s| ctx.get(&s.sliding)).map(|e| e.state);
                let (d, next) = sliding_window::decide(state, ctx.quota, attempt);
                (
                    d,
                    next.map_or(Next::Nothing, |s| Next::Sliding(sliding_entry(s, w))),
                    Presence::of(state),
                )
            }
            Algorithm::Gcra => {
                let state = space
                    .and_then(|s| ctx.get(&s.gcra))
                    .map(|&tat| GcraState { tat });
                let (d, next) = gcra::decide(state, ctx.quota, attempt);
                (
                    d,
                    next.map_or(Next::Nothing, |s| Next::Gcra(s.tat)),
                    Presence::of(state),
                )
            }
            Algorithm::SlidingLog => {
                let held = space.and_then(|s| ctx.get(&s.log));
                let empty = LogEntry::default();
                let d = log_decide(held.unwrap_or(&empty), ctx.quota, attempt);
                let next = if d.allowed() {
                    Next::Record
                } else {
                    Next::Nothing
                };
                (d, next, Presence::of(held))
            }
        }
    }

    /// Writes what [`Shard::decide`] returned (a new entry's room taken
    /// before).
    pub(super) fn write(&mut self, policy: &Policy, ctx: &Ctx<'_>, attempt: Attempt, next: Next) {
        if matches!(next, Next::Nothing) {
            return;
        }
        let Shard {
            spaces, soonest, ..
        } = self;
        let space = spaces.get_or_insert(&policy.name);
        match next {
            Next::Nothing => {}
            Next::Fixed(e) => ctx.set(&mut space.fixed, soonest, e),
            Next::Sliding(e) => ctx.set(&mut space.sliding, soonest, e),
            Next::Gcra(tat) => ctx.set(&mut space.gcra, soonest, tat),
            Next::Record => {
                let entry = ctx.log_entry(&mut space.log);
                drop_dead(entry, ctx.quota, attempt.now);
                record(entry, ctx.quota, attempt);
                *soonest = (*soonest).min(entry.expires);
            }
        }
    }

    pub(super) fn status(&self, policy: &Policy, ctx: &Ctx<'_>, now: Timestamp) -> Decision {
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

    /// Deletes the selected keys of `policy` (giving their room back);
    /// returns how many held usage at `now`.
    pub(super) fn reset(
        &mut self,
        policy: &Policy,
        keys: KeyMatch<'_>,
        now: Timestamp,
        room: &Room,
    ) -> u64 {
        /// Drops the selected entries: (how many, how many were in use).
        fn drop_selected<S>(
            table: &mut Table<S>,
            keys: KeyMatch<'_>,
            in_use: impl Fn(&S) -> bool,
        ) -> (u64, u64) {
            let selected = |k: &CompactKey| match keys {
                KeyMatch::Exactly(key) => k.as_bytes() == key.encoded(),
                KeyMatch::StartingWith(prefix) => k.as_bytes().starts_with(prefix.encoded()),
            };
            let (mut dropped, mut live) = (0, 0);
            table.retain(|(k, s)| {
                let drop = selected(k);
                dropped += u64::from(drop);
                live += u64::from(drop && in_use(s));
                !drop
            });
            (dropped, live)
        }
        let Some(space) = self.spaces.get_mut(&policy.name) else {
            return 0;
        };
        let quota = &policy.quota;
        let (dropped, live) = match policy.algorithm {
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
        room.give_back(dropped);
        if space.len() == 0 {
            self.spaces.drop_empty();
        }
        live
    }

    /// Drops entries expired at `now` (of one algorithm, or of all), and
    /// the spaces left empty, giving their room back; returns how many.
    /// Nothing to do before [`Shard::soonest`].
    pub(super) fn sweep(
        &mut self,
        algorithm: Option<Algorithm>,
        now: Timestamp,
        hasher: &Hasher,
        room: &Room,
    ) -> u64 {
        /// Drops `table`'s expired entries (how many), lowering `soonest`
        /// to the earliest expiry of those kept.
        fn expire_table<S: Expiring>(
            table: &mut Table<S>,
            now: u64,
            soonest: &mut u64,
            hasher: &Hasher,
        ) -> u64 {
            let before = table.len();
            table.retain(|(_, s)| {
                let keep = s.expires() > now;
                if keep {
                    *soonest = (*soonest).min(s.expires());
                }
                keep
            });
            // Give memory back after a burst of keys; entries are rehashed
            // with the same hasher that placed them.
            if table.capacity() > 64 && table.len() < table.capacity() / 4 {
                table.shrink_to_fit(|(k, _)| hasher.hash_one(k.as_bytes()));
            }
            (before - table.len()) as u64
        }
        let now = now.as_unix_nanos();
        if now < self.soonest {
            return 0;
        }
        let wanted = |a: Algorithm| algorithm.is_none_or(|x| x == a);
        // The earliest expiry of the entries kept.
        let mut soonest = u64::MAX;
        let mut dropped = 0;
        for space in self.spaces.iter_mut() {
            if wanted(Algorithm::FixedWindow) {
                dropped += expire_table(&mut space.fixed, now, &mut soonest, hasher);
            }
            if wanted(Algorithm::SlidingWindow) {
                dropped += expire_table(&mut space.sliding, now, &mut soonest, hasher);
            }
            if wanted(Algorithm::Gcra) {
                dropped += expire_table(&mut space.gcra, now, &mut soonest, hasher);
            }
            if wanted(Algorithm::SlidingLog) {
                dropped += expire_table(&mut space.log, now, &mut soonest, hasher);
            }
        }
        // A sweep of every table knows the earliest expiry exactly; one of
        // a single algorithm leaves the others' expiries unknown, so the
        // bound stays where it was (still a lower bound: nothing kept
        // expires before it).
        if algorithm.is_none() {
            self.soonest = soonest;
        }
        self.spaces.drop_empty();
        room.give_back(dropped);
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
