//! GCRA: one string per key, the theoretical arrival time in nanoseconds,
//! living until that instant. The script computes `max(tat, now)`, decides
//! and writes on decimal strings (instants reach `i64::MAX`, past a
//! double's 2^53) and returns the `tat` it saw; Rust runs the reference
//! algorithm on it.

use ratewarden_core::algorithm::gcra::{self, GcraState, MAX_TAT};
use ratewarden_core::{Acquire, Algorithm, Decision, Key, Policy, StoreError, Timestamp};
use redis::aio::ConnectionManager;

use crate::numbers::{parse_u64, slack_ms};
use crate::{RedisStore, agreed, get, keys, redis_error};

pub(crate) async fn acquire(
    store: &RedisStore,
    con: &mut ConnectionManager,
    request: &Acquire<'_>,
) -> Result<Decision, StoreError> {
    let quota = &request.policy.quota;
    let name = keys::state(store.config.key_prefix(), Algorithm::Gcra, request.key);
    let cost = request.attempt.cost.get();
    let Some(period) = gcra::emission_interval(quota).filter(|_| cost <= quota.burst()) else {
        // Never passes (limit 0, or cost above the burst): read only.
        let state = read(con, &name).await?;
        return Ok(gcra::decide(state, quota, request.attempt).0);
    };
    let t = u128::from(request.attempt.now.as_unix_nanos());
    let period = u128::from(period);
    let capacity = u128::from(quota.burst()) * period;
    let cost_time = u128::from(cost) * period;
    // cost <= burst, so capacity >= cost_time.
    let latest_tat0 = t + capacity - cost_time;
    let (allowed, tat): (i64, Option<String>) = store
        .scripts
        .gcra
        .key(&name)
        .arg(t.to_string())
        .arg(latest_tat0.to_string())
        .arg(cost_time.to_string())
        .arg(MAX_TAT)
        .arg(slack_ms(store.config.ttl_slack()).to_string())
        .invoke_async(con)
        .await
        .map_err(redis_error)?;
    let state = decode(tat)?;
    let (decision, _) = gcra::decide(state, quota, request.attempt);
    agreed(decision, allowed, Algorithm::Gcra)
}

pub(crate) async fn status(
    store: &RedisStore,
    con: &mut ConnectionManager,
    policy: &Policy,
    key: &Key,
    now: Timestamp,
) -> Result<Decision, StoreError> {
    let name = keys::state(store.config.key_prefix(), Algorithm::Gcra, key);
    let state = read(con, &name).await?;
    Ok(gcra::status(state, &policy.quota, now))
}

async fn read(con: &mut ConnectionManager, name: &str) -> Result<Option<GcraState>, StoreError> {
    let tat = get(con, name).await?;
    decode(tat)
}

fn decode(tat: Option<String>) -> Result<Option<GcraState>, StoreError> {
    tat.map(|tat| {
        Ok(GcraState {
            tat: parse_u64("GCRA tat", &tat)?,
        })
    })
    .transpose()
}
