//! What a limiter allows: [`Quota`] (limit per window), [`Algorithm`], and
//! [`Policy`] (a named algorithm + quota).

use std::fmt;
use std::num::NonZeroU64;
use std::str::FromStr;
use std::time::Duration;

use crate::clock::duration_nanos;

/// The largest count a store keeps (`i64::MAX`): SQLite integers and Redis
/// counters are signed 64-bit, so every store saturates here.
pub const MAX_COUNT: u64 = i64::MAX as u64;

/// A limit of `limit` units per `window`. Cannot be built invalid.
///
/// A limit of 0 is valid and denies everything (a kill switch, docs/semantics.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Quota {
    limit: u64,
    window_nanos: NonZeroU64,
    burst: Option<u64>,
    count_denied: bool,
    /// `window_nanos / limit`, at least 1; 0 for a limit of 0. Computed
    /// once: GCRA needs it at every decision, and a 64-bit division is a
    /// noticeable part of one
    /// (docs/design/memory-store.md#gcras-arithmetic-and-the-clock).
    emission_interval: u64,
}

/// Why a [`Quota`] could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuotaError {
    /// A window must be longer than zero (docs/semantics.md).
    #[error("the window must be longer than zero")]
    ZeroWindow,
    /// The window does not fit in 64-bit nanoseconds (about 584 years).
    #[error("the window {0:?} is longer than the maximum of about 584 years")]
    WindowTooLong(Duration),
    /// The limit is not below [`MAX_COUNT`].
    #[error("the limit {0} is too large; the maximum is {max}", max = MAX_COUNT - 1)]
    LimitTooLarge(u64),
}

impl Quota {
    /// `limit` units per `window`.
    ///
    /// # Errors
    /// [`QuotaError::ZeroWindow`] for a zero window (or one shorter than a
    /// nanosecond), [`QuotaError::WindowTooLong`] past `u64::MAX`
    /// nanoseconds, [`QuotaError::LimitTooLarge`] from [`MAX_COUNT`] on (a
    /// counter saturated at [`MAX_COUNT`] must always read as over the limit).
    pub fn new(limit: u64, window: Duration) -> Result<Quota, QuotaError> {
        if limit >= MAX_COUNT {
            return Err(QuotaError::LimitTooLarge(limit));
        }
        let nanos =
            u64::try_from(window.as_nanos()).map_err(|_| QuotaError::WindowTooLong(window))?;
        let window_nanos = NonZeroU64::new(nanos).ok_or(QuotaError::ZeroWindow)?;
        let emission_interval = match limit {
            0 => 0,
            _ => (window_nanos.get() / limit).max(1),
        };
        Ok(Quota {
            limit,
            window_nanos,
            burst: None,
            count_denied: false,
            emission_interval,
        })
    }

    /// The same quota with GCRA burst `burst` (how many units may pass at
    /// once after a quiet period); other algorithms ignore it. Capped below
    /// [`MAX_COUNT`].
    pub fn with_burst(self, burst: u64) -> Quota {
        Quota {
            burst: Some(burst.min(MAX_COUNT - 1)),
            ..self
        }
    }

    /// The same quota with denied attempts counted: a fixed window then adds
    /// every attempt's cost to its counter, allowed or not (seed A: after
    /// L + 2 requests the counter reads L + 2). Other algorithms ignore it;
    /// they never count a denial.
    pub fn counting_denied(self) -> Quota {
        Quota {
            count_denied: true,
            ..self
        }
    }

    /// Whether a fixed window counts denied attempts
    /// ([`Quota::counting_denied`]). Off by default.
    pub fn counts_denied(&self) -> bool {
        self.count_denied
    }

    /// The GCRA burst: as set by [`Quota::with_burst`], else the limit.
    pub fn burst(&self) -> u64 {
        self.burst.unwrap_or(self.limit)
    }

