//! ratewarden's configuration: the TOML file, the values every source
//! shares, and the resolved settings.
//!
//! Precedence: flag > environment variable > file > envoyproxy/ratelimit's
//! environment variables (only with `RUNTIME_ROOT` set) > default. The command
//! line (in `ratewarden-server`) parses flags and `RATEWARDEN_*`
//! variables into [`Overrides`] with this crate's parsers ([`values`]);
//! [`ConfigFile`] reads `--config FILE` into its own [`Overrides`] and
//! the policies; [`Settings::resolve`] merges them, builds the seed
//! routes' policies (`ping`, `check`) and the policy set, and reports
//! every error it finds.
//!
//! ```
//! use std::path::Path;
//! use ratewarden_config::{ConfigFile, Overrides, Settings};
//!
//! let text = r#"
//! ping_limit = 5
//!
//! [[policies]]
//! name = "api"
//! algorithm = "gcra"
//! limit = 100
//! window = "1m"
//! burst = 20
//! "#;
//! let file = ConfigFile::parse(Path::new("ratewarden.toml"), text).unwrap();
//! let settings = Settings::resolve(Overrides::default(), Some(&file), None).unwrap();
//! let names: Vec<&str> = settings.policies.iter().map(|p| p.name()).collect();
//! assert_eq!(names, ["ping", "check", "api"]);
//!
//! let broken = ConfigFile::parse(Path::new("ratewarden.toml"), "[[policies]]\nname = \"x\"\nlimit = -1\n");
//! let first = broken.unwrap_err().to_string();
//! assert!(first.starts_with("ratewarden.toml:"), "{first}");
//! ```
//!
//! # Layout
//! - `values.rs`: the parsers of single values (limits, durations, stores,
//!   networks, policy names).
//! - `settings.rs`: [`Overrides`], [`Settings`] and the setting types
//!   ([`StoreConfig`], [`KeySource`], [`TimeSource`], [`AdminKey`]).
//! - `file.rs`: [`ConfigFile`] and [`PolicySpec`]: the TOML walk.
//! - `error.rs`: [`ConfigError`] (`FILE:LINE:COLUMN: key: message`) and
//!   [`ConfigErrors`].
//! - `envoy/`: envoyproxy/ratelimit's YAML rules ([`envoy::EnvoyConfig`])
//!   and environment variables ([`envoy::environment::Environment`]).

pub mod envoy;
mod error;
mod file;
mod settings;
pub mod values;

pub use error::{ConfigError, ConfigErrors, Location};
pub use file::{ConfigFile, PolicySpec};
pub use settings::{
    ADMIN_KEY_ENV, AdminKey, ConnectionLimits, DEFAULT_AUDIT_MAX_ROWS, KeySource, KeySourceKind,
    Overrides, SEED_POLICIES, Settings, StoreConfig, StoreOptions, TimeSource,
};

/// Checks `path` as `serve` would load it (with no flags or environment):
/// Envoy rules (`--envoy-config`) when it is a directory or ends in
/// `.yaml`/`.yml`, else a TOML file (`--config`). `Ok` with one line per
/// policy or rule, or every error (of a rules directory: every error of
/// every file that `serve` would refuse, although it loads the others).
///
/// # Errors
/// Every error found in the file(s) and in the settings they make.
pub fn check_config(path: &std::path::Path) -> Result<Vec<String>, ConfigErrors> {
    let yaml = path.extension().is_some_and(|e| e == "yaml" || e == "yml");
    if yaml || path.is_dir() {
        // As serve loads them, beside the default policies.
        let given = Overrides {
            envoy_config: Some(path.to_path_buf()),
            ..Overrides::default()
        };
        let settings = Settings::resolve(given, None, None)?;
        // `serve` would start without a refused file; a check names it.
        let refused: Vec<ConfigError> = settings
            .envoy
            .iter()
            .flat_map(|e| e.refused())
            .flat_map(|r| r.errors.0.clone())
            .collect();
        if !refused.is_empty() {
            return Err(ConfigErrors(refused));
        }
        let lines = settings.envoy.map(|e| e.describe()).unwrap_or_default();
        if lines.is_empty() {
            // Said, not silent: such rules let every call through.
            return Ok(vec![format!(
                "{}: no limits (every ShouldRateLimit call would be answered OK)",
                path.display()
            )]);
        }
        return Ok(lines);
    }
    let file = ConfigFile::load(path)?;
    let settings = Settings::resolve(Overrides::default(), Some(&file), None)?;
    Ok(settings.policies.iter().map(|def| describe(def)).collect())
}

/// One line of a policy's settings, as `check-config` prints it:
/// `api: gcra, 100 per 60s, burst 20, shadow, on store error open, key
/// [header:x-api-key], match GET,POST /api/*`.
pub fn describe(def: &ratewarden_limiter::PolicyDef) -> String {
    let mut line = def.policy.to_string();
    if def.policy.mode == ratewarden_core::Mode::Shadow {
        line.push_str(", shadow");
    }
    if def.policy.counts_denied() {
        line.push_str(", counts denied attempts");
    }
    line.push_str(&format!(", on store error {}", def.on_store_error.as_str()));
    if !def.key.is_empty() {
        let parts: Vec<String> = def.key.iter().map(ToString::to_string).collect();
        line.push_str(&format!(", key [{}]", parts.join(", ")));
    }
    if let Some(m) = &def.matcher {
        let methods = m
            .methods
            .as_ref()
            .map_or("any method".to_owned(), |m| m.join(","));
        let path = m.path.as_ref().map_or("any path", |p| p.as_str());
        line.push_str(&format!(", match {methods} {path}"));
    }
    line
}
