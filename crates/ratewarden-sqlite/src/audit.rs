//! The audit log (`api_calls`, seed A: one row per allowed request by
//! default): its sampling, its count of rows written, and its pruning,
//! by age (`--audit-retention`) and by size (`--audit-max-rows`, the
//! oldest rows first), with the count of rows pruned for each.
//!
//! Why a size bound beside the retention: the log grows with the allowed
//! requests, about 100 bytes a row, so a flood of them fills a disk long
//! before seven days pass, and then every decision fails. Its rows are
//! pruned on every prune of the store, whatever algorithm it is for, so
//! that a policy set without a fixed window still keeps the log in
//! bounds. `id` is the rowid, given in insertion order (the largest plus
//! one), so the rows past the bound are the smallest ids: one index seek
//! finds them.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use ratewarden_core::Timestamp;
use rusqlite::Connection;

use crate::{prune, timefmt};

/// The shortest time between two log lines about pruning for size.
const SIZE_LOG_EVERY: Duration = Duration::from_secs(60);

/// Audit rows pruned since the store was opened, by reason; shared with
/// the store ([`crate::SqliteStore`]'s `audit_rows_pruned`).
#[derive(Debug, Default)]
pub(crate) struct Pruned {
    /// Past the retention.
    pub(crate) retention: AtomicU64,
    /// Past the size bound.
    pub(crate) size: AtomicU64,
}

/// Deletes audit rows older than `retention`, at most `rows` of them.
pub(crate) fn prune_expired(
    conn: &Connection,
    retention: Duration,
    now: Timestamp,
    rows: u64,
) -> rusqlite::Result<u64> {
    if now.as_unix_nanos() < ratewarden_core::clock::duration_nanos(retention) {
        return Ok(0);
    }
    let cutoff = timefmt::nanos(now.saturating_sub(retention));
    prune::some(conn, "api_calls", "rowid", "called_at < ?1", cutoff, rows)
}

/// Deletes the oldest audit rows past the newest `max_rows`, at most
/// `rows` of them.
pub(crate) fn prune_over(conn: &Connection, max_rows: u64, rows: u64) -> rusqlite::Result<u64> {
    let max_rows = i64::try_from(max_rows).unwrap_or(i64::MAX);
    let rows = i64::try_from(rows).unwrap_or(i64::MAX);
    let deleted = conn
        .prepare_cached(
            "DELETE FROM api_calls WHERE rowid IN
             (SELECT rowid FROM api_calls
              WHERE rowid <= (SELECT max(rowid) FROM api_calls) - ?1
              ORDER BY rowid LIMIT ?2)",
        )?
        .execute((max_rows, rows))?;
    Ok(deleted as u64)
}

/// Which allowed audited requests get an `api_calls` row, and how many
/// rows were committed. Owned by the worker; the count is shared with the
/// store for [`crate::SqliteStore::audit_rows`].
#[derive(Debug)]
pub(crate) struct AuditLog {
    /// One row per `sample` allowed audited requests; 0: none.
    sample: u64,
    /// Allowed audited requests seen so far (the sampling counter).
    seen: u64,
    /// Rows written in the transaction under way.
    pending: u64,
    /// Rows committed since the store was opened.
    written: Arc<AtomicU64>,
    /// Rows pruned in the transaction under way: (retention, size).
    pending_pruned: (u64, u64),
    /// Rows pruned and committed since the store was opened.
    pruned: Arc<Pruned>,
    /// The most rows kept, for the log line.
    max_rows: u64,
    /// When the last line about pruning for size was logged, and the
    /// rows pruned for size since.
    size_logged: Option<Instant>,
    size_unlogged: u64,
}

impl AuditLog {
    /// `sample` as [`crate::SqliteOptions::audit_sample`], `max_rows` as
    /// [`crate::SqliteOptions::audit_max_rows`]; the counts go to
    /// `written` and `pruned`.
    pub(crate) fn new(
        sample: u64,
        max_rows: u64,
        written: Arc<AtomicU64>,
        pruned: Arc<Pruned>,
    ) -> AuditLog {
        AuditLog {
            sample,
            seen: 0,
            pending: 0,
            written,
            pending_pruned: (0, 0),
            pruned,
            max_rows,
            size_logged: None,
            size_unlogged: 0,
        }
    }

