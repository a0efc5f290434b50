//! [`StoreKind`] and `on_every_store!`: one test function run once on
//! each store. Shared by the test binaries that include it: `tests/api/`
//! (through `#[path]`) and those of `tests/` (through `common`).

/// Which store a test keeps its state in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreKind {
    /// `--store memory`.
    Memory,
    /// SQLite in the test's temporary directory (the default).
    Sqlite,
    /// A `redis-server` of the test's own.
    Redis,
}

/// For each `async fn test(store: StoreKind)` named, stamps out one test
/// per store: `memory::test`, `sqlite::test` and `redis::test`, each
/// calling `test` with its [`StoreKind`].
///
/// The tests run on `#[tokio::test]`'s current-thread runtime unless the
/// list starts with another attribute for them, such as
/// `#[tokio::test(flavor = "multi_thread", worker_threads = 2)]`.
/// `StoreKind` must be in scope where the macro is invoked.
#[allow(unused_macros)] // each test binary invokes it or not
macro_rules! on_every_store {
    (#[$runtime:meta] $($test:ident),* $(,)?) => {
        mod memory {
            $(#[$runtime] async fn $test() { super::$test(super::StoreKind::Memory).await })*
        }
        mod sqlite {
            $(#[$runtime] async fn $test() { super::$test(super::StoreKind::Sqlite).await })*
        }
        mod redis {
            $(#[$runtime] async fn $test() { super::$test(super::StoreKind::Redis).await })*
        }
    };
    ($($test:ident),* $(,)?) => {
        on_every_store!(#[tokio::test] $($test),*);
    };
}
