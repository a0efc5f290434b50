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

/// The shortest time between two background checkpoints.
pub(crate) const MIN_GAP: Duration = Duration::from_millis(5);

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
    /// file, in WAL mode).
    pub(crate) fn start(conn: Connection) -> std::io::Result<Checkpointer> {
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("ratewarden-sqlite-checkpoint".into())
            .spawn(move || run(&conn, &stopping))?;
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

fn run(conn: &Connection, stop: &AtomicBool) {
    while !stop.load(Ordering::Acquire) {
        std::thread::park();
        if stop.load(Ordering::Acquire) {
            break;
        }
        // Busy (another checkpoint, or a writer restarting the WAL) is
        // not an error for a passive checkpoint: the next wake tries again.
        if let Err(e) = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(())) {
            tracing::debug!(error = %e, "background WAL checkpoint failed");
        }
        std::thread::sleep(MIN_GAP);
    }
}
