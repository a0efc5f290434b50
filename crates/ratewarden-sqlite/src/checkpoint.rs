//! WAL checkpoints off the writer: a thread with a connection of its own
//! copies the write-ahead log back into the database file while the worker
//! goes on deciding.
//!
//! Why: with SQLite's default, the connection that commits runs a
//! checkpoint itself whenever the WAL reaches 1,000 frames — copying them
//! and `fsync`ing the WAL and the database file — and every decision waits
//! for the one writer meanwhile. With 10,000 random keys nearly every
//! decision dirties a page of its own, so that is a checkpoint every few
//! hundred milliseconds under load, and on a busy disk its `fsync` took up
//! to 199 ms: p99s of 230–775 ms (BENCHMARKS.md, run 3).
//!
//! How: the worker wakes this thread after each commit; the thread runs a
//! `PASSIVE` checkpoint (it never blocks the writer nor waits for it) at
//! most every [`MIN_GAP`], and sleeps without a timeout while nothing is
//! committed. A passive checkpoint copies only what was committed when it
//! began, and the WAL starts over from its beginning only once everything
//! is copied, which a writer that never pauses never lets it reach: so the
//! worker's own checkpoint stays, as SQLite's `wal_autocheckpoint`, at
//! [`WRITER_CHECKPOINT_FRAMES`] by default (`SqliteOptions::wal_autocheckpoint`).
//! When it runs, this thread has already copied nearly everything, and it
//! lets the WAL start over: the WAL stays within about that many pages.
//!
//! That checkpoint is a pause of every decision whatever it copies: it
//! `fsync`s the WAL and the database file, and the writer's first commit
//! into the restarted WAL `fsync`s the WAL's new header (three `fsync`s,
//! 5–25 ms on a busy disk; `perf trace` in BENCHMARKS.md). Any steady
//! load, not only a saturating one, reaches the limit: at 6,700 decisions
//! a second the background pass never finds a moment without a new
//! commit either. So the limit sets how often decisions pause: at 10,000
//! pages (40 MB) `/rate/check` on 10,000 users paused 3.5 times a second
//! and its p99 was 4.6 times the memory store's; at 50,000 (200 MB) it is
//! 1.6–1.7 times (BENCHMARKS.md, "The writer's own checkpoint").
//!
//! That checkpoint also `fsync`s the database file, and a passive pass
//! that never catches up with the writer never does (SQLite syncs the file
//! only once a checkpoint has copied the whole WAL): every page the
//! background passes copied since the last such checkpoint was still
//! waiting to be written to disk, and the writer's `fsync` waited for all
//! of them, 14–31 ms on a VM's disk about once a second under
//! `/rate/check` on 10,000 users, whose index pages are spread over the
//! file (`perf trace`; its p99 15–21 ms against the memory store's 4 ms).
//! So this thread also flushes the database file itself (`fdatasync`,
//! through the lock's descriptor of it: `lock.rs`) each time it has
//! copied [`FLUSH_FRAMES`] more frames into it: the writer's `fsync` then
//! finds at most that much left (5–8 ms; p99 3.7–4.3 ms; BENCHMARKS.md,
//! "The writer's wait for the database file").
//! PostgreSQL's checkpointer spreads its writes to disk for the same
//! reason (`checkpoint_flush_after`).
//!
//! Nothing about durability changes: commits are what makes a decision
//! durable, and checkpoints are crash-safe by SQLite's design (a `kill -9`
//! mid-copy leaves the WAL to be copied again). Several processes on one
//! file each run such a thread; one checkpoint runs at a time, and a
//! passive one that finds another running simply returns.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use rusqlite::Connection;

use crate::lock::FileSync;

/// The shortest time between two background checkpoints.
pub(crate) const MIN_GAP: Duration = Duration::from_millis(5);

/// How many frames this thread copies into the database file before it
/// flushes the file: 8 MiB of 4 KiB pages.
pub(crate) const FLUSH_FRAMES: u64 = 2_048;

