//! Sliding log (seed B, docs/semantics.md §2).
//!
//! An event recorded at `e` is live at `t` iff `t − e < W`: an event exactly
//! `W` old has left the window (docs/semantics.md). With `n` live events a
//! request of cost `c` is allowed iff `n + c <= L`; then `c` events are
//! recorded at `t`. A denied request records nothing, and
//! `retry_after = e_j + W − t` with `e_j` the `j`-th oldest live event,
//! `j = n + c − L`: the wait until enough events have left.
//!
//! Stores keep the events; this module only needs the live count, the
//! newest live event and, on a denial, the `j`-th oldest one. The accessor
//! for that is a closure so that a store can fetch it lazily (SQLite runs
//! one more indexed query, and only on a denial).

use std::time::Duration;

use crate::{Attempt, Decision, Outcome, Quota, Timestamp};

/// What a store knows cheaply about a key's live events at `now`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LiveLog {
    /// The number of live events, `n`.
    pub count: u64,
    /// The newest live event; `None` when there is none.
    pub newest: Option<Timestamp>,
}

/// The earliest instant an event must be later than to be live at `now`:
/// events with `e > now − W` are live. `None` when every event since the
/// epoch is live (`now < W`).
pub fn live_after(quota: &Quota, now: Timestamp) -> Option<Timestamp> {
    now.as_unix_nanos()
        .checked_sub(quota.window_nanos())
        .map(Timestamp::from_unix_nanos)
}

/// Whether an event recorded at `event` is still live at `now`.
pub fn is_live(quota: &Quota, event: Timestamp, now: Timestamp) -> bool {
    now.as_unix_nanos().saturating_sub(event.as_unix_nanos()) < quota.window_nanos()
}

/// Decides `attempt`. `nth_oldest(j)` returns the `j`-th oldest live event
/// (1-based, `1 <= j <= log.count`); it is called at most once, only on a
/// denial.
///
/// Returns the decision; when it is [`Outcome::Allowed`] the store records
/// `attempt.cost` events at `attempt.now`, otherwise nothing.
///
/// # Errors
/// Whatever `nth_oldest` returns.
pub fn decide<E>(
    log: LiveLog,
    nth_oldest: impl FnOnce(u64) -> Result<Timestamp, E>,
    quota: &Quota,
    attempt: Attempt,
) -> Result<Decision, E> {
    let (n, c, l) = (log.count, attempt.cost.get(), quota.limit());
    let remaining_now = l.saturating_sub(n);
    if c > l {
        return Ok(decision(
            quota,
            log,
            attempt.now,
            remaining_now,
            Outcome::Never,
        ));
    }
    if n.saturating_add(c) <= l {
        let after = LiveLog {
            count: n + c,
            newest: Some(attempt.now),
        };
        return Ok(decision(
            quota,
            after,
            attempt.now,
            l - n - c,
            Outcome::Allowed,
        ));
    }
    // n + c > l >= c, so 1 <= j <= n.
    let j = n + c - l;
    let e_j = nth_oldest(j)?;
    let retry_after = expiry_after(quota, e_j, attempt.now).max(Duration::from_nanos(1));
    Ok(decision(
        quota,
        log,
        attempt.now,
        remaining_now,
        Outcome::Denied { retry_after },
    ))
}

/// What a request of cost 1 would get now, without recording anything.
///
/// # Errors
/// Whatever `nth_oldest` returns.
pub fn status<E>(
    log: LiveLog,
    nth_oldest: impl FnOnce(u64) -> Result<Timestamp, E>,
    quota: &Quota,
    now: Timestamp,
) -> Result<Decision, E> {
    let d = decide(log, nth_oldest, quota, Attempt::one(now))?;
    // decide() describes the state after recording; status records nothing.
    Ok(Decision {
        remaining: quota.limit().saturating_sub(log.count),
        used: log.count,
        reset_after: reset_after(quota, log, now),
        ..d
    })
}

/// Time until `event` leaves the window seen from `now`: `e + W − t`,
/// exact in `u128` (`e + W` can pass `u64::MAX`).
fn expiry_after(quota: &Quota, event: Timestamp, now: Timestamp) -> Duration {
    let expires = u128::from(event.as_unix_nanos()) + u128::from(quota.window_nanos());
    crate::clock::duration_from_nanos(expires.saturating_sub(u128::from(now.as_unix_nanos())))
}

fn reset_after(quota: &Quota, log: LiveLog, now: Timestamp) -> Duration {
    log.newest
        .map_or(Duration::ZERO, |newest| expiry_after(quota, newest, now))
}

