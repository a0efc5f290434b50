//! Every default of the service's settings, in one place: what
//! [`Settings::resolve`](crate::Settings::resolve) takes when no source
//! gives a setting, what `ratewarden serve --help` shows (through
//! [`documented`]) and what docs/configuration.md and README.md state
//! (a test compares their tables with [`documented`]).

use std::fmt;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::num::NonZeroU64;
use std::time::Duration;

use ratewarden_core::Algorithm;
use ratewarden_limiter::FailureMode;

use crate::types::{EnvoyOptions, KeySourceKind, LimitHeaders, StoreOptions, TimeSource};

/// `listen`: this machine only, port 8080.
pub const LISTEN: SocketAddr = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 8080));
/// `db`: the SQLite file, when no `store` is given.
pub const DB: &str = "./ratewarden.db";
/// `ping_limit`: GET /ping's requests per window (seed A).
pub const PING_LIMIT: u64 = 3;
/// `ping_window`, in whole seconds.
pub const PING_WINDOW_SECS: u64 = 60;
/// `ping_algorithm` (seed A).
pub const PING_ALGORITHM: Algorithm = Algorithm::FixedWindow;
/// `check_limit`: POST /rate/check's events per window (seed B).
pub const CHECK_LIMIT: u64 = 10;
/// `check_window`, in whole seconds.
pub const CHECK_WINDOW_SECS: u64 = 60;
/// POST /rate/check's algorithm (seed B); not a setting.
pub const CHECK_ALGORITHM: Algorithm = Algorithm::SlidingLog;
/// `ping_key`: the `X-Client-Key` header, as seed A.
pub const PING_KEY: KeySourceKind = KeySourceKind::Header;
/// `on_store_error`: the failure mode of policies that set none.
pub const ON_STORE_ERROR: FailureMode = FailureMode::Open;
/// `time_source`.
pub const TIME_SOURCE: TimeSource = TimeSource::Local;
/// `store_timeout_ms`: the longest one networked store call may take.
pub const STORE_TIMEOUT_MS: u64 = 100;
/// `audit_retention`: seven days, in seconds.
pub const AUDIT_RETENTION_SECS: u64 = 7 * 24 * 60 * 60;
/// `audit_sample`: an audit row for every allowed request (the seed's
/// behaviour).
pub const AUDIT_SAMPLE: u64 = 1;
/// `audit_max_rows`: about 1 GB of audit log (about 100 bytes a row with
/// its index), which a flood of allowed requests reaches in minutes
/// rather than filling the disk.
pub const AUDIT_MAX_ROWS: u64 = 10_000_000;
/// `max_keys`: the memory store's own bound (about 300 MB).
pub const MAX_KEYS: NonZeroU64 = ratewarden_core::memory::DEFAULT_MAX_KEYS;
/// `wal_autocheckpoint`: the SQLite store's own default (about 200 MB of
/// 4 KiB pages). [`Settings::wal_autocheckpoint`](crate::Settings) stays
/// `None` when no source gives it, so the store applies its own; this is
/// the number the help and the docs state, checked against the store's.
pub const WAL_AUTOCHECKPOINT_PAGES: u32 = 50_000;
/// `max_body_bytes`.
pub const MAX_BODY_BYTES: usize = 16_384;
/// `header_read_timeout`, in seconds.
pub const HEADER_READ_TIMEOUT_SECS: u64 = 10;
/// `idle_timeout`, in seconds.
pub const IDLE_TIMEOUT_SECS: u64 = 60;
/// `envoy_max_descriptors`. Envoy sends one descriptor per `rate_limits`
/// action list that applies to a request, a handful in the configurations
/// we know; every descriptor is a lookup and a counter, so a call of
/// 20,000 took 0.79 s of a core.
pub const ENVOY_MAX_DESCRIPTORS: usize = 256;
/// `envoy_limit_headers`: off (the IETF `RateLimit` and `RateLimit-Policy`
/// fields are sent either way).
pub const ENVOY_LIMIT_HEADERS: Option<LimitHeaders> = None;
/// `envoy_require_rules`: healthy without rules.
pub const ENVOY_REQUIRE_RULES: bool = false;

impl Default for StoreOptions {
    /// `serve`'s defaults.
    fn default() -> StoreOptions {
        StoreOptions {
            audit_retention: Duration::from_secs(AUDIT_RETENTION_SECS),
            audit_sample: AUDIT_SAMPLE,
            audit_max_rows: AUDIT_MAX_ROWS,
            max_keys: MAX_KEYS,
            wal_autocheckpoint: None,
            call_timeout: Duration::from_millis(STORE_TIMEOUT_MS),
        }
    }
}

impl Default for EnvoyOptions {
    /// `serve`'s defaults.
    fn default() -> EnvoyOptions {
        EnvoyOptions {
            max_descriptors: ENVOY_MAX_DESCRIPTORS,
            limit_headers: ENVOY_LIMIT_HEADERS,
            require_rules: ENVOY_REQUIRE_RULES,
        }
    }
}

/// A setting's default as the help and the docs state it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stated {
    /// A value, written as in the file without a string's quotes
    /// (`127.0.0.1:8080`, `3`, `fixed_window`), and what it amounts to
    /// where that helps (`7 days`).
    Value {
        /// The value.
        text: String,
        /// What it amounts to.
        gloss: Option<&'static str>,
    },
    /// No value: what happens instead.
    Unset(&'static str),
}

