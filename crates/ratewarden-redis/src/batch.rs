//! A batch on Redis: one call of `lua/batch.lua` (`FCALL` of the function
//! library, or `EVALSHA`: scripts.rs) over every item's key, so the
//! decisions, the all-or-nothing rule and the writes are one atomic step
//! and one round trip (a call that may carry other requests' batches
//! too: coalesce.rs). Rust builds each item's arguments (the
//! algorithm modules' `block`), and from the state the script saw runs
//! the reference algorithm and `ratewarden_core::Settlement`; a script
//! that decided an item differently is a bug, reported as a failure.

use std::borrow::Cow;

use ratewarden_core::algorithm::fixed_window::{self, FixedWindowState};
use ratewarden_core::algorithm::gcra::{self, GcraState};
use ratewarden_core::algorithm::sliding_log::{self, LiveLog};
use ratewarden_core::algorithm::sliding_window::{self, SlidingWindowState};
use ratewarden_core::{
    Algorithm, Attempt, Batch, Decision, Mode, Quota, Settlement, StoreError, Timestamp,
};

use crate::coalesce::Group;
use crate::numbers::decimal;
use crate::sliding_window as sw;
use crate::{RedisStore, fixed_window as fw, gcra as gc, keys, sliding_log as sl};

/// Arguments per item after the algorithm code and the flags (`ARGS` in
/// `lua/batch.lua`).
fn args_of(algorithm: Algorithm) -> usize {
    match algorithm {
        Algorithm::FixedWindow => 4,
        Algorithm::SlidingLog => 5,
        Algorithm::Gcra => 5,
        Algorithm::SlidingWindow => 7,
    }
}

/// Reply values per item: allowed, then the state seen (`SEEN` in
/// `lua/batch.lua`).
fn reply_len(algorithm: Algorithm) -> usize {
    match algorithm {
        Algorithm::FixedWindow | Algorithm::Gcra => 2,
        Algorithm::SlidingLog | Algorithm::SlidingWindow => 4,
    }
}

/// One item's key and arguments for the script.
pub(crate) struct Block {
    name: String,
    never: bool,
    args: Vec<String>,
}

impl Block {
    /// An item the script decides.
    pub(crate) fn new<const N: usize>(name: String, args: [String; N]) -> Block {
        Block {
            name,
            never: false,
            args: args.into(),
        }
    }

    /// An item that can never pass: the script only reads its state.
    pub(crate) fn never<const N: usize>(name: String, args: [String; N]) -> Block {
        Block {
            name,
            never: true,
            args: args.into(),
        }
    }
}

/// The state the script saw for one item.
pub(crate) enum Seen {
    Fixed(Option<FixedWindowState>),
    Log {
        log: LiveLog,
        jth: Option<Timestamp>,
    },
    Sliding(Option<SlidingWindowState>),
    Gcra(Option<GcraState>),
}

impl Seen {
    /// The reference algorithm's decision on this state.
    fn decide(&self, quota: &Quota, attempt: Attempt) -> Result<Decision, StoreError> {
        Ok(match self {
            Seen::Fixed(s) => fixed_window::decide(*s, quota, attempt).0,
            Seen::Log { log, jth } => {
                sliding_log::decide(*log, |_| jth.ok_or_else(no_jth), quota, attempt)?
            }
            Seen::Sliding(s) => sliding_window::decide(*s, quota, attempt).0,
            Seen::Gcra(s) => gcra::decide(*s, quota, attempt).0,
        })
    }

    /// What a request of cost 1 would get on this state (nothing charged).
    fn standing(&self, quota: &Quota, now: Timestamp) -> Result<Decision, StoreError> {
        Ok(match self {
            Seen::Fixed(s) => fixed_window::status(*s, quota, now),
            Seen::Log { log, jth } => {
                sliding_log::status(*log, |_| jth.ok_or_else(no_jth), quota, now)?
            }
            Seen::Sliding(s) => sliding_window::status(*s, quota, now),
            Seen::Gcra(s) => gcra::status(*s, quota, now),
        })
    }
}

