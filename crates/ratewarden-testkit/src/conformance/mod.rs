//! The store conformance suite: checks that a [`Store`] decides exactly as
//! docs/semantics.md §2 says, by comparing every decision with the naive
//! [`Model`](crate::model::Model) (outcome, `retry_after` to the nanosecond, `remaining`).
//!
//! Each check is an async function of `(Arc<dyn Store>, Algorithm)` that
//! panics with the exact inputs (quota, key, times, costs, expected and
//! actual decision, and the session's history) when the store disagrees.
//! [`store_conformance!`](crate::store_conformance) runs them all for a
//! store factory; they can also be called one by one through [`run`].
//!
//! Design decisions:
//! - Times are explicit instants, never the wall clock, so window edges
//!   are hit to the nanosecond; nothing sleeps.
//! - Checks use fixed keys (a fresh store per test) and the property tests
//!   a fresh key prefix per case, so one store serves all cases: opening
//!   SQLite per case would be slow.
//! - The property tests run proptest on a blocking thread with a
//!   current-thread runtime of their own, driving the store with
//!   `block_on`; failing seeds are kept in `proptest-regressions/` of the
//!   crate under test.

mod batches;
mod concurrency;
mod edges;
mod props;
mod state;

use std::any::Any;
use std::fmt;
use std::future::Future;
use std::num::NonZeroU64;
use std::sync::Arc;

use ratewarden_core::{
    Acquire, Algorithm, Batch, Decision, Key, KeyMatch, Outcome, Policy, Quota, Store, Timestamp,
};

use crate::ledger::{Item, Ledger};
use crate::model::{Answer, Expected};

pub use batches::{
    a_denied_batch_charges_nothing, policies_have_state_of_their_own,
    random_batches_match_the_model,
};
pub use concurrency::{
    concurrent_acquires_admit_exactly_the_limit, concurrent_batches_admit_exactly_each_limit,
};
pub use edges::{
    a_cost_above_the_limit_is_never_and_changes_nothing, a_limit_of_one_matches_the_model,
    a_limit_of_zero_denies_everything, huge_values_never_panic_and_match_the_model,
    window_edges_follow_the_spec,
};
pub use props::{random_sequences_match_the_model, retry_after_is_the_shortest_wait};
pub use state::{
    keys_are_opaque_and_independent, reset_clears_a_key_or_a_prefix_only,
    status_never_creates_or_changes_state,
};

/// One second in nanoseconds.
pub(crate) const SEC: u64 = 1_000_000_000;

/// 2026-01-01T00:00:00Z in nanoseconds: a start aligned to every window
/// of a whole number of minutes.
pub(crate) const T0: u64 = 1_767_225_600 * SEC;

/// A store under test, plus whatever must live exactly as long as it (a
/// temporary directory holding its database file).
pub struct TestStore {
    store: Arc<dyn Store>,
    guard: Option<Box<dyn Any + Send + Sync>>,
}

impl TestStore {
    /// A store that needs nothing else.
    pub fn new(store: impl Store + 'static) -> TestStore {
        TestStore {
            store: Arc::new(store),
            guard: None,
        }
    }

    /// A store whose resources `guard` owns (e.g. a `tempfile::TempDir`);
    /// `guard` is dropped after the store has been closed.
    pub fn with_guard(store: impl Store + 'static, guard: impl Send + Sync + 'static) -> TestStore {
        TestStore {
            store: Arc::new(store),
            guard: Some(Box::new(guard)),
        }
    }

    /// The store, to share with a check.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }
}

impl fmt::Debug for TestStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TestStore")
            .field("store", &self.store)
            .field("guard", &self.guard.is_some())
            .finish()
    }
}

/// Builds a store with `factory`, runs `check` on it for `algorithm`, then
/// closes the store and drops its guard.
pub async fn run<F, Fut, C, CFut>(algorithm: Algorithm, factory: F, check: C)
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = TestStore>,
    C: FnOnce(Arc<dyn Store>, Algorithm) -> CFut,
    CFut: Future<Output = ()>,
{
    let test_store = factory().await;
    check(Arc::clone(&test_store.store), algorithm).await;
    test_store.store.close().await;
    drop(test_store);
}

/// A key from its parts; the checks only build keys well under the
/// maximum length.
pub(crate) fn key<I, P>(parts: I) -> Key
where
    I: IntoIterator<Item = P>,
    P: AsRef<[u8]>,
{
    Key::new(parts).expect("test keys have at least one part and are short")
}

/// A quota of `limit` per `window_nanos`; checks only build valid ones.
pub(crate) fn quota(limit: u64, window_nanos: u64) -> Quota {
    Quota::new(limit, std::time::Duration::from_nanos(window_nanos))
        .expect("test quotas have a limit below i64::MAX and a window > 0")
}

/// How a quota reads in failure messages.
pub(crate) fn describe_quota(quota: &Quota) -> String {
    format!(
        "limit {}, window {} ns, burst {}",
        quota.limit(),
        quota.window_nanos(),
        quota.burst()
    )
}

