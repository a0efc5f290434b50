//! The command line: subcommands and flags, each `serve` flag also
//! readable from a `RATEWARDEN_*` environment variable (a flag wins over
//! its variable, the variable over the configuration file, the file over
//! the default). Values are parsed by `ratewarden_config::values`, the
//! same parsers the file uses; error messages name the flag and the
//! offending value ([`crate::cli::parse`] names the variable instead when
//! the value came from one).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};
use ipnet::IpNet;
use ratewarden_config::values::{
    parse_algorithm, parse_audit_sample, parse_body_limit, parse_burst, parse_duration,
    parse_grpc_listen, parse_limit, parse_listen, parse_max_connections, parse_net, parse_secs,
    parse_store, parse_timeout_ms, parse_timeout_secs, parse_wal_autocheckpoint, store_for_display,
};
use ratewarden_config::{
    ConfigErrors, ConfigFile, KeySourceKind, Overrides, Settings, StoreConfig, TimeSource,
};
use ratewarden_core::{Algorithm, Policy, Quota};
use ratewarden_limiter::FailureMode;

/// `ratewarden`: a rate-limiting service.
#[derive(Debug, Parser)]
#[command(name = "ratewarden", version, about)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
#[allow(clippy::large_enum_variant)] // parsed once, at start
pub enum Command {
    /// Run the HTTP service.
    Serve(ServeArgs),
    /// Decide a recorded trace of requests (standard input) and print each
    /// decision (standard output); a summary goes to standard error.
    Replay(ReplayArgs),
    /// Check a configuration file (TOML), or Envoy rate limit rules (a
    /// *.yaml/*.yml file or a directory): print one line per policy or rule
    /// (exit 0), or every error with FILE:LINE:COLUMN (exit 2).
    CheckConfig(CheckConfigArgs),
}

/// Arguments of `ratewarden check-config`.
#[derive(Debug, Clone, Args)]
pub struct CheckConfigArgs {
    /// The TOML file, or the Envoy rules (YAML file or directory), to check.
    #[arg(value_name = "PATH")]
    pub path: PathBuf,
}

