//! Pruning in bounded steps: each prune statement deletes at most
//! [`CHUNK`] rows, and the worker runs a prune as a series of such steps,
//! one transaction each, with the decisions queued meanwhile in between
//! (`worker.rs`). One `DELETE` of everything due could hold the one writer
//! for a second: a burst of 180,000 sliding-log events a minute earlier
//! stalled every decision for 0.6–1 s (BENCHMARKS.md).

use rusqlite::{Connection, Params};

/// The most rows one prune statement deletes.
pub(crate) const CHUNK: u64 = 2_000;

/// Deletes at most [`CHUNK`] rows of `table` that satisfy `condition`
/// (over `params`); `key` names the table's primary key columns (`rowid`
/// for a rowid table). Returns how many it deleted.
pub(crate) fn some(
    conn: &Connection,
    table: &str,
    key: &str,
    condition: &str,
    params: impl Params,
) -> rusqlite::Result<u64> {
    let sql = format!(
        "DELETE FROM {table} WHERE ({key}) IN
         (SELECT {key} FROM {table} WHERE {condition} LIMIT {CHUNK})"
    );
    Ok(conn.prepare_cached(&sql)?.execute(params)? as u64)
}
