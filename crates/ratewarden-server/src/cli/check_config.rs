//! `ratewarden check-config PATH`: validates a configuration file as
//! `serve --config PATH` would load it, and asks the Redis store it
//! names, if any, whether this configuration can use it.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use ratewarden_config::{ConfigFile, Overrides, Settings, StoreConfig};
use ratewarden_redis::{Diagnosis, RedisStore};

use super::args::CheckConfigArgs;

/// Prints one line per policy and exits 0, or every error (one per line,
/// `FILE:LINE:COLUMN: key: message`) on standard error and exits 2.
///
/// A TOML file naming a Redis store gets one more line: Redis answers
/// (standard output), Redis refuses this configuration (a missing or
/// refused password, an address of another protocol: standard error,
/// exit 2), or Redis cannot be reached (a warning on standard error, exit
/// 0: the file is right, the server may just be down).
pub fn run(args: &CheckConfigArgs) -> ExitCode {
    match ratewarden_config::check_config(&args.path) {
        Ok(lines) => {
            let mut out = std::io::stdout().lock();
            for line in lines {
                let _ = writeln!(out, "{line}");
            }
            drop(out);
            check_redis(&args.path)
        }
        Err(errors) => {
            let mut err = std::io::stderr().lock();
            for e in errors.iter() {
                let _ = writeln!(err, "{e}");
            }
            // A rules directory's files are refused one by one.
            let outcome = if args.path.is_dir() {
                "serve refuses each file with errors and loads the others"
            } else {
                "nothing is loaded from a file with errors"
            };
            let _ = writeln!(
                err,
                "{}: {} error(s); {outcome}",
                args.path.display(),
                errors.iter().count()
            );
            ExitCode::from(2)
        }
    }
}

/// The Redis store the file at `path` names, asked once (within its
/// connect timeout and call timeout).
fn check_redis(path: &Path) -> ExitCode {
    let Some((config, timeout)) = redis_of(path) else {
        return ExitCode::SUCCESS;
    };
    let store = match RedisStore::new(config.with_timeout(timeout)) {
        Ok(store) => store,
        Err(e) => return fail(path, &e.to_string()),
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => return fail(path, &format!("cannot start the async runtime: {e}")),
    };
    let shown = store.config().to_string();
    match runtime.block_on(store.diagnose()) {
        Diagnosis::Answers => {
            let _ = writeln!(std::io::stdout(), "store {shown}: Redis answers");
            ExitCode::SUCCESS
        }
        Diagnosis::Refused(e) => fail(path, &format!("store {shown}: {}", cause(&e))),
        Diagnosis::Unreachable(e) => {
            let _ = writeln!(
                std::io::stderr(),
                "warning: {}: store {shown}: {} (the file is valid; serve starts and \
                 follows on_store_error until Redis answers)",
                path.display(),
                cause(&e)
            );
            ExitCode::SUCCESS
        }
    }
}

/// The Redis store and call timeout of the TOML file at `path`, as
/// `serve` resolves them without flags or environment.
fn redis_of(path: &Path) -> Option<(ratewarden_redis::RedisConfig, std::time::Duration)> {
    let yaml = path.extension().is_some_and(|e| e == "yaml" || e == "yml");
    if yaml || path.is_dir() {
        return None;
    }
    let file = ConfigFile::load(path).ok()?;
    let settings = Settings::resolve(Overrides::default(), Some(&file), None).ok()?;
    let timeout = settings.store_options().call_timeout;
    match settings.store {
        StoreConfig::Redis(config) => Some((config, timeout)),
        _ => None,
    }
}

fn cause(e: &ratewarden_core::StoreError) -> String {
    let text = match e {
        ratewarden_core::StoreError::Unavailable(t) | ratewarden_core::StoreError::Failed(t) => {
            t.clone()
        }
        other => other.to_string(),
    };
    text.strip_prefix("Redis: ")
        .map_or(text.clone(), str::to_owned)
}

fn fail(path: &Path, message: &str) -> ExitCode {
    let _ = writeln!(std::io::stderr(), "{}: {message}", path.display());
    ExitCode::from(2)
}
