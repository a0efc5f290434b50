//! The sliding window counter and GCRA on tables of their own (the seeds
//! have none for them), one row per (policy, key). Keys are stored as
//! their [`Key::encoded`] BLOB, so they never collide; times are INTEGER
//! nanoseconds since the epoch. A decision reads the state and runs the
//! reference algorithm; once the batch is settled the next state is
//! written, inside the worker's `BEGIN IMMEDIATE` transaction.

use ratewarden_core::algorithm::gcra::{self, GcraState};
use ratewarden_core::algorithm::sliding_window::{self, SlidingWindowState};
use ratewarden_core::{Attempt, Decision, Key, KeyMatch, Policy, Timestamp};
use rusqlite::{Connection, OptionalExtension, params};

use crate::keys;

/// Saturates an instant or count into SQLite's signed 64-bit integers.
pub(crate) fn int(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// A stored integer as a count or instant (negative ones, which ratewarden
/// never writes, as 0).
pub(crate) fn uint(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

fn read_window(
    conn: &Connection,
    policy: &Policy,
    key: &Key,
) -> rusqlite::Result<Option<SlidingWindowState>> {
    conn.prepare_cached(
        "SELECT window, curr, prev FROM rw_sliding_window WHERE policy = ?1 AND key = ?2",
    )?
    .query_row(params![&*policy.name, key.encoded()], |r| {
        Ok(SlidingWindowState {
            window: uint(r.get(0)?),
            curr: uint(r.get(1)?),
            prev: uint(r.get(2)?),
        })
    })
    .optional()
}

/// The sliding window decision and the state to write once settled.
pub(crate) fn sliding_window_decide(
    conn: &Connection,
    policy: &Policy,
    key: &Key,
    attempt: Attempt,
) -> rusqlite::Result<(Decision, Option<SlidingWindowState>)> {
    let state = read_window(conn, policy, key)?;
    Ok(sliding_window::decide(state, &policy.quota, attempt))
}

pub(crate) fn sliding_window_write(
    conn: &Connection,
    policy: &Policy,
    key: &Key,
    s: SlidingWindowState,
) -> rusqlite::Result<()> {
    let expires = s
        .window
        .saturating_add(2)
        .saturating_mul(policy.quota.window_nanos());
    conn.prepare_cached(
        "INSERT INTO rw_sliding_window (policy, key, window, curr, prev, expires)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)
         ON CONFLICT (policy, key) DO UPDATE SET window = excluded.window,
             curr = excluded.curr, prev = excluded.prev, expires = excluded.expires",
    )?
    .execute(params![
        &*policy.name,
        key.encoded(),
        int(s.window),
        int(s.curr),
        int(s.prev),
        int(expires)
    ])?;
    Ok(())
}

pub(crate) fn sliding_window_status(
    conn: &Connection,
    policy: &Policy,
    key: &Key,
    now: Timestamp,
) -> rusqlite::Result<Decision> {
    Ok(sliding_window::status(
        read_window(conn, policy, key)?,
        &policy.quota,
        now,
    ))
}

fn read_tat(conn: &Connection, policy: &Policy, key: &Key) -> rusqlite::Result<Option<GcraState>> {
    conn.prepare_cached("SELECT tat FROM rw_gcra WHERE policy = ?1 AND key = ?2")?
        .query_row(params![&*policy.name, key.encoded()], |r| {
            Ok(GcraState {
                tat: uint(r.get(0)?),
            })
        })
        .optional()
}

/// The GCRA decision and the state to write once settled.
pub(crate) fn gcra_decide(
    conn: &Connection,
    policy: &Policy,
    key: &Key,
    attempt: Attempt,
) -> rusqlite::Result<(Decision, Option<GcraState>)> {
    let state = read_tat(conn, policy, key)?;
    Ok(gcra::decide(state, &policy.quota, attempt))
}

pub(crate) fn gcra_write(
    conn: &Connection,
    policy: &Policy,
    key: &Key,
    s: GcraState,
) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "INSERT INTO rw_gcra (policy, key, tat) VALUES (?1, ?2, ?3)
         ON CONFLICT (policy, key) DO UPDATE SET tat = excluded.tat",
    )?
    .execute(params![&*policy.name, key.encoded(), int(s.tat)])?;
    Ok(())
}

pub(crate) fn gcra_status(
    conn: &Connection,
    policy: &Policy,
    key: &Key,
    now: Timestamp,
) -> rusqlite::Result<Decision> {
    Ok(gcra::status(
        read_tat(conn, policy, key)?,
        &policy.quota,
        now,
    ))
}

/// Deletes the selected keys' rows from `table`; returns how many of them
/// still held usage at `now`.
pub(crate) fn reset(
    conn: &Connection,
    table: Table,
    policy: &Policy,
    keys: KeyMatch<'_>,
    now: Timestamp,
) -> rusqlite::Result<u64> {
    let selected = keys::own_selection(keys);
    let (name, encoded, len) = keys::own_params(policy, keys);
    let (columns, name_of_table) = match table {
        Table::SlidingWindow => ("window, curr, prev", "rw_sliding_window"),
        Table::Gcra => ("tat, 0, 0", "rw_gcra"),
    };
    let mut live = 0;
    {
        let mut rows = conn.prepare(&format!(
            "SELECT {columns} FROM {name_of_table} WHERE {selected}"
        ))?;
        let mut rows = rows.query(params![name, encoded, len])?;
        while let Some(row) = rows.next()? {
            let (a, b, c): (i64, i64, i64) = (row.get(0)?, row.get(1)?, row.get(2)?);
            let in_use = match table {
                Table::SlidingWindow => {
                    let state = SlidingWindowState {
                        window: uint(a),
                        curr: uint(b),
                        prev: uint(c),
                    };
                    sliding_window::in_use(state, &policy.quota, now)
                }
                Table::Gcra => gcra::in_use(GcraState { tat: uint(a) }, now),
            };
            live += u64::from(in_use);
        }
    }
    conn.execute(
        &format!("DELETE FROM {name_of_table} WHERE {selected}"),
        params![name, encoded, len],
    )?;
    Ok(live)
}

/// Deletes rows whose state equals no state at `now`, at most `rows` of
/// them: every row knows its own expiry, so no window length is needed.
pub(crate) fn prune(
    conn: &Connection,
    table: Table,
    now: Timestamp,
    rows: u64,
) -> rusqlite::Result<u64> {
    let (name, condition) = match table {
        Table::SlidingWindow => ("rw_sliding_window", "expires <= ?1"),
        Table::Gcra => ("rw_gcra", "tat <= ?1"),
    };
    crate::prune::some(
        conn,
        name,
        "policy, key",
        condition,
        int(now.as_unix_nanos()),
        rows,
    )
}

/// The two tables of this module.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Table {
    SlidingWindow,
    Gcra,
}
