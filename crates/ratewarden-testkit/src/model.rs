//! Naive reference models of the four algorithms, written straight from
//! docs/semantics.md §2 and nothing else.
//!
//! Why a second implementation: the stores run the pure functions of
//! `ratewarden_core::algorithm`, so comparing a store with those functions
//! would only prove the store calls them. These models share no code with
//! them (they use [`Quota`]'s accessors and nothing from the algorithm
//! modules) and favour the obvious over the efficient: a map from
//! `(key, window index)` to a count, every live event of the sliding log,
//! one theoretical arrival time per key. All arithmetic is exact (`u128` /
//! `i128`); the only saturations are the ones the definition and the stores share:
//! counts stop at `i64::MAX` ([`MAX_COUNT`]) and GCRA instants at
//! `i64::MAX` nanoseconds ([`MAX_INSTANT`]), because SQLite and Redis keep
//! signed 64-bit integers.
//!
//! Keys are the bytes of [`ratewarden_core::Key::encoded`] (any injective
//! encoding would do); a reset drops the keys a predicate selects (a
//! prefix reset: every key starting with the prefix's bytes) and counts
//! those that held usage.
//!
//! ```
//! use ratewarden_core::{Algorithm, Quota};
//! use ratewarden_testkit::model::{Answer, Expected, Model, ReferenceModel};
//! use std::time::Duration;
//!
//! let quota = Quota::new(1, Duration::from_secs(60)).unwrap();
//! let mut model = Model::new(Algorithm::FixedWindow);
//! assert_eq!(model.acquire(b"k", &quota, 0, 1).outcome, Expected::Allowed);
//! let denied = model.acquire(b"k", &quota, 59_000_000_000, 1);
//! assert_eq!(
//!     denied,
//!     Answer { outcome: Expected::Denied { retry_after_ns: 1_000_000_000 }, remaining: 0 }
//! );
//! ```

use std::collections::HashMap;

use ratewarden_core::{Algorithm, Quota};

/// The largest count a store keeps: `i64::MAX`.
pub const MAX_COUNT: u64 = i64::MAX as u64;

/// The largest GCRA theoretical arrival time, in nanoseconds since the
/// epoch: `i64::MAX` (the year 2262).
pub const MAX_INSTANT: u64 = i64::MAX as u64;

/// The outcome a model expects, with the wait in exact nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expected {
    /// The request passes and is recorded.
    Allowed,
    /// The request is refused; the same request passes after
    /// `retry_after_ns` nanoseconds if nothing else arrives.
    Denied {
        /// The shortest such wait, in nanoseconds; always > 0.
        retry_after_ns: u128,
    },
    /// The request can never pass (`c > L`, or `c > B` for GCRA, or a
    /// limit of 0); nothing changes.
    Never,
}

/// A model's answer to one request: the outcome and what could still pass
/// now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Answer {
    /// Allowed, denied (with the wait) or never.
    pub outcome: Expected,
    /// Units that could still pass after this decision (docs/semantics.md §2).
    pub remaining: u64,
}

/// What every reference model offers. Times are nanoseconds since the
/// epoch; `key` is an opaque byte string.
pub trait ReferenceModel: std::fmt::Debug {
    /// Decides a request of `cost` units at `t` and records it as docs/semantics.md §2
    /// section 6 says.
    fn acquire(&mut self, key: &[u8], quota: &Quota, t: u64, cost: u64) -> Answer;

    /// What a request of cost 1 would get at `t`, changing nothing; the
    /// `remaining` is what could pass now (before the probe).
    fn status(&self, key: &[u8], quota: &Quota, t: u64) -> Answer;

    /// Forgets every key `selected` picks; returns how many of them held
    /// usage at `t` (their state differed from no state).
    fn reset(&mut self, selected: &dyn Fn(&[u8]) -> bool, quota: &Quota, t: u64) -> u64;
}

/// One model per algorithm, chosen by [`Algorithm`].
#[derive(Debug, Clone)]
pub enum Model {
    /// [`FixedWindow`].
    FixedWindow(FixedWindow),
    /// [`SlidingLog`].
    SlidingLog(SlidingLog),
    /// [`SlidingWindow`].
    SlidingWindow(SlidingWindow),
    /// [`Gcra`].
    Gcra(Gcra),
}