/// Flags of `ratewarden serve`. Every one is optional here: what is not
/// given comes from the configuration file, else the default (shown).
#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// A TOML configuration file (settings and policies; reloaded on SIGHUP
    /// and when it changes). See docs/configuration.md.
    #[arg(long, env = "RATEWARDEN_CONFIG", value_name = "PATH")]
    pub config: Option<PathBuf>,

    /// Address to listen on: an IP address and a port (port 0: any free
    /// one) [default: 127.0.0.1:8080].
    #[arg(long, env = "RATEWARDEN_LISTEN", value_name = "ADDR", value_parser = parse_listen)]
    pub listen: Option<SocketAddr>,

    /// Address of the gRPC server: Envoy's rate limit service
    /// (`envoy.service.ratelimit.v3`) and `grpc.health.v1` [default: none,
    /// no gRPC server]. See docs/envoy.md.
    #[arg(long, env = "RATEWARDEN_GRPC_LISTEN", value_name = "ADDR",
          value_parser = parse_grpc_listen)]
    pub grpc_listen: Option<SocketAddr>,

    /// envoyproxy/ratelimit's YAML rules, loaded unchanged: a file, or a
    /// directory of *.yaml files (reloaded like --config). See docs/envoy.md.
    #[arg(long, env = "RATEWARDEN_ENVOY_CONFIG", value_name = "FILE|DIR")]
    pub envoy_config: Option<PathBuf>,

    /// SQLite database file, created when missing [default: ./ratewarden.db].
    #[arg(long, env = "RATEWARDEN_DB", value_name = "PATH")]
    pub db: Option<PathBuf>,

    /// Where limiter state lives: `memory` (this process only, lost at exit),
    /// `sqlite:PATH` or `redis://HOST:PORT/DB` (shared by every instance
    /// using it; port 6379 and database 0 when left out, as in
    /// `redis://127.0.0.1/0`). Default: SQLite at `--db`.
    #[arg(long, env = "RATEWARDEN_STORE", value_name = "memory|sqlite:PATH|redis://HOST:PORT/DB", value_parser = StoreParser)]
    pub store: Option<StoreConfig>,

    /// Requests allowed per window on GET /ping; 0 refuses every request [default: 3].
    #[arg(long, env = "RATEWARDEN_PING_LIMIT", value_name = "N",
          value_parser = parse_limit, allow_negative_numbers = true)]
    pub ping_limit: Option<u64>,

    /// Window length of GET /ping, in whole seconds [default: 60].
    #[arg(long, env = "RATEWARDEN_PING_WINDOW", value_name = "SECS",
          value_parser = parse_secs, allow_negative_numbers = true)]
    pub ping_window: Option<u64>,

    /// Checks allowed per sliding window on POST /rate/check, per user and endpoint [default: 10].
    #[arg(long, env = "RATEWARDEN_CHECK_LIMIT", value_name = "N",
          value_parser = parse_limit, allow_negative_numbers = true)]
    pub check_limit: Option<u64>,

    /// Sliding-window length of POST /rate/check, in whole seconds [default: 60].
    #[arg(long, env = "RATEWARDEN_CHECK_WINDOW", value_name = "SECS",
          value_parser = parse_secs, allow_negative_numbers = true)]
    pub check_window: Option<u64>,

    /// The algorithm behind GET /ping: `fixed_window` (seed A), `sliding_log`,
    /// `sliding_window` or `gcra` (see docs/algorithms.md) [default: fixed_window].
    #[arg(long, env = "RATEWARDEN_PING_ALGORITHM", value_name = "ALGORITHM",
          value_parser = parse_algorithm)]
    pub ping_algorithm: Option<Algorithm>,

    /// Where GET /ping takes its key from [default: header].
    #[arg(long, env = "RATEWARDEN_PING_KEY", value_enum)]
    pub ping_key: Option<KeySourceArg>,

    /// Proxies whose X-Forwarded-For is believed (IP or CIDR; repeat the flag
    /// or separate with commas). Used by `--ping-key forwarded`.
    #[arg(long = "trusted-proxy", env = "RATEWARDEN_TRUSTED_PROXIES", value_delimiter = ',',
          value_name = "IP|CIDR", value_parser = parse_net)]
    pub trusted_proxies: Vec<IpNet>,

    /// What a decision does when the store cannot be reached, for policies
    /// that set nothing else: `open` allows the request (logged and
    /// counted), `closed` answers 503 [default: open].
    #[arg(long, env = "RATEWARDEN_ON_STORE_ERROR", value_enum)]
    pub on_store_error: Option<FailureArg>,

    /// Whose clock decides windows: `local` (this machine's) or `redis`
    /// (Redis `TIME`, so every instance on one Redis shares one clock; only
    /// with a `redis://` store) [default: local].
    #[arg(long, env = "RATEWARDEN_TIME_SOURCE", value_enum)]
    pub time_source: Option<TimeSourceArg>,

    /// The longest one Redis call may take, in milliseconds; past it the
    /// store counts as unavailable and `--on-store-error` applies [default: 100].
    #[arg(long, env = "RATEWARDEN_STORE_TIMEOUT_MS", value_name = "MS",
          value_parser = parse_timeout_ms, allow_negative_numbers = true)]
    pub store_timeout_ms: Option<u64>,

    /// How long audit-log rows (one per allowed /ping) are kept, in whole
    /// seconds [default: 604800, 7 days].
    #[arg(long, env = "RATEWARDEN_AUDIT_RETENTION", value_name = "SECS",
          value_parser = parse_secs, allow_negative_numbers = true)]
    pub audit_retention: Option<u64>,

    /// Keep one audit-log row per N allowed /ping requests: 1 keeps every
    /// one (the seed's behaviour), 0 turns the audit log off [default: 1].
    #[arg(long, env = "RATEWARDEN_AUDIT_SAMPLE", value_name = "N",
          value_parser = parse_audit_sample, allow_negative_numbers = true)]
    pub audit_sample: Option<u64>,

    /// SQLite: the WAL length, in pages of 4 KiB, at which the writer
    /// checkpoints it so that it starts over. Under steady writes the -wal
    /// file grows to about this size; smaller pauses decisions (for the
    /// checkpoint's fsyncs) more often [default: 50000, about 200 MB].
    #[arg(long, env = "RATEWARDEN_WAL_AUTOCHECKPOINT", value_name = "PAGES",
          value_parser = parse_wal_autocheckpoint, allow_negative_numbers = true)]
    pub wal_autocheckpoint: Option<u32>,

    /// Largest accepted request body, in bytes; larger ones get 413 [default: 16384].
    #[arg(long, env = "RATEWARDEN_MAX_BODY_BYTES", value_name = "BYTES",
          value_parser = parse_body_limit, allow_negative_numbers = true)]
    pub max_body_bytes: Option<usize>,

    /// A request whose headers are not complete this many seconds after
    /// the connection opened (or after its first byte, on a kept-alive
    /// connection) gets 408 and the connection is closed [default: 10].
    #[arg(long, env = "RATEWARDEN_HEADER_READ_TIMEOUT", value_name = "SECS",
          value_parser = parse_timeout_secs, allow_negative_numbers = true)]
    pub header_read_timeout: Option<u64>,

    /// A kept-alive connection without a request for this many seconds
    /// after its last answer is closed [default: 60].
    #[arg(long, env = "RATEWARDEN_IDLE_TIMEOUT", value_name = "SECS",
          value_parser = parse_timeout_secs, allow_negative_numbers = true)]
    pub idle_timeout: Option<u64>,

    /// The most client connections open at once; at the maximum the
    /// oldest one without a request in progress is closed to make room
    /// [default: the file-descriptor limit less a reserve].
    #[arg(long, env = "RATEWARDEN_MAX_CONNECTIONS", value_name = "N",
          value_parser = parse_max_connections, allow_negative_numbers = true)]
    pub max_connections: Option<usize>,
}

