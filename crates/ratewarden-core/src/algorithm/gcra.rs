//! GCRA, the generic cell rate algorithm: a token bucket kept as one
//! number (docs/semantics.md §2).
//!
//! Emission interval `T = W / L` (integer nanoseconds, rounded down, at
//! least 1). Per key a theoretical arrival time `tat` (absent = `t`).
//! `tat0 = max(tat, t)`, `new = tat0 + c·T`. Allowed iff `new − t <= B·T`
//! with burst `B` (default `L`); then `tat = new`. On denial
//! `retry_after = new − B·T − t`. Instants saturate at `i64::MAX`
//! nanoseconds (year 2262) so every store can hold them.
//!
//! # Range
//! The answers are exact while `tat` (at most `t + B·T` after an allowed
//! request) stays below `i64::MAX` nanoseconds, 2262-04-11T23:47:16.854Z.
//! Past that the stored instant saturates at [`MAX_TAT`]: a clamped `tat`
//! is earlier than the true one, so later requests are admitted early and
//! their `retry_after` is too short; with `t` itself past it, the stored
//! `tat` is before `t` and every request is allowed. Callers that take
//! times from outside refuse later ones (`ratewarden replay` refuses times
//! after 9223372036854 ms).

use std::time::Duration;

use crate::{Attempt, Decision, Outcome, Quota, Timestamp};

/// The largest `tat`, in nanoseconds since the epoch: `i64::MAX`.
pub const MAX_TAT: u64 = i64::MAX as u64;

/// A key's whole state: its theoretical arrival time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GcraState {
    /// Theoretical arrival time, ns since the epoch.
    pub tat: u64,
}

/// Whether `state` still holds usage at `now` (differs from no state):
/// its theoretical arrival time is later than `now`.
pub fn in_use(state: GcraState, now: Timestamp) -> bool {
    state.tat > now.as_unix_nanos()
}

/// Decides `attempt`; returns the decision and the state to store (`None`:
/// unchanged).
pub fn decide(
    state: Option<GcraState>,
    quota: &Quota,
    attempt: Attempt,
) -> (Decision, Option<GcraState>) {
    let t = attempt.now.as_unix_nanos();
    let tat = state.map_or(t, |s| s.tat);
    let tat0 = u128::from(tat.max(t));
    let c = u128::from(attempt.cost.get());
    let b = u128::from(quota.burst());
    let Some(period) = quota.emission_interval().filter(|_| c <= b) else {
        return (never(quota, tat, t), None);
    };
    let period = u128::from(period);
    let t128 = u128::from(t);
    let capacity = b * period;
    let new = tat0 + c * period;
    if new - t128 <= capacity {
        let tat = u64::try_from(new.min(u128::from(MAX_TAT))).unwrap_or(MAX_TAT);
        let (remaining, used) = taken(new - t128, b, period);
        let decision = Decision {
            outcome: Outcome::Allowed,
            limit: quota.limit(),
            remaining,
            used,
            reset_after: nanos(new - t128),
        };
        return (decision, Some(GcraState { tat }));
    }
    let (remaining, used) = taken(tat0 - t128, b, period);
    let decision = Decision {
        outcome: Outcome::Denied {
            retry_after: nanos(new - capacity - t128),
        },
        limit: quota.limit(),
        remaining,
        used,
        reset_after: nanos(tat0 - t128),
    };
    (decision, None)
}

/// What a request of cost 1 would get now, without recording anything.
pub fn status(state: Option<GcraState>, quota: &Quota, now: Timestamp) -> Decision {
    let (d, _) = decide(state, quota, Attempt::one(now));
    let t = now.as_unix_nanos();
    let tat = state.map_or(t, |s| s.tat).max(t);
    let Some(period) = quota.emission_interval() else {
        return d;
    };
    let pending = u128::from(tat - t);
    let (remaining, used) = taken(pending, u128::from(quota.burst()), u128::from(period));
    Decision {
        remaining,
        used,
        reset_after: nanos(pending),
        ..d
    }
}

fn never(quota: &Quota, tat: u64, t: u64) -> Decision {
    let pending = tat.saturating_sub(t);
    let (remaining, used) = match quota.emission_interval() {
        Some(period) => taken(
            u128::from(pending),
            u128::from(quota.burst()),
            u128::from(period),
        ),
        None => (0, 0),
    };
    Decision {
        outcome: Outcome::Never,
        limit: quota.limit(),
        remaining,
        used,
        reset_after: Duration::from_nanos(pending),
    }
}

/// `(remaining, used)` with `pending` nanoseconds of a bucket of `burst`
/// emission intervals of `period` nanoseconds (`period` ≥ 1) taken:
/// `used = ⌈pending / period⌉` and `remaining = ⌊(burst·period −
/// pending) / period⌋`, 0 when `pending` exceeds the bucket. With
/// `pending = q·period − r` (`0 ≤ r < period`, so `q = used`),
/// `burst·period − pending = (burst − q)·period + r`, so `remaining =
/// burst − used`; past the bucket `used > burst`, so `remaining` is 0
/// (saturating). One division instead of two, in 64 bits when both
/// operands fit (always, for waits under 584 years).
fn taken(pending: u128, burst: u128, period: u128) -> (u64, u64) {
    let used = match (u64::try_from(pending), u64::try_from(period)) {
        (Ok(p), Ok(d)) => u128::from(p.div_ceil(d)),
        _ => pending.div_ceil(period),
    };
    (narrow(burst.saturating_sub(used)), narrow(used))
}

