//! What the reference's variables say about what the service serves:
//! the rules directory (`RUNTIME_*`), the listeners (`HOST`, `PORT`,
//! `GRPC_HOST`, `GRPC_PORT`), the optional response headers (`LIMIT_*`)
//! and health (`HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED`).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;

use super::{Environment, MARKER, Own, Vars};
use crate::types::LimitHeaders;

impl Environment {
    /// `RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY`: the
    /// rules directory, as the reference's file provider walks it.
    pub(super) fn rules(&mut self, vars: &mut Vars<'_>, root: &str) {
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
    pub(super) fn listeners(&mut self, vars: &mut Vars<'_>) {
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
    pub(super) fn headers(&mut self, vars: &mut Vars<'_>) {
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
    pub(super) fn health(&mut self, vars: &mut Vars<'_>) {
        if let Some(v) = vars.boolean("HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED") {
            self.read_into(
                vec![format!("HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED={v}")],
                format!("envoy_require_rules = {v}"),
                Own::Setting(|o| o.envoy_require_rules.is_some()),
            );
            self.overrides.envoy_require_rules = Some(v);
        }
    }
}
