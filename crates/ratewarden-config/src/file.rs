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

use std::path::{Path, PathBuf};
use std::time::Duration;

use ratewarden_core::{Algorithm, Policy, Quota};
use ratewarden_limiter::{FailureMode, KeyPart, PathPattern, RequestMatch};
use toml::Spanned;
use toml::de::{DeTable, DeValue};

use crate::error::{ConfigError, ConfigErrors, Location};
use crate::settings::{KeySourceKind, Overrides, SEED_POLICIES, TimeSource};
use crate::values;

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

/// The keys of a `[[policies]]` table.
const POLICY_KEYS: [&str; 10] = [
    "name",
    "algorithm",
    "limit",
    "window",
    "burst",
    "count_denied",
    "shadow",
    "on_store_error",
    "key",
    "match",
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
        let mut r = Reader {
            path,
            text,
            errors: Vec::new(),
            names: Vec::new(),
        };
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
                        r.number(value, k, crate::envoy::options::check_max_descriptors)
                }
                "envoy_limit_headers" => {
                    overrides.envoy_limit_headers =
                        r.parsed(value, k, crate::envoy::options::parse_limit_headers)
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

/// Walks the spanned tree, collecting errors.
struct Reader<'a> {
    path: &'a Path,
    text: &'a str,
    errors: Vec<ConfigError>,
    /// Every policy's name with its position and index, valid policy or
    /// not, to find duplicates.
    names: Vec<(String, usize, usize)>,
}