impl Model {
    /// An empty model of `algorithm`.
    pub fn new(algorithm: Algorithm) -> Model {
        match algorithm {
            Algorithm::FixedWindow => Model::FixedWindow(FixedWindow::default()),
            Algorithm::SlidingLog => Model::SlidingLog(SlidingLog::default()),
            Algorithm::SlidingWindow => Model::SlidingWindow(SlidingWindow::default()),
            Algorithm::Gcra => Model::Gcra(Gcra::default()),
        }
    }

    /// The algorithm this model follows.
    pub fn algorithm(&self) -> Algorithm {
        match self {
            Model::FixedWindow(_) => Algorithm::FixedWindow,
            Model::SlidingLog(_) => Algorithm::SlidingLog,
            Model::SlidingWindow(_) => Algorithm::SlidingWindow,
            Model::Gcra(_) => Algorithm::Gcra,
        }
    }

    fn inner(&self) -> &dyn ReferenceModel {
        match self {
            Model::FixedWindow(m) => m,
            Model::SlidingLog(m) => m,
            Model::SlidingWindow(m) => m,
            Model::Gcra(m) => m,
        }
    }

    fn inner_mut(&mut self) -> &mut dyn ReferenceModel {
        match self {
            Model::FixedWindow(m) => m,
            Model::SlidingLog(m) => m,
            Model::SlidingWindow(m) => m,
            Model::Gcra(m) => m,
        }
    }
}

impl ReferenceModel for Model {
    fn acquire(&mut self, key: &[u8], quota: &Quota, t: u64, cost: u64) -> Answer {
        self.inner_mut().acquire(key, quota, t, cost)
    }

    fn status(&self, key: &[u8], quota: &Quota, t: u64) -> Answer {
        self.inner().status(key, quota, t)
    }

    fn reset(&mut self, selected: &dyn Fn(&[u8]) -> bool, quota: &Quota, t: u64) -> u64 {
        self.inner_mut().reset(selected, quota, t)
    }
}

/// `max(0, n)` as a `u64` (remaining counts are at most the limit).
fn non_negative(n: i128) -> u64 {
    u64::try_from(n.max(0)).unwrap_or(u64::MAX)
}

// ---------------------------------------------------------------------------
// fixed_window
// ---------------------------------------------------------------------------

/// Fixed window: `count[(key, k)]` for `k = floor(t / W)`.
#[derive(Debug, Clone, Default)]
pub struct FixedWindow {
    counts: HashMap<(Vec<u8>, u64), u64>,
}

impl FixedWindow {
    fn count(&self, key: &[u8], k: u64) -> u64 {
        self.counts.get(&(key.to_vec(), k)).copied().unwrap_or(0)
    }

    /// The answer and, when something is recorded, the new `count[k]`.
    fn decide(&self, key: &[u8], quota: &Quota, t: u64, cost: u64) -> (Answer, Option<u64>) {
        let (l, w) = (quota.limit(), quota.window_nanos());
        let k = t / w;
        let count = self.count(key, k);
        if cost > l {
            let remaining = non_negative(i128::from(l) - i128::from(count));
            let answer = Answer {
                outcome: Expected::Never,
                remaining,
            };
            return (answer, None);
        }
        // Counts stop at i64::MAX.
        let after = (u128::from(count) + u128::from(cost)).min(u128::from(MAX_COUNT));
        let after = u64::try_from(after).unwrap_or(MAX_COUNT);
        let retry_after_ns = (u128::from(k) + 1) * u128::from(w) - u128::from(t);
        if after > l && !quota.counts_denied() {
            // A denied attempt adds nothing unless denied attempts count.
            let answer = Answer {
                outcome: Expected::Denied { retry_after_ns },
                remaining: non_negative(i128::from(l) - i128::from(count)),
            };
            return (answer, None);
        }
        // Every attempt is added, allowed or not (seed A).
        let outcome = if after <= l {
            Expected::Allowed
        } else {
            Expected::Denied { retry_after_ns }
        };
        let remaining = non_negative(i128::from(l) - i128::from(after));
        (Answer { outcome, remaining }, Some(after))
    }
}

