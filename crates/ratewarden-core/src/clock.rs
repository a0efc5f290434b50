//! Time. Only this module reads the system clock; everything else takes a
//! [`Timestamp`] as an argument, so tests drive window edges exactly with a
//! [`ManualClock`].
//!
//! Design decision: [`SystemClock`] reads the CPU's counter, not the
//! system time, on every call. `SystemTime::now` is a vDSO call that costs
//! more than the memory store's whole GCRA decision; the invariant TSC
//! read by `quanta` costs a fraction of it
//! (docs/design/memory-store.md#gcras-arithmetic-and-the-clock). The
//! counter is anchored to the system time, so the clock keeps answering
//! Unix time: see [`SystemClock`] for the bound.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// An instant as integer nanoseconds since the Unix epoch, UTC (docs/semantics.md §2).
///
/// `u64` nanoseconds reach the year 2554. Arithmetic saturates instead of
/// wrapping, so huge windows never panic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Timestamp(u64);

impl Timestamp {
    /// The Unix epoch, 1970-01-01T00:00:00Z.
    pub const EPOCH: Timestamp = Timestamp(0);

    /// The instant `nanos` nanoseconds after the Unix epoch.
    pub const fn from_unix_nanos(nanos: u64) -> Timestamp {
        Timestamp(nanos)
    }

    /// The instant `millis` milliseconds after the Unix epoch (saturating).
    pub const fn from_unix_millis(millis: u64) -> Timestamp {
        Timestamp(millis.saturating_mul(1_000_000))
    }

    /// The instant `secs` seconds after the Unix epoch (saturating).
    pub const fn from_unix_secs(secs: u64) -> Timestamp {
        Timestamp(secs.saturating_mul(1_000_000_000))
    }

    /// Nanoseconds since the Unix epoch.
    pub const fn as_unix_nanos(self) -> u64 {
        self.0
    }

    /// This instant plus `d`, saturating at the largest representable instant.
    pub fn saturating_add(self, d: Duration) -> Timestamp {
        Timestamp(self.0.saturating_add(duration_nanos(d)))
    }

    /// This instant minus `d`, saturating at the epoch.
    pub fn saturating_sub(self, d: Duration) -> Timestamp {
        Timestamp(self.0.saturating_sub(duration_nanos(d)))
    }

    /// The time from `earlier` to `self`; zero when `earlier` is later.
    pub fn saturating_duration_since(self, earlier: Timestamp) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }
}

/// `d` in whole nanoseconds, saturating at `u64::MAX` (about 584 years).
pub fn duration_nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// `n` nanoseconds as an exact [`Duration`]; waits computed in `u128` can
/// exceed `u64::MAX` ns (about 584 years) with huge windows, and a
/// `Duration` holds them (saturating only past `Duration::MAX`).
pub fn duration_from_nanos(n: u128) -> Duration {
    const NANOS_PER_SEC: u128 = 1_000_000_000;
    // The usual case in 64 bits: a division by a constant the compiler
    // turns into a multiplication, where a 128-bit one calls a routine.
    if let Ok(n) = u64::try_from(n) {
        return Duration::from_nanos(n);
    }
    match u64::try_from(n / NANOS_PER_SEC) {
        // The remainder is below 10^9, so it fits a u32.
        Ok(secs) => Duration::new(secs, (n % NANOS_PER_SEC) as u32),
        Err(_) => Duration::MAX,
    }
}

/// A source of the current time. Object safe; share it as `Arc<dyn Clock>`.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// The current instant.
    fn now(&self) -> Timestamp;
}

/// The operating system's wall clock (UTC; the process's time zone is
/// irrelevant), read cheaply.
///
/// The first call anchors a monotonic counter (`quanta`: the invariant TSC
/// where the CPU has one, else the OS monotonic clock) to the system time;
/// later calls add the counter's elapsed nanoseconds to that anchor, and
/// re-anchor once [`REANCHOR_EVERY`] has passed on the counter (one call
/// then reads the system time; the others keep the previous anchor).
///
/// Between anchors the clock is monotonic and differs from the system time
/// by at most the counter's rate error plus any slew or step of the system
/// time since the anchor: with NTP's largest slew (500 ppm) and quanta's
/// calibration (tens of ppm) that is under 60 µs over 100 ms. At a
/// re-anchor the clock moves onto the system time, so it can step back by
/// that much, and it follows a step of the system time within
/// [`REANCHOR_EVERY`], as the system time itself would. The first call
/// pays quanta's one-off calibration (about a millisecond, at most 200 ms).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

