//! The store conformance suite (docs/semantics.md §2) on the memory store,
//! which also shows the suite passes a correct store. The other stores run
//! it in their own crates (`tests/conformance.rs` of ratewarden-sqlite and
//! ratewarden-redis); the memory store's run lives here rather than in
//! ratewarden-core, which the test kit depends on, so that no crate
//! dev-depends on a crate that depends on it.

use ratewarden_core::MemoryStore;
use ratewarden_testkit::TestStore;

ratewarden_testkit::store_conformance!(memory, || async { TestStore::new(MemoryStore::new()) });
