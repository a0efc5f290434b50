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

mod store;
mod tables;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;

use super::options::LimitHeaders;
use crate::error::{ConfigError, ConfigErrors};
use crate::settings::Overrides;
pub use store::{REFERENCE_REDIS_SOCKET, go_duration};
use tables::{
    HARMLESS, INERT_PREFIXES, KNOWN_WITH_PREFIX, LOSES, NAMED, REFERENCE_ONLY, REFUSED_WHEN_TRUE,
};

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

/// Reads the reference's variables through `get` (the process's
/// environment in the service).
pub(super) struct Vars<'g> {
    get: &'g dyn Fn(&str) -> Option<String>,
    errors: Vec<ConfigError>,
}

impl Vars<'_> {
    /// The value of `name`; an empty value counts as unset, as for the
    /// reference's defaults.
    pub(super) fn value(&self, name: &str) -> Option<String> {
        (self.get)(name).filter(|v| !v.trim().is_empty())
    }

    pub(super) fn error(&mut self, name: &str, value: &str, why: impl std::fmt::Display) {
        self.errors.push(ConfigError::general(format!(
            "invalid value '{value}' in the environment variable {name} \
             (envoyproxy/ratelimit's, read because {MARKER} is set): {why}"
        )));
    }

    /// A value the reference accepts and ratewarden does not act on, where
    /// ignoring it would change what is decided or where calls go.
    pub(super) fn refuse(&mut self, name: &str, value: &str, why: impl std::fmt::Display) {
        self.errors.push(ConfigError::general(format!(
            "{name}={value} (envoyproxy/ratelimit's, read because {MARKER} is set) is \
             refused: {why}"
        )));
    }

    /// A boolean as Go's `strconv.ParseBool` reads it.
    pub(super) fn boolean(&mut self, name: &str) -> Option<bool> {
        let value = self.value(name)?;
        match value.trim() {
            "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
            "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
            _ => {
                self.error(
                    name,
                    &value,
                    "not a boolean (true, false, 1, 0, t, f, TRUE, FALSE, True, False)",
                );
                None
            }
        }
    }

    /// A port number.
    fn port(&mut self, name: &str) -> Option<u16> {
        let value = self.value(name)?;
        match value.trim().parse::<u16>() {
            Ok(port) => Some(port),
            Err(_) => {
                self.error(name, &value, "not a port number from 0 to 65535");
                None
            }
        }
    }

    /// An interface address: an IP address, or `localhost`.
    fn host(&mut self, name: &str) -> Option<IpAddr> {
        let value = self.value(name)?;
        let text = value.trim().trim_start_matches('[').trim_end_matches(']');
        if text.eq_ignore_ascii_case("localhost") {
            return Some(IpAddr::V4(Ipv4Addr::LOCALHOST));
        }
        match text.parse::<IpAddr>() {
            Ok(ip) => Some(ip),
            Err(_) => {
                self.error(
                    name,
                    &value,
                    "not an IP address (host names are not resolved); use 0.0.0.0 (every \
                     IPv4 interface), :: or the address of one interface",
                );
                None
            }
        }
    }
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
        let mut vars = Vars {
            get: &get,
            errors: Vec::new(),
        };
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
        if vars.errors.is_empty() {
            Ok(Some(env))
        } else {
            Err(ConfigErrors(vars.errors))
        }
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

    /// `RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY`: the
    /// rules directory, as the reference's file provider walks it.
    fn rules(&mut self, vars: &mut Vars<'_>, root: &str) {
        let sub = vars.value("RUNTIME_SUBDIRECTORY");
        let app = vars.value("RUNTIME_APPDIRECTORY");
        let mut dir = PathBuf::from(root);
        let mut shown = vec![format!("{MARKER}={root}")];
        if let Some(sub) = &sub {
            dir.push(sub);
            shown.push(format!("RUNTIME_SUBDIRECTORY={sub}"));
        }
        match &app {
            Some(app) => {
                dir.push(app);
                shown.push(format!("RUNTIME_APPDIRECTORY={app}"));
            }
            None => dir.push("config"),
        }
        self.read_into(
            shown,
            format!(
                "envoy_config = {} (the rules: its *.yaml and *.yml files)",
                dir.display()
            ),
            Own::Setting(|o| o.envoy_config.is_some()),
        );
        self.overrides.envoy_config = Some(dir);
        if let Some(watch) = vars.boolean("RUNTIME_WATCH_ROOT") {
            self.read_into(
                vec![format!("RUNTIME_WATCH_ROOT={watch}")],
                "agrees: the rules reload when a file of the rules directory changes (a \
                 Kubernetes ConfigMap swap included) and on SIGHUP"
                    .into(),
                Own::Nothing,
            );
        }
        match vars.boolean("RUNTIME_IGNOREDOTFILES") {
            Some(true) => self.read_into(
                vec!["RUNTIME_IGNOREDOTFILES=true".into()],
                "agrees: names starting with '.' are never read".into(),
                Own::Nothing,
            ),
            Some(false) => self.ignore(
                "RUNTIME_IGNOREDOTFILES=false".into(),
                "names starting with '.' are never read (in a Kubernetes ConfigMap they hold \
                 a second copy of every file)",
                false,
            ),
            None => {}
        }
    }

    /// `HOST`/`PORT` (HTTP) and `GRPC_HOST`/`GRPC_PORT`, with the
    /// reference's defaults: every interface, 8080 and 8081.
    fn listeners(&mut self, vars: &mut Vars<'_>) {
        let all = IpAddr::V4(Ipv4Addr::UNSPECIFIED);
        let pairs = [
            ("HOST", "PORT", 8080, "listen"),
            ("GRPC_HOST", "GRPC_PORT", 8081, "grpc_listen"),
        ];
        for (host_var, port_var, default_port, setting) in pairs {
            let host = vars.host(host_var);
            let port = vars.port(port_var);
            let mut shown = Vec::new();
            if let Some(h) = vars.value(host_var) {
                shown.push(format!("{host_var}={h}"));
            }
            if let Some(p) = vars.value(port_var) {
                shown.push(format!("{port_var}={p}"));
            }
            let addr = SocketAddr::new(host.unwrap_or(all), port.unwrap_or(default_port));
            let defaults = if shown.is_empty() {
                " (the reference's default)"
            } else {
                ""
            };
            let (own, what): (Own, &str) = if setting == "listen" {
                (Own::Setting(|o| o.listen.is_some()), "HTTP")
            } else {
                (Own::Setting(|o| o.grpc_listen.is_some()), "gRPC")
            };
            self.read_into(shown, format!("{setting} = {addr} ({what}){defaults}"), own);
            if setting == "listen" {
                self.overrides.listen = Some(addr);
            } else {
                self.overrides.grpc_listen = Some(addr);
            }
        }
    }

    /// `LIMIT_RESPONSE_HEADERS_ENABLED` and the three header names.
    fn headers(&mut self, vars: &mut Vars<'_>) {
        let names = [
            "LIMIT_LIMIT_HEADER",
            "LIMIT_REMAINING_HEADER",
            "LIMIT_RESET_HEADER",
        ];
        let given: Vec<Option<String>> = names.iter().map(|n| vars.value(n)).collect();
        let enabled = vars.boolean("LIMIT_RESPONSE_HEADERS_ENABLED");
        if enabled != Some(true) {
            if enabled == Some(false) {
                self.read_into(
                    vec!["LIMIT_RESPONSE_HEADERS_ENABLED=false".into()],
                    "envoy_limit_headers = off".into(),
                    Own::Setting(|o| o.envoy_limit_headers.is_some()),
                );
                self.overrides.envoy_limit_headers = Some(None);
            }
            for (name, value) in names.iter().zip(&given) {
                if let Some(v) = value {
                    self.ignore(
                        format!("{name}={v}"),
                        "only read with LIMIT_RESPONSE_HEADERS_ENABLED=true",
                        false,
                    );
                }
            }
            return;
        }
        let default = LimitHeaders::default();
        let pick = |i: usize, d: &str| given[i].clone().unwrap_or_else(|| d.to_owned());
        let limit = pick(0, &default.limit);
        let remaining = pick(1, &default.remaining);
        let reset = pick(2, &default.reset);
        match LimitHeaders::new(&limit, &remaining, &reset) {
            Ok(headers) => {
                let mut shown = vec!["LIMIT_RESPONSE_HEADERS_ENABLED=true".to_owned()];
                for (name, value) in names.iter().zip(&given) {
                    if let Some(v) = value {
                        shown.push(format!("{name}={v}"));
                    }
                }
                self.read_into(
                    shown,
                    format!("envoy_limit_headers = {headers}"),
                    Own::Setting(|o| o.envoy_limit_headers.is_some()),
                );
                self.overrides.envoy_limit_headers = Some(Some(headers));
            }
            Err(why) => {
                let at = given
                    .iter()
                    .position(|g| {
                        g.as_deref()
                            .is_some_and(|v| why.contains(&format!("'{v}'")))
                    })
                    .unwrap_or(0);
                vars.error(names[at], given[at].as_deref().unwrap_or(""), why);
            }
        }
    }

    /// `HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED`.
    fn health(&mut self, vars: &mut Vars<'_>) {
        if let Some(v) = vars.boolean("HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED") {
            self.read_into(
                vec![format!("HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED={v}")],
                format!("envoy_require_rules = {v}"),
                Own::Setting(|o| o.envoy_require_rules.is_some()),
            );
            self.overrides.envoy_require_rules = Some(v);
        }
    }

    /// What ratewarden refuses rather than ignore.
    fn refusals(&mut self, vars: &mut Vars<'_>) {
        for (name, why) in REFUSED_WHEN_TRUE {
            match vars.boolean(name) {
                Some(true) => {
                    let given = vars.value(name).unwrap_or_default();
                    vars.refuse(name, &given, why);
                }
                Some(false) => self.read_into(
                    vec![format!("{name}=false")],
                    "agrees: ratewarden does not have it either".into(),
                    Own::Nothing,
                ),
                None => {}
            }
        }
        if let Some(uds) = vars.value("GRPC_UDS") {
            vars.refuse(
                "GRPC_UDS",
                &uds,
                "ratewarden serves gRPC on TCP only (GRPC_HOST, GRPC_PORT); point Envoy's \
                 rate_limit_service at that address",
            );
        }
        if let Some(kind) = vars.value("CONFIG_TYPE") {
            if kind.trim().eq_ignore_ascii_case("FILE") {
                self.read_into(
                    vec![format!("CONFIG_TYPE={kind}")],
                    "agrees: the rules are files".into(),
                    Own::Nothing,
                );
            } else {
                vars.refuse(
                    "CONFIG_TYPE",
                    &kind,
                    "ratewarden reads its rules from files (FILE); it has no xDS client",
                );
            }
        }
    }

    /// `LOG_LEVEL` and `LOG_FORMAT`.
    fn logging(&mut self, vars: &mut Vars<'_>) {
        if let Some(level) = vars.value("LOG_LEVEL") {
            match log_filter(&level) {
                Ok(filter) => {
                    self.log_filter = Some(filter);
                    self.read_into(
                        vec![format!("LOG_LEVEL={level}")],
                        format!("the log shows {filter} and above"),
                        Own::Variable("RATEWARDEN_LOG"),
                    );
                }
                Err(why) => vars.error("LOG_LEVEL", &level, why),
            }
        }
        if let Some(format) = vars.value("LOG_FORMAT") {
            // The reference writes JSON for `json` in any case, and text
            // for anything else.
            let chosen = if format.trim().eq_ignore_ascii_case("json") {
                "json"
            } else {
                "text"
            };
            self.log_format = Some(chosen);
            self.read_into(
                vec![format!("LOG_FORMAT={format}")],
                format!("the log is {chosen}"),
                Own::Variable("RATEWARDEN_LOG_FORMAT"),
            );
        }
    }

    /// The statistics and tracing switches.
    fn statistics(&mut self, vars: &mut Vars<'_>) {
        let sinks = [
            (
                "USE_STATSD",
                "no statsd: ratewarden's metrics are Prometheus's, at GET /metrics on the HTTP port",
            ),
            (
                "USE_DOG_STATSD",
                "no statsd: ratewarden's metrics are Prometheus's, at GET /metrics on the HTTP port",
            ),
            (
                "USE_PROMETHEUS",
                "no separate metrics listener: Prometheus's text is served at GET /metrics on the HTTP port",
            ),
            ("TRACING_ENABLED", "no tracing export"),
        ];
        for (name, why) in sinks {
            match vars.boolean(name) {
                Some(true) => self.ignore(format!("{name}=true"), why, true),
                Some(false) => self.read_into(
                    vec![format!("{name}=false")],
                    "agrees: ratewarden does not send it".into(),
                    Own::Nothing,
                ),
                None => {}
            }
        }
    }

    /// Every other variable of the reference that is set.
    fn leftovers(&mut self, vars: &mut Vars<'_>) {
        for (name, why) in HARMLESS {
            if let Some(v) = vars.value(name) {
                self.ignore(format!("{name}={v}"), why, false);
            }
        }
        for (name, why) in LOSES {
            if let Some(v) = vars.value(name) {
                self.ignore(format!("{name}={v}"), why, true);
            }
        }
        for (prefix, why) in INERT_PREFIXES {
            for name in KNOWN_WITH_PREFIX.iter().filter(|n| n.starts_with(prefix)) {
                let examined = NAMED.contains(name)
                    || HARMLESS.iter().any(|(n, _)| n == name)
                    || LOSES.iter().any(|(n, _)| n == name);
                if examined {
                    continue;
                }
                if let Some(v) = vars.value(name) {
                    let shown = if name.contains("AUTH") || name.contains("KEY") {
                        "<redacted>".to_owned()
                    } else {
                        v
                    };
                    self.ignore(format!("{name}={shown}"), why, false);
                }
            }
        }
    }
}

