//! Sliding log: the `check` policy on `rate_events` (seed B), one row per
//! event; every other policy on `rw_sliding_log`, one row per (policy,
//! key, instant) with the number of events recorded then.
//!
//! Count and insert run inside the one `BEGIN IMMEDIATE` transaction the
//! worker holds, so no two checks can both take the last free slot (the
//! seed's TOCTOU warning).

use std::time::Duration;

use ratewarden_core::algorithm::sliding_log::{self, LiveLog};
use ratewarden_core::{Attempt, Decision, Key, KeyMatch, Policy, Timestamp};
use rusqlite::{Connection, ToSql, params};

use crate::counters::{int, uint};
use crate::keys::{self, Column, EventPrefix, Place};
use crate::prune;
use crate::timefmt;

const SEED_LIVE: &str = "
SELECT COUNT(*), MAX(created_at) FROM rate_events
WHERE user_id = ?1 AND endpoint = ?2 AND created_at > ?3";

const SEED_NTH_OLDEST: &str = "
SELECT created_at FROM rate_events
WHERE user_id = ?1 AND endpoint = ?2 AND created_at > ?3
ORDER BY created_at LIMIT 1 OFFSET ?4";

const SEED_INSERT: &str =
    "INSERT INTO rate_events (user_id, endpoint, created_at) VALUES (?1, ?2, ?3)";

const OWN_LIVE: &str = "
SELECT COALESCE(SUM(n), 0), MAX(at) FROM rw_sliding_log
WHERE policy = ?1 AND key = ?2 AND at > ?3";

const OWN_NTH_OLDEST: &str = "
SELECT at FROM (
    SELECT at, SUM(n) OVER (ORDER BY at) AS seen FROM rw_sliding_log
    WHERE policy = ?1 AND key = ?2 AND at > ?3
) WHERE seen >= ?4 ORDER BY at LIMIT 1";

const OWN_INSERT: &str = "
INSERT INTO rw_sliding_log (policy, key, at, n) VALUES (?1, ?2, ?3, ?4)
ON CONFLICT (policy, key, at) DO UPDATE SET n = n + excluded.n";

/// The live events of one key at one instant, and how to query them.
enum Live<'a> {
    Seed {
        conn: &'a Connection,
        user_id: i64,
        endpoint: Column<'a>,
        /// Events strictly later than this text are live ("" when all are).
        after: String,
    },
    Own {
        conn: &'a Connection,
        policy: &'a str,
        key: &'a [u8],
        /// Events strictly later than this instant (ns) are live.
        after: i64,
    },
}

