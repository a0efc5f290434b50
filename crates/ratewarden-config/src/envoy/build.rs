//! One file's raw model (`yaml/`) built into a domain's tree of rules
//! (`tree.rs`), each limit a policy of the decision layer named by its
//! path (its quota built by [`PolicyParts::build`], as the policy file's
//! are); every error of the file collected with its position.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use ratewarden_core::Algorithm;
use ratewarden_limiter::{FailureMode, PolicyDef};
use sha2::{Digest, Sha256};

use super::tree::{Domain, Limit, Node, Rule, Unit};
use super::yaml::{RawDescriptor, RawFile, RawRateLimit};
use crate::error::{ConfigError, Location};
use crate::policy::{PolicyParts, Site, Sited};
use crate::values::{parse_algorithm, parse_duration};

/// Builds one file's domain from its raw model, collecting errors.
pub(super) struct Builder {
    pub failure: FailureMode,
    pub errors: Vec<ConfigError>,
    pub policies: Vec<Arc<PolicyDef>>,
    pub names: HashSet<String>,
}

impl Builder {
    fn error(&mut self, at: &Location, key: &str, message: impl Into<String>) {
        self.errors.push(ConfigError {
            location: Some(at.clone()),
            key: Some(key.to_owned()),
            message: message.into(),
        });
    }

    pub fn domain(&mut self, raw: RawFile) -> Option<Domain> {
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
        let unit = self.unit(r, &key);
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
        let window = self.window(r, unit, &at, &key);
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
        let site = |location: &Location, key: String| Site {
            location: Some(location.clone()),
            key,
        };
        let parts = PolicyParts {
            site: site(&at, key.clone()),
            algorithm,
            limit: Some(Sited {
                value: u64::from(r.requests_per_unit),
                site: site(&at, format!("{key}.requests_per_unit")),
            }),
            window,
            burst: r.burst.as_ref().map(|(b, b_at)| Sited {
                value: *b,
                site: site(b_at, format!("{key}.burst")),
            }),
            count_denied: None,
            shadow: d.shadow_mode,
        };
        let built = parts.build(&mut self.errors, errors_before)?;
        let window = built.quota.window();
        let policy = built.named(self.unique_name(path, identity));
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

    /// `unit`, when given and not empty.
    fn unit(&mut self, r: &RawRateLimit, key: &str) -> Option<Unit> {
        match &r.unit {
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
        }
    }

    /// The window a limited rule's `unit` or `window` gives.
    fn window(
        &mut self,
        r: &RawRateLimit,
        unit: Option<Unit>,
        at: &Location,
        key: &str,
    ) -> Option<Duration> {
        // An empty unit (`unit:`, `unit: ""`, `unit: ~`) is no unit: the
        // reference refuses it unless the limit is unlimited (regression:
        // it silently dropped the limit).
        let unit_given = r.unit.as_ref().filter(|(text, _)| !text.is_empty());
        match (&r.window, unit, unit_given) {
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
            (None, None, Some(_)) => None, // reported by `unit`
            (None, None, None) if r.unit.is_some() => {
                let unit_at = r.unit.as_ref().map_or(at, |(_, a)| a);
                self.error(
                    unit_at,
                    &format!("{key}.unit"),
                    "the unit is empty; expected second, minute, hour, day, week, month or year",
                );
                None
            }
            (None, None, None) => {
                self.error(
                    at,
                    key,
                    "a limit needs a unit (second, minute, hour, day, week, month, year), a window (extension, e.g. 30s) or unlimited: true",
                );
                None
            }
        }
    }
}
