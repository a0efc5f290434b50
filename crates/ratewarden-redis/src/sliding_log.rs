//! Sliding log: a sorted set per key whose members are
//! `<20-digit ns>:<request id>:<i>`, all scored 0, so lexicographic order
//! is time order to the nanosecond (scores are doubles: they would round
//! nanosecond timestamps). One member per admitted unit, so a cost of `c`
//! adds `c` members (as SQLite adds `c` rows): keep costs small.
//!
//! The script drops dead events, counts the live ones, records the request
//! when it fits and returns the live count, the newest live event and, on
//! a denial, the `j`-th oldest; Rust runs the reference algorithm on them.

use ratewarden_core::algorithm::sliding_log::{self, LiveLog};
use ratewarden_core::{Acquire, Algorithm, Decision, Key, Policy, Quota, StoreError, Timestamp};
use redis::aio::ConnectionManager;

use crate::numbers::{pad20, parse_u64, ttl_ms};
use crate::{RedisStore, agreed, keys, redis_error};

pub(crate) async fn acquire(
    store: &RedisStore,
    con: &mut ConnectionManager,
    request: &Acquire<'_>,
) -> Result<Decision, StoreError> {
    let quota = &request.policy.quota;
    let now = request.attempt.now;
    let cost = request.attempt.cost.get();
    if cost > quota.limit() {
        // Never passes and changes nothing: read the log for the answer.
        let (log, _) = read(store, con, request.key, quota, now, None).await?;
        let never = |_| Err(StoreError::Failed("no j-th event for a Never".into()));
        return sliding_log::decide(log, never, quota, request.attempt);
    }
    let name = keys::state(
        store.config.key_prefix(),
        Algorithm::SlidingLog,
        request.key,
    );
    let dead_before = sliding_log::live_after(quota, now)
        .map(|after| format!("({}", pad20(after.as_unix_nanos() + 1)))
        .unwrap_or_default();
    let member_prefix = format!(
        "{}:{}:",
        pad20(now.as_unix_nanos()),
        store.next_request_id()
    );
    let (allowed, count, newest, jth): (i64, String, Option<String>, Option<String>) = store
        .scripts
        .sliding_log
        .key(&name)
        .arg(dead_before)
        .arg(quota.limit() - cost)
        .arg(cost)
        .arg(member_prefix)
        .arg(ttl_ms(
            u128::from(quota.window_nanos()),
            store.config.ttl_slack(),
        ))
        .invoke_async(con)
        .await
        .map_err(redis_error)?;
    let log = live_log(&count, newest.as_deref())?;
    let decision = sliding_log::decide(log, |_| nth(jth.as_deref()), quota, request.attempt)?;
    agreed(decision, allowed, Algorithm::SlidingLog)
}

pub(crate) async fn status(
    store: &RedisStore,
    con: &mut ConnectionManager,
    policy: &Policy,
    key: &Key,
    now: Timestamp,
) -> Result<Decision, StoreError> {
    let quota = &policy.quota;
    let threshold = quota.limit().checked_sub(1);
    let (log, jth) = read(store, con, key, quota, now, threshold).await?;
    sliding_log::status(log, |_| nth(jth.as_deref()), quota, now)
}

/// The live log at `now`, read without writing; with `threshold = L − c`
/// also the `j`-th oldest live event when `n > L − c`.
async fn read(
    store: &RedisStore,
    con: &mut ConnectionManager,
    key: &Key,
    quota: &Quota,
    now: Timestamp,
    threshold: Option<u64>,
) -> Result<(LiveLog, Option<String>), StoreError> {
    let name = keys::state(store.config.key_prefix(), Algorithm::SlidingLog, key);
    let live_from = sliding_log::live_after(quota, now)
        .map(|after| format!("[{}", pad20(after.as_unix_nanos() + 1)))
        .unwrap_or_else(|| "-".to_owned());
    let threshold = threshold.map(|t| t.to_string()).unwrap_or_default();
    let (count, newest, jth): (String, Option<String>, Option<String>) = store
        .scripts
        .sliding_log_read
        .key(&name)
        .arg(live_from)
        .arg(threshold)
        .invoke_async(con)
        .await
        .map_err(redis_error)?;
    Ok((live_log(&count, newest.as_deref())?, jth))
}

fn live_log(count: &str, newest: Option<&str>) -> Result<LiveLog, StoreError> {
    Ok(LiveLog {
        count: parse_u64("sliding-log count", count)?,
        newest: newest.map(event_time).transpose()?,
    })
}

fn nth(member: Option<&str>) -> Result<Timestamp, StoreError> {
    let member =
        member.ok_or_else(|| StoreError::Failed("the script returned no j-th event".into()))?;
    event_time(member)
}

/// The instant of a member `<20 digits>:…`.
fn event_time(member: &str) -> Result<Timestamp, StoreError> {
    let digits = member.get(..20).unwrap_or(member);
    Ok(Timestamp::from_unix_nanos(parse_u64(
        "sliding-log event",
        digits,
    )?))
}