impl ReferenceModel for FixedWindow {
    fn acquire(&mut self, key: &[u8], quota: &Quota, t: u64, cost: u64) -> Answer {
        let (answer, after) = self.decide(key, quota, t, cost);
        if let Some(after) = after {
            let k = t / quota.window_nanos();
            self.counts.insert((key.to_vec(), k), after);
        }
        answer
    }

    fn status(&self, key: &[u8], quota: &Quota, t: u64) -> Answer {
        let (probe, _) = self.decide(key, quota, t, 1);
        let count = self.count(key, t / quota.window_nanos());
        Answer {
            outcome: probe.outcome,
            remaining: non_negative(i128::from(quota.limit()) - i128::from(count)),
        }
    }

    fn reset(&mut self, selected: &dyn Fn(&[u8]) -> bool, quota: &Quota, t: u64) -> u64 {
        let k = t / quota.window_nanos();
        let in_use = self
            .counts
            .iter()
            .filter(|((key, window), count)| *window == k && **count > 0 && selected(key))
            .count();
        self.counts.retain(|(key, _), _| !selected(key));
        in_use as u64
    }
}

// ---------------------------------------------------------------------------
// sliding_log
// ---------------------------------------------------------------------------

/// Sliding log: every recorded unit's time, per key. Units recorded at the
/// same instant are kept as one `(time, units)` pair so that a huge cost
/// does not need a huge vector; the count of live units is what matters.
#[derive(Debug, Clone, Default)]
pub struct SlidingLog {
    events: HashMap<Vec<u8>, Vec<(u64, u64)>>,
}

impl SlidingLog {
    /// The live events at `t` (`t − e < W`), oldest first.
    fn live(&self, key: &[u8], quota: &Quota, t: u64) -> Vec<(u64, u64)> {
        let w = i128::from(quota.window_nanos());
        let mut live: Vec<(u64, u64)> = self
            .events
            .get(key)
            .map(|events| {
                events
                    .iter()
                    .copied()
                    .filter(|&(e, _)| i128::from(t) - i128::from(e) < w)
                    .collect()
            })
            .unwrap_or_default();
        live.sort_by_key(|&(e, _)| e);
        live
    }

    fn decide(&self, key: &[u8], quota: &Quota, t: u64, cost: u64) -> Answer {
        let live = self.live(key, quota, t);
        let n: u128 = live.iter().map(|&(_, units)| u128::from(units)).sum();
        let (l, c) = (u128::from(quota.limit()), u128::from(cost));
        let remaining_now = non_negative(l as i128 - n as i128);
        if c > l {
            return Answer {
                outcome: Expected::Never,
                remaining: remaining_now,
            };
        }
        if n + c <= l {
            return Answer {
                outcome: Expected::Allowed,
                remaining: non_negative((l - n - c) as i128),
            };
        }
        // The j-th oldest live unit, j = n + c − L (1-based).
        let j = n + c - l;
        let mut seen = 0u128;
        let mut e_j = t;
        for &(e, units) in &live {
            seen += u128::from(units);
            if seen >= j {
                e_j = e;
                break;
            }
        }
        let retry = i128::from(e_j) + i128::from(quota.window_nanos()) - i128::from(t);
        Answer {
            outcome: Expected::Denied {
                retry_after_ns: u128::try_from(retry).unwrap_or(0),
            },
            remaining: remaining_now,
        }
    }
}

impl ReferenceModel for SlidingLog {
    fn acquire(&mut self, key: &[u8], quota: &Quota, t: u64, cost: u64) -> Answer {
        let answer = self.decide(key, quota, t, cost);
        if answer.outcome == Expected::Allowed {
            self.events.entry(key.to_vec()).or_default().push((t, cost));
        }
        answer
    }

    fn status(&self, key: &[u8], quota: &Quota, t: u64) -> Answer {
        let probe = self.decide(key, quota, t, 1);
        let n: u128 = self
            .live(key, quota, t)
            .iter()
            .map(|&(_, units)| u128::from(units))
            .sum();
        Answer {
            outcome: probe.outcome,
            remaining: non_negative(i128::from(quota.limit()) - n as i128),
        }
    }

