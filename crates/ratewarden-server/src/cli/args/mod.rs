//! The command line: subcommands and flags, each `serve` flag also
//! readable from a `RATEWARDEN_*` environment variable (a flag wins over
//! its variable, the variable over the configuration file, the file over
//! the default). Values are parsed by `ratewarden_config::values`, the
//! same parsers the file uses; error messages name the flag and the
//! offending value ([`crate::cli::parse`] names the variable instead when
//! the value came from one).

use std::net::SocketAddr;
use std::num::NonZeroU64;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use ipnet::IpNet;
use ratewarden_config::envoy::options::{LimitHeaders, parse_limit_headers, parse_max_descriptors};
use ratewarden_config::values::{
    parse_algorithm, parse_audit_max_rows, parse_audit_sample, parse_body_limit, parse_grpc_listen,
    parse_limit, parse_listen, parse_max_connections, parse_max_keys, parse_net, parse_secs,
    parse_store, parse_timeout_ms, parse_timeout_secs, parse_wal_autocheckpoint, store_for_display,
};
use ratewarden_config::{
    ConfigErrors, ConfigFile, KeySourceKind, Overrides, Settings, StoreConfig, TimeSource, defaults,
};
use ratewarden_core::Algorithm;
use ratewarden_limiter::FailureMode;

mod replay;

pub use replay::{REPLAY_STORE_TIMEOUT_MS, ReplayArgs, ReplayFlagsError};

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
    ///
    /// With RUNTIME_ROOT set, envoyproxy/ratelimit's environment variables
    /// (RUNTIME_SUBDIRECTORY, REDIS_URL, PORT, GRPC_PORT, …) are read too,
    /// below every flag, RATEWARDEN_* variable and file key; each one read
    /// is named at start. See docs/envoy.md.
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
/// given comes from the configuration file, else the default (shown, as
/// [`show_default`] reads it from `ratewarden_config::defaults`).
#[derive(Debug, Clone, Args)]
#[command(mut_args(show_default))]
pub struct ServeArgs {
    /// A TOML configuration file (settings and policies; reloaded on SIGHUP
    /// and when it changes). See docs/configuration.md.
    #[arg(long, env = "RATEWARDEN_CONFIG", value_name = "PATH")]
    pub config: Option<PathBuf>,

    /// Address to listen on: an IP address and a port (port 0: any free
    /// one).
    #[arg(long, env = "RATEWARDEN_LISTEN", value_name = "ADDR", value_parser = parse_listen)]
    pub listen: Option<SocketAddr>,