/// `LOG_LEVEL` (logrus's levels, any case) as a log filter.
///
/// # Errors
/// A message listing the levels.
pub fn log_filter(level: &str) -> Result<&'static str, String> {
    match level.trim().to_ascii_lowercase().as_str() {
        "trace" => Ok("trace"),
        "debug" => Ok("debug"),
        "info" => Ok("info"),
        "warn" | "warning" => Ok("warn"),
        "error" | "fatal" | "panic" => Ok("error"),
        _ => Err("not a level (trace, debug, info, warn, error, fatal, panic)".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::StoreConfig;
    use std::collections::HashMap;
    use std::time::Duration;

    fn read(pairs: &[(&str, &str)]) -> Result<Option<Environment>, String> {
        let vars: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        Environment::read(|name| vars.get(name).cloned()).map_err(|e| e.to_string())
    }

    #[test]
    fn go_durations_read_as_go_reads_them() {
        for (text, d) in [
            ("0", Duration::ZERO),
            ("10s", Duration::from_secs(10)),
            ("500ms", Duration::from_millis(500)),
            ("1.5s", Duration::from_millis(1500)),
            ("1m30s", Duration::from_secs(90)),
            ("2h", Duration::from_secs(7200)),
            ("250us", Duration::from_micros(250)),
            (".5s", Duration::from_millis(500)),
        ] {
            assert_eq!(go_duration(text), Ok(d), "{text}");
        }
        for bad in ["", "10", "s", "1x", "1..5s", "-1s", "1.s.", "ten seconds"] {
            assert!(go_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn nothing_is_read_without_runtime_root() {
        assert!(
            read(&[("PORT", "9000"), ("REDIS_URL", "h:1")])
                .unwrap()
                .is_none()
        );
        let vars: HashMap<&str, &str> = [("GRPC_PORT", "1"), ("PORT", "2")].into();
        let unread = Environment::unread(|n| vars.get(n).map(|v| (*v).to_owned()));
        assert_eq!(unread, ["GRPC_PORT"]);
    }

    #[test]
    fn the_reference_docker_compose_environment_maps_to_settings() {
        let env = read(&[
            ("USE_STATSD", "false"),
            ("LOG_LEVEL", "debug"),
            ("REDIS_SOCKET_TYPE", "tcp"),
            ("REDIS_URL", "redis:6379"),
            ("RUNTIME_ROOT", "/data"),
            ("RUNTIME_SUBDIRECTORY", "ratelimit"),
            ("MEMCACHE_HOST_PORT", "memcached:11211"),
        ])
        .unwrap()
        .unwrap();
        let o = &env.overrides;
        assert_eq!(
            o.envoy_config.as_deref(),
            Some(std::path::Path::new("/data/ratelimit/config"))
        );
        assert_eq!(o.listen.unwrap().to_string(), "0.0.0.0:8080");
        assert_eq!(o.grpc_listen.unwrap().to_string(), "0.0.0.0:8081");
        let Some(StoreConfig::Redis(redis)) = &o.store else {
            panic!("{:?}", o.store);
        };
        assert_eq!(redis.url(), "redis://redis:6379");
        assert_eq!(env.log_filter, Some("debug"));
        assert!(
            env.ignored
                .iter()
                .any(|i| i.variable == "MEMCACHE_HOST_PORT=memcached:11211" && !i.loses),
            "{:?}",
            env.ignored
        );
        let named: Vec<String> = env
            .readings
            .iter()
            .flat_map(|r| r.variables.clone())
            .collect();
        for v in [
            "RUNTIME_ROOT=/data",
            "REDIS_URL=redis:6379",
            "USE_STATSD=false",
            "LOG_LEVEL=debug",
        ] {
            assert!(named.iter().any(|n| n == v), "{v} in {named:?}");
        }
    }

    #[test]
    fn redis_settings_build_a_url_with_the_password_encoded_and_never_shown() {
        let env = read(&[
            ("RUNTIME_ROOT", "/r"),
            ("REDIS_SOCKET_TYPE", "tcp"),
            ("REDIS_URL", "10.0.0.5:6380"),
            ("REDIS_AUTH", "app:p@ss:w/rd"),
            ("CACHE_KEY_PREFIX", "edge_"),
            ("REDIS_TIMEOUT", "1.5s"),
        ])
        .unwrap()
        .unwrap();
        let Some(StoreConfig::Redis(redis)) = &env.overrides.store else {
            panic!();
        };
        assert_eq!(redis.url(), "redis://app:p%40ss%3Aw%2Frd@10.0.0.5:6380");
        assert_eq!(redis.key_prefix(), "edge_");
        assert_eq!(env.overrides.store_timeout_ms, Some(1500));
        let shown = format!("{:?}", env.readings);
        assert!(!shown.contains("p@ss"), "{shown}");
        let env = read(&[("RUNTIME_ROOT", "/r"), ("REDIS_AUTH", "secret")])
            .unwrap()
            .unwrap();
        let Some(StoreConfig::Redis(redis)) = &env.overrides.store else {
            panic!();
        };
        assert_eq!(
            redis.url(),
            "redis+unix:///var/run/nutcracker/ratelimit.sock?pass=secret"
        );
    }

    #[test]
    fn what_would_change_decisions_is_refused_naming_the_variable() {
        for (name, value, needle) in [
            ("REDIS_TLS", "true", "no TLS for Redis"),
            ("BACKEND_TYPE", "memcache", "no memcache"),
            ("REDIS_TYPE", "cluster", "Cluster"),
            ("REDIS_SOCKET_TYPE", "udp", "tcp or unix"),
            ("SHADOW_MODE", "true", "shadow_mode"),
            ("QUOTA_MODE", "1", "quota mode"),
            ("MERGE_DOMAIN_CONFIG", "True", "merged"),
            ("GRPC_UDS", "/tmp/rl.sock", "TCP only"),
            ("CONFIG_TYPE", "GRPC_XDS_SOTW", "xDS"),
            ("PORT", "http", "port number"),
            ("HOST", "ratelimit.local", "not an IP address"),
            ("USE_STATSD", "yes", "not a boolean"),
            ("REDIS_TIMEOUT", "10", "not a duration"),
            ("LOG_LEVEL", "verbose", "not a level"),
            ("CACHE_KEY_PREFIX", "a{b}", "key prefix"),
            ("LIMIT_LIMIT_HEADER", "X Limit", "header name"),
        ] {
            let mut pairs = vec![("RUNTIME_ROOT", "/r"), (name, value)];
            if name.starts_with("LIMIT_") {
                pairs.push(("LIMIT_RESPONSE_HEADERS_ENABLED", "true"));
            }
            let err = read(&pairs).unwrap_err();
            assert!(
                (err.contains(&format!("environment variable {name}"))
                    || err.starts_with(&format!("{name}={value} ")))
                    && err.contains(needle),
                "{name}={value}: {err}"
            );
        }
    }

    #[test]
    fn response_headers_take_the_reference_names_unless_renamed() {
        let env = read(&[
            ("RUNTIME_ROOT", "/r"),
            ("LIMIT_RESPONSE_HEADERS_ENABLED", "true"),
            ("LIMIT_REMAINING_HEADER", "X-RateLimit-Remaining"),
        ])
        .unwrap()
        .unwrap();
        let headers = env.overrides.envoy_limit_headers.clone().unwrap().unwrap();
        assert_eq!(headers.limit, "RateLimit-Limit");
        assert_eq!(headers.remaining, "X-RateLimit-Remaining");
        assert_eq!(headers.reset, "RateLimit-Reset");
        let env = read(&[("RUNTIME_ROOT", "/r"), ("LIMIT_RESET_HEADER", "X-Reset")])
            .unwrap()
            .unwrap();
        assert!(env.overrides.envoy_limit_headers.is_none());
        assert!(
            env.ignored
                .iter()
                .any(|i| i.variable == "LIMIT_RESET_HEADER=X-Reset")
        );
    }

    #[test]
    fn own_settings_win_over_each_reading() {
        let env = read(&[("RUNTIME_ROOT", "/r"), ("PORT", "9000")])
            .unwrap()
            .unwrap();
        let listen = env
            .readings
            .iter()
            .find(|r| r.variables.iter().any(|v| v == "PORT=9000"))
            .unwrap();
        let own = Overrides {
            listen: Some("127.0.0.1:1".parse().unwrap()),
            ..Overrides::default()
        };
        assert!(listen.yields_to(&own));
        assert!(!listen.yields_to(&Overrides::default()));
    }
}
