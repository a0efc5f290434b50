//! The reference's variables by how ratewarden treats them.

/// The reference's variables that no other program is likely to set:
/// named when they are set without `RUNTIME_ROOT`, since they are not read
/// then.
pub(super) const REFERENCE_ONLY: [&str; 17] = [
    "RUNTIME_SUBDIRECTORY",
    "RUNTIME_APPDIRECTORY",
    "RUNTIME_WATCH_ROOT",
    "RUNTIME_IGNOREDOTFILES",
    "REDIS_SOCKET_TYPE",
    "REDIS_AUTH",
    "REDIS_TLS",
    "REDIS_TYPE",
    "GRPC_PORT",
    "GRPC_HOST",
    "BACKEND_TYPE",
    "USE_STATSD",
    "LIMIT_RESPONSE_HEADERS_ENABLED",
    "HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED",
    "LOCAL_CACHE_SIZE_IN_BYTES",
    "CACHE_KEY_PREFIX",
    "MERGE_DOMAIN_CONFIG",
];

/// Variables ignored because they change nothing ratewarden decides nor
/// anything it is asked to provide, with why.
pub(super) const HARMLESS: [(&str, &str); 16] = [
    (
        "REDIS_POOL_SIZE",
        "ratewarden multiplexes calls on its Redis connections",
    ),
    (
        "REDIS_PIPELINE_WINDOW",
        "ratewarden batches concurrent decisions into one Redis call itself",
    ),
    ("REDIS_PIPELINE_LIMIT", "deprecated in the reference"),
    (
        "REDIS_CLUSTER_PIPELINE_PARALLELISM",
        "no Redis Cluster client (REDIS_TYPE=cluster is refused)",
    ),
    (
        "REDIS_POOL_ON_EMPTY_BEHAVIOR",
        "ratewarden multiplexes calls on its Redis connections",
    ),
    (
        "REDIS_STARTUP_INITIAL_INTERVAL",
        "ratewarden serves at once and follows on_store_error until Redis answers",
    ),
    (
        "REDIS_STARTUP_MAX_INTERVAL",
        "ratewarden serves at once and follows on_store_error until Redis answers",
    ),
    (
        "REDIS_STARTUP_MAX_ELAPSED_TIME",
        "ratewarden serves at once and follows on_store_error until Redis answers",
    ),
    (
        "GRPC_MAX_CONNECTION_AGE",
        "gRPC connections are kept until the client or a shutdown closes them",
    ),
    (
        "GRPC_MAX_CONNECTION_AGE_GRACE",
        "gRPC connections are kept until the client or a shutdown closes them",
    ),
    (
        "FORCE_START_WITHOUT_INITIAL_CONFIG",
        "the rules are read before ratewarden serves",
    ),
    (
        "LOCAL_CACHE_SIZE_IN_BYTES",
        "no local over-limit cache: every decision is exact",
    ),
    ("NEAR_LIMIT_RATIO", "statistics only"),
    (
        "EXPIRATION_JITTER_MAX_SECONDS",
        "keys expire when their state is no longer needed",
    ),
    (
        "STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT",
        "ratewarden never charges a denied request, whatever this says",
    ),
    (
        "DISABLE_STATS",
        "ratewarden's metrics are served at GET /metrics",
    ),
];

/// Variables ignored although the deployment may rely on what they
/// provide (no decision changes), with what ratewarden offers instead.
pub(super) const LOSES: [(&str, &str); 11] = [
    (
        "STATSD_HOST",
        "no statsd: ratewarden's metrics are Prometheus's, at GET /metrics on the HTTP port",
    ),
    (
        "STATSD_PORT",
        "no statsd: ratewarden's metrics are Prometheus's, at GET /metrics on the HTTP port",
    ),
    (
        "USE_DOG_STATSD_MOGRIFIERS",
        "no statsd: ratewarden's metrics are Prometheus's, at GET /metrics on the HTTP port",
    ),
    (
        "EXTRA_TAGS",
        "no statsd tags: ratewarden's metrics are Prometheus's, at GET /metrics on the HTTP port",
    ),
    (
        "STATS_FLUSH_INTERVAL",
        "no statsd: ratewarden's metrics are Prometheus's, at GET /metrics on the HTTP port",
    ),
    (
        "PROMETHEUS_ADDR",
        "no separate metrics listener: GET /metrics is on the HTTP port",
    ),
    (
        "PROMETHEUS_PATH",
        "no separate metrics listener: GET /metrics is on the HTTP port",
    ),
    (
        "PROMETHEUS_MAPPER_YAML",
        "ratewarden's metric names are its own (docs/operations.md)",
    ),
    (
        "PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS",
        "ratewarden's durations are in seconds",
    ),
    (
        "DEBUG_HOST",
        "no debug listener (pprof, /stats); metrics at GET /metrics on the HTTP port",
    ),
    (
        "DEBUG_PORT",
        "no debug listener (pprof, /stats); metrics at GET /metrics on the HTTP port",
    ),
];

/// Prefixes of variables that only matter with a feature that is off or
/// refused (TLS files without TLS, memcache with Redis, xDS with files,
/// the per-second Redis without `REDIS_PERSECOND`, the other tracing
/// settings without tracing).
pub(super) const INERT_PREFIXES: [(&str, &str); 8] = [
    ("REDIS_TLS_", "Redis TLS is off (REDIS_TLS)"),
    ("MEMCACHE_", "the backend is Redis (BACKEND_TYPE)"),
    ("CONFIG_GRPC_XDS_", "the rules are files (CONFIG_TYPE=FILE)"),
    ("XDS_CLIENT_", "the rules are files (CONFIG_TYPE=FILE)"),
    ("GRPC_SERVER_TLS_", "gRPC TLS is off (GRPC_SERVER_USE_TLS)"),
    ("GRPC_CLIENT_TLS_", "gRPC TLS is off (GRPC_SERVER_USE_TLS)"),
    (
        "REDIS_PERSECOND_",
        "no second Redis for per-second limits (REDIS_PERSECOND)",
    ),
    ("TRACING_", "no tracing export"),
];

