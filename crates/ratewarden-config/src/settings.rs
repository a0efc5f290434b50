//! The service's settings: [`Overrides`] as one source gives them (the
//! command line with its environment variables, or the file), and the
//! resolved [`Settings`] (precedence: flag > environment > file >
//! default).

use std::fmt;
use std::net::SocketAddr;
use std::num::NonZeroU64;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use ipnet::IpNet;
use ratewarden_core::memory::DEFAULT_MAX_KEYS;
use ratewarden_core::{Algorithm, Policy, Quota};
use ratewarden_limiter::{FailureMode, PolicyDef, PolicySet};
use ratewarden_redis::RedisConfig;

use crate::envoy::EnvoyConfig;
use crate::envoy::options::{EnvoyOptions, LimitHeaders};
use crate::error::{ConfigError, ConfigErrors};
use crate::file::{ConfigFile, PolicySpec};

/// The environment variable that holds the admin key. Never a flag nor a
/// file key, so it cannot leak through `ps`, shell history or a
/// checked-in file.
pub const ADMIN_KEY_ENV: &str = "RATEWARDEN_ADMIN_KEY";

/// The names of the seed routes' policies, which their own settings
/// (`ping_*`, `check_*`) define.
pub const SEED_POLICIES: [&str; 2] = ["ping", "check"];

/// Where limiter state is kept. The one place that names every store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreConfig {
    /// In this process's memory: the fastest, lost at exit, not shared.
    Memory,
    /// Embedded SQLite at this path.
    Sqlite(PathBuf),
    /// A Redis server, shared by every instance that uses it.
    Redis(RedisConfig),
}

impl fmt::Display for StoreConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreConfig::Memory => f.write_str("memory"),
            StoreConfig::Sqlite(path) => write!(f, "sqlite:{}", path.display()),
            // Redacted: the URL's password is never shown.
            StoreConfig::Redis(config) => write!(f, "{config}"),
        }
    }
}

/// What opening a store needs besides where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreOptions {
    /// How long audit-log rows are kept (stores with an audit log only).
    pub audit_retention: Duration,
    /// One audit-log row per this many allowed requests: 1 every one (the
    /// seed's behaviour, the default), 0 none.
    pub audit_sample: u64,
    /// The most audit-log rows kept; past it the oldest are pruned
    /// (stores with an audit log only).
    pub audit_max_rows: u64,
    /// The memory store's bound on keys.
    pub max_keys: NonZeroU64,
    /// The SQLite store's WAL limit, in pages (`wal_autocheckpoint`);
    /// `None`: the store's default (50,000, about 200 MB).
    pub wal_autocheckpoint: Option<u32>,
    /// The longest one call to a networked store (Redis) may take before it
    /// counts as unavailable.
    pub call_timeout: Duration,
}

impl Default for StoreOptions {
    /// `serve`'s defaults: seven days and at most 10,000,000 rows of audit
    /// log, 2,000,000 keys in memory, 100 ms calls.
    fn default() -> StoreOptions {
        StoreOptions {
            audit_retention: Duration::from_secs(7 * 24 * 60 * 60),
            audit_sample: 1,
            audit_max_rows: DEFAULT_AUDIT_MAX_ROWS,
            max_keys: DEFAULT_MAX_KEYS,
            wal_autocheckpoint: None,
            call_timeout: Duration::from_millis(100),
        }
    }
}

/// `ping_key` as written: `header`, `peer-ip` or `forwarded`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeySourceKind {
    /// The `X-Client-Key` header (seed A; a client can forge it).
    Header,
    /// The TCP peer address.
    PeerIp,
    /// `X-Forwarded-For` from trusted proxies.
    Forwarded,
}

impl KeySourceKind {
    /// Parses `header`, `peer-ip` or `forwarded`.
    ///
    /// # Errors
    /// A message naming the value.
    pub fn parse(s: &str) -> Result<KeySourceKind, String> {
        match s {
            "header" => Ok(KeySourceKind::Header),
            "peer-ip" => Ok(KeySourceKind::PeerIp),
            "forwarded" => Ok(KeySourceKind::Forwarded),
            _ => Err(format!(
                "'{s}' is not a key source; expected header, peer-ip or forwarded"
            )),
        }
    }
}

