//! Benchmarks only: see `benches/` and BENCHMARKS.md.
//!
//! - `benches/decisions.rs` (criterion): the cost of one decision for each
//!   algorithm on each store, and the memory store's GCRA beside governor's
//!   keyed limiter in the same run.
//! - `benches/memory_per_key.rs`: resident bytes per idle key in the memory
//!   store at one million keys.

use std::time::Duration;

use ratewarden_core::{Algorithm, Key, Policy, Quota};

/// A policy that allows (almost) everything, so every iteration measures
/// the full allowed path (state read, decision, state write).
///
/// # Panics
/// Never: the quota is valid.
pub fn open_policy(algorithm: Algorithm) -> Policy {
    #[allow(clippy::expect_used)] // constant, valid quota
    let quota = Quota::new(1_000_000_000_000, Duration::from_secs(1)).expect("valid quota");
    Policy::new("bench", algorithm, quota)
}

/// `n` distinct one-part keys `client-0` … `client-{n-1}`.
///
/// # Panics
/// Never: the keys are short.
pub fn keys(n: usize) -> Vec<Key> {
    #[allow(clippy::expect_used)] // short keys
    (0..n)
        .map(|i| Key::single(format!("client-{i}")).expect("short key"))
        .collect()
}