    /// The number of units allowed per window.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// GCRA's emission interval `T = W / L` in nanoseconds, at least 1;
    /// `None` for a limit of 0.
    pub fn emission_interval(&self) -> Option<u64> {
        (self.emission_interval > 0).then_some(self.emission_interval)
    }

    /// The window length.
    pub fn window(&self) -> Duration {
        Duration::from_nanos(self.window_nanos.get())
    }

    /// The window length in nanoseconds (never zero).
    pub fn window_nanos(&self) -> u64 {
        self.window_nanos.get()
    }
}

/// The rate-limiting algorithms (docs/semantics.md §2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Algorithm {
    /// Counts attempts per epoch-aligned window (seed A). Up to 2× the
    /// limit can pass around a window edge.
    FixedWindow,
    /// Keeps one timestamp per admitted unit (seed B). Exact: never more
    /// than the limit in any window-long span; memory grows with the limit.
    SlidingLog,
    /// Two counters per key, the previous window weighted by its overlap
    /// with the sliding window. Smooth at window edges, constant memory;
    /// an approximation of the sliding log.
    SlidingWindow,
    /// The generic cell rate algorithm: a token bucket as one timestamp per
    /// key. Spaces requests evenly, with a configurable burst.
    Gcra,
}

impl Algorithm {
    /// Every algorithm, in documentation order.
    pub const ALL: [Algorithm; 4] = [
        Algorithm::FixedWindow,
        Algorithm::SlidingLog,
        Algorithm::SlidingWindow,
        Algorithm::Gcra,
    ];

    /// The configuration name: `fixed_window`, `sliding_log`,
    /// `sliding_window` or `gcra`.
    pub fn as_str(self) -> &'static str {
        match self {
            Algorithm::FixedWindow => "fixed_window",
            Algorithm::SlidingLog => "sliding_log",
            Algorithm::SlidingWindow => "sliding_window",
            Algorithm::Gcra => "gcra",
        }
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An unknown algorithm name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown algorithm {0:?}; expected one of fixed_window, sliding_log, sliding_window, gcra")]
pub struct UnknownAlgorithm(pub String);

impl FromStr for Algorithm {
    type Err = UnknownAlgorithm;

    fn from_str(s: &str) -> Result<Algorithm, UnknownAlgorithm> {
        Algorithm::ALL
            .into_iter()
            .find(|a| a.as_str() == s)
            .ok_or_else(|| UnknownAlgorithm(s.to_owned()))
    }
}

/// A named limit: which algorithm enforces which quota. The name appears
/// in the `RateLimit-Policy` header and in logs, and it namespaces the
/// policy's state in every store: state belongs to (name, algorithm, key),
/// so two policies never share or clear each other's counters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// Short identifier, e.g. `ping`.
    pub name: std::sync::Arc<str>,
    /// How the quota is enforced.
    pub algorithm: Algorithm,
    /// The limit per window.
    pub quota: Quota,
    /// Whether a denial of this policy refuses the request or is only
    /// reported (shadow mode, a dry run).
    pub mode: Mode,
}

impl Policy {
    /// An enforcing policy.
    pub fn new(name: impl Into<std::sync::Arc<str>>, algorithm: Algorithm, quota: Quota) -> Policy {
        Policy {
            name: name.into(),
            algorithm,
            quota,
            mode: Mode::Enforce,
        }
    }

    /// The same policy in shadow mode: decided and counted, never denying.
    pub fn in_shadow(self) -> Policy {
        Policy {
            mode: Mode::Shadow,
            ..self
        }
    }

    /// Whether this policy's own denial is recorded even when nothing else
    /// is: a fixed window that counts denied attempts
    /// ([`Quota::counting_denied`]).
    pub fn counts_denied(&self) -> bool {
        self.algorithm == Algorithm::FixedWindow && self.quota.counts_denied()
    }
}

/// Whether a policy's denials refuse requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Mode {
    /// A denial refuses the request (and, in a batch, every other check).
    #[default]
    Enforce,
    /// Shadow mode (a dry run): the policy is decided and counted like an
    /// enforcing one, but a would-be denial lets the request through and
    /// charges this policy nothing; the caller reports it as
    /// `shadow_denied`.
    Shadow,
}

