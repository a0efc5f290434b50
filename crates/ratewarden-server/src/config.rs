//! Configuration: command-line flags, each also readable from a
//! `RATEWARDEN_*` environment variable (a flag wins over its variable),
//! validated once into [`Settings`]. Error messages name the setting and
//! the offending value.

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};
use ipnet::IpNet;
use ratewarden_core::{Algorithm, Policy, Quota};
use ratewarden_redis::RedisConfig;

/// The environment variable that holds the admin key. Never a flag, so it
/// cannot leak through `ps` or shell history.
pub const ADMIN_KEY_ENV: &str = "RATEWARDEN_ADMIN_KEY";

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
pub enum Command {
    /// Run the HTTP service.
    Serve(ServeArgs),
    /// Decide a recorded trace of requests (standard input) and print each
    /// decision (standard output); a summary goes to standard error.
    Replay(ReplayArgs),
}

/// Flags of `ratewarden serve`.
#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(
        long,
        env = "RATEWARDEN_LISTEN",
        default_value = "127.0.0.1:8080",
        value_name = "ADDR"
    )]
    pub listen: SocketAddr,

    /// SQLite database file (created when missing).
    #[arg(
        long,
        env = "RATEWARDEN_DB",
        default_value = "./ratewarden.db",
        value_name = "PATH"
    )]
    pub db: PathBuf,

    /// Where limiter state lives: `memory` (this process only, lost at exit),
    /// `sqlite:PATH` or `redis://HOST:PORT/DB` (shared by every instance
    /// using it). Default: SQLite at `--db`.
    #[arg(long, env = "RATEWARDEN_STORE", value_name = "memory|sqlite:PATH|redis://HOST:PORT/DB", value_parser = StoreParser)]
    pub store: Option<StoreConfig>,

    /// Requests allowed per window on GET /ping (0 refuses every request).
    #[arg(long, env = "RATEWARDEN_PING_LIMIT", default_value = "3", value_name = "N",
          value_parser = parse_limit, allow_negative_numbers = true)]
    pub ping_limit: u64,

    /// Fixed-window length of GET /ping, in whole seconds.
    #[arg(long, env = "RATEWARDEN_PING_WINDOW", default_value = "60", value_name = "SECS",
          value_parser = parse_window_secs, allow_negative_numbers = true)]
    pub ping_window: u64,

    /// Checks allowed per sliding window on POST /rate/check, per user and endpoint.
    #[arg(long, env = "RATEWARDEN_CHECK_LIMIT", default_value = "10", value_name = "N",
          value_parser = parse_limit, allow_negative_numbers = true)]
    pub check_limit: u64,

    /// Sliding-window length of POST /rate/check, in whole seconds.
    #[arg(long, env = "RATEWARDEN_CHECK_WINDOW", default_value = "60", value_name = "SECS",
          value_parser = parse_window_secs, allow_negative_numbers = true)]
    pub check_window: u64,

    /// The algorithm behind GET /ping: `fixed_window` (seed A), `sliding_log`,
    /// `sliding_window` or `gcra` (see docs/algorithms.md).
    #[arg(long, env = "RATEWARDEN_PING_ALGORITHM", default_value = "fixed_window",
          value_name = "ALGORITHM", value_parser = parse_algorithm)]
    pub ping_algorithm: Algorithm,

    /// Where GET /ping takes its key from.
    #[arg(long, env = "RATEWARDEN_PING_KEY", value_enum, default_value_t = KeySourceArg::Header)]
    pub ping_key: KeySourceArg,

    /// Proxies whose X-Forwarded-For is believed (IP or CIDR; repeat the flag
    /// or separate with commas). Only used with `--ping-key forwarded`.
    #[arg(long = "trusted-proxy", env = "RATEWARDEN_TRUSTED_PROXIES", value_delimiter = ',',
          value_name = "IP|CIDR", value_parser = parse_net)]
    pub trusted_proxies: Vec<IpNet>,

    /// What a decision does when the store cannot be reached: `open` allows
    /// the request (logged and counted), `closed` answers 503.
    #[arg(long, env = "RATEWARDEN_ON_STORE_ERROR", value_enum, default_value_t = FailurePolicy::Open)]
    pub on_store_error: FailurePolicy,

    /// Whose clock decides windows: `local` (this machine's) or `redis`
    /// (Redis `TIME`, so every instance on one Redis shares one clock; only
    /// with a `redis://` store).
    #[arg(long, env = "RATEWARDEN_TIME_SOURCE", value_enum, default_value_t = TimeSource::Local)]
    pub time_source: TimeSource,

    /// The longest one Redis call may take, in milliseconds; past it the
    /// store counts as unavailable and `--on-store-error` applies.
    #[arg(long, env = "RATEWARDEN_STORE_TIMEOUT_MS", default_value = "100", value_name = "MS",
          value_parser = parse_timeout_ms, allow_negative_numbers = true)]
    pub store_timeout_ms: u64,

    /// How long audit-log rows (one per allowed /ping) are kept, in whole seconds.
    #[arg(long, env = "RATEWARDEN_AUDIT_RETENTION", default_value = "604800", value_name = "SECS",
          value_parser = parse_window_secs, allow_negative_numbers = true)]
    pub audit_retention: u64,

    /// Largest accepted request body, in bytes; larger ones get 413.
    #[arg(long, env = "RATEWARDEN_MAX_BODY_BYTES", default_value = "16384", value_name = "BYTES",
          value_parser = parse_body_limit, allow_negative_numbers = true)]
    pub max_body_bytes: usize,
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
    #[arg(long, value_name = "DUR", value_parser = parse_window, allow_hyphen_values = true)]
    pub window: Duration,

    /// GCRA only: units that may pass at once after a quiet period
    /// (default: the limit). Refused with the other algorithms.
    #[arg(long, value_name = "N", value_parser = parse_burst, allow_negative_numbers = true)]
    pub burst: Option<u64>,

    /// Where limiter state lives: `memory`, `sqlite:PATH` or
    /// `redis://HOST:PORT/DB`. A SQLite file or Redis
    /// keeps its state, so a second replay on it continues from the first.
    #[arg(long, value_name = "memory|sqlite:PATH|redis://HOST:PORT/DB", default_value = "memory", value_parser = StoreParser)]
    pub store: StoreConfig,
}

