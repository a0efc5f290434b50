//! The resolved [`Settings`]: every source's [`Overrides`] merged
//! (precedence: flag > environment > file > envoyproxy/ratelimit's
//! environment > [`crate::defaults`]), the seed routes' policies and the
//! policy set built, and every error found.

use std::net::SocketAddr;
use std::num::NonZeroU64;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use ipnet::IpNet;
use ratewarden_limiter::{FailureMode, PolicyDef, PolicySet};

use crate::defaults;
use crate::envoy::EnvoyConfig;
use crate::error::{ConfigError, ConfigErrors};
use crate::file::{ConfigFile, PolicySpec};
use crate::overrides::Overrides;
use crate::policy::{PolicyParts, Site, Sited};
use crate::types::{
    AdminKey, EnvoyOptions, KeySource, KeySourceKind, SEED_POLICIES, StoreConfig, StoreOptions,
    TimeSource,
};

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

impl Settings {
    /// Resolves `given` (flags and environment) over `file` over the
    /// defaults; `admin_key` comes from [`ADMIN_KEY_ENV`](crate::ADMIN_KEY_ENV).
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
        let listen = o.listen.unwrap_or(defaults::LISTEN);
        let store = o
            .store
            .unwrap_or_else(|| StoreConfig::Sqlite(o.db.unwrap_or_else(|| defaults::DB.into())));
        let time_source = o.time_source.unwrap_or(defaults::TIME_SOURCE);
        if time_source == TimeSource::Redis && !matches!(store, StoreConfig::Redis(_)) {
            errors.push(ConfigError::general(
                "time_source redis (--time-source redis) needs a redis://… store",
            ));
        }
        let trusted = o.trusted_proxies.unwrap_or_default();
        let ping_key = match o.ping_key.unwrap_or(defaults::PING_KEY) {
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
        let on_store_error = o.on_store_error.unwrap_or(defaults::ON_STORE_ERROR);
        let mut seed = |name: &'static str, algorithm, limit: u64, window_secs, keys: [&str; 2]| {
            // Not written anywhere: the keys stand for where.
            let site = |key: String| Site {
                location: None,
                key,
            };
            let parts = PolicyParts {
                site: site(keys.join("/")),
                algorithm: Some(algorithm),
                limit: Some(Sited {
                    value: limit,
                    site: site(keys[0].to_owned()),
                }),
                window: Some(Duration::from_secs(window_secs)),
                burst: None,
                count_denied: None,
                shadow: false,
            };
            let since = errors.len();
            let mut built = parts.build(&mut errors, since)?;
            // Seed A counts refused attempts; the flag is ignored by the
            // other algorithms.
            built.quota = built.quota.counting_denied();
            Some(PolicyDef::new(built.named(name), on_store_error))
        };
        let ping = seed(
            SEED_POLICIES[0],
            o.ping_algorithm.unwrap_or(defaults::PING_ALGORITHM),
            o.ping_limit.unwrap_or(defaults::PING_LIMIT),
            o.ping_window_secs.unwrap_or(defaults::PING_WINDOW_SECS),
            ["ping_limit", "ping_window"],
        );
        let check = seed(
            SEED_POLICIES[1],
            defaults::CHECK_ALGORITHM,
            o.check_limit.unwrap_or(defaults::CHECK_LIMIT),
            o.check_window_secs.unwrap_or(defaults::CHECK_WINDOW_SECS),
            ["check_limit", "check_window"],
        );
        // The Envoy limits' names stay clear of the other policies'.
        let taken = SEED_POLICIES
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
                        .unwrap_or(defaults::ENVOY_MAX_DESCRIPTORS),
                    limit_headers: o
                        .envoy_limit_headers
                        .unwrap_or(defaults::ENVOY_LIMIT_HEADERS),
                    require_rules: o
                        .envoy_require_rules
                        .unwrap_or(defaults::ENVOY_REQUIRE_RULES),
                },
                store,
                ping_key,
                trusted_proxies: trusted,
                time_source,
                store_timeout: Duration::from_millis(
                    o.store_timeout_ms.unwrap_or(defaults::STORE_TIMEOUT_MS),
                ),
                admin_key,
                audit_retention: Duration::from_secs(
                    o.audit_retention_secs
                        .unwrap_or(defaults::AUDIT_RETENTION_SECS),
                ),
                audit_sample: o.audit_sample.unwrap_or(defaults::AUDIT_SAMPLE),
                audit_max_rows: o.audit_max_rows.unwrap_or(defaults::AUDIT_MAX_ROWS),
                max_keys: o.max_keys.unwrap_or(defaults::MAX_KEYS),
                wal_autocheckpoint: o.wal_autocheckpoint,
                max_body_bytes: o.max_body_bytes.unwrap_or(defaults::MAX_BODY_BYTES),
                on_store_error,
                connections: ConnectionLimits {
                    header_read_timeout: Duration::from_secs(
                        o.header_read_timeout_secs
                            .unwrap_or(defaults::HEADER_READ_TIMEOUT_SECS),
                    ),
                    idle_timeout: Duration::from_secs(
                        o.idle_timeout_secs.unwrap_or(defaults::IDLE_TIMEOUT_SECS),
                    ),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn with_nothing_given_every_setting_is_its_default() {
        let s = Settings::resolve(Overrides::default(), None, None).unwrap();
        assert_eq!(s.listen, defaults::LISTEN);
        assert_eq!(s.grpc_listen, None);
        assert_eq!(s.store, StoreConfig::Sqlite(defaults::DB.into()));
        assert_eq!(s.ping_key, KeySource::Header);
        assert_eq!(defaults::PING_KEY, KeySourceKind::Header);
        assert!(s.trusted_proxies.is_empty());
        assert_eq!(s.time_source, defaults::TIME_SOURCE);
        assert_eq!(s.on_store_error, defaults::ON_STORE_ERROR);
        assert_eq!(s.store_options(), StoreOptions::default());
        assert_eq!(s.envoy_options, EnvoyOptions::default());
        assert_eq!(s.max_body_bytes, defaults::MAX_BODY_BYTES);
        assert_eq!(
            (
                s.connections.header_read_timeout,
                s.connections.idle_timeout
            ),
            (
                Duration::from_secs(defaults::HEADER_READ_TIMEOUT_SECS),
                Duration::from_secs(defaults::IDLE_TIMEOUT_SECS)
            )
        );
        assert_eq!(s.connections.max_connections, None);
        for (name, algorithm, limit, window_secs) in [
            (
                "ping",
                defaults::PING_ALGORITHM,
                defaults::PING_LIMIT,
                defaults::PING_WINDOW_SECS,
            ),
            (
                "check",
                defaults::CHECK_ALGORITHM,
                defaults::CHECK_LIMIT,
                defaults::CHECK_WINDOW_SECS,
            ),
        ] {
            let policy = &s.policies.get(name).unwrap().policy;
            assert_eq!(policy.algorithm, algorithm, "{name}");
            assert_eq!(policy.quota.limit(), limit, "{name}");
            assert_eq!(policy.quota.window(), Duration::from_secs(window_secs));
        }
    }
}
