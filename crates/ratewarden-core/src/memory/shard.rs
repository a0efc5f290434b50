//! One shard: a space per policy name, a table per algorithm, and the
//! operations on one key's entry under the shard's lock.

use std::hash::BuildHasher;
use std::time::Duration;

use hashbrown::HashTable;

use super::compact_key::{CompactKey, Probe};
use super::log::{LogEntry, drop_dead, log_decide, log_status, record};
use super::spaces::Spaces;
use super::{Hasher, SWEEP_EVERY};
use crate::algorithm::fixed_window::{self, FixedWindowState};
use crate::algorithm::gcra::{self, GcraState};
use crate::algorithm::sliding_log;
use crate::algorithm::sliding_window::{self, SlidingWindowState};
use crate::{Algorithm, Attempt, Decision, KeyMatch, Policy, Quota, Timestamp};

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

#[derive(Debug, Default)]
pub(super) struct Shard {
    /// By policy name.
    pub(super) spaces: Spaces,
    pub(super) ops: u32,
}

/// What one operation needs to find its entry.
pub(super) struct Ctx<'a> {
    pub(super) hash: u64,
    pub(super) key: &'a [u8],
    /// `key`, ready to compare with stored keys.
    pub(super) probe: Probe<'a>,
    pub(super) hasher: &'a Hasher,
    pub(super) quota: &'a Quota,
}

impl Ctx<'_> {
    fn get<'t, S>(&self, table: &'t Table<S>) -> Option<&'t S> {
        table
            .find(self.hash, |(k, _)| self.probe.matches(k))
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
            |(k, _)| self.probe.matches(k),
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
            |(k, _)| self.probe.matches(k),
            |(k, _)| hasher.hash_one(k.as_bytes()),
        );
        &mut entry
            .or_insert_with(|| (CompactKey::new(self.key), LogEntry::default()))
            .into_mut()
            .1
    }

    fn remove<S>(&self, table: &mut Table<S>) {
        if let Ok(entry) = table.find_entry(self.hash, |(k, _)| self.probe.matches(k)) {
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
pub(super) enum Next {
    Nothing,
    Fixed(FixedEntry),
    Sliding(SlidingEntry),
    Gcra(u64),
    /// Record the attempt's cost as events at its time.
    Record,
}

impl Shard {
    pub(super) fn len(&self) -> usize {
        self.spaces.iter().map(Space::len).sum()
    }

    /// Counts an operation; every [`SWEEP_EVERY`] operations drops the
    /// shard's expired entries.
    pub(super) fn tick(&mut self, now: Timestamp, hasher: &Hasher) {
        self.ops += 1;
        if self.ops >= SWEEP_EVERY {
            self.ops = 0;
            self.sweep(None, now, hasher);
        }
    }

    fn space(&self, policy: &Policy) -> Option<&Space> {
        self.spaces.get(&policy.name)
    }

    fn space_mut(&mut self, policy: &Policy) -> &mut Space {
        self.spaces.get_or_insert(&policy.name)
    }

    /// Decides and records one check, with one table lookup.
    pub(super) fn acquire(&mut self, policy: &Policy, ctx: &Ctx<'_>, attempt: Attempt) -> Decision {
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
    pub(super) fn decide(
        &self,
        policy: &Policy,
        ctx: &Ctx<'_>,
        attempt: Attempt,
    ) -> (Decision, Next) {
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
    pub(super) fn write(&mut self, policy: &Policy, ctx: &Ctx<'_>, attempt: Attempt, next: Next) {
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

    /// Deletes the selected keys of `policy`; returns how many held usage
    /// at `now`.
    pub(super) fn reset(&mut self, policy: &Policy, keys: KeyMatch<'_>, now: Timestamp) -> u64 {
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
        let Some(space) = self.spaces.get_mut(&policy.name) else {
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
            self.spaces.drop_empty();
        }
        live
    }

    /// Drops entries expired at `now` (of one algorithm, or of all), and
    /// the spaces left empty.
    pub(super) fn sweep(
        &mut self,
        algorithm: Option<Algorithm>,
        now: Timestamp,
        hasher: &Hasher,
    ) -> u64 {
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
        for space in self.spaces.iter_mut() {
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
        self.spaces.drop_empty();
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