impl<'a> Live<'a> {
    fn new(conn: &'a Connection, policy: &'a Policy, key: &'a Key, now: Timestamp) -> Live<'a> {
        let after = sliding_log::live_after(&policy.quota, now);
        match keys::place(policy) {
            Place::SeedEvents => {
                let (user_id, endpoint) = keys::event_key(key);
                Live::Seed {
                    conn,
                    user_id,
                    endpoint,
                    after: after.map(timefmt::nanos).unwrap_or_default(),
                }
            }
            _ => Live::Own {
                conn,
                policy: &policy.name,
                key: key.encoded(),
                after: after.map_or(-1, |t| int(t.as_unix_nanos())),
            },
        }
    }

    fn summary(&self) -> rusqlite::Result<LiveLog> {
        match self {
            Live::Seed {
                conn,
                user_id,
                endpoint,
                after,
            } => {
                let (count, newest): (i64, Option<String>) = conn
                    .prepare_cached(SEED_LIVE)?
                    .query_row(params![user_id, endpoint, after], |r| {
                        Ok((r.get(0)?, r.get(1)?))
                    })?;
                Ok(LiveLog {
                    count: uint(count),
                    newest: newest.as_deref().and_then(timefmt::parse),
                })
            }
            Live::Own {
                conn,
                policy,
                key,
                after,
            } => {
                let (count, newest): (i64, Option<i64>) = conn
                    .prepare_cached(OWN_LIVE)?
                    .query_row(params![policy, key, after], |r| Ok((r.get(0)?, r.get(1)?)))?;
                Ok(LiveLog {
                    count: uint(count),
                    newest: newest.map(|at| Timestamp::from_unix_nanos(uint(at))),
                })
            }
        }
    }

    /// The `j`-th oldest live event (1-based).
    fn nth_oldest(&self, j: u64) -> rusqlite::Result<Timestamp> {
        match self {
            Live::Seed {
                conn,
                user_id,
                endpoint,
                after,
            } => {
                let text: String = conn.prepare_cached(SEED_NTH_OLDEST)?.query_row(
                    params![user_id, endpoint, after, int(j.saturating_sub(1))],
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
            Live::Own {
                conn,
                policy,
                key,
                after,
            } => {
                let at: i64 = conn
                    .prepare_cached(OWN_NTH_OLDEST)?
                    .query_row(params![policy, key, after, int(j)], |r| r.get(0))?;
                Ok(Timestamp::from_unix_nanos(uint(at)))
            }
        }
    }

    /// Records `attempt.cost` events at `attempt.now`.
    fn record(&self, attempt: Attempt) -> rusqlite::Result<()> {
        match self {
            Live::Seed {
                conn,
                user_id,
                endpoint,
                ..
            } => {
                let created_at = timefmt::nanos(attempt.now);
                let mut insert = conn.prepare_cached(SEED_INSERT)?;
                for _ in 0..attempt.cost.get() {
                    insert.execute(params![user_id, endpoint, created_at])?;
                }
            }
            Live::Own {
                conn, policy, key, ..
            } => {
                conn.prepare_cached(OWN_INSERT)?.execute(params![
                    policy,
                    key,
                    int(attempt.now.as_unix_nanos()),
                    int(attempt.cost.get())
                ])?;
            }
        }
        Ok(())
    }
}

/// The decision for `attempt`; when it is allowed, [`record`] records it
/// once the batch is settled.
pub(crate) fn decide(
    conn: &Connection,
    policy: &Policy,
    key: &Key,
    attempt: Attempt,
) -> rusqlite::Result<Decision> {
    let live = Live::new(conn, policy, key, attempt.now);
    sliding_log::decide(
        live.summary()?,
        |j| live.nth_oldest(j),
        &policy.quota,
        attempt,
    )
}

/// Records `attempt.cost` events at `attempt.now`.
pub(crate) fn record(
    conn: &Connection,
    policy: &Policy,
    key: &Key,
    attempt: Attempt,
) -> rusqlite::Result<()> {
    Live::new(conn, policy, key, attempt.now).record(attempt)
}

pub(crate) fn status(
    conn: &Connection,
    policy: &Policy,
    key: &Key,
    now: Timestamp,
) -> rusqlite::Result<Decision> {
    let live = Live::new(conn, policy, key, now);
    sliding_log::status(live.summary()?, |j| live.nth_oldest(j), &policy.quota, now)
}

/// Deletes the selected keys' events; returns how many keys had a live
/// event at `now`.
pub(crate) fn reset(
    conn: &Connection,
    policy: &Policy,
    keys: KeyMatch<'_>,
    now: Timestamp,
) -> rusqlite::Result<u64> {
    let after = sliding_log::live_after(&policy.quota, now);
    if keys::place(policy) != Place::SeedEvents {
        let selected = keys::own_selection(keys);
        let (name, encoded, len) = keys::own_params(policy, keys);
        let after = after.map_or(-1, |t| int(t.as_unix_nanos()));
        let live: i64 = conn.query_row(
            &format!("SELECT COUNT(DISTINCT key) FROM rw_sliding_log WHERE {selected} AND at > ?4"),
            params![name, encoded, len, after],
            |r| r.get(0),
        )?;
        conn.execute(
            &format!("DELETE FROM rw_sliding_log WHERE {selected}"),
            params![name, encoded, len],
        )?;
        return Ok(uint(live));
    }
    let after = after.map(timefmt::nanos).unwrap_or_default();
    let key = keys.key();
    let encoded = key.encoded();
    let len = encoded.len() as i64;
    // Parameters: ?1 the live cutoff (the count only), ?2 a user id, ?3
    // and ?4 the encoding's length and bytes, ?5 an endpoint. Keys of
    // another shape than seed B's (user id, endpoint) are stored with
    // user_id 0 and their encoding as the endpoint BLOB.
    let (exact_user, exact_endpoint) = keys::event_key(key);
    let (selected, user_id, endpoint) = match (keys, keys::event_prefix(key)) {
        (KeyMatch::Exactly(_), _) => (
            "user_id = ?2 AND endpoint = ?5",
            exact_user,
            Some(exact_endpoint),
        ),
        (KeyMatch::StartingWith(_), EventPrefix::User(id, None)) => (
            "(user_id = ?2 OR (user_id = 0 AND substr(endpoint, 1, ?3) = ?4))",
            id,
            None,
        ),
        (KeyMatch::StartingWith(_), EventPrefix::User(id, Some(endpoint))) => (
            "((user_id = ?2 AND endpoint = ?5) OR (user_id = 0 AND substr(endpoint, 1, ?3) = ?4))",
            id,
            Some(endpoint),
        ),
        (KeyMatch::StartingWith(_), EventPrefix::Encoded) => {
            ("(user_id = 0 AND substr(endpoint, 1, ?3) = ?4)", 0, None)
        }
    };
    let mut values: Vec<&dyn ToSql> = vec![&after, &user_id, &len, &encoded];
    if let Some(endpoint) = &endpoint {
        values.push(endpoint);
    }
    let live: i64 = conn.query_row(
        &format!(
            "SELECT COUNT(*) FROM (SELECT DISTINCT user_id, endpoint FROM rate_events
             WHERE {selected} AND created_at > ?1)"
        ),
        values.as_slice(),
        |r| r.get(0),
    )?;
    conn.execute(
        &format!("DELETE FROM rate_events WHERE {selected}"),
        values.as_slice(),
    )?;
    Ok(uint(live))
}

/// Deletes events that have left every window of at most `longest_window`
/// (`now − e >= W`), in both tables, at most `rows` rows of each.
pub(crate) fn prune(
    conn: &Connection,
    longest_window: Duration,
    now: Timestamp,
    rows: u64,
) -> rusqlite::Result<u64> {
    let w = ratewarden_core::clock::duration_nanos(longest_window);
    let Some(cutoff) = now.as_unix_nanos().checked_sub(w) else {
        return Ok(0);
    };
    let own = prune::some(
        conn,
        "rw_sliding_log",
        "policy, key, at",
        "at <= ?1",
        int(cutoff),
        rows,
    )?;
    let cutoff = timefmt::nanos(Timestamp::from_unix_nanos(cutoff));
    let seed = prune::some(
        conn,
        "rate_events",
        "rowid",
        "created_at <= ?1",
        cutoff,
        rows,
    )?;
    Ok(own + seed)
}
