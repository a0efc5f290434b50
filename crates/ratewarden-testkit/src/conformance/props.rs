//! Property tests: random request sequences against the model, and the
//! minimality of `retry_after`.
//!
//! One store serves every case; each case gets keys no other case uses.
//! Times never go backwards within a case. Steps favour the interesting
//! instants: 0, 1 ns, exact window boundaries and `W ± 1 ns`, and GCRA's
//! emission interval `T ± 1 ns`.

use std::num::NonZeroU64;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence, TestError, TestRunner};
use ratewarden_core::{
    Acquire, Algorithm, Batch, Clock, Decision, Key, ManualClock, Outcome, Policy, Quota, Store,
    Timestamp,
};
use tokio::runtime::Runtime;

use super::{Session, describe_quota, key, quota};

/// Cases of [`random_sequences_match_the_model`] (`PROPTEST_CASES` overrides).
const MODEL_CASES: u32 = 128;
/// Cases of [`retry_after_is_the_shortest_wait`] (`PROPTEST_CASES` overrides).
const RETRY_CASES: u32 = 64;
/// Denials per case whose `retry_after` is replayed.
const RETRIES_PER_CASE: usize = 3;
/// Keys per case.
pub(super) const KEYS: usize = 3;

/// One random test case: a quota and requests on a few keys.
#[derive(Debug, Clone)]
struct Scenario {
    limit: u64,
    window_nanos: u64,
    burst: Option<u64>,
    /// Fixed window only: whether denied attempts are counted.
    count_denied: bool,
    start_nanos: u64,
    requests: Vec<Request>,
}

#[derive(Debug, Clone, Copy)]
pub(super) struct Request {
    /// Which of the case's [`KEYS`] keys.
    key: usize,
    /// How far the clock moves before the request.
    step: Step,
    op: Op,
}

#[derive(Debug, Clone, Copy)]
enum Op {
    Acquire { cost: u64 },
    Status,
}

/// A clock step, resolved against the current time and the quota so that
/// shrinking keeps it meaningful.
#[derive(Debug, Clone, Copy)]
pub(super) enum Step {
    /// The same instant.
    Same,
    /// A few nanoseconds.
    Nanos(u64),
    /// `windows·W + delta` ns (`W − 1`, `W`, `W + 1`, `2·W ± 1`, …).
    Windows { windows: u64, delta: i8 },
    /// To the next window boundary, `+ delta` ns.
    NextBoundary { delta: i8 },
    /// `intervals·T + delta` ns, `T` GCRA's emission interval.
    Intervals { intervals: u64, delta: i8 },
    /// `W · ppm / 1_000_000` ns: anywhere inside a window.
    Within { ppm: u64 },
}

impl Scenario {
    fn quota(&self) -> Quota {
        let q = quota(self.limit, self.window_nanos);
        let q = if self.count_denied {
            q.counting_denied()
        } else {
            q
        };
        match self.burst {
            Some(b) => q.with_burst(b),
            None => q,
        }
    }
}

impl Step {
    /// The step in nanoseconds from `now` (never negative).
    pub(super) fn resolve(self, now: u64, quota: &Quota) -> u64 {
        let w = quota.window_nanos();
        let offset = |base: u64, delta: i8| -> u64 { base.saturating_add_signed(i64::from(delta)) };
        match self {
            Step::Same => 0,
            Step::Nanos(n) => n,
            Step::Windows { windows, delta } => offset(windows * w, delta),
            Step::NextBoundary { delta } => {
                let boundary = (now / w + 1) * w;
                offset(boundary, delta).saturating_sub(now)
            }
            Step::Intervals { intervals, delta } => {
                let t = (w / quota.limit().max(1)).max(1);
                offset(intervals * t, delta)
            }
            Step::Within { ppm } => w / 1_000_000 * ppm + w % 1_000_000 * ppm / 1_000_000,
        }
    }
}

fn scenario(algorithm: Algorithm) -> impl Strategy<Value = Scenario> {
    let window = prop_oneof![
        3 => 1u64..=4,
        1 => Just(10u64),
        1 => Just(1_000u64),
        1 => Just(1_000_000u64),
        2 => Just(1_000_000_000u64),
        3 => 1u64..=3_000_000_000,
        1 => Just(3_000_000_000u64),
    ];
    let burst = if algorithm == Algorithm::Gcra {
        proptest::option::of(0u64..=8).boxed()
    } else {
        Just(None).boxed()
    };
    let count_denied = if algorithm == Algorithm::FixedWindow {
        any::<bool>().boxed()
    } else {
        Just(false).boxed()
    };
    let start = prop_oneof![
        Just(0u64),
        0u64..=1_000_000_000_000_000,
        (0u64..=5_000_000_000).prop_map(|n| 1_767_225_600_000_000_000 + n),
    ];
    (
        0u64..=6,
        window,
        burst,
        count_denied,
        start,
        vec(request(), 1..=40),
    )
        .prop_map(
            |(limit, window_nanos, burst, count_denied, start_nanos, requests)| Scenario {
                limit,
                window_nanos,
                burst,
                count_denied,
                start_nanos,
                requests,
            },
        )
}