/// How a value of the wrong type reads in a message.
fn kind(value: &DeValue<'_>) -> &'static str {
    match value {
        DeValue::String(_) => "a string",
        DeValue::Integer(_) => "an integer",
        DeValue::Float(_) => "a float",
        DeValue::Boolean(_) => "a boolean",
        DeValue::Datetime(_) => "a date-time",
        DeValue::Array(_) => "an array",
        DeValue::Table(_) => "a table",
    }
}

impl<'a> Reader<'a> {
    fn error(&mut self, at: usize, key: Option<&str>, message: String) {
        self.errors.push(ConfigError {
            location: Some(Location::of(self.path, self.text, at)),
            key: key.map(str::to_owned),
            message,
        });
    }

    /// The value as written in the file, shortened for messages.
    fn source(&self, value: &Spanned<DeValue<'_>>) -> String {
        let text = self.text.get(value.span()).unwrap_or("").trim();
        match text.char_indices().nth(60) {
            Some((end, _)) => format!("{}…", &text[..end]),
            None => text.to_owned(),
        }
    }

    fn wrong_type(&mut self, value: &Spanned<DeValue<'_>>, key: Option<&str>, expected: &str) {
        let message = format!(
            "expected {expected}, found {} ({})",
            kind(value.get_ref()),
            self.source(value)
        );
        self.error(value.span().start, key, message);
    }

    fn unknown(
        &mut self,
        key: &Spanned<std::borrow::Cow<'_, str>>,
        table: Option<&str>,
        known: &[&str],
    ) {
        let name = key.get_ref().as_ref();
        let full = table.map_or_else(|| name.to_owned(), |t| format!("{t}.{name}"));
        let message = format!("unknown key '{name}'; expected one of {}", known.join(", "));
        self.error(key.span().start, Some(&full), message);
    }

    /// `Some(v)` when `result` is `Ok`, else records its message at `at`.
    fn check<T>(&mut self, at: usize, key: &str, result: Result<T, String>) -> Option<T> {
        result
            .map_err(|message| self.error(at, Some(key), message))
            .ok()
    }

    fn string<'v>(
        &mut self,
        value: &'v Spanned<DeValue<'_>>,
        key: Option<&str>,
    ) -> Option<&'v str> {
        match value.get_ref() {
            DeValue::String(s) => Some(s.as_ref()),
            _ => {
                self.wrong_type(value, key, "a string");
                None
            }
        }
    }

    /// A string turned into `T` by `parse`.
    fn parsed<T>(
        &mut self,
        value: &Spanned<DeValue<'_>>,
        key: Option<&str>,
        parse: impl FnOnce(&str) -> Result<T, String>,
    ) -> Option<T> {
        let s = self.string(value, key)?;
        let at = value.span().start;
        self.check(at, key.unwrap_or(""), parse(s))
    }

    fn boolean(&mut self, value: &Spanned<DeValue<'_>>, key: Option<&str>) -> Option<bool> {
        match value.get_ref() {
            DeValue::Boolean(b) => Some(*b),
            _ => {
                self.wrong_type(value, key, "true or false");
                None
            }
        }
    }

    /// A whole number of 0 or more, then range-checked by `check`.
    fn number<T>(
        &mut self,
        value: &Spanned<DeValue<'_>>,
        key: Option<&str>,
        check: impl FnOnce(u64) -> Result<T, String>,
    ) -> Option<T> {
        let DeValue::Integer(i) = value.get_ref() else {
            self.wrong_type(value, key, "a whole number");
            return None;
        };
        let at = value.span().start;
        let key_name = key.unwrap_or("");
        match i128::from_str_radix(i.as_str(), i.radix()) {
            Ok(n) if n < 0 => self.check(at, key_name, Err(format!("{n} is negative"))),
            Ok(n) => match u64::try_from(n) {
                Ok(n) => self.check(at, key_name, check(n)),
                Err(_) => self.check(at, key_name, Err(format!("{n} is too large"))),
            },
            Err(_) => self.check(
                at,
                key_name,
                Err(format!("'{}' is too large", self.source(value))),
            ),
        }
    }

    /// An array of strings, each with its position and key path.
    fn strings<'v>(
        &mut self,
        value: &'v Spanned<DeValue<'_>>,
        key: &str,
    ) -> Option<Vec<(usize, String, &'v str)>> {
        let DeValue::Array(items) = value.get_ref() else {
            self.wrong_type(value, Some(key), "an array of strings");
            return None;
        };
        let mut out = Vec::new();
        let mut ok = true;
        for (i, item) in items.iter().enumerate() {
            let path = format!("{key}[{i}]");
            match self.string(item, Some(&path)) {
                Some(s) => out.push((item.span().start, path, s)),
                None => ok = false,
            }
        }
        ok.then_some(out)
    }

    fn policies(&mut self, value: &Spanned<DeValue<'_>>) -> Vec<PolicySpec> {
        let DeValue::Array(items) = value.get_ref() else {
            self.wrong_type(value, Some("policies"), "an array of tables ([[policies]])");
            return Vec::new();
        };
        items
            .iter()
            .enumerate()
            .filter_map(|(i, item)| match item.get_ref() {
                DeValue::Table(table) => self.policy(i, item.span().start, table),
                _ => {
                    self.wrong_type(item, Some(&format!("policies[{i}]")), "a table");
                    None
                }
            })
            .collect()
    }

    /// One `[[policies]]` table: every key checked, every error recorded.
    fn policy(&mut self, index: usize, at: usize, table: &DeTable<'_>) -> Option<PolicySpec> {
        let prefix = format!("policies[{index}]");
        let path = |k: &str| format!("{prefix}.{k}");
        let field = |name: &str| {
            table
                .iter()
                .find(|(k, _)| k.get_ref().as_ref() == name)
                .map(|(_, v)| v)
        };
        for (key, _) in table.iter() {
            if !POLICY_KEYS.contains(&key.get_ref().as_ref()) {
                self.unknown(key, Some(&prefix), &POLICY_KEYS);
            }
        }
        let errors_before = self.errors.len();
        let required = |r: &mut Reader<'_>, name: &str| {
            let found = field(name);
            if found.is_none() {
                r.error(
                    at,
                    Some(&path(name)),
                    format!("the key '{name}' is required"),
                );
            }
            found
        };
        let name = required(self, "name").and_then(|v| {
            let p = path("name");
            let s = self.string(v, Some(&p))?;
            let at = v.span().start;
            self.names.push((s.to_owned(), at, index));
            let s = self.check(at, &p, values::check_policy_name(s).map(str::to_owned))?;
            if SEED_POLICIES.contains(&s.as_str()) {
                let settings = if s == "ping" {
                    "ping_limit, ping_window and ping_algorithm"
                } else {
                    "check_limit and check_window"
                };
                let message = format!("'{s}' is the seed route's policy; set {settings} instead");
                return self.check::<String>(at, &p, Err(message));
            }
            Some(s)
        });
        let algorithm = required(self, "algorithm")
            .and_then(|v| self.parsed(v, Some(&path("algorithm")), values::parse_algorithm));
        let limit = required(self, "limit")
            .and_then(|v| self.number(v, Some(&path("limit")), values::check_limit));
        let window = required(self, "window")
            .and_then(|v| self.parsed(v, Some(&path("window")), values::parse_duration));
        let burst = field("burst").and_then(|v| {
            let b = self.number(v, Some(&path("burst")), values::check_burst)?;
            if algorithm.is_some_and(|a| a != Algorithm::Gcra) {
                let message = format!(
                    "burst applies only to the gcra algorithm, not {}",
                    algorithm?
                );
                return self.check(v.span().start, &path("burst"), Err(message));
            }
            Some(b)
        });
        let count_denied = field("count_denied").and_then(|v| {
            let c = self.boolean(v, Some(&path("count_denied")))?;
            if algorithm.is_some_and(|a| a != Algorithm::FixedWindow) {
                let message = format!(
                    "count_denied applies only to the fixed_window algorithm, not {}",
                    algorithm?
                );
                return self.check(v.span().start, &path("count_denied"), Err(message));
            }
            Some(c)
        });
        let shadow = field("shadow").and_then(|v| self.boolean(v, Some(&path("shadow"))));
        let on_store_error = field("on_store_error").and_then(|v| {
            self.parsed(v, Some(&path("on_store_error")), |s| {
                s.parse::<FailureMode>()
            })
        });
        let key = field("key").map(|v| self.key_parts(v, &path("key")));
        let matcher = field("match").and_then(|v| self.matcher(v, &path("match")));
        if let (Some(m), None) = (field("match"), &key) {
            let message = "a policy with 'match' needs a 'key' to count requests by".to_owned();
            self.error(m.span().start, Some(&path("match")), message);
        }
        if self.errors.len() > errors_before {
            return None;
        }
        let window: Duration = window?;
        let quota = match Quota::new(limit?, window) {
            Ok(q) => q,
            Err(e) => {
                self.error(at, Some(&prefix), e.to_string());
                return None;
            }
        };
        let quota = match burst {
            Some(b) => quota.with_burst(b),
            None => quota,
        };
        let quota = if count_denied == Some(true) {
            quota.counting_denied()
        } else {
            quota
        };
        let policy = Policy::new(name?, algorithm?, quota);
        let policy = if shadow == Some(true) {
            policy.in_shadow()
        } else {
            policy
        };
        Some(PolicySpec {
            policy,
            on_store_error,
            key: key.unwrap_or_default(),
            matcher,
            location: Location::of(self.path, self.text, at),
        })
    }

    fn key_parts(&mut self, value: &Spanned<DeValue<'_>>, key: &str) -> Vec<KeyPart> {
        let Some(items) = self.strings(value, key) else {
            return Vec::new();
        };
        if items.is_empty() {
            self.error(
                value.span().start,
                Some(key),
                "a key needs at least one part".into(),
            );
        }
        items
            .into_iter()
            .filter_map(|(at, path, s)| self.check(at, &path, s.parse::<KeyPart>()))
            .collect()
    }

    fn matcher(&mut self, value: &Spanned<DeValue<'_>>, key: &str) -> Option<RequestMatch> {
        let DeValue::Table(table) = value.get_ref() else {
            self.wrong_type(
                value,
                Some(key),
                "a table such as { methods = [\"GET\"], path = \"/api/*\" }",
            );
            return None;
        };
        let mut matcher = RequestMatch::default();
        for (k, v) in table.iter() {
            match k.get_ref().as_ref() {
                "methods" => {
                    let path = format!("{key}.methods");
                    let methods = self.strings(v, &path)?;
                    if methods.is_empty() {
                        let message = "an empty list matches no request; leave 'methods' out to match every method".to_owned();
                        self.error(v.span().start, Some(&path), message);
                    }
                    let checked = methods.into_iter().filter_map(|(at, p, m)| {
                        let checked = ratewarden_limiter::check_method(m).map(str::to_owned);
                        self.check(at, &p, checked)
                    });
                    matcher.methods = Some(checked.collect());
                }
                "path" => {
                    matcher.path = self.parsed(v, Some(&format!("{key}.path")), PathPattern::new);
                }
                _ => self.unknown(k, Some(key), &["methods", "path"]),
            }
        }
        Some(matcher)
    }

    fn no_duplicate_names(&mut self) {
        let names = std::mem::take(&mut self.names);
        for (i, (name, at, index)) in names.iter().enumerate() {
            if let Some((_, first, _)) = names[..i].iter().find(|(n, _, _)| n == name) {
                let first_line = Location::of(self.path, self.text, *first).line;
                let message =
                    format!("the policy name '{name}' is used twice (first at line {first_line})");
                self.error(*at, Some(&format!("policies[{index}].name")), message);
            }
        }
    }
}