    fn reset(&mut self, selected: &dyn Fn(&[u8]) -> bool, quota: &Quota, t: u64) -> u64 {
        let in_use = self
            .events
            .keys()
            .filter(|key| selected(key) && !self.live(key, quota, t).is_empty())
            .count();
        self.events.retain(|key, _| !selected(key));
        in_use as u64
    }
}

// ---------------------------------------------------------------------------
// sliding_window
// ---------------------------------------------------------------------------

/// Sliding window counter: `count[(key, k)]`; denied requests are not
/// counted.
#[derive(Debug, Clone, Default)]
pub struct SlidingWindow {
    counts: HashMap<(Vec<u8>, u64), u64>,
}

/// The quantities of docs/semantics.md §2 at one instant, widened.
struct SlidingView {
    w: u128,
    l: u128,
    k: u64,
    elapsed: u128,
    prev: u128,
    curr: u128,
}

impl SlidingView {
    fn load(&self, curr: u128) -> u128 {
        self.prev * (self.w - self.elapsed) + curr * self.w
    }

    /// `max(0, floor((L·W − load) / W))`.
    fn remaining(&self, load: u128) -> u64 {
        non_negative(((self.l * self.w) as i128 - load as i128).div_euclid(self.w as i128))
    }
}

impl SlidingWindow {
    fn count(&self, key: &[u8], k: u64) -> u64 {
        self.counts.get(&(key.to_vec(), k)).copied().unwrap_or(0)
    }

    fn view(&self, key: &[u8], quota: &Quota, t: u64) -> SlidingView {
        let w = quota.window_nanos();
        let k = t / w;
        let prev = match k.checked_sub(1) {
            Some(before) => self.count(key, before),
            None => 0,
        };
        SlidingView {
            w: u128::from(w),
            l: u128::from(quota.limit()),
            k,
            elapsed: u128::from(t) - u128::from(k) * u128::from(w),
            prev: u128::from(prev),
            curr: u128::from(self.count(key, k)),
        }
    }

    /// The answer and, when allowed, the new `count[k]`.
    fn decide(&self, key: &[u8], quota: &Quota, t: u64, cost: u64) -> (Answer, Option<u64>) {
        let v = self.view(key, quota, t);
        let c = u128::from(cost);
        let load = v.load(v.curr);
        if c > v.l {
            let answer = Answer {
                outcome: Expected::Never,
                remaining: v.remaining(load),
            };
            return (answer, None);
        }
        if load + c * v.w <= v.l * v.w {
            let curr = (v.curr + c).min(u128::from(MAX_COUNT));
            let answer = Answer {
                outcome: Expected::Allowed,
                remaining: v.remaining(v.load(curr)),
            };
            return (answer, Some(u64::try_from(curr).unwrap_or(MAX_COUNT)));
        }
        let (w, l, elapsed) = (v.w as i128, v.l as i128, v.elapsed as i128);
        let (prev, curr, c) = (v.prev as i128, v.curr as i128, c as i128);
        let d = if curr + c <= l {
            // A denial with curr + c <= L implies prev > 0.
            w - ((l - curr - c) * w).div_euclid(prev) - elapsed
        } else {
            // curr + c > L >= c implies curr > 0.
            let t = i128::from(t);
            let next = (i128::from(v.k) + 1) * w - t;
            next + (w - ((l - c) * w).div_euclid(curr)).max(0)
        };
        let answer = Answer {
            outcome: Expected::Denied {
                retry_after_ns: u128::try_from(d).unwrap_or(0),
            },
            remaining: v.remaining(load),
        };
        (answer, None)
    }
}

impl ReferenceModel for SlidingWindow {
    fn acquire(&mut self, key: &[u8], quota: &Quota, t: u64, cost: u64) -> Answer {
        let (answer, curr) = self.decide(key, quota, t, cost);
        if let Some(curr) = curr {
            let k = t / quota.window_nanos();
            self.counts.insert((key.to_vec(), k), curr);
        }
        answer
    }

