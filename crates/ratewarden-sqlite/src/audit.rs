//! The audit log's sampling (`api_calls`, seed A: one row per allowed
//! request by default) and its count of rows written.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

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
}

impl AuditLog {
    pub(crate) fn new(sample: u64, written: Arc<AtomicU64>) -> AuditLog {
        AuditLog {
            sample,
            seen: 0,
            pending: 0,
            written,
        }
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

    /// The transaction committed: its rows count.
    pub(crate) fn committed(&mut self) {
        self.written.fetch_add(self.pending, Ordering::Relaxed);
        self.pending = 0;
    }

    /// The transaction was rolled back: its rows were never written.
    pub(crate) fn rolled_back(&mut self) {
        self.pending = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_in_n_and_only_committed_rows_count() {
        let written = Arc::new(AtomicU64::new(0));
        let mut every = AuditLog::new(1, Arc::clone(&written));
        assert!((0..5).all(|_| every.take()));
        every.committed();
        assert_eq!(written.load(Ordering::Relaxed), 5);

        let mut third = AuditLog::new(3, Arc::clone(&written));
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

        let mut off = AuditLog::new(0, written);
        assert!((0..5).all(|_| !off.take()));
    }
}
