//! envoyproxy/ratelimit's environment variables, read as ratewarden
//! settings so that a deployment of the reference server starts
//! ratewarden unchanged.
//!
//! They are read only when `RUNTIME_ROOT` is set: that variable is the
//! reference's alone, while `PORT`, `HOST`, `REDIS_URL` and `LOG_LEVEL`
//! are set for many other programs. They rank below every setting of
//! ratewarden's own (flags, `RATEWARDEN_*`, the configuration file) and
//! above the defaults, and where the reference's defaults differ from
//! ratewarden's (HTTP on `0.0.0.0:8080`, gRPC on `0.0.0.0:8081`, Redis
//! at the Unix socket `/var/run/nutcracker/ratelimit.sock`) the
//! reference's apply.
//!
//! Every variable of the reference's `src/settings/settings.go` that is
//! set is handled deliberately: read into a setting ([`Reading`]), noted
//! as doing what ratewarden does anyway, ignored where ignoring it
//! changes no decision ([`Ignored`], e.g. `REDIS_POOL_SIZE`, `USE_STATSD`),
//! or refused with an error where ignoring it would change what is
//! decided or where requests would go (`REDIS_TLS=true`,
//! `BACKEND_TYPE=memcache`, `SHADOW_MODE=true`, …). docs/envoy.md has
//! the table.
//!
//! # Layout
//! - `mod.rs`: what the variables give ([`Environment`], [`Reading`],
//!   [`Ignored`]) and the order they are read in.
//! - `vars.rs`: reading one variable as the reference does (Go's
//!   booleans, ports, hosts) and its errors.
//! - `serving.rs`: the rules directory, the listeners, the response
//!   headers and health.
//! - `store.rs`: Redis (`REDIS_*`, `CACHE_KEY_PREFIX`) as a store URL.
//! - `logs.rs`: `LOG_LEVEL` and `LOG_FORMAT`.
//! - `unsupported.rs` and `tables.rs`: what ratewarden refuses or
//!   ignores, and why.
//!
//! ```
//! use std::collections::HashMap;
//! use ratewarden_config::envoy::environment::Environment;
//!
//! let vars: HashMap<&str, &str> = [
//!     ("RUNTIME_ROOT", "/data"),
//!     ("RUNTIME_SUBDIRECTORY", "ratelimit"),
//!     ("REDIS_SOCKET_TYPE", "tcp"),
//!     ("REDIS_URL", "redis:6379"),
//!     ("USE_STATSD", "false"),
//! ]
//! .into();
//! let env = Environment::read(|name| vars.get(name).map(|v| v.to_string()))
//!     .unwrap()
//!     .unwrap();
//! assert_eq!(
//!     env.overrides.envoy_config.as_deref(),
//!     Some(std::path::Path::new("/data/ratelimit/config"))
//! );
//! assert_eq!(env.overrides.store.unwrap().to_string(), "redis://redis:6379");
//! assert_eq!(env.overrides.grpc_listen.unwrap().to_string(), "0.0.0.0:8081");
//! ```

mod logs;
mod serving;
mod store;
mod tables;
#[cfg(test)]
mod tests;
mod unsupported;
mod vars;

use crate::error::ConfigErrors;
use crate::overrides::Overrides;
pub use logs::log_filter;
pub use store::{REFERENCE_REDIS_SOCKET, go_duration};
use tables::REFERENCE_ONLY;
use vars::Vars;

/// The variable whose presence makes the others read.
pub const MARKER: &str = "RUNTIME_ROOT";

/// What envoyproxy/ratelimit's variables give.
#[derive(Debug, Clone, Default)]
pub struct Environment {
    /// The settings, to rank below ratewarden's own and above the defaults.
    pub overrides: Overrides,
    /// Every variable read or agreeing with ratewarden, in a fixed order.
    pub readings: Vec<Reading>,
    /// The variables set that ratewarden does not act on.
    pub ignored: Vec<Ignored>,
    /// `LOG_LEVEL` as a log filter (`warn`), for when `RATEWARDEN_LOG` is
    /// unset.
    pub log_filter: Option<&'static str>,
    /// `LOG_FORMAT` as `text` or `json`, for when `RATEWARDEN_LOG_FORMAT`
    /// is unset.
    pub log_format: Option<&'static str>,
}

/// What ratewarden's own setting is that a [`Reading`] yields to.
#[derive(Debug, Clone, Copy)]
pub enum Own {
    /// A setting of [`Overrides`]: given there, it wins.
    Setting(fn(&Overrides) -> bool),
    /// An environment variable of ratewarden's (the log's).
    Variable(&'static str),
    /// Nothing: the reading only says what ratewarden does anyway.
    Nothing,
}

/// Variables read together into one setting, or agreeing with what
/// ratewarden does.
#[derive(Debug, Clone)]
pub struct Reading {
    /// `NAME=value` of each variable, secrets redacted.
    pub variables: Vec<String>,
    /// What they give: `envoy_config = /data/ratelimit/config`, or what
    /// ratewarden does that they agree with.
    pub effect: String,
    /// The setting of ratewarden's own that wins over them.
    pub own: Own,
}

impl Reading {
    /// Whether ratewarden's own settings `own` (flags, `RATEWARDEN_*` and
    /// the file, merged) give what this reading gives.
    pub fn yields_to(&self, own: &Overrides) -> bool {
        match self.own {
            Own::Setting(given) => given(own),
            Own::Variable(_) | Own::Nothing => false,
        }
    }
}

/// A variable set that ratewarden does not act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ignored {
    /// `NAME=value`, secrets redacted.
    pub variable: String,
    /// Why, and what ratewarden does instead.
    pub why: &'static str,
    /// Whether a feature the deployment asked for is missing (statistics
    /// sinks, tracing, a debug port): logged as a warning.
    pub loses: bool,
}

impl Environment {
    /// Reads envoyproxy/ratelimit's variables through `get`; `None` when
    /// [`MARKER`] is unset or empty (then none is read).
    ///
    /// # Errors
    /// Every variable with a value the reference would not start with, or
    /// that ratewarden refuses (the message names the variable, its
    /// value and why).
    pub fn read(get: impl Fn(&str) -> Option<String>) -> Result<Option<Environment>, ConfigErrors> {
        let mut vars = Vars::new(&get);
        let Some(root) = vars.value(MARKER) else {
            return Ok(None);
        };
        let mut env = Environment::default();
        env.rules(&mut vars, &root);
        env.listeners(&mut vars);
        env.store(&mut vars);
        env.headers(&mut vars);
        env.health(&mut vars);
        env.refusals(&mut vars);
        env.logging(&mut vars);
        env.statistics(&mut vars);
        env.leftovers(&mut vars);
        vars.finish().map(|()| Some(env))
    }

    /// The reference-only variables set although [`MARKER`] is not, so
    /// none of them is read (to be said, not left silent).
    pub fn unread(get: impl Fn(&str) -> Option<String>) -> Vec<&'static str> {
        if get(MARKER).is_some_and(|v| !v.trim().is_empty()) {
            return Vec::new();
        }
        REFERENCE_ONLY
            .into_iter()
            .filter(|name| get(name).is_some())
            .collect()
    }

    pub(super) fn read_into(&mut self, variables: Vec<String>, effect: String, own: Own) {
        self.readings.push(Reading {
            variables,
            effect,
            own,
        });
    }

    pub(super) fn ignore(&mut self, variable: String, why: &'static str, loses: bool) {
        self.ignored.push(Ignored {
            variable,
            why,
            loses,
        });
    }
}
