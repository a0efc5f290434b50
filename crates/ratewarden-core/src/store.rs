//! The store trait: where limiter state lives and how it changes atomically.
//!
//! A store offers one atomic primitive per algorithm: it reads the key's
//! state, runs the pure algorithm from [`crate::algorithm`] and writes the
//! next state as one indivisible step, so no two concurrent requests can
//! both see the last free unit. Data in, data out: no closures cross the
//! boundary, because a remote store (Redis) cannot run Rust code.

use std::time::Duration;

use async_trait::async_trait;

use crate::{Algorithm, Attempt, Decision, Key, Policy, Timestamp};

/// One request's claim, as handed to [`Store::acquire`].
#[derive(Debug, Clone, Copy)]
pub struct Acquire<'a> {
    /// Which algorithm and quota apply.
    pub policy: &'a Policy,
    /// Whose counter.
    pub key: &'a Key,
    /// When, and how many units.
    pub attempt: Attempt,
    /// An audit entry to record together with an allowed decision, in the
    /// same atomic step (seed A's `api_calls`). Stores without an audit log
    /// ignore it; [`Store::keeps_audit_log`] says which.
    pub audit: Option<Audit<'a>>,
}

/// What the audit log keeps of an allowed request besides its key and time.
#[derive(Debug, Clone, Copy)]
pub struct Audit<'a> {
    /// The request path, e.g. `/ping`.
    pub path: &'a str,
}

/// Where limiter state lives. Object safe: share it as `Arc<dyn Store>`.
///
/// Every store gives the same decisions for the same requests at the same
/// times (SPEC section 6); each implementation documents its consistency
/// promise (when, if ever, it can over-admit).
#[async_trait]
pub trait Store: Send + Sync + std::fmt::Debug {
    /// Decides one request and records it, atomically.
    ///
    /// # Errors
    /// [`StoreError`] when the store cannot be used; a denial is `Ok`.
    async fn acquire(&self, request: Acquire<'_>) -> Result<Decision, StoreError>;

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

    /// Deletes the `algorithm` state of every key that starts with
    /// `prefix`'s parts (a whole key clears just that key). Returns how many
    /// stored entries were deleted (SQLite: rows, i.e. windows or events).
    ///
    /// # Errors
    /// [`StoreError`] when the store cannot be used; nothing is half-deleted.
    async fn reset(&self, algorithm: Algorithm, prefix: &Key) -> Result<u64, StoreError>;

    /// Deletes `algorithm` state that no policy whose window is at most
    /// `longest_window` can still need at `now` (seed A: fixed windows
    /// older than two window lengths), plus audit entries past the store's
    /// retention. Returns the number of entries deleted.
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

    /// Whether [`Acquire::audit`] entries are kept.
    fn keeps_audit_log(&self) -> bool;

    /// Finishes queued work and releases the store's resources (SQLite:
    /// checkpoint and close the file). Later calls fail with
    /// [`StoreError::Closed`]. Idempotent; the default does nothing.
    async fn close(&self) {}
}

/// Why a store could not answer. A denial is never an error.
#[derive(Debug, thiserror::Error)]
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