/// Every variable of the reference that is examined by name, so that
/// [`INERT_PREFIXES`] never reports one twice.
pub(super) const NAMED: [&str; 36] = [
    "RUNTIME_ROOT",
    "RUNTIME_SUBDIRECTORY",
    "RUNTIME_APPDIRECTORY",
    "RUNTIME_WATCH_ROOT",
    "RUNTIME_IGNOREDOTFILES",
    "HOST",
    "PORT",
    "GRPC_HOST",
    "GRPC_PORT",
    "GRPC_UDS",
    "GRPC_SERVER_USE_TLS",
    "BACKEND_TYPE",
    "REDIS_SOCKET_TYPE",
    "REDIS_URL",
    "REDIS_AUTH",
    "REDIS_TYPE",
    "REDIS_TLS",
    "REDIS_TIMEOUT",
    "REDIS_HEALTH_CHECK_ACTIVE_CONNECTION",
    "REDIS_SENTINEL_AUTH",
    "REDIS_PERSECOND",
    "CACHE_KEY_PREFIX",
    "LIMIT_RESPONSE_HEADERS_ENABLED",
    "LIMIT_LIMIT_HEADER",
    "LIMIT_REMAINING_HEADER",
    "LIMIT_RESET_HEADER",
    "HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED",
    "CONFIG_TYPE",
    "SHADOW_MODE",
    "QUOTA_MODE",
    "RESPONSE_DYNAMIC_METADATA",
    "MERGE_DOMAIN_CONFIG",
    "LOG_LEVEL",
    "LOG_FORMAT",
    "USE_STATSD",
    "TRACING_ENABLED",
];

/// Booleans that the reference reads and that ratewarden refuses when
/// true, with why: ignoring them would change what is decided or what
/// the answers carry.
pub(super) const REFUSED_WHEN_TRUE: [(&str, &str); 6] = [
    (
        "REDIS_TLS",
        "this build of ratewarden has no TLS for Redis, and connecting in plaintext instead \
         would send the password and every key unencrypted; reach Redis over a trusted \
         network or a local TLS proxy (e.g. stunnel) and unset REDIS_TLS",
    ),
    (
        "GRPC_SERVER_USE_TLS",
        "ratewarden's gRPC port is plaintext (put a TLS proxy or the mesh's mTLS in front)",
    ),
    (
        "SHADOW_MODE",
        "a global shadow mode is not implemented: ratewarden would deny what the reference \
         lets through; set shadow_mode: true on the descriptors of the rules instead",
    ),
    (
        "QUOTA_MODE",
        "quota mode is not implemented: ratewarden would deny what the reference lets through",
    ),
    (
        "RESPONSE_DYNAMIC_METADATA",
        "dynamic metadata in answers is not implemented; Envoy's later filters would not \
         find it",
    ),
    (
        "MERGE_DOMAIN_CONFIG",
        "a domain split over several files is not merged: each rules file must hold its \
         own domain",
    ),
];

/// The reference's variables that [`INERT_PREFIXES`] covers.
pub(super) const KNOWN_WITH_PREFIX: [&str; 36] = [
    "REDIS_TLS_CLIENT_CERT",
    "REDIS_TLS_CLIENT_KEY",
    "REDIS_TLS_CACERT",
    "REDIS_TLS_SKIP_HOSTNAME_VERIFICATION",
    "MEMCACHE_HOST_PORT",
    "MEMCACHE_MAX_IDLE_CONNS",
    "MEMCACHE_SRV",
    "MEMCACHE_SRV_REFRESH",
    "MEMCACHE_TLS",
    "MEMCACHE_TLS_CLIENT_CERT",
    "MEMCACHE_TLS_CLIENT_KEY",
    "MEMCACHE_TLS_CACERT",
    "MEMCACHE_TLS_SKIP_HOSTNAME_VERIFICATION",
    "CONFIG_GRPC_XDS_NODE_ID",
    "CONFIG_GRPC_XDS_NODE_METADATA",
    "CONFIG_GRPC_XDS_SERVER_URL",
    "CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL",
    "CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS",
    "CONFIG_GRPC_XDS_SERVER_USE_TLS",
    "XDS_CLIENT_BACKOFF_INITIAL_INTERVAL",
    "XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES",
    "GRPC_SERVER_TLS_CERT",
    "GRPC_SERVER_TLS_KEY",
    "GRPC_CLIENT_TLS_CACERT",
    "GRPC_CLIENT_TLS_SAN",
    "REDIS_PERSECOND_SOCKET_TYPE",
    "REDIS_PERSECOND_TYPE",
    "REDIS_PERSECOND_URL",
    "REDIS_PERSECOND_POOL_SIZE",
    "REDIS_PERSECOND_AUTH",
    "REDIS_PERSECOND_TIMEOUT",
    "TRACING_SERVICE_NAME",
    "TRACING_SERVICE_NAMESPACE",
    "TRACING_SERVICE_INSTANCE_ID",
    "TRACING_EXPORTER_PROTOCOL",
    "TRACING_SAMPLING_RATE",
];
