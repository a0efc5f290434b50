//! The configuration file: what it accepts, and that every error names
//! `FILE:LINE:COLUMN`, the key and the offending value.

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

use std::path::Path;
use std::time::Duration;

use ratewarden_config::{ConfigFile, KeySource, Overrides, Settings, StoreConfig, check_config};
use ratewarden_core::{Algorithm, Mode};
use ratewarden_limiter::{FailureMode, KeyPart};

fn parse(text: &str) -> Result<ConfigFile, Vec<String>> {
    ConfigFile::parse(Path::new("rw.toml"), text)
        .map_err(|e| e.iter().map(ToString::to_string).collect())
}

fn errors(text: &str) -> Vec<String> {
    parse(text).unwrap_err()
}

#[test]
fn every_field_of_a_policy_is_read() {
    let file = parse(
        r#"
on_store_error = "closed"

[[policies]]
name = "api"
algorithm = "gcra"
limit = 100
window = "1m"
burst = 20
shadow = true
on_store_error = "open"
key = ["header:X-Api-Key", "client_ip", "path", "method", "query:user", "literal:v1"]
match = { methods = ["GET", "POST"], path = "/api/*" }

[[policies]]
name = "logins"
algorithm = "fixed_window"
limit = 5
window = "500ms"
count_denied = true
"#,
    )
    .unwrap();
    let api = &file.policies[0];
    assert_eq!(api.policy.algorithm, Algorithm::Gcra);
    assert_eq!(
        (api.policy.quota.limit(), api.policy.quota.burst()),
        (100, 20)
    );
    assert_eq!(api.policy.quota.window(), Duration::from_secs(60));
    assert_eq!(api.policy.mode, Mode::Shadow);
    assert_eq!(api.on_store_error, Some(FailureMode::Open));
    assert_eq!(api.key[0], KeyPart::Header("x-api-key".into()));
    assert_eq!(api.key.len(), 6);
    let m = api.matcher.as_ref().unwrap();
    assert!(m.matches("POST", "/api/v1") && !m.matches("DELETE", "/api/v1"));
    assert_eq!(api.location.line, 4);
    let logins = &file.policies[1];
    assert!(logins.policy.counts_denied());
    assert_eq!(logins.policy.quota.window(), Duration::from_millis(500));

    let settings = Settings::resolve(Overrides::default(), Some(&file), None).unwrap();
    let logins = settings.policies.get("logins").unwrap();
    assert_eq!(
        logins.on_store_error,
        FailureMode::Closed,
        "the global default"
    );
}

#[test]
fn every_serve_setting_has_a_key_and_flags_win_over_the_file() {
    let file = parse(
        r#"
listen = "127.0.0.1:9999"
db = "other.db"
ping_limit = 7
ping_window = 30
ping_algorithm = "gcra"
check_limit = 4
check_window = 10
ping_key = "forwarded"
trusted_proxies = ["10.0.0.0/8", "::1"]
on_store_error = "closed"
time_source = "local"
store_timeout_ms = 250
audit_retention = 3600
audit_sample = 100
wal_autocheckpoint = 20000
max_body_bytes = 1024
"#,
    )
    .unwrap();
    let s = Settings::resolve(Overrides::default(), Some(&file), None).unwrap();
    assert_eq!(s.listen.to_string(), "127.0.0.1:9999");
    assert_eq!(s.store, StoreConfig::Sqlite("other.db".into()));
    let ping = s.policies.get("ping").unwrap();
    assert_eq!(ping.policy.algorithm, Algorithm::Gcra);
    assert_eq!(ping.policy.quota.limit(), 7);
    assert_eq!(ping.policy.quota.window(), Duration::from_secs(30));
    let check = s.policies.get("check").unwrap();
    assert_eq!(
        (check.policy.quota.limit(), check.policy.algorithm),
        (4, Algorithm::SlidingLog)
    );
    assert!(matches!(&s.ping_key, KeySource::Forwarded));
    assert_eq!(s.trusted_proxies.len(), 2);
    assert_eq!(s.on_store_error, FailureMode::Closed);
    assert_eq!(s.store_timeout, Duration::from_millis(250));
    assert_eq!(s.audit_retention, Duration::from_secs(3600));
    assert_eq!(s.audit_sample, 100);
    assert_eq!(s.wal_autocheckpoint, Some(20_000));
    assert_eq!(s.store_options().wal_autocheckpoint, Some(20_000));
    assert_eq!(s.max_body_bytes, 1024);

    let flags = Overrides {
        ping_limit: Some(9),
        store: Some(StoreConfig::Memory),
        ..Overrides::default()
    };
    let s = Settings::resolve(flags, Some(&file), None).unwrap();
    assert_eq!(s.policies.get("ping").unwrap().policy.quota.limit(), 9);
    assert_eq!(s.store, StoreConfig::Memory);
}

