//! Sliding log on `rate_events` (seed B): count and insert inside the one
//! `BEGIN IMMEDIATE` transaction the worker holds, so no two checks can
//! both take the last free slot (the seed's TOCTOU warning).

use std::time::Duration;

use ratewarden_core::algorithm::sliding_log::{self, LiveLog};
use ratewarden_core::{Acquire, Decision, Key, Policy, Quota, Timestamp};
use rusqlite::{Connection, params};

use crate::keys::{self, Column, EventPrefix};
use crate::timefmt;

const LIVE: &str = "
SELECT COUNT(*), MAX(created_at) FROM rate_events
WHERE user_id = ?1 AND endpoint = ?2 AND created_at > ?3";

const NTH_OLDEST: &str = "
SELECT created_at FROM rate_events
WHERE user_id = ?1 AND endpoint = ?2 AND created_at > ?3
ORDER BY created_at LIMIT 1 OFFSET ?4";

const INSERT: &str = "INSERT INTO rate_events (user_id, endpoint, created_at) VALUES (?1, ?2, ?3)";

/// The live events of one key at one instant, and how to query them.
struct Live<'a> {
    conn: &'a Connection,
    user_id: i64,
    endpoint: Column<'a>,
    /// Events strictly later than this text are live ("" when all are).
    after: String,
}

impl<'a> Live<'a> {
    fn new(conn: &'a Connection, key: &'a Key, quota: &Quota, now: Timestamp) -> Live<'a> {
        let (user_id, endpoint) = keys::event_key(key);
        let after = sliding_log::live_after(quota, now)
            .map(timefmt::nanos)
            .unwrap_or_default();
        Live {
            conn,
            user_id,
            endpoint,
            after,
        }
    }

    fn summary(&self) -> rusqlite::Result<LiveLog> {
        let (count, newest): (i64, Option<String>) = self
            .conn
            .prepare_cached(LIVE)?
            .query_row(params![self.user_id, self.endpoint, self.after], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })?;
        Ok(LiveLog {
            count: count.max(0) as u64,
            newest: newest.as_deref().and_then(timefmt::parse),
        })
    }

    fn nth_oldest(&self, j: u64) -> rusqlite::Result<Timestamp> {
        let text: String = self.conn.prepare_cached(NTH_OLDEST)?.query_row(
            params![
                self.user_id,
                self.endpoint,
                self.after,
                j.saturating_sub(1) as i64
            ],
            |r| r.get(0),
        )?;
        timefmt::parse(&text).ok_or_else(|| {
            rusqlite::Error::FromSqlConversionFailure(
                0,
                rusqlite::types::Type::Text,
                format!("bad created_at {text:?}").into(),
            )
        })
    }
}

pub(crate) fn acquire(conn: &Connection, request: &Acquire<'_>) -> rusqlite::Result<Decision> {
    let quota = &request.policy.quota;
    let live = Live::new(conn, request.key, quota, request.attempt.now);
    let decision = sliding_log::decide(
        live.summary()?,
        |j| live.nth_oldest(j),
        quota,
        request.attempt,
    )?;
    if decision.allowed() {
        let created_at = timefmt::nanos(request.attempt.now);
        let mut insert = conn.prepare_cached(INSERT)?;
        for _ in 0..request.attempt.cost.get() {
            insert.execute(params![live.user_id, live.endpoint, created_at])?;
        }
    }
    Ok(decision)
}

pub(crate) fn status(
    conn: &Connection,
    policy: &Policy,
    key: &Key,
    now: Timestamp,
) -> rusqlite::Result<Decision> {
    let live = Live::new(conn, key, &policy.quota, now);
    sliding_log::status(live.summary()?, |j| live.nth_oldest(j), &policy.quota, now)
}

pub(crate) fn reset(conn: &Connection, prefix: &Key) -> rusqlite::Result<u64> {
    let encoded = prefix.encoded();
    let len = encoded.len() as i64;
    let deleted = match keys::event_prefix(prefix) {
        EventPrefix::User(id, None) => conn.execute(
            "DELETE FROM rate_events WHERE user_id = ?1
             OR (user_id = 0 AND substr(endpoint, 1, ?2) = ?3)",
            params![id, len, encoded],
        )?,
        EventPrefix::User(id, Some(endpoint)) => conn.execute(
            "DELETE FROM rate_events WHERE (user_id = ?1 AND endpoint = ?4)
             OR (user_id = 0 AND substr(endpoint, 1, ?2) = ?3)",
            params![id, len, encoded, endpoint],
        )?,
        EventPrefix::Encoded => conn.execute(
            "DELETE FROM rate_events WHERE user_id = 0 AND substr(endpoint, 1, ?1) = ?2",
            params![len, encoded],
        )?,
    };
    Ok(deleted as u64)
}

/// Deletes events that have left every window of at most `longest_window`
/// (`now − e >= W`).
pub(crate) fn prune(
    conn: &Connection,
    longest_window: Duration,
    now: Timestamp,
) -> rusqlite::Result<u64> {
    let w = ratewarden_core::clock::duration_nanos(longest_window);
    let Some(cutoff) = now.as_unix_nanos().checked_sub(w) else {
        return Ok(0);
    };
    let cutoff = timefmt::nanos(Timestamp::from_unix_nanos(cutoff));
    let deleted = conn.execute("DELETE FROM rate_events WHERE created_at <= ?1", [cutoff])?;
    Ok(deleted as u64)
}