    fn status(&self, key: &[u8], quota: &Quota, t: u64) -> Answer {
        let (probe, _) = self.decide(key, quota, t, 1);
        let v = self.view(key, quota, t);
        Answer {
            outcome: probe.outcome,
            remaining: v.remaining(v.load(v.curr)),
        }
    }

    fn reset(&mut self, selected: &dyn Fn(&[u8]) -> bool, quota: &Quota, t: u64) -> u64 {
        let keys: std::collections::BTreeSet<&Vec<u8>> = self
            .counts
            .keys()
            .map(|(key, _)| key)
            .filter(|key| selected(key))
            .collect();
        let in_use = keys
            .iter()
            .filter(|key| {
                let v = self.view(key, quota, t);
                v.prev > 0 || v.curr > 0
            })
            .count();
        self.counts.retain(|(key, _), _| !selected(key));
        in_use as u64
    }
}

// ---------------------------------------------------------------------------
// gcra
// ---------------------------------------------------------------------------

/// GCRA: one theoretical arrival time per key.
#[derive(Debug, Clone, Default)]
pub struct Gcra {
    tats: HashMap<Vec<u8>, u64>,
}

impl Gcra {
    /// The emission interval `T = max(1, floor(W / L))`; `None` for L = 0.
    pub fn emission_interval(quota: &Quota) -> Option<u64> {
        (quota.limit() > 0).then(|| (quota.window_nanos() / quota.limit()).max(1))
    }

    /// The answer and, when allowed, the new `tat`.
    fn decide(&self, key: &[u8], quota: &Quota, t: u64, cost: u64) -> (Answer, Option<u64>) {
        let never = |remaining| Answer {
            outcome: Expected::Never,
            remaining,
        };
        let Some(period) = Gcra::emission_interval(quota) else {
            return (never(0), None);
        };
        let (p, b, c, t128) = (
            i128::from(period),
            i128::from(quota.burst()),
            i128::from(cost),
            i128::from(t),
        );
        let tat = self.tats.get(key).copied().unwrap_or(t);
        let tat0 = i128::from(tat.max(t));
        let capacity = b * p;
        let remaining_now = non_negative((capacity - (tat0 - t128)).max(0) / p);
        if c > b {
            return (never(remaining_now), None);
        }
        let new = tat0 + c * p;
        if new - t128 <= capacity {
            let answer = Answer {
                outcome: Expected::Allowed,
                remaining: non_negative((capacity - (new - t128)) / p),
            };
            let tat = u64::try_from(new.min(i128::from(MAX_INSTANT))).unwrap_or(MAX_INSTANT);
            return (answer, Some(tat));
        }
        let answer = Answer {
            outcome: Expected::Denied {
                retry_after_ns: u128::try_from(new - capacity - t128).unwrap_or(0),
            },
            remaining: remaining_now,
        };
        (answer, None)
    }
}

impl ReferenceModel for Gcra {
    fn acquire(&mut self, key: &[u8], quota: &Quota, t: u64, cost: u64) -> Answer {
        let (answer, tat) = self.decide(key, quota, t, cost);
        if let Some(tat) = tat {
            self.tats.insert(key.to_vec(), tat);
        }
        answer
    }

    fn status(&self, key: &[u8], quota: &Quota, t: u64) -> Answer {
        let (probe, _) = self.decide(key, quota, t, 1);
        let remaining = match Gcra::emission_interval(quota) {
            None => 0,
            Some(period) => {
                let tat = self.tats.get(key).copied().unwrap_or(t).max(t);
                let pending = i128::from(tat) - i128::from(t);
                let capacity = i128::from(quota.burst()) * i128::from(period);
                non_negative((capacity - pending).max(0) / i128::from(period))
            }
        };
        Answer {
            outcome: probe.outcome,
            remaining,
        }
    }

