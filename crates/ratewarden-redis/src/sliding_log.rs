//! Sliding log: a sorted set per (policy, key) whose members are
//! `<20-digit ns>:<request id>:<i>`, all scored 0, so lexicographic order
//! is time order to the nanosecond (scores are doubles: they would round
//! nanosecond timestamps). One member per admitted unit, so a cost of `c`
//! adds `c` members (as SQLite adds `c` rows): keep costs small.
//!
//! The batch script drops dead events, counts the live ones, records the
//! request when it is charged and returns the live count, the newest live
//! event and, on a denial, the `j`-th oldest; Rust runs the reference
//! algorithm on them.

use crate::link::Conn;
use ratewarden_core::algorithm::sliding_log::{self, LiveLog};
use ratewarden_core::{Attempt, Decision, Key, Policy, Quota, StoreError, Timestamp};

use crate::batch::{Block, Seen};
use crate::numbers::{decimal, pad20, parse_u64, ttl_ms};
use crate::{RedisStore, keys, redis_error};

/// The batch script's arguments for one sliding-log item.
pub(crate) fn block(store: &RedisStore, policy: &Policy, key: &Key, attempt: Attempt) -> Block {
    let quota = &policy.quota;
    let now = attempt.now;
    let cost = attempt.cost.get();
    let name = keys::state(store.config.key_prefix(), policy, key);
    let dead_before = sliding_log::live_after(quota, now)
        .map(|after| format!("({}", pad20(after.as_unix_nanos() + 1)))
        .unwrap_or_default();
    if cost > quota.limit() {
        // Read only, but the dead events must go for the live count.
        return Block::never(name, [dead_before]);
    }
    let member_prefix = format!(
        "{}:{}:",
        pad20(now.as_unix_nanos()),
        store.next_request_id()
    );
    Block::new(
        name,
        [
            dead_before,
            decimal(quota.limit() - cost),
            decimal(cost),
            member_prefix,
            ttl_ms(u128::from(quota.window_nanos()), store.config.ttl_slack()),
        ],
    )
}

/// The state the script saw: the live count, the newest live member and
/// (on a denial) the `j`-th oldest.
pub(crate) fn seen(
    count: Option<String>,
    newest: Option<String>,
    jth: Option<String>,
) -> Result<Seen, StoreError> {
    let count = count.ok_or_else(|| StoreError::Failed("the script returned no count".into()))?;
    Ok(Seen::Log {
        log: live_log(&count, newest.as_deref())?,
        jth: jth.as_deref().map(event_time).transpose()?,
    })
}

pub(crate) async fn status(
    store: &RedisStore,
    con: &mut Conn,
    policy: &Policy,
    key: &Key,
    now: Timestamp,
) -> Result<Decision, StoreError> {
    let quota = &policy.quota;
    let threshold = quota.limit().checked_sub(1);
    let (log, jth) = read(store, con, policy, key, now, threshold).await?;
    sliding_log::status(log, |_| nth(jth.as_deref()), quota, now)
}

/// The live log at `now`, read without writing; with `threshold = L − c`
/// also the `j`-th oldest live event when `n > L − c`.
async fn read(
    store: &RedisStore,
    con: &mut Conn,
    policy: &Policy,
    key: &Key,
    now: Timestamp,
    threshold: Option<u64>,
) -> Result<(LiveLog, Option<String>), StoreError> {
    let name = keys::state(store.config.key_prefix(), policy, key);
    let live_from = live_from(&policy.quota, now);
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

/// The `ZRANGEBYLEX` bound of the events live at `now`.
pub(crate) fn live_from(quota: &Quota, now: Timestamp) -> String {
    sliding_log::live_after(quota, now)
        .map(|after| format!("[{}", pad20(after.as_unix_nanos() + 1)))
        .unwrap_or_else(|| "-".to_owned())
}

fn live_log(count: &str, newest: Option<&str>) -> Result<LiveLog, StoreError> {
    Ok(LiveLog {
        count: parse_u64("sliding-log count", count)?,
        newest: newest.map(event_time).transpose()?,
    })
}

pub(crate) fn nth(member: Option<&str>) -> Result<Timestamp, StoreError> {
    let member =
        member.ok_or_else(|| StoreError::Failed("the script returned no j-th event".into()))?;
    event_time(member)
}

/// The instant of a member `<20 digits>:…`.
pub(crate) fn event_time(member: &str) -> Result<Timestamp, StoreError> {
    let digits = member.get(..20).unwrap_or(member);
    Ok(Timestamp::from_unix_nanos(parse_u64(
        "sliding-log event",
        digits,
    )?))
}
