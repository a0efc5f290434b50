//! The one thread that owns the SQLite connection.
//!
//! Why one thread: SQLite serialises writers anyway, and a single owner
//! never waits on its own busy handler. Async callers send a [`Job`] and
//! await the reply, so no tokio worker thread ever blocks on SQLite.
//!
//! Why batches: the worker takes every job already queued (up to
//! `batch_max`) into one `BEGIN IMMEDIATE` transaction and gives each job
//! its own savepoint. Each decision stays atomic and isolated (jobs run one
//! after another inside the transaction; a failing job rolls back only its
//! savepoint), while one commit serves many requests. Replies are sent only
//! after the commit, so a caller never hears of a decision that was not
//! stored.

use std::time::{Duration, Instant};

/// How long the worker polls for more jobs before it sleeps.
const SPIN_BEFORE_SLEEP: Duration = Duration::from_micros(50);

use ratewarden_core::{Algorithm, Decision, Key, KeyMatch, Policy, Timestamp};
use rusqlite::{Connection, TransactionBehavior};
use tokio::sync::{mpsc, oneshot};

use crate::batch::{self, OwnedBatch};
use crate::counters::{self, Table};
use crate::lock::FileLock;
use crate::{fixed_window, sliding_log};

/// An owned [`KeyMatch`].
#[derive(Debug)]
pub(crate) enum OwnedKeyMatch {
    Exactly(Key),
    StartingWith(Key),
}

impl OwnedKeyMatch {
    pub(crate) fn new(keys: KeyMatch<'_>) -> OwnedKeyMatch {
        match keys {
            KeyMatch::Exactly(k) => OwnedKeyMatch::Exactly(k.clone()),
            KeyMatch::StartingWith(k) => OwnedKeyMatch::StartingWith(k.clone()),
        }
    }

    fn as_ref(&self) -> KeyMatch<'_> {
        match self {
            OwnedKeyMatch::Exactly(k) => KeyMatch::Exactly(k),
            OwnedKeyMatch::StartingWith(k) => KeyMatch::StartingWith(k),
        }
    }
}

/// What the worker is asked to do. Data only, so a failed batch could be
/// retried and so the worker is the only code that touches SQL.
#[derive(Debug)]
pub(crate) enum Op {
    Acquire(OwnedBatch),
    Status {
        policy: Policy,
        key: Key,
        now: Timestamp,
    },
    Reset {
        policy: Policy,
        keys: OwnedKeyMatch,
        now: Timestamp,
    },
    Prune {
        algorithm: Algorithm,
        longest_window: Duration,
        now: Timestamp,
    },
}

/// What an [`Op`] answers.
#[derive(Debug)]
pub(crate) enum Reply {
    Decisions(Vec<Decision>),
    Decision(Decision),
    Deleted(u64),
}

pub(crate) enum Job {
    Run {
        op: Op,
        reply: oneshot::Sender<rusqlite::Result<Reply>>,
    },
    /// Finish what is queued, checkpoint the WAL, close the connection.
    Close,
}

pub(crate) struct Worker {
    pub conn: Connection,
    pub jobs: mpsc::Receiver<Job>,
    pub batch_max: usize,
    pub audit_retention: Duration,
    /// Released only after `conn` is closed (and declared after it, so a
    /// worker dropped without running drops it after the connection too).
    pub file_lock: FileLock,
}