const REPLAY_HELP: &str = "\
Input, one request per line: <unix_ms> <key> [<cost>]
  fields separated by ASCII whitespace; blank lines and lines whose first
  non-blank character is # are skipped; times must not decrease; cost >= 1
  (default 1). A malformed line stops the replay with exit status 2.
Output, one line per request:
  <unix_ms> <key> allow|deny <remaining> <retry_after_ms>
  <unix_ms> <key> never - -      (the cost can never pass)";

/// Validated settings of `ratewarden replay`.
#[derive(Debug, Clone)]
pub struct ReplaySettings {
    /// The policy every request is decided by (named `replay`).
    pub policy: Policy,
    /// Where state lives.
    pub store: StoreConfig,
}

impl ReplayArgs {
    /// Validates the flags into [`ReplaySettings`].
    ///
    /// # Errors
    /// [`ConfigError::Quota`] for a quota the engine refuses,
    /// [`ConfigError::BurstNeedsGcra`] for `--burst` with another algorithm.
    pub fn into_settings(self) -> Result<ReplaySettings, ConfigError> {
        let quota = Quota::new(self.limit, self.window).map_err(|source| ConfigError::Quota {
            setting: "--limit/--window",
            source,
        })?;
        let quota = match (self.algorithm, self.burst) {
            (_, None) => quota,
            (Algorithm::Gcra, Some(burst)) => quota.with_burst(burst),
            (algorithm, Some(_)) => return Err(ConfigError::BurstNeedsGcra(algorithm)),
        };
        Ok(ReplaySettings {
            policy: Policy {
                name: "replay".into(),
                algorithm: self.algorithm,
                quota,
            },
            store: self.store,
        })
    }
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

/// Where GET /ping takes its key from (SPEC section 1, "Key source").
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeySource {
    /// The `X-Client-Key` header; `127.0.0.1` when missing or empty.
    Header,
    /// The TCP peer IP address.
    PeerIp,
    /// The rightmost `X-Forwarded-For` address that is not a trusted proxy,
    /// when the peer itself is a trusted proxy; otherwise the peer address.
    Forwarded {
        /// The proxies whose header is believed.
        trusted: Vec<IpNet>,
    },
}

/// Whose clock decides windows (ARCHITECTURE.md, "Time is injected").
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TimeSource {
    /// This machine's clock.
    Local,
    /// Redis `TIME`: the local clock corrected by an offset to Redis,
    /// measured at start and every second.
    Redis,
}

/// What decisions do when the store fails transiently (SPEC section 5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FailurePolicy {
    /// Allow the request, log a warning, count it in
    /// `ratewarden_store_failures_total{policy="open"}`.
    Open,
    /// Refuse with 503 problem details.
    Closed,
}