    /// The transaction under way pruned `expired` rows past the retention
    /// and `over` past the size bound.
    pub(crate) fn pruned(&mut self, expired: u64, over: u64) {
        self.pending_pruned.0 += expired;
        self.pending_pruned.1 += over;
    }

    /// Whether this allowed audited request gets its row: the first of
    /// every `sample`.
    pub(crate) fn take(&mut self) -> bool {
        if self.sample == 0 {
            return false;
        }
        let keep = self.seen.is_multiple_of(self.sample);
        self.seen = self.seen.wrapping_add(1);
        self.pending += u64::from(keep);
        keep
    }

    /// A mark to go back to with [`AuditLog::rolled_back_to`] (a job's
    /// savepoint).
    pub(crate) fn mark(&self) -> u64 {
        self.pending
    }

    /// The job since `mark` was rolled back to its savepoint: its rows
    /// were never written.
    pub(crate) fn rolled_back_to(&mut self, mark: u64) {
        self.pending = mark;
    }

    /// The transaction committed: its rows count, and its prunes; rows
    /// pruned for size are logged (at WARN: the log keeps less than its
    /// retention), at most once every [`SIZE_LOG_EVERY`].
    pub(crate) fn committed(&mut self) {
        self.written.fetch_add(self.pending, Ordering::Relaxed);
        self.pending = 0;
        let (expired, over) = std::mem::take(&mut self.pending_pruned);
        if expired > 0 {
            self.pruned.retention.fetch_add(expired, Ordering::Relaxed);
        }
        if over > 0 {
            self.pruned.size.fetch_add(over, Ordering::Relaxed);
            self.size_unlogged += over;
        }
        let due = self
            .size_logged
            .is_none_or(|at| at.elapsed() >= SIZE_LOG_EVERY);
        if self.size_unlogged > 0 && due {
            tracing::warn!(
                max_rows = self.max_rows,
                pruned = self.size_unlogged,
                "the audit log is at its size bound (--audit-max-rows): its oldest rows are \
                 pruned before their retention ends"
            );
            self.size_logged = Some(Instant::now());
            self.size_unlogged = 0;
        }
    }

    /// The transaction was rolled back: its rows were never written, nor
    /// its prunes made.
    pub(crate) fn rolled_back(&mut self) {
        self.pending = 0;
        self.pending_pruned = (0, 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_in_n_and_only_committed_rows_count() {
        let written = Arc::new(AtomicU64::new(0));
        let log = |sample| AuditLog::new(sample, 100, Arc::clone(&written), Arc::default());
        let mut every = log(1);
        assert!((0..5).all(|_| every.take()));
        every.committed();
        assert_eq!(written.load(Ordering::Relaxed), 5);

        let mut third = log(3);
        let kept: Vec<bool> = (0..7).map(|_| third.take()).collect();
        assert_eq!(kept, [true, false, false, true, false, false, true]);
        third.rolled_back();
        third.committed();
        assert_eq!(
            written.load(Ordering::Relaxed),
            5,
            "rolled back rows never count"
        );
        assert!(!third.take() && !third.take(), "the 8th and 9th");
        let mark = third.mark();
        assert!(third.take(), "the 10th");
        third.rolled_back_to(mark);
        assert!(!third.take() && !third.take() && third.take(), "the 13th");
        third.committed();
        assert_eq!(
            written.load(Ordering::Relaxed),
            6,
            "the savepoint's row went back"
        );

        let mut off = log(0);
        assert!((0..5).all(|_| !off.take()));
    }
}

#[cfg(test)]
mod prune_tests {
    use super::*;

    #[test]
    fn prunes_count_only_once_committed() {
        let pruned = Arc::new(Pruned::default());
        let mut log = AuditLog::new(1, 10, Arc::default(), Arc::clone(&pruned));
        log.pruned(3, 4);
        log.rolled_back();
        log.committed();
        let counts = || {
            (
                pruned.retention.load(Ordering::Relaxed),
                pruned.size.load(Ordering::Relaxed),
            )
        };
        assert_eq!(counts(), (0, 0));
        log.pruned(3, 4);
        log.pruned(1, 0);
        log.committed();
        assert_eq!(counts(), (4, 4));
    }
}
