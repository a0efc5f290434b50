//! The sliding log on a run-length event list: one `(at, count)` pair
//! per instant, oldest first.

use std::collections::VecDeque;

use super::shard::Expiring;
use crate::algorithm::sliding_log::{self, LiveLog};
use crate::{Attempt, Decision, Quota, Timestamp};

/// Sliding log: run-length events `(at, count)`, oldest first, and the
/// newest event + W.
#[derive(Debug, Clone, Default)]
pub(super) struct LogEntry {
    pub(super) expires: u64,
    pub(super) events: VecDeque<(u64, u64)>,
}

impl Expiring for LogEntry {
    fn expires(&self) -> u64 {
        self.expires
    }
}

/// Drops the events that have left the window at `now`, oldest first.
pub(super) fn drop_dead(entry: &mut LogEntry, quota: &Quota, now: Timestamp) {
    while let Some(&(at, _)) = entry.events.front() {
        if sliding_log::is_live(quota, Timestamp::from_unix_nanos(at), now) {
            break;
        }
        entry.events.pop_front();
    }
}

/// Records `attempt.cost` events at `attempt.now` (run-length: one pair
/// per instant).
pub(super) fn record(entry: &mut LogEntry, quota: &Quota, attempt: Attempt) {
    let at = attempt.now.as_unix_nanos();
    let cost = attempt.cost.get();
    match entry.events.back_mut() {
        Some((last, n)) if *last == at => *n += cost,
        _ => entry.events.push_back((at, cost)),
    }
    entry.expires = at.saturating_add(quota.window_nanos());
}

/// The live events at `now` (skipping dead ones that were not dropped
/// yet), oldest first.
fn live_events<'e>(
    entry: &'e LogEntry,
    quota: &'e Quota,
    now: Timestamp,
) -> impl Iterator<Item = (u64, u64)> + Clone + 'e {
    entry.events.iter().copied().skip_while(move |&(at, _)| {
        !sliding_log::is_live(quota, Timestamp::from_unix_nanos(at), now)
    })
}

/// The summary and the `j`-th oldest accessor of the live events.
fn log_view<'e>(
    entry: &'e LogEntry,
    quota: &'e Quota,
    now: Timestamp,
) -> (
    LiveLog,
    impl FnOnce(u64) -> Result<Timestamp, std::convert::Infallible> + 'e,
) {
    let live = live_events(entry, quota, now);
    let log = LiveLog {
        count: live.clone().map(|(_, n)| n).sum(),
        newest: live
            .clone()
            .last()
            .map(|(at, _)| Timestamp::from_unix_nanos(at)),
    };
    let nth_oldest = move |j: u64| {
        let mut seen = 0u64;
        for (at, n) in live {
            seen += n;
            if seen >= j {
                return Ok(Timestamp::from_unix_nanos(at));
            }
        }
        Ok(log.newest.unwrap_or(now))
    };
    (log, nth_oldest)
}

/// Sliding log: the decision for `attempt`; records nothing.
pub(super) fn log_decide(entry: &LogEntry, quota: &Quota, attempt: Attempt) -> Decision {
    let (log, nth_oldest) = log_view(entry, quota, attempt.now);
    let Ok(decision) = sliding_log::decide(log, nth_oldest, quota, attempt);
    decision
}

/// Sliding log: the status at `now`.
pub(super) fn log_status(entry: &LogEntry, quota: &Quota, now: Timestamp) -> Decision {
    let (log, nth_oldest) = log_view(entry, quota, now);
    let Ok(decision) = sliding_log::status(log, nth_oldest, quota, now);
    decision
}