fn narrow(n: u128) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

fn nanos(n: u128) -> Duration {
    crate::clock::duration_from_nanos(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::num::NonZeroU64;

    const SEC: u64 = 1_000_000_000;

    fn attempt(t: u64, cost: u64) -> Attempt {
        Attempt {
            now: Timestamp::from_unix_nanos(t),
            cost: NonZeroU64::new(cost).unwrap(),
        }
    }

    fn run(q: &Quota, requests: &[(u64, u64)]) -> Vec<Decision> {
        let mut state = None;
        requests
            .iter()
            .map(|&(t, c)| {
                let (d, next) = decide(state, q, attempt(t, c));
                state = next.or(state);
                d
            })
            .collect()
    }

    #[test]
    fn a_full_bucket_allows_the_burst_then_one_per_interval() {
        let q = Quota::new(4, Duration::from_secs(4)).unwrap(); // T = 1 s, B = 4
        let ds = run(
            &q,
            &[
                (0, 1),
                (0, 1),
                (0, 1),
                (0, 1),
                (0, 1),
                (SEC - 1, 1),
                (SEC, 1),
            ],
        );
        assert!(ds[..4].iter().all(Decision::allowed));
        assert_eq!(ds[3].remaining, 0);
        assert_eq!(ds[4].retry_after(), Some(Duration::from_secs(1)));
        assert_eq!(ds[5].retry_after(), Some(Duration::from_nanos(1)));
        assert!(ds[6].allowed());
    }

    #[test]
    fn burst_can_differ_from_the_limit() {
        let q = Quota::new(10, Duration::from_secs(10))
            .unwrap()
            .with_burst(2);
        let ds = run(&q, &[(0, 1), (0, 1), (0, 1)]);
        assert!(ds[0].allowed() && ds[1].allowed());
        assert_eq!(ds[2].retry_after(), Some(Duration::from_secs(1)));
        let (d, _) = decide(None, &q, attempt(0, 3));
        assert_eq!(
            d.outcome,
            Outcome::Never,
            "a cost above the burst never passes"
        );
    }

    #[test]
    fn a_limit_of_zero_denies_everything() {
        let q = Quota::new(0, Duration::from_secs(1)).unwrap();
        let (d, next) = decide(None, &q, attempt(5, 1));
        assert_eq!((d.outcome, next), (Outcome::Never, None));
    }

    #[test]
    fn huge_values_saturate_instead_of_overflowing() {
        let q = Quota::new(MAX_TAT - 1, Duration::from_nanos(u64::MAX)).unwrap();
        let (d, next) = decide(None, &q, attempt(u64::MAX - 1, MAX_TAT - 1));
        assert!(d.allowed());
        assert_eq!(next, Some(GcraState { tat: MAX_TAT }));
    }

    /// `taken`'s one division gives what the two it replaced gave, in 64
    /// and in 128 bits, inside the bucket and past it.
    #[test]
    fn one_division_equals_the_two_it_replaced() {
        let two = |pending: u128, burst: u128, period: u128| {
            let capacity = burst * period;
            (
                narrow(capacity.saturating_sub(pending) / period),
                narrow(pending.div_ceil(period)),
            )
        };
        let mut edges = vec![
            (0, 0, 1),
            (0, 5, 1),
            (1, 1, 1),
            (7, 3, 2),
            (6, 3, 2),
            (5, 3, 2),
            (u128::from(u64::MAX), u128::from(u64::MAX), 1),
            (u128::from(u64::MAX) + 1, 3, u128::from(u64::MAX)),
            (
                u128::from(u64::MAX) * 3,
                u128::from(u64::MAX),
                u128::from(u64::MAX),
            ),
        ];
        // xorshift64: a fixed, repeatable spread of magnitudes.
        let mut x = 0x9E37_79B9_7F4A_7C15_u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..100_000 {
            let period = u128::from((next() >> (next() % 64)).max(1));
            let burst = u128::from(next() >> (next() % 64));
            // Around the bucket's size, below and above it.
            let pending = (burst * period)
                .saturating_add(u128::from(next() % 5))
                .saturating_mul(u128::from(next() % 3))
                / 2;
            edges.push((pending, burst, period));
        }
        for (pending, burst, period) in edges {
            assert_eq!(
                taken(pending, burst, period),
                two(pending, burst, period),
                "pending {pending}, burst {burst}, period {period}"
            );
        }
    }

    #[test]
    fn status_does_not_take_a_token() {
        let q = Quota::new(4, Duration::from_secs(4)).unwrap();
        let state = Some(GcraState { tat: 2 * SEC });
        let d = status(state, &q, Timestamp::EPOCH);
        assert!(d.allowed());
        assert_eq!((d.used, d.remaining), (2, 2));
        assert_eq!(d.reset_after, Duration::from_secs(2));
    }
}
