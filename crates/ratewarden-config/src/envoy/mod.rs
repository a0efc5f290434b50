//! envoyproxy/ratelimit's configuration format, loaded unchanged
//! (`--envoy-config FILE|DIR`): each YAML file one `domain` with nested
//! `descriptors` (`key`, `value` with `*` wildcards, `rate_limit` with
//! `unit`, `requests_per_unit`, `name`, `unlimited`, `replaces`;
//! `shadow_mode`, `share_threshold`, `detailed_metric`,
//! `value_to_metric`), plus three extension keys under `rate_limit`:
//! `algorithm`, `burst` (GCRA) and `window` (a duration instead of
//! `unit`). What each means is in docs/envoy.md.
//!
//! Every limit becomes a policy of the decision layer named by its path
//! (`domain.key_value.key`), so counters, stores, reloads and metrics work
//! as for the policy file. Keys of the format that ratewarden does not
//! implement (`quota_mode`, `metadata`) are refused with the file, line
//! and name, never ignored; so are unknown and misplaced keys.
//!
//! ```
//! use std::path::Path;
//! use ratewarden_config::envoy::EnvoyConfig;
//! use ratewarden_limiter::FailureMode;
//!
//! let yaml = "domain: edge\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 10}\n";
//! let config = EnvoyConfig::parse(Path::new("edge.yaml"), yaml, FailureMode::Open).unwrap();
//! let found = config.domain("edge").unwrap().find(&[("user", "alice")]).unwrap();
//! assert_eq!(found.rule.path, "edge.user");
//!
//! let bad = "domain: edge\ndescriptors:\n  - key: user\n    quota_mode: true\n";
//! let err = EnvoyConfig::parse(Path::new("edge.yaml"), bad, FailureMode::Open).unwrap_err();
//! assert!(err.to_string().starts_with("edge.yaml:4:5: descriptors[0].quota_mode: quota_mode is not implemented"), "{err}");
//! ```

mod tree;
mod yaml;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use ratewarden_core::{Algorithm, Policy, Quota};
use ratewarden_limiter::{FailureMode, PolicyDef};
use sha2::{Digest, Sha256};

use tree::Node;
pub use tree::{Domain, Found, Limit, Rule, Unit};
use yaml::{RawDescriptor, RawFile, RawRateLimit};

use crate::error::{ConfigError, ConfigErrors, Location};
use crate::values::{check_burst, parse_algorithm, parse_duration};

/// The rules of every domain, read from one file or a directory.
#[derive(Debug, Clone, Default)]
pub struct EnvoyConfig {
    domains: HashMap<String, Domain>,
    /// The files read, in the order read.
    pub files: Vec<PathBuf>,
    /// Every limited rule's policy, in file order.
    policies: Vec<Arc<PolicyDef>>,
    /// The policy names given so far (and those reserved by other
    /// sources), so that every limit's name is unique.
    names: HashSet<String>,
}

impl EnvoyConfig {
    /// Loads `path`: one YAML file, or every `*.yaml` and `*.yml` file of
    /// a directory (not its subdirectories; names starting with `.` are
    /// skipped, as Kubernetes' `..data`), in name order. Limits fail open
    /// or closed as `failure` says.
    ///
    /// # Errors
    /// Every error of every file, each with its `FILE:LINE:COLUMN`; a file
    /// that cannot be read; a domain defined twice.
    pub fn load(path: &Path, failure: FailureMode) -> Result<EnvoyConfig, ConfigErrors> {
        EnvoyConfig::load_beside(path, failure, [])
    }