/// The admin key. Its `Debug` and `Display` never show it.
#[derive(Clone, PartialEq, Eq)]
pub struct AdminKey(String);

impl AdminKey {
    /// `None` for an unset or empty key: every reset is then refused (fail
    /// closed, seed B).
    pub fn new(key: Option<String>) -> Option<AdminKey> {
        key.filter(|k| !k.is_empty()).map(AdminKey)
    }

    /// The key's bytes, for the constant-time comparison.
    pub fn as_bytes(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

impl fmt::Debug for AdminKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AdminKey(<redacted>)")
    }
}

/// What opening a store needs besides where it is, for
/// [`crate::startup::open_store`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreOptions {
    /// How long audit-log rows are kept (stores with an audit log only).
    pub audit_retention: Duration,
    /// The longest one call to a networked store (Redis) may take before it
    /// counts as unavailable.
    pub call_timeout: Duration,
}

impl Default for StoreOptions {
    /// Seven days of audit log, as `serve`'s default.
    fn default() -> StoreOptions {
        StoreOptions {
            audit_retention: Duration::from_secs(7 * 24 * 60 * 60),
            call_timeout: Duration::from_millis(100),
        }
    }
}

/// Where limiter state is kept. The one place that names every store; see
/// [`crate::startup::open_store`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreConfig {
    /// In this process's memory: the fastest, lost at exit, not shared.
    Memory,
    /// Embedded SQLite at this path.
    Sqlite(PathBuf),
    /// A Redis server, shared by every instance that uses it.
    Redis(RedisConfig),
}

impl std::fmt::Display for StoreConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreConfig::Memory => f.write_str("memory"),
            StoreConfig::Sqlite(path) => write!(f, "sqlite:{}", path.display()),
            // Redacted: the URL's password is never shown.
            StoreConfig::Redis(config) => write!(f, "{config}"),
        }
    }
}

/// `--store`'s parser: [`parse_store`], with errors that never repeat
/// the value as typed (clap's own message would, and a Redis URL may hold
/// a password); the message names the flag and shows the URL redacted.
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
        let flag = arg
            .and_then(clap::Arg::get_long)
            .map_or_else(|| "--store".to_owned(), |long| format!("--{long}"));
        let refuse = |message: String| {
            clap::Error::raw(
                clap::error::ErrorKind::ValueValidation,
                format!("invalid value for '{flag}': {message}\n"),
            )
            .with_cmd(cmd)
        };
        let text = value
            .to_str()
            .ok_or_else(|| refuse("the value is not valid UTF-8".to_owned()))?;
        parse_store(text).map_err(refuse)
    }
}

/// `memory`, `sqlite:PATH` or a Redis URL (`redis://HOST:PORT/DB`), as
/// `--store` takes it.
pub fn parse_store(s: &str) -> Result<StoreConfig, String> {
    match s.split_once(':') {
        _ if s == "memory" => Ok(StoreConfig::Memory),
        Some(("sqlite", path)) if !path.is_empty() => Ok(StoreConfig::Sqlite(PathBuf::from(path))),
        Some(("redis" | "rediss" | "redis+unix", _)) => RedisConfig::from_url(s)
            .map(StoreConfig::Redis)
            .map_err(|e| e.to_string()),
        _ => Err(format!(
            "'{s}' is not a store: use memory, sqlite:PATH or redis://HOST:PORT/DB"
        )),
    }
}

/// Validated settings of the service.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Address to listen on (port 0 picks a free one).
    pub listen: SocketAddr,
    /// Where state lives.
    pub store: StoreConfig,
    /// GET /ping: fixed window, seed A.
    pub ping: Policy,
    /// POST /rate/check: sliding log per (user, endpoint), seed B.
    pub check: Policy,
    /// Where GET /ping takes its key from.
    pub ping_key: KeySource,
    /// Fail open or closed on transient store errors.
    pub on_store_error: FailurePolicy,
    /// Whose clock decides windows.
    pub time_source: TimeSource,
    /// The longest one networked store call may take.
    pub store_timeout: Duration,
    /// The admin key; `None` refuses every reset.
    pub admin_key: Option<AdminKey>,
    /// Audit-log retention.
    pub audit_retention: Duration,
    /// Largest accepted request body, in bytes.
    pub max_body_bytes: usize,
}

