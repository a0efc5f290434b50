//! The flags of `ratewarden replay` and their settings: a policy of
//! one algorithm and quota, and a store, without environment variables
//! (a service's environment must not change an offline replay).

use std::time::Duration;

use clap::Args;
use ratewarden_config::StoreConfig;
use ratewarden_config::values::{
    parse_algorithm, parse_burst, parse_duration, parse_limit, parse_timeout_ms,
};
use ratewarden_core::{Algorithm, Policy, Quota};
use ratewarden_replay::{LiveStore, ReplaySettings};

use super::StoreParser;

/// Flags of `ratewarden replay`.
#[derive(Debug, Clone, Args)]
#[command(after_help = REPLAY_HELP)]
pub struct ReplayArgs {
    /// The algorithm to replay with.
    #[arg(long, value_name = "fixed_window|sliding_log|sliding_window|gcra",
          value_parser = parse_algorithm)]
    pub algorithm: Algorithm,

    /// Units allowed per window (0 makes every request "never").
    #[arg(long, value_name = "N", value_parser = parse_limit, allow_negative_numbers = true)]
    pub limit: u64,

    /// The window: a whole number with a unit, `ms`, `s`, `m`, `h` or `d`
    /// (500ms, 60s, 1h).
    #[arg(long, value_name = "DUR", value_parser = parse_duration, allow_hyphen_values = true)]
    pub window: Duration,

    /// GCRA only: units that may pass at once after a quiet period
    /// (default: the limit). Refused with the other algorithms.
    #[arg(long, value_name = "N", value_parser = parse_burst, allow_negative_numbers = true)]
    pub burst: Option<u64>,

    /// fixed_window only: count denied attempts too (seed A's rule, the
    /// `ping` policy's); without it a denied request adds nothing.
    #[arg(long)]
    pub count_denied: bool,

    /// Where limiter state lives: `memory`, `sqlite:PATH` or
    /// `redis://HOST:PORT/DB`. A SQLite file or Redis
    /// keeps its state, so a second replay on it continues from the first.
    /// A SQLite file that a running service (or another replay) has open
    /// is refused: see --allow-live-store.
    #[arg(long, value_name = "memory|sqlite:PATH|redis://HOST:PORT/DB", default_value = "memory", value_parser = StoreParser)]
    pub store: StoreConfig,

    /// Replay even on a SQLite file that a running service has open,
    /// changing the counters it decides with (a warning is logged).
    /// Without it such a file is refused with exit status 2.
    #[arg(long)]
    pub allow_live_store: bool,

    /// The longest one Redis call may take, in milliseconds, as `serve`'s
    /// flag; past it the store counts as unavailable, which stops the
    /// replay with exit status 2. Longer than `serve`'s default: no client
    /// waits on an offline replay. Ignored by the memory and SQLite stores.
    #[arg(long, value_name = "MS", default_value_t = REPLAY_STORE_TIMEOUT_MS,
          value_parser = parse_timeout_ms, allow_negative_numbers = true)]
    pub store_timeout_ms: u64,
}

/// `replay --store-timeout-ms`'s default: 10 s, where `serve`'s is 100 ms.
/// `serve` keeps its calls short because a client waits on each one and
/// `--on-store-error` answers it when the store is slow; a replay has
/// neither, and a call past its timeout stops the whole replay. So the
/// timeout only has to tell a Redis that hangs from one that is slow for
/// a while (a busy server, a loaded machine), and that takes seconds, not
/// milliseconds. Not read from `RATEWARDEN_STORE_TIMEOUT_MS`: like
/// `--store`, replay's flags take no environment variables, so a service's
/// environment does not shorten it.
pub const REPLAY_STORE_TIMEOUT_MS: u64 = 10_000;

const REPLAY_HELP: &str = "\
Input, one request per line: <unix_ms> <key> [<cost>]
  fields separated by ASCII whitespace; blank lines and lines whose first
  non-blank character is # are skipped; times must not decrease; cost >= 1
  (default 1). A malformed line stops the replay with exit status 2.