/// `--ping-key` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum KeySourceArg {
    /// The `X-Client-Key` header, `127.0.0.1` when missing or empty (seed A;
    /// a client can forge it).
    Header,
    /// The TCP peer address.
    PeerIp,
    /// The client address from `X-Forwarded-For`, believed only when the
    /// peer is a `--trusted-proxy`.
    Forwarded,
}

/// `--on-store-error` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FailureArg {
    /// Allow the request unchecked, log a warning, count it.
    Open,
    /// Refuse with 503 problem details.
    Closed,
}

/// `--time-source` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TimeSourceArg {
    /// This machine's clock.
    Local,
    /// Redis `TIME`.
    Redis,
}

impl ServeArgs {
    /// What the flags and environment give, for [`Settings::resolve`].
    pub fn overrides(&self) -> Overrides {
        Overrides {
            listen: self.listen,
            grpc_listen: self.grpc_listen,
            envoy_config: self.envoy_config.clone(),
            db: self.db.clone(),
            store: self.store.clone(),
            ping_limit: self.ping_limit,
            ping_window_secs: self.ping_window,
            ping_algorithm: self.ping_algorithm,
            check_limit: self.check_limit,
            check_window_secs: self.check_window,
            ping_key: self.ping_key.map(|k| match k {
                KeySourceArg::Header => KeySourceKind::Header,
                KeySourceArg::PeerIp => KeySourceKind::PeerIp,
                KeySourceArg::Forwarded => KeySourceKind::Forwarded,
            }),
            trusted_proxies: (!self.trusted_proxies.is_empty())
                .then(|| self.trusted_proxies.clone()),
            on_store_error: self.on_store_error.map(|f| match f {
                FailureArg::Open => FailureMode::Open,
                FailureArg::Closed => FailureMode::Closed,
            }),
            time_source: self.time_source.map(|t| match t {
                TimeSourceArg::Local => TimeSource::Local,
                TimeSourceArg::Redis => TimeSource::Redis,
            }),
            store_timeout_ms: self.store_timeout_ms,
            audit_retention_secs: self.audit_retention,
            audit_sample: self.audit_sample,
            wal_autocheckpoint: self.wal_autocheckpoint,
            max_body_bytes: self.max_body_bytes,
            header_read_timeout_secs: self.header_read_timeout,
            idle_timeout_secs: self.idle_timeout,
            max_connections: self.max_connections,
        }
    }

