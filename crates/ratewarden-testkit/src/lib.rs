//! ratewarden's test kit: a manual clock, naive reference models of the
//! four algorithms, and the store conformance suite. Use it as a
//! dev-dependency only.
//!
//! Every store must give the same decisions for the same requests at the
//! same times (docs/semantics.md §2). [`store_conformance!`] stamps out the whole
//! suite, one test per (check, algorithm), for a store factory:
//!
//! ```no_run
//! use ratewarden_core::MemoryStore;
//! use ratewarden_testkit::TestStore;
//!
//! ratewarden_testkit::store_conformance!(memory, || async { TestStore::new(MemoryStore::new()) });
//! # fn main() {}
//! ```
//!
//! which yields tests such as `memory::gcra::retry_after_is_the_shortest_wait`.
//! The factory runs once per test, so every test has a store of its own
//! (for SQLite: a temporary file, kept alive by [`TestStore::with_guard`]).
//! The generated tests need no `tokio` dependency of their own.
//!
//! # Layout
//! - [`model`]: [`model::Model`], one naive reference model per algorithm,
//!   written from docs/semantics.md §2 without `ratewarden_core::algorithm`.
//! - [`ledger`]: [`ledger::Ledger`], the models of several policies and the
//!   all-or-nothing rule for batches.
//! - [`conformance`]: the checks, async functions of
//!   `(Arc<dyn Store>, Algorithm)`, and [`TestStore`].
//! - [`store_conformance!`]: the macro that turns them into tests.
//! - [`redis_server`]: a `redis-server` of a test's own on a free port.
//! - [`peer`]: [`peer::FakePeer`], a listener that is not a working Redis
//!   (silent, or speaking another protocol).
//! - [`FailingStore`]: a store whose every call fails (transiently or for
//!   good), for the failure modes.

pub mod conformance;
mod failing;
pub mod ledger;
mod macros;
pub mod model;
pub mod peer;
pub mod redis_server;

pub use conformance::TestStore;
pub use failing::FailingStore;
pub use ratewarden_core::ManualClock;

/// What [`store_conformance!`] refers to through `$crate`; not public API.
#[doc(hidden)]
pub mod __private {
    pub use ratewarden_core::Algorithm;
    pub use tokio;
}