Output, one line per request:
  <unix_ms> <key> allow|deny <remaining> <retry_after_ms>
  <unix_ms> <key> never - -      (the cost can never pass)
A SQLite file (--store sqlite:PATH) that a running service or another
  replay has open is refused with exit status 2, before anything is
  written to it: the replay would change that service's live counters.
  --allow-live-store replays on it anyway, with a warning.";

/// Flags of `replay` that are well-formed alone but wrong together.
#[derive(Debug, thiserror::Error)]
pub enum ReplayFlagsError {
    /// A limit or window that the engine refuses.
    #[error("invalid --limit/--window")]
    Quota(#[source] ratewarden_core::QuotaError),
    /// `--burst` with an algorithm other than GCRA, which would silently
    /// ignore it.
    #[error("--burst applies only to --algorithm gcra, not {0}")]
    BurstNeedsGcra(Algorithm),
    /// `--count-denied` with an algorithm other than the fixed window.
    #[error("--count-denied applies only to --algorithm fixed_window, not {0}")]
    CountDeniedNeedsFixedWindow(Algorithm),
}

impl ReplayArgs {
    /// Validates the flags into [`ReplaySettings`].
    ///
    /// # Errors
    /// [`ReplayFlagsError`] naming the flags.
    pub fn into_settings(self) -> Result<ReplaySettings, ReplayFlagsError> {
        let quota = Quota::new(self.limit, self.window).map_err(ReplayFlagsError::Quota)?;
        let quota = match (self.algorithm, self.burst) {
            (_, None) => quota,
            (Algorithm::Gcra, Some(burst)) => quota.with_burst(burst),
            (algorithm, Some(_)) => return Err(ReplayFlagsError::BurstNeedsGcra(algorithm)),
        };
        let quota = match (self.algorithm, self.count_denied) {
            (_, false) => quota,
            (Algorithm::FixedWindow, true) => quota.counting_denied(),
            (algorithm, true) => {
                return Err(ReplayFlagsError::CountDeniedNeedsFixedWindow(algorithm));
            }
        };
        Ok(ReplaySettings {
            policy: Policy::new("replay", self.algorithm, quota),
            store: self.store,
            live_store: if self.allow_live_store {
                LiveStore::Allow
            } else {
                LiveStore::Refuse
            },
            store_timeout: Duration::from_millis(self.store_timeout_ms),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::args::tests::serve;
    use crate::cli::{Cli, Command};
    use clap::Parser;
    use ratewarden_config::values::MAX_WINDOW_SECS;

    fn replay(args: &[&str]) -> Result<ReplayArgs, clap::Error> {
        let argv = ["ratewarden", "replay"].iter().chain(args);
        Cli::try_parse_from(argv).map(|cli| match cli.command {
            Command::Replay(a) => a,
            other => panic!("not replay: {other:?}"),
        })
    }

    fn replay_settings(args: &[&str]) -> Result<ReplaySettings, ReplayFlagsError> {
        replay(args).unwrap().into_settings()
    }

    #[test]
    fn replay_windows_take_a_unit() {
        for (text, window) in [
            ("500ms", Duration::from_millis(500)),
            ("1ms", Duration::from_millis(1)),
            ("60s", Duration::from_secs(60)),
            ("2m", Duration::from_secs(120)),
            ("1h", Duration::from_secs(3600)),
            ("7d", Duration::from_secs(7 * 86_400)),
            ("36500d", Duration::from_secs(MAX_WINDOW_SECS)),
        ] {
            assert_eq!(parse_duration(text), Ok(window), "{text}");
        }
    }

    #[test]
    fn replay_windows_without_a_unit_zero_fractional_negative_or_too_long_are_refused() {
        for bad in [
            "60",
            "0s",
            "0ms",
            "1.5s",
            "-1s",
            "s",
            "",
            "1S",
            "1 s",
            " 1s",
            "1sec",
            "1us",
            "36501d",
            "99999999999999999999ms",
            "18446744073709551615d",
        ] {
            let err = replay(&["--algorithm", "gcra", "--limit", "1", "--window", bad])
                .unwrap_err()
                .to_string();
            assert!(
                err.contains("--window") && err.contains(&format!("'{bad}'")),
                "{bad:?}: {err}"
            );
        }
    }

    #[test]
    fn replay_flags_become_a_policy_and_the_store_defaults_to_memory() {
        let s = replay_settings(&[
            "--algorithm",
            "sliding_window",
            "--limit",
            "5",
            "--window",
            "10s",
        ])
        .unwrap();
        assert_eq!(s.policy.algorithm, Algorithm::SlidingWindow);
        assert_eq!(
            (s.policy.quota.limit(), s.policy.quota.window()),
            (5, Duration::from_secs(10))
        );
        assert_eq!(s.store, StoreConfig::Memory);
        let s = replay_settings(&[
            "--algorithm",
            "gcra",
            "--limit",
            "0",
            "--window",
            "1s",
            "--burst",
            "3",
            "--store",
            "sqlite:t.db",
        ])
        .unwrap();
        assert_eq!((s.policy.quota.limit(), s.policy.quota.burst()), (0, 3));
        assert_eq!(s.store, StoreConfig::Sqlite("t.db".into()));
    }

    #[test]
    fn replay_refuses_a_live_store_unless_allowed() {
        let args = ["--algorithm", "gcra", "--limit", "1", "--window", "1s"];
        assert_eq!(
            replay_settings(&args).unwrap().live_store,
            LiveStore::Refuse
        );
        let mut allowed = args.to_vec();
        allowed.push("--allow-live-store");
        assert_eq!(
            replay_settings(&allowed).unwrap().live_store,
            LiveStore::Allow
        );
    }

    #[test]
    fn replay_store_timeout_defaults_to_ten_seconds_and_is_checked_as_serves() {
        let args = ["--algorithm", "gcra", "--limit", "1", "--window", "1s"];
        assert_eq!(
            replay_settings(&args).unwrap().store_timeout,
            Duration::from_secs(10)
        );
        let mut set = args.to_vec();
        set.extend(["--store-timeout-ms", "250"]);
        assert_eq!(
            replay_settings(&set).unwrap().store_timeout,
            Duration::from_millis(250)
        );
        for bad in ["0", "-1", "1.5", "3600001"] {
            let mut args = args.to_vec();
            args.extend(["--store-timeout-ms", bad]);
            let err = replay(&args).unwrap_err().to_string();
            assert!(
                err.contains("--store-timeout-ms") && err.contains(bad),
                "{bad}: {err}"
            );
            assert!(serve(&["--store-timeout-ms", bad]).is_err(), "{bad}");
        }
    }

    #[test]
    fn replay_refuses_burst_without_gcra_and_bad_limits_and_algorithms() {
        let err = replay_settings(&[
            "--algorithm",
            "fixed_window",
            "--limit",
            "2",
            "--window",
            "1s",
            "--burst",
            "3",
        ])
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("--burst") && err.contains("fixed_window"),
            "{err}"
        );
        for (flag, value) in [
            ("--limit", "-1"),
            ("--limit", "1.5"),
            ("--burst", "x"),
            ("--algorithm", "leaky_bucket"),
            ("--store", "redis"),
        ] {
            let mut args = vec!["--algorithm", "gcra", "--limit", "1", "--window", "1s"];
            if let Some(at) = args.iter().position(|a| *a == flag) {
                args.drain(at..at + 2);
            }
            args.extend([flag, value]);
            let err = replay(&args).unwrap_err().to_string();
            assert!(
                err.contains(flag) && err.contains(value),
                "{flag} {value}: {err}"
            );
        }
        for missing in ["--algorithm", "--limit", "--window"] {
            let mut args = vec!["--algorithm", "gcra", "--limit", "1", "--window", "1s"];
            let at = args.iter().position(|a| *a == missing).unwrap();
            args.drain(at..at + 2);
            let err = replay(&args).unwrap_err().to_string();
            assert!(err.contains(missing), "{missing}: {err}");
        }
    }
}