/// `604800, 7 days`; `none, no gRPC server`.
impl fmt::Display for Stated {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Stated::Value { text, gloss: None } => f.write_str(text),
            Stated::Value {
                text,
                gloss: Some(gloss),
            } => write!(f, "{text}, {gloss}"),
            Stated::Unset(what) => f.write_str(what),
        }
    }
}

/// A setting of `serve` with its default as stated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Documented {
    /// The file's key (also the name of its field of `serve`'s flags).
    pub key: &'static str,
    /// The flag.
    pub flag: &'static str,
    /// Its default.
    pub default: Stated,
}

/// Every setting of `serve`, in the documentation's order, with its
/// default as `serve --help` and the docs state it.
pub fn documented() -> Vec<Documented> {
    fn value(text: impl fmt::Display) -> Stated {
        Stated::Value {
            text: text.to_string(),
            gloss: None,
        }
    }
    fn glossed(text: impl fmt::Display, gloss: &'static str) -> Stated {
        Stated::Value {
            text: text.to_string(),
            gloss: Some(gloss),
        }
    }
    let limit_headers = ENVOY_LIMIT_HEADERS.map_or_else(|| "off".to_owned(), |h| h.to_string());
    let rows = [
        ("listen", "--listen", value(LISTEN)),
        (
            "grpc_listen",
            "--grpc-listen",
            Stated::Unset("none, no gRPC server"),
        ),
        ("envoy_config", "--envoy-config", Stated::Unset("none")),
        ("db", "--db", value(DB)),
        ("store", "--store", Stated::Unset("SQLite at --db")),
        ("ping_limit", "--ping-limit", value(PING_LIMIT)),
        ("ping_window", "--ping-window", value(PING_WINDOW_SECS)),
        ("ping_algorithm", "--ping-algorithm", value(PING_ALGORITHM)),
        ("check_limit", "--check-limit", value(CHECK_LIMIT)),
        ("check_window", "--check-window", value(CHECK_WINDOW_SECS)),
        ("ping_key", "--ping-key", value(PING_KEY.as_str())),
        ("trusted_proxies", "--trusted-proxy", Stated::Unset("none")),
        (
            "on_store_error",
            "--on-store-error",
            value(ON_STORE_ERROR.as_str()),
        ),
        ("time_source", "--time-source", value(TIME_SOURCE.as_str())),
        (
            "store_timeout_ms",
            "--store-timeout-ms",
            value(STORE_TIMEOUT_MS),
        ),
        (
            "audit_retention",
            "--audit-retention",
            glossed(AUDIT_RETENTION_SECS, "7 days"),
        ),
        ("audit_sample", "--audit-sample", value(AUDIT_SAMPLE)),
        (
            "audit_max_rows",
            "--audit-max-rows",
            glossed(AUDIT_MAX_ROWS, "about 1 GB"),
        ),
        ("max_keys", "--max-keys", glossed(MAX_KEYS, "about 300 MB")),
        (
            "wal_autocheckpoint",
            "--wal-autocheckpoint",
            glossed(WAL_AUTOCHECKPOINT_PAGES, "about 200 MB"),
        ),
        ("max_body_bytes", "--max-body-bytes", value(MAX_BODY_BYTES)),
        (
            "header_read_timeout",
            "--header-read-timeout",
            value(HEADER_READ_TIMEOUT_SECS),
        ),
        ("idle_timeout", "--idle-timeout", value(IDLE_TIMEOUT_SECS)),
        (
            "max_connections",
            "--max-connections",
            Stated::Unset("the file-descriptor limit less a reserve"),
        ),
        (
            "envoy_max_descriptors",
            "--envoy-max-descriptors",
            value(ENVOY_MAX_DESCRIPTORS),
        ),
        (
            "envoy_limit_headers",
            "--envoy-limit-headers",
            value(limit_headers),
        ),
        (
            "envoy_require_rules",
            "--envoy-require-rules",
            value(ENVOY_REQUIRE_RULES),
        ),
    ];
    rows.into_iter()
        .map(|(key, flag, default)| Documented { key, flag, default })
        .collect()
}

/// The default of the setting `key` as stated ([`documented`]).
pub fn stated(key: &str) -> Option<Stated> {
    documented()
        .into_iter()
        .find(|d| d.key == key)
        .map(|d| d.default)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stated_wal_limit_is_the_sqlite_stores_own() {
        let store = ratewarden_sqlite::SqliteOptions::default();
        assert_eq!(WAL_AUTOCHECKPOINT_PAGES, store.wal_autocheckpoint);
    }

    #[test]
    fn every_setting_is_stated_once_with_its_flag() {
        let all = documented();
        for (i, d) in all.iter().enumerate() {
            assert!(
                all[..i].iter().all(|o| o.key != d.key && o.flag != d.flag),
                "{} twice",
                d.key
            );
            assert!(d.flag.starts_with("--"), "{}", d.flag);
        }
        assert_eq!(
            stated("audit_retention").map(|s| s.to_string()).as_deref(),
            Some("604800, 7 days")
        );
        assert_eq!(stated("listen").unwrap().to_string(), "127.0.0.1:8080");
        assert_eq!(stated("envoy_limit_headers").unwrap().to_string(), "off");
    }
}
