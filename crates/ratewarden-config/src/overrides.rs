//! [`Overrides`]: the settings as one source gives them (the command
//! line with its environment variables, the file, envoyproxy/ratelimit's
//! variables), each `None` where that source is silent, and how sources
//! stack ([`Overrides::or`]).

use std::net::SocketAddr;
use std::num::NonZeroU64;
use std::path::PathBuf;

use ipnet::IpNet;
use ratewarden_core::Algorithm;
use ratewarden_limiter::FailureMode;

use crate::types::{KeySourceKind, LimitHeaders, StoreConfig, TimeSource};

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
