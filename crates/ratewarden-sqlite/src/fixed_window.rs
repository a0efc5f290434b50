//! Fixed window: the `ping` policy on `rate_limit_windows` (seed A), every
//! other policy on `rw_fixed_window`.
//!
//! A decision reads the key's count, runs the reference algorithm and, once
//! the batch is settled, writes: on the seed table with seed A's upsert,
//! `INSERT … ON CONFLICT … DO UPDATE SET count = count + ?`, inside the
//! worker's `BEGIN IMMEDIATE` transaction, so the read and the increment
//! are one atomic step. (Seed A's own order, increment first and read the
//! count back with `RETURNING`, gives the same answers but costs more:
//! SQLite buffers `RETURNING` rows in a temporary table;
//! docs/design/sqlite-write-path.md#read-then-upsert.) `rw_fixed_window`
//! keeps one row per (policy, key): the current window's index and count.

use std::time::Duration;

use ratewarden_core::algorithm::fixed_window::{self, FixedWindowState};
use ratewarden_core::{Attempt, Decision, Key, KeyMatch, Policy, Quota, Timestamp};
use rusqlite::{Connection, OptionalExtension, ToSql, params};

use crate::counters::{int, uint};
use crate::keys::{self, Column, Place};
use crate::prune;
use crate::timefmt;

/// Saturates at `i64::MAX` (`ratewarden_core::quota::MAX_COUNT`): SQLite
/// would turn an overflowing integer sum into a float.
const SEED_UPSERT: &str = "
INSERT INTO rate_limit_windows (key, window_start, count) VALUES (?1, ?2, ?3)
ON CONFLICT (key, window_start) DO UPDATE SET count =
    CASE WHEN count > 9223372036854775807 - excluded.count THEN 9223372036854775807
         ELSE count + excluded.count END";

const SEED_READ: &str = "SELECT count FROM rate_limit_windows WHERE key = ?1 AND window_start = ?2";

const OWN_READ: &str = "SELECT window, count FROM rw_fixed_window WHERE policy = ?1 AND key = ?2";

const OWN_WRITE: &str = "
INSERT INTO rw_fixed_window (policy, key, window, count, expires) VALUES (?1, ?2, ?3, ?4, ?5)
ON CONFLICT (policy, key) DO UPDATE SET window = excluded.window, count = excluded.count,
    expires = excluded.expires";

const AUDIT: &str = "INSERT INTO api_calls (key, path, called_at) VALUES (?1, ?2, ?3)";

/// The key's state at `now`: its count in the window of `now`.
fn read(
    conn: &Connection,
    policy: &Policy,
    key: &Key,
    now: Timestamp,
) -> rusqlite::Result<Option<FixedWindowState>> {
    let quota = &policy.quota;
    let k = fixed_window::window_index(quota, now);
    match keys::place(policy) {
        Place::SeedWindows => {
            let start = seed_start(quota, k);
            let count: Option<i64> = conn
                .prepare_cached(SEED_READ)?
                .query_row(params![keys::window_key(key), start], |r| r.get(0))
                .optional()?;
            Ok(count.map(|c| FixedWindowState {
                window: k,
                count: uint(c),
            }))
        }
        _ => conn
            .prepare_cached(OWN_READ)?
            .query_row(params![&*policy.name, key.encoded()], |r| {
                Ok(FixedWindowState {
                    window: uint(r.get(0)?),
                    count: uint(r.get(1)?),
                })
            })
            .optional(),
    }
}

fn seed_start(quota: &Quota, k: u64) -> String {
    timefmt::window_start(fixed_window::window_start(quota, k))
}

/// The decision for `attempt` and the state to write once the batch is
/// settled (`None`: nothing).
pub(crate) fn decide(
    conn: &Connection,
    policy: &Policy,
    key: &Key,
    attempt: Attempt,
) -> rusqlite::Result<(Decision, Option<FixedWindowState>)> {
    let state = read(conn, policy, key, attempt.now)?;
    Ok(fixed_window::decide(state, &policy.quota, attempt))
}

