//! Pruning in short steps: each prune statement deletes at most
//! [`StepSize::rows`] rows, and the worker runs a prune as a series of
//! such steps, one transaction each, with the decisions queued meanwhile
//! in between (`worker.rs`). One `DELETE` of everything due could hold the
//! one writer, and so every decision, for a second
//! (docs/design/pruning.md#short-steps).
//!
//! The step's size follows its cost: a row of the seed's `rate_events`
//! (three B-trees, one of them in key order) costs several times a GCRA
//! row, and a cold page cache several times a warm one, so a fixed number
//! of rows is either too many for a short step or too few for an
//! efficient one. After every step the size is scaled so that the next
//! takes about [`STEP_TARGET`].

use std::time::Duration;

use rusqlite::{Connection, ToSql};

/// How long one prune step should take: the longest a queued decision
/// waits for a prune (a step is never interrupted).
pub(crate) const STEP_TARGET: Duration = Duration::from_millis(1);

/// The fewest and the most rows one prune statement deletes.
const MIN_ROWS: u64 = 16;
const MAX_ROWS: u64 = 4_000;

/// The rows per prune statement, adapted to [`STEP_TARGET`].
#[derive(Debug)]
pub(crate) struct StepSize {
    rows: u64,
}

impl StepSize {
    pub(crate) fn new() -> StepSize {
        StepSize { rows: 256 }
    }

    /// The most rows the next prune statement deletes.
    pub(crate) fn rows(&self) -> u64 {
        self.rows
    }

    /// The last step took `took` and deleted `deleted` rows: scales the
    /// size towards [`STEP_TARGET`]. Only a step that deleted its whole
    /// size may grow it, at most doubling it at once: a step that found
    /// fewer rows was quick for that reason, not because rows are cheap
    /// (growing on the empty last step of every prune would leave the
    /// size at its ceiling, and the next large prune's first step long).
    pub(crate) fn took(&mut self, took: Duration, deleted: u64) {
        let scaled = u128::from(self.rows) * STEP_TARGET.as_nanos() / took.as_nanos().max(1);
        let ceiling = if deleted >= self.rows {
            MAX_ROWS.min(self.rows.saturating_mul(2))
        } else {
            self.rows
        };
        self.rows = u64::try_from(scaled)
            .unwrap_or(u64::MAX)
            .clamp(MIN_ROWS, ceiling);
    }
}

/// Deletes at most `rows` rows of `table` that satisfy `condition` (on
/// its one parameter `?1`, bound to `param`); `key` names the table's
/// primary key columns (`rowid` for a rowid table). Returns how many it
/// deleted.
pub(crate) fn some(
    conn: &Connection,
    table: &str,
    key: &str,
    condition: &str,
    param: impl ToSql,
    rows: u64,
) -> rusqlite::Result<u64> {
    let sql = format!(
        "DELETE FROM {table} WHERE ({key}) IN
         (SELECT {key} FROM {table} WHERE {condition} LIMIT ?2)"
    );
    let rows = i64::try_from(rows).unwrap_or(i64::MAX);
    Ok(conn.prepare_cached(&sql)?.execute((param, rows))? as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_step_size_follows_the_cost_of_a_step() {
        let mut size = StepSize::new();
        // Ten times too slow: a tenth of the rows.
        size.took(STEP_TARGET * 10, 256);
        assert_eq!(size.rows(), 25);
        // Never below the floor, however slow.
        size.took(Duration::from_secs(1), 25);
        assert_eq!(size.rows(), MIN_ROWS);
        // Quick full steps: at most doubling each time, up to the ceiling.
        size.took(Duration::from_nanos(1), MIN_ROWS);
        assert_eq!(size.rows(), 2 * MIN_ROWS);
        for _ in 0..20 {
            size.took(Duration::ZERO, size.rows());
        }
        assert_eq!(size.rows(), MAX_ROWS);
        // On target: unchanged.
        size.took(STEP_TARGET, MAX_ROWS);
        assert_eq!(size.rows(), MAX_ROWS);
    }

    /// A quick step that found fewer rows than its size (the empty last
    /// step of every prune, a prune with little due) never grows it, and
    /// a slow one still shrinks it.
    #[test]
    fn only_a_full_step_grows_the_size() {
        let mut size = StepSize::new();
        for deleted in [0, 10, 255] {
            size.took(Duration::from_nanos(1), deleted);
            assert_eq!(size.rows(), 256, "after a step that deleted {deleted}");
        }
        size.took(STEP_TARGET * 2, 3);
        assert_eq!(size.rows(), 128);
    }
}
