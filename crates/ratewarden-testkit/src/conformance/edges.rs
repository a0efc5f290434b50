//! The edge cases of docs/semantics.md §2, per algorithm: window edges to the
//! nanosecond, costs that can never pass, limits of 0 and 1, and values at
//! the ends of the integer ranges.

use std::sync::Arc;

use ratewarden_core::{Algorithm, Store};

use super::{SEC, Session, T0, key, quota};
use crate::model::{Expected, MAX_COUNT};

const W: u64 = 60 * SEC;

fn denied(retry_after_ns: u64) -> Expected {
    Expected::Denied {
        retry_after_ns: u128::from(retry_after_ns),
    }
}

/// The first and last nanosecond of a window, and an event exactly `W`
/// old, with the values docs/semantics.md §2 gives worked out by hand; then
/// every nanosecond around several edges, compared with the model.
pub async fn window_edges_follow_the_spec(store: Arc<dyn Store>, algorithm: Algorithm) {
    let store = &*store;
    let k = key(["edges"]);
    let mut s = Session::new(store, algorithm, quota(2, W));
    match algorithm {
        Algorithm::FixedWindow => {
            let d = s.acquire(&k, T0, 1).await;
            s.expect("first nanosecond of a window", &d, Expected::Allowed, 1);
            let d = s.acquire(&k, T0 + W - 1, 1).await;
            s.expect("last nanosecond of the window", &d, Expected::Allowed, 0);
            let d = s.acquire(&k, T0 + W - 1, 1).await;
            s.expect("over the limit on the last nanosecond", &d, denied(1), 0);
            let d = s.acquire(&k, T0 + W, 2).await;
            s.expect(
                "first nanosecond of the next window",
                &d,
                Expected::Allowed,
                0,
            );
            let d = s.acquire(&k, T0 + W, 1).await;
            s.expect("a full fresh window", &d, denied(W), 0);
        }
        Algorithm::SlidingLog => {
            s.acquire(&k, T0 + 5 * SEC, 1).await;
            s.acquire(&k, T0 + 10 * SEC, 1).await;
            let d = s.acquire(&k, T0 + 5 * SEC + W - 1, 1).await;
            s.expect("an event W − 1 ns old still counts", &d, denied(1), 0);
            let d = s.acquire(&k, T0 + 5 * SEC + W, 1).await;
            s.expect("an event exactly W old has left", &d, Expected::Allowed, 0);
            let d = s.acquire(&k, T0 + 10 * SEC + W, 2).await;
            // Live: the event of 5 s + W only (10 s is exactly W old);
            // j = n + c − L = 1, so wait until 5 s + 2·W.
            s.expect("j-th oldest live event", &d, denied(W - 5 * SEC), 1);
        }
        Algorithm::SlidingWindow => {
            let d = s.acquire(&k, T0, 2).await;
            s.expect("first nanosecond of a window", &d, Expected::Allowed, 0);
            // curr + c > L: (k+1)·W − t + W − floor((L − c)·W / curr).
            let d = s.acquire(&k, T0 + W - 1, 1).await;
            s.expect("last nanosecond of the window", &d, denied(1 + W / 2), 0);
            // prev = 2 weighs fully: W − floor((L − curr − c)·W / prev) − 0.
            let d = s.acquire(&k, T0 + W, 1).await;
            s.expect("first nanosecond of the next window", &d, denied(W / 2), 0);
            let d = s.acquire(&k, T0 + W + W / 2 - 1, 1).await;
            s.expect("one nanosecond before prev weighs 1", &d, denied(1), 0);
            let d = s.acquire(&k, T0 + W + W / 2, 1).await;
            s.expect("prev weighs exactly 1", &d, Expected::Allowed, 0);
        }
        Algorithm::Gcra => {
            // T = W / L = 30 s, B = 2.
            let d = s.acquire(&k, T0, 2).await;
            s.expect("a full bucket takes the burst", &d, Expected::Allowed, 0);
            let d = s.acquire(&k, T0 + W / 2 - 1, 1).await;
            s.expect("one nanosecond before the next emission", &d, denied(1), 0);
            let d = s.acquire(&k, T0 + W / 2, 1).await;
            s.expect(
                "exactly one emission interval later",
                &d,
                Expected::Allowed,
                0,
            );
            let d = s.acquire(&k, T0 + W / 2, 2).await;
            s.expect("two units need two intervals", &d, denied(W), 0);
        }
    }

    // Every nanosecond around three window edges, costs 1 and 2, L = 3.
    let k = key(["edges", "sweep"]);
    let mut s = Session::new(store, algorithm, quota(3, W));
    for edge in [T0, T0 + W, T0 + 2 * W] {
        for t in edge - 2..=edge + 2 {
            s.acquire(&k, t, 1).await;
            s.acquire(&k, t, 2).await;
            s.status(&k, t).await;
        }
    }
    // Windows of 1, 2 and 3 ns: every nanosecond is an edge.
    for w in [1u64, 2, 3] {
        let k = key(["edges".as_bytes(), &w.to_be_bytes()]);
        let mut s = Session::new(store, algorithm, quota(2, w));
        for t in T0..T0 + 8 {
            s.acquire(&k, t, 1).await;
            s.acquire(&k, t, 1).await;
            s.acquire(&k, t, 2).await;
        }
    }
}