/// A clock step, mostly to the instants that matter.
pub(super) fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => Just(Step::Same),
        2 => (1u64..=3).prop_map(Step::Nanos),
        3 => (0u64..=2, -1i8..=1).prop_map(|(windows, delta)| Step::Windows { windows, delta }),
        3 => (-1i8..=1).prop_map(|delta| Step::NextBoundary { delta }),
        2 => (0u64..=3, -1i8..=1)
            .prop_map(|(intervals, delta)| Step::Intervals { intervals, delta }),
        3 => (0u64..1_000_000).prop_map(|ppm| Step::Within { ppm }),
    ]
}

fn request() -> impl Strategy<Value = Request> {
    let op = prop_oneof![
        8 => (1u64..=3).prop_map(|cost| Op::Acquire { cost }),
        1 => Just(Op::Status),
    ];
    (0..KEYS, step(), op).prop_map(|(key, step, op)| Request { key, step, op })
}

/// A number no earlier case of this process used.
pub(super) fn fresh_case() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// The keys of one case, in three shapes stores may keep differently: a
/// one-part UTF-8 key, seed B's `(user id, endpoint)`, and a non-UTF-8 part.
pub(super) fn case_keys(case: u64) -> [Key; KEYS] {
    [
        key([format!("case{case}")]),
        key([case.to_string().as_bytes(), b"/endpoint"]),
        key([format!("case{case}").as_bytes(), b"k\xff\x00"]),
    ]
}

/// The resolved time of every request of `scenario`, in order.
fn times(scenario: &Scenario) -> Vec<u64> {
    let quota = scenario.quota();
    let clock = ManualClock::new(Timestamp::from_unix_nanos(scenario.start_nanos));
    scenario
        .requests
        .iter()
        .map(|r| {
            let now = clock.now().as_unix_nanos();
            clock.advance(Duration::from_nanos(r.step.resolve(now, &quota)));
            clock.now().as_unix_nanos()
        })
        .collect()
}

/// Runs one case against the store and the model, decision by decision.
async fn matches_model(
    store: &dyn Store,
    algorithm: Algorithm,
    scenario: &Scenario,
) -> Result<(), String> {
    let case = fresh_case();
    let keys = case_keys(case);
    // Alternate between the seed route's name and another one: a store
    // may keep them in different tables.
    let mut session = if case.is_multiple_of(2) {
        Session::new(store, algorithm, scenario.quota())
    } else {
        Session::of(
            store,
            Policy::new("conformance", algorithm, scenario.quota()),
        )
    };
    for (request, t) in scenario.requests.iter().zip(times(scenario)) {
        let key = &keys[request.key];
        match request.op {
            Op::Acquire { cost } => session.try_acquire(key, t, cost).await?,
            Op::Status => session.try_status(key, t).await?,
        };
    }
    Ok(())
}

/// Random request sequences (a few keys, limits 0..=6, windows from 1 ns
/// to 3 s, costs 1..=3, GCRA bursts 0..=8) decide exactly as the model:
/// outcome, `retry_after` to the nanosecond, `remaining`.
pub async fn random_sequences_match_the_model(store: Arc<dyn Store>, algorithm: Algorithm) {
    on_proptest_thread(move |rt| {
        let mut runner = TestRunner::new(config(
            MODEL_CASES,
            "proptest-regressions/conformance-random-sequences.txt",
        ));
        let result = runner.run(&scenario(algorithm), |case| {
            rt.block_on(matches_model(&*store, algorithm, &case))
                .map_err(TestCaseError::fail)
        });
        report(algorithm, result);
    })
    .await;
}

async fn acquire(
    store: &dyn Store,
    policy: &Policy,
    key: &Key,
    t: u64,
    cost: u64,
) -> Result<Decision, String> {
    let cost = NonZeroU64::new(cost).ok_or("cost 0")?;
    let check = Acquire {
        policy,
        key,
        cost,
        audit: None,
    };
    let batch = Batch::one(Timestamp::from_unix_nanos(t), check);
    let decisions = store
        .acquire(&batch)
        .await
        .map_err(|e| format!("acquire {key} at {t} failed: {e}"))?;
    decisions
        .first()
        .copied()
        .ok_or_else(|| format!("acquire {key} at {t}: no decision"))
}