/// Where GET /ping takes its key from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeySource {
    /// The `X-Client-Key` header; `127.0.0.1` when missing or empty.
    Header,
    /// The TCP peer IP address.
    PeerIp,
    /// The rightmost `X-Forwarded-For` address that is not a trusted proxy
    /// ([`Settings::trusted_proxies`]), when the peer itself is a trusted
    /// proxy; otherwise the peer address.
    Forwarded,
}

/// Whose clock decides windows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeSource {
    /// This machine's clock.
    Local,
    /// Redis `TIME`: the local clock corrected by an offset to Redis,
    /// measured at start and every second.
    Redis,
}

impl TimeSource {
    /// Parses `local` or `redis`.
    ///
    /// # Errors
    /// A message naming the value.
    pub fn parse(s: &str) -> Result<TimeSource, String> {
        match s {
            "local" => Ok(TimeSource::Local),
            "redis" => Ok(TimeSource::Redis),
            _ => Err(format!(
                "'{s}' is not a time source; expected local or redis"
            )),
        }
    }
}

/// The admin key. Its `Debug` never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct AdminKey(String);

impl AdminKey {
    /// `None` for an unset or empty key: every admin action is then
    /// refused (fail closed, seed B).
    pub fn new(key: Option<String>) -> Option<AdminKey> {
        key.filter(|k| !k.is_empty()).map(AdminKey)
    }

    /// The key's bytes, for a constant-time comparison.
    pub fn as_bytes(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

impl fmt::Debug for AdminKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AdminKey(<redacted>)")
    }
}

/// Settings as one source gives them; `None`: not given there. Every
/// `serve` flag has a field, and a key of the same name in the file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Overrides {
    /// `listen`: the HTTP address.
    pub listen: Option<SocketAddr>,
    /// `grpc_listen`: the gRPC address (Envoy's rate limit service and
    /// health); none: no gRPC server.
    pub grpc_listen: Option<SocketAddr>,
    /// `envoy_config`: envoyproxy/ratelimit's YAML rules, a file or a
    /// directory (relative to the working directory).
    pub envoy_config: Option<PathBuf>,
    /// `db`: the SQLite file when `store` is not given.
    pub db: Option<PathBuf>,
    /// `store`.
    pub store: Option<StoreConfig>,
    /// `ping_limit`: GET /ping's requests per window.
    pub ping_limit: Option<u64>,
    /// `ping_window`: GET /ping's window, in whole seconds.
    pub ping_window_secs: Option<u64>,
    /// `ping_algorithm`.
    pub ping_algorithm: Option<Algorithm>,
    /// `check_limit`: POST /rate/check's events per window.
    pub check_limit: Option<u64>,
    /// `check_window`: POST /rate/check's window, in whole seconds.
    pub check_window_secs: Option<u64>,
    /// `ping_key`.
    pub ping_key: Option<KeySourceKind>,
    /// `trusted_proxies`.
    pub trusted_proxies: Option<Vec<IpNet>>,
    /// `on_store_error`: the default of every policy.
    pub on_store_error: Option<FailureMode>,
    /// `time_source`.
    pub time_source: Option<TimeSource>,
    /// `store_timeout_ms`: the longest Redis call, in milliseconds.
    pub store_timeout_ms: Option<u64>,
    /// `audit_retention`: how long audit rows are kept, in whole seconds.
    pub audit_retention_secs: Option<u64>,
    /// `audit_sample`: one audit row per this many allowed requests (0: none).
    pub audit_sample: Option<u64>,
    /// `audit_max_rows`: the most audit rows kept.
    pub audit_max_rows: Option<u64>,
    /// `max_keys`: the memory store's bound on keys.
    pub max_keys: Option<NonZeroU64>,
    /// `wal_autocheckpoint`: the SQLite WAL limit, in pages.
    pub wal_autocheckpoint: Option<u32>,
    /// `max_body_bytes`.
    pub max_body_bytes: Option<usize>,
    /// `header_read_timeout`, in seconds.
    pub header_read_timeout_secs: Option<u64>,
    /// `idle_timeout`, in seconds.
    pub idle_timeout_secs: Option<u64>,
    /// `max_connections`.
    pub max_connections: Option<usize>,
    /// `envoy_max_descriptors`: the most descriptors one Envoy call may carry.
    pub envoy_max_descriptors: Option<usize>,
    /// `envoy_limit_headers`: the reference's `RateLimit-Limit` /
    /// `-Remaining` / `-Reset` headers in Envoy answers; `Some(None)`: off.
    pub envoy_limit_headers: Option<Option<LimitHeaders>>,
    /// `envoy_require_rules`: health is down while no Envoy rules domain
    /// is loaded.
    pub envoy_require_rules: Option<bool>,
}

