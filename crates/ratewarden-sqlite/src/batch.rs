//! A batch on SQLite: every item decided on the state as it stands, the
//! all-or-nothing rule of `ratewarden_core::batch`, then the writes, all
//! inside the worker's `BEGIN IMMEDIATE` transaction. Nothing another
//! connection could see happens in between.

use std::num::NonZeroU64;

use ratewarden_core::algorithm::fixed_window::FixedWindowState;
use ratewarden_core::algorithm::gcra::GcraState;
use ratewarden_core::algorithm::sliding_window::SlidingWindowState;
use ratewarden_core::{
    Acquire, Algorithm, Attempt, Decision, Key, Outcome, Policy, Settlement, Timestamp,
};
use rusqlite::Connection;

use crate::audit::AuditLog;
use crate::counters;
use crate::{fixed_window, sliding_log};

/// An owned copy of one [`Acquire`], to cross the thread boundary.
#[derive(Debug)]
pub(crate) struct OwnedItem {
    pub policy: Policy,
    pub key: Key,
    pub cost: NonZeroU64,
    pub audit_path: Option<String>,
}

/// An owned copy of a [`ratewarden_core::Batch`].
#[derive(Debug)]
pub(crate) struct OwnedBatch {
    pub now: Timestamp,
    pub items: Vec<OwnedItem>,
}

/// What an item writes once the batch is settled.
enum Pending {
    Nothing,
    Fixed(FixedWindowState),
    Sliding(SlidingWindowState),
    Gcra(GcraState),
    /// Record the attempt's cost as sliding-log events.
    Record,
}

fn attempt(item: &OwnedItem, now: Timestamp) -> Attempt {
    Attempt {
        now,
        cost: item.cost,
    }
}

fn decide(
    conn: &Connection,
    item: &OwnedItem,
    now: Timestamp,
) -> rusqlite::Result<(Decision, Pending)> {
    let (policy, key, attempt) = (&item.policy, &item.key, attempt(item, now));
    Ok(match policy.algorithm {
        Algorithm::FixedWindow => {
            let (d, next) = fixed_window::decide(conn, policy, key, attempt)?;
            (d, next.map_or(Pending::Nothing, Pending::Fixed))
        }
        Algorithm::SlidingLog => {
            let d = sliding_log::decide(conn, policy, key, attempt)?;
            (
                d,
                if d.allowed() {
                    Pending::Record
                } else {
                    Pending::Nothing
                },
            )
        }
        Algorithm::SlidingWindow => {
            let (d, next) = counters::sliding_window_decide(conn, policy, key, attempt)?;
            (d, next.map_or(Pending::Nothing, Pending::Sliding))
        }
        Algorithm::Gcra => {
            let (d, next) = counters::gcra_decide(conn, policy, key, attempt)?;
            (d, next.map_or(Pending::Nothing, Pending::Gcra))
        }
    })
}

fn write(
    conn: &Connection,
    item: &OwnedItem,
    now: Timestamp,
    decision: &Decision,
    pending: Pending,
    audit_log: &mut AuditLog,
) -> rusqlite::Result<()> {
    let (policy, key, attempt) = (&item.policy, &item.key, attempt(item, now));
    match pending {
        Pending::Nothing => Ok(()),
        Pending::Fixed(next) => {
            // The audit log keeps allowed requests only (those its
            // sampling takes).
            let audit = item
                .audit_path
                .as_deref()
                .filter(|_| decision.allowed() && audit_log.take());
            fixed_window::write(conn, policy, key, attempt, next, audit)
        }
        Pending::Record => sliding_log::record(conn, policy, key, attempt),
        Pending::Sliding(next) => counters::sliding_window_write(conn, policy, key, next),
        Pending::Gcra(next) => counters::gcra_write(conn, policy, key, next),
    }
}

/// What a request of cost 1 for `key` would get at `now`.
pub(crate) fn status(
    conn: &Connection,
    policy: &Policy,
    key: &Key,
    now: Timestamp,
) -> rusqlite::Result<Decision> {
    match policy.algorithm {
        Algorithm::FixedWindow => fixed_window::status(conn, policy, key, now),
        Algorithm::SlidingLog => sliding_log::status(conn, policy, key, now),
        Algorithm::SlidingWindow => counters::sliding_window_status(conn, policy, key, now),
        Algorithm::Gcra => counters::gcra_status(conn, policy, key, now),
    }
}

/// Decides every item of `batch` all or nothing and writes what the
/// settlement charges; one decision per item.
pub(crate) fn acquire(
    conn: &Connection,
    batch: &OwnedBatch,
    audit_log: &mut AuditLog,
) -> rusqlite::Result<Vec<Decision>> {
    let now = batch.now;
    let own = batch
        .items
        .iter()
        .map(|item| decide(conn, item, now))
        .collect::<rusqlite::Result<Vec<_>>>()?;
    let acquires: Vec<Acquire<'_>> = batch
        .items
        .iter()
        .map(|item| Acquire {
            policy: &item.policy,
            key: &item.key,
            cost: item.cost,
            audit: None,
        })
        .collect();
    let settlement = Settlement::of(&acquires, own.iter().map(|(d, _)| d));
    let mut decisions = Vec::with_capacity(own.len());
    for ((item, acquire), (decision, pending)) in batch.items.iter().zip(&acquires).zip(own) {
        let reported = if settlement.reports_standing(acquire, &decision) {
            Decision {
                outcome: Outcome::Allowed,
                ..status(conn, &item.policy, &item.key, now)?
            }
        } else {
            decision
        };
        if settlement.charges(acquire) {
            write(conn, item, now, &decision, pending, audit_log)?;
        }
        decisions.push(reported);
    }
    Ok(decisions)
}