#[test]
fn a_store_key_and_the_seed_defaults() {
    let s = Settings::resolve(Overrides::default(), None, None).unwrap();
    assert_eq!(s.store, StoreConfig::Sqlite("./ratewarden.db".into()));
    let ping = s.policies.get("ping").unwrap();
    assert!(
        ping.policy.counts_denied(),
        "seed A counts refused attempts"
    );
    assert_eq!(
        (ping.policy.quota.limit(), ping.policy.quota.window()),
        (3, Duration::from_secs(60))
    );
    let file = parse("store = \"memory\"\n").unwrap();
    let s = Settings::resolve(Overrides::default(), Some(&file), None).unwrap();
    assert_eq!(s.store, StoreConfig::Memory);
}

#[test]
fn errors_name_file_line_column_key_and_value() {
    let text = "ping_limit = -3\n\n[[policies]]\nname = \"api\"\nalgorithm = \"leaky\"\nlimit = 5\nwindow = \"0s\"\n";
    let errs = errors(text);
    assert_eq!(
        errs,
        [
            "rw.toml:1:14: ping_limit: -3 is negative",
            "rw.toml:5:13: policies[0].algorithm: unknown algorithm \"leaky\"; expected one of fixed_window, sliding_log, sliding_window, gcra",
            "rw.toml:7:10: policies[0].window: '0s' must be longer than zero",
        ]
    );
}

#[test]
fn every_rule_of_a_policy_is_checked_and_all_errors_are_reported() {
    let text = r#"
[[policies]]
name = "a b"
algorithm = "sliding_log"
limit = "ten"
window = "60"
burst = 2
count_denied = true
colour = "red"

[[policies]]
algorithm = "gcra"
limit = 1
window = "1s"
key = ["cookie:x"]
match = { methods = ["get"], path = "api/*", host = "x" }

[[policies]]
name = "ping"
algorithm = "gcra"
limit = 1
window = "1s"
"#;
    let errs = errors(text).join("\n");
    for expected in [
        "rw.toml:9:1: policies[0].colour: unknown key 'colour'",
        "rw.toml:3:8: policies[0].name: 'a b' is not a policy name",
        "rw.toml:5:9: policies[0].limit: expected a whole number, found a string (\"ten\")",
        "rw.toml:6:10: policies[0].window: '60' is not a whole number followed by a unit",
        "rw.toml:7:9: policies[0].burst: burst applies only to the gcra algorithm, not sliding_log",
        "rw.toml:8:16: policies[0].count_denied: count_denied applies only to the fixed_window algorithm",
        "rw.toml:11:1: policies[1].name: the key 'name' is required",
        "rw.toml:15:8: policies[1].key[0]: 'cookie:x' is not a key part",
        "rw.toml:16:22: policies[1].match.methods[0]: 'get' is not a method",
        "policies[1].match.path: the path pattern 'api/*' must start with '/'",
        "policies[1].match.host: unknown key 'host'",
        "rw.toml:19:8: policies[2].name: 'ping' is the seed route's policy",
    ] {
        assert!(errs.contains(expected), "missing {expected:?} in\n{errs}");
    }
    assert_eq!(
        errs.lines().count(),
        12,
        "one error per fault, no follow-ups:\n{errs}"
    );
}

