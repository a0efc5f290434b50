//! Envoy's side of `serve`'s start and reloads: envoyproxy/ratelimit's
//! environment variables read and each one reported (used, overridden by
//! ratewarden's own setting, ignored), and what a load of the rules left
//! out logged (refused files with their lines, entries not read, no
//! limits at all), so that nothing about the rules is silent.

use std::path::Path;

use ratewarden_config::envoy::EnvoyConfig;
use ratewarden_config::envoy::environment::{Environment, Own, log_filter};
use ratewarden_config::{ConfigErrors, ConfigFile, Overrides, Settings};

use crate::cli::ServeArgs;
use crate::logging::{LOG_ENV, LOG_FORMAT_ENV};

/// The process's variable `name`; a value that is not UTF-8 is read
/// lossily, so that it is refused by name rather than taken as unset.
fn process_var(name: &str) -> Option<String> {
    std::env::var_os(name).map(|v| v.to_string_lossy().into_owned())
}

/// `serve`'s settings: the flags and `RATEWARDEN_*` variables (`args`),
/// over the configuration file, over envoyproxy/ratelimit's variables
/// (read when `RUNTIME_ROOT` is set, each reported at INFO before the
/// settings are resolved, so that an error about the rules directory
/// follows the variables that named it), over the defaults. Also the
/// flags and `RATEWARDEN_*` variables alone, which a reload keeps.
///
/// # Errors
/// Every error of the variables, the file and the settings.
pub fn settings(
    args: ServeArgs,
    admin_key: Option<String>,
) -> Result<(Settings, Overrides), ConfigErrors> {
    let environment = Environment::read(process_var)?;
    let given = args.overrides();
    let file = args.config.as_deref().map(ConfigFile::load).transpose()?;
    let own = given.clone().or(file
        .as_ref()
        .map(|f| f.overrides.clone())
        .unwrap_or_default());
    let layer = match environment {
        Some(environment) => {
            report_environment(&environment, &own);
            environment.overrides
        }
        None => {
            let unread = Environment::unread(process_var);
            if !unread.is_empty() {
                tracing::warn!(
                    variables = %unread.join(", "),
                    "envoyproxy/ratelimit variables are set but RUNTIME_ROOT is not, so none \
                     of them is read (set RUNTIME_ROOT, whose default in the reference is \
                     /srv/runtime_data/current, to read them)"
                );
            }
            Overrides::default()
        }
    };
    let settings =
        Settings::resolve_with_environment(given.clone(), file.as_ref(), layer, admin_key)?;
    Ok((settings, given))
}

/// One INFO line per variable read (or overridden), and one line for
/// every variable ignored: WARN when a feature the deployment asked for
/// is missing, INFO otherwise.
fn report_environment(environment: &Environment, own: &Overrides) {
    for reading in &environment.readings {
        let variables = reading.variables.join(" ");
        let overridden = match reading.own {
            Own::Variable(name) => process_var(name)
                .filter(|v| !v.trim().is_empty())
                .map(|_| name.to_owned()),
            Own::Setting(_) if reading.yields_to(own) => {
                Some("ratewarden's own flag, RATEWARDEN_* variable or file key".to_owned())
            }
            Own::Setting(_) | Own::Nothing => None,
        };
        match overridden {
            Some(by) => tracing::info!(
                variables = %variables,
                instead = %reading.effect,
                overridden_by = %by,
                "envoyproxy/ratelimit variable not used: ratewarden's own setting wins"
            ),
            None => tracing::info!(
                variables = %variables,
                effect = %reading.effect,
                "envoyproxy/ratelimit variable used"
            ),
        }
    }
    if environment.ignored.is_empty() {
        return;
    }
    let list: Vec<String> = environment
        .ignored
        .iter()
        .map(|i| format!("{} ({})", i.variable, i.why))
        .collect();
    let list = list.join("; ");
    if environment.ignored.iter().any(|i| i.loses) {
        tracing::warn!(variables = %list, "envoyproxy/ratelimit variables ignored");
    } else {
        tracing::info!(variables = %list, "envoyproxy/ratelimit variables ignored");
    }
}

/// The log's filter and format from `LOG_LEVEL` and `LOG_FORMAT`, for
/// when `RATEWARDEN_LOG` and `RATEWARDEN_LOG_FORMAT` are unset, read
/// only when `RUNTIME_ROOT` is set (as every envoyproxy/ratelimit
/// variable).
///
/// # Errors
/// A `LOG_LEVEL` that is not one of logrus's levels, naming it.
pub fn log_defaults() -> Result<(Option<&'static str>, Option<&'static str>), String> {
    let set = |name: &str| process_var(name).filter(|v| !v.trim().is_empty());
    if set("RUNTIME_ROOT").is_none() {
        return Ok((None, None));
    }
    let filter = match set("LOG_LEVEL").filter(|_| set(LOG_ENV).is_none()) {
        Some(level) => Some(log_filter(&level).map_err(|why| {
            format!(
                "invalid value '{level}' in the environment variable LOG_LEVEL \
                 (envoyproxy/ratelimit's, read because RUNTIME_ROOT is set): {why}"
            )
        })?),
        None => None,
    };
    let format = set("LOG_FORMAT")
        .filter(|_| set(LOG_FORMAT_ENV).is_none())
        .map(|f| {
            if f.trim().eq_ignore_ascii_case("json") {
                "json"
            } else {
                "text"
            }
        });
    Ok((filter, format))
}

/// Logs what loading the Envoy rules at `path` left out: every error of
/// each refused file (ERROR, with its file and line; on a reload, whether
/// the file's last good rules still serve), the directory's entries that
/// are not read (WARN), and rules without a single limit (WARN: every
/// call is answered OK).
pub fn report_rules(path: &Path, rules: &EnvoyConfig) {
    for refused in rules.refused() {
        let outcome = if refused.kept {
            "refused; the rules it held before keep serving until it is fixed"
        } else {
            "refused; the other rules files are loaded"
        };
        for error in refused.errors.iter() {
            tracing::error!(file = %refused.file.display(), error = %error, "Envoy rules file {outcome}");
        }
    }
    if !rules.skipped().is_empty() {
        let skipped: Vec<String> = rules
            .skipped()
            .iter()
            .map(|s| format!("{} ({})", s.path.display(), s.why))
            .collect();
        tracing::warn!(
            dir = %path.display(),
            entries = %skipped.join("; "),
            "not read as Envoy rules (the reference server reads every file under its \
             config directory)"
        );
    }
    if rules.policies().next().is_none() {
        tracing::warn!(
            envoy_config = %path.display(),
            domains = rules.domain_count(),
            "the Envoy rules hold no limit: every ShouldRateLimit call is answered OK"
        );
    }
}
