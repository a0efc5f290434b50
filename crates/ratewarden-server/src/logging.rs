//! The log: `RATEWARDEN_LOG` (an `EnvFilter` directive list, default
//! `info`) and `RATEWARDEN_LOG_FORMAT` (`text`, the default, or `json`:
//! one JSON object per line), on standard error. With `RUNTIME_ROOT` set,
//! envoyproxy/ratelimit's `LOG_LEVEL` and `LOG_FORMAT` apply where ours
//! are unset.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

/// The variable holding the log filter.
pub const LOG_ENV: &str = "RATEWARDEN_LOG";

/// The variable choosing the log format.
pub const LOG_FORMAT_ENV: &str = "RATEWARDEN_LOG_FORMAT";

/// The levels a directive may name.
const LEVELS: [&str; 6] = ["trace", "debug", "info", "warn", "error", "off"];

/// The log's format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// Human-readable lines (colours on a terminal only).
    Text,
    /// One JSON object per line, the event's fields at the top level.
    Json,
}

/// Reads [`LOG_ENV`] and [`LOG_FORMAT_ENV`] and installs the subscriber.
///
/// # Errors
/// A message naming the variable and its value when either is invalid:
/// a filter that does not parse, or a bare word that is neither a level
/// nor a `ratewarden` target (`RATEWARDEN_LOG=verbose` would otherwise
/// silently log nothing), or a format other than `text` and `json`.
pub fn init() -> Result<(), String> {
    // envoyproxy/ratelimit's LOG_LEVEL and LOG_FORMAT stand in for ours.
    let (reference_filter, reference_format) = crate::envoy_setup::log_defaults()?;
    let filter = filter(std::env::var(LOG_ENV).ok().as_deref().or(reference_filter))?;
    let format = format(
        std::env::var(LOG_FORMAT_ENV)
            .ok()
            .as_deref()
            .or(reference_format),
    )?;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .init(),
        // Colours only on a terminal: log files get plain text.
        LogFormat::Text => builder.with_ansi(std::io::stderr().is_terminal()).init(),
    }
    Ok(())
}

/// The filter of `value` (`info` when unset or empty).
///
/// # Errors
/// As [`init`].
pub fn filter(value: Option<&str>) -> Result<EnvFilter, String> {
    let Some(value) = value.filter(|v| !v.trim().is_empty()) else {
        return Ok(EnvFilter::new("info"));
    };
    let bad = |why: String| {
        format!(
            "invalid value '{value}' in the environment variable {LOG_ENV}: {why} \
             (write a level such as info or debug, or target=level pairs such as \
             warn,ratewarden_limiter=debug)"
        )
    };
    for directive in value.split(',').map(str::trim).filter(|d| !d.is_empty()) {
        let bare = !directive.contains('=') && !directive.contains('[');
        let level = LEVELS.contains(&directive.to_ascii_lowercase().as_str());
        if bare && !level && !directive.starts_with("ratewarden") && !directive.contains("::") {
            return Err(bad(format!("'{directive}' is not a level")));
        }
    }
    EnvFilter::builder()
        .parse(value)
        .map_err(|e| bad(e.to_string()))
}

/// The format of `value`, in any case (`text` when unset or empty).
///
/// # Errors
/// As [`init`].
pub fn format(value: Option<&str>) -> Result<LogFormat, String> {
    match value.map(|v| v.trim().to_ascii_lowercase()).as_deref() {
        None | Some("" | "text") => Ok(LogFormat::Text),
        Some("json") => Ok(LogFormat::Json),
        Some(_) => Err(format!(
            "invalid value '{}' in the environment variable {LOG_FORMAT_ENV}: \
             write text or json",
            value.unwrap_or_default()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::{LogFormat, filter, format};

    #[test]
    fn filters_and_formats_are_checked() {
        assert!(filter(None).is_ok());
        assert!(filter(Some("debug")).is_ok());
        assert!(filter(Some("warn,ratewarden_limiter=debug")).is_ok());
        assert!(filter(Some("ratewarden_server")).is_ok());
        let e = filter(Some("verbose")).err().unwrap_or_default();
        assert!(
            e.contains("RATEWARDEN_LOG") && e.contains("'verbose'"),
            "{e}"
        );
        assert!(filter(Some("info,x=lots")).is_err());
        assert_eq!(format(Some("json")), Ok(LogFormat::Json));
        assert_eq!(format(Some(" JSON ")), Ok(LogFormat::Json));
        assert_eq!(format(None), Ok(LogFormat::Text));
        let e = format(Some("yaml")).err().unwrap_or_default();
        assert!(
            e.contains("RATEWARDEN_LOG_FORMAT") && e.contains("'yaml'"),
            "{e}"
        );
    }
}