/// How often [`SystemClock`] re-anchors its counter to the system time.
pub const REANCHOR_EVERY: Duration = Duration::from_millis(100);

impl Clock for SystemClock {
    #[inline]
    fn now(&self) -> Timestamp {
        static ANCHOR: OnceLock<Anchor> = OnceLock::new();
        Timestamp(ANCHOR.get_or_init(Anchor::new).now())
    }
}

/// The widest pair of counter reads around a read of the system time that
/// [`Anchor::reanchor`] takes as it is: 50 µs, where the three reads take
/// well under a microsecond unless the thread is descheduled among them.
const ANCHOR_BRACKET_NANOS: u64 = 50_000;

/// How many times [`Anchor::reanchor`] reads the system time at most, when
/// the counter reads around it are further apart than
/// [`ANCHOR_BRACKET_NANOS`].
const ANCHOR_TRIES: u32 = 4;

/// The counter's start and its offset to the system time.
#[derive(Debug)]
struct Anchor {
    counter: quanta::Clock,
    /// The counter's raw value at the first call.
    start: u64,
    /// Unix nanoseconds minus counter nanoseconds since `start`, at the
    /// last anchor (wrapping): one word, so readers never see half of an
    /// update.
    offset: AtomicU64,
    /// Counter nanoseconds since `start` at which to re-anchor.
    due: AtomicU64,
}

impl Anchor {
    fn new() -> Anchor {
        let counter = quanta::Clock::new();
        let start = counter.raw();
        let anchor = Anchor {
            counter,
            start,
            offset: AtomicU64::new(0),
            due: AtomicU64::new(0),
        };
        anchor.reanchor();
        anchor
    }

    /// Counter nanoseconds since `start`.
    #[inline]
    fn elapsed(&self) -> u64 {
        self.counter.delta_as_nanos(self.start, self.counter.raw())
    }

    #[inline]
    fn now(&self) -> u64 {
        let elapsed = self.elapsed();
        let due = self.due.load(Ordering::Relaxed);
        if elapsed >= due
            && self
                .due
                .compare_exchange(due, u64::MAX, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            // Only the call that claimed the re-anchor does it; the
            // others meanwhile keep the previous offset.
            return self.reanchor();
        }
        elapsed.wrapping_add(self.offset.load(Ordering::Relaxed))
    }

    /// Reads the system time, stores the offset and the next due time;
    /// returns the clock's time now, on the new offset.
    ///
    /// The system time is read between two counter reads and paired with
    /// their midpoint. Paired with one counter read, a thread descheduled
    /// between the two reads would put the whole pause (milliseconds on a
    /// busy machine) into the offset, and the clock would lag the system
    /// time by it until the next re-anchor. A pair of reads further apart
    /// than [`ANCHOR_BRACKET_NANOS`] (a pause, not the reads' own cost of
    /// well under a microsecond) is taken again, up to [`ANCHOR_TRIES`]
    /// times, keeping the narrowest: the anchor is then off by at most half
    /// of it (25 µs, unless every try was paused).
    #[cold]
    fn reanchor(&self) -> u64 {
        let read = || {
            let before = self.elapsed();
            let unix = system_time_nanos();
            let after = self.elapsed();
            (after.saturating_sub(before), unix, after)
        };
        let mut best = read();
        for _ in 1..ANCHOR_TRIES {
            if best.0 <= ANCHOR_BRACKET_NANOS {
                break;
            }
            let next = read();
            if next.0 < best.0 {
                best = next;
            }
        }
        let (width, unix, after) = best;
        // `width` is `after - before` at most, so this never underflows.
        let offset = unix.wrapping_sub(after - width / 2);
        self.offset.store(offset, Ordering::Relaxed);
        self.due.store(
            after.saturating_add(duration_nanos(REANCHOR_EVERY)),
            Ordering::Relaxed,
        );
        // Not the chosen try's system time: later, paused tries may have
        // taken a while since it.
        self.elapsed().wrapping_add(offset)
    }
}

#[allow(clippy::disallowed_methods)] // the one place that reads the system time
fn system_time_nanos() -> u64 {
    // A system clock before 1970 is a broken host; treat it as the epoch
    // rather than panicking.
    let since_epoch = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO);
    duration_nanos(since_epoch)
}