    fn reset(&mut self, selected: &dyn Fn(&[u8]) -> bool, _quota: &Quota, t: u64) -> u64 {
        let in_use = self
            .tats
            .iter()
            .filter(|(key, tat)| selected(key) && **tat > t)
            .count();
        self.tats.retain(|key, _| !selected(key));
        in_use as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::time::Duration;

    const SEC: u64 = 1_000_000_000;

    fn quota(limit: u64, window_nanos: u64) -> Quota {
        Quota::new(limit, Duration::from_nanos(window_nanos)).expect("a valid quota")
    }

    fn denied(retry_after_ns: u128, remaining: u64) -> Answer {
        Answer {
            outcome: Expected::Denied { retry_after_ns },
            remaining,
        }
    }

    fn allowed(remaining: u64) -> Answer {
        Answer {
            outcome: Expected::Allowed,
            remaining,
        }
    }

    #[test]
    fn fixed_window_counts_refused_attempts_as_seed_a_says() {
        let q = quota(3, 60 * SEC).counting_denied();
        let mut m = Model::new(Algorithm::FixedWindow);
        let t0 = 1_767_225_600 * SEC;
        for i in 0..3 {
            assert_eq!(m.acquire(b"k", &q, t0 + i, 1), allowed(2 - i));
        }
        assert_eq!(
            m.acquire(b"k", &q, t0 + 45 * SEC, 1),
            denied(15 * u128::from(SEC), 0)
        );
        assert_eq!(m.acquire(b"k", &q, t0 + 46 * SEC, 1).remaining, 0);
        let Model::FixedWindow(fixed) = &m else {
            unreachable!("built as a fixed window model")
        };
        let k = t0 / (60 * SEC);
        assert_eq!(
            fixed.count(b"k", k),
            5,
            "after L + 2 requests the counter reads L + 2"
        );
        assert_eq!(m.acquire(b"k", &q, t0 + 60 * SEC, 1), allowed(2));
    }

    #[test]
    fn fixed_window_does_not_count_refused_attempts_by_default() {
        let q = quota(3, 60 * SEC);
        let mut m = Model::new(Algorithm::FixedWindow);
        assert_eq!(m.acquire(b"k", &q, 0, 2), allowed(1));
        assert_eq!(
            m.acquire(b"k", &q, 1, 2),
            denied(u128::from(60 * SEC) - 1, 1)
        );
        assert_eq!(m.acquire(b"k", &q, 2, 1), allowed(0));
    }

    #[test]
    fn sliding_log_waits_for_the_jth_oldest_event() {
        let q = quota(3, 10 * SEC);
        let mut m = Model::new(Algorithm::SlidingLog);
        for t in [1, 2, 3] {
            assert_eq!(m.acquire(b"k", &q, t * SEC, 1).outcome, Expected::Allowed);
        }
        // n = 3, c = 2, L = 3: j = 2, the event at 2 s leaves at 12 s.
        assert_eq!(
            m.acquire(b"k", &q, 4 * SEC, 2),
            denied(8 * u128::from(SEC), 0)
        );
        // At 11 s the event of 1 s (exactly W old) has left: n = 2.
        assert_eq!(m.status(b"k", &q, 11 * SEC), allowed(1));
        assert_eq!(m.acquire(b"k", &q, 12 * SEC, 2), allowed(0));
        assert_eq!(m.acquire(b"k", &q, 0, 4).outcome, Expected::Never);
    }

    #[test]
    fn sliding_window_weighs_the_previous_window_by_its_overlap() {
        let q = quota(10, 10 * SEC);
        let mut m = Model::new(Algorithm::SlidingWindow);
        assert_eq!(m.acquire(b"k", &q, 0, 10).outcome, Expected::Allowed);
        // At 15 s: prev = 10 weighs half, load 5·W; 5 more fit.
        assert_eq!(m.acquire(b"k", &q, 15 * SEC, 5), allowed(0));
        // curr + c = 6 <= L: d = W − floor(4·W/10) − 5 s = 1 s.
        assert_eq!(m.acquire(b"k", &q, 15 * SEC, 1), denied(u128::from(SEC), 0));
        let q = quota(4, 10 * SEC);
        let mut m = Model::new(Algorithm::SlidingWindow);
        assert_eq!(m.acquire(b"k", &q, 0, 4).outcome, Expected::Allowed);
        // curr + c > L: (k+1)·W − t + W − floor(2·W/4) = 8 s + 5 s.
        assert_eq!(
            m.acquire(b"k", &q, 2 * SEC, 2),
            denied(13 * u128::from(SEC), 0)
        );
    }

    #[test]
    fn gcra_allows_the_burst_then_one_per_interval() {
        let q = quota(4, 4 * SEC); // T = 1 s, B = 4
        let mut m = Model::new(Algorithm::Gcra);
        for left in (0..4).rev() {
            assert_eq!(m.acquire(b"k", &q, 0, 1), allowed(left));
        }
        assert_eq!(m.acquire(b"k", &q, 0, 1), denied(u128::from(SEC), 0));
        assert_eq!(m.acquire(b"k", &q, SEC - 1, 1), denied(1, 0));
        assert_eq!(m.acquire(b"k", &q, SEC, 1), allowed(0));
        let burst = q.with_burst(2);
        assert_eq!(m.acquire(b"j", &burst, 0, 3).outcome, Expected::Never);
        assert_eq!(m.status(b"j", &burst, 0), allowed(2));
        let zero = quota(0, SEC).with_burst(3);
        assert_eq!(
            m.acquire(b"z", &zero, 0, 1),
            Answer {
                outcome: Expected::Never,
                remaining: 0
            }
        );
    }

    #[test]
    fn gcra_instants_saturate_at_i64_max() {
        let q = quota(MAX_COUNT - 1, u64::MAX); // T = 2 ns
        let mut m = Gcra::default();
        let t = MAX_INSTANT - 1;
        assert_eq!(
            m.acquire(b"k", &q, t, MAX_COUNT - 1).outcome,
            Expected::Allowed
        );
        assert_eq!(m.tats[b"k".as_slice()], MAX_INSTANT);
    }

    #[test]
    fn reset_drops_keys_by_byte_prefix() {
        let q = quota(1, SEC);
        for algorithm in Algorithm::ALL {
            let mut m = Model::new(algorithm);
            for key in [b"ua".as_slice(), b"ub", b"v"] {
                m.acquire(key, &q, 0, 1);
            }
            let deleted = m.reset(&|key: &[u8]| key.starts_with(b"u"), &q, 0);
            assert_eq!(deleted, 2, "{algorithm}: two keys in use were reset");
            assert_eq!(
                m.reset(&|key: &[u8]| key == b"v", &q, 5 * SEC),
                0,
                "{algorithm}: expired"
            );
            assert_eq!(m.status(b"ua", &q, 0).remaining, 1, "{algorithm}");
            assert_eq!(m.status(b"v", &q, 0).remaining, 1, "{algorithm}: reset");
        }
    }

    /// Requests on one key: (time step, cost), with small numbers so that
    /// every wait can be checked by brute force.
    fn small_history() -> impl Strategy<Value = (u64, u64, Option<u64>, Vec<(u64, u64)>)> {
        (
            0u64..=4,
            1u64..=12,
            proptest::option::of(0u64..=5),
            proptest::collection::vec((0u64..=7, 1u64..=3), 1..=24),
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// The closed-form `retry_after` is the definition's "shortest
        /// wait after which the same request would pass", for every
        /// algorithm: checked against every shorter wait.
        #[test]
        fn the_closed_form_retry_after_is_the_shortest_wait(
            (limit, window, burst, requests) in small_history(),
        ) {
            for algorithm in Algorithm::ALL {
                let mut q = quota(limit, window);
                if let Some(b) = burst {
                    q = q.with_burst(b);
                }
                let mut m = Model::new(algorithm);
                let mut t = 3 * window;
                for &(step, cost) in &requests {
                    t += step;
                    let answer = m.acquire(b"k", &q, t, cost);
                    if let Expected::Denied { retry_after_ns } = answer.outcome {
                        prop_assert!(retry_after_ns > 0);
                        let r = u64::try_from(retry_after_ns).expect("small");
                        for d in 1..=r {
                            // "If nothing else arrived": the state after the
                            // denial (fixed window counts the denied attempt).
                            let mut probe = m.clone();
                            let passes = probe.acquire(b"k", &q, t + d, cost).outcome == Expected::Allowed;
                            prop_assert_eq!(
                                passes, d == r,
                                "{} {:?}: denied at {} with retry {}, at +{} passes={}",
                                algorithm, q, t, r, d, passes
                            );
                        }
                    }
                }
            }
        }
    }
}
