//! Sliding window counter: a hash `{k, curr, prev}` per (policy, key),
//! living until `(k+2)·W`, when `curr` stops weighing. The batch script
//! decides `prev·(W − elapsed) + (curr + c)·W <= L·W` exactly on decimal
//! strings (the products reach 2^127), writes only when charged and
//! returns the state it saw; Rust runs the reference algorithm on that
//! state.

use crate::link::Conn;
use ratewarden_core::algorithm::sliding_window::{self, SlidingWindowState};
use ratewarden_core::{Attempt, Decision, Key, Policy, StoreError, Timestamp};

use crate::batch::{Block, Seen};
use crate::numbers::{decimal, parse_u64, ttl_ms};
use crate::{RedisStore, keys, redis_error};

pub(crate) type Stored = (Option<String>, Option<String>, Option<String>);

/// The batch script's arguments for one sliding-window item.
pub(crate) fn block(store: &RedisStore, policy: &Policy, key: &Key, attempt: Attempt) -> Block {
    let quota = &policy.quota;
    let name = keys::state(store.config.key_prefix(), policy, key);
    let cost = attempt.cost.get();
    if cost > quota.limit() {
        return Block::never(name, []);
    }
    let w = quota.window_nanos();
    let t = attempt.now.as_unix_nanos();
    let k = t / w;
    let elapsed = t - k * w;
    let until_unneeded = (u128::from(k) + 2) * u128::from(w) - u128::from(t);
    Block::new(
        name,
        [
            decimal(k),
            k.checked_sub(1).map(decimal).unwrap_or_default(),
            decimal(cost),
            decimal(w - elapsed),
            decimal(w),
            decimal(u128::from(quota.limit()) * u128::from(w)),
            ttl_ms(until_unneeded, store.config.ttl_slack()),
        ],
    )
}

/// The state the script saw.
pub(crate) fn seen(stored: Stored) -> Result<Seen, StoreError> {
    Ok(Seen::Sliding(decode(stored)?))
}

pub(crate) async fn status(
    store: &RedisStore,
    con: &mut Conn,
    policy: &Policy,
    key: &Key,
    now: Timestamp,
) -> Result<Decision, StoreError> {
    let name = keys::state(store.config.key_prefix(), policy, key);
    let state = read(con, &name).await?;
    Ok(sliding_window::status(state, &policy.quota, now))
}

async fn read(con: &mut Conn, name: &str) -> Result<Option<SlidingWindowState>, StoreError> {
    let stored: Stored = redis::cmd("HMGET")
        .arg(name)
        .arg("k")
        .arg("curr")
        .arg("prev")
        .query_async(con)
        .await
        .map_err(redis_error)?;
    decode(stored)
}

pub(crate) fn decode(
    (window, curr, prev): Stored,
) -> Result<Option<SlidingWindowState>, StoreError> {
    let Some(window) = window else {
        return Ok(None);
    };
    let count = |c: Option<String>| c.map_or(Ok(0), |c| parse_u64("sliding-window count", &c));
    Ok(Some(SlidingWindowState {
        window: parse_u64("sliding-window index", &window)?,
        curr: count(curr)?,
        prev: count(prev)?,
    }))
}