impl Overrides {
    /// Each field from `self` when given, else from `lower`.
    pub fn or(self, lower: Overrides) -> Overrides {
        Overrides {
            listen: self.listen.or(lower.listen),
            grpc_listen: self.grpc_listen.or(lower.grpc_listen),
            envoy_config: self.envoy_config.or(lower.envoy_config),
            db: self.db.or(lower.db),
            store: self.store.or(lower.store),
            ping_limit: self.ping_limit.or(lower.ping_limit),
            ping_window_secs: self.ping_window_secs.or(lower.ping_window_secs),
            ping_algorithm: self.ping_algorithm.or(lower.ping_algorithm),
            check_limit: self.check_limit.or(lower.check_limit),
            check_window_secs: self.check_window_secs.or(lower.check_window_secs),
            ping_key: self.ping_key.or(lower.ping_key),
            trusted_proxies: self.trusted_proxies.or(lower.trusted_proxies),
            on_store_error: self.on_store_error.or(lower.on_store_error),
            time_source: self.time_source.or(lower.time_source),
            store_timeout_ms: self.store_timeout_ms.or(lower.store_timeout_ms),
            audit_retention_secs: self.audit_retention_secs.or(lower.audit_retention_secs),
            audit_sample: self.audit_sample.or(lower.audit_sample),
            audit_max_rows: self.audit_max_rows.or(lower.audit_max_rows),
            max_keys: self.max_keys.or(lower.max_keys),
            wal_autocheckpoint: self.wal_autocheckpoint.or(lower.wal_autocheckpoint),
            max_body_bytes: self.max_body_bytes.or(lower.max_body_bytes),
            header_read_timeout_secs: self
                .header_read_timeout_secs
                .or(lower.header_read_timeout_secs),
            idle_timeout_secs: self.idle_timeout_secs.or(lower.idle_timeout_secs),
            max_connections: self.max_connections.or(lower.max_connections),
            envoy_max_descriptors: self.envoy_max_descriptors.or(lower.envoy_max_descriptors),
            envoy_limit_headers: self.envoy_limit_headers.or(lower.envoy_limit_headers),
            envoy_require_rules: self.envoy_require_rules.or(lower.envoy_require_rules),
        }
    }
}

/// How client connections are bounded: the defaults are 10 s, 60 s and
/// what the file-descriptor limit allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// A request whose headers are not complete this long after the
    /// connection opened (or after its first byte, on a kept-alive
    /// connection) is answered 408 and closed (`header_read_timeout`,
    /// seconds).
    pub header_read_timeout: Duration,
    /// A kept-alive connection with no request this long after its last
    /// answer is closed (`idle_timeout`, seconds).
    pub idle_timeout: Duration,
    /// At most this many open client connections (`max_connections`);
    /// `None`: the file-descriptor limit less a reserve.
    pub max_connections: Option<usize>,
}