    /// [`EnvoyConfig::load`] beside other policies, whose names `taken`
    /// are: a limit whose path is one of them (or another limit's) gets a
    /// policy name of its own, `PATH~XXXXXXXX` (8 hex digits of the
    /// SHA-256 of its domain and descriptors), so that limits never share
    /// counters. The reference server accepts such files (its paths are
    /// only statistics names: `col` → `b.c` and `col.b` → `c` are both
    /// `col.b.c`).
    ///
    /// # Errors
    /// As [`EnvoyConfig::load`].
    pub fn load_beside<'t>(
        path: &Path,
        failure: FailureMode,
        taken: impl IntoIterator<Item = &'t str>,
    ) -> Result<EnvoyConfig, ConfigErrors> {
        let files = files_of(path)?;
        let mut config = EnvoyConfig {
            names: taken.into_iter().map(str::to_owned).collect(),
            ..EnvoyConfig::default()
        };
        let mut errors = Vec::new();
        let mut defined: HashMap<String, Location> = HashMap::new();
        for file in files {
            let text = match read_text(&file) {
                Ok(text) => text,
                Err(e) => {
                    errors.push(e);
                    continue;
                }
            };
            match config.add(&file, &text, failure, &mut defined) {
                Ok(()) => {}
                Err(mut e) => errors.append(&mut e),
            }
            config.files.push(file);
        }
        if errors.is_empty() {
            Ok(config)
        } else {
            Err(ConfigErrors(errors))
        }
    }

    /// One file's text, as [`EnvoyConfig::load`] reads it.
    ///
    /// # Errors
    /// Every error found, with `file`'s name and positions.
    pub fn parse(
        file: &Path,
        text: &str,
        failure: FailureMode,
    ) -> Result<EnvoyConfig, ConfigErrors> {
        let mut config = EnvoyConfig::default();
        config
            .add(file, text, failure, &mut HashMap::new())
            .map_err(ConfigErrors)?;
        config.files.push(file.to_path_buf());
        Ok(config)
    }

    fn add(
        &mut self,
        file: &Path,
        text: &str,
        failure: FailureMode,
        defined: &mut HashMap<String, Location>,
    ) -> Result<(), Vec<ConfigError>> {
        let raw = yaml::read(file, text)?;
        let domain_at = raw.domain_at.clone();
        let mut builder = Builder {
            failure,
            errors: Vec::new(),
            policies: Vec::new(),
            names: std::mem::take(&mut self.names),
        };
        let domain = builder.domain(raw);
        self.names = builder.names;
        let mut errors = builder.errors;
        if let Some(domain) = &domain
            && let Some(first) = defined.get(&domain.name)
        {
            errors.push(ConfigError {
                location: Some(domain_at.clone()),
                key: Some("domain".into()),
                message: format!(
                    "the domain '{}' is already defined at {first}; a domain lives in one file",
                    domain.name
                ),
            });
        }
        if !errors.is_empty() {
            errors.sort_by_key(|e| e.location.as_ref().map(|l| (l.line, l.column)));
            return Err(errors);
        }
        if let Some(domain) = domain {
            defined.insert(domain.name.clone(), domain_at);
            self.policies.append(&mut builder.policies);
            self.domains.insert(domain.name.clone(), domain);
        }
        Ok(())
    }

    /// The domain named `name`.
    pub fn domain(&self, name: &str) -> Option<&Domain> {
        self.domains.get(name)
    }

    /// The number of domains.
    pub fn domain_count(&self) -> usize {
        self.domains.len()
    }

    /// Every limited rule's policy, in file order.
    pub fn policies(&self) -> impl Iterator<Item = &Arc<PolicyDef>> {
        self.policies.iter()
    }

    /// One line per rule, as `check-config` prints them, sorted by path:
    /// `rl.foo.bar_bkthomps (bkthomps): fixed_window, 1 per 60s, …`.
    pub fn describe(&self) -> Vec<String> {
        let mut lines = Vec::new();
        for domain in self.domains.values() {
            collect_rules(&domain.root, &mut |rule: &Rule| {
                let mut line = match &rule.limit {
                    Limit::Unlimited => format!("{}: unlimited", rule.path),
                    // `path: algorithm, …`
                    Limit::Limited { def, .. } => crate::describe(def),
                };
                if !rule.name.is_empty() {
                    line.insert_str(rule.path.len(), &format!(" ({})", rule.name));
                }
                if !rule.replaces.is_empty() {
                    line.push_str(&format!(", replaces {}", rule.replaces.join(", ")));
                }
                lines.push(line);
            });
        }
        lines.sort();
        lines
    }
}

fn collect_rules(node: &Node, f: &mut impl FnMut(&Rule)) {
    if let Some(rule) = &node.rule {
        f(rule);
    }
    for child in node.children.values() {
        collect_rules(child, f);
    }
}

/// The files `path` names: itself, or a directory's YAML files by name.
/// The text of `file`; a file that is not UTF-8 is refused at the line
/// and column of its first bad byte (regression: with no position).
fn read_text(file: &Path) -> Result<String, ConfigError> {
    let bytes = std::fs::read(file).map_err(|e| {
        ConfigError::general(format!(
            "cannot read the Envoy rate limit configuration {}: {e}",
            file.display()
        ))
    })?;
    String::from_utf8(bytes).map_err(|e| {
        let good = &e.as_bytes()[..e.utf8_error().valid_up_to()];
        let line = good.iter().filter(|b| **b == b'\n').count() + 1;
        let line_start = good.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
        let column = String::from_utf8_lossy(&good[line_start..]).chars().count() + 1;
        ConfigError {
            location: Some(Location {
                file: file.to_path_buf(),
                line,
                column,
            }),
            key: None,
            message: "not UTF-8 text (YAML files are UTF-8)".into(),
        }
    })
}