/// The WAL size, in frames (pages), at which the worker checkpoints
/// itself by default (SQLite's `wal_autocheckpoint`; SQLite's own default
/// is 1,000): about 200 MB of 4 KiB pages.
pub(crate) const WRITER_CHECKPOINT_FRAMES: u32 = 50_000;

/// The background checkpointer. Dropping it ends the thread (after the
/// checkpoint it may be running) and waits until its connection is closed.
pub(crate) struct Checkpointer {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Checkpointer {
    /// Starts the thread on `conn` (a connection of its own to the store's
    /// file, in WAL mode), flushing the file through `file`.
    pub(crate) fn start(conn: Connection, file: FileSync) -> std::io::Result<Checkpointer> {
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("ratewarden-sqlite-checkpoint".into())
            .spawn(move || run(&conn, &file, &stopping))?;
        Ok(Checkpointer {
            stop,
            thread: Some(thread),
        })
    }

    /// Something was committed: a checkpoint may be due.
    pub(crate) fn committed(&self) {
        if let Some(thread) = &self.thread {
            thread.thread().unpark();
        }
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(thread) = self.thread.take() {
            thread.thread().unpark();
            let _ = thread.join();
        }
    }
}

fn run(conn: &Connection, file: &FileSync, stop: &AtomicBool) {
    let mut copies = Copies::default();
    while !stop.load(Ordering::Acquire) {
        std::thread::park();
        if stop.load(Ordering::Acquire) {
            break;
        }
        // Busy (another checkpoint, or a writer restarting the WAL) is
        // not an error for a passive checkpoint: the next wake tries again.
        match conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| r.get::<_, i64>(2)) {
            Ok(copied) if copies.saw(copied) => {
                // A failed flush leaves the writer's checkpoint more to do,
                // and that checkpoint reports its own failure.
                if let Err(e) = file.sync_data() {
                    tracing::debug!(error = %e, "flushing the database file failed");
                }
            }
            Ok(_) => {}
            Err(e) => tracing::debug!(error = %e, "background WAL checkpoint failed"),
        }
        std::thread::sleep(MIN_GAP);
    }
}

/// The frames copied into the database file since it was last flushed.
#[derive(Debug, Default)]
struct Copies {
    unflushed: u64,
    /// The WAL's frames copied as the last pass saw them.
    seen: u64,
}

impl Copies {
    /// A pass saw `copied` of the WAL's frames copied (the third column
    /// of `PRAGMA wal_checkpoint`: counted from the WAL's first frame, -1
    /// when another checkpoint was running). True when the file is due a
    /// flush, which is then counted as done.
    fn saw(&mut self, copied: i64) -> bool {
        let Ok(copied) = u64::try_from(copied) else {
            return false;
        };
        // Fewer than last time: the WAL started over meanwhile.
        self.unflushed += copied.checked_sub(self.seen).unwrap_or(copied);
        self.seen = copied;
        if self.unflushed < FLUSH_FRAMES {
            return false;
        }
        self.unflushed = 0;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`FLUSH_FRAMES`] as the pragma's column counts.
    const F: i64 = FLUSH_FRAMES as i64;

    #[test]
    fn the_file_is_flushed_after_every_flush_frames_copied() {
        let mut copies = Copies::default();
        assert!(!copies.saw(F - 1));
        assert!(copies.saw(F));
        // Counted again from the flush on, not from the WAL's start.
        assert!(!copies.saw(2 * F - 1));
        // Another checkpoint was running: nothing seen, nothing lost.
        assert!(!copies.saw(-1));
        assert!(copies.saw(2 * F));
    }

    #[test]
    fn a_wal_that_started_over_counts_its_copies_from_its_first_frame() {
        let mut copies = Copies::default();
        assert!(!copies.saw(F / 2));
        // The WAL started over: 10 frames of the new one copied, on top.
        assert!(!copies.saw(10));
        assert!(!copies.saw(F - F / 2 - 1));
        assert!(copies.saw(F - F / 2));
    }
}