/// A cost above the limit (GCRA: above the burst) is `Never` and changes
/// nothing: a following status shows no usage and the full limit passes.
pub async fn a_cost_above_the_limit_is_never_and_changes_nothing(
    store: Arc<dyn Store>,
    algorithm: Algorithm,
) {
    let store = &*store;
    let mut cases = vec![(quota(3, W), vec![4, 5, u64::MAX])];
    if algorithm == Algorithm::Gcra {
        cases.push((quota(5, W).with_burst(2), vec![3, 5, 6]));
    }
    for (i, (q, costs)) in cases.into_iter().enumerate() {
        let full = if algorithm == Algorithm::Gcra {
            q.burst()
        } else {
            q.limit()
        };
        let k = key(["never".as_bytes(), &[i as u8]]);
        let mut s = Session::new(store, algorithm, q);
        for &cost in &costs {
            let d = s.acquire(&k, T0 + 1, cost).await;
            s.expect("a cost that can never pass", &d, Expected::Never, full);
        }
        let d = s.status(&k, T0 + 1).await;
        s.expect(
            "status after Never shows no usage",
            &d,
            Expected::Allowed,
            full,
        );
        assert_eq!(
            s.reset(&k, T0 + 1).await,
            0,
            "{algorithm}: Never stored state for {k}"
        );
        s.acquire(&k, T0 + 2, 1).await;
        for &cost in &costs {
            let d = s.acquire(&k, T0 + 3, cost).await;
            s.expect("Never after some usage", &d, Expected::Never, full - 1);
        }
        let d = s.acquire(&k, T0 + 3, full - 1).await;
        s.expect("the rest still passes", &d, Expected::Allowed, 0);
    }
}

/// A limit of 0 is a kill switch: every request and every status is
/// `Never`, remaining 0, and nothing is stored.
pub async fn a_limit_of_zero_denies_everything(store: Arc<dyn Store>, algorithm: Algorithm) {
    let store = &*store;
    let quotas = [quota(0, W), quota(0, 1), quota(0, W).with_burst(4)];
    for (i, q) in quotas.into_iter().enumerate() {
        let k = key(["zero".as_bytes(), &[i as u8]]);
        let mut s = Session::new(store, algorithm, q);
        for t in [0, 1, T0, T0 + W - 1, T0 + W, i64::MAX as u64] {
            let d = s.status(&k, t).await;
            s.expect("status under a limit of 0", &d, Expected::Never, 0);
            for cost in [1, 2, u64::MAX] {
                let d = s.acquire(&k, t, cost).await;
                s.expect("a limit of 0", &d, Expected::Never, 0);
            }
        }
        assert_eq!(
            s.reset(&k, T0).await,
            0,
            "{algorithm}: a limit of 0 stored state"
        );
    }
}