fn files_of(path: &Path) -> Result<Vec<PathBuf>, ConfigErrors> {
    let cannot = |e: std::io::Error| {
        ConfigErrors::from(ConfigError::general(format!(
            "cannot read the Envoy rate limit configuration {}: {e}",
            path.display()
        )))
    };
    if !path.is_dir() {
        // A missing file is reported by the read, with its name.
        std::fs::metadata(path).map_err(cannot)?;
        return Ok(vec![path.to_path_buf()]);
    }
    let mut files = Vec::new();
    for entry in std::fs::read_dir(path).map_err(cannot)? {
        let entry = entry.map_err(cannot)?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let yaml = name.ends_with(".yaml") || name.ends_with(".yml");
        // A dangling link or a link loop is listed too, so that reading
        // it reports it (regression: such files were skipped silently).
        if yaml && !name.starts_with('.') && !entry.path().is_dir() {
            files.push(entry.path());
        }
    }
    files.sort();
    Ok(files)
}

/// Builds one file's domain from its raw model, collecting errors.
struct Builder {
    failure: FailureMode,
    errors: Vec<ConfigError>,
    policies: Vec<Arc<PolicyDef>>,
    names: HashSet<String>,
}

impl Builder {
    fn error(&mut self, at: &Location, key: &str, message: impl Into<String>) {
        self.errors.push(ConfigError {
            location: Some(at.clone()),
            key: Some(key.to_owned()),
            message: message.into(),
        });
    }

    fn domain(&mut self, raw: RawFile) -> Option<Domain> {
        if raw.domain.is_empty() {
            self.error(&raw.domain_at, "domain", "the domain is missing or empty");
            return None;
        }
        let mut root = Node::default();
        let prefix = format!("{}.", raw.domain);
        let identity = format!("{}:{}", raw.domain.len(), raw.domain);
        self.descriptors(&mut root, &prefix, &identity, &raw.descriptors, false);
        Some(Domain {
            name: raw.domain,
            root,
        })
    }

    /// `identity`: the domain and the composites above, each after its
    /// length, which no other place in the rules has.
    fn descriptors(
        &mut self,
        node: &mut Node,
        prefix: &str,
        identity: &str,
        list: &[RawDescriptor],
        vtm_above: bool,
    ) {
        for d in list {
            if d.key.is_empty() {
                self.error(
                    &d.at,
                    &format!("{}.key", d.path),
                    "a descriptor needs a non-empty key",
                );
                continue;
            }
            let composite = if d.value.is_empty() {
                d.key.clone()
            } else {
                format!("{}_{}", d.key, d.value)
            };
            let path = format!("{prefix}{composite}");
            let identity = format!("{identity}{}:{composite}", composite.len());
            if node.children.contains_key(&composite) {
                self.error(
                    &d.at,
                    &d.path,
                    format!("the descriptor '{path}' is defined twice at this level"),
                );
                continue;
            }
            let vtm = vtm_above || d.value_to_metric;
            if d.share_threshold && !composite.contains('*') {
                self.error(
                    &d.at,
                    &format!("{}.share_threshold", d.path),
                    format!(
                        "share_threshold needs a wildcard value (with '*'); '{composite}' has none"
                    ),
                );
            }
            let rule = d
                .rate_limit
                .as_ref()
                .and_then(|r| self.rule(r, d, &path, &identity, vtm));
            let mut child = Node {
                rule: rule.map(Arc::new),
                value_to_metric: d.value_to_metric,
                share_threshold: d.share_threshold,
                ..Node::default()
            };
            self.descriptors(
                &mut child,
                &format!("{path}."),
                &identity,
                &d.descriptors,
                vtm,
            );
            if composite.contains('*') {
                let parts = composite.split('*').map(str::to_owned).collect();
                node.wildcards.push((composite.clone(), parts));
            }
            node.children.insert(composite, child);
        }
    }

    /// A policy name for the limit at `path`: the path, or when that is
    /// taken, the path and a digest of `identity`.
    fn unique_name(&mut self, path: &str, identity: &str) -> String {
        let mut name = path.to_owned();
        if self.names.contains(&name) {
            let digest = Sha256::digest(identity.as_bytes());
            name = format!(
                "{path}~{:02x}{:02x}{:02x}{:02x}",
                digest[0], digest[1], digest[2], digest[3]
            );
        }
        self.names.insert(name.clone());
        name
    }