#[test]
fn duplicate_names_unknown_settings_and_bad_toml_are_errors() {
    let dup = "[[policies]]\nname = \"a\"\nalgorithm = \"gcra\"\nlimit = 1\nwindow = \"1s\"\n\n[[policies]]\nname = \"a\"\nalgorithm = \"gcra\"\nlimit = 2\nwindow = \"1s\"\n";
    let errs = errors(dup);
    assert_eq!(errs.len(), 1);
    assert!(
        errs[0].starts_with(
            "rw.toml:8:8: policies[1].name: the policy name 'a' is used twice (first at line 2)"
        ),
        "{errs:?}"
    );
    // Regression: a duplicate was not reported when it had another error.
    let both = dup.replace("limit = 2", "limit = -2");
    let errs = errors(&both);
    assert_eq!(errs.len(), 2, "{errs:?}");
    assert!(
        errs[0].contains("used twice") && errs[1].contains("-2 is negative"),
        "{errs:?}"
    );
    let errs = errors("listn = \"x\"\nmax_body_bytes = 0\n");
    assert!(
        errs[0].starts_with("rw.toml:1:1: listn: unknown key 'listn'; expected one of listen,"),
        "{errs:?}"
    );
    assert!(
        errs[1].starts_with("rw.toml:2:18: max_body_bytes: 0 must be at least 1 byte"),
        "{errs:?}"
    );
    // The SQLite WAL limit: 0 would be SQLite's "never", an unbounded WAL.
    let errs = errors("wal_autocheckpoint = 0\n");
    assert!(
        errs[0].starts_with(
            "rw.toml:1:22: wal_autocheckpoint: 0 would let the WAL grow without bound"
        ),
        "{errs:?}"
    );
    let errs = errors("wal_autocheckpoint = 16777217\n");
    assert!(
        errs[0].contains("wal_autocheckpoint: 16777217 is more than 16777216 pages"),
        "{errs:?}"
    );
    let errs = errors("ping_limit = 1\nping_limit = 2\n");
    assert!(
        errs[0].starts_with("rw.toml:2:") && errs[0].contains("'ping_limit'"),
        "{errs:?}"
    );
    let errs = errors("[[policies]\n");
    assert!(errs[0].starts_with("rw.toml:1:"), "{errs:?}");
    let errs = errors("store = \"redis://:hunter2@host:port/0\"\n");
    assert!(
        !errs[0].contains("hunter2"),
        "the password leaked: {errs:?}"
    );
    let errs = errors("listen = \"localhost:8080\"\n");
    assert!(
        errs[0].contains("'localhost:8080' is not an IP address and port"),
        "{errs:?}"
    );
}

#[test]
fn a_host_name_or_a_missing_port_in_an_address_setting_gets_a_hint_at_file_line_column() {
    let errs = errors("ping_limit = 1\nlisten = \"localhost:8080\"\ngrpc_listen = \"127.0.0.1\"\n");
    assert_eq!(
        errs,
        [
            "rw.toml:2:10: listen: 'localhost:8080' is not an IP address and port; \
             use 127.0.0.1:8080 or [::1]:8080 (host names are not resolved)",
            "rw.toml:3:15: grpc_listen: '127.0.0.1' has no port; \
             write an IP address and a port, e.g. 127.0.0.1:8081",
        ]
    );
    let errs = errors("grpc_listen = \"localhost:8081\"\nlisten = \"127.0.0.1:70000\"\n");
    assert_eq!(
        errs,
        [
            "rw.toml:1:15: grpc_listen: 'localhost:8081' is not an IP address and port; \
             use 127.0.0.1:8081 or [::1]:8081 (host names are not resolved)",
            "rw.toml:2:10: listen: '127.0.0.1:70000' has the port 70000, which is out of \
             range; ports are 0 to 65535",
        ]
    );
}

