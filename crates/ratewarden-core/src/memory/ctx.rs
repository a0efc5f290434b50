//! What one operation needs to find its key's entry in a table, and the
//! operations on that entry under the shard's lock: a new entry takes its
//! room in the store's bound (`room.rs`) before it is stored, and lowers
//! the shard's earliest expiry.

use std::hash::BuildHasher;

use super::Hasher;
use super::compact_key::{CompactKey, Probe};
use super::log::{LogEntry, drop_dead, log_decide, record};
use super::room::{NoRoom, Room};
use super::shard::{Expiring, Table};
use crate::{Attempt, Decision, Quota};

/// What one operation needs to find its entry.
pub(super) struct Ctx<'a> {
    pub(super) hash: u64,
    pub(super) key: &'a [u8],
    /// `key`, ready to compare with stored keys.
    pub(super) probe: Probe<'a>,
    pub(super) hasher: &'a Hasher,
    pub(super) quota: &'a Quota,
    /// Where a new entry takes its room.
    pub(super) room: &'a Room,
}

impl Ctx<'_> {
    pub(super) fn get<'t, S>(&self, table: &'t Table<S>) -> Option<&'t S> {
        table
            .find(self.hash, |(k, _)| self.probe.matches(k))
            .map(|(_, s)| s)
    }

    /// Runs `decide` on the key's state (`None`: absent) and stores the
    /// state it returns (`None`: leave as is), with one table lookup; a
    /// new entry takes its room first, and without room nothing is
    /// stored. `soonest` is lowered to the stored state's expiry.
    pub(super) fn update<S: Copy + Expiring>(
        &self,
        table: &mut Table<S>,
        soonest: &mut u64,
        decide: impl FnOnce(Option<S>) -> (Decision, Option<S>),
    ) -> Result<Decision, NoRoom> {
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
                    *soonest = (*soonest).min(next.expires());
                    slot.get_mut().1 = next;
                }
                Ok(decision)
            }
            hashbrown::hash_table::Entry::Vacant(slot) => {
                let (decision, next) = decide(None);
                if let Some(next) = next {
                    self.room.take(1)?;
                    *soonest = (*soonest).min(next.expires());
                    slot.insert((CompactKey::new(self.key), next));
                }
                Ok(decision)
            }
        }
    }

    /// Stores `state` as the key's state; a new entry's room was taken
    /// before ([`Room::take`] for the whole batch).
    pub(super) fn set<S: Copy + Expiring>(
        &self,
        table: &mut Table<S>,
        soonest: &mut u64,
        state: S,
    ) {
        let hasher = self.hasher;
        *soonest = (*soonest).min(state.expires());
        let entry = table.entry(
            self.hash,
            |(k, _)| self.probe.matches(k),
            |(k, _)| hasher.hash_one(k.as_bytes()),
        );
        match entry {
            hashbrown::hash_table::Entry::Occupied(mut slot) => slot.get_mut().1 = state,
            hashbrown::hash_table::Entry::Vacant(slot) => {
                slot.insert((CompactKey::new(self.key), state));
            }
        }
    }

    /// The key's sliding-log entry, created empty when absent (its room
    /// taken before, as for [`Ctx::set`]).
    pub(super) fn log_entry<'t>(&self, table: &'t mut Table<LogEntry>) -> &'t mut LogEntry {
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

    /// Decides and records one sliding-log check: an entry left without
    /// events is dropped, a new one takes its room (without room nothing
    /// is recorded).
    pub(super) fn log_acquire(
        &self,
        table: &mut Table<LogEntry>,
        soonest: &mut u64,
        attempt: Attempt,
    ) -> Result<Decision, NoRoom> {
        let hasher = self.hasher;
        let entry = table.entry(
            self.hash,
            |(k, _)| self.probe.matches(k),
            |(k, _)| hasher.hash_one(k.as_bytes()),
        );
        match entry {
            hashbrown::hash_table::Entry::Occupied(mut slot) => {
                let log = &mut slot.get_mut().1;
                drop_dead(log, self.quota, attempt.now);
                let decision = log_decide(log, self.quota, attempt);
                if decision.allowed() {
                    record(log, self.quota, attempt);
                    *soonest = (*soonest).min(log.expires);
                }
                if log.events.is_empty() {
                    slot.remove();
                    self.room.give_back(1);
                }
                Ok(decision)
            }
            hashbrown::hash_table::Entry::Vacant(slot) => {
                let mut log = LogEntry::default();
                let decision = log_decide(&log, self.quota, attempt);
                if decision.allowed() {
                    self.room.take(1)?;
                    record(&mut log, self.quota, attempt);
                    *soonest = (*soonest).min(log.expires);
                    slot.insert((CompactKey::new(self.key), log));
                }
                Ok(decision)
            }
        }
    }
}
