//! One request of the trace decided through the [`Store`] trait: a batch
//! of one check, as the limiter sends for a request of one policy.
//!
//! A store's answer is polled once where it is asked for, and only an
//! answer that has to wait (Redis's round trip, SQLite's writer thread)
//! goes to the async runtime. The memory store never waits, and a
//! runtime's `block_on` per request, with its context switch in and out,
//! would cost more than its decision; the deciding thread stays inside
//! the runtime's context throughout, so a future that does wait finds
//! its timers and sockets from its first poll.

use std::task::{Context, Poll, Waker};

use ratewarden_core::{Acquire, Attempt, Batch, Decision, Key, Policy, Store, StoreError};
use tokio::runtime::Runtime;

use crate::ReplayError;

/// Decides requests of one policy on one store.
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

    /// The deciding function for the thread that calls this: it holds
    /// the runtime's context on this thread for as long as it lives.
    pub(crate) fn on_this_thread(
        &self,
    ) -> impl FnMut(&[u8], Attempt) -> Result<Decision, StoreError> + '_ {
        let entered = self.runtime.enter();
        move |key, attempt| {
            let _entered = &entered;
            self.decide(key, attempt)
        }
    }

    /// The decision for the one-part key `key`.
    ///
    /// # Errors
    /// The store's error.
    fn decide(&self, key: &[u8], attempt: Attempt) -> Result<Decision, StoreError> {
        // The reader has refused over-long keys already.
        let key = Key::single(key).map_err(|e| StoreError::Failed(e.to_string()))?;
        let check = Acquire {
            cost: attempt.cost,
            ..Acquire::one(self.policy, &key)
        };
        let batch = Batch::one(attempt.now, check);
        let mut acquire = self.store.acquire(&batch);
        let decisions = match acquire
            .as_mut()
            .poll(&mut Context::from_waker(Waker::noop()))
        {
            Poll::Ready(decisions) => decisions,
            // Polled again by the runtime, with a waker of its own.
            Poll::Pending => self.runtime.block_on(acquire),
        }?;
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
