//! The one thread that owns the SQLite connection.
//!
//! Why one thread: SQLite serialises writers anyway, and a single owner
//! never waits on its own busy handler. Async callers send a [`Job`] and
//! await the reply, so no tokio worker thread ever blocks on SQLite.
//!
//! Why batches: the worker takes every job already queued (up to
//! `batch_max`) into one `BEGIN IMMEDIATE` transaction. Each decision
//! stays atomic and isolated (jobs run one after another inside the
//! transaction; should one fail, the batch runs again with a savepoint per
//! job, so a failing job rolls back only its own writes), while one commit
//! serves many requests. Replies are sent only after the commit, so a
//! caller never hears of a decision that was not stored.

use std::time::{Duration, Instant};

use ratewarden_core::{Algorithm, Decision, Key, KeyMatch, Policy, Timestamp};
use rusqlite::Connection;
use tokio::sync::{mpsc, oneshot};

use crate::audit::{self, AuditLog};
use crate::batch::{self, OwnedBatch};
use crate::checkpoint::{Checkpointer, WalLimit};
use crate::counters::{self, Table};
use crate::lock::FileLock;
use crate::prune::StepSize;
use crate::{fixed_window, sliding_log};

/// How long the worker polls for more jobs before it sleeps.
const SPIN_BEFORE_SLEEP: Duration = Duration::from_micros(50);

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
    /// The most audit rows kept.
    pub audit_max_rows: u64,
    pub audit_log: AuditLog,
    /// The rows per prune statement (`prune.rs`).
    pub prune_step: StepSize,
    /// This thread's own checkpoints, after its commits (`checkpoint.rs`).
    pub wal: WalLimit,
    /// Checkpoints off this thread (`checkpoint.rs`); stopped, and its
    /// connection closed, before `file_lock` is released.
    pub checkpointer: Option<Checkpointer>,
    /// Released only after `conn` is closed (and declared after it, so a
    /// worker dropped without running drops it after the connection too).
    pub file_lock: FileLock,
}