    fn rule(
        &mut self,
        r: &RawRateLimit,
        d: &RawDescriptor,
        path: &str,
        identity: &str,
        vtm: bool,
    ) -> Option<Rule> {
        let at = r.at.clone().unwrap_or_else(|| d.at.clone());
        let key = format!("{}.rate_limit", d.path);
        let errors_before = self.errors.len();
        for (name, name_at) in &r.replaces {
            if name.is_empty() {
                self.error(
                    name_at,
                    &format!("{key}.replaces"),
                    "a replaces entry needs a name",
                );
            } else if *name == r.name {
                self.error(
                    name_at,
                    &format!("{key}.replaces"),
                    format!("a limit cannot replace itself ('{name}' is its own name)"),
                );
            }
        }
        let unit = match &r.unit {
            Some((text, unit_at)) if !text.is_empty() => match Unit::parse(text) {
                Some(u) => Some(u),
                None => {
                    self.error(
                        unit_at,
                        &format!("{key}.unit"),
                        format!("'{text}' is not a unit; expected second, minute, hour, day, week, month or year"),
                    );
                    None
                }
            },
            _ => None,
        };
        let replaces: Vec<String> = r.replaces.iter().map(|(n, _)| n.clone()).collect();
        if r.unlimited {
            if unit.is_some() || r.window.is_some() {
                self.error(&at, &key, "an unlimited limit takes no unit or window");
            }
            if r.algorithm.is_some() || r.burst.is_some() {
                self.error(&at, &key, "an unlimited limit takes no algorithm or burst");
            }
            return (self.errors.len() == errors_before).then(|| Rule {
                path: path.to_owned(),
                name: r.name.clone(),
                limit: Limit::Unlimited,
                replaces,
                detailed_metric: d.detailed_metric,
                value_to_metric_on_path: vtm,
            });
        }
        // An empty unit (`unit:`, `unit: ""`, `unit: ~`) is no unit: the
        // reference refuses it unless the limit is unlimited (regression:
        // it silently dropped the limit).
        let unit_given = r.unit.as_ref().filter(|(text, _)| !text.is_empty());
        let window = match (&r.window, unit, unit_given) {
            (Some((_, w_at)), _, Some(_)) => {
                self.error(
                    w_at,
                    &format!("{key}.window"),
                    "give unit or window, not both",
                );
                None
            }
            (Some((text, w_at)), _, None) => match parse_duration(text) {
                Ok(w) => Some(w),
                Err(e) => {
                    self.error(w_at, &format!("{key}.window"), e);
                    None
                }
            },
            (None, Some(u), _) => u.seconds().map(Duration::from_secs),
            (None, None, Some(_)) => None, // reported above
            (None, None, None) if r.unit.is_some() => {
                let unit_at = r.unit.as_ref().map_or(&at, |(_, a)| a);
                self.error(
                    unit_at,
                    &format!("{key}.unit"),
                    "the unit is empty; expected second, minute, hour, day, week, month or year",
                );
                None
            }
            (None, None, None) => {
                self.error(
                    &at,
                    &key,
                    "a limit needs a unit (second, minute, hour, day, week, month, year), a window (extension, e.g. 30s) or unlimited: true",
                );
                None
            }
        };
        let algorithm = match &r.algorithm {
            None => Some(Algorithm::FixedWindow),
            Some((text, a_at)) => match parse_algorithm(text) {
                Ok(a) => Some(a),
                Err(e) => {
                    self.error(a_at, &format!("{key}.algorithm"), e);
                    None
                }
            },
        };
        if let (Some((_, b_at)), Some(a)) = (&r.burst, algorithm)
            && a != Algorithm::Gcra
        {
            self.error(
                b_at,
                &format!("{key}.burst"),
                format!("burst applies to algorithm gcra only, not {a}"),
            );
        }
        let (Some(window), Some(algorithm)) = (window, algorithm) else {
            return None;
        };
        let quota = match Quota::new(u64::from(r.requests_per_unit), window) {
            Ok(q) => q,
            Err(e) => {
                self.error(&at, &key, e.to_string());
                return None;
            }
        };
        // The policy file's rule for a burst (regression: 0 and values
        // past the largest limit were taken as given).
        let quota = match &r.burst {
            Some((b, b_at)) => match check_burst(*b) {
                Ok(b) => quota.with_burst(b),
                Err(e) => {
                    self.error(b_at, &format!("{key}.burst"), e);
                    return None;
                }
            },
            None => quota,
        };
        if self.errors.len() != errors_before {
            return None;
        }
        let mut policy = Policy::new(self.unique_name(path, identity), algorithm, quota);
        if d.shadow_mode {
            policy = policy.in_shadow();
        }
        let def = Arc::new(PolicyDef::new(policy, self.failure));
        self.policies.push(Arc::clone(&def));
        let unit = unit.unwrap_or_else(|| {
            if window.subsec_nanos() == 0 {
                Unit::of_seconds(window.as_secs())
            } else {
                Unit::Unknown
            }
        });
        Some(Rule {
            path: path.to_owned(),
            name: r.name.clone(),
            limit: Limit::Limited {
                def,
                requests_per_unit: r.requests_per_unit,
                unit,
            },
            replaces,
            detailed_metric: d.detailed_metric,
            value_to_metric_on_path: vtm,
        })
    }
}