#[test]
fn listen_addresses_are_an_ip_and_a_port_and_errors_say_what_to_write() {
    use ratewarden_config::values::{parse_grpc_listen, parse_listen};
    for ok in ["127.0.0.1:8080", "0.0.0.0:0", "[::1]:8080", "[::]:65535"] {
        assert_eq!(parse_listen(ok).unwrap().to_string(), ok);
    }
    for (bad, message) in [
        (
            "localhost:8080",
            "'localhost:8080' is not an IP address and port; use 127.0.0.1:8080 or [::1]:8080 \
             (host names are not resolved)",
        ),
        (
            "LOCALHOST",
            "'LOCALHOST' is not an IP address and port; use 127.0.0.1:8080 or [::1]:8080",
        ),
        (
            "example.com:9000",
            "'example.com:9000' is not an IP address and port (host names are not resolved); \
             use the IP address of an interface, e.g. 127.0.0.1:9000 (this machine only) or \
             0.0.0.0:9000 (every IPv4 interface)",
        ),
        (
            "127.0.0.1",
            "'127.0.0.1' has no port; write an IP address and a port, e.g. 127.0.0.1:8080",
        ),
        (
            "[::1]",
            "'[::1]' has no port; write an IP address and a port, e.g. [::1]:8080",
        ),
        (
            "::1:9000",
            "'::1:9000' has no port; an IPv6 address with a port is written in brackets, \
             e.g. [::1]:9000",
        ),
        (
            "127.0.0.1:",
            "'127.0.0.1:' has an empty port; write a port from 0 to 65535, e.g. 127.0.0.1:8080",
        ),
        (
            "localhost:",
            "'localhost:' has an empty port; write a port from 0 to 65535, e.g. 127.0.0.1:8080",
        ),
        (
            "127.0.0.1:http",
            "'127.0.0.1:http' has the port 'http', which is not a whole number",
        ),
        (
            "127.0.0.1:65536",
            "'127.0.0.1:65536' has the port 65536, which is out of range; ports are 0 to 65535",
        ),
        (
            "[::1]:99999999999999999999",
            "has the port 99999999999999999999, which is out of range",
        ),
        (
            ":8080",
            "':8080' has no IP address; use 127.0.0.1:8080 (this machine only)",
        ),
        (
            "[127.0.0.1]:80",
            "'[127.0.0.1]:80' is not of the form IP:PORT or [IPv6]:PORT; write 127.0.0.1:80",
        ),
        ("", "'' has no IP address"),
    ] {
        let err = parse_listen(bad).unwrap_err();
        assert!(err.contains(message), "{bad:?}: {err}");
    }
    assert!(
        parse_grpc_listen("localhost")
            .unwrap_err()
            .contains("use 127.0.0.1:8081 or [::1]:8081"),
    );
}

#[test]
fn redis_urls_the_client_would_read_as_a_default_are_refused_naming_the_value() {
    use ratewarden_config::values::parse_store;
    // Regression: an empty port silently meant 6379.
    let errs = errors("ping_limit = 1\nstore = \"redis://127.0.0.1:/0\"\n");
    assert_eq!(
        errs,
        [
            "rw.toml:2:9: store: 'redis://127.0.0.1:/0' is not a valid Redis URL: the port after \
          ':' is empty; write one (e.g. :6379), or leave out ':' for the default port 6379"
        ]
    );
    for (bad, problem) in [
        ("redis://127.0.0.1:/0", "the port after ':' is empty"),
        ("redis://127.0.0.1:0/0", "the port 0 is out of range"),
        (
            "redis://127.0.0.1:65536/0",
            "the port 65536 is out of range",
        ),
        (
            "redis://127.0.0.1:6379/x",
            "the database 'x' is not a whole number",
        ),
        (
            "redis://127.0.0.1:6379?db=3",
            "the query parameter 'db' is not read",
        ),
        ("redis://me@127.0.0.1:6379/0", "a user name but no password"),
        ("redis://127.0.0.1:6379/0#1", "a fragment"),
    ] {
        let err = parse_store(bad).unwrap_err();
        assert!(
            err.contains(problem) && err.contains("is not a valid Redis URL"),
            "{bad}: {err}"
        );
        assert!(err.contains("127.0.0.1"), "the value is named: {err}");
    }
    // Neither a port nor a database: 6379 and 0, as documented.
    for ok in [
        "redis://127.0.0.1/0",
        "redis://127.0.0.1",
        "redis://127.0.0.1:6380/2",
    ] {
        assert!(matches!(parse_store(ok), Ok(StoreConfig::Redis(_))), "{ok}");
    }
    let err = parse_store("redis://:hunter2@127.0.0.1:/0").unwrap_err();
    assert!(!err.contains("hunter2"), "the password leaked: {err}");
}

