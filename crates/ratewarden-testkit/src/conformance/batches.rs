//! Several policies: state of their own per policy, and batches decided
//! all or nothing, against the [`Ledger`](crate::ledger::Ledger) model.

use std::sync::Arc;
use std::time::Duration;

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::test_runner::TestRunner;
use ratewarden_core::{Algorithm, Clock, Key, KeyMatch, ManualClock, Policy, Store, Timestamp};

use super::props::{KEYS, Step, case_keys, config, fresh_case, on_proptest_thread, report, step};
use super::{SEC, Session, T0, key, quota};
use crate::model::Expected;

const W: u64 = 10 * SEC;

/// Cases of [`random_batches_match_the_model`] (`PROPTEST_CASES` overrides).
const BATCH_CASES: u32 = 96;

/// Two policies with the same algorithm, quota and key never share state,
/// and a reset of one (a key, or a prefix such as seed B's "every
/// endpoint of user 5") never clears the other's: `DELETE /rate/reset/5`
/// must leave `/ping`'s counter of client key `5` alone, also when both
/// are sliding logs. A policy of the same name but another
/// algorithm is another counter too (a changed algorithm starts afresh).
pub async fn policies_have_state_of_their_own(store: Arc<dyn Store>, algorithm: Algorithm) {
    let store = &*store;
    // The seed routes' names: a store may keep them in tables of their own.
    let a_name = super::seed_name(algorithm);
    let b_name = if a_name == "check" { "ping" } else { "check" };
    let a = Policy::new(a_name, algorithm, quota(3, W));
    let b = Policy::new(b_name, algorithm, quota(3, W));
    let other = Algorithm::ALL
        .into_iter()
        .find(|x| *x != algorithm)
        .unwrap_or(algorithm);
    let a_other = Policy::new(a_name, other, quota(3, W));
    let five = key(["5"]);
    let five_orders = key(["5", "/orders"]);
    let mut s = Session::of(store, a.clone());
    s.batch(&[(&a, &five, 2)], T0).await;
    s.batch(&[(&a, &five_orders, 3)], T0).await;
    s.batch(&[(&b, &five, 1)], T0).await;
    s.batch(&[(&a_other, &five, 1)], T0).await;
    for p in [&a, &b, &a_other] {
        s.status_of(p, &five, T0 + 1).await;
        s.status_of(p, &five_orders, T0 + 1).await;
    }
    // Every endpoint of user 5 under policy a: b and the other algorithm keep theirs.
    let cleared = s.reset_of(&a, KeyMatch::StartingWith(&five), T0 + 1).await;
    assert_eq!(
        cleared, 2,
        "{algorithm}: policy {a_name} had two keys in use"
    );
    for p in [&a, &b, &a_other] {
        let d = s.status_of(p, &five, T0 + 2).await;
        if p != &a {
            assert!(
                d.remaining < 3,
                "{algorithm}: resetting policy {a_name} cleared {} ({})",
                p.name,
                p.algorithm
            );
        }
    }
    assert_eq!(
        s.reset_of(&b, KeyMatch::Exactly(&five_orders), T0 + 2)
            .await,
        0,
        "{algorithm}: policy {b_name} never used [5, /orders]"
    );
    assert_eq!(
        s.reset_of(&b, KeyMatch::Exactly(&five), T0 + 2).await,
        1,
        "{algorithm}: an exact reset of {b_name}'s key"
    );
    s.status_of(&a_other, &five, T0 + 3).await;
}

/// A batch denied by one policy charges no other (hand-worked values),
/// a shadow policy never denies a batch, and a fixed window that counts
/// denied attempts counts them whichever policy denied.
pub async fn a_denied_batch_charges_nothing(store: Arc<dyn Store>, algorithm: Algorithm) {
    let store = &*store;
    let mine = Policy::new("mine", algorithm, quota(5, W));
    let tight = Policy::new("tight", Algorithm::SlidingLog, quota(1, W));
    let counting = Policy::new(
        "counting",
        Algorithm::FixedWindow,
        quota(10, W).counting_denied(),
    );
    let shadow = Policy::new("shadow", Algorithm::Gcra, quota(1, W)).in_shadow();
    let (k, g) = (key(["user"]), key(["global"]));
    let mut s = Session::of(store, mine.clone());
    let ok = s.batch(&[(&mine, &k, 2), (&tight, &g, 1)], T0).await;
    s.expect("both pass", &ok[0], Expected::Allowed, 3);
    let refused = s
        .batch(
            &[(&mine, &k, 1), (&tight, &g, 1), (&counting, &g, 1)],
            T0 + 1,
        )
        .await;
    s.expect(
        "mine alone would pass, uncharged",
        &refused[0],
        Expected::Allowed,
        3,
    );
    assert!(
        refused[1].retry_after().is_some(),
        "{algorithm}: the tight policy denies"
    );
    s.expect(
        "a counting fixed window counts its attempt",
        &refused[2],
        Expected::Allowed,
        9,
    );
    // Shadow: its would-be denial lets the batch through, charged elsewhere.
    s.batch(&[(&shadow, &g, 1)], T0 + 2).await;
    let through = s.batch(&[(&mine, &k, 3), (&shadow, &g, 1)], T0 + 2).await;
    s.expect("shadow never denies", &through[0], Expected::Allowed, 0);
    assert!(
        through[1].retry_after().is_some(),
        "{algorithm}: the shadow policy's own decision is a denial"
    );
    // A cost that can never pass denies the batch.
    let never = s
        .batch(&[(&mine, &k, 1), (&tight, &g, 2)], T0 + 3 * W)
        .await;
    s.expect("never from another policy", &never[0], Expected::Allowed, 5);
    s.status_of(&mine, &k, T0 + 3 * W).await;
    s.status_of(&tight, &g, T0 + 3 * W).await;
    s.status_of(&counting, &g, T0 + 3).await;
}

