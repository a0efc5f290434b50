//! The decision layer over the memory store and a failing store, with a
//! manual clock: all or nothing, shadow mode, fail open / closed per
//! policy, reload keeping counters.

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

use std::num::NonZeroU64;
use std::sync::Arc;
use std::time::Duration;

use ratewarden_core::{
    Algorithm, Key, KeyMatch, ManualClock, MemoryStore, Policy, Quota, Timestamp,
};
use ratewarden_limiter::{Basis, Check, CheckError, FailureMode, Limiter, PolicyDef, PolicySet};

const T0: u64 = 1_767_225_600;

fn def(name: &str, algorithm: Algorithm, limit: u64, failure: FailureMode) -> PolicyDef {
    let quota = Quota::new(limit, Duration::from_secs(60)).unwrap();
    PolicyDef::new(Policy::new(name, algorithm, quota), failure)
}

fn limiter(defs: Vec<PolicyDef>) -> (Limiter, ManualClock) {
    let clock = ManualClock::new(Timestamp::from_unix_secs(T0));
    let limiter = Limiter::new(
        Arc::new(MemoryStore::new()),
        Arc::new(clock.clone()),
        PolicySet::new(defs).unwrap(),
    );
    (limiter, clock)
}

fn key(s: &str) -> Key {
    Key::single(s).unwrap()
}

#[tokio::test]
async fn a_request_passes_only_when_every_policy_allows_it_and_a_denial_charges_none() {
    let (limiter, _) = limiter(vec![
        def("user", Algorithm::SlidingLog, 5, FailureMode::Open),
        def("global", Algorithm::Gcra, 2, FailureMode::Open),
    ]);
    let (alice, bob, all) = (key("alice"), key("bob"), key("all"));
    for user in [&alice, &bob] {
        let out = limiter
            .check(&[Check::one("user", user), Check::one("global", &all)])
            .await
            .unwrap();
        assert!(out.allowed);
    }
    let out = limiter
        .check(&[Check::one("user", &alice), Check::one("global", &all)])
        .await
        .unwrap();
    assert!(!out.allowed);
    let denied: Vec<&str> = out.denied_by().map(|r| r.policy.name()).collect();
    assert_eq!(denied, ["global"]);
    assert!(out.results[0].allowed(), "user alone would pass");
    assert_eq!(out.results[0].decision.remaining, 4, "and was not charged");
    assert!(out.retry_after().is_some());
    let status = limiter.status("user", &alice).await.unwrap();
    assert_eq!(status.decision.used, 1);
    assert_eq!(
        out.most_restrictive().unwrap().policy.name(),
        "global",
        "the smallest remaining"
    );
}

#[tokio::test]
async fn an_unknown_policy_decides_nothing() {
    let (limiter, _) = limiter(vec![def("a", Algorithm::Gcra, 1, FailureMode::Open)]);
    let k = key("k");
    let err = limiter
        .check(&[Check::one("a", &k), Check::one("nope", &k)])
        .await
        .unwrap_err();
    assert!(matches!(err, CheckError::UnknownPolicy(name) if name == "nope"));
    assert_eq!(limiter.status("a", &k).await.unwrap().decision.used, 0);
    assert!(matches!(
        limiter.status("nope", &k).await,
        Err(CheckError::UnknownPolicy(_))
    ));
}

#[tokio::test]
async fn a_shadow_policy_never_denies_and_reports_its_would_be_denial() {
    let shadow = PolicyDef {
        policy: def("shadow", Algorithm::FixedWindow, 1, FailureMode::Open)
            .policy
            .in_shadow(),
        ..def("shadow", Algorithm::FixedWindow, 1, FailureMode::Open)
    };
    let (limiter, _) = limiter(vec![
        shadow,
        def("real", Algorithm::Gcra, 10, FailureMode::Open),
    ]);
    let k = key("k");
    let checks = [Check::one("shadow", &k), Check::one("real", &k)];
    let first = limiter.check(&checks).await.unwrap();
    assert!(first.allowed && !first.results[0].shadow_denied);
    let second = limiter.check(&checks).await.unwrap();
    assert!(second.allowed, "shadow never denies");
    assert!(second.results[0].shadow_denied);
    assert!(second.results[0].allowed());
    assert_eq!(second.results[0].retry_after(), None);
    assert_eq!(limiter.status("real", &k).await.unwrap().decision.used, 2);
    assert_eq!(
        limiter.status("shadow", &k).await.unwrap().decision.used,
        1,
        "a would-be denial charges the shadow policy nothing"
    );
}

