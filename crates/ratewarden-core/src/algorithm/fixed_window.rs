//! Fixed window (seed A, docs/semantics.md §2).
//!
//! `k = floor(t / W)`; windows are aligned to the Unix epoch. An attempt
//! of cost `c` is allowed iff `count[k] + c <= L`; an allowed attempt adds
//! `c` to `count[k]`. A denied one adds it too when the quota counts denied
//! attempts ([`Quota::counting_denied`], seed A: after L + 2 requests the
//! counter reads L + 2), and leaves the counter alone otherwise (the
//! default for policies). On denial `retry_after = (k+1)·W − t`.

use std::time::Duration;

use crate::quota::MAX_COUNT;
use crate::{Attempt, Decision, Outcome, Quota, Timestamp};

/// The counter of one key: which window it belongs to and its count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FixedWindowState {
    /// `k = floor(t / W)`.
    pub window: u64,
    /// Units attempted in window `k`, refused ones included.
    pub count: u64,
}

/// The index `k = floor(t / W)` of the window holding `now`.
pub fn window_index(quota: &Quota, now: Timestamp) -> u64 {
    now.as_unix_nanos() / quota.window_nanos()
}

/// The first instant of window `k`, `k·W`.
pub fn window_start(quota: &Quota, window: u64) -> Timestamp {
    Timestamp::from_unix_nanos(window.saturating_mul(quota.window_nanos()))
}

/// Decides `attempt` given the key's stored `state` (`None`: no counter).
///
/// Returns the decision and the state to store; `None` means "leave the
/// store unchanged" (a cost that can never pass changes nothing).
pub fn decide(
    state: Option<FixedWindowState>,
    quota: &Quota,
    attempt: Attempt,
) -> (Decision, Option<FixedWindowState>) {
    let k = window_index(quota, attempt.now);
    let before = count_in(state, k);
    let cost = attempt.cost.get();
    if cost > quota.limit() {
        return (decision(quota, attempt.now, before, Outcome::Never), None);
    }
    let count = before.saturating_add(cost).min(MAX_COUNT);
    if count > quota.limit() && !quota.counts_denied() {
        let retry_after = window_end(quota, attempt.now);
        let outcome = Outcome::Denied { retry_after };
        return (decision(quota, attempt.now, before, outcome), None);
    }
    let outcome = if count <= quota.limit() {
        Outcome::Allowed
    } else {
        Outcome::Denied {
            retry_after: window_end(quota, attempt.now),
        }
    };
    let next = FixedWindowState { window: k, count };
    (decision(quota, attempt.now, count, outcome), Some(next))
}

/// What a request of cost 1 would get now, without recording anything.
pub fn status(state: Option<FixedWindowState>, quota: &Quota, now: Timestamp) -> Decision {
    let count = count_in(state, window_index(quota, now));
    let outcome = if quota.limit() == 0 {
        Outcome::Never
    } else if count < quota.limit() {
        Outcome::Allowed
    } else {
        Outcome::Denied {
            retry_after: window_end(quota, now),
        }
    };
    decision(quota, now, count, outcome)
}

/// Whether `state` still holds usage at `now` (differs from no counter):
/// a non-zero count of the current window.
pub fn in_use(state: FixedWindowState, quota: &Quota, now: Timestamp) -> bool {
    count_in(Some(state), window_index(quota, now)) > 0
}

fn count_in(state: Option<FixedWindowState>, k: u64) -> u64 {
    state.filter(|s| s.window == k).map_or(0, |s| s.count)
}

/// Time from `now` to the end of its window, `(k+1)·W − t`; always > 0.
fn window_end(quota: &Quota, now: Timestamp) -> Duration {
    let w = quota.window_nanos();
    Duration::from_nanos(w - now.as_unix_nanos() % w)
}

