//! The reading of the reference's variables, one behaviour a test.

use super::*;
use crate::types::StoreConfig;
use std::collections::HashMap;
use std::time::Duration;

fn read(pairs: &[(&str, &str)]) -> Result<Option<Environment>, String> {
    let vars: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    Environment::read(|name| vars.get(name).cloned()).map_err(|e| e.to_string())
}

#[test]
fn go_durations_read_as_go_reads_them() {
    for (text, d) in [
        ("0", Duration::ZERO),
        ("10s", Duration::from_secs(10)),
        ("500ms", Duration::from_millis(500)),
        ("1.5s", Duration::from_millis(1500)),
        ("1m30s", Duration::from_secs(90)),
        ("2h", Duration::from_secs(7200)),
        ("250us", Duration::from_micros(250)),
        (".5s", Duration::from_millis(500)),
    ] {
        assert_eq!(go_duration(text), Ok(d), "{text}");
    }
    for bad in ["", "10", "s", "1x", "1..5s", "-1s", "1.s.", "ten seconds"] {
        assert!(go_duration(bad).is_err(), "{bad}");
    }
}

#[test]
fn nothing_is_read_without_runtime_root() {
    assert!(
        read(&[("PORT", "9000"), ("REDIS_URL", "h:1")])
            .unwrap()
            .is_none()
    );
    let vars: HashMap<&str, &str> = [("GRPC_PORT", "1"), ("PORT", "2")].into();
    let unread = Environment::unread(|n| vars.get(n).map(|v| (*v).to_owned()));
    assert_eq!(unread, ["GRPC_PORT"]);
}

#[test]
fn the_reference_docker_compose_environment_maps_to_settings() {
    let env = read(&[
        ("USE_STATSD", "false"),
        ("LOG_LEVEL", "debug"),
        ("REDIS_SOCKET_TYPE", "tcp"),
        ("REDIS_URL", "redis:6379"),
        ("RUNTIME_ROOT", "/data"),
        ("RUNTIME_SUBDIRECTORY", "ratelimit"),
        ("MEMCACHE_HOST_PORT", "memcached:11211"),
    ])
    .unwrap()
    .unwrap();
    let o = &env.overrides;
    assert_eq!(
        o.envoy_config.as_deref(),
        Some(std::path::Path::new("/data/ratelimit/config"))
    );
    assert_eq!(o.listen.unwrap().to_string(), "0.0.0.0:8080");
    assert_eq!(o.grpc_listen.unwrap().to_string(), "0.0.0.0:8081");
    let Some(StoreConfig::Redis(redis)) = &o.store else {
        panic!("{:?}", o.store);
    };
    assert_eq!(redis.url(), "redis://redis:6379");
    assert_eq!(env.log_filter, Some("debug"));
    assert!(
        env.ignored
            .iter()
            .any(|i| i.variable == "MEMCACHE_HOST_PORT=memcached:11211" && !i.loses),
        "{:?}",
        env.ignored
    );
    let named: Vec<String> = env
        .readings
        .iter()
        .flat_map(|r| r.variables.clone())
        .collect();
    for v in [
        "RUNTIME_ROOT=/data",
        "REDIS_URL=redis:6379",
        "USE_STATSD=false",
        "LOG_LEVEL=debug",
    ] {
        assert!(named.iter().any(|n| n == v), "{v} in {named:?}");
    }
}

#[test]
fn redis_settings_build_a_url_with_the_password_encoded_and_never_shown() {
    let env = read(&[
        ("RUNTIME_ROOT", "/r"),
        ("REDIS_SOCKET_TYPE", "tcp"),
        ("REDIS_URL", "10.0.0.5:6380"),
        ("REDIS_AUTH", "app:p@ss:w/rd"),
        ("CACHE_KEY_PREFIX", "edge_"),
        ("REDIS_TIMEOUT", "1.5s"),
    ])
    .unwrap()
    .unwrap();
    let Some(StoreConfig::Redis(redis)) = &env.overrides.store else {
        panic!();
    };
    assert_eq!(redis.url(), "redis://app:p%40ss%3Aw%2Frd@10.0.0.5:6380");
    assert_eq!(redis.key_prefix(), "edge_");
    assert_eq!(env.overrides.store_timeout_ms, Some(1500));
    let shown = format!("{:?}", env.readings);
    assert!(!shown.contains("p@ss"), "{shown}");
    let env = read(&[("RUNTIME_ROOT", "/r"), ("REDIS_AUTH", "secret")])
        .unwrap()
        .unwrap();
    let Some(StoreConfig::Redis(redis)) = &env.overrides.store else {
        panic!();
    };
    assert_eq!(
        redis.url(),
        "redis+unix:///var/run/nutcracker/ratelimit.sock?pass=secret"
    );
}