#[tokio::test]
async fn fail_open_needs_every_policy_of_the_batch_to_fail_open() {
    let policies = PolicySet::new([
        def("open", Algorithm::Gcra, 1, FailureMode::Open),
        def("closed", Algorithm::Gcra, 1, FailureMode::Closed),
    ])
    .unwrap();
    let limiter = Limiter::new(
        ratewarden_testkit::FailingStore::unavailable(),
        Arc::new(ManualClock::default()),
        policies,
    );
    let k = key("k");
    let out = limiter.check(&[Check::one("open", &k)]).await.unwrap();
    assert!(out.allowed);
    assert_eq!(out.results[0].basis, Basis::FailedOpen);
    for checks in [
        vec![Check::one("closed", &k)],
        vec![Check::one("open", &k), Check::one("closed", &k)],
    ] {
        assert!(matches!(
            limiter.check(&checks).await,
            Err(CheckError::Unavailable(_))
        ));
    }
    assert!(matches!(
        limiter.status("open", &k).await,
        Err(CheckError::Unavailable(_))
    ));
    assert!(matches!(
        limiter.reset("open", KeyMatch::Exactly(&k)).await,
        Err(CheckError::Unavailable(_))
    ));
}

#[tokio::test]
async fn a_reload_keeps_counters_applies_new_limits_and_a_new_algorithm_starts_afresh() {
    let (limiter, _) = limiter(vec![
        def("api", Algorithm::SlidingLog, 3, FailureMode::Open),
        def("old", Algorithm::Gcra, 3, FailureMode::Open),
    ]);
    let k = key("k");
    for _ in 0..2 {
        limiter.check(&[Check::one("api", &k)]).await.unwrap();
    }
    let changes = limiter.replace_policies(
        PolicySet::new([
            def("api", Algorithm::SlidingLog, 2, FailureMode::Open),
            def("new", Algorithm::Gcra, 3, FailureMode::Open),
        ])
        .unwrap(),
    );
    assert_eq!(changes.changed, ["api"]);
    assert_eq!(changes.added, ["new"]);
    assert_eq!(changes.removed, ["old"]);
    let out = limiter.check(&[Check::one("api", &k)]).await.unwrap();
    assert!(!out.allowed, "2 stored events meet the new limit of 2");
    limiter.replace_policies(
        PolicySet::new([def("api", Algorithm::Gcra, 2, FailureMode::Open)]).unwrap(),
    );
    let out = limiter.check(&[Check::one("api", &k)]).await.unwrap();
    assert!(out.allowed, "another algorithm: fresh state");
    assert!(matches!(
        limiter.check(&[Check::one("old", &k)]).await,
        Err(CheckError::UnknownPolicy(_))
    ));
}

#[tokio::test]
async fn repeated_checks_of_one_counter_count_together_and_costs_add() {
    let (limiter, clock) = limiter(vec![def("a", Algorithm::FixedWindow, 3, FailureMode::Open)]);
    let k = key("k");
    let two = Check {
        cost: NonZeroU64::new(2).unwrap(),
        ..Check::one("a", &k)
    };
    let out = limiter.check(&[two, two]).await.unwrap();
    assert!(!out.allowed, "2 + 2 > 3");
    assert_eq!(out.results.len(), 2);
    assert!(
        limiter
            .check(&[two, Check::one("a", &k)])
            .await
            .unwrap()
            .allowed
    );
    clock.advance(Duration::from_secs(60));
    assert_eq!(
        limiter.reset("a", KeyMatch::Exactly(&k)).await.unwrap(),
        0,
        "a window ago: nothing in use"
    );
    assert!(limiter.check(&[]).await.unwrap().allowed);
}