impl Settings {
    /// What [`crate::startup::open_store`] needs from these settings.
    pub fn store_options(&self) -> StoreOptions {
        StoreOptions {
            audit_retention: self.audit_retention,
            call_timeout: self.store_timeout,
        }
    }
}

/// A setting that is well-formed alone but wrong in combination.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A limit or window that the engine refuses.
    #[error("invalid {setting}")]
    Quota {
        /// The flag, e.g. `--ping-window`.
        setting: &'static str,
        /// Why.
        source: ratewarden_core::QuotaError,
    },
    /// `replay --burst` with an algorithm other than GCRA, which would
    /// silently ignore it.
    #[error("--burst applies only to --algorithm gcra, not {0}")]
    BurstNeedsGcra(Algorithm),
    /// `--time-source redis` without a `redis://` store.
    #[error("--time-source redis needs --store redis://…")]
    RedisTimeNeedsRedis,
    /// `--ping-key forwarded` without any `--trusted-proxy`.
    #[error(
        "--ping-key forwarded needs at least one --trusted-proxy (RATEWARDEN_TRUSTED_PROXIES); without one X-Forwarded-For is never believed"
    )]
    NoTrustedProxy,
}

impl ServeArgs {
    /// Validates the flags into [`Settings`]; `admin_key` comes from
    /// [`ADMIN_KEY_ENV`].
    ///
    /// # Errors
    /// [`ConfigError`] naming the setting.
    pub fn into_settings(self, admin_key: Option<String>) -> Result<Settings, ConfigError> {
        let policy = |name: &str, algorithm, limit, window_secs, setting| {
            Quota::new(limit, Duration::from_secs(window_secs))
                .map(|quota| Policy {
                    name: name.into(),
                    algorithm,
                    quota,
                })
                .map_err(|source| ConfigError::Quota { setting, source })
        };
        let ping_key = match self.ping_key {
            KeySourceArg::Header => KeySource::Header,
            KeySourceArg::PeerIp => KeySource::PeerIp,
            KeySourceArg::Forwarded if self.trusted_proxies.is_empty() => {
                return Err(ConfigError::NoTrustedProxy);
            }
            KeySourceArg::Forwarded => KeySource::Forwarded {
                trusted: self.trusted_proxies,
            },
        };
        let store = self.store.unwrap_or(StoreConfig::Sqlite(self.db));
        if self.time_source == TimeSource::Redis && !matches!(store, StoreConfig::Redis(_)) {
            return Err(ConfigError::RedisTimeNeedsRedis);
        }
        Ok(Settings {
            listen: self.listen,
            store,
            ping: policy(
                "ping",
                self.ping_algorithm,
                self.ping_limit,
                self.ping_window,
                "--ping-limit/--ping-window",
            )?,
            check: policy(
                "check",
                Algorithm::SlidingLog,
                self.check_limit,
                self.check_window,
                "--check-limit/--check-window",
            )?,
            ping_key,
            on_store_error: self.on_store_error,
            time_source: self.time_source,
            store_timeout: Duration::from_millis(self.store_timeout_ms),
            admin_key: AdminKey::new(admin_key),
            audit_retention: Duration::from_secs(self.audit_retention),
            max_body_bytes: self.max_body_bytes,
        })
    }
}

fn whole_number(s: &str) -> Result<u64, String> {
    let t = s.trim();
    if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("'{s}' is not a whole number of 0 or more"));
    }
    t.parse::<u64>().map_err(|_| format!("'{s}' is too large"))
}

/// A limit: a whole number from 0 (refuse everything) up to 2^63 − 2.
fn parse_limit(s: &str) -> Result<u64, String> {
    let n = whole_number(s)?;
    if n >= ratewarden_core::quota::MAX_COUNT {
        return Err(format!(
            "'{s}' is too large; the maximum is {}",
            ratewarden_core::quota::MAX_COUNT - 1
        ));
    }
    Ok(n)
}