fn no_jth() -> StoreError {
    StoreError::Failed("the script returned no j-th event".into())
}

/// Decides `batch` in one script; one decision per item.
pub(crate) async fn acquire(
    store: &RedisStore,
    batch: &Batch<'_>,
) -> Result<Vec<Decision>, StoreError> {
    let now = batch.now();
    let items = batch.items();
    let blocks: Vec<Block> = items
        .iter()
        .map(|item| {
            let attempt = Attempt {
                now,
                cost: item.cost,
            };
            let (policy, key) = (item.policy, item.key);
            match policy.algorithm {
                Algorithm::FixedWindow => fw::block(store, policy, key, attempt),
                Algorithm::SlidingLog => sl::block(store, policy, key, attempt),
                Algorithm::SlidingWindow => sw::block(store, policy, key, attempt),
                Algorithm::Gcra => gc::block(store, policy, key, attempt),
            }
        })
        .collect();
    let mut names = Vec::with_capacity(items.len());
    let mut args: Vec<Cow<'static, str>> = Vec::with_capacity(1 + items.len() * 9);
    args.push(Cow::Owned(decimal(items.len())));
    for (item, block) in items.iter().zip(blocks) {
        let policy = item.policy;
        let flags = match (policy.mode, policy.counts_denied(), block.never) {
            (Mode::Enforce, false, false) => "e",
            (Mode::Enforce, true, false) => "ec",
            (Mode::Enforce, false, true) => "en",
            (Mode::Enforce, true, true) => "ecn",
            (Mode::Shadow, false, false) => "s",
            (Mode::Shadow, true, false) => "sc",
            (Mode::Shadow, false, true) => "sn",
            (Mode::Shadow, true, true) => "scn",
        };
        names.push(block.name);
        args.push(Cow::Borrowed(keys::script_code(policy.algorithm)));
        args.push(Cow::Borrowed(flags));
        let mut own = block.args.into_iter();
        for _ in 0..args_of(policy.algorithm) {
            args.push(own.next().map_or(Cow::Borrowed(""), Cow::Owned));
        }
    }
    let expected: usize = items.iter().map(|i| reply_len(i.policy.algorithm)).sum();
    let group = Group {
        keys: names,
        args,
        values: expected,
    };
    let reply = store.call(|con| store.coalescer.submit(con, group)).await?;
    let mut seen = Vec::with_capacity(items.len());
    let mut own = Vec::with_capacity(items.len());
    // The coalescer answers exactly `expected` values, so `next` never
    // runs out.
    let mut values = reply.into_iter();
    let mut next = || values.next().flatten();
    for item in items {
        let allowed = next();
        let state = match item.policy.algorithm {
            Algorithm::FixedWindow => fw::seen(item.policy, now, next())?,
            Algorithm::SlidingLog => {
                let (a, b, c) = (next(), next(), next());
                sl::seen(a, b, c)?
            }
            Algorithm::SlidingWindow => {
                let (a, b, c) = (next(), next(), next());
                sw::seen((a, b, c))?
            }
            Algorithm::Gcra => gc::seen(next())?,
        };
        let attempt = Attempt {
            now,
            cost: item.cost,
        };
        let decision = state.decide(&item.policy.quota, attempt)?;
        if decision.allowed() != (allowed.as_deref() == Some("1")) {
            return Err(StoreError::Failed(format!(
                "{}: the Redis script and the reference algorithm disagree",
                item.policy.algorithm
            )));
        }
        seen.push(state);
        own.push(decision);
    }
    let settlement = Settlement::of(items, &own);
    items
        .iter()
        .zip(own)
        .zip(&seen)
        .map(|((item, decision), state)| {
            if settlement.reports_standing(item, &decision) {
                Ok(Decision {
                    outcome: ratewarden_core::Outcome::Allowed,
                    ..state.standing(&item.policy.quota, now)?
                })
            } else {
                Ok(decision)
            }
        })
        .collect()
}