/// Validated settings of the service.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Address to listen on (port 0 picks a free one).
    pub listen: SocketAddr,
    /// The gRPC address, when gRPC is served.
    pub grpc_listen: Option<SocketAddr>,
    /// Where the Envoy rules were read from, when given.
    pub envoy_config: Option<PathBuf>,
    /// The Envoy rules (their limits are also in [`Settings::policies`]).
    pub envoy: Option<Arc<EnvoyConfig>>,
    /// The Envoy service's settings beside its rules.
    pub envoy_options: EnvoyOptions,
    /// Where state lives.
    pub store: StoreConfig,
    /// Where GET /ping takes its key from.
    pub ping_key: KeySource,
    /// The proxies whose `X-Forwarded-For` is believed (`--trusted-proxy`):
    /// for `ping_key forwarded`, forward auth and the `client_ip` key part.
    pub trusted_proxies: Vec<IpNet>,
    /// Whose clock decides windows.
    pub time_source: TimeSource,
    /// The longest one networked store call may take.
    pub store_timeout: Duration,
    /// The admin key; `None` refuses every admin action.
    pub admin_key: Option<AdminKey>,
    /// Audit-log retention.
    pub audit_retention: Duration,
    /// Audit-log sampling: one row per this many allowed requests (1 every
    /// one, 0 none).
    pub audit_sample: u64,
    /// The most audit-log rows kept (the oldest pruned first).
    pub audit_max_rows: u64,
    /// The memory store's bound on keys.
    pub max_keys: NonZeroU64,
    /// The SQLite store's WAL limit, in pages; `None`: the store's default.
    pub wal_autocheckpoint: Option<u32>,
    /// Largest accepted request body, in bytes.
    pub max_body_bytes: usize,
    /// The failure mode of policies that set none.
    pub on_store_error: FailureMode,
    /// How client connections are bounded.
    pub connections: ConnectionLimits,
    /// Every policy: `ping` and `check` (the seed routes'), then the
    /// file's, in file order, then the Envoy rules' limits.
    pub policies: PolicySet,
    /// The configuration file, when one was given.
    pub config_file: Option<PathBuf>,
    /// What envoyproxy/ratelimit's environment variables gave (ranked
    /// below the file), kept so that a reload ranks them alike.
    pub environment: Overrides,
}

/// The defaults of every setting.
const DEFAULT_LISTEN: &str = "127.0.0.1:8080";
/// `audit_max_rows`: about 1 GB of audit log (about 100 bytes a row with
/// its index), which a flood of allowed requests reaches in minutes
/// rather than filling the disk.
pub const DEFAULT_AUDIT_MAX_ROWS: u64 = 10_000_000;

const DEFAULT_DB: &str = "./ratewarden.db";

impl Settings {
    /// Resolves `given` (flags and environment) over `file` over the
    /// defaults; `admin_key` comes from [`ADMIN_KEY_ENV`].
    ///
    /// # Errors
    /// Every combination error found (a quota the engine refuses,
    /// `forwarded` without trusted proxies, Redis time without Redis).
    pub fn resolve(
        given: Overrides,
        file: Option<&ConfigFile>,
        admin_key: Option<String>,
    ) -> Result<Settings, ConfigErrors> {
        Settings::resolve_with_environment(given, file, Overrides::default(), admin_key)
    }

    /// [`Settings::resolve`] with `environment` (what envoyproxy/ratelimit's
    /// variables give, [`crate::envoy::environment`]) ranked below the
    /// file and above the defaults: ratewarden's own settings always
    /// win. An own `db` keeps the environment's store out too (it means
    /// SQLite).
    ///
    /// # Errors
    /// As [`Settings::resolve`].
    pub fn resolve_with_environment(
        given: Overrides,
        file: Option<&ConfigFile>,
        environment: Overrides,
        admin_key: Option<String>,
    ) -> Result<Settings, ConfigErrors> {
        Settings::resolve_layers(given, file, environment, AdminKey::new(admin_key), None)
    }

    /// The settings a reload makes: `given` (the start's flags and
    /// environment) over `file` over this one's environment layer, with
    /// this one's admin key; an Envoy rules file that is broken now keeps
    /// the rules it has here ([`EnvoyConfig::load_after`]).
    ///
    /// # Errors
    /// As [`Settings::resolve`].
    pub fn resolve_again(
        &self,
        given: Overrides,
        file: Option<&ConfigFile>,
    ) -> Result<Settings, ConfigErrors> {
        Settings::resolve_layers(
            given,
            file,
            self.environment.clone(),
            self.admin_key.clone(),
            self.envoy.as_deref(),
        )
    }

