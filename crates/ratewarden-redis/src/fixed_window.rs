//! Fixed window: one counter per (policy, key, window), `…}:<k>`, living
//! until the window's end. The batch script reads the count, decides and,
//! when charged, adds the cost (saturating at `i64::MAX`); it returns the
//! count before, and Rust runs the reference algorithm on that count, so
//! the answer equals the memory store's by construction.

use crate::link::Conn;
use ratewarden_core::algorithm::fixed_window::{self, FixedWindowState};
use ratewarden_core::quota::MAX_COUNT;
use ratewarden_core::{Attempt, Decision, Key, Policy, StoreError, Timestamp};

use crate::batch::{Block, Seen};
use crate::numbers::{decimal, parse_u64, ttl_ms};
use crate::{RedisStore, get, keys};

/// The batch script's arguments for one fixed-window item.
pub(crate) fn block(store: &RedisStore, policy: &Policy, key: &Key, attempt: Attempt) -> Block {
    let quota = &policy.quota;
    let now = attempt.now;
    let cost = attempt.cost.get();
    let k = fixed_window::window_index(quota, now);
    let name = keys::fixed_window(store.config.key_prefix(), policy, key, k);
    if cost > quota.limit() {
        return Block::never(name, []);
    }
    let until_end = quota.window_nanos() - now.as_unix_nanos() % quota.window_nanos();
    Block::new(
        name,
        [
            decimal(cost),
            decimal(quota.limit() - cost),
            decimal(MAX_COUNT - cost),
            ttl_ms(u128::from(until_end), store.config.ttl_slack()),
        ],
    )
}

/// The state the script saw: the count of window `k` before the attempt.
pub(crate) fn seen(
    policy: &Policy,
    now: Timestamp,
    count: Option<String>,
) -> Result<Seen, StoreError> {
    let k = fixed_window::window_index(&policy.quota, now);
    Ok(Seen::Fixed(state(k, count)?))
}

pub(crate) async fn status(
    store: &RedisStore,
    con: &mut Conn,
    policy: &Policy,
    key: &Key,
    now: Timestamp,
) -> Result<Decision, StoreError> {
    let k = fixed_window::window_index(&policy.quota, now);
    let name = keys::fixed_window(store.config.key_prefix(), policy, key, k);
    let count = get(con, &name).await?;
    Ok(fixed_window::status(state(k, count)?, &policy.quota, now))
}

pub(crate) fn state(k: u64, count: Option<String>) -> Result<Option<FixedWindowState>, StoreError> {
    count
        .map(|c| {
            Ok(FixedWindowState {
                window: k,
                count: parse_u64("fixed-window count", &c)?,
            })
        })
        .transpose()
}
