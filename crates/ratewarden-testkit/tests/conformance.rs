//! The store conformance suite (docs/semantics.md §2) for every store in this
//! workspace: in-memory and SQLite (a temporary file per test).

use ratewarden_core::MemoryStore;
use ratewarden_sqlite::{SqliteOptions, SqliteStore};
use ratewarden_testkit::TestStore;

ratewarden_testkit::store_conformance!(memory, || async { TestStore::new(MemoryStore::new()) });

ratewarden_testkit::store_conformance!(sqlite, || async {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("conformance.db");
    let store = SqliteStore::open(path, SqliteOptions::default()).expect("open the SQLite store");
    TestStore::with_guard(store, dir)
});
