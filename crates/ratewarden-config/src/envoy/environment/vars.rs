//! One of the reference's variables read as the reference reads it: an
//! empty value is unset, booleans as Go's `strconv.ParseBool`, ports and
//! interface addresses; every bad value an error naming the variable.

use std::net::{IpAddr, Ipv4Addr};

use super::MARKER;
use crate::error::{ConfigError, ConfigErrors};

/// Reads the reference's variables through `get` (the process's
/// environment in the service).
pub(super) struct Vars<'g> {
    get: &'g dyn Fn(&str) -> Option<String>,
    errors: Vec<ConfigError>,
}

impl<'g> Vars<'g> {
    pub(super) fn new(get: &'g dyn Fn(&str) -> Option<String>) -> Vars<'g> {
        Vars {
            get,
            errors: Vec::new(),
        }
    }

    /// `Ok` when no variable read had a bad value, else every error.
    pub(super) fn finish(self) -> Result<(), ConfigErrors> {
        if self.errors.is_empty() {
            Ok(())
        } else {
            Err(ConfigErrors(self.errors))
        }
    }

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
    pub(super) fn port(&mut self, name: &str) -> Option<u16> {
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
    pub(super) fn host(&mut self, name: &str) -> Option<IpAddr> {
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
