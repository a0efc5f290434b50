//! Fixed window on `rate_limit_windows` (seed A): increment and read-back
//! are one statement, `INSERT … ON CONFLICT … DO UPDATE … RETURNING count`.

use std::time::Duration;

use ratewarden_core::algorithm::fixed_window::{self, FixedWindowState};
use ratewarden_core::{Acquire, Decision, Key, Policy, Timestamp};
use rusqlite::{Connection, OptionalExtension, params};

use crate::keys::{self, Column};
use crate::timefmt;

/// Saturates at `i64::MAX` (`ratewarden_core::quota::MAX_COUNT`): SQLite
/// would turn an overflowing integer sum into a float.
const UPSERT: &str = "
INSERT INTO rate_limit_windows (key, window_start, count) VALUES (?1, ?2, ?3)
ON CONFLICT (key, window_start) DO UPDATE SET count =
    CASE WHEN count > 9223372036854775807 - excluded.count THEN 9223372036854775807
         ELSE count + excluded.count END
RETURNING count";

const READ: &str = "SELECT count FROM rate_limit_windows WHERE key = ?1 AND window_start = ?2";

const AUDIT: &str = "INSERT INTO api_calls (key, path, called_at) VALUES (?1, ?2, ?3)";

pub(crate) fn acquire(conn: &Connection, request: &Acquire<'_>) -> rusqlite::Result<Decision> {
    let quota = &request.policy.quota;
    let now = request.attempt.now;
    let cost = request.attempt.cost.get();
    let k = fixed_window::window_index(quota, now);
    let key = keys::window_key(request.key);
    let start = timefmt::window_start(fixed_window::window_start(quota, k));
    let decision = if cost > quota.limit() {
        // Never passes and changes nothing: only read the count for the answer.
        let state = read(conn, key, &start)?.map(|count| FixedWindowState { window: k, count });
        fixed_window::decide(state, quota, request.attempt).0
    } else {
        let count: i64 = conn
            .prepare_cached(UPSERT)?
            .query_row(params![key, start, cost as i64], |r| r.get(0))?;
        // Re-run the reference algorithm from the state before this
        // increment, so SQLite and memory agree by construction.
        let before = (count as u64).saturating_sub(cost);
        let state = FixedWindowState {
            window: k,
            count: before,
        };
        fixed_window::decide(Some(state), quota, request.attempt).0
    };
    if let (true, Some(audit)) = (decision.allowed(), request.audit) {
        conn.prepare_cached(AUDIT)?
            .execute(params![key, audit.path, timefmt::nanos(now)])?;
    }
    Ok(decision)
}

pub(crate) fn status(
    conn: &Connection,
    policy: &Policy,
    key: &Key,
    now: Timestamp,
) -> rusqlite::Result<Decision> {
    let k = fixed_window::window_index(&policy.quota, now);
    let start = timefmt::window_start(fixed_window::window_start(&policy.quota, k));
    let state = read(conn, keys::window_key(key), &start)?
        .map(|count| FixedWindowState { window: k, count });
    Ok(fixed_window::status(state, &policy.quota, now))
}

fn read(conn: &Connection, key: Column<'_>, start: &str) -> rusqlite::Result<Option<u64>> {
    let count: Option<i64> = conn
        .prepare_cached(READ)?
        .query_row(params![key, start], |r| r.get(0))
        .optional()?;
    Ok(count.map(|c| c.max(0) as u64))
}

pub(crate) fn reset(conn: &Connection, prefix: &Key) -> rusqlite::Result<u64> {
    let encoded = prefix.encoded();
    let deleted = conn.execute(
        "DELETE FROM rate_limit_windows
         WHERE key = ?1 OR (typeof(key) = 'blob' AND substr(key, 1, ?2) = ?3)",
        params![keys::window_key(prefix), encoded.len() as i64, encoded],
    )?;
    Ok(deleted as u64)
}

/// Deletes windows that started more than two `longest_window`s ago
/// (seed A), plus one second: a window start written with a fraction sorts
/// before the whole-second text of the same second, so the cutoff is kept
/// a second further back than needed.
pub(crate) fn prune(
    conn: &Connection,
    longest_window: Duration,
    now: Timestamp,
) -> rusqlite::Result<u64> {
    let two_windows = longest_window
        .saturating_mul(2)
        .saturating_add(Duration::from_secs(1));
    let Some(cutoff) = now
        .as_unix_nanos()
        .checked_sub(ratewarden_core::clock::duration_nanos(two_windows))
    else {
        return Ok(0);
    };
    let cutoff = timefmt::seconds(Timestamp::from_unix_nanos(cutoff));
    let deleted = conn.execute(
        "DELETE FROM rate_limit_windows WHERE window_start < ?1",
        [cutoff],
    )?;
    Ok(deleted as u64)
}

/// Deletes audit rows older than `retention`.
pub(crate) fn prune_audit(
    conn: &Connection,
    retention: Duration,
    now: Timestamp,
) -> rusqlite::Result<u64> {
    if now.as_unix_nanos() < ratewarden_core::clock::duration_nanos(retention) {
        return Ok(0);
    }
    let cutoff = timefmt::nanos(now.saturating_sub(retention));
    let deleted = conn.execute("DELETE FROM api_calls WHERE called_at < ?1", [cutoff])?;
    Ok(deleted as u64)
}