    fn resolve_layers(
        given: Overrides,
        file: Option<&ConfigFile>,
        environment: Overrides,
        admin_key: Option<AdminKey>,
        last_rules: Option<&EnvoyConfig>,
    ) -> Result<Settings, ConfigErrors> {
        let (file_overrides, specs, config_file) = match file {
            Some(f) => (
                f.overrides.clone(),
                f.policies.as_slice(),
                Some(f.path.clone()),
            ),
            None => (Overrides::default(), &[][..], None),
        };
        let own = given.or(file_overrides);
        let environment = if own.db.is_some() {
            Overrides {
                store: None,
                ..environment
            }
        } else {
            environment
        };
        let o = own.or(environment.clone());
        let mut errors = Vec::new();
        let listen = o.listen.unwrap_or_else(|| {
            DEFAULT_LISTEN
                .parse()
                .unwrap_or_else(|_| unreachable!("the default address parses"))
        });
        let store = o
            .store
            .unwrap_or_else(|| StoreConfig::Sqlite(o.db.unwrap_or_else(|| DEFAULT_DB.into())));
        let time_source = o.time_source.unwrap_or(TimeSource::Local);
        if time_source == TimeSource::Redis && !matches!(store, StoreConfig::Redis(_)) {
            errors.push(ConfigError::general(
                "time_source redis (--time-source redis) needs a redis://… store",
            ));
        }
        let trusted = o.trusted_proxies.unwrap_or_default();
        let ping_key = match o.ping_key.unwrap_or(KeySourceKind::Header) {
            KeySourceKind::Header => KeySource::Header,
            KeySourceKind::PeerIp => KeySource::PeerIp,
            KeySourceKind::Forwarded if trusted.is_empty() => {
                errors.push(ConfigError::general(
                    "ping_key forwarded (--ping-key forwarded) needs at least one trusted proxy \
                     (--trusted-proxy, RATEWARDEN_TRUSTED_PROXIES, trusted_proxies); without one \
                     X-Forwarded-For is never believed",
                ));
                KeySource::Header
            }
            KeySourceKind::Forwarded => KeySource::Forwarded,
        };
        let on_store_error = o.on_store_error.unwrap_or(FailureMode::Open);
        let mut seed = |name: &'static str, algorithm, limit, window_secs, what: &str| {
            match Quota::new(limit, Duration::from_secs(window_secs)) {
                // Seed A counts refused attempts; the flag is ignored by
                // the other algorithms.
                Ok(quota) => Some(PolicyDef::new(
                    Policy::new(name, algorithm, quota.counting_denied()),
                    on_store_error,
                )),
                Err(e) => {
                    errors.push(ConfigError::general(format!("{what}: {e}")));
                    None
                }
            }
        };
        let ping = seed(
            "ping",
            o.ping_algorithm.unwrap_or(Algorithm::FixedWindow),
            o.ping_limit.unwrap_or(3),
            o.ping_window_secs.unwrap_or(60),
            "ping_limit/ping_window",
        );
        let check = seed(
            "check",
            Algorithm::SlidingLog,
            o.check_limit.unwrap_or(10),
            o.check_window_secs.unwrap_or(60),
            "check_limit/check_window",
        );
        // The Envoy limits' names stay clear of the other policies'.
        let taken = ["ping", "check"]
            .into_iter()
            .chain(specs.iter().map(|spec| spec.policy.name.as_ref()));
        let envoy = match &o.envoy_config {
            Some(path) => match EnvoyConfig::load_after(path, on_store_error, taken, last_rules) {
                Ok(config) => Some(Arc::new(config)),
                Err(e) => {
                    errors.extend(e.0);
                    None
                }
            },
            None => None,
        };
        let envoy_defs = envoy
            .iter()
            .flat_map(|e| e.policies())
            .map(|def| def.as_ref().clone());
        let defs = ping
            .into_iter()
            .chain(check)
            .chain(specs.iter().map(|spec| spec.to_def(on_store_error)))
            .chain(envoy_defs);
        let policies = match PolicySet::new(defs) {
            Ok(set) => Some(set),
            Err(e) => {
                errors.push(ConfigError::general(e.to_string()));
                None
            }
        };
        match policies {
            Some(policies) if errors.is_empty() => Ok(Settings {
                listen,
                grpc_listen: o.grpc_listen,
                envoy_config: o.envoy_config,
                envoy,
                envoy_options: EnvoyOptions {
                    max_descriptors: o
                        .envoy_max_descriptors
                        .unwrap_or(EnvoyOptions::default().max_descriptors),
                    limit_headers: o.envoy_limit_headers.flatten(),
                    require_rules: o.envoy_require_rules.unwrap_or(false),
                },
                store,
                ping_key,
                trusted_proxies: trusted,
                time_source,
                store_timeout: Duration::from_millis(o.store_timeout_ms.unwrap_or(100)),
                admin_key,
                audit_retention: Duration::from_secs(o.audit_retention_secs.unwrap_or(604_800)),
                audit_sample: o.audit_sample.unwrap_or(1),
                audit_max_rows: o.audit_max_rows.unwrap_or(DEFAULT_AUDIT_MAX_ROWS),
                max_keys: o.max_keys.unwrap_or(DEFAULT_MAX_KEYS),
                wal_autocheckpoint: o.wal_autocheckpoint,
                max_body_bytes: o.max_body_bytes.unwrap_or(16_384),
                on_store_error,
                connections: ConnectionLimits {
                    header_read_timeout: Duration::from_secs(
                        o.header_read_timeout_secs.unwrap_or(10),
                    ),
                    idle_timeout: Duration::from_secs(o.idle_timeout_secs.unwrap_or(60)),
                    max_connections: o.max_connections,
                },
                policies,
                config_file,
                environment,
            }),
            _ => Err(ConfigErrors(errors)),
        }
    }

    /// What opening the store needs from these settings.
    pub fn store_options(&self) -> StoreOptions {
        StoreOptions {
            audit_retention: self.audit_retention,
            audit_sample: self.audit_sample,
            audit_max_rows: self.audit_max_rows,
            max_keys: self.max_keys,
            wal_autocheckpoint: self.wal_autocheckpoint,
            call_timeout: self.store_timeout,
        }
    }

    /// The settings that differ in `next` and take effect only after a
    /// restart (everything but the policies, `on_store_error` and the
    /// Envoy service's options), by key.
    pub fn needing_restart(&self, next: &Settings) -> Vec<&'static str> {
        let mut keys = Vec::new();
        let mut differs = |key, changed: bool| {
            if changed {
                keys.push(key);
            }
        };
        differs("listen", self.listen != next.listen);
        differs("grpc_listen", self.grpc_listen != next.grpc_listen);
        differs("envoy_config", self.envoy_config != next.envoy_config);
        differs("store", self.store != next.store);
        differs("ping_key", self.ping_key != next.ping_key);
        differs(
            "trusted_proxies",
            self.trusted_proxies != next.trusted_proxies,
        );
        differs("time_source", self.time_source != next.time_source);
        differs("store_timeout_ms", self.store_timeout != next.store_timeout);
        differs(
            "audit_retention",
            self.audit_retention != next.audit_retention,
        );
        differs("audit_sample", self.audit_sample != next.audit_sample);
        differs("audit_max_rows", self.audit_max_rows != next.audit_max_rows);
        differs("max_keys", self.max_keys != next.max_keys);
        differs(
            "wal_autocheckpoint",
            self.wal_autocheckpoint != next.wal_autocheckpoint,
        );
        differs("max_body_bytes", self.max_body_bytes != next.max_body_bytes);
        let (c, n) = (&self.connections, &next.connections);
        differs(
            "header_read_timeout",
            c.header_read_timeout != n.header_read_timeout,
        );
        differs("idle_timeout", c.idle_timeout != n.idle_timeout);
        differs("max_connections", c.max_connections != n.max_connections);
        keys
    }
}

impl PolicySpec {
    /// The policy with `default` as its failure mode unless it sets one.
    fn to_def(&self, default: FailureMode) -> PolicyDef {
        PolicyDef {
            policy: self.policy.clone(),
            on_store_error: self.on_store_error.unwrap_or(default),
            key: self.key.clone(),
            matcher: self.matcher.clone(),
        }
    }
}