#[test]
fn messages_name_the_right_settings_and_values() {
    let policy = |extra: &str| {
        format!(
            "[[policies]]\nname = \"a\"\nalgorithm = \"gcra\"\nlimit = 1\nwindow = \"1s\"\n{extra}"
        )
    };
    let errs = errors(
        "[[policies]]\nname = \"check\"\nalgorithm = \"gcra\"\nlimit = 1\nwindow = \"1s\"\n",
    );
    assert!(
        errs[0].contains("set check_limit and check_window instead"),
        "{errs:?}"
    );
    let errs = errors(&policy("key = [\"literal:\", \"header:\", \"query:\"]\n"));
    assert!(errs[0].contains("'literal:' needs a text"), "{errs:?}");
    assert!(
        errs[1].contains("'header:' does not name a valid header"),
        "{errs:?}"
    );
    assert!(
        errs[2].contains("'query:' needs a parameter name"),
        "{errs:?}"
    );
    let errs = errors(&policy("key = [\"path\"]\nmatch = { methods = [] }\n"));
    assert!(
        errs[0].contains("an empty list matches no request"),
        "{errs:?}"
    );
    let errs = errors("check_window = -5\n");
    assert_eq!(errs, ["rw.toml:1:16: check_window: -5 is negative"]);
}

#[test]
fn match_without_key_and_an_empty_key_are_refused() {
    let errs = errors(
        "[[policies]]\nname = \"a\"\nalgorithm = \"gcra\"\nlimit = 1\nwindow = \"1s\"\nmatch = { path = \"/x\" }\n",
    );
    assert!(errs[0].contains("needs a 'key'"), "{errs:?}");
    let errs = errors(
        "[[policies]]\nname = \"a\"\nalgorithm = \"gcra\"\nlimit = 1\nwindow = \"1s\"\nkey = []\n",
    );
    assert!(errs[0].contains("at least one part"), "{errs:?}");
}

#[test]
fn check_config_lists_every_policy_or_every_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ok.toml");
    std::fs::write(
        &path,
        "[[policies]]\nname = \"api\"\nalgorithm = \"gcra\"\nlimit = 10\nwindow = \"1m\"\nkey = [\"client_ip\"]\n",
    )
    .unwrap();
    let lines = check_config(&path).unwrap();
    assert_eq!(lines.len(), 3);
    assert_eq!(
        lines[2],
        "api: gcra, 10 per 60s, burst 10, on store error open, key [client_ip]"
    );
    let missing = dir.path().join("missing.toml");
    let err = check_config(&missing).unwrap_err().to_string();
    assert!(err.contains("missing.toml"), "{err}");
    let combo = dir.path().join("combo.toml");
    std::fs::write(&combo, "ping_key = \"forwarded\"\n").unwrap();
    let err = check_config(&combo).unwrap_err().to_string();
    assert!(err.contains("trusted proxy"), "{err}");
}

#[test]
fn the_stores_size_bounds_are_read_defaulted_and_checked() {
    let file = parse("max_keys = 1000\naudit_max_rows = 50000\n").unwrap();
    let s = Settings::resolve(Overrides::default(), Some(&file), None).unwrap();
    assert_eq!((s.max_keys.get(), s.audit_max_rows), (1_000, 50_000));
    let options = s.store_options();
    assert_eq!(
        (options.max_keys.get(), options.audit_max_rows),
        (1_000, 50_000)
    );
    let defaults = Settings::resolve(Overrides::default(), None, None).unwrap();
    assert_eq!(
        (defaults.max_keys.get(), defaults.audit_max_rows),
        (2_000_000, 10_000_000)
    );
    let errs = errors("max_keys = 0\naudit_max_rows = 0\n");
    assert!(
        errs[0].starts_with("rw.toml:1:12: max_keys: 0 would refuse every new key"),
        "{errs:?}"
    );
    assert!(
        errs[1].starts_with("rw.toml:2:18: audit_max_rows: 0 would keep no audit row"),
        "{errs:?}"
    );
    let errs = errors("audit_max_rows = 9223372036854775808\n");
    assert!(
        errs[0].contains("audit_max_rows: 9223372036854775808 is more than 9223372036854775807"),
        "{errs:?}"
    );
}
