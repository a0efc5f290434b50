//! `LOG_LEVEL` and `LOG_FORMAT`, for when ratewarden's own log variables
//! are unset.

use super::{Environment, Own, Vars};

impl Environment {
    /// `LOG_LEVEL` and `LOG_FORMAT`.
    pub(super) fn logging(&mut self, vars: &mut Vars<'_>) {
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
