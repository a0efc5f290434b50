//! The breaker: when calls stop going to Redis, and when they resume.
//!
//! While it is open every call fails at once with the cause (no request
//! waits on a Redis known to be down), and a probe in the background
//! (`link.rs`) tries Redis until it answers, which closes it. It opens:
//!
//! - at once on a failure that says the server is down or unusable: a
//!   refused or reset connection, a lost connection, a refused password
//!   or a missing one, a peer that does not speak the Redis protocol;
//! - on a **sustained** run of timeouts (or other transient failures):
//!   at least [`TIMEOUTS_TO_OPEN`] of them, the last at least
//!   [`TIMEOUT_SPAN`] after the first, and no call answered in between.
//!   One slow answer of a live Redis (a pause of the machine, a burst of
//!   load) never opens it: the calls around it answer and end the run.
//!
//! Time is passed in (`now`, a monotonic instant as a `Duration`), so the
//! rules are tested without sleeping.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

/// Timeouts in a run, at least, before it opens the breaker.
pub const TIMEOUTS_TO_OPEN: u32 = 3;

/// How long a run of timeouts must last, with no call answered, before it
/// opens the breaker.
pub const TIMEOUT_SPAN: Duration = Duration::from_secs(1);

/// Fail fast while Redis is known to be down.
#[derive(Debug, Default)]
pub(crate) struct Breaker {
    open: AtomicBool,
    /// The current run of failed calls: its first failure's instant in
    /// nanoseconds plus one (0: no run) and its length.
    run_started: AtomicU64,
    run_length: AtomicU32,
    /// Why it is open, for the calls it fails.
    cause: Mutex<String>,
}

/// What a failed call says about Redis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Failure {
    /// The server is down or unusable: refused, reset or lost
    /// connection, authentication, another protocol.
    Down,
    /// No answer in time, or an answer that says "later" (loading, busy).
    Slow,
}

impl Breaker {
    /// `Err` with the cause while calls must fail fast.
    pub(crate) fn admit(&self) -> Result<(), String> {
        if !self.open.load(Ordering::Acquire) {
            return Ok(());
        }
        Err(self
            .cause
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone())
    }

    /// Whether it is open.
    pub(crate) fn is_open(&self) -> bool {
        self.open.load(Ordering::Acquire)
    }

    /// A call answered: the run of failures ends, and the breaker closes
    /// (whether it had been open).
    pub(crate) fn succeeded(&self) -> bool {
        if self.run_started.load(Ordering::Relaxed) != 0 {
            self.run_started.store(0, Ordering::Relaxed);
            self.run_length.store(0, Ordering::Relaxed);
        }
        self.open.swap(false, Ordering::AcqRel)
    }

    /// A call failed at `now` as `failure` says, for `cause`; whether this
    /// opened the breaker (then the caller starts a probe).
    pub(crate) fn failed(&self, failure: Failure, cause: &str, now: Duration) -> bool {
        let open = match failure {
            Failure::Down => true,
            Failure::Slow => self.extend_run(now),
        };
        if !open {
            return false;
        }
        self.set_cause(cause);
        !self.open.swap(true, Ordering::AcqRel)
    }

    /// The probe's latest failure, for the calls failed from now on.
    pub(crate) fn set_cause(&self, cause: &str) {
        let mut held = self.cause.lock().unwrap_or_else(PoisonError::into_inner);
        cause.clone_into(&mut held);
    }

    /// Counts a slow failure into the run; whether the run is now long
    /// enough to open the breaker.
    fn extend_run(&self, now: Duration) -> bool {
        let now_nanos = u64::try_from(now.as_nanos())
            .unwrap_or(u64::MAX)
            .saturating_add(1);
        let started = match self.run_started.compare_exchange(
            0,
            now_nanos,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => now_nanos,
            Err(started) => started,
        };
        let length = self.run_length.fetch_add(1, Ordering::AcqRel) + 1;
        let lasted = Duration::from_nanos(now_nanos.saturating_sub(started));
        length >= TIMEOUTS_TO_OPEN && lasted >= TIMEOUT_SPAN
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn a_down_server_opens_it_at_once_and_an_answer_closes_it() {
        let b = Breaker::default();
        assert!(b.admit().is_ok());
        assert!(b.failed(Failure::Down, "connection refused", ms(5)));
        assert_eq!(b.admit(), Err("connection refused".to_owned()));
        assert!(
            !b.failed(Failure::Down, "still refused", ms(6)),
            "opened once"
        );
        b.set_cause("WRONGPASS");
        assert_eq!(b.admit(), Err("WRONGPASS".to_owned()));
        assert!(b.succeeded(), "it was open");
        assert!(b.admit().is_ok());
        assert!(!b.succeeded());
    }

    #[test]
    fn one_slow_answer_among_answers_never_opens_it() {
        let b = Breaker::default();
        // A timeout every 100 ms for ten seconds, each followed by an
        // answered call: a loaded machine, a live Redis.
        for i in 0..100 {
            assert!(!b.failed(Failure::Slow, "timeout", ms(i * 100)));
            b.succeeded();
        }
        assert!(b.admit().is_ok());
        // Many timeouts at one instant (every request waiting through one
        // stall) are one event, not a sustained run.
        for _ in 0..1000 {
            assert!(!b.failed(Failure::Slow, "timeout", ms(20_000)));
        }
        assert!(b.admit().is_ok());
    }

    #[test]
    fn timeouts_for_the_whole_span_with_no_answer_open_it() {
        let b = Breaker::default();
        assert!(!b.failed(Failure::Slow, "timeout", ms(0)));
        assert!(!b.failed(Failure::Slow, "timeout", ms(500)));
        assert!(
            !b.failed(Failure::Slow, "timeout", TIMEOUT_SPAN - ms(1)),
            "not yet the span"
        );
        assert!(b.failed(Failure::Slow, "no answer within 100ms", TIMEOUT_SPAN));
        assert_eq!(b.admit(), Err("no answer within 100ms".to_owned()));
        // Two failures a span apart are not enough: at least three.
        let b = Breaker::default();
        assert!(!b.failed(Failure::Slow, "timeout", ms(0)));
        assert!(!b.failed(Failure::Slow, "timeout", ms(5000)));
        assert!(b.failed(Failure::Slow, "timeout", ms(5001)));
    }

    /// Many callers failing and answering at once: it ends open only
    /// when something opened it, and closed after an answer.
    #[test]
    fn concurrent_callers_leave_it_consistent() {
        let b = std::sync::Arc::new(Breaker::default());
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let b = std::sync::Arc::clone(&b);
                std::thread::spawn(move || {
                    for i in 0..10_000u64 {
                        if (i + t) % 2 == 0 {
                            b.failed(Failure::Slow, "timeout", ms(i));
                        } else {
                            b.succeeded();
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        b.succeeded();
        assert!(b.admit().is_ok());
        assert!(b.failed(Failure::Down, "refused", ms(1)));
        assert!(b.is_open());
    }
}
