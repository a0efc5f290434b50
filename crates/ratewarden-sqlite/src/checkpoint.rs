//! WAL checkpoints off the writer: a thread with a connection of its own
//! copies the write-ahead log back into the database file while the worker
//! goes on deciding.
//!
//! Why: with SQLite's default, the connection that commits runs a
//! checkpoint itself whenever the WAL reaches 1,000 frames — copying them
//! and `fsync`ing the WAL and the database file — and every decision waits
//! for the one writer meanwhile. With random keys nearly every decision
//! dirties a page of its own, so under load that is a checkpoint every few
//! hundred milliseconds, each an `fsync` that a busy disk can make long
//! (docs/design/sqlite-checkpoints.md#checkpoints-off-the-writer).
//!
//! How: the worker wakes this thread after each commit; the thread runs a
//! `PASSIVE` checkpoint (it never blocks the writer nor waits for it) at
//! most every [`MIN_GAP`], and sleeps without a timeout while nothing is
//! committed. A passive checkpoint copies only what was committed when it
//! began, and the WAL starts over from its beginning only once everything
//! is copied, which a writer that never pauses never lets it reach: so the
//! worker checkpoints itself, as SQLite's `wal_autocheckpoint` would, once
//! the WAL holds its limit of frames ([`WRITER_CHECKPOINT_FRAMES`] by
//! default, `SqliteOptions::wal_autocheckpoint`). When it runs, this
//! thread has already copied nearly everything, and it lets the WAL start
//! over.
//!
//! That checkpoint is passive too, and only one checkpoint runs at a
//! time: when the worker's attempt meets this thread's pass, it does
//! nothing and the WAL grows on. How often that happens depends on the
//! machine, not on the code: on a busy one, where this thread runs late
//! and long, the WAL can grow to many times its limit. So the limit is
//! also a hard one, [`HARD_LIMIT_FACTOR`] times the setting
//! ([`WalLimit`]): there the worker waits for its turn (this thread's
//! pass, if one runs, ends first; the two take turns on one mutex) and
//! runs a `RESTART` checkpoint, which copies what is left and waits, up
//! to the busy timeout, for other processes' readers and writers, so that
//! the next commit starts the WAL over. The `-wal` file thus never grows
//! past twice the limit plus one transaction, however starved this thread
//! is; only a reader of another process that keeps one snapshot open past
//! the busy timeout can hold it longer (SQLite cannot start over a WAL
//! that a reader still uses), which is logged.
//!
//! The worker's checkpoint is a pause of every decision whatever it
//! copies: it `fsync`s the WAL and the database file, and the writer's
//! first commit into the restarted WAL `fsync`s the WAL's new header.
//! Any steady load, not only a saturating one, reaches the limit: the
//! background pass never finds a moment without a new commit either. So
//! the limit sets how often decisions pause, and its price is disk
//! (docs/design/sqlite-checkpoints.md#the-writers-own-checkpoint).
//!
//! That checkpoint also `fsync`s the database file, and a passive pass
//! that never catches up with the writer never does (SQLite syncs the file
//! only once a checkpoint has copied the whole WAL): every page the
//! background passes copied since the last such checkpoint would still be
//! waiting to be written to disk, and the writer's `fsync` would wait for
//! all of them. So this thread also flushes the database file itself
//! (`fdatasync`, through the lock's descriptor of it: `lock.rs`) each
//! time it has copied [`FLUSH_FRAMES`] more frames into it, and the
//! writer's `fsync` finds at most that much left
//! (docs/design/sqlite-checkpoints.md#flushing-the-database-file).
//! PostgreSQL's checkpointer spreads its writes to disk for the same
//! reason (`checkpoint_flush_after`).
//!
//! Nothing about durability changes: commits are what makes a decision
//! durable, and checkpoints are crash-safe by SQLite's design (a `kill -9`
//! mid-copy leaves the WAL to be copied again). Several processes on one
//! file each run such a thread; one checkpoint runs at a time, and a
//! passive one that finds another running simply returns.

use std::cell::Cell;
use std::ffi::c_int;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rusqlite::Connection;
use rusqlite::hooks::Wal;

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

/// The hard limit of the WAL, as a multiple of the worker's own limit:
/// there the worker waits for its turn to checkpoint ([`WalLimit`]).
pub(crate) const HARD_LIMIT_FACTOR: u32 = 2;

