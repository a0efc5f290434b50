//! The types of the settings, shared by every layer of the crate: where
//! state lives ([`StoreConfig`], [`StoreOptions`]), where GET /ping's key
//! comes from ([`KeySourceKind`], [`KeySource`]), whose clock decides
//! ([`TimeSource`]), the admin key ([`AdminKey`]) and the Envoy service's
//! options ([`EnvoyOptions`], [`LimitHeaders`]). Their defaults are in
//! [`crate::defaults`], their parsers in [`crate::values`].

use std::fmt;
use std::num::NonZeroU64;
use std::path::PathBuf;
use std::time::Duration;

use ratewarden_redis::RedisConfig;

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
    /// `None`: the store's default ([`crate::defaults::WAL_AUTOCHECKPOINT_PAGES`]).
    pub wal_autocheckpoint: Option<u32>,
    /// The longest one call to a networked store (Redis) may take before it
    /// counts as unavailable.
    pub call_timeout: Duration,
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
    /// Every key source, in the order the messages list them.
    const ALL: [KeySourceKind; 3] = [
        KeySourceKind::Header,
        KeySourceKind::PeerIp,
        KeySourceKind::Forwarded,
    ];

    /// Parses `header`, `peer-ip` or `forwarded`.
    ///
    /// # Errors
    /// A message naming the value.
    pub fn parse(s: &str) -> Result<KeySourceKind, String> {
        KeySourceKind::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| {
                format!("'{s}' is not a key source; expected header, peer-ip or forwarded")
            })
    }

    /// `header`, `peer-ip` or `forwarded`, as written.
    pub fn as_str(self) -> &'static str {
        match self {
            KeySourceKind::Header => "header",
            KeySourceKind::PeerIp => "peer-ip",
            KeySourceKind::Forwarded => "forwarded",
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
    /// ([`crate::Settings::trusted_proxies`]), when the peer itself is a trusted
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
        [TimeSource::Local, TimeSource::Redis]
            .into_iter()
            .find(|t| t.as_str() == s)
            .ok_or_else(|| format!("'{s}' is not a time source; expected local or redis"))
    }

    /// `local` or `redis`, as written.
    pub fn as_str(self) -> &'static str {
        match self {
            TimeSource::Local => "local",
            TimeSource::Redis => "redis",
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

/// The Envoy service's settings beside its rules (`envoy_max_descriptors`,
/// `envoy_limit_headers`, `envoy_require_rules`), applied on reload with
/// the rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvoyOptions {
    /// A call with more descriptors is refused (gRPC `INVALID_ARGUMENT`,
    /// `POST /json` 400).
    pub max_descriptors: usize,
    /// The reference's optional headers, of the most restrictive
    /// descriptor; `None`: not sent (the default; the IETF `RateLimit`
    /// and `RateLimit-Policy` fields are sent either way).
    pub limit_headers: Option<LimitHeaders>,
    /// `GET /healthcheck` and gRPC health report the service down while
    /// no rules domain is loaded (the reference's
    /// `HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED`).
    pub require_rules: bool,
}

/// The names of the three headers envoyproxy/ratelimit adds to a
/// response when `LIMIT_RESPONSE_HEADERS_ENABLED` is true: the limit, the
/// remaining quota and the seconds until the window resets, of the
/// request's most restrictive descriptor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitHeaders {
    /// `RateLimit-Limit` by default (`LIMIT_LIMIT_HEADER`).
    pub limit: String,
    /// `RateLimit-Remaining` by default (`LIMIT_REMAINING_HEADER`).
    pub remaining: String,
    /// `RateLimit-Reset` by default (`LIMIT_RESET_HEADER`).
    pub reset: String,
}

impl Default for LimitHeaders {
    /// The reference server's names.
    fn default() -> LimitHeaders {
        LimitHeaders {
            limit: "RateLimit-Limit".into(),
            remaining: "RateLimit-Remaining".into(),
            reset: "RateLimit-Reset".into(),
        }
    }
}

impl fmt::Display for LimitHeaders {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{},{},{}", self.limit, self.remaining, self.reset)
    }
}

impl LimitHeaders {
    /// The three names, each checked as an HTTP field name.
    ///
    /// # Errors
    /// A message naming the first name that is not a field name, or a
    /// name given twice.
    pub fn new(limit: &str, remaining: &str, reset: &str) -> Result<LimitHeaders, String> {
        for name in [limit, remaining, reset] {
            check_field_name(name)?;
        }
        let lower = |s: &str| s.to_ascii_lowercase();
        if lower(limit) == lower(remaining)
            || lower(limit) == lower(reset)
            || lower(remaining) == lower(reset)
        {
            return Err(format!(
                "'{limit},{remaining},{reset}' names one header twice; give three names"
            ));
        }
        Ok(LimitHeaders {
            limit: limit.to_owned(),
            remaining: remaining.to_owned(),
            reset: reset.to_owned(),
        })
    }
}

/// An HTTP field name (RFC 9110 §5.1: a token).
fn check_field_name(name: &str) -> Result<(), String> {
    let token = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
    if name.is_empty() || !name.bytes().all(token) {
        return Err(format!(
            "'{name}' is not an HTTP header name (letters, digits and !#$%&'*+-.^_`|~)"
        ));
    }
    Ok(())
}