    /// Address of the gRPC server: Envoy's rate limit service
    /// (`envoy.service.ratelimit.v3`) and `grpc.health.v1`. See docs/envoy.md.
    #[arg(long, env = "RATEWARDEN_GRPC_LISTEN", value_name = "ADDR",
          value_parser = parse_grpc_listen)]
    pub grpc_listen: Option<SocketAddr>,

    /// envoyproxy/ratelimit's YAML rules, loaded unchanged: a file, or a
    /// directory of *.yaml files (reloaded like --config). See docs/envoy.md.
    #[arg(long, env = "RATEWARDEN_ENVOY_CONFIG", value_name = "FILE|DIR")]
    pub envoy_config: Option<PathBuf>,

    /// SQLite database file, created when missing.
    #[arg(long, env = "RATEWARDEN_DB", value_name = "PATH")]
    pub db: Option<PathBuf>,

    /// Where limiter state lives: `memory` (this process only, lost at exit),
    /// `sqlite:PATH` or `redis://HOST:PORT/DB` (shared by every instance
    /// using it; port 6379 and database 0 when left out, as in
    /// `redis://127.0.0.1/0`).
    #[arg(long, env = "RATEWARDEN_STORE", value_name = "memory|sqlite:PATH|redis://HOST:PORT/DB", value_parser = StoreParser)]
    pub store: Option<StoreConfig>,

    /// Requests allowed per window on GET /ping; 0 refuses every request.
    #[arg(long, env = "RATEWARDEN_PING_LIMIT", value_name = "N",
          value_parser = parse_limit, allow_negative_numbers = true)]
    pub ping_limit: Option<u64>,

    /// Window length of GET /ping, in whole seconds.
    #[arg(long, env = "RATEWARDEN_PING_WINDOW", value_name = "SECS",
          value_parser = parse_secs, allow_negative_numbers = true)]
    pub ping_window: Option<u64>,

    /// Checks allowed per sliding window on POST /rate/check, per user and endpoint.
    #[arg(long, env = "RATEWARDEN_CHECK_LIMIT", value_name = "N",
          value_parser = parse_limit, allow_negative_numbers = true)]
    pub check_limit: Option<u64>,

    /// Sliding-window length of POST /rate/check, in whole seconds.
    #[arg(long, env = "RATEWARDEN_CHECK_WINDOW", value_name = "SECS",
          value_parser = parse_secs, allow_negative_numbers = true)]
    pub check_window: Option<u64>,

    /// The algorithm behind GET /ping: `fixed_window` (seed A), `sliding_log`,
    /// `sliding_window` or `gcra` (see docs/algorithms.md).
    #[arg(long, env = "RATEWARDEN_PING_ALGORITHM", value_name = "ALGORITHM",
          value_parser = parse_algorithm)]
    pub ping_algorithm: Option<Algorithm>,

    /// Where GET /ping takes its key from.
    #[arg(long, env = "RATEWARDEN_PING_KEY", value_enum)]
    pub ping_key: Option<KeySourceArg>,

    /// Proxies whose X-Forwarded-For is believed (IP or CIDR; repeat the flag
    /// or separate with commas). Used by `--ping-key forwarded`.
    #[arg(long = "trusted-proxy", env = "RATEWARDEN_TRUSTED_PROXIES", value_delimiter = ',',
          value_name = "IP|CIDR", value_parser = parse_net)]
    pub trusted_proxies: Vec<IpNet>,

    /// What a decision does when the store cannot be reached, for policies
    /// that set nothing else: `open` allows the request (logged and
    /// counted), `closed` answers 503.
    #[arg(long, env = "RATEWARDEN_ON_STORE_ERROR", value_enum)]
    pub on_store_error: Option<FailureArg>,

    /// Whose clock decides windows: `local` (this machine's) or `redis`
    /// (Redis `TIME`, so every instance on one Redis shares one clock; only
    /// with a `redis://` store).
    #[arg(long, env = "RATEWARDEN_TIME_SOURCE", value_enum)]
    pub time_source: Option<TimeSourceArg>,

    /// The longest one Redis call may take, in milliseconds; past it the
    /// store counts as unavailable and `--on-store-error` applies.
    #[arg(long, env = "RATEWARDEN_STORE_TIMEOUT_MS", value_name = "MS",
          value_parser = parse_timeout_ms, allow_negative_numbers = true)]
    pub store_timeout_ms: Option<u64>,

    /// How long audit-log rows (one per allowed /ping) are kept, in whole
    /// seconds.
    #[arg(long, env = "RATEWARDEN_AUDIT_RETENTION", value_name = "SECS",
          value_parser = parse_secs, allow_negative_numbers = true)]
    pub audit_retention: Option<u64>,

    /// Keep one audit-log row per N allowed /ping requests: 1 keeps every
    /// one (the seed's behaviour), 0 turns the audit log off.
    #[arg(long, env = "RATEWARDEN_AUDIT_SAMPLE", value_name = "N",
          value_parser = parse_audit_sample, allow_negative_numbers = true)]
    pub audit_sample: Option<u64>,

    /// SQLite: the most audit-log rows kept; past it the oldest are
    /// pruned (beside --audit-retention), counted in
    /// ratewarden_audit_rows_pruned_total{reason="size"}.
    #[arg(long, env = "RATEWARDEN_AUDIT_MAX_ROWS", value_name = "ROWS",
          value_parser = parse_audit_max_rows, allow_negative_numbers = true)]
    pub audit_max_rows: Option<u64>,

    /// Memory store: the most keys held (per policy and algorithm). At the
    /// bound, expired keys are swept; if none has expired, a new key is a
    /// store failure and --on-store-error (or the policy's own) decides,
    /// while keys already held are decided exactly.
    #[arg(long, env = "RATEWARDEN_MAX_KEYS", value_name = "N",
          value_parser = parse_max_keys, allow_negative_numbers = true)]
    pub max_keys: Option<NonZeroU64>,

    /// SQLite: the WAL length, in pages of 4 KiB, at which the writer
    /// checkpoints it so that it starts over. Under steady writes the -wal
    /// file grows to about this size, and never past twice it (plus one
    /// transaction), where the writer waits for the checkpoint; smaller
    /// pauses decisions (for the checkpoint's fsyncs) more often.
    #[arg(long, env = "RATEWARDEN_WAL_AUTOCHECKPOINT", value_name = "PAGES",
          value_parser = parse_wal_autocheckpoint, allow_negative_numbers = true)]
    pub wal_autocheckpoint: Option<u32>,

    /// Largest accepted request body, in bytes; larger ones get 413.
    #[arg(long, env = "RATEWARDEN_MAX_BODY_BYTES", value_name = "BYTES",
          value_parser = parse_body_limit, allow_negative_numbers = true)]
    pub max_body_bytes: Option<usize>,

    /// A request whose headers are not complete this many seconds after
    /// the connection opened (or after its first byte, on a kept-alive
    /// connection) gets 408 and the connection is closed.
    #[arg(long, env = "RATEWARDEN_HEADER_READ_TIMEOUT", value_name = "SECS",
          value_parser = parse_timeout_secs, allow_negative_numbers = true)]
    pub header_read_timeout: Option<u64>,

    /// A kept-alive connection without a request for this many seconds
    /// after its last answer is closed.
    #[arg(long, env = "RATEWARDEN_IDLE_TIMEOUT", value_name = "SECS",
          value_parser = parse_timeout_secs, allow_negative_numbers = true)]
    pub idle_timeout: Option<u64>,

    /// The most client connections open at once; at the maximum the
    /// oldest one without a request in progress is closed to make room.
    #[arg(long, env = "RATEWARDEN_MAX_CONNECTIONS", value_name = "N",
          value_parser = parse_max_connections, allow_negative_numbers = true)]
    pub max_connections: Option<usize>,

    /// The most descriptors one Envoy rate limit call (gRPC or POST /json)
    /// may carry; more are refused with INVALID_ARGUMENT (400 on /json).
    #[arg(long, env = "RATEWARDEN_ENVOY_MAX_DESCRIPTORS", value_name = "N",
          value_parser = parse_max_descriptors, allow_negative_numbers = true)]
    pub envoy_max_descriptors: Option<usize>,

    /// envoyproxy/ratelimit's optional response headers in Envoy answers,
    /// of the most restrictive descriptor: `off`, `on` (RateLimit-Limit,
    /// RateLimit-Remaining, RateLimit-Reset) or three names
    /// LIMIT,REMAINING,RESET.
    #[arg(long, env = "RATEWARDEN_ENVOY_LIMIT_HEADERS", value_name = "off|on|LIMIT,REMAINING,RESET",
          value_parser = limit_headers_arg)]
    pub envoy_limit_headers: Option<LimitHeadersArg>,

    /// GET /healthcheck and gRPC health report the service down while no
    /// Envoy rules domain is loaded.
    #[arg(long, env = "RATEWARDEN_ENVOY_REQUIRE_RULES", value_name = "BOOL",
          num_args = 0..=1, default_missing_value = "true",
          value_parser = clap::builder::BoolishValueParser::new())]
    pub envoy_require_rules: Option<bool>,
}

