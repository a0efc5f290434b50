//! The configuration file: TOML, every `serve` setting as a top-level key
//! and the policies as an array of tables. See `docs/configuration.md`
//! for the format; `ratewarden.example.toml` is a complete example.
//!
//! The file is read whole and checked whole: every error found is
//! reported (not only the first), each with `FILE:LINE:COLUMN`, the key
//! and the offending value, and a file with any error yields no
//! configuration at all, so a reload never applies half a file.
//!
//! Why a hand walk over `toml`'s spanned tree instead of serde: serde
//! stops at the first error, and its messages know neither the key path
//! nor a value's position.
//!
//! # Layout
//! - `mod.rs`: [`ConfigFile`], the top-level keys.
//! - `reader.rs`: the walk's reading of one value (types, positions,
//!   messages).
//! - `policy.rs`: a `[[policies]]` table into a [`PolicySpec`].

mod policy;
mod reader;

use std::path::{Path, PathBuf};

use ratewarden_core::Policy;
use ratewarden_limiter::{FailureMode, KeyPart, RequestMatch};
use toml::de::DeTable;

use crate::error::{ConfigError, ConfigErrors, Location};
use crate::overrides::Overrides;
use crate::types::{KeySourceKind, TimeSource};
use crate::values;
use reader::Reader;

/// A parsed and validated configuration file.
#[derive(Debug, Clone)]
pub struct ConfigFile {
    /// Where it was read from.
    pub path: PathBuf,
    /// The settings it gives.
    pub overrides: Overrides,
    /// Its policies, in file order.
    pub policies: Vec<PolicySpec>,
}

/// One `[[policies]]` table, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicySpec {
    /// Name, algorithm, quota (with burst and `count_denied`), and mode
    /// (`shadow`).
    pub policy: Policy,
    /// Its own failure mode; `None`: the global `on_store_error`.
    pub on_store_error: Option<FailureMode>,
    /// `key`: how a request becomes its key.
    pub key: Vec<KeyPart>,
    /// `match`: which requests it applies to.
    pub matcher: Option<RequestMatch>,
    /// Where its table starts.
    pub location: Location,
}

/// The top-level keys, in documentation order.
const SETTINGS: [&str; 28] = [
    "listen",
    "grpc_listen",
    "envoy_config",
    "db",
    "store",
    "ping_limit",
    "ping_window",
    "ping_algorithm",
    "check_limit",
    "check_window",
    "ping_key",
    "trusted_proxies",
    "on_store_error",
    "time_source",
    "store_timeout_ms",
    "audit_retention",
    "audit_sample",
    "audit_max_rows",
    "max_keys",
    "wal_autocheckpoint",
    "max_body_bytes",
    "header_read_timeout",
    "idle_timeout",
    "max_connections",
    "envoy_max_descriptors",
    "envoy_limit_headers",
    "envoy_require_rules",
    "policies",
];

