//! The store conformance suite (docs/semantics.md §2) on SQLite: every
//! check for each of the four algorithms, each test with a temporary
//! database file of its own.

use ratewarden_sqlite::{SqliteOptions, SqliteStore};
use ratewarden_testkit::TestStore;

ratewarden_testkit::store_conformance!(sqlite, || async {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("conformance.db");
    let store = SqliteStore::open(path, SqliteOptions::default()).expect("open the SQLite store");
    TestStore::with_guard(store, dir)
});