impl Worker {
    pub(crate) fn run(mut self) {
        let mut batch = Vec::with_capacity(self.batch_max);
        while let Some(first) = self.next_job() {
            let mut closing = false;
            for job in
                std::iter::once(first).chain(std::iter::from_fn(|| self.jobs.try_recv().ok()))
            {
                match job {
                    Job::Run { op, reply } => batch.push((op, reply)),
                    Job::Close => closing = true,
                }
                if closing || batch.len() >= self.batch_max {
                    break;
                }
            }
            self.run_batch(&mut batch);
            if closing {
                break;
            }
        }
        // Drain jobs sent after Close: they get "closed" by dropping their reply.
        self.jobs.close();
        if let Err(e) = self.conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)") {
            tracing::warn!(error = %e, "WAL checkpoint at close failed");
        }
        if let Err((conn, e)) = self.conn.close() {
            tracing::warn!(error = %e, "closing the SQLite database failed");
            drop(conn);
        }
        // After the connection: see `lock.rs`.
        drop(self.file_lock);
    }

    /// The next job: polls (yielding the CPU) for a short while before
    /// sleeping, because under load the next job arrives within
    /// microseconds and a futex sleep + wake per batch costs more than the
    /// batch itself. Idle, it sleeps.
    fn next_job(&mut self) -> Option<Job> {
        let deadline = Instant::now() + SPIN_BEFORE_SLEEP;
        loop {
            match self.jobs.try_recv() {
                Ok(job) => return Some(job),
                Err(mpsc::error::TryRecvError::Disconnected) => return None,
                Err(mpsc::error::TryRecvError::Empty) if Instant::now() < deadline => {
                    std::thread::yield_now()
                }
                Err(mpsc::error::TryRecvError::Empty) => return self.jobs.blocking_recv(),
            }
        }
    }

    fn run_batch(&mut self, batch: &mut Vec<(Op, oneshot::Sender<rusqlite::Result<Reply>>)>) {
        let audit_retention = self.audit_retention;
        let mut results = Vec::with_capacity(batch.len());
        let committed = (|| -> rusqlite::Result<()> {
            let tx = self
                .conn
                .transaction_with_behavior(TransactionBehavior::Immediate)?;
            // Savepoint statements are prepared once and cached: they run
            // twice per operation.
            for (op, _) in batch.iter() {
                tx.prepare_cached("SAVEPOINT op")?.execute([])?;
                let result = execute(&tx, op, audit_retention);
                if result.is_err() {
                    tx.prepare_cached("ROLLBACK TO op")?.execute([])?;
                }
                tx.prepare_cached("RELEASE op")?.execute([])?;
                results.push(result);
            }
            tx.commit()
        })();
        // The caller may have given up (timeout, cancelled request): ignore send errors.
        match committed {
            Ok(()) => {
                for ((_, reply), result) in batch.drain(..).zip(results) {
                    let _ = reply.send(result);
                }
            }
            Err(e) => {
                for (_, reply) in batch.drain(..) {
                    let _ = reply.send(Err(clone_error(&e)));
                }
            }
        }
    }
}

fn execute(conn: &Connection, op: &Op, audit_retention: Duration) -> rusqlite::Result<Reply> {
    Ok(match op {
        Op::Acquire(b) => Reply::Decisions(batch::acquire(conn, b)?),
        Op::Status { policy, key, now } => Reply::Decision(batch::status(conn, policy, key, *now)?),
        Op::Reset { policy, keys, now } => {
            let (keys, now) = (keys.as_ref(), *now);
            Reply::Deleted(match policy.algorithm {
                Algorithm::FixedWindow => fixed_window::reset(conn, policy, keys, now)?,
                Algorithm::SlidingLog => sliding_log::reset(conn, policy, keys, now)?,
                Algorithm::SlidingWindow => {
                    counters::reset(conn, Table::SlidingWindow, policy, keys, now)?
                }
                Algorithm::Gcra => counters::reset(conn, Table::Gcra, policy, keys, now)?,
            })
        }
        Op::Prune {
            algorithm,
            longest_window,
            now,
        } => Reply::Deleted(match algorithm {
            Algorithm::FixedWindow => {
                fixed_window::prune(conn, *longest_window, *now)?
                    + fixed_window::prune_audit(conn, audit_retention, *now)?
            }
            Algorithm::SlidingLog => sliding_log::prune(conn, *longest_window, *now)?,
            Algorithm::SlidingWindow => counters::prune(conn, Table::SlidingWindow, *now)?,
            Algorithm::Gcra => counters::prune(conn, Table::Gcra, *now)?,
        }),
    })
}

/// rusqlite errors are not `Clone`; a failed commit answers every job of
/// the batch with the same failure.
fn clone_error(e: &rusqlite::Error) -> rusqlite::Error {
    match e {
        rusqlite::Error::SqliteFailure(code, msg) => {
            rusqlite::Error::SqliteFailure(*code, msg.clone())
        }
        other => rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_ERROR),
            Some(other.to_string()),
        ),
    }
}
