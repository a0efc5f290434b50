//! Sliding window counter: the two-counter approximation (docs/semantics.md §2).
//!
//! `k = floor(t / W)`, `elapsed = t − k·W`, `prev = count[k−1]`,
//! `curr = count[k]`. The weighted load is `prev·(W − elapsed) + curr·W`
//! (the previous window's count, weighted by how much of it still overlaps
//! the sliding window, in units × nanoseconds). Allowed iff
//! `load + c·W <= L·W`; then `count[k] += c`. Denied requests are not
//! counted. All products are computed in `u128`, so nothing overflows.

use std::time::Duration;

use crate::clock::duration_from_nanos;
use crate::quota::MAX_COUNT;
use crate::{Attempt, Decision, Outcome, Quota, Timestamp};

/// The two counters of one key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlidingWindowState {
    /// The window index `k` that `curr` counts.
    pub window: u64,
    /// `count[k]`.
    pub curr: u64,
    /// `count[k − 1]`.
    pub prev: u64,
}

/// The counters as seen from window `k`: a state of window `k − 1` shifts
/// into `prev`; anything older is empty.
pub fn counters_at(state: Option<SlidingWindowState>, k: u64) -> (u64, u64) {
    match state {
        Some(s) if s.window == k => (s.prev, s.curr),
        Some(s) if s.window.checked_add(1) == Some(k) => (s.curr, 0),
        _ => (0, 0),
    }
}

/// Whether `state` still holds usage at `now` (differs from no counters):
/// a non-zero `curr` or `prev` as seen from the window of `now`.
pub fn in_use(state: SlidingWindowState, quota: &Quota, now: Timestamp) -> bool {
    let k = now.as_unix_nanos() / quota.window_nanos();
    counters_at(Some(state), k) != (0, 0)
}

/// Decides `attempt`; returns the decision and the state to store (`None`:
/// leave the store unchanged, as for every denial).
pub fn decide(
    state: Option<SlidingWindowState>,
    quota: &Quota,
    attempt: Attempt,
) -> (Decision, Option<SlidingWindowState>) {
    let (view, curr) = View::new(state, quota, attempt.now);
    let c = attempt.cost.get();
    if c > quota.limit() {
        return (view.decision(curr, Outcome::Never), None);
    }
    let load = view.load(curr);
    if load + u128::from(c) * view.w <= view.l * view.w {
        let next = SlidingWindowState {
            window: view.k,
            curr: curr.saturating_add(c).min(MAX_COUNT),
            prev: view.prev,
        };
        return (view.decision(next.curr, Outcome::Allowed), Some(next));
    }
    let retry_after = view.retry_after(curr, c);
    (view.decision(curr, Outcome::Denied { retry_after }), None)
}

/// What a request of cost 1 would get now, without recording anything.
pub fn status(state: Option<SlidingWindowState>, quota: &Quota, now: Timestamp) -> Decision {
    let (d, _) = decide(state, quota, Attempt::one(now));
    // decide() reports the counters after recording; status records nothing.
    let (view, curr) = View::new(state, quota, now);
    view.decision(curr, d.outcome)
}

/// One key's counters at one instant, widened for exact arithmetic.
struct View<'a> {
    quota: &'a Quota,
    w: u128,
    l: u128,
    elapsed: u128,
    t: u64,
    k: u64,
    prev: u64,
}