    /// Reads `--config` (when given) and resolves the settings; the admin
    /// key comes from `RATEWARDEN_ADMIN_KEY`.
    ///
    /// # Errors
    /// Every error of the file and of the settings.
    pub fn into_settings(self, admin_key: Option<String>) -> Result<Settings, ConfigErrors> {
        let file = self.config.as_deref().map(ConfigFile::load).transpose()?;
        Settings::resolve(self.overrides(), file.as_ref(), admin_key)
    }
}

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

/// Validated settings of `ratewarden replay`.
#[derive(Debug, Clone)]
pub struct ReplaySettings {
    /// The policy every request is decided by (named `replay`).
    pub policy: Policy,
    /// Where state lives.
    pub store: StoreConfig,
    /// What to do with a SQLite file that a running service has open.
    pub live_store: LiveStore,
    /// The longest one Redis call may take (`--store-timeout-ms`).
    pub store_timeout: Duration,
}

/// What `replay` does with a SQLite store that a running service (or
/// another replay) holds open (`--allow-live-store`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LiveStore {
    /// Refuse it before opening it: replaying would change live counters.
    Refuse,
    /// Warn and replay on it anyway.
    Allow,
}

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

/// `--store`'s parser: [`parse_store`], with errors that never repeat
/// the value as typed (clap's own would, and a Redis URL may hold a
/// password): the error is clap's, naming the flag (or, through
/// [`crate::cli::parse`], the variable), with the URL redacted as the
/// offending value.
#[derive(Debug, Clone, Copy)]
pub struct StoreParser;

