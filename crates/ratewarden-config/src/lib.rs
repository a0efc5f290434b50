//! ratewarden's configuration: the TOML file, the values every source
//! shares, and the resolved settings.
//!
//! Precedence: flag > environment variable > file > envoyproxy/ratelimit's
//! environment variables (only with `RUNTIME_ROOT` set) > default
//! ([`defaults`]). The command line (in `ratewarden-server`) parses flags
//! and `RATEWARDEN_*` variables into [`Overrides`] with this crate's
//! parsers ([`values`]);
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
//! The modules form a one-way chain: each uses only those before it
//! (`tests/layering.rs` keeps it so).
//! - `error.rs`: [`ConfigError`] (`FILE:LINE:COLUMN: key: message`) and
//!   [`ConfigErrors`].
//! - `types.rs`: the setting types ([`StoreConfig`], [`KeySource`],
//!   [`TimeSource`], [`AdminKey`], [`EnvoyOptions`](envoy::options::EnvoyOptions), …).
//! - `defaults.rs` ([`defaults`]): every default, and each as the help
//!   and the docs state it.
//! - `values.rs` ([`values`]): the parsers of single values (limits,
//!   durations, stores, networks, policy names), shared with the command
//!   line.
//! - `policy.rs`: one policy's quota built from its parts, for the file,
//!   the Envoy rules and the seed routes alike; [`describe`].
//! - `overrides.rs`: [`Overrides`], the settings as one source gives them.
//! - `file/`: [`ConfigFile`] and [`PolicySpec`]: the TOML walk.
//! - `envoy/`: envoyproxy/ratelimit's YAML rules ([`envoy::EnvoyConfig`])
//!   and environment variables ([`envoy::environment::Environment`]).
//! - `settings.rs`: [`Settings::resolve`], every source merged.
//! - `lib.rs`: [`check_config`].

pub mod defaults;
pub mod envoy;
mod error;
mod file;
mod overrides;
mod policy;
mod settings;
mod types;
pub mod values;

pub use error::{ConfigError, ConfigErrors, Location};
pub use file::{ConfigFile, PolicySpec};
pub use overrides::Overrides;
pub use policy::describe;
pub use settings::{ConnectionLimits, Settings};
pub use types::{
    ADMIN_KEY_ENV, AdminKey, KeySource, KeySourceKind, SEED_POLICIES, StoreConfig, StoreOptions,
    TimeSource,
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
