//! The reference's variables of features ratewarden does not have:
//! refused where ignoring them would change what is decided or where
//! requests go, else ignored (named, and warned about when the
//! deployment loses something), or noted as agreeing when they are off.
//! Which variable is which is in `tables.rs`.

use super::tables::{HARMLESS, INERT_PREFIXES, KNOWN_WITH_PREFIX, LOSES, NAMED, REFUSED_WHEN_TRUE};
use super::{Environment, Own, Vars};

impl Environment {
    /// What ratewarden refuses rather than ignore.
    pub(super) fn refusals(&mut self, vars: &mut Vars<'_>) {
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

    /// The statistics and tracing switches.
    pub(super) fn statistics(&mut self, vars: &mut Vars<'_>) {
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
    pub(super) fn leftovers(&mut self, vars: &mut Vars<'_>) {
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
