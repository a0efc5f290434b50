//! Reloading the configuration file: on SIGHUP, and when the file changes
//! (a watcher on its directory, so editors that write a new file and
//! rename it, and Kubernetes' symlink swaps, are seen too; picked up
//! within a fraction of a second).
//!
//! A reload reads the file again, checks it whole and resolves it with
//! the same flags and environment as at start; only then is the new
//! policy set swapped into the limiter, atomically. A broken file changes
//! nothing: the old configuration keeps serving and every error is
//! logged. Counters survive (state belongs to the policy name, algorithm
//! and key). Settings that cannot change while running (listen address,
//! store, …) are logged as needing a restart and otherwise left alone.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use notify::{RecursiveMode, Watcher};
use ratewarden_config::{ConfigErrors, ConfigFile, Overrides, Settings};
use ratewarden_limiter::{Changes, Limiter};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// How long the watcher waits after a change for more of them (an editor
/// saves in several steps) before reloading.
const SETTLE: Duration = Duration::from_millis(150);

/// What a reload applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    /// The policies added, removed and changed.
    pub changes: Changes,
    /// The keys whose new values wait for a restart.
    pub needing_restart: Vec<&'static str>,
}

/// Reloads one configuration file into one limiter.
#[derive(Debug)]
pub struct Reloader {
    limiter: Arc<Limiter>,
    /// The flags and environment of the start, which keep winning.
    given: Overrides,
    path: PathBuf,
    /// The settings in force (the start's restart-only settings stay).
    current: Mutex<Settings>,
}

impl Reloader {
    /// A reloader for `settings.config_file`; `None` without a file.
    pub fn new(limiter: Arc<Limiter>, given: Overrides, settings: Settings) -> Option<Reloader> {
        let path = settings.config_file.clone()?;
        Some(Reloader {
            limiter,
            given,
            path,
            current: Mutex::new(settings),
        })
    }

    /// The file reloaded.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reads, checks and applies the file once. Logs what happened and
    /// counts it in `ratewarden_config_reloads_total{result}`.
    ///
    /// # Errors
    /// Every error of the file; then nothing was changed.
    pub fn reload(&self) -> Result<Applied, ConfigErrors> {
        let result = ConfigFile::load(&self.path)
            .and_then(|file| Settings::resolve(self.given.clone(), Some(&file), None));
        let next = match result {
            Ok(next) => next,
            Err(errors) => {
                metrics::counter!("ratewarden_config_reloads_total", "result" => "error")
                    .increment(1);
                for e in errors.iter() {
                    tracing::error!(error = %e, "configuration reload refused; the previous configuration stays");
                }
                return Err(errors);
            }
        };
        let mut current = self.current.lock().unwrap_or_else(|p| p.into_inner());
        let needing_restart = current.needing_restart(&next);
        for key in &needing_restart {
            tracing::warn!(
                key,
                "configuration reload: this setting changes only after a restart"
            );
        }
        let changes = self.limiter.replace_policies(next.policies.clone());
        current.policies = next.policies;
        current.on_store_error = next.on_store_error;
        metrics::counter!("ratewarden_config_reloads_total", "result" => "ok").increment(1);
        tracing::info!(
            file = %self.path.display(),
            added = ?changes.added,
            removed = ?changes.removed,
            changed = ?changes.changed,
            "configuration reloaded; counters kept"
        );
        Ok(Applied {
            changes,
            needing_restart,
        })
    }

    /// Reloads on SIGHUP (`hangups`, from [`hangup_signals`]) and on every
    /// change of the file, until `stop`.
    pub async fn run(self: Arc<Self>, mut hangups: Hangups, stop: CancellationToken) {
        let (tx, mut changed) = mpsc::unbounded_channel::<()>();
        let watched = self.path.clone();
        let file_name = watched.file_name().map(ToOwned::to_owned);
        let mut watcher = match notify::recommended_watcher(
            move |event: notify::Result<notify::Event>| {
                let touches = event.is_ok_and(|e| {
                e.paths.is_empty()
                    || e.paths.iter().any(|p| p.file_name() == file_name.as_deref())
                    // A symlink swap in the directory (Kubernetes ConfigMaps).
                    || e.paths.iter().any(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("..")))
            });
                if touches {
                    let _ = tx.send(());
                }
            },
        ) {
            Ok(w) => Some(w),
            Err(e) => {
                tracing::warn!(error = %e, "cannot watch the configuration file; reload with SIGHUP");
                None
            }
        };
        let directory = watched
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."))
            .to_path_buf();
        if let Some(w) = watcher.as_mut() {
            if let Err(e) = w.watch(&directory, RecursiveMode::NonRecursive) {
                tracing::warn!(error = %e, dir = %directory.display(), "cannot watch the configuration directory; reload with SIGHUP");
            }
        }
        let mut last = std::fs::read(&self.path).ok();
        loop {
            let by_signal = tokio::select! {
                () = stop.cancelled() => break,
                Some(()) = changed.recv() => false,
                () = next_hangup(&mut hangups) => true,
            };
            if !by_signal {
                // Let the writer finish, and take every event it caused at once.
                tokio::time::sleep(SETTLE).await;
                while changed.try_recv().is_ok() {}
                let now = std::fs::read(&self.path).ok();
                if now == last {
                    continue;
                }
                last = now;
            } else {
                tracing::info!("SIGHUP: reloading the configuration");
                last = std::fs::read(&self.path).ok();
            }
            let this = Arc::clone(&self);
            // File IO and parsing off the async threads.
            let _ = tokio::task::spawn_blocking(move || this.reload()).await;
        }
        drop(watcher);
    }
}

/// Takes SIGHUP (`hangups`) when there is no file to reload (its default
/// action would end the process) and logs that there is nothing to do,
/// until `stop`.
pub async fn without_file(mut hangups: Hangups, stop: CancellationToken) {
    loop {
        tokio::select! {
            () = stop.cancelled() => break,
            () = next_hangup(&mut hangups) => {
                tracing::warn!("SIGHUP: no configuration file to reload (start with --config FILE)");
            }
        }
    }
}

/// SIGHUP, once listened for (`None`: listening failed, logged).
#[cfg(unix)]
pub type Hangups = Option<tokio::signal::unix::Signal>;
/// Nothing to listen for off Unix.
#[cfg(not(unix))]
pub type Hangups = ();

/// Starts listening for SIGHUP. Call it before serving, so that a SIGHUP
/// arriving at any time after is taken (its default action would end the
/// process).
#[cfg(unix)]
pub fn hangup_signals() -> Hangups {
    match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) {
        Ok(s) => Some(s),
        Err(e) => {
            tracing::warn!(error = %e, "cannot listen for SIGHUP");
            None
        }
    }
}

/// Nothing to listen for off Unix.
#[cfg(not(unix))]
pub fn hangup_signals() -> Hangups {}

#[cfg(unix)]
async fn next_hangup(hangups: &mut Hangups) {
    match hangups {
        Some(s) => {
            if s.recv().await.is_none() {
                std::future::pending::<()>().await;
            }
        }
        None => std::future::pending::<()>().await,
    }
}

#[cfg(not(unix))]
async fn next_hangup(_: &mut Hangups) {
    std::future::pending::<()>().await;
}