/// A clock that moves only when told to. Clones share one time, so a test
/// can keep a handle while the application holds another.
///
/// ```
/// use ratewarden_core::{Clock, ManualClock, Timestamp};
/// use std::time::Duration;
///
/// let clock = ManualClock::new(Timestamp::from_unix_secs(60));
/// clock.advance(Duration::from_millis(1500));
/// assert_eq!(clock.now(), Timestamp::from_unix_millis(61_500));
/// ```
#[derive(Debug, Clone, Default)]
pub struct ManualClock {
    nanos: Arc<AtomicU64>,
}

impl ManualClock {
    /// A clock standing at `start`.
    pub fn new(start: Timestamp) -> ManualClock {
        ManualClock {
            nanos: Arc::new(AtomicU64::new(start.0)),
        }
    }

    /// Moves the clock to `t` (forwards or backwards).
    pub fn set(&self, t: Timestamp) {
        self.nanos.store(t.0, Ordering::SeqCst);
    }

    /// Moves the clock forwards by `d`, saturating.
    pub fn advance(&self, d: Duration) {
        let step = duration_nanos(d);
        // fetch_update only fails when the closure returns None; ours never does.
        let _ = self
            .nanos
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                Some(n.saturating_add(step))
            });
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        Timestamp(self.nanos.load(Ordering::SeqCst))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_clones_share_one_time() {
        let a = ManualClock::new(Timestamp::from_unix_secs(10));
        let b = a.clone();
        a.advance(Duration::from_nanos(1));
        assert_eq!(b.now().as_unix_nanos(), 10_000_000_001);
    }

    #[test]
    fn timestamp_arithmetic_saturates_instead_of_wrapping() {
        let end = Timestamp::from_unix_nanos(u64::MAX);
        assert_eq!(end.saturating_add(Duration::from_secs(1)), end);
        assert_eq!(
            Timestamp::EPOCH.saturating_sub(Duration::from_secs(1)),
            Timestamp::EPOCH
        );
        assert_eq!(Timestamp::from_unix_secs(u64::MAX), end);
    }

    #[test]
    fn durations_beyond_u64_nanoseconds_stay_exact() {
        let two_max = 2 * u128::from(u64::MAX);
        assert_eq!(duration_from_nanos(two_max).as_nanos(), two_max);
        assert_eq!(duration_from_nanos(1), Duration::from_nanos(1));
        // Both sides of the 64-bit fast path.
        let max64 = u128::from(u64::MAX);
        assert_eq!(duration_from_nanos(max64).as_nanos(), max64);
        assert_eq!(duration_from_nanos(max64 + 1).as_nanos(), max64 + 1);
        assert_eq!(duration_from_nanos(u128::MAX), Duration::MAX);
    }

    #[test]
    fn system_clock_is_after_2020() {
        assert!(SystemClock.now() > Timestamp::from_unix_secs(1_577_836_800));
    }

    /// The bound is the re-anchoring's, not the machine's speed: each
    /// call is measured against the system time read just before and just
    /// after it, so a pause of this thread widens that interval instead of
    /// counting as an error, and the anchor pairs its own reads the same
    /// way (`Anchor::reanchor`), so a pause of the thread that re-anchors
    /// shifts the clock by half the narrowest of its tries at most (25 µs
    /// unless all four were paused).
    #[test]
    fn system_clock_stays_within_a_millisecond_of_the_system_time_across_reanchors() {
        let gap = |ours: u64, system: u64| ours.abs_diff(system);
        let deadline = system_time_nanos() + 3 * duration_nanos(REANCHOR_EVERY);
        let mut worst = 0;
        let mut previous = SystemClock.now();
        while system_time_nanos() < deadline {
            let before = system_time_nanos();
            let ours = SystemClock.now();
            let after = system_time_nanos();
            // Distance to the interval the system time was in during the call.
            let off = if ours.0 < before {
                gap(ours.0, before)
            } else {
                ours.0.saturating_sub(after)
            };
            worst = worst.max(off);
            // Between re-anchors it never goes back more than the bound.
            assert!(
                ours.0 + 1_000_000 >= previous.0,
                "{ours:?} after {previous:?}"
            );
            previous = ours;
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(worst < 1_000_000, "{worst} ns away from the system time");
    }
}
