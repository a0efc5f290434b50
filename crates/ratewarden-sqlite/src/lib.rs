//! ratewarden's embedded SQLite store: zero setup, counters survive
//! restarts, the seeds' schema exactly (docs/semantics.md §6 and §8).
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use ratewarden_core::{Acquire, Algorithm, Batch, Key, Policy, Quota, Store, SystemClock, Clock};
//! use ratewarden_sqlite::{SqliteOptions, SqliteStore};
//! use std::time::Duration;
//!
//! let store = SqliteStore::open("ratewarden.db", SqliteOptions::default())?;
//! let policy = Policy::new("api", Algorithm::FixedWindow, Quota::new(3, Duration::from_secs(60))?);
//! let key = Key::single("alice")?;
//! let batch = Batch::one(SystemClock.now(), Acquire::one(&policy, &key));
//! let decisions = store.acquire(&batch).await?;
//! println!("allowed: {}", decisions[0].allowed());
//! store.close().await;
//! # Ok(()) }
//! ```
//!
//! # Consistency
//! One thread owns the one connection and runs every operation inside a
//! `BEGIN IMMEDIATE` transaction, so decisions of this process are
//! serialised: it never over-admits. A batch of checks is one operation:
//! all its reads, the all-or-nothing rule and all its writes happen inside
//! that transaction, and a failing operation takes back only its own
//! writes (`worker.rs`). Several processes on one file are
//! serialised by SQLite's write lock (WAL mode, busy timeout) and never
//! over-admit either; the busy timeout bounds how long one waits.
//!
//! # In use
//! While open, a store holds a shared advisory lock (`flock`) on its
//! database file, released at close or when the process ends; any number
//! of stores share it. [`SqliteStore::in_use`] tells whether any store
//! holds a file, so that a tool can refuse to change a running service's
//! counters (`ratewarden replay`). `lock.rs` says why this never disturbs
//! SQLite's own locks.
//!
//! # Layout
//! - `schema.rs`: the tables, indexes and `PRAGMA user_version`, and the
//!   read-only check that a file is new or ratewarden's before any write.
//! - `worker.rs`: the connection-owning thread, batching and savepoints.
//! - `batch.rs`: one batch of checks, all or nothing.
//! - `audit.rs`: the audit log's sampling, its count of rows, and its
//!   pruning by age and by size.
//! - `fixed_window.rs`, `sliding_log.rs`, `counters.rs` (sliding window
//!   counter, GCRA): read, write, status, reset and prune per algorithm.
//! - `prune.rs`: pruning in short steps (about 1 ms each: the rows per
//!   statement follow the cost of the last step).
//! - `keys.rs`: which table holds a policy's state (the seed policies keep
//!   the seeds' tables) and how keys map onto the key columns.
//! - `timefmt.rs`: the UTC ISO 8601 text of the time columns.
//! - `lock.rs`: the advisory lock that marks a file as in use.

mod audit;
mod batch;
mod checkpoint;
mod counters;
mod fixed_window;
mod keys;
mod lock;
mod prune;
mod schema;
mod sliding_log;
mod timefmt;
mod worker;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use async_trait::async_trait;
use ratewarden_core::{
    Algorithm, AuditPruned, Batch, Decision, Key, KeyMatch, Policy, Store, StoreError, Timestamp,
};
use rusqlite::{Connection, ErrorCode, OpenFlags};
use tokio::sync::{mpsc, oneshot};

use audit::AuditLog;
use batch::{OwnedBatch, OwnedItem};
use checkpoint::{Checkpointer, WalLimit};
use worker::{Job, Op, OwnedKeyMatch, Reply, Worker};

