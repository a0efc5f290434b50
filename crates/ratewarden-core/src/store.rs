//! The store trait: where limiter state lives and how it changes atomically.
//!
//! A store offers one atomic primitive per algorithm: it reads the key's
//! state, runs the pure algorithm from [`crate::algorithm`] and writes the
//! next state as one indivisible step, so no two concurrent requests can
//! both see the last free unit. Data in, data out: no closures cross the
//! boundary, because a remote store (Redis) cannot run Rust code.

use std::any::Any;
use std::time::Duration;

use async_trait::async_trait;

use crate::{Algorithm, Batch, Decision, Key, Policy, Timestamp};

/// Which keys of a policy [`Store::reset`] clears.
#[derive(Debug, Clone, Copy)]
pub enum KeyMatch<'a> {
    /// Exactly this key.
    Exactly(&'a Key),
    /// Every key whose first parts are this key's parts (the key itself
    /// included): `["7"]` clears `["7", "/orders"]` and `["7", "/a"]`.
    StartingWith(&'a Key),
}

impl<'a> KeyMatch<'a> {
    /// Whether `key` is selected.
    pub fn matches(self, key: &Key) -> bool {
        match self {
            KeyMatch::Exactly(k) => key == k,
            KeyMatch::StartingWith(prefix) => key.starts_with(prefix),
        }
    }

    /// The key given.
    pub fn key(self) -> &'a Key {
        match self {
            KeyMatch::Exactly(k) | KeyMatch::StartingWith(k) => k,
        }
    }
}

/// Where limiter state lives. Object safe: share it as `Arc<dyn Store>`.
///
/// Every store gives the same decisions for the same requests at the same
/// times (docs/semantics.md); each implementation documents its
/// consistency promise (when, if ever, it can over-admit). State is
/// namespaced by policy: it belongs to (policy name, algorithm, key).
///
/// A store is [`Any`], so that the one holder of an `Arc<dyn Store>`
/// ([`Arc::get_mut`](std::sync::Arc::get_mut)) may use its own type's
/// API: `ratewarden replay` decides on a memory store that it alone holds
/// with [`MemoryStore::acquire_single_mut`](crate::MemoryStore::acquire_single_mut),
/// without the locks that sharing needs.
#[async_trait]
pub trait Store: Any + Send + Sync + std::fmt::Debug {
    /// Decides every item of `batch` and records the outcome as one atomic
    /// step, all or nothing ([`crate::batch`]). Returns one decision per
    /// item of [`Batch::items`], in order.
    ///
    /// # Errors
    /// [`StoreError`] when the store cannot be used; then nothing was
    /// recorded. A denial is `Ok`.
    async fn acquire(&self, batch: &Batch<'_>) -> Result<Vec<Decision>, StoreError>;

    /// What a request of cost 1 for `key` would get at `now`. Never creates
    /// or changes state.
    ///
    /// # Errors
    /// [`StoreError`] when the store cannot be used.
    async fn status(
        &self,
        policy: &Policy,
        key: &Key,
        now: Timestamp,
    ) -> Result<Decision, StoreError>;

    /// Deletes the state of `policy` (its name and algorithm) for the keys
    /// `keys` selects. Returns how many counters were reset: the number of
    /// selected keys whose state still held usage at `now` (expired state
    /// is deleted too but not counted), the same on every store.
    ///
    /// # Errors
    /// [`StoreError`] when the store cannot be used.
    async fn reset(
        &self,
        policy: &Policy,
        keys: KeyMatch<'_>,
        now: Timestamp,
    ) -> Result<u64, StoreError>;

    /// Deletes `algorithm` state that no policy whose window is at most
    /// `longest_window` can still need at `now` (seed A: fixed windows
    /// older than two window lengths), plus audit entries past the store's
    /// retention or its bound on rows. Returns the number of entries
    /// deleted.
    ///
    /// Pass the longest window of all policies of that algorithm that share
    /// this store: a shorter one would delete live state of the others.
    ///
    /// # Errors
    /// [`StoreError`] when the store cannot be used.
    async fn prune(
        &self,
        algorithm: Algorithm,
        longest_window: Duration,
        now: Timestamp,
    ) -> Result<u64, StoreError>;

    /// Whether [`crate::Acquire::audit`] entries are kept.
    fn keeps_audit_log(&self) -> bool;

    /// Whether the store can answer now (readiness, `grpc.health.v1`):
    /// one cheap round trip for a networked store. The default, for
    /// in-process stores, answers `Ok`.
    ///
    /// # Errors
    /// [`StoreError`] when the store cannot be used.
    async fn ping(&self) -> Result<(), StoreError> {
        Ok(())
    }

    /// The kind of store, for metric labels and logs: `memory`, `sqlite`,
    /// `redis`. The default is `custom`.
    fn kind(&self) -> &'static str {
        "custom"
    }

    /// How many audit-log rows the store has written since it was opened,
    /// for a store that keeps an audit log ([`Store::keeps_audit_log`]);
    /// `None` otherwise (the default).
    fn audit_rows(&self) -> Option<u64> {
        None
    }

    /// How many audit-log rows the store has pruned since it was opened,
    /// by reason, for a store that keeps an audit log; `None` otherwise
    /// (the default).
    fn audit_rows_pruned(&self) -> Option<AuditPruned> {
        None
    }

    /// How many bytes the store's data takes on disk now, for a store
    /// with local files (SQLite: the database and its write-ahead log);
    /// `None` otherwise (the default).
    fn disk_bytes(&self) -> Option<u64> {
        None
    }

    /// How many entries (keys with state, per policy and algorithm) the
    /// store holds now, expired ones not yet swept included, when it can
    /// tell without scanning its data (the memory store); `None` otherwise
    /// (the default).
    async fn entries(&self) -> Option<u64> {
        None
    }

    /// The most entries the store holds, for a store with such a bound
    /// (the memory store: [`crate::MemoryStore::with_max_keys`]); `None`
    /// otherwise (the default).
    fn max_entries(&self) -> Option<u64> {
        None
    }

    /// How many checks the store refused because it held its
    /// [`Store::max_entries`] and the check would add one, since it was
    /// made, for a store with such a bound; `None` otherwise (the default).
    fn entries_refused(&self) -> Option<u64> {
        None
    }

    /// Finishes queued work and releases the store's resources (SQLite:
    /// checkpoint and close the file). Later calls fail with
    /// [`StoreError::Closed`]. Idempotent; the default does nothing.
    async fn close(&self) {}
}

/// Audit-log rows pruned ([`Store::audit_rows_pruned`]), by reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AuditPruned {
    /// Older than the store's retention.
    pub retention: u64,
    /// The oldest past the store's bound on rows, before their retention
    /// ended.
    pub size: u64,
}

/// Why a store could not answer. A denial is never an error.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    /// The store is busy, locked, timed out or unreachable; the same call
    /// may succeed later.
    #[error("store unavailable: {0}")]
    Unavailable(String),
    /// The store has been shut down.
    #[error("store is closed")]
    Closed,
    /// Anything else: corrupt data, a full disk, a bug. Not worth retrying.
    #[error("store failed: {0}")]
    Failed(String),
}

impl StoreError {
    /// Whether retrying may help. Drives fail-open / fail-closed: a
    /// transient error follows the operator's policy, a permanent one is
    /// always reported.
    pub fn is_transient(&self) -> bool {
        matches!(self, StoreError::Unavailable(_))
    }
}
