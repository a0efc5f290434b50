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
//! and name, never ignored; so are unknown and misplaced keys. A file
//! with errors is refused alone: the other files of a directory load
//! ([`EnvoyConfig::refused`]), and on a reload a refused file keeps the
//! rules it last loaded with.
//!
//! # Layout
//! - `yaml.rs`: one file read into its raw model, every value with its
//!   position; `build.rs`: the raw model built into a domain's rules;
//!   `tree.rs`: the rules and the reference's lookup; `files.rs`: which
//!   files a path names.
//! - `environment/`: envoyproxy/ratelimit's environment variables
//!   (`RUNTIME_ROOT`, `REDIS_URL`, …) as settings.
//! - `options.rs`: the Envoy service's settings beside its rules (the
//!   types, parsers and defaults of every setting live below this module:
//!   `types.rs`, [`crate::values`], [`crate::defaults`]).
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

mod build;
pub mod environment;
mod files;
pub mod options;
mod tree;
mod yaml;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use ratewarden_limiter::{FailureMode, PolicyDef};

use build::Builder;
pub use files::Skipped;
use tree::Node;
pub use tree::{Domain, Found, Limit, Rule, Unit};

use crate::error::{ConfigError, ConfigErrors, Location};
use crate::policy::describe;

/// The rules of every domain, read from one file or a directory.
#[derive(Debug, Clone, Default)]
pub struct EnvoyConfig {
    domains: HashMap<String, Domain>,
    /// The files read, in the order read (refused ones included).
    pub files: Vec<PathBuf>,
    /// Every limited rule's policy, in file order.
    policies: Vec<Arc<PolicyDef>>,
    /// The policy names given so far (and those reserved by other
    /// sources), so that every limit's name is unique.
    names: HashSet<String>,
    /// The files not loaded, each with its errors.
    refused: Vec<RefusedFile>,
    /// The entries of the directory that were not read.
    skipped: Vec<Skipped>,
    /// The text each loaded file's rules were built from, so that a
    /// reload can keep them when the file turns out broken.
    texts: HashMap<PathBuf, Arc<str>>,
}

/// A rules file that was not loaded, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefusedFile {
    /// The file.
    pub file: PathBuf,
    /// Every error found in it, each with its `FILE:LINE:COLUMN`.
    pub errors: ConfigErrors,
    /// On a reload: the rules it held at the previous load still serve
    /// (a file that never loaded has none to keep).
    pub kept: bool,
}

impl EnvoyConfig {
    /// Loads `path`: one YAML file, or every `*.yaml` and `*.yml` file of
    /// a directory (not its subdirectories; names starting with `.` are
    /// skipped, as Kubernetes' `..data`), in name order. Limits fail open
    /// or closed as `failure` says. A file with errors is refused alone
    /// ([`EnvoyConfig::refused`]): the others load.
    ///
    /// # Errors
    /// A path that cannot be read; every error of every file when no
    /// file loads and one was refused (a file given alone that has errors
    /// among them), so that such rules never start from nothing.
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
        EnvoyConfig::load_after(path, failure, taken, None)
    }

    /// [`EnvoyConfig::load_beside`] for a reload after `last`: a file
    /// that is refused now but loaded then keeps the rules it had
    /// (built again from the text it had, so its limits keep their names
    /// and counters), marked [`RefusedFile::kept`]. A typo saved in one
    /// file never removes its domain's limits.
    ///
    /// # Errors
    /// As [`EnvoyConfig::load`], counting kept files as loaded.
    pub fn load_after<'t>(
        path: &Path,
        failure: FailureMode,
        taken: impl IntoIterator<Item = &'t str>,
        last: Option<&EnvoyConfig>,
    ) -> Result<EnvoyConfig, ConfigErrors> {
        let (files, skipped) = files::files_of(path)?;
        let mut config = EnvoyConfig {
            names: taken.into_iter().map(str::to_owned).collect(),
            skipped,
            ..EnvoyConfig::default()
        };
        let mut defined: HashMap<String, Location> = HashMap::new();
        for file in files {
            let added = files::read_text(&file)
                .map_err(|e| vec![e])
                .and_then(|text| {
                    let text: Arc<str> = text.into();
                    config.add(&file, &text, failure, &mut defined)
                });
            if let Err(mut errors) = added {
                errors.sort_by_key(|e| e.location.as_ref().map(|l| (l.line, l.column)));
                let last_text = last.and_then(|l| l.texts.get(&file)).cloned();
                // The last good text loads again unless the other files
                // now clash with it (a domain moved to another file).
                let kept = last_text
                    .is_some_and(|text| config.add(&file, &text, failure, &mut defined).is_ok());
                config.refused.push(RefusedFile {
                    file: file.clone(),
                    errors: ConfigErrors(errors),
                    kept,
                });
            }
            config.files.push(file);
        }
        let loaded = config.files.len() - config.refused.iter().filter(|r| !r.kept).count();
        if loaded == 0 && !config.refused.is_empty() {
            let errors = config
                .refused
                .into_iter()
                .flat_map(|r| r.errors.0)
                .collect();
            return Err(ConfigErrors(errors));
        }
        Ok(config)
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
            .add(file, &Arc::from(text), failure, &mut HashMap::new())
            .map_err(ConfigErrors)?;
        config.files.push(file.to_path_buf());
        Ok(config)
    }

    /// Adds the domain of `file`, whose text is `text`; nothing when it
    /// has an error.
    fn add(
        &mut self,
        file: &Path,
        text: &Arc<str>,
        failure: FailureMode,
        defined: &mut HashMap<String, Location>,
    ) -> Result<(), Vec<ConfigError>> {
        let raw = yaml::read(file, text)?;
        let domain_at = raw.domain_at.clone();
        let mut builder = Builder {
            failure,
            errors: Vec::new(),
            policies: Vec::new(),
            names: self.names.clone(),
        };
        let domain = builder.domain(raw);
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
        // Only a file that loads claims names: a refused one must not
        // push another file's limits to digest names.
        self.names = builder.names;
        if let Some(domain) = domain {
            defined.insert(domain.name.clone(), domain_at);
            self.policies.append(&mut builder.policies);
            self.domains.insert(domain.name.clone(), domain);
        }
        self.texts.insert(file.to_path_buf(), Arc::clone(text));
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

    /// The files that were not loaded, in name order, each with its
    /// errors.
    pub fn refused(&self) -> &[RefusedFile] {
        &self.refused
    }

    /// The entries of the rules directory that were not read (other
    /// than names starting with `.`).
    pub fn skipped(&self) -> &[Skipped] {
        &self.skipped
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
                    Limit::Limited { def, .. } => describe(def),
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