/// Settings of a [`SqliteStore`].
#[derive(Debug, Clone)]
pub struct SqliteOptions {
    /// How long to wait for another process's write lock before failing
    /// with [`StoreError::Unavailable`]. Default 5 seconds.
    pub busy_timeout: Duration,
    /// How long `api_calls` rows are kept; pruning deletes older ones.
    /// Default 7 days.
    pub audit_retention: Duration,
    /// The most `api_calls` rows kept: past it, the oldest are pruned
    /// (with every prune, beside the retention), counted by
    /// [`Store::audit_rows_pruned`]. Default 10,000,000 (about 1 GB);
    /// at least 1.
    pub audit_max_rows: u64,
    /// One `api_calls` row per this many allowed audited requests: 1 (the
    /// default) keeps every one, as seed A does; 0 keeps none. Sampling
    /// counts in this store's order of decisions.
    pub audit_sample: u64,
    /// Most operations committed in one transaction. Default 256.
    pub batch_max: usize,
    /// Most operations waiting for the worker; callers wait for room.
    /// Default 4096.
    pub queue: usize,
    /// The WAL length, in pages (frames of the 4 KiB database page), at
    /// which the writer checkpoints the WAL itself so that it can start
    /// over (SQLite's `wal_autocheckpoint`; `checkpoint.rs` says why the
    /// background checkpoints alone never let it). Under sustained writes
    /// the `-wal` file grows to about this size and stays there until the
    /// store is closed; it never grows past twice this size plus one
    /// transaction, where the writer waits for the background checkpoint
    /// and checkpoints whatever runs beside it (unless another process
    /// keeps a read transaction open past the busy timeout). Each such
    /// checkpoint pauses every decision for its `fsync`s. Default 50,000
    /// (about 200 MB), which keeps those pauses out of the p99
    /// (docs/design/sqlite-checkpoints.md#the-writers-own-checkpoint);
    /// smaller keeps the file smaller and pauses more often. 0 is taken as
    /// 1 (SQLite's 0 would let the WAL grow without bound).
    pub wal_autocheckpoint: u32,
}

impl Default for SqliteOptions {
    fn default() -> SqliteOptions {
        SqliteOptions {
            busy_timeout: Duration::from_secs(5),
            audit_retention: Duration::from_secs(7 * 24 * 60 * 60),
            audit_sample: 1,
            audit_max_rows: 10_000_000,
            batch_max: 256,
            queue: 4096,
            wal_autocheckpoint: checkpoint::WRITER_CHECKPOINT_FRAMES,
        }
    }
}