/// Whose turn it is to checkpoint: the background thread holds it for
/// each pass, the worker for its own checkpoints (it waits for it only
/// at the hard limit).
pub(crate) type Turn = Arc<Mutex<()>>;

thread_local! {
    /// The WAL's length, in frames, after the last commit on this thread
    /// (the worker's: its connection is the only one that writes), as
    /// SQLite's WAL hook reports it; 0 once read.
    static WAL_FRAMES: Cell<u32> = const { Cell::new(0) };
}

/// SQLite's WAL hook: notes the WAL's length after a commit.
fn note_frames(_: &Wal, frames: c_int) -> rusqlite::Result<()> {
    WAL_FRAMES.set(u32::try_from(frames).unwrap_or(0));
    Ok(())
}

/// The worker's own checkpoints, after each commit: at the limit a
/// passive one unless the background pass is running (what SQLite's
/// `wal_autocheckpoint` does, which the WAL hook this installs replaces),
/// at [`HARD_LIMIT_FACTOR`] times the limit one that waits for its turn
/// (see the module docs).
#[derive(Debug)]
pub(crate) struct WalLimit {
    limit_frames: u32,
    hard_frames: u32,
    turn: Turn,
    /// How long a hard-limit checkpoint keeps trying while another
    /// process's checkpoint, reader or writer is in its way.
    patience: Duration,
    /// Hard-limit checkpoints so far (each one a wait for the turn).
    forced: Arc<AtomicU64>,
    /// Whether the last hard-limit checkpoint could not finish (logged
    /// once, and once more when one does).
    blocked: bool,
}

impl WalLimit {
    /// Watches the WAL of `conn` (the worker's connection; its commits
    /// must run on the thread that then calls [`WalLimit::committed`]):
    /// the worker checkpoints at `limit_frames` (at least 1) and takes
    /// its `turn` at [`HARD_LIMIT_FACTOR`] times that.
    pub(crate) fn watch(
        conn: &Connection,
        limit_frames: u32,
        turn: Turn,
        patience: Duration,
    ) -> WalLimit {
        conn.wal_hook(Some(note_frames));
        let limit_frames = limit_frames.max(1);
        WalLimit {
            limit_frames,
            hard_frames: limit_frames.saturating_mul(HARD_LIMIT_FACTOR),
            turn,
            patience,
            forced: Arc::default(),
            blocked: false,
        }
    }

    /// How many hard-limit checkpoints the worker has run (or is waiting
    /// to run).
    #[cfg(test)]
    pub(crate) fn forced(&self) -> Arc<AtomicU64> {
        Arc::clone(&self.forced)
    }

    /// A transaction of `conn` committed: checkpoints when the WAL is at
    /// its limit.
    pub(crate) fn committed(&mut self, conn: &Connection) {
        let frames = WAL_FRAMES.replace(0);
        if frames < self.limit_frames {
            return;
        }
        if frames < self.hard_frames {
            // While the background pass runs, a checkpoint of ours would
            // find SQLite's checkpoint lock taken and do nothing.
            if let Ok(_turn) = self.turn.try_lock()
                && let Err(e) = checkpoint(conn, "PASSIVE")
            {
                tracing::debug!(error = %e, "the writer's WAL checkpoint failed");
            }
            return;
        }
        self.forced.fetch_add(1, Ordering::Relaxed);
        let turn = Arc::clone(&self.turn);
        let _turn = turn.lock().unwrap_or_else(PoisonError::into_inner);
        self.restart(conn, frames);
    }

    /// A `RESTART` checkpoint, tried again while another process's
    /// checkpoint holds SQLite's checkpoint lock (which, unlike readers
    /// and writers, it does not wait for), for [`WalLimit::patience`].
    fn restart(&mut self, conn: &Connection, frames: u32) {
        let deadline = Instant::now() + self.patience;
        loop {
            match checkpoint(conn, "RESTART") {
                Ok(true) => {
                    if self.blocked {
                        tracing::info!("the WAL is checkpointed again and starts over");
                    }
                    self.blocked = false;
                    return;
                }
                Ok(false) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(1));
                }
                Ok(false) => {
                    if !self.blocked {
                        tracing::warn!(
                            frames,
                            "the WAL is past twice its limit and cannot start over: another \
                             process holds a read transaction or a checkpoint on the database; \
                             it grows until that ends"
                        );
                    }
                    self.blocked = true;
                    return;
                }
                Err(e) => {
                    tracing::warn!(error = %e, frames, "the writer's WAL checkpoint failed");
                    return;
                }
            }
        }
    }
}