impl clap::builder::TypedValueParser for StoreParser {
    type Value = StoreConfig;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<StoreConfig, clap::Error> {
        use clap::error::{ContextKind, ContextValue};
        let parse: fn(&str) -> Result<StoreConfig, String> = parse_store;
        parse.parse_ref(cmd, arg, value).map_err(|mut e| {
            if e.get(ContextKind::InvalidValue).is_some() {
                let shown = store_for_display(&value.to_string_lossy());
                e.insert(ContextKind::InvalidValue, ContextValue::String(shown));
            }
            e
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratewarden_config::values::MAX_WINDOW_SECS;
    use ratewarden_config::{AdminKey, KeySource};

    fn serve(args: &[&str]) -> Result<ServeArgs, clap::Error> {
        let argv = ["ratewarden", "serve"].iter().chain(args);
        Cli::try_parse_from(argv).map(|cli| match cli.command {
            Command::Serve(a) => a,
            other => panic!("not serve: {other:?}"),
        })
    }

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

    fn policy<'s>(s: &'s Settings, name: &str) -> &'s Policy {
        &s.policies.get(name).unwrap().policy
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

    #[test]
    fn defaults_are_the_seeds() {
        let s = serve(&[]).unwrap().into_settings(None).unwrap();
        assert_eq!(
            (
                policy(&s, "ping").quota.limit(),
                policy(&s, "ping").quota.window()
            ),
            (3, Duration::from_secs(60))
        );
        assert_eq!(
            (
                policy(&s, "check").quota.limit(),
                policy(&s, "check").quota.window()
            ),
            (10, Duration::from_secs(60))
        );
        assert_eq!(s.listen.to_string(), "127.0.0.1:8080");
        assert_eq!(s.ping_key, KeySource::Header);
        assert!(s.admin_key.is_none());
    }

    #[test]
    fn invalid_numbers_are_refused_with_the_setting_and_value_named() {
        for (flag, value) in [
            ("--ping-window", "0"),
            ("--ping-window", "-5"),
            ("--check-window", "1.5"),
            ("--ping-limit", "-1"),
            ("--check-limit", "ten"),
            ("--ping-limit", "2.0"),
            ("--ping-limit", "99999999999999999999"),
        ] {
            let err = serve(&[flag, value]).unwrap_err().to_string();
            assert!(
                err.contains(flag) && err.contains(value),
                "{flag} {value}: {err}"
            );
        }
    }

    #[test]
    fn the_store_defaults_to_sqlite_at_db_and_can_be_memory() {
        let s = serve(&["--db", "x.db"])
            .unwrap()
            .into_settings(None)
            .unwrap();
        assert_eq!(s.store, StoreConfig::Sqlite("x.db".into()));
        let s = serve(&["--store", "memory"])
            .unwrap()
            .into_settings(None)
            .unwrap();
        assert_eq!(s.store, StoreConfig::Memory);
        let s = serve(&["--store", "sqlite:/tmp/a b.db"])
            .unwrap()
            .into_settings(None)
            .unwrap();
        assert_eq!(s.store, StoreConfig::Sqlite("/tmp/a b.db".into()));
        for bad in [
            "sqlite:",
            "redis",
            "mem",
            "",
            "redis://h:port/0",
            "rediss://h/0",
        ] {
            let err = serve(&["--store", bad]).unwrap_err().to_string();
            assert!(err.contains("--store"), "{bad}: {err}");
        }
        let s = serve(&["--store", "redis://:pw@127.0.0.1:6390/2"])
            .unwrap()
            .into_settings(None)
            .unwrap();
        let StoreConfig::Redis(config) = &s.store else {
            panic!("not a Redis store: {:?}", s.store);
        };
        assert_eq!(config.url(), "redis://:pw@127.0.0.1:6390/2");
        assert_eq!(s.store.to_string(), "redis://:<redacted>@127.0.0.1:6390/2");
        assert!(!format!("{:?}", s.store).contains("pw"), "{:?}", s.store);
        for bad in ["redis://:hunter2@h:port/0", "rediss://:hunter2@h/0"] {
            let err = serve(&["--store", bad]).unwrap_err().to_string();
            assert!(
                err.contains("--store") && err.contains("<redacted>"),
                "{err}"
            );
            assert!(!err.contains("hunter2"), "the password leaked: {err}");
        }
    }

    #[test]
    fn the_ping_algorithm_is_configurable_and_checked() {
        let s = serve(&[]).unwrap().into_settings(None).unwrap();
        assert_eq!(policy(&s, "ping").algorithm, Algorithm::FixedWindow);
        let s = serve(&["--ping-algorithm", "gcra"])
            .unwrap()
            .into_settings(None)
            .unwrap();
        assert_eq!(policy(&s, "ping").algorithm, Algorithm::Gcra);
        let err = serve(&["--ping-algorithm", "leaky"])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("--ping-algorithm") && err.contains("leaky"),
            "{err}"
        );
    }

    #[test]
    fn redis_time_needs_a_redis_store() {
        let err = serve(&["--time-source", "redis"])
            .unwrap()
            .into_settings(None)
            .unwrap_err();
        assert!(err.to_string().contains("needs a redis://"), "{err}");
        let ok = serve(&[
            "--time-source",
            "redis",
            "--store",
            "redis://127.0.0.1:6379/0",
        ])
        .unwrap();
        assert_eq!(
            ok.into_settings(None).unwrap().time_source,
            TimeSource::Redis
        );
    }

    #[test]
    fn a_limit_of_zero_is_accepted() {
        let s = serve(&["--ping-limit", "0"])
            .unwrap()
            .into_settings(None)
            .unwrap();
        assert_eq!(policy(&s, "ping").quota.limit(), 0);
    }

    #[test]
    fn an_empty_admin_key_means_none_and_is_never_printed() {
        assert!(AdminKey::new(Some(String::new())).is_none());
        let key = AdminKey::new(Some("s3cret".into())).unwrap();
        assert!(!format!("{key:?}").contains("s3cret"));
    }

    #[test]
    fn forwarded_needs_a_trusted_proxy() {
        let err = serve(&["--ping-key", "forwarded"])
            .unwrap()
            .into_settings(None)
            .unwrap_err();
        assert!(err.to_string().contains("--trusted-proxy"), "{err}");
        let ok = serve(&[
            "--ping-key",
            "forwarded",
            "--trusted-proxy",
            "10.0.0.0/8,127.0.0.1",
        ])
        .unwrap();
        let s = ok.into_settings(None).unwrap();
        assert!(matches!(s.ping_key, KeySource::Forwarded));
        assert_eq!(s.trusted_proxies.len(), 2);
    }
}