/// A check its own policy allowed, in a batch another policy denied, is
/// charged nothing and so not counted as `allowed`; shadow denials do not
/// show among the most-denied keys.
#[tokio::test]
async fn counts_follow_what_was_charged_and_shadow_denials_are_not_denied_keys() {
    let mut shadow = def("dry", Algorithm::FixedWindow, 0, FailureMode::Open);
    shadow.policy.mode = ratewarden_core::Mode::Shadow;
    let (limiter, clock) = limiter(vec![
        def("user", Algorithm::SlidingLog, 5, FailureMode::Open),
        def("global", Algorithm::FixedWindow, 1, FailureMode::Open),
        shadow,
    ]);
    let (alice, all) = (key("alice"), key("all"));
    for _ in 0..3 {
        limiter
            .check(&[
                Check::one("user", &alice),
                Check::one("global", &all),
                Check::one("dry", &alice),
            ])
            .await
            .unwrap();
    }
    let buckets = limiter
        .activity()
        .buckets(ratewarden_core::Clock::now(&clock));
    let counts = |name: &str| buckets.last().unwrap().policies.get(name).copied().unwrap();
    assert_eq!((counts("user").allowed, counts("user").denied), (1, 0));
    assert_eq!((counts("global").allowed, counts("global").denied), (1, 2));
    assert_eq!(counts("dry").shadow_denied, 3);
    let top = limiter.activity().most_denied(10);
    assert_eq!(top.len(), 1, "{top:?}");
    assert_eq!((top[0].policy.as_ref(), top[0].denied), ("global", 2));
}

/// At the memory store's bound a new key is a store failure: each
/// policy's failure mode answers it (open: allowed, not counted; closed:
/// refused), while the keys the store holds are decided exactly, and no
/// live counter is dropped to make room.
#[tokio::test]
async fn a_full_memory_store_answers_new_keys_by_failure_mode_and_old_keys_exactly() {
    let clock = ManualClock::new(Timestamp::from_unix_secs(T0));
    let store = MemoryStore::new().with_max_keys(NonZeroU64::new(2).unwrap());
    let limiter = Limiter::new(
        Arc::new(store),
        Arc::new(clock.clone()),
        PolicySet::new([
            def("open", Algorithm::FixedWindow, 2, FailureMode::Open),
            def("closed", Algorithm::FixedWindow, 2, FailureMode::Closed),
        ])
        .unwrap(),
    );
    let (a, b, new) = (key("a"), key("b"), key("new"));
    assert!(
        limiter
            .check(&[Check::one("open", &a)])
            .await
            .unwrap()
            .allowed
    );
    assert!(
        limiter
            .check(&[Check::one("closed", &b)])
            .await
            .unwrap()
            .allowed
    );
    let out = limiter.check(&[Check::one("open", &new)]).await.unwrap();
    assert!(out.allowed);
    assert_eq!(out.results[0].basis, Basis::FailedOpen);
    let refused = limiter.check(&[Check::one("closed", &new)]).await;
    assert!(
        matches!(&refused, Err(CheckError::Unavailable(e)) if e.to_string().contains("full")),
        "{refused:?}"
    );
    // The keys held: one more each, then denied, as without the bound.
    for (policy, k) in [("open", &a), ("closed", &b)] {
        let out = limiter.check(&[Check::one(policy, k)]).await.unwrap();
        assert_eq!((out.allowed, out.results[0].basis), (true, Basis::Counted));
        assert!(
            !limiter
                .check(&[Check::one(policy, k)])
                .await
                .unwrap()
                .allowed
        );
    }
    assert_eq!(limiter.store().entries_refused(), Some(2));
    assert_eq!(limiter.store().max_entries(), Some(2));
    // Two windows on, the held keys have expired: new keys fit again.
    clock.advance(Duration::from_secs(120));
    let out = limiter.check(&[Check::one("closed", &new)]).await.unwrap();
    assert_eq!((out.allowed, out.results[0].basis), (true, Basis::Counted));
}