/// `PRAGMA wal_checkpoint(mode)`: true when it finished, false when a
/// checkpoint lock, reader or writer stopped it (SQLITE_BUSY).
fn checkpoint(conn: &Connection, mode: &str) -> rusqlite::Result<bool> {
    let busy: i64 = conn.query_row(&format!("PRAGMA wal_checkpoint({mode})"), [], |r| r.get(0))?;
    Ok(busy == 0)
}

/// The background checkpointer. Dropping it ends the thread (after the
/// checkpoint it may be running) and waits until its connection is closed.
pub(crate) struct Checkpointer {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Checkpointer {
    /// Starts the thread on `conn` (a connection of its own to the store's
    /// file, in WAL mode), flushing the file through `file`, each pass in
    /// its `turn`.
    pub(crate) fn start(
        conn: Connection,
        file: FileSync,
        turn: Turn,
    ) -> std::io::Result<Checkpointer> {
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("ratewarden-sqlite-checkpoint".into())
            .spawn(move || run(&conn, &file, &turn, &stopping))?;
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

fn run(conn: &Connection, file: &FileSync, turn: &Mutex<()>, stop: &AtomicBool) {
    let mut copies = Copies::default();
    while !stop.load(Ordering::Acquire) {
        std::thread::park();
        if stop.load(Ordering::Acquire) {
            break;
        }
        // Busy (another checkpoint, or a writer restarting the WAL) is
        // not an error for a passive checkpoint: the next wake tries again.
        let pass = {
            let _turn = turn.lock().unwrap_or_else(PoisonError::into_inner);
            conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| r.get::<_, i64>(2))
        };
        match pass {
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

    /// The WAL's length in frames of 4 KiB pages, from its file's size
    /// (which keeps its largest).
    fn wal_frames(path: &std::path::Path) -> u64 {
        let mut wal = path.as_os_str().to_owned();
        wal.push("-wal");
        let bytes = std::fs::metadata(wal).map_or(0, |m| m.len());
        bytes.saturating_sub(32) / (24 + 4096)
    }

    /// The background pass holds the turn for as long as it likes (a
    /// starved thread): the writer goes on to twice its limit, then waits
    /// for the turn, and once it has it the WAL starts over; its file
    /// never grew past twice the limit and one transaction.
    #[test]
    fn past_twice_its_limit_the_writer_waits_for_its_turn_and_the_wal_starts_over() {
        const LIMIT: u32 = 100;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wal.db");
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch(
            "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;
             CREATE TABLE t (x BLOB);",
        )
        .unwrap();
        let turn = Turn::default();
        let mut limit = WalLimit::watch(&conn, LIMIT, Arc::clone(&turn), Duration::from_secs(5));
        let forced = limit.forced();
        let pass = turn.lock().unwrap();
        let writer = std::thread::spawn(move || {
            // A row of most of a page per commit: a frame or two each.
            for _ in 0..10 * LIMIT {
                conn.execute("INSERT INTO t VALUES (randomblob(3000))", [])
                    .unwrap();
                limit.committed(&conn);
            }
            limit
        });
        let deadline = Instant::now() + Duration::from_secs(60);
        while forced.load(Ordering::Relaxed) == 0 {
            assert!(
                Instant::now() < deadline,
                "the writer never reached its hard limit"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        // It is waiting for the turn (or about to): nothing more is
        // committed until the pass ends.
        let waiting = wal_frames(&path);
        assert!(
            (u64::from(2 * LIMIT)..=u64::from(2 * LIMIT) + 2).contains(&waiting),
            "{waiting} frames when the writer stopped for its turn"
        );
        drop(pass);
        let limit = writer.join().unwrap();
        let most = wal_frames(&path);
        assert!(
            most <= u64::from(2 * LIMIT) + 2,
            "the WAL grew to {most} frames"
        );
        // With no pass beside it any more, its checkpoints at the limit
        // find the turn free and let the WAL start over.
        assert_eq!(forced.load(Ordering::Relaxed), 1);
        drop(limit);
    }

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