fn decision(
    quota: &Quota,
    log: LiveLog,
    now: Timestamp,
    remaining: u64,
    outcome: Outcome,
) -> Decision {
    Decision {
        outcome,
        limit: quota.limit(),
        remaining,
        used: log.count,
        reset_after: reset_after(quota, log, now),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::convert::Infallible;
    use std::num::NonZeroU64;

    const SEC: u64 = 1_000_000_000;

    /// A naive log: every event, oldest first.
    #[derive(Default)]
    struct Log(Vec<u64>);

    impl Log {
        fn attempt(&mut self, q: &Quota, t: u64, cost: u64) -> Decision {
            let now = Timestamp::from_unix_nanos(t);
            let live: Vec<u64> = self
                .0
                .iter()
                .copied()
                .filter(|&e| is_live(q, Timestamp::from_unix_nanos(e), now))
                .collect();
            let log = LiveLog {
                count: live.len() as u64,
                newest: live.last().map(|&e| Timestamp::from_unix_nanos(e)),
            };
            let attempt = Attempt {
                now,
                cost: NonZeroU64::new(cost).unwrap(),
            };
            let nth =
                |j: u64| Ok::<_, Infallible>(Timestamp::from_unix_nanos(live[j as usize - 1]));
            let d = decide(log, nth, q, attempt).unwrap();
            if d.allowed() {
                self.0.extend(std::iter::repeat_n(t, cost as usize));
            }
            d
        }
    }

    fn quota(limit: u64, window_secs: u64) -> Quota {
        Quota::new(limit, Duration::from_secs(window_secs)).unwrap()
    }

    #[test]
    fn denies_at_the_limit_and_does_not_record_the_refusal() {
        let q = quota(2, 60);
        let mut log = Log::default();
        assert!(log.attempt(&q, 0, 1).allowed());
        assert!(log.attempt(&q, 10 * SEC, 1).allowed());
        let d = log.attempt(&q, 20 * SEC, 1);
        assert_eq!(d.retry_after(), Some(Duration::from_secs(40)));
        assert_eq!((d.used, d.remaining), (2, 0));
        assert_eq!(log.0.len(), 2, "a refusal is not recorded");
    }

    #[test]
    fn an_event_exactly_one_window_old_has_left() {
        let q = quota(1, 60);
        let mut log = Log::default();
        assert!(log.attempt(&q, 5 * SEC, 1).allowed());
        let d = log.attempt(&q, 65 * SEC - 1, 1);
        assert_eq!(d.retry_after(), Some(Duration::from_nanos(1)));
        assert!(log.attempt(&q, 65 * SEC, 1).allowed());
    }

    #[test]
    fn retry_after_waits_for_the_jth_oldest_event_for_a_large_cost() {
        let q = quota(3, 10);
        let mut log = Log::default();
        for t in [1, 2, 3] {
            assert!(log.attempt(&q, t * SEC, 1).allowed());
        }
        // n = 3, c = 2, L = 3: j = 2, the second-oldest event (t = 2 s).
        let d = log.attempt(&q, 4 * SEC, 2);
        assert_eq!(d.retry_after(), Some(Duration::from_secs(8)));
        assert!(!log.attempt(&q, 12 * SEC - 1, 2).allowed());
        assert!(log.attempt(&q, 12 * SEC, 2).allowed());
    }

    #[test]
    fn a_cost_above_the_limit_is_never_and_records_nothing() {
        let q = quota(3, 10);
        let mut log = Log::default();
        assert_eq!(log.attempt(&q, 0, 4).outcome, Outcome::Never);
        assert!(log.0.is_empty());
        let zero = quota(0, 10);
        assert_eq!(log.attempt(&zero, 0, 1).outcome, Outcome::Never);
    }

    #[test]
    fn status_does_not_count_the_probe() {
        let q = quota(2, 10);
        let log = LiveLog {
            count: 1,
            newest: Some(Timestamp::from_unix_secs(3)),
        };
        let nth = |_| Ok::<_, Infallible>(Timestamp::from_unix_secs(3));
        let d = status(log, nth, &q, Timestamp::from_unix_secs(5)).unwrap();
        assert!(d.allowed());
        assert_eq!((d.used, d.remaining), (1, 1));
        assert_eq!(d.reset_after, Duration::from_secs(8));
    }

    #[test]
    fn live_after_is_none_inside_the_first_window() {
        let q = quota(1, 10);
        assert_eq!(live_after(&q, Timestamp::from_unix_secs(3)), None);
        assert_eq!(
            live_after(&q, Timestamp::from_unix_secs(13)),
            Some(Timestamp::from_unix_secs(3))
        );
    }
}