/// `ping: fixed_window, 3 per 60s` (windows that are not whole seconds in
/// milliseconds; GCRA with its burst).
impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let window = self.quota.window();
        write!(
            f,
            "{}: {}, {} per ",
            self.name,
            self.algorithm,
            self.quota.limit()
        )?;
        if window.subsec_nanos() == 0 {
            write!(f, "{}s", window.as_secs())?;
        } else {
            write!(f, "{}ms", window.as_millis())?;
        }
        if self.algorithm == Algorithm::Gcra {
            write!(f, ", burst {}", self.quota.burst())?;
        }
        Ok(())
    }
}

/// One request's claim on a quota: when it arrives and how many units it
/// costs (1 for an ordinary request).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attempt {
    /// The request time.
    pub now: crate::Timestamp,
    /// The units the request consumes; at least 1.
    pub cost: NonZeroU64,
}

impl Attempt {
    /// A request of cost 1 at `now`.
    pub fn one(now: crate::Timestamp) -> Attempt {
        Attempt {
            now,
            cost: NonZeroU64::MIN,
        }
    }
}

/// `d` rounded up to whole seconds: the `Retry-After` rule (docs/semantics.md §2).
pub fn ceil_secs(d: Duration) -> u64 {
    duration_nanos(d).div_ceil(1_000_000_000)
}

/// `d` rounded up to whole milliseconds (docs/semantics.md §2).
pub fn ceil_millis(d: Duration) -> u64 {
    duration_nanos(d).div_ceil(1_000_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_and_oversized_windows_are_refused() {
        assert_eq!(Quota::new(3, Duration::ZERO), Err(QuotaError::ZeroWindow));
        let huge = Duration::from_secs(u64::MAX);
        assert_eq!(Quota::new(3, huge), Err(QuotaError::WindowTooLong(huge)));
        assert_eq!(
            Quota::new(MAX_COUNT, Duration::from_secs(1)),
            Err(QuotaError::LimitTooLarge(MAX_COUNT))
        );
    }

    #[test]
    fn a_limit_of_zero_is_a_valid_quota() {
        let q = Quota::new(0, Duration::from_secs(60)).unwrap();
        assert_eq!(q.limit(), 0);
        assert_eq!(q.window_nanos(), 60_000_000_000);
        assert_eq!(q.emission_interval(), None);
    }

    #[test]
    fn the_emission_interval_is_the_window_over_the_limit_at_least_one_ns() {
        let q = |limit, nanos| Quota::new(limit, Duration::from_nanos(nanos)).unwrap();
        assert_eq!(q(10, 1_000_000_000).emission_interval(), Some(100_000_000));
        assert_eq!(q(3, 10).emission_interval(), Some(3));
        assert_eq!(q(10, 1).emission_interval(), Some(1));
        assert_eq!(q(MAX_COUNT - 1, u64::MAX).emission_interval(), Some(2));
        // The burst and counting denials leave it alone.
        let g = q(4, 100).with_burst(9).counting_denied();
        assert_eq!(g.emission_interval(), Some(25));
    }

    #[test]
    fn algorithm_names_round_trip() {
        for a in Algorithm::ALL {
            assert_eq!(a.as_str().parse::<Algorithm>(), Ok(a));
        }
        assert!("leaky".parse::<Algorithm>().is_err());
    }

    #[test]
    fn rounding_up_never_gives_zero_for_a_positive_wait() {
        assert_eq!(ceil_secs(Duration::from_nanos(1)), 1);
        assert_eq!(ceil_secs(Duration::from_secs(2)), 2);
        assert_eq!(ceil_secs(Duration::from_nanos(2_000_000_001)), 3);
        assert_eq!(ceil_secs(Duration::ZERO), 0);
        assert_eq!(ceil_millis(Duration::from_nanos(1_000_001)), 2);
    }
}
