//! ratewarden's limiter engine: decides whether one more request for a key
//! may pass now, and how long to wait when it may not.
//!
//! No IO, no runtime, no HTTP, no SQL: algorithms are pure functions of
//! (state, quota, attempt), and a [`Store`] runs them atomically against
//! its own storage: [`MemoryStore`] here, SQLite in `ratewarden-sqlite`.
//!
//! ```
//! use ratewarden_core::algorithm::fixed_window;
//! use ratewarden_core::{Attempt, Quota, Timestamp};
//! use std::time::Duration;
//!
//! let quota = Quota::new(3, Duration::from_secs(60)).unwrap();
//! let mut state = None;
//! for second in 0..4 {
//!     let attempt = Attempt::one(Timestamp::from_unix_secs(second));
//!     let (decision, next) = fixed_window::decide(state, &quota, attempt);
//!     state = next.or(state);
//!     assert_eq!(decision.allowed(), second < 3);
//! }
//! ```
//!
//! # Layout
//! - [`clock`]: [`Timestamp`], [`Clock`], [`SystemClock`], [`ManualClock`].
//! - [`key`]: [`Key`], opaque multi-part keys.
//! - [`quota`]: [`Quota`], [`Algorithm`], [`Policy`], [`Mode`], [`Attempt`].
//! - [`decision`]: [`Decision`], [`Outcome`].
//! - [`algorithm`]: one module per algorithm of docs/semantics.md §2.
//! - [`batch`]: [`Batch`], [`Acquire`], [`Settlement`]: several checks
//!   decided all or nothing.
//! - [`store`]: the [`Store`] trait, [`KeyMatch`] and [`StoreError`].
//! - [`memory`]: [`MemoryStore`], the in-process store.

pub mod algorithm;
pub mod batch;
pub mod clock;
pub mod decision;
pub mod key;
pub mod memory;
pub mod quota;
pub mod store;
pub mod utc;

pub use batch::{Acquire, Audit, Batch, Settlement};
pub use clock::{Clock, ManualClock, SystemClock, Timestamp};
pub use decision::{Decision, Outcome};
pub use key::{Key, KeyError};
pub use memory::{MemoryError, MemoryStore, StoreFull};
pub use quota::{Algorithm, Attempt, Mode, Policy, Quota, QuotaError, ceil_millis, ceil_secs};
pub use store::{AuditPruned, KeyMatch, Store, StoreError};
