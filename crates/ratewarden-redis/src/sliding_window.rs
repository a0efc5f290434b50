//! Sliding window counter: a hash `{k, curr, prev}` per key, living until
//! `(k+2)·W`, when `curr` stops weighing. The script decides
//! `prev·(W − elapsed) + (curr + c)·W <= L·W` exactly on decimal strings
//! (the products reach 2^127), writes only when allowed and returns the
//! state it saw; Rust runs the reference algorithm on that state.

use ratewarden_core::algorithm::sliding_window::{self, SlidingWindowState};
use ratewarden_core::{Acquire, Algorithm, Decision, Key, Policy, StoreError, Timestamp};
use redis::aio::ConnectionManager;

use crate::numbers::{parse_u64, ttl_ms};
use crate::{RedisStore, agreed, keys, redis_error};

type Stored = (Option<String>, Option<String>, Option<String>);

pub(crate) async fn acquire(
    store: &RedisStore,
    con: &mut ConnectionManager,
    request: &Acquire<'_>,
) -> Result<Decision, StoreError> {
    let quota = &request.policy.quota;
    let name = keys::state(
        store.config.key_prefix(),
        Algorithm::SlidingWindow,
        request.key,
    );
    let cost = request.attempt.cost.get();
    if cost > quota.limit() {
        let state = read(con, &name).await?;
        return Ok(sliding_window::decide(state, quota, request.attempt).0);
    }
    let w = quota.window_nanos();
    let t = request.attempt.now.as_unix_nanos();
    let k = t / w;
    let elapsed = t - k * w;
    let until_unneeded = (u128::from(k) + 2) * u128::from(w) - u128::from(t);
    let (allowed, window, curr, prev): (i64, Option<String>, Option<String>, Option<String>) =
        store
            .scripts
            .sliding_window
            .key(&name)
            .arg(k)
            .arg(k.checked_sub(1).map(|p| p.to_string()).unwrap_or_default())
            .arg(cost)
            .arg(w - elapsed)
            .arg(w)
            .arg((u128::from(quota.limit()) * u128::from(w)).to_string())
            .arg(ttl_ms(until_unneeded, store.config.ttl_slack()))
            .invoke_async(con)
            .await
            .map_err(redis_error)?;
    let state = decode((window, curr, prev))?;
    let (decision, _) = sliding_window::decide(state, quota, request.attempt);
    agreed(decision, allowed, Algorithm::SlidingWindow)
}

pub(crate) async fn status(
    store: &RedisStore,
    con: &mut ConnectionManager,
    policy: &Policy,
    key: &Key,
    now: Timestamp,
) -> Result<Decision, StoreError> {
    let name = keys::state(store.config.key_prefix(), Algorithm::SlidingWindow, key);
    let state = read(con, &name).await?;
    Ok(sliding_window::status(state, &policy.quota, now))
}

async fn read(
    con: &mut ConnectionManager,
    name: &str,
) -> Result<Option<SlidingWindowState>, StoreError> {
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

fn decode((window, curr, prev): Stored) -> Result<Option<SlidingWindowState>, StoreError> {
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
