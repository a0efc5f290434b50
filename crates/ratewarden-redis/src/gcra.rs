//! GCRA: one string per (policy, key), the theoretical arrival time in
//! nanoseconds, living until that instant. The batch script computes
//! `max(tat, now)`, decides and, when charged, writes: instants reach
//! `i64::MAX`, past a double's 2^53, so they travel as decimal strings;
//! the script works on spans from `now` in doubles when `B·T − c·T` and
//! `c·T` have at most 15 digits (exact there), and on the decimal strings
//! otherwise. It returns the `tat` it saw and Rust runs the reference
//! algorithm on it.

use crate::link::Conn;
use ratewarden_core::algorithm::gcra::{self, GcraState, MAX_TAT};
use ratewarden_core::{Attempt, Decision, Key, Policy, StoreError, Timestamp};

use crate::batch::{Block, Seen};
use crate::numbers::{decimal, parse_u64, slack_ms};
use crate::{RedisStore, get, keys};

/// Where the script splits `now` (ns): its `HALF`, 10^15.
const NOW_SPLIT: u64 = 1_000_000_000_000_000;

// The script's cap on a tat (`MAX_I64` in lua/batch.lua) is this one.
const _: () = assert!(MAX_TAT == i64::MAX as u64);

/// The batch script's arguments for one GCRA item.
pub(crate) fn block(store: &RedisStore, policy: &Policy, key: &Key, attempt: Attempt) -> Block {
    let quota = &policy.quota;
    let name = keys::state(store.config.key_prefix(), policy, key);
    let cost = attempt.cost.get();
    let Some(period) = quota.emission_interval().filter(|_| cost <= quota.burst()) else {
        // Never passes (limit 0, or cost above the burst): read only.
        return Block::never(name, []);
    };
    let t = attempt.now.as_unix_nanos();
    let period = u128::from(period);
    let capacity = u128::from(quota.burst()) * period;
    let cost_time = u128::from(cost) * period;
    // cost <= burst, so capacity >= cost_time. `now` travels as its high
    // and low parts (div and mod 10^15: each exact in a double, no string
    // for the script to split); the script caps the tat at its own
    // i64::MAX, which is MAX_TAT.
    Block::new(
        name,
        [
            decimal(t / NOW_SPLIT),
            decimal(t % NOW_SPLIT),
            decimal(cost_time),
            decimal(slack_ms(store.config.ttl_slack())),
            decimal(capacity - cost_time),
        ],
    )
}

/// The state the script saw.
pub(crate) fn seen(tat: Option<String>) -> Result<Seen, StoreError> {
    Ok(Seen::Gcra(decode(tat)?))
}

pub(crate) async fn status(
    store: &RedisStore,
    con: &mut Conn,
    policy: &Policy,
    key: &Key,
    now: Timestamp,
) -> Result<Decision, StoreError> {
    let name = keys::state(store.config.key_prefix(), policy, key);
    let state = decode(get(con, &name).await?)?;
    Ok(gcra::status(state, &policy.quota, now))
}

pub(crate) fn decode(tat: Option<String>) -> Result<Option<GcraState>, StoreError> {
    tat.map(|tat| {
        Ok(GcraState {
            tat: parse_u64("GCRA tat", &tat)?,
        })
    })
    .transpose()
}