impl ConfigFile {
    /// Reads and checks the file at `path`.
    ///
    /// # Errors
    /// Every error found; a file that cannot be read is one error naming
    /// the path.
    pub fn load(path: &Path) -> Result<ConfigFile, ConfigErrors> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError::general(format!("cannot read {}: {e}", path.display())))?;
        ConfigFile::parse(path, &text)
    }

    /// Checks `text`, read from `path` (named in errors).
    ///
    /// # Errors
    /// Every error found, in file order.
    pub fn parse(path: &Path, text: &str) -> Result<ConfigFile, ConfigErrors> {
        let mut r = Reader::new(path, text);
        let root = match DeTable::parse(text) {
            Ok(root) => root,
            Err(e) => {
                let span = e.span().unwrap_or(0..0);
                let near = text.get(span.clone()).unwrap_or("").trim();
                let message = match near {
                    "" => e.message().trim().to_owned(),
                    near => format!("{} ('{near}')", e.message().trim()),
                };
                r.error(span.start, None, message);
                return Err(ConfigErrors(r.errors));
            }
        };
        let mut overrides = Overrides::default();
        let mut policies = Vec::new();
        for (key, value) in root.get_ref().iter() {
            let name = key.get_ref().as_ref();
            let k = Some(name);
            match name {
                "listen" => overrides.listen = r.parsed(value, k, values::parse_listen),
                "grpc_listen" => {
                    overrides.grpc_listen = r.parsed(value, k, values::parse_grpc_listen)
                }
                "envoy_config" => overrides.envoy_config = r.string(value, k).map(PathBuf::from),
                "db" => overrides.db = r.string(value, k).map(PathBuf::from),
                "store" => overrides.store = r.parsed(value, k, values::parse_store),
                "ping_limit" => overrides.ping_limit = r.number(value, k, values::check_limit),
                "ping_window" => {
                    overrides.ping_window_secs = r.number(value, k, values::check_secs)
                }
                "ping_algorithm" => {
                    overrides.ping_algorithm = r.parsed(value, k, values::parse_algorithm)
                }
                "check_limit" => overrides.check_limit = r.number(value, k, values::check_limit),
                "check_window" => {
                    overrides.check_window_secs = r.number(value, k, values::check_secs)
                }
                "ping_key" => overrides.ping_key = r.parsed(value, k, KeySourceKind::parse),
                "trusted_proxies" => {
                    overrides.trusted_proxies = r.strings(value, name).map(|items| {
                        items
                            .into_iter()
                            .filter_map(|(at, key, s)| r.check(at, &key, values::parse_net(s)))
                            .collect()
                    })
                }
                "on_store_error" => {
                    overrides.on_store_error = r.parsed(value, k, |s| s.parse::<FailureMode>())
                }
                "time_source" => overrides.time_source = r.parsed(value, k, TimeSource::parse),
                "store_timeout_ms" => {
                    overrides.store_timeout_ms = r.number(value, k, values::check_timeout_ms)
                }
                "audit_retention" => {
                    overrides.audit_retention_secs = r.number(value, k, values::check_secs)
                }
                "audit_sample" => overrides.audit_sample = r.number(value, k, Ok),
                "audit_max_rows" => {
                    overrides.audit_max_rows = r.number(value, k, values::check_audit_max_rows)
                }
                "max_keys" => overrides.max_keys = r.number(value, k, values::check_max_keys),
                "wal_autocheckpoint" => {
                    overrides.wal_autocheckpoint =
                        r.number(value, k, values::check_wal_autocheckpoint)
                }
                "max_body_bytes" => {
                    overrides.max_body_bytes = r.number(value, k, values::check_body_limit)
                }
                "header_read_timeout" => {
                    overrides.header_read_timeout_secs =
                        r.number(value, k, values::check_timeout_secs)
                }
                "idle_timeout" => {
                    overrides.idle_timeout_secs = r.number(value, k, values::check_timeout_secs)
                }
                "max_connections" => {
                    overrides.max_connections = r.number(value, k, values::check_max_connections)
                }
                "envoy_max_descriptors" => {
                    overrides.envoy_max_descriptors =
                        r.number(value, k, values::check_max_descriptors)
                }
                "envoy_limit_headers" => {
                    overrides.envoy_limit_headers = r.parsed(value, k, values::parse_limit_headers)
                }
                "envoy_require_rules" => overrides.envoy_require_rules = r.boolean(value, k),
                "policies" => policies = r.policies(value),
                _ => r.unknown(key, None, &SETTINGS),
            }
        }
        r.no_duplicate_names();
        // In file order (a table's unknown keys are found before its values).
        r.errors
            .sort_by_key(|e| e.location.as_ref().map(|l| (l.line, l.column)));
        if r.errors.is_empty() {
            Ok(ConfigFile {
                path: path.to_path_buf(),
                overrides,
                policies,
            })
        } else {
            Err(ConfigErrors(r.errors))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::SETTINGS;
    use crate::defaults::documented;

    #[test]
    fn the_top_level_keys_are_the_documented_settings() {
        let keys: Vec<&str> = documented().iter().map(|d| d.key).collect();
        assert_eq!(SETTINGS[..SETTINGS.len() - 1], keys[..]);
        assert_eq!(SETTINGS.last(), Some(&"policies"));
    }
}