fn decision(quota: &Quota, now: Timestamp, count: u64, outcome: Outcome) -> Decision {
    Decision {
        outcome,
        limit: quota.limit(),
        remaining: quota.limit().saturating_sub(count),
        used: count,
        reset_after: window_end(quota, now),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::num::NonZeroU64;

    const SEC: u64 = 1_000_000_000;

    fn quota(limit: u64, window_secs: u64) -> Quota {
        Quota::new(limit, Duration::from_secs(window_secs)).unwrap()
    }

    fn at(nanos: u64) -> Attempt {
        Attempt::one(Timestamp::from_unix_nanos(nanos))
    }

    /// Runs attempts one after another, threading the state.
    fn run(q: &Quota, times: &[u64]) -> Vec<Decision> {
        let mut state = None;
        times
            .iter()
            .map(|&t| {
                let (d, next) = decide(state, q, at(t));
                state = next.or(state);
                d
            })
            .collect()
    }

    #[test]
    fn allows_limit_attempts_per_window_then_denies_until_the_window_ends() {
        let q = quota(3, 60).counting_denied();
        let t0 = 1_767_225_600 * SEC; // 2026-01-01T00:00:00Z, a window start
        let ds = run(&q, &[t0, t0 + SEC, t0 + 2 * SEC, t0 + 45 * SEC]);
        assert!(ds[..3].iter().all(Decision::allowed));
        assert_eq!(ds[2].remaining, 0);
        assert_eq!(ds[3].retry_after(), Some(Duration::from_secs(15)));
        assert_eq!(ds[3].used, 4);
    }

    #[test]
    fn the_last_nanosecond_belongs_to_the_old_window_and_the_next_starts_fresh() {
        let q = quota(1, 60);
        let t0 = 60 * SEC;
        let ds = run(&q, &[t0, t0 + 60 * SEC - 1, t0 + 60 * SEC]);
        assert!(ds[0].allowed());
        assert_eq!(ds[1].retry_after(), Some(Duration::from_nanos(1)));
        assert!(ds[2].allowed(), "first nanosecond of the next window");
        assert_eq!(ds[2].used, 1);
    }

    #[test]
    fn refused_attempts_are_counted_when_the_quota_counts_denied() {
        let q = quota(3, 60).counting_denied();
        let ds = run(&q, &[0, 1, 2, 3, 4]);
        assert_eq!(
            ds[4].used, 5,
            "after L + 2 requests the counter reads L + 2"
        );
        assert_eq!(ds[4].remaining, 0);
    }

    #[test]
    fn refused_attempts_are_not_counted_by_default() {
        let q = quota(3, 60);
        let ds = run(&q, &[0, 1, 2, 3, 4]);
        assert_eq!(ds[4].used, 3);
        assert_eq!(
            ds[4].retry_after(),
            Some(Duration::from_nanos(60 * SEC - 4))
        );
        // A large denied cost leaves room for a small one.
        let big = Attempt {
            now: Timestamp::EPOCH,
            cost: NonZeroU64::new(3).unwrap(),
        };
        let state = Some(FixedWindowState {
            window: 0,
            count: 1,
        });
        let (d, next) = decide(state, &q, big);
        assert_eq!(
            (d.allowed(), d.remaining, d.used, next),
            (false, 2, 1, None)
        );
    }

    #[test]
    fn a_cost_above_the_limit_is_never_and_changes_nothing() {
        let q = quota(3, 60);
        let attempt = Attempt {
            now: Timestamp::EPOCH,
            cost: NonZeroU64::new(4).unwrap(),
        };
        let (d, next) = decide(None, &q, attempt);
        assert_eq!(d.outcome, Outcome::Never);
        assert_eq!(next, None);
    }

    #[test]
    fn a_limit_of_zero_denies_everything() {
        let q = quota(0, 60);
        let (d, next) = decide(None, &q, at(5));
        assert_eq!(d.outcome, Outcome::Never);
        assert_eq!(next, None);
        assert_eq!(status(None, &q, Timestamp::EPOCH).outcome, Outcome::Never);
    }

    #[test]
    fn status_reads_without_counting_and_ignores_old_windows() {
        let q = quota(2, 10);
        let state = Some(FixedWindowState {
            window: 1,
            count: 2,
        });
        let now = Timestamp::from_unix_secs(15);
        let d = status(state, &q, now);
        assert_eq!(d.used, 2);
        assert_eq!(d.retry_after(), Some(Duration::from_secs(5)));
        let later = status(state, &q, Timestamp::from_unix_secs(20));
        assert_eq!((later.used, later.remaining), (0, 2));
        assert!(later.allowed());
    }

    #[test]
    fn huge_counts_and_windows_saturate_instead_of_wrapping() {
        let q = Quota::new(MAX_COUNT - 1, Duration::from_nanos(u64::MAX)).unwrap();
        let state = Some(FixedWindowState {
            window: 0,
            count: MAX_COUNT - 1,
        });
        let big = Attempt {
            now: Timestamp::from_unix_nanos(u64::MAX - 1),
            cost: NonZeroU64::new(MAX_COUNT - 1).unwrap(),
        };
        let (d, next) = decide(state, &q.counting_denied(), big);
        assert_eq!(next.unwrap().count, MAX_COUNT);
        assert_eq!(d.retry_after(), Some(Duration::from_nanos(1)));
    }
}