impl Worker {
    pub(crate) fn run(mut self) {
        let mut batch = Vec::with_capacity(self.batch_max);
        let mut prunes = Vec::new();
        let mut closing = false;
        while !closing && let Some(first) = self.next_job() {
            closing = self.take_queued(Some(first), &mut batch, &mut prunes);
            self.run_batch(&mut batch);
            for (op, reply) in prunes.drain(..) {
                closing |= self.prune_in_steps(op, reply, &mut batch);
            }
        }
        // Drain jobs sent after Close: they get "closed" by dropping their reply.
        self.jobs.close();
        // Its connection closed first, so the last checkpoint finds no other.
        drop(self.checkpointer.take());
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

    /// Moves `first` and the jobs queued behind it (up to `batch_max`
    /// decisions) into `batch`, prunes into `prunes`; true when one of
    /// them is [`Job::Close`].
    fn take_queued(
        &mut self,
        first: Option<Job>,
        batch: &mut Vec<(Op, oneshot::Sender<rusqlite::Result<Reply>>)>,
        prunes: &mut Vec<(Op, oneshot::Sender<rusqlite::Result<Reply>>)>,
    ) -> bool {
        let queued = std::iter::from_fn(|| self.jobs.try_recv().ok());
        for job in first.into_iter().chain(queued) {
            match job {
                Job::Run {
                    op: op @ Op::Prune { .. },
                    reply,
                } => prunes.push((op, reply)),
                Job::Run { op, reply } => batch.push((op, reply)),
                Job::Close => return true,
            }
            if batch.len() >= self.batch_max {
                break;
            }
        }
        false
    }

    /// Runs a prune as steps of about [`crate::prune::STEP_TARGET`] each
    /// (one transaction), until a step deletes nothing. Between two steps
    /// the decisions queued meanwhile run, batch after batch, until none
    /// is waiting or they have had as long as the step took: a queued
    /// decision waits for at most one step, and under a load that never
    /// lets the queue empty the prune still gets half of the writer, as
    /// fast as such a load inserts (a sliding-log event costs about as
    /// much to insert as to delete: the same three B-trees), and
    /// finishes. Answers the total. True when a
    /// [`Job::Close`] arrived meanwhile (the prune is finished first).
    fn prune_in_steps(
        &mut self,
        op: Op,
        reply: oneshot::Sender<rusqlite::Result<Reply>>,
        batch: &mut Vec<(Op, oneshot::Sender<rusqlite::Result<Reply>>)>,
    ) -> bool {
        let mut closing = false;
        let mut later = Vec::new();
        let mut total = 0;
        let answer = loop {
            let mut results = Vec::with_capacity(1);
            let started = Instant::now();
            let step = self.transaction([&op], &mut results, false);
            let took = started.elapsed();
            let deleted = match (step, results.pop()) {
                (Ok(()), Some(Ok(Reply::Deleted(n)))) => n,
                (Ok(()), Some(other)) => break other,
                (Ok(()), None) => 0,
                (Err(e), _) => break Err(e.into_error()),
            };
            self.prune_step.took(took, deleted);
            if deleted == 0 {
                break Ok(Reply::Deleted(total));
            }
            total += deleted;
            let until = Instant::now() + took;
            while !closing {
                closing = self.take_queued(None, batch, &mut later);
                if batch.is_empty() {
                    break;
                }
                self.run_batch(batch);
                if Instant::now() >= until {
                    break;
                }
            }
        };
        let _ = reply.send(answer);
        for (op, reply) in later {
            closing |= self.prune_in_steps(op, reply, batch);
        }
        closing
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

    /// Runs `batch` in one transaction and answers every job after the
    /// commit. Optimistic first: the jobs run one after another with no
    /// savepoints (two statements fewer per job). If one fails, that
    /// transaction is rolled back whole and the batch runs again with a
    /// savepoint per job, so a failing job rolls back only its own writes
    /// and every other job keeps its answer, exactly as if each had its
    /// own transaction.
    fn run_batch(&mut self, batch: &mut Vec<(Op, oneshot::Sender<rusqlite::Result<Reply>>)>) {
        if batch.is_empty() {
            return;
        }
        let ops = || batch.iter().map(|(op, _)| op);
        let mut results = Vec::with_capacity(batch.len());
        let mut committed = self.transaction(ops(), &mut results, false);
        if let Err(Failure::Job(_)) = committed
            && batch.len() > 1
        {
            results.clear();
            committed = self.transaction(ops(), &mut results, true);
        }
        let committed = committed.map_err(Failure::into_error);
        // The caller may have given up (timeout, cancelled request): ignore send errors.
        match committed {
            Err(e) if batch.len() == 1 => {
                // A job alone: its own error, as it was.
                let (_, reply) = batch.remove(0);
                let _ = reply.send(Err(e));
            }
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

    /// One `BEGIN IMMEDIATE` … `COMMIT` over `batch`, each job's answer
    /// pushed to `results`. Without `savepoints`, the first failing job
    /// fails the whole transaction (it is rolled back); with them, a
    /// failing job rolls back to its savepoint and the others go on.
    fn transaction<'a>(
        &mut self,
        batch: impl IntoIterator<Item = &'a Op>,
        results: &mut Vec<rusqlite::Result<Reply>>,
        savepoints: bool,
    ) -> Result<(), Failure> {
        // Every statement here is prepared once and cached (rusqlite's
        // `Transaction` would prepare `BEGIN` and `COMMIT` anew each time).
        let (conn, audit_log) = (&self.conn, &mut self.audit_log);
        let limits = Limits {
            audit_retention: self.audit_retention,
            audit_max_rows: self.audit_max_rows,
            prune_rows: self.prune_step.rows(),
        };
        let begin = conn.prepare_cached("BEGIN IMMEDIATE")?.execute([]);
        begin.map_err(Failure::Transaction)?;
        let body = (|| {
            for op in batch {
                if !savepoints {
                    let reply = execute(conn, op, limits, audit_log).map_err(Failure::Job)?;
                    results.push(Ok(reply));
                    continue;
                }
                conn.prepare_cached("SAVEPOINT op")?.execute([])?;
                let mark = audit_log.mark();
                let result = execute(conn, op, limits, audit_log);
                if result.is_err() {
                    conn.prepare_cached("ROLLBACK TO op")?.execute([])?;
                    audit_log.rolled_back_to(mark);
                }
                conn.prepare_cached("RELEASE op")?.execute([])?;
                results.push(result);
            }
            conn.prepare_cached("COMMIT")?.execute([])?;
            Ok(())
        })();
        if body.is_err()
            && !conn.is_autocommit()
            && let Err(e) = conn.execute_batch("ROLLBACK")
        {
            tracing::warn!(error = %e, "rolling back a failed SQLite transaction failed");
        }
        if body.is_ok() {
            audit_log.committed();
            self.wal.committed(&self.conn);
            if let Some(checkpointer) = &self.checkpointer {
                checkpointer.committed();
            }
        } else {
            audit_log.rolled_back();
        }
        body
    }
}

/// Why a [`Worker::transaction`] did not commit.
enum Failure {
    /// A job failed (on the optimistic path, without savepoints).
    Job(rusqlite::Error),
    /// `BEGIN`, a savepoint statement or `COMMIT` failed.
    Transaction(rusqlite::Error),
}

impl Failure {
    fn into_error(self) -> rusqlite::Error {
        match self {
            Failure::Job(e) | Failure::Transaction(e) => e,
        }
    }
}

impl From<rusqlite::Error> for Failure {
    fn from(e: rusqlite::Error) -> Failure {
        Failure::Transaction(e)
    }
}

/// What [`execute`] needs of the worker's settings.
#[derive(Debug, Clone, Copy)]
struct Limits {
    /// How long audit rows are kept.
    audit_retention: Duration,
    /// The most audit rows kept.
    audit_max_rows: u64,
    /// The most rows a prune statement deletes.
    prune_rows: u64,
}

fn execute(
    conn: &Connection,
    op: &Op,
    limits: Limits,
    audit_log: &mut AuditLog,
) -> rusqlite::Result<Reply> {
    let Limits {
        audit_retention,
        audit_max_rows,
        prune_rows: rows,
    } = limits;
    Ok(match op {
        Op::Acquire(b) => Reply::Decisions(batch::acquire(conn, b, audit_log)?),
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
        } => {
            let state = match algorithm {
                Algorithm::FixedWindow => fixed_window::prune(conn, *longest_window, *now, rows)?,
                Algorithm::SlidingLog => sliding_log::prune(conn, *longest_window, *now, rows)?,
                Algorithm::SlidingWindow => {
                    counters::prune(conn, Table::SlidingWindow, *now, rows)?
                }
                Algorithm::Gcra => counters::prune(conn, Table::Gcra, *now, rows)?,
            };
            // With every algorithm's prune (`audit.rs` says why).
            let expired = audit::prune_expired(conn, audit_retention, *now, rows)?;
            let over = audit::prune_over(conn, audit_max_rows, rows)?;
            audit_log.pruned(expired, over);
            Reply::Deleted(state + expired + over)
        }
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

#[cfg(test)]
mod tests {
    use std::num::NonZeroU64;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};

    use ratewarden_core::{Algorithm, Quota};

    use super::*;
    use crate::batch::OwnedItem;

    /// Three jobs in one batch, the middle one failing after it wrote (a
    /// trigger refuses its audit row): the optimistic transaction fails,
    /// the batch runs again with savepoints, and only the failing job's
    /// writes are taken back; the others keep their answers and counts.
    #[test]
    fn a_failing_job_takes_back_only_its_own_writes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("batch.db");
        let opening = crate::lock::opening();
        let mut conn = Connection::open(&path).unwrap();
        crate::schema::migrate(&mut conn).unwrap();
        conn.execute_batch(
            "CREATE TRIGGER no_bob BEFORE INSERT ON api_calls WHEN NEW.key = 'bob'
             BEGIN SELECT RAISE(ABORT, 'no audit row for bob'); END;",
        )
        .unwrap();
        let (file_lock, locked) = opening.lock(&path, Duration::from_secs(1));
        locked.unwrap();
        let quota = Quota::new(10, Duration::from_secs(60)).unwrap();
        let ping = Policy::new("ping", Algorithm::FixedWindow, quota.counting_denied());
        let now = Timestamp::from_unix_secs(1_767_225_600);
        let (jobs, rx) = mpsc::channel(8);
        let mut answers = Vec::new();
        for name in ["alice", "bob", "carol"] {
            let (reply, answer) = oneshot::channel();
            let item = OwnedItem {
                policy: ping.clone(),
                key: Key::single(name).unwrap(),
                cost: NonZeroU64::MIN,
                audit_path: Some("/ping".into()),
            };
            let op = Op::Acquire(OwnedBatch {
                now,
                items: vec![item],
            });
            jobs.try_send(Job::Run { op, reply }).unwrap();
            answers.push(answer);
        }
        jobs.try_send(Job::Close).unwrap();
        let written = Arc::new(AtomicU64::new(0));
        let wal = WalLimit::watch(&conn, 1_000, Arc::default(), Duration::from_secs(1));
        let worker = Worker {
            conn,
            jobs: rx,
            batch_max: 256,
            audit_retention: Duration::from_secs(3600),
            audit_max_rows: 1_000,
            audit_log: AuditLog::new(1, 1_000, Arc::clone(&written), Arc::default()),
            prune_step: StepSize::new(),
            wal,
            checkpointer: None,
            file_lock,
        };
        worker.run();

        let answered: Vec<bool> = answers
            .into_iter()
            .map(|a| a.blocking_recv().unwrap().is_ok())
            .collect();
        assert_eq!(answered, [true, false, true]);
        assert_eq!(written.load(Ordering::Relaxed), 2, "committed rows only");
        let conn = Connection::open(&path).unwrap();
        let counts: Vec<(String, i64)> = conn
            .prepare("SELECT key, count FROM rate_limit_windows ORDER BY key")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        let expected = [("alice".to_owned(), 1), ("carol".to_owned(), 1)];
        assert_eq!(counts, expected, "bob's count went back with his job");
        let rows: i64 = conn
            .query_row("SELECT COUNT(*) FROM api_calls", [], |r| r.get(0))
            .unwrap();
        assert_eq!(rows, 2);
    }
}