/// A store's decision in the model's terms.
pub(crate) fn observed(decision: &Decision) -> Expected {
    match decision.outcome {
        Outcome::Allowed => Expected::Allowed,
        Outcome::Denied { retry_after } => Expected::Denied {
            retry_after_ns: retry_after.as_nanos(),
        },
        Outcome::Never => Expected::Never,
    }
}

fn show(outcome: Expected, remaining: u64) -> String {
    match outcome {
        Expected::Allowed => format!("Allowed, remaining {remaining}"),
        Expected::Denied { retry_after_ns } => {
            format!("Denied {{ retry_after: {retry_after_ns} ns }}, remaining {remaining}")
        }
        Expected::Never => format!("Never, remaining {remaining}"),
    }
}

/// Requests against the store and the model side by side; every decision
/// is compared, and a mismatch reports the whole history. One policy is
/// the session's own ([`Session::acquire`] and friends); batches may mix
/// any policies ([`Session::try_batch`]).
pub(crate) struct Session<'a> {
    store: &'a dyn Store,
    policy: Policy,
    ledger: Ledger,
    history: Vec<String>,
}

impl<'a> Session<'a> {
    /// A session whose own policy has the seed route's name for its
    /// algorithm ([`seed_name`]).
    pub(crate) fn new(store: &'a dyn Store, algorithm: Algorithm, quota: Quota) -> Session<'a> {
        Session::of(store, Policy::new(seed_name(algorithm), algorithm, quota))
    }

    /// A session whose own policy is `policy`.
    pub(crate) fn of(store: &'a dyn Store, policy: Policy) -> Session<'a> {
        Session {
            store,
            policy,
            ledger: Ledger::default(),
            history: Vec::new(),
        }
    }

    /// Acquires `cost` units for `key` at `t` ns and compares with the model.
    pub(crate) async fn try_acquire(
        &mut self,
        key: &Key,
        t: u64,
        cost: u64,
    ) -> Result<Decision, String> {
        let policy = self.policy.clone();
        let decisions = self.try_batch(&[(&policy, key, cost)], t).await?;
        Ok(decisions[0])
    }

    /// Decides `checks` (policy, key, cost) as one batch at `t` ns and
    /// compares every decision with the model; one decision per check.
    pub(crate) async fn try_batch(
        &mut self,
        checks: &[(&Policy, &Key, u64)],
        t: u64,
    ) -> Result<Vec<Decision>, String> {
        let request = format!(
            "batch at t = {t} ns: [{}]",
            checks
                .iter()
                .map(|(p, k, c)| format!("{} ({}) {k} cost {c}", p.name, p.algorithm))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let mut acquires = Vec::with_capacity(checks.len());
        for &(policy, key, cost) in checks {
            let cost = NonZeroU64::new(cost).ok_or("cost 0 is not a request")?;
            acquires.push(Acquire {
                policy,
                key,
                cost,
                audit: None,
            });
        }
        let batch = Batch::new(Timestamp::from_unix_nanos(t), acquires);
        let result = self.store.acquire(&batch).await.map(|items| {
            batch
                .slots()
                .iter()
                .map(|&i| items.get(i).copied())
                .collect::<Option<Vec<Decision>>>()
        });
        let items: Vec<Item<'_>> = checks
            .iter()
            .map(|&(policy, key, cost)| Item::new(policy, key.encoded(), cost))
            .collect();
        let expected = self.ledger.acquire(&items, t);
        let decisions = match result {
            Ok(Some(d)) => d,
            Ok(None) => {
                return Err(format!(
                    "{}\n{request}: the store answered fewer decisions than items",
                    self.context()
                ));
            }
            Err(e) => {
                return Err(format!(
                    "{}\n{request}: the store failed: {e}",
                    self.context()
                ));
            }
        };
        for (i, ((decision, answer), (policy, _, _))) in
            decisions.iter().zip(&expected).zip(checks).enumerate()
        {
            self.compare(&format!("{request}, check #{i}"), policy, decision, answer)?;
        }
        let shown: Vec<String> = decisions
            .iter()
            .map(|d| show(observed(d), d.remaining))
            .collect();
        self.history
            .push(format!("{request} -> [{}]", shown.join("; ")));
        Ok(decisions)
    }

    /// Reads the status of `key` at `t` ns and compares with the model.
    pub(crate) async fn try_status(&mut self, key: &Key, t: u64) -> Result<Decision, String> {
        let policy = self.policy.clone();
        self.try_status_of(&policy, key, t).await
    }

    /// Reads the status of `key` under `policy` at `t` ns and compares.
    pub(crate) async fn try_status_of(
        &mut self,
        policy: &Policy,
        key: &Key,
        t: u64,
    ) -> Result<Decision, String> {
        let request = format!("status {} {key} at t = {t} ns", policy.name);
        let decision = match self
            .store
            .status(policy, key, Timestamp::from_unix_nanos(t))
            .await
        {
            Ok(d) => d,
            Err(e) => {
                return Err(format!(
                    "{}\n{request}: the store failed: {e}",
                    self.context()
                ));
            }
        };
        let expected = self.ledger.status(policy, key.encoded(), t);
        self.compare(&request, policy, &decision, &expected)?;
        self.history.push(format!(
            "{request} -> {}",
            show(observed(&decision), decision.remaining)
        ));
        Ok(decision)
    }

    /// [`Session::try_acquire`], panicking on a mismatch.
    pub(crate) async fn acquire(&mut self, key: &Key, t: u64, cost: u64) -> Decision {
        self.try_acquire(key, t, cost)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`Session::try_batch`], panicking on a mismatch.
    pub(crate) async fn batch(&mut self, checks: &[(&Policy, &Key, u64)], t: u64) -> Vec<Decision> {
        self.try_batch(checks, t)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`Session::try_status`], panicking on a mismatch.
    pub(crate) async fn status(&mut self, key: &Key, t: u64) -> Decision {
        self.try_status(key, t)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`Session::try_status_of`], panicking on a mismatch.
    pub(crate) async fn status_of(&mut self, policy: &Policy, key: &Key, t: u64) -> Decision {
        self.try_status_of(policy, key, t)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// Resets every key of the session's policy that starts with `prefix`,
    /// at `t` ns, in the store and the model; the store must count the
    /// keys in use as the model does. Returns the count.
    pub(crate) async fn reset(&mut self, prefix: &Key, t: u64) -> u64 {
        let policy = self.policy.clone();
        self.reset_of(&policy, KeyMatch::StartingWith(prefix), t)
            .await
    }

    /// Resets the keys `keys` selects of `policy` at `t` ns; compares the
    /// count of keys in use with the model's.
    pub(crate) async fn reset_of(&mut self, policy: &Policy, keys: KeyMatch<'_>, t: u64) -> u64 {
        let deleted = self
            .store
            .reset(policy, keys, Timestamp::from_unix_nanos(t))
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "{}\nreset {} {:?} failed: {e}",
                    self.context(),
                    policy.name,
                    keys
                )
            });
        let expected = self
            .ledger
            .reset(policy, &|key: &[u8]| selects(keys, key), t);
        assert_eq!(
            deleted,
            expected,
            "{}\nreset {} {keys:?} at t = {t} ns: the store counted {deleted} keys in use, the model {expected}",
            self.context(),
            policy.name,
        );
        self.history.push(format!(
            "reset {} {keys:?} -> {deleted} deleted",
            policy.name
        ));
        deleted
    }

    /// Asserts `decision` is `outcome` with `remaining`: hand-worked values worked
    /// out by hand, which pin the model down as well as the store.
    pub(crate) fn expect(
        &self,
        what: &str,
        decision: &Decision,
        outcome: Expected,
        remaining: u64,
    ) {
        let got = (observed(decision), decision.remaining);
        assert!(
            got == (outcome, remaining),
            "{}\n{what}: the definition says {}, the store said {}",
            self.context(),
            show(outcome, remaining),
            show(got.0, got.1),
        );
    }

    fn compare(
        &self,
        request: &str,
        policy: &Policy,
        decision: &Decision,
        expected: &Answer,
    ) -> Result<(), String> {
        let got = observed(decision);
        let limit = policy.quota.limit();
        if got != expected.outcome
            || decision.remaining != expected.remaining
            || decision.limit != limit
        {
            return Err(format!(
                "{}\n{request}:\n  model (docs/semantics.md §2): {}\n  store:          {} (limit {})",
                self.context(),
                show(expected.outcome, expected.remaining),
                show(got, decision.remaining),
                decision.limit,
            ));
        }
        Ok(())
    }

    fn context(&self) -> String {
        let mut text = format!(
            "{} disagrees with docs/semantics.md §2 ({})",
            self.policy.algorithm,
            describe_quota(&self.policy.quota)
        );
        if !self.history.is_empty() {
            text.push_str("\nearlier in this session (all matched the model):");
            for (i, line) in self.history.iter().enumerate() {
                text.push_str(&format!("\n  #{i} {line}"));
            }
        }
        text
    }
}

/// The name most checks give their policy: the seed routes' names for
/// their algorithms (`ping` for the fixed window, `check` for the sliding
/// log), `conformance` for the others. A store may keep the seed routes'
/// policies in tables of their own (SQLite keeps the seeds' tables), so
/// the edge checks run there; the random sequences alternate between this
/// name and another one, and the batch checks use other names, so both
/// homes are covered.
pub(crate) fn seed_name(algorithm: Algorithm) -> &'static str {
    match algorithm {
        Algorithm::FixedWindow => "ping",
        Algorithm::SlidingLog => "check",
        Algorithm::SlidingWindow | Algorithm::Gcra => "conformance",
    }
}

/// Whether `keys` selects the key whose encoding is `encoded`.
fn selects(keys: KeyMatch<'_>, encoded: &[u8]) -> bool {
    match keys {
        KeyMatch::Exactly(k) => encoded == k.encoded(),
        KeyMatch::StartingWith(prefix) => encoded.starts_with(prefix.encoded()),
    }
}