/// Writes `next`, the state [`decide`] returned; with `audit` (the
/// request path), one `api_calls` row in the same transaction.
pub(crate) fn write(
    conn: &Connection,
    policy: &Policy,
    key: &Key,
    attempt: Attempt,
    next: FixedWindowState,
    audit: Option<&str>,
) -> rusqlite::Result<()> {
    let quota = &policy.quota;
    match keys::place(policy) {
        Place::SeedWindows => {
            let column = keys::window_key(key);
            let start = seed_start(quota, next.window);
            conn.prepare_cached(SEED_UPSERT)?.execute(params![
                column,
                start,
                int(attempt.cost.get())
            ])?;
            if let Some(path) = audit {
                conn.prepare_cached(AUDIT)?.execute(params![
                    column,
                    path,
                    timefmt::nanos(attempt.now)
                ])?;
            }
        }
        _ => {
            let expires = next
                .window
                .saturating_add(1)
                .saturating_mul(quota.window_nanos());
            conn.prepare_cached(OWN_WRITE)?.execute(params![
                &*policy.name,
                key.encoded(),
                int(next.window),
                int(next.count),
                int(expires)
            ])?;
        }
    }
    Ok(())
}

pub(crate) fn status(
    conn: &Connection,
    policy: &Policy,
    key: &Key,
    now: Timestamp,
) -> rusqlite::Result<Decision> {
    let state = read(conn, policy, key, now)?;
    Ok(fixed_window::status(state, &policy.quota, now))
}

/// Deletes the selected keys' windows; returns how many keys had a
/// non-zero count in the window of `now`.
pub(crate) fn reset(
    conn: &Connection,
    policy: &Policy,
    keys: KeyMatch<'_>,
    now: Timestamp,
) -> rusqlite::Result<u64> {
    let k = fixed_window::window_index(&policy.quota, now);
    if keys::place(policy) == Place::SeedWindows {
        let start = seed_start(&policy.quota, k);
        let key = keys.key();
        let column: Column<'_> = keys::window_key(key);
        let (encoded, len) = (key.encoded(), key.encoded().len() as i64);
        // ?1 is the window start, counted but not needed to delete. A
        // one-part UTF-8 key is TEXT; other keys, and the longer keys a
        // prefix selects, are encoded BLOBs.
        let (selected, values): (&str, &[&dyn ToSql]) = match keys {
            KeyMatch::Exactly(_) => ("key = ?2", &[&start, &column]),
            KeyMatch::StartingWith(_) => (
                "(key = ?2 OR (typeof(key) = 'blob' AND substr(key, 1, ?3) = ?4))",
                &[&start, &column, &len, &encoded],
            ),
        };
        let live: i64 = conn.query_row(
            &format!(
                "SELECT COUNT(DISTINCT key) FROM rate_limit_windows
                 WHERE {selected} AND window_start = ?1 AND count > 0"
            ),
            values,
            |r| r.get(0),
        )?;
        conn.execute(
            &format!("DELETE FROM rate_limit_windows WHERE {selected}"),
            values,
        )?;
        return Ok(uint(live));
    }
    let selected = keys::own_selection(keys);
    let (name, encoded, len) = keys::own_params(policy, keys);
    let live: i64 = conn.query_row(
        &format!(
            "SELECT COUNT(*) FROM rw_fixed_window WHERE {selected} AND window = ?4 AND count > 0"
        ),
        params![name, encoded, len, int(k)],
        |r| r.get(0),
    )?;
    conn.execute(
        &format!("DELETE FROM rw_fixed_window WHERE {selected}"),
        params![name, encoded, len],
    )?;
    Ok(uint(live))
}

/// Deletes seed windows that started more than two `longest_window`s ago
/// (seed A), plus one second: a window start written with a fraction sorts
/// before the whole-second text of the same second, so the cutoff is kept
/// a second further back than needed. Own windows know their end. At
/// most `rows` rows of each table.
pub(crate) fn prune(
    conn: &Connection,
    longest_window: Duration,
    now: Timestamp,
    rows: u64,
) -> rusqlite::Result<u64> {
    let own = prune::some(
        conn,
        "rw_fixed_window",
        "policy, key",
        "expires <= ?1",
        int(now.as_unix_nanos()),
        rows,
    )?;
    let two_windows = longest_window
        .saturating_mul(2)
        .saturating_add(Duration::from_secs(1));
    let Some(cutoff) = now
        .as_unix_nanos()
        .checked_sub(ratewarden_core::clock::duration_nanos(two_windows))
    else {
        return Ok(own);
    };
    let cutoff = timefmt::seconds(Timestamp::from_unix_nanos(cutoff));
    let seed = prune::some(
        conn,
        "rate_limit_windows",
        "key, window_start",
        "window_start < ?1",
        cutoff,
        rows,
    )?;
    Ok(own + seed)
}