/// A GCRA burst: a limit of at least 1 (a burst of 0 would make every
/// request "never").
fn parse_burst(s: &str) -> Result<u64, String> {
    match parse_limit(s)? {
        0 => Err(format!("'{s}' must be at least 1")),
        n => Ok(n),
    }
}

/// A duration in whole seconds, at least 1 (SPEC section 5: a window of 0
/// is refused) and at most 100 years.
fn parse_window_secs(s: &str) -> Result<u64, String> {
    match whole_number(s)? {
        0 => Err(format!("'{s}' must be at least 1 second")),
        n if n > MAX_WINDOW_SECS => Err(format!(
            "'{s}' is longer than the maximum of {MAX_WINDOW_SECS} seconds (100 years)"
        )),
        n => Ok(n),
    }
}

/// The longest window of every duration flag: 100 years.
const MAX_WINDOW_SECS: u64 = 100 * 365 * 24 * 60 * 60;

/// A window with a unit: a whole number of at least 1 followed by `ms`,
/// `s`, `m`, `h` or `d` (`500ms`, `60s`, `1h`), at most 100 years.
fn parse_window(s: &str) -> Result<Duration, String> {
    let digits_end = s
        .bytes()
        .position(|b| !b.is_ascii_digit())
        .unwrap_or(s.len());
    let (digits, unit) = s.split_at(digits_end);
    let unit_millis: u64 = match unit {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => 0,
    };
    if digits.is_empty() || unit_millis == 0 {
        return Err(format!(
            "'{s}' is not a whole number followed by a unit ms, s, m, h or d (e.g. 500ms, 60s, 1h)"
        ));
    }
    let too_long = || format!("'{s}' is longer than the maximum of 100 years");
    let millis = digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(unit_millis))
        .ok_or_else(too_long)?;
    match millis {
        0 => Err(format!("'{s}' must be longer than zero")),
        m if m > MAX_WINDOW_SECS * 1_000 => Err(too_long()),
        m => Ok(Duration::from_millis(m)),
    }
}

fn parse_algorithm(s: &str) -> Result<Algorithm, String> {
    s.parse::<Algorithm>().map_err(|e| e.to_string())
}

/// Milliseconds from 1 to one hour.
fn parse_timeout_ms(s: &str) -> Result<u64, String> {
    match whole_number(s)? {
        0 => Err(format!("'{s}' must be at least 1 millisecond")),
        n if n > 3_600_000 => Err(format!("'{s}' is longer than one hour")),
        n => Ok(n),
    }
}

fn parse_body_limit(s: &str) -> Result<usize, String> {
    let n = whole_number(s)?;
    usize::try_from(n)
        .ok()
        .filter(|&n| n > 0)
        .ok_or_else(|| format!("'{s}' must be at least 1 byte"))
}

fn parse_net(s: &str) -> Result<IpNet, String> {
    let t = s.trim();
    t.parse::<IpNet>()
        .or_else(|_| t.parse::<IpAddr>().map(IpNet::from))
        .map_err(|_| format!("'{s}' is neither an IP address nor a CIDR block"))
}

#[cfg(test)]
mod tests {
    use super::*;

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

    fn replay_settings(args: &[&str]) -> Result<ReplaySettings, ConfigError> {
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
            assert_eq!(parse_window(text), Ok(window), "{text}");
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
            (s.ping.quota.limit(), s.ping.quota.window()),
            (3, Duration::from_secs(60))
        );
        assert_eq!(
            (s.check.quota.limit(), s.check.quota.window()),
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
        assert_eq!(s.ping.algorithm, Algorithm::FixedWindow);
        let s = serve(&["--ping-algorithm", "gcra"])
            .unwrap()
            .into_settings(None)
            .unwrap();
        assert_eq!(s.ping.algorithm, Algorithm::Gcra);
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
        assert!(matches!(err, ConfigError::RedisTimeNeedsRedis));
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
        assert_eq!(s.ping.quota.limit(), 0);
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
        assert!(err.to_string().contains("--trusted-proxy"));
        let ok = serve(&[
            "--ping-key",
            "forwarded",
            "--trusted-proxy",
            "10.0.0.0/8,127.0.0.1",
        ])
        .unwrap();
        let s = ok.into_settings(None).unwrap();
        assert!(matches!(s.ping_key, KeySource::Forwarded { trusted } if trusted.len() == 2));
    }
}
