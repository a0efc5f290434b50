//! How one request of the trace is decided, on the store the replay was
//! given (`Arc<dyn Store>`, from the one function that opens stores).
//!
//! - **A memory store that no one else holds** ([`Arc::get_mut`]) is
//!   decided on with [`MemoryStore::acquire_single_mut`]: the same
//!   decision on the same state as through [`Store::acquire`], from the
//!   key's bytes, without the lock that sharing needs, without building a
//!   [`Key`] and a batch per request and without a future. The deciding
//!   thread is the store's only user, and it sets the replay's pace: that
//!   overhead would be most of a decision's cost.
//! - **Any other store** goes through [`Store::acquire`], a batch of one
//!   check, as the limiter sends for a request of one policy, awaited on a
//!   current-thread runtime (Redis needs its timers and sockets).

use std::any::Any;
use std::sync::Arc;

use ratewarden_core::{
    Acquire, Attempt, Batch, Decision, Key, MemoryError, MemoryStore, Policy, Store, StoreError,
};
use tokio::runtime::Runtime;

use crate::ReplayError;

/// The memory store behind `store`, when it is one and this is the only
/// handle on it.
pub(crate) fn sole_memory(store: &mut Arc<dyn Store>) -> Option<&mut MemoryStore> {
    let store: &mut dyn Any = Arc::get_mut(store)?;
    store.downcast_mut()
}

/// The decision on a memory store that only the calling thread uses
/// ([`sole_memory`]) for the one-part key `key`.
///
/// # Errors
/// As through [`Store::acquire`]: a full store is unavailable.
pub(crate) fn on_sole_memory(
    store: &mut MemoryStore,
    policy: &Policy,
    key: &[u8],
    attempt: Attempt,
) -> Result<Decision, StoreError> {
    store
        .acquire_single_mut(policy, key, attempt)
        .map_err(|e| match e {
            MemoryError::Full(full) => StoreError::from(full),
            // The reader has refused over-long keys already.
            MemoryError::Key(e) => StoreError::Failed(e.to_string()),
        })
}

/// Decides requests of one policy through the [`Store`] trait.
pub(crate) struct Decider<'a> {
    policy: &'a Policy,
    store: &'a dyn Store,
    /// Timers and IO: the Redis store needs both.
    runtime: Runtime,
}

impl<'a> Decider<'a> {
    /// A decider on `store` under `policy`.
    ///
    /// # Errors
    /// [`ReplayError::Runtime`] when the async runtime cannot start.
    pub(crate) fn new(policy: &'a Policy, store: &'a dyn Store) -> Result<Self, ReplayError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(ReplayError::Runtime)?;
        Ok(Decider {
            policy,
            store,
            runtime,
        })
    }

    /// The decision for the one-part key `key`.
    ///
    /// # Errors
    /// The store's error.
    pub(crate) fn decide(&self, key: &[u8], attempt: Attempt) -> Result<Decision, StoreError> {
        // The reader has refused over-long keys already.
        let key = Key::single(key).map_err(|e| StoreError::Failed(e.to_string()))?;
        let check = Acquire {
            cost: attempt.cost,
            ..Acquire::one(self.policy, &key)
        };
        let batch = Batch::one(attempt.now, check);
        let decisions = self.runtime.block_on(self.store.acquire(&batch))?;
        decisions
            .first()
            .copied()
            .ok_or_else(|| StoreError::Failed("the store answered no decision".into()))
    }

    /// Closes the store (SQLite: checkpoints and closes its file).
    pub(crate) fn close(self) {
        self.runtime.block_on(self.store.close());
    }
}
