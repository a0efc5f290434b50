//! Fixed window: one counter per (key, window), `…}:<k>`, living until the
//! window's end. The script adds the cost (saturating at `i64::MAX`) and
//! returns the count before it; Rust runs the reference algorithm on that
//! count, so the answer equals the memory store's by construction.

use ratewarden_core::algorithm::fixed_window::{self, FixedWindowState};
use ratewarden_core::quota::MAX_COUNT;
use ratewarden_core::{Acquire, Decision, Key, Policy, StoreError, Timestamp};
use redis::aio::ConnectionManager;

use crate::numbers::{parse_u64, ttl_ms};
use crate::{RedisStore, get, keys, redis_error};

pub(crate) async fn acquire(
    store: &RedisStore,
    con: &mut ConnectionManager,
    request: &Acquire<'_>,
) -> Result<Decision, StoreError> {
    let quota = &request.policy.quota;
    let now = request.attempt.now;
    let cost = request.attempt.cost.get();
    let k = fixed_window::window_index(quota, now);
    let name = keys::fixed_window(store.config.key_prefix(), request.key, k);
    let before: Option<String> = if cost > quota.limit() {
        // Never passes and changes nothing: only read the count.
        get(con, &name).await?
    } else {
        let until_end = quota.window_nanos() - now.as_unix_nanos() % quota.window_nanos();
        store
            .scripts
            .fixed_window
            .key(&name)
            .arg(cost)
            .arg(MAX_COUNT - cost)
            .arg(ttl_ms(u128::from(until_end), store.config.ttl_slack()))
            .invoke_async(con)
            .await
            .map_err(redis_error)?
    };
    let state = state(k, before)?;
    Ok(fixed_window::decide(state, quota, request.attempt).0)
}

pub(crate) async fn status(
    store: &RedisStore,
    con: &mut ConnectionManager,
    policy: &Policy,
    key: &Key,
    now: Timestamp,
) -> Result<Decision, StoreError> {
    let k = fixed_window::window_index(&policy.quota, now);
    let name = keys::fixed_window(store.config.key_prefix(), key, k);
    let count = get(con, &name).await?;
    Ok(fixed_window::status(state(k, count)?, &policy.quota, now))
}

fn state(k: u64, count: Option<String>) -> Result<Option<FixedWindowState>, StoreError> {
    count
        .map(|c| {
            Ok(FixedWindowState {
                window: k,
                count: parse_u64("fixed-window count", &c)?,
            })
        })
        .transpose()
}
