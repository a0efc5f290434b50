//! The sliding window counter and GCRA on tables of their own (the seeds
//! have none for them). Keys are stored as their [`Key::encoded`] BLOB, so
//! they never collide; times are INTEGER nanoseconds since the epoch. Each
//! operation reads the state, runs the reference algorithm and writes the
//! next state inside the worker's `BEGIN IMMEDIATE` transaction.

use ratewarden_core::algorithm::gcra::{self, GcraState};
use ratewarden_core::algorithm::sliding_window::{self, SlidingWindowState};
use ratewarden_core::{Acquire, Decision, Key, Policy, Timestamp};
use rusqlite::{Connection, OptionalExtension, params};

/// Saturates an instant or count into SQLite's signed 64-bit integers.
fn int(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn uint(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

fn read_window(conn: &Connection, key: &Key) -> rusqlite::Result<Option<SlidingWindowState>> {
    conn.prepare_cached("SELECT window, curr, prev FROM rw_sliding_window WHERE key = ?1")?
        .query_row([key.encoded()], |r| {
            Ok(SlidingWindowState {
                window: uint(r.get(0)?),
                curr: uint(r.get(1)?),
                prev: uint(r.get(2)?),
            })
        })
        .optional()
}

pub(crate) fn sliding_window_acquire(
    conn: &Connection,
    request: &Acquire<'_>,
) -> rusqlite::Result<Decision> {
    let quota = &request.policy.quota;
    let state = read_window(conn, request.key)?;
    let (decision, next) = sliding_window::decide(state, quota, request.attempt);
    if let Some(s) = next {
        let expires = s
            .window
            .saturating_add(2)
            .saturating_mul(quota.window_nanos());
        conn.prepare_cached(
            "INSERT INTO rw_sliding_window (key, window, curr, prev, expires) VALUES (?1, ?2, ?3, ?4, ?5)
             ON CONFLICT (key) DO UPDATE SET window = excluded.window, curr = excluded.curr,
                 prev = excluded.prev, expires = excluded.expires",
        )?
        .execute(params![request.key.encoded(), int(s.window), int(s.curr), int(s.prev), int(expires)])?;
    }
    Ok(decision)
}

pub(crate) fn sliding_window_status(
    conn: &Connection,
    policy: &Policy,
    key: &Key,
    now: Timestamp,
) -> rusqlite::Result<Decision> {
    Ok(sliding_window::status(
        read_window(conn, key)?,
        &policy.quota,
        now,
    ))
}

fn read_tat(conn: &Connection, key: &Key) -> rusqlite::Result<Option<GcraState>> {
    conn.prepare_cached("SELECT tat FROM rw_gcra WHERE key = ?1")?
        .query_row([key.encoded()], |r| {
            Ok(GcraState {
                tat: uint(r.get(0)?),
            })
        })
        .optional()
}

pub(crate) fn gcra_acquire(conn: &Connection, request: &Acquire<'_>) -> rusqlite::Result<Decision> {
    let state = read_tat(conn, request.key)?;
    let (decision, next) = gcra::decide(state, &request.policy.quota, request.attempt);
    if let Some(s) = next {
        conn.prepare_cached(
            "INSERT INTO rw_gcra (key, tat) VALUES (?1, ?2) ON CONFLICT (key) DO UPDATE SET tat = excluded.tat",
        )?
        .execute(params![request.key.encoded(), int(s.tat)])?;
    }
    Ok(decision)
}

pub(crate) fn gcra_status(
    conn: &Connection,
    policy: &Policy,
    key: &Key,
    now: Timestamp,
) -> rusqlite::Result<Decision> {
    Ok(gcra::status(read_tat(conn, key)?, &policy.quota, now))
}

/// Deletes the rows of every key starting with `prefix` from `table`
/// (`rw_sliding_window` or `rw_gcra`).
pub(crate) fn reset(conn: &Connection, table: Table, prefix: &Key) -> rusqlite::Result<u64> {
    let sql = match table {
        Table::SlidingWindow => "DELETE FROM rw_sliding_window WHERE substr(key, 1, ?1) = ?2",
        Table::Gcra => "DELETE FROM rw_gcra WHERE substr(key, 1, ?1) = ?2",
    };
    let encoded = prefix.encoded();
    Ok(conn.execute(sql, params![encoded.len() as i64, encoded])? as u64)
}

/// Deletes rows whose state equals no state at `now`: every row knows its
/// own expiry, so no window length is needed.
pub(crate) fn prune(conn: &Connection, table: Table, now: Timestamp) -> rusqlite::Result<u64> {
    let sql = match table {
        Table::SlidingWindow => "DELETE FROM rw_sliding_window WHERE expires <= ?1",
        Table::Gcra => "DELETE FROM rw_gcra WHERE tat <= ?1",
    };
    Ok(conn.execute(sql, [int(now.as_unix_nanos())])? as u64)
}

/// The two tables of this module.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Table {
    SlidingWindow,
    Gcra,
}
