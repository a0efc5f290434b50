//! [`store_conformance!`](crate::store_conformance).

/// Stamps out the conformance suite for one store: a module `$store` with
/// one module per algorithm (`fixed_window`, `sliding_log`,
/// `sliding_window`, `gcra`) and in each one `#[tokio::test]` per check of
/// [`conformance`](crate::conformance).
///
/// `$factory` is a closure returning a future of a
/// [`TestStore`](crate::TestStore); it is called once per test, so every
/// test gets a store of its own. Names in it resolve as in the module that
/// invokes the macro. The concurrency check runs on a multi-thread runtime
/// with 4 workers, the others on a current-thread runtime.
///
/// ```text
/// ratewarden_testkit::store_conformance!(sqlite, || async {
///     let dir = tempfile::tempdir().expect("a temporary directory");
///     let path = dir.path().join("conformance.db");
///     let store = SqliteStore::open(path, SqliteOptions::default()).expect("open SQLite");
///     TestStore::with_guard(store, dir)
/// });
/// ```
#[macro_export]
macro_rules! store_conformance {
    ($store:ident, $factory:expr $(,)?) => {
        mod $store {
            #[allow(unused_imports)]
            use super::*;

            $crate::store_conformance!(@algorithm fixed_window, FixedWindow, $factory);
            $crate::store_conformance!(@algorithm sliding_log, SlidingLog, $factory);
            $crate::store_conformance!(@algorithm sliding_window, SlidingWindow, $factory);
            $crate::store_conformance!(@algorithm gcra, Gcra, $factory);
        }
    };
    (@algorithm $module:ident, $variant:ident, $factory:expr) => {
        mod $module {
            #[allow(unused_imports)]
            use super::*;

            const ALGORITHM: $crate::__private::Algorithm = $crate::__private::Algorithm::$variant;

            $crate::store_conformance!(@checks $factory;
                window_edges_follow_the_spec,
                a_cost_above_the_limit_is_never_and_changes_nothing,
                a_limit_of_zero_denies_everything,
                a_limit_of_one_matches_the_model,
                huge_values_never_panic_and_match_the_model,
                status_never_creates_or_changes_state,
                reset_clears_a_key_or_a_prefix_only,
                keys_are_opaque_and_independent,
                random_sequences_match_the_model,
                retry_after_is_the_shortest_wait,
                policies_have_state_of_their_own,
                a_denied_batch_charges_nothing,
                random_batches_match_the_model,
            );

            #[$crate::__private::tokio::test(
                crate = "ratewarden_testkit::__private::tokio",
                flavor = "multi_thread",
                worker_threads = 4
            )]
            async fn concurrent_acquires_admit_exactly_the_limit() {
                $crate::conformance::run(
                    ALGORITHM,
                    $factory,
                    $crate::conformance::concurrent_acquires_admit_exactly_the_limit,
                )
                .await;
            }

            #[$crate::__private::tokio::test(
                crate = "ratewarden_testkit::__private::tokio",
                flavor = "multi_thread",
                worker_threads = 4
            )]
            async fn concurrent_batches_admit_exactly_each_limit() {
                $crate::conformance::run(
                    ALGORITHM,
                    $factory,
                    $crate::conformance::concurrent_batches_admit_exactly_each_limit,
                )
                .await;
            }
        }
    };
    (@checks $factory:expr; $($check:ident),* $(,)?) => {
        $(
            #[$crate::__private::tokio::test(crate = "ratewarden_testkit::__private::tokio")]
            async fn $check() {
                $crate::conformance::run(ALGORITHM, $factory, $crate::conformance::$check).await;
            }
        )*
    };
}