/// One random check: (policy index, key index, cost).
type RandomCheck = (usize, usize, u64);

/// A random batch case: policy quotas and a sequence of batches.
#[derive(Debug, Clone)]
struct BatchScenario {
    /// `(limit, window in ns)` of the algorithm under test's two policies.
    own: [(u64, u64); 2],
    start_nanos: u64,
    steps: Vec<(Step, Vec<RandomCheck>)>,
}

/// The case's policies: two of the algorithm under test (one counting
/// denied attempts when it is the fixed window), one enforcing policy of
/// every algorithm, and a shadow policy.
fn batch_policies(algorithm: Algorithm, own: [(u64, u64); 2]) -> Vec<Policy> {
    let first = quota(own[0].0, own[0].1);
    let first = if algorithm == Algorithm::FixedWindow {
        first.counting_denied()
    } else {
        first
    };
    let mut policies = vec![
        Policy::new("own", algorithm, first),
        Policy::new("own2", algorithm, quota(own[1].0, own[1].1)),
    ];
    for (i, a) in Algorithm::ALL.into_iter().enumerate() {
        policies.push(Policy::new(
            format!("mix{i}"),
            a,
            quota(2 + i as u64 % 2, SEC + i as u64 * 700_000_000),
        ));
    }
    policies.push(Policy::new("shadow", algorithm, quota(1, 2 * SEC)).in_shadow());
    policies
}

fn batch_scenario() -> impl Strategy<Value = BatchScenario> {
    let own = (0u64..=4, prop_oneof![Just(SEC), 1u64..=3 * SEC]);
    let check = (0usize..8, 0..KEYS, 1u64..=3);
    let start = prop_oneof![Just(T0), (0u64..=5_000_000_000).prop_map(|n| T0 + n),];
    (
        [own.clone(), own],
        start,
        vec((step(), vec(check, 1..=4)), 1..=24),
    )
        .prop_map(|(own, start_nanos, steps)| BatchScenario {
            own,
            start_nanos,
            steps,
        })
}

async fn batches_match(
    store: &dyn Store,
    algorithm: Algorithm,
    scenario: &BatchScenario,
) -> Result<(), String> {
    let policies = batch_policies(algorithm, scenario.own);
    let keys: [Key; KEYS] = case_keys(fresh_case());
    let mut session = Session::of(store, policies[0].clone());
    let clock = ManualClock::new(Timestamp::from_unix_nanos(scenario.start_nanos));
    for (step, checks) in &scenario.steps {
        let now = clock.now().as_unix_nanos();
        clock.advance(Duration::from_nanos(step.resolve(now, &policies[0].quota)));
        let t = clock.now().as_unix_nanos();
        let checks: Vec<(&Policy, &Key, u64)> = checks
            .iter()
            .map(|&(p, k, cost)| (&policies[p % policies.len()], &keys[k], cost))
            .collect();
        session.try_batch(&checks, t).await?;
    }
    for p in &policies {
        for k in &keys {
            let t = clock.now().as_unix_nanos();
            session.try_status_of(p, k, t).await?;
        }
    }
    Ok(())
}

/// Random batches of 1–4 checks over a mix of every algorithm (the one
/// under test twice, a shadow policy, keys shared between policies and
/// repeated within a batch) decide exactly as the all-or-nothing model.
pub async fn random_batches_match_the_model(store: Arc<dyn Store>, algorithm: Algorithm) {
    on_proptest_thread(move |rt| {
        let mut runner = TestRunner::new(config(
            BATCH_CASES,
            "proptest-regressions/conformance-random-batches.txt",
        ));
        let result = runner.run(&batch_scenario(), |case| {
            rt.block_on(batches_match(&*store, algorithm, &case))
                .map_err(TestCaseError::fail)
        });
        report(algorithm, result);
    })
    .await;
}