impl View<'_> {
    /// The view of `state` at `now`, and the current window's count.
    fn new(state: Option<SlidingWindowState>, quota: &Quota, now: Timestamp) -> (View<'_>, u64) {
        let w = quota.window_nanos();
        let t = now.as_unix_nanos();
        let k = t / w;
        let (prev, curr) = counters_at(state, k);
        let view = View {
            quota,
            w: u128::from(w),
            l: u128::from(quota.limit()),
            elapsed: u128::from(t - k * w),
            t,
            k,
            prev,
        };
        (view, curr)
    }

    fn load(&self, curr: u64) -> u128 {
        u128::from(self.prev) * (self.w - self.elapsed) + u128::from(curr) * self.w
    }

    /// The smallest wait after which `c` more units pass (docs/semantics.md §2).
    fn retry_after(&self, curr: u64, c: u64) -> Duration {
        let (w, l, c128) = (self.w, self.l, u128::from(c));
        let to_next_window = w - self.elapsed;
        let d = if u128::from(curr) + c128 <= l {
            // Passes within this window once enough of `prev` has slid out;
            // a denial here implies prev > 0.
            let keep = (l - u128::from(curr) - c128) * w / u128::from(self.prev).max(1);
            w.saturating_sub(keep).saturating_sub(self.elapsed)
        } else {
            // Needs the next window, where `curr` becomes `prev`; curr > 0
            // because c <= L < curr + c.
            let keep = (l - c128) * w / u128::from(curr).max(1);
            to_next_window + w.saturating_sub(keep)
        };
        duration_from_nanos(d.max(1))
    }

    fn decision(&self, curr: u64, outcome: Outcome) -> Decision {
        let load = self.load(curr);
        let capacity = self.l * self.w;
        let reset_after = if curr > 0 {
            // `curr` weighs on the sliding window until the end of window k+1.
            let end = (u128::from(self.k) + 2) * self.w;
            end - u128::from(self.t)
        } else if self.prev > 0 {
            self.w - self.elapsed
        } else {
            0
        };
        Decision {
            outcome,
            limit: self.quota.limit(),
            remaining: u64::try_from(capacity.saturating_sub(load) / self.w).unwrap_or(u64::MAX),
            used: u64::try_from(load.div_ceil(self.w)).unwrap_or(u64::MAX),
            reset_after: duration_from_nanos(reset_after),
        }
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

    fn attempt(t: u64, cost: u64) -> Attempt {
        Attempt {
            now: Timestamp::from_unix_nanos(t),
            cost: NonZeroU64::new(cost).unwrap(),
        }
    }

    #[test]
    fn the_previous_window_weighs_by_its_overlap() {
        let q = quota(10, 10);
        // 10 units in window 0; at t = 15 s half of them still weigh: load 5.
        let state = Some(SlidingWindowState {
            window: 0,
            curr: 10,
            prev: 0,
        });
        let (d, next) = decide(state, &q, attempt(15 * SEC, 5));
        assert!(d.allowed());
        assert_eq!(
            next,
            Some(SlidingWindowState {
                window: 1,
                curr: 5,
                prev: 10
            })
        );
        assert_eq!(d.remaining, 0);
        let (d, next) = decide(next, &q, attempt(15 * SEC, 1));
        assert_eq!(next, None, "denials are not counted");
        // One unit frees up once prev's weight drops by W/10: at 16 s.
        assert_eq!(d.retry_after(), Some(Duration::from_secs(1)));
    }

    #[test]
    fn retry_after_is_exact_when_the_next_window_is_needed() {
        let q = quota(4, 10);
        let state = Some(SlidingWindowState {
            window: 0,
            curr: 4,
            prev: 0,
        });
        let (d, _) = decide(state, &q, attempt(2 * SEC, 2));
        // Next window at 10 s, then curr=4 becomes prev and must weigh <= 2:
        // W − floor(2·10/4) = 5 s into it.
        assert_eq!(d.retry_after(), Some(Duration::from_secs(13)));
        let (ok, _) = decide(state, &q, attempt(15 * SEC, 2));
        assert!(ok.allowed());
        let (no, _) = decide(state, &q, attempt(15 * SEC - 1, 2));
        assert!(!no.allowed());
    }

    #[test]
    fn a_cost_above_the_limit_is_never() {
        let (d, next) = decide(None, &quota(3, 10), attempt(0, 4));
        assert_eq!((d.outcome, next), (Outcome::Never, None));
        let (d, _) = decide(None, &quota(0, 10), attempt(0, 1));
        assert_eq!(d.outcome, Outcome::Never);
    }

    #[test]
    fn state_older_than_the_previous_window_is_empty() {
        let state = Some(SlidingWindowState {
            window: 3,
            curr: 7,
            prev: 9,
        });
        assert_eq!(counters_at(state, 3), (9, 7));
        assert_eq!(counters_at(state, 4), (7, 0));
        assert_eq!(counters_at(state, 5), (0, 0));
    }

    #[test]
    fn status_reports_without_recording() {
        let q = quota(10, 10);
        let state = Some(SlidingWindowState {
            window: 0,
            curr: 4,
            prev: 0,
        });
        let d = status(state, &q, Timestamp::from_unix_secs(5));
        assert_eq!((d.used, d.remaining), (4, 6));
        assert_eq!(d.reset_after, Duration::from_secs(15));
    }
}
