//! One policy's algorithm and quota from what a source wrote. The policy
//! file's `[[policies]]` tables, the Envoy rules' `rate_limit` blocks and
//! the seed routes' settings all build theirs with [`PolicyParts::build`],
//! so a rule holds, and is worded, the same whichever source breaks it;
//! and [`describe`] prints any policy as `check-config` shows it.
//!
//! Each source reads its own syntax into [`PolicyParts`] (reporting what
//! it cannot read, with its position) and names the policy itself.

use std::sync::Arc;
use std::time::Duration;

use ratewarden_core::{Algorithm, Mode, Policy, Quota};
use ratewarden_limiter::PolicyDef;

use crate::error::{ConfigError, Location};
use crate::values::{check_burst, check_limit};

/// Where a value was written: its position in a file (none for a flag or
/// a variable) and its key path (`policies[2].burst`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Site {
    pub location: Option<Location>,
    pub key: String,
}

impl Site {
    /// An error of the value written here.
    pub fn error(&self, message: impl Into<String>) -> ConfigError {
        ConfigError {
            location: self.location.clone(),
            key: Some(self.key.clone()),
            message: message.into(),
        }
    }
}

/// A value with where it was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Sited<T> {
    pub value: T,
    pub site: Site,
}

/// A policy as a source wrote it, each part read into its type; `None`:
/// missing, or unreadable (which the source has reported).
#[derive(Debug, Clone)]
pub(crate) struct PolicyParts {
    /// Where the policy itself is written: errors of the quota as a whole
    /// are reported here.
    pub site: Site,
    pub algorithm: Option<Algorithm>,
    /// Units per window (checked here against the largest limit).
    pub limit: Option<Sited<u64>>,
    pub window: Option<Duration>,
    /// GCRA's burst, as written (checked here).
    pub burst: Option<Sited<u64>>,
    /// Whether denied attempts count too (fixed window only).
    pub count_denied: Option<Sited<bool>>,
    /// A dry run: decided and counted, never denying.
    pub shadow: bool,
}

/// A policy but for its name, which each source gives its own way.
#[derive(Debug, Clone)]
pub(crate) struct Built {
    pub algorithm: Algorithm,
    pub quota: Quota,
    pub shadow: bool,
}

impl Built {
    /// The policy, named `name`.
    pub fn named(self, name: impl Into<Arc<str>>) -> Policy {
        let policy = Policy::new(name, self.algorithm, self.quota);
        if self.shadow {
            policy.in_shadow()
        } else {
            policy
        }
    }
}

impl PolicyParts {
    /// Checks each part and the parts against each other, pushing every
    /// error on `errors`, and builds the quota. `None` when a part is
    /// missing or an error was found: here, or earlier in the same
    /// policy (the errors from index `since` on).
    pub fn build(self, errors: &mut Vec<ConfigError>, since: usize) -> Option<Built> {
        let limit = self.limit.and_then(|limit| {
            check_limit(limit.value)
                .map_err(|message| errors.push(limit.site.error(message)))
                .ok()
        });
        let burst = self.burst.and_then(|burst| {
            let checked = check_burst(burst.value).and_then(|b| match self.algorithm {
                Some(a) if a != Algorithm::Gcra => {
                    Err(format!("burst applies only to the gcra algorithm, not {a}"))
                }
                _ => Ok(b),
            });
            checked
                .map_err(|message| errors.push(burst.site.error(message)))
                .ok()
        });
        let count_denied = self.count_denied.and_then(|count| match self.algorithm {
            Some(a) if a != Algorithm::FixedWindow => {
                errors.push(count.site.error(format!(
                    "count_denied applies only to the fixed_window algorithm, not {a}"
                )));
                None
            }
            _ => Some(count.value),
        });
        if errors.len() > since {
            return None;
        }
        let quota = match Quota::new(limit?, self.window?) {
            Ok(quota) => quota,
            Err(e) => {
                errors.push(self.site.error(e.to_string()));
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
        Some(Built {
            algorithm: self.algorithm?,
            quota,
            shadow: self.shadow,
        })
    }
}

/// One line of a policy's settings, as `check-config` prints it:
/// `api: gcra, 100 per 60s, burst 20, shadow, on store error open, key
/// [header:x-api-key], match GET,POST /api/*`.
pub fn describe(def: &PolicyDef) -> String {
    let mut line = def.policy.to_string();
    if def.policy.mode == Mode::Shadow {
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