#[test]
fn what_would_change_decisions_is_refused_naming_the_variable() {
    for (name, value, needle) in [
        ("REDIS_TLS", "true", "no TLS for Redis"),
        ("BACKEND_TYPE", "memcache", "no memcache"),
        ("REDIS_TYPE", "cluster", "Cluster"),
        ("REDIS_SOCKET_TYPE", "udp", "tcp or unix"),
        ("SHADOW_MODE", "true", "shadow_mode"),
        ("QUOTA_MODE", "1", "quota mode"),
        ("MERGE_DOMAIN_CONFIG", "True", "merged"),
        ("GRPC_UDS", "/tmp/rl.sock", "TCP only"),
        ("CONFIG_TYPE", "GRPC_XDS_SOTW", "xDS"),
        ("PORT", "http", "port number"),
        ("HOST", "ratelimit.local", "not an IP address"),
        ("USE_STATSD", "yes", "not a boolean"),
        ("REDIS_TIMEOUT", "10", "not a duration"),
        ("LOG_LEVEL", "verbose", "not a level"),
        ("CACHE_KEY_PREFIX", "a{b}", "key prefix"),
        ("LIMIT_LIMIT_HEADER", "X Limit", "header name"),
    ] {
        let mut pairs = vec![("RUNTIME_ROOT", "/r"), (name, value)];
        if name.starts_with("LIMIT_") {
            pairs.push(("LIMIT_RESPONSE_HEADERS_ENABLED", "true"));
        }
        let err = read(&pairs).unwrap_err();
        assert!(
            (err.contains(&format!("environment variable {name}"))
                || err.starts_with(&format!("{name}={value} ")))
                && err.contains(needle),
            "{name}={value}: {err}"
        );
    }
}

#[test]
fn response_headers_take_the_reference_names_unless_renamed() {
    let env = read(&[
        ("RUNTIME_ROOT", "/r"),
        ("LIMIT_RESPONSE_HEADERS_ENABLED", "true"),
        ("LIMIT_REMAINING_HEADER", "X-RateLimit-Remaining"),
    ])
    .unwrap()
    .unwrap();
    let headers = env.overrides.envoy_limit_headers.clone().unwrap().unwrap();
    assert_eq!(headers.limit, "RateLimit-Limit");
    assert_eq!(headers.remaining, "X-RateLimit-Remaining");
    assert_eq!(headers.reset, "RateLimit-Reset");
    let env = read(&[("RUNTIME_ROOT", "/r"), ("LIMIT_RESET_HEADER", "X-Reset")])
        .unwrap()
        .unwrap();
    assert!(env.overrides.envoy_limit_headers.is_none());
    assert!(
        env.ignored
            .iter()
            .any(|i| i.variable == "LIMIT_RESET_HEADER=X-Reset")
    );
}

#[test]
fn own_settings_win_over_each_reading() {
    let env = read(&[("RUNTIME_ROOT", "/r"), ("PORT", "9000")])
        .unwrap()
        .unwrap();
    let listen = env
        .readings
        .iter()
        .find(|r| r.variables.iter().any(|v| v == "PORT=9000"))
        .unwrap();
    let own = Overrides {
        listen: Some("127.0.0.1:1".parse().unwrap()),
        ..Overrides::default()
    };
    assert!(listen.yields_to(&own));
    assert!(!listen.yields_to(&Overrides::default()));
}