/// Runs one case; for the first few denials, replays the key's history
/// (the denial included) into two fresh keys and repeats the request at
/// `t + retry_after` (must pass) and `t + retry_after − 1 ns` (must not).
async fn retry_after_holds(
    store: &dyn Store,
    algorithm: Algorithm,
    scenario: &Scenario,
) -> Result<(), String> {
    let policy = Policy::new(super::seed_name(algorithm), algorithm, scenario.quota());
    let keys = case_keys(fresh_case());
    let mut history: [Vec<(u64, u64)>; KEYS] = Default::default();
    let mut replayed = 0;
    for (request, t) in scenario.requests.iter().zip(times(scenario)) {
        let key = &keys[request.key];
        let cost = match request.op {
            Op::Status => {
                store
                    .status(&policy, key, Timestamp::from_unix_nanos(t))
                    .await
                    .map_err(|e| format!("status {key} at {t} failed: {e}"))?;
                continue;
            }
            Op::Acquire { cost } => cost,
        };
        let decision = acquire(store, &policy, key, t, cost).await?;
        let past = &mut history[request.key];
        past.push((t, cost));
        let Outcome::Denied { retry_after } = decision.outcome else {
            continue;
        };
        if replayed == RETRIES_PER_CASE {
            continue;
        }
        replayed += 1;
        let r = u64::try_from(retry_after.as_nanos())
            .map_err(|_| format!("retry_after {retry_after:?} is out of range"))?;
        let describe = || {
            format!(
                "{algorithm} ({}): history of the key (t ns, cost), the last one denied \
                 with retry_after {r} ns: {past:?}",
                describe_quota(&policy.quota)
            )
        };
        if r == 0 {
            return Err(format!("{}\na denial with retry_after 0", describe()));
        }
        let at_r = case_keys(fresh_case())[request.key].clone();
        let before_r = case_keys(fresh_case())[request.key].clone();
        for &(t_i, c_i) in past.iter() {
            acquire(store, &policy, &at_r, t_i, c_i).await?;
            acquire(store, &policy, &before_r, t_i, c_i).await?;
        }
        let passes = acquire(store, &policy, &at_r, t + r, cost).await?;
        if !passes.allowed() {
            return Err(format!(
                "{}\nthe same request at t + retry_after = {} ns did not pass: {:?}",
                describe(),
                t + r,
                passes.outcome
            ));
        }
        let early = acquire(store, &policy, &before_r, t + r - 1, cost).await?;
        if early.allowed() {
            return Err(format!(
                "{}\nthe same request at t + retry_after − 1 ns = {} ns passed already",
                describe(),
                t + r - 1
            ));
        }
    }
    Ok(())
}

/// A denial's `retry_after` is the shortest wait: replayed into fresh
/// keys, the request passes at `t + retry_after` and not 1 ns earlier.
pub async fn retry_after_is_the_shortest_wait(store: Arc<dyn Store>, algorithm: Algorithm) {
    on_proptest_thread(move |rt| {
        let mut runner = TestRunner::new(config(
            RETRY_CASES,
            "proptest-regressions/conformance-retry-after.txt",
        ));
        let result = runner.run(&scenario(algorithm), |case| {
            rt.block_on(retry_after_holds(&*store, algorithm, &case))
                .map_err(TestCaseError::fail)
        });
        report(algorithm, result);
    })
    .await;
}

/// `cases` cases unless `PROPTEST_CASES` says otherwise; failing seeds are
/// kept in `file`, relative to the crate under test.
pub(super) fn config(cases: u32, file: &'static str) -> Config {
    let mut config = Config {
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(file))),
        ..Config::default()
    };
    if std::env::var_os("PROPTEST_CASES").is_none() {
        config.cases = cases;
    }
    config
}

pub(super) fn report<T: std::fmt::Debug>(algorithm: Algorithm, result: Result<(), TestError<T>>) {
    match result {
        Ok(()) => {}
        Err(TestError::Fail(reason, case)) => {
            panic!("{algorithm}: {reason}\nminimal failing case: {case:#?}")
        }
        Err(TestError::Abort(reason)) => panic!("{algorithm}: proptest aborted: {reason}"),
    }
}

/// Runs `body` on a blocking thread with a current-thread runtime of its
/// own (proptest is synchronous; the store is async), and re-raises its
/// panic here so the test fails with the original message.
pub(super) async fn on_proptest_thread<F>(body: F)
where
    F: FnOnce(&Runtime) + Send + 'static,
{
    let joined = tokio::task::spawn_blocking(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a current-thread tokio runtime");
        body(&rt);
    })
    .await;
    if let Err(e) = joined {
        match e.try_into_panic() {
            Ok(payload) => std::panic::resume_unwind(payload),
            Err(e) => panic!("the proptest thread did not finish: {e}"),
        }
    }
}