/// Why a SQLite store could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum SqliteError {
    /// SQLite refused: the file cannot be opened, is not a database, or a
    /// statement failed.
    #[error("SQLite failed")]
    Sqlite(#[from] rusqlite::Error),
    /// The file was written by a newer ratewarden.
    #[error("database schema version {found} is newer than this ratewarden understands ({known})")]
    NewerSchema {
        /// `PRAGMA user_version` of the file.
        found: i64,
        /// The version this release writes.
        known: i64,
    },
    /// The file is another application's SQLite database: it has tables
    /// (or views) that are not ratewarden's and no sign that ratewarden
    /// owns it (`PRAGMA user_version` 0, or no ratewarden table). Nothing
    /// was written to it; point ratewarden at a new file instead. The
    /// caller names the path (as with every variant here).
    #[error(
        "not a ratewarden database: it holds other tables ({}); ratewarden adds its tables only to a new file or to its own database",
        .tables.join(", ")
    )]
    ForeignDatabase {
        /// The tables and views that are not ratewarden's, by name.
        tables: Vec<String>,
    },
    /// The worker thread could not be started.
    #[error("cannot start the SQLite worker thread: {0}")]
    Thread(#[from] std::io::Error),
    /// The shared lock that marks the file as in use could not be taken
    /// (see [`SqliteStore::in_use`]).
    #[error("cannot lock the database file as in use: {0}")]
    Lock(#[source] std::io::Error),
}

/// The SQLite store. Cheap to share behind an `Arc`; see the crate docs
/// for its consistency promise.
#[derive(Debug)]
pub struct SqliteStore {
    path: PathBuf,
    /// `api_calls` rows committed since open (the worker counts them).
    audit_rows: Arc<AtomicU64>,
    /// `api_calls` rows pruned since open, by reason (the worker counts them).
    audit_pruned: Arc<audit::Pruned>,
    jobs: mpsc::Sender<Job>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl SqliteStore {
    /// Opens (creating if needed) the database at `path`, applies WAL mode,
    /// the busy timeout and the schema, takes the shared lock that marks
    /// the file as in use until [`Store::close`] (see
    /// [`SqliteStore::in_use`]), and starts the worker thread.
    ///
    /// Before anything is written (WAL mode rewrites the file header), the
    /// file is checked to be new or ratewarden's own: another
    /// application's database or one from a newer release is refused and
    /// left byte for byte as it was.
    ///
    /// # Errors
    /// [`SqliteError::ForeignDatabase`] for another application's
    /// database, [`SqliteError::NewerSchema`] for a newer release's, and
    /// [`SqliteError::Sqlite`] when the file cannot be opened or migrated,
    /// [`SqliteError::Lock`] when the file cannot be locked as in use
    /// within the busy timeout.
    pub fn open(
        path: impl AsRef<Path>,
        options: SqliteOptions,
    ) -> Result<SqliteStore, SqliteError> {
        let path = path.as_ref().to_path_buf();
        // No in_use probe of this process may close a descriptor of the
        // file while this connection is open and not yet registered.
        let opening = lock::opening();
        let mut conn = Connection::open_with_flags(
            &path,
            OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_CREATE
                | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        conn.busy_timeout(options.busy_timeout)?;
        // Read-only: refuse a file that is not ours before the first write.
        schema::check_owner(&conn)?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        conn.set_prepared_statement_cache_capacity(32);
        schema::migrate(&mut conn)?;
        // Checkpoints run on a connection of their own; the worker's only
        // past its limit (`checkpoint.rs`).
        let turn = checkpoint::Turn::default();
        let wal = WalLimit::watch(
            &conn,
            options.wal_autocheckpoint,
            Arc::clone(&turn),
            options.busy_timeout,
        );
        let checkpoints = Connection::open_with_flags(
            &path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        checkpoints.busy_timeout(options.busy_timeout)?;
        // Opened after the connections, closed after them (the worker
        // drops it last): closing a descriptor of the file earlier would
        // drop the POSIX locks SQLite holds on it.
        let (file_lock, locked) = opening.lock(&path, options.busy_timeout);
        if let Err(e) = locked {
            drop(conn);
            drop(checkpoints);
            drop(file_lock);
            return Err(SqliteError::Lock(e));
        }
        let checkpointer = match Checkpointer::start(checkpoints, file_lock.sync(), turn) {
            Ok(checkpointer) => checkpointer,
            Err(e) => {
                drop(conn);
                drop(file_lock);
                return Err(e.into());
            }
        };
        let (tx, rx) = mpsc::channel(options.queue.max(1));
        let audit_rows = Arc::new(AtomicU64::new(0));
        let audit_pruned = Arc::new(audit::Pruned::default());
        let audit_max_rows = options.audit_max_rows.max(1);
        let worker = Worker {
            conn,
            jobs: rx,
            batch_max: options.batch_max.max(1),
            audit_retention: options.audit_retention,
            audit_max_rows,
            audit_log: AuditLog::new(
                options.audit_sample,
                audit_max_rows,
                Arc::clone(&audit_rows),
                Arc::clone(&audit_pruned),
            ),
            prune_step: prune::StepSize::new(),
            wal,
            checkpointer: Some(checkpointer),
            file_lock,
        };
        let thread = std::thread::Builder::new()
            .name("ratewarden-sqlite".into())
            .spawn(move || worker.run())?;
        Ok(SqliteStore {
            path,
            audit_rows,
            audit_pruned,
            jobs: tx,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether an open store, of this process or of another, holds the
    /// database file at `path` (a running service, another replay): asks
    /// for an exclusive advisory lock without waiting, which fails while
    /// any store holds its shared one. A missing file is not in use.
    ///
    /// Call it before this process opens any SQLite connection of its own
    /// on the file: probing opens and closes a descriptor of the file, and
    /// closing one would drop the POSIX locks of such a connection (stores
    /// opened through [`SqliteStore::open`] are accounted for). Always
    /// `false` on platforms other than Unix, where no lock is taken.
    ///
    /// # Errors
    /// The file exists but cannot be opened, or its lock cannot be tried.
    pub fn in_use(path: impl AsRef<Path>) -> std::io::Result<bool> {
        lock::in_use(path.as_ref())
    }

    async fn run(&self, op: Op) -> Result<Reply, StoreError> {
        let (reply, answer) = oneshot::channel();
        self.jobs
            .send(Job::Run { op, reply })
            .await
            .map_err(|_| StoreError::Closed)?;
        answer
            .await
            .map_err(|_| StoreError::Closed)?
            .map_err(store_error)
    }

    async fn decision(&self, op: Op) -> Result<Decision, StoreError> {
        match self.run(op).await? {
            Reply::Decision(d) => Ok(d),
            _ => Err(StoreError::Failed(
                "the worker answered a status with something else".into(),
            )),
        }
    }

    async fn deleted(&self, op: Op) -> Result<u64, StoreError> {
        match self.run(op).await? {
            Reply::Deleted(n) => Ok(n),
            _ => Err(StoreError::Failed(
                "the worker answered a deletion with something else".into(),
            )),
        }
    }
}

#[async_trait]
impl Store for SqliteStore {
    fn kind(&self) -> &'static str {
        "sqlite"
    }

    async fn acquire(&self, batch: &Batch<'_>) -> Result<Vec<Decision>, StoreError> {
        let items = batch
            .items()
            .iter()
            .map(|item| OwnedItem {
                policy: item.policy.clone(),
                key: item.key.clone(),
                cost: item.cost,
                audit_path: item.audit.map(|a| a.path.to_owned()),
            })
            .collect();
        let op = Op::Acquire(OwnedBatch {
            now: batch.now(),
            items,
        });
        match self.run(op).await? {
            Reply::Decisions(d) => Ok(d),
            _ => Err(StoreError::Failed(
                "the worker answered a batch with something else".into(),
            )),
        }
    }

    async fn status(
        &self,
        policy: &Policy,
        key: &Key,
        now: Timestamp,
    ) -> Result<Decision, StoreError> {
        self.decision(Op::Status {
            policy: policy.clone(),
            key: key.clone(),
            now,
        })
        .await
    }

    async fn reset(
        &self,
        policy: &Policy,
        keys: KeyMatch<'_>,
        now: Timestamp,
    ) -> Result<u64, StoreError> {
        self.deleted(Op::Reset {
            policy: policy.clone(),
            keys: OwnedKeyMatch::new(keys),
            now,
        })
        .await
    }

    async fn prune(
        &self,
        algorithm: Algorithm,
        longest_window: Duration,
        now: Timestamp,
    ) -> Result<u64, StoreError> {
        self.deleted(Op::Prune {
            algorithm,
            longest_window,
            now,
        })
        .await
    }

    fn keeps_audit_log(&self) -> bool {
        true
    }

    fn audit_rows(&self) -> Option<u64> {
        Some(self.audit_rows.load(Ordering::Relaxed))
    }

    fn audit_rows_pruned(&self) -> Option<AuditPruned> {
        Some(AuditPruned {
            retention: self.audit_pruned.retention.load(Ordering::Relaxed),
            size: self.audit_pruned.size.load(Ordering::Relaxed),
        })
    }

    /// The database file and its write-ahead log, in bytes.
    fn disk_bytes(&self) -> Option<u64> {
        let size = |p: &Path| std::fs::metadata(p).map_or(0, |m| m.len());
        let mut wal = self.path.clone().into_os_string();
        wal.push("-wal");
        Some(size(&self.path) + size(Path::new(&wal)))
    }

    /// Finishes queued operations, checkpoints the WAL and closes the
    /// database; later calls fail with [`StoreError::Closed`]. Idempotent.
    async fn close(&self) {
        let _ = self.jobs.send(Job::Close).await;
        let thread = self.thread.lock().ok().and_then(|mut t| t.take());
        if let Some(thread) = thread {
            // Joining blocks until the checkpoint is done: keep it off the runtime.
            let _ = tokio::task::spawn_blocking(move || thread.join()).await;
        }
    }
}

/// Busy, locked, full or I/O trouble may pass; everything else is permanent.
fn store_error(e: rusqlite::Error) -> StoreError {
    match e.sqlite_error_code() {
        Some(
            ErrorCode::DatabaseBusy
            | ErrorCode::DatabaseLocked
            | ErrorCode::SystemIoFailure
            | ErrorCode::DiskFull,
        ) => StoreError::Unavailable(e.to_string()),
        _ => StoreError::Failed(e.to_string()),
    }
}