/// `arg`'s help with `[default: …]` when it is a setting: the default as
/// [`defaults::documented`] states it. The flags stay `Option`s (clap's
/// own defaults would hide whether a flag was given, and a file or a
/// variable ranks below a flag only when it was not).
fn show_default(arg: clap::Arg) -> clap::Arg {
    let Some(default) = defaults::stated(arg.get_id().as_str()) else {
        return arg;
    };
    let shown = |help: Option<&clap::builder::StyledStr>| {
        let help = help.map(ToString::to_string).unwrap_or_default();
        format!("{help} [default: {default}]")
    };
    let help = shown(arg.get_help());
    match arg.get_long_help().map(|long| shown(Some(long))) {
        Some(long_help) => arg.help(help).long_help(long_help),
        None => arg.help(help),
    }
}

/// `--envoy-limit-headers`: `None` for `off`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitHeadersArg(pub Option<LimitHeaders>);

/// [`parse_limit_headers`] for clap.
fn limit_headers_arg(s: &str) -> Result<LimitHeadersArg, String> {
    parse_limit_headers(s).map(LimitHeadersArg)
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
            audit_max_rows: self.audit_max_rows,
            max_keys: self.max_keys,
            wal_autocheckpoint: self.wal_autocheckpoint,
            max_body_bytes: self.max_body_bytes,
            header_read_timeout_secs: self.header_read_timeout,
            idle_timeout_secs: self.idle_timeout,
            max_connections: self.max_connections,
            envoy_max_descriptors: self.envoy_max_descriptors,
            envoy_limit_headers: self.envoy_limit_headers.clone().map(|a| a.0),
            envoy_require_rules: self.envoy_require_rules,
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
    use ratewarden_config::{AdminKey, KeySource};
    use ratewarden_core::Policy;
    use std::time::Duration;

    pub(super) fn serve(args: &[&str]) -> Result<ServeArgs, clap::Error> {
        let argv = ["ratewarden", "serve"].iter().chain(args);
        Cli::try_parse_from(argv).map(|cli| match cli.command {
            Command::Serve(a) => a,
            other => panic!("not serve: {other:?}"),
        })
    }

    fn policy<'s>(s: &'s Settings, name: &str) -> &'s Policy {
        &s.policies.get(name).unwrap().policy
    }

    #[test]
    fn the_help_shows_every_setting_with_the_config_crates_default() {
        use clap::CommandFactory;
        let cli = Cli::command();
        let serve = cli.find_subcommand("serve").unwrap();
        for setting in defaults::documented() {
            let arg = serve
                .get_arguments()
                .find(|a| a.get_id() == setting.key)
                .unwrap_or_else(|| panic!("no flag for {}", setting.key));
            assert_eq!(
                arg.get_long().map(|l| format!("--{l}")),
                Some(setting.flag.to_owned())
            );
            let help = arg.get_help().map(ToString::to_string).unwrap_or_default();
            let shown = format!("[default: {}]", setting.default);
            assert!(help.ends_with(&shown), "{}: {help}", setting.flag);
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