/// A limit of 1: one unit per window (GCRA: per emission interval).
pub async fn a_limit_of_one_matches_the_model(store: Arc<dyn Store>, algorithm: Algorithm) {
    let store = &*store;
    let w = 10 * SEC;
    let k = key(["one"]);
    let mut s = Session::new(store, algorithm, quota(1, w));
    let d = s.acquire(&k, T0 + 3, 1).await;
    s.expect("the first request", &d, Expected::Allowed, 0);
    let d = s.acquire(&k, T0 + 3, 2).await;
    s.expect("cost 2 under a limit of 1", &d, Expected::Never, 0);
    let d = s.acquire(&k, T0 + 3, 1).await;
    assert!(
        d.retry_after().is_some(),
        "{algorithm}: a second unit within one window was not denied: {d:?}"
    );
    let times = [
        T0 + 4,
        T0 + w - 1,
        T0 + w,
        T0 + w + 2,
        T0 + w + 3,
        T0 + w + 4,
        T0 + 2 * w - 1,
        T0 + 2 * w + w / 2,
        T0 + 2 * w + w / 2 + 1,
        T0 + 4 * w,
        T0 + 4 * w,
    ];
    for t in times {
        s.status(&k, t).await;
        s.acquire(&k, t, 1).await;
    }
}

/// Limits near `i64::MAX − 1`, windows near `u64::MAX` ns and times near
/// `i64::MAX` ns: nothing panics or wraps, and every decision matches the
/// model (counts saturate at `i64::MAX`, GCRA instants at `i64::MAX` ns).
///
/// Every quota runs to its first mismatch and the check reports all of
/// them at the end, so one fault does not hide another.
///
/// Sliding log costs stay at most 100: a store may record one row per
/// unit (SQLite does), so a huge allowed cost would take forever.
pub async fn huge_values_never_panic_and_match_the_model(
    store: Arc<dyn Store>,
    algorithm: Algorithm,
) {
    const I64: u64 = i64::MAX as u64;
    let store = &*store;
    let top = MAX_COUNT - 1; // the largest limit a Quota takes
    let windows = [
        u64::MAX,
        u64::MAX - 1,
        I64 + 1,
        I64,
        I64 - 1,
        u64::MAX / 3 + 1,
        u64::MAX / 8 * 3,
        1_000_000_007,
        2,
        1,
    ];
    let limits = [top, top - 1, 3, 1];
    let bursts: &[Option<u64>] = if algorithm == Algorithm::Gcra {
        &[None, Some(1), Some(top)]
    } else {
        &[None]
    };
    let mut sessions = 0u32;
    let mut failures: Vec<String> = Vec::new();
    let mut first_in_full = None;
    for w in windows {
        for l in limits {
            for &burst in bursts {
                sessions += 1;
                let mut q = quota(l, w);
                if let Some(b) = burst {
                    q = q.with_burst(b);
                }
                let k = key(["huge".as_bytes(), &sessions.to_be_bytes()]);
                let mut times: Vec<u64> =
                    [0, 1, w - 1, w, w.saturating_add(1), I64 / 2, I64 - 1, I64]
                        .into_iter()
                        .filter(|&t| t <= I64)
                        .collect();
                times.sort_unstable();
                times.dedup();
                let costs: Vec<u64> = if algorithm == Algorithm::SlidingLog {
                    vec![1, 2, 100, l + 1, u64::MAX]
                } else {
                    vec![1, 2, l, l, l + 1, u64::MAX]
                };
                let mut s = Session::new(store, algorithm, q);
                let run = async {
                    for t in times {
                        s.try_status(&k, t).await?;
                        for &cost in &costs {
                            s.try_acquire(&k, t, cost).await?;
                        }
                        s.try_status(&k, t).await?;
                    }
                    Ok::<(), String>(())
                };
                if let Err(e) = run.await {
                    let lines: Vec<&str> = e.lines().collect();
                    let tail = lines[lines.len().saturating_sub(3)..].join("\n    ");
                    failures.push(format!("{}\n    {tail}", lines.first().unwrap_or(&"")));
                    first_in_full.get_or_insert(e);
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {sessions} huge-value sessions disagree with the model:\n{}\n\nthe first one in full:\n{}",
        failures.len(),
        failures.join("\n"),
        first_in_full.unwrap_or_default(),
    );
}
