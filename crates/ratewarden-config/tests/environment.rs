//! envoyproxy/ratelimit's environment: its layout of rules files and its
//! variables become settings, below every setting of ratewarden's own.

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use ratewarden_config::envoy::environment::Environment;
use ratewarden_config::{ConfigFile, Overrides, Settings, StoreConfig};

fn reference(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/envoy/reference")
        .join(path)
}

fn environment(vars: &[(&str, &str)]) -> Environment {
    let vars: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    Environment::read(|name| vars.get(name).cloned())
        .unwrap()
        .unwrap()
}

/// `RUNTIME_ROOT` laid out as the reference's docker-compose mounts its
/// examples: `$ROOT/ratelimit/config/{config,example}.yaml`.
fn reference_layout() -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    let config = root.path().join("ratelimit/config");
    std::fs::create_dir_all(&config).unwrap();
    for file in ["config.yaml", "example.yaml"] {
        std::fs::copy(reference("examples").join(file), config.join(file)).unwrap();
    }
    root
}

#[test]
fn the_reference_layout_loads_its_rules_and_refuses_the_file_it_cannot_read() {
    // Regression: pointed at RUNTIME_ROOT, ratewarden found no rules
    // and answered OK to everything; pointed at its config/ directory,
    // example.yaml's quota_mode stopped it from starting.
    let root = reference_layout();
    let env = environment(&[
        ("RUNTIME_ROOT", root.path().to_str().unwrap()),
        ("RUNTIME_SUBDIRECTORY", "ratelimit"),
        ("REDIS_SOCKET_TYPE", "tcp"),
        ("REDIS_URL", "127.0.0.1:6379"),
        ("USE_STATSD", "false"),
    ]);
    let settings =
        Settings::resolve_with_environment(Overrides::default(), None, env.overrides, None)
            .unwrap();
    let rules = settings.envoy.as_ref().unwrap();
    assert_eq!(
        settings.envoy_config.as_deref(),
        Some(root.path().join("ratelimit/config").as_path())
    );
    assert!(rules.domain("mongo_cps").is_some());
    let [refused] = rules.refused() else {
        panic!("{:?}", rules.refused());
    };
    assert!(refused.file.ends_with("example.yaml"));
    assert!(
        refused
            .errors
            .to_string()
            .contains("quota_mode is not implemented"),
        "{}",
        refused.errors
    );
    assert_eq!(settings.listen.to_string(), "0.0.0.0:8080");
    assert_eq!(settings.grpc_listen.unwrap().to_string(), "0.0.0.0:8081");
    assert_eq!(settings.store.to_string(), "redis://127.0.0.1:6379");
}

#[test]
fn the_reference_integration_layout_loads_whole() {
    // The reference's integration tests run with RUNTIME_ROOT=…/current
    // and RUNTIME_SUBDIRECTORY=ratelimit; the vendored copy keeps config/
    // under integration/.
    let env = environment(&[
        ("RUNTIME_ROOT", reference("").to_str().unwrap()),
        ("RUNTIME_SUBDIRECTORY", "integration"),
    ]);
    let settings =
        Settings::resolve_with_environment(Overrides::default(), None, env.overrides, None)
            .unwrap();
    let rules = settings.envoy.as_ref().unwrap();
    assert_eq!(rules.domain_count(), 3);
    assert!(rules.refused().is_empty());
    // reload.yaml lies beside config/, not in it: not a rules file.
    assert!(rules.skipped().is_empty(), "{:?}", rules.skipped());
}

#[test]
fn ratewarden_settings_win_over_the_reference_variables_and_those_over_defaults() {
    let root = reference_layout();
    let env = environment(&[
        ("RUNTIME_ROOT", root.path().to_str().unwrap()),
        ("RUNTIME_SUBDIRECTORY", "ratelimit"),
        ("PORT", "9100"),
        ("GRPC_PORT", "9101"),
        ("GRPC_HOST", "127.0.0.1"),
        ("REDIS_SOCKET_TYPE", "tcp"),
        ("REDIS_URL", "127.0.0.1:6390"),
        ("LIMIT_RESPONSE_HEADERS_ENABLED", "true"),
    ]);
    // The file gives the gRPC address and the headers; a flag the store.
    let file = ConfigFile::parse(
        Path::new("rw.toml"),
        "grpc_listen = \"127.0.0.1:7001\"\nenvoy_limit_headers = \"off\"\n",
    )
    .unwrap();
    let given = Overrides {
        store: Some(StoreConfig::Memory),
        ..Overrides::default()
    };
    let settings =
        Settings::resolve_with_environment(given, Some(&file), env.overrides.clone(), None)
            .unwrap();
    assert_eq!(
        settings.store,
        StoreConfig::Memory,
        "a flag beats REDIS_URL"
    );
    assert_eq!(
        settings.grpc_listen.unwrap().to_string(),
        "127.0.0.1:7001",
        "the file beats GRPC_PORT"
    );
    assert_eq!(
        settings.envoy_options.limit_headers, None,
        "the file beats LIMIT_*"
    );
    assert_eq!(
        settings.listen.to_string(),
        "0.0.0.0:9100",
        "PORT beats the default"
    );
    // Which readings were used, as the start's log says.
    let own = Overrides {
        store: Some(StoreConfig::Memory),
        ..Overrides::default()
    }
    .or(file.overrides.clone());
    let yielded: Vec<String> = env
        .readings
        .iter()
        .filter(|r| r.yields_to(&own))
        .flat_map(|r| r.variables.clone())
        .collect();
    for v in [
        "GRPC_PORT=9101",
        "REDIS_URL=127.0.0.1:6390",
        "LIMIT_RESPONSE_HEADERS_ENABLED=true",
    ] {
        assert!(yielded.iter().any(|y| y == v), "{v} in {yielded:?}");
    }
    assert!(!yielded.iter().any(|y| y == "PORT=9100"), "{yielded:?}");
    // An own db means SQLite, over REDIS_URL.
    let given = Overrides {
        db: Some("x.db".into()),
        ..Overrides::default()
    };
    let settings =
        Settings::resolve_with_environment(given, None, env.overrides.clone(), None).unwrap();
    assert_eq!(settings.store, StoreConfig::Sqlite("x.db".into()));
    // A reload ranks the environment alike.
    let again = settings.resolve_again(Overrides::default(), None).unwrap();
    assert_eq!(again.listen.to_string(), "0.0.0.0:9100");
    assert!(settings.needing_restart(&again).contains(&"store"));
}

#[test]
fn a_missing_rules_directory_is_an_error_naming_it() {
    let root = tempfile::tempdir().unwrap();
    let env = environment(&[
        ("RUNTIME_ROOT", root.path().to_str().unwrap()),
        ("RUNTIME_SUBDIRECTORY", "ratelimit"),
    ]);
    let err = Settings::resolve_with_environment(Overrides::default(), None, env.overrides, None)
        .unwrap_err()
        .to_string();
    assert!(err.contains("ratelimit/config"), "{err}");
}
