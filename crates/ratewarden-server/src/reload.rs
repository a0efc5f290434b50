//! Reloading the configuration: the TOML file (`--config`) and the Envoy
//! rules (`--envoy-config`, a file or a directory), on SIGHUP and when
//! they change (a watcher on their directories, so editors that write a
//! new file and rename it, and Kubernetes' symlink swaps, are seen too;
//! picked up within a fraction of a second).
//!
//! A reload reads everything again, checks it whole and resolves it with
//! the same flags and environment as at start; only then are the new
//! policy set and Envoy rules swapped in, atomically each. Anything broken
//! changes nothing: the old configuration keeps serving and every error
//! is logged. Counters survive (state belongs to the policy name,
//! algorithm and key). Settings that cannot change while running (listen
//! addresses, store, where the Envoy rules are, …) are logged as needing
//! a restart and otherwise left alone.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use notify::{RecursiveMode, Watcher};
use ratewarden_config::envoy::EnvoyConfig;
use ratewarden_config::{ConfigErrors, ConfigFile, Overrides, Settings};
use ratewarden_envoy::RateLimitService;
use ratewarden_limiter::{Changes, Limiter};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// How long the watcher waits after a change for more of them (an editor
/// saves in several steps) before reloading.
const SETTLE: Duration = Duration::from_millis(150);

/// What a reload applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    /// The policies added, removed and changed (the Envoy rules' limits
    /// included).
    pub changes: Changes,
    /// The keys whose new values wait for a restart.
    pub needing_restart: Vec<&'static str>,
}

/// What is reloaded: a file, or a directory of YAML files.
#[derive(Debug, Clone)]
enum Source {
    File(PathBuf),
    /// The directory as given, and the names the watcher may report it
    /// by: absolute, and with symlinks resolved.
    Directory(PathBuf, Vec<PathBuf>),
}

impl Source {
    fn of(path: &Path) -> Source {
        if path.is_dir() {
            // The watcher reports absolute paths (regression: a relative
            // directory such as `rules/` never matched them, so editing
            // its files reloaded nothing).
            let names = [std::path::absolute(path), path.canonicalize()]
                .into_iter()
                .flatten()
                .collect();
            Source::Directory(path.to_path_buf(), names)
        } else {
            Source::File(path.to_path_buf())
        }
    }

    fn path(&self) -> &Path {
        match self {
            Source::File(p) | Source::Directory(p, _) => p,
        }
    }

    /// The directory to watch.
    fn directory(&self) -> PathBuf {
        match self {
            Source::Directory(d, _) => d.clone(),
            Source::File(f) => f
                .parent()
                .filter(|d| !d.as_os_str().is_empty())
                .unwrap_or(Path::new("."))
                .to_path_buf(),
        }
    }

    /// Whether a change of `path` concerns this source. A Kubernetes
    /// ConfigMap swaps a `..data` symlink in the directory.
    fn touched_by(&self, path: &Path) -> bool {
        let name = path.file_name().map(|n| n.to_string_lossy());
        let k8s_swap = name.as_ref().is_some_and(|n| n.starts_with(".."));
        match self {
            Source::File(f) => k8s_swap || f.file_name() == path.file_name(),
            Source::Directory(d, names) => {
                let is_it = |p: &Path| p == d || names.iter().any(|n| n == p);
                let inside = path.parent().is_some_and(is_it) || is_it(path);
                let yaml = name
                    .as_ref()
                    .is_some_and(|n| n.ends_with(".yaml") || n.ends_with(".yml"));
                inside && (yaml || k8s_swap)
            }
        }
    }

    /// The contents, to skip events that changed nothing.
    fn snapshot(&self) -> Vec<Snapshot> {
        match self {
            Source::File(f) => vec![(f.clone(), std::fs::read(f).ok())],
            Source::Directory(d, _) => {
                let mut files: Vec<PathBuf> = std::fs::read_dir(d)
                    .into_iter()
                    .flatten()
                    .flatten()
                    .map(|e| e.path())
                    .filter(|p| self.touched_by(p) && p.is_file())
                    .collect();
                files.sort();
                files
                    .into_iter()
                    .map(|p| {
                        let bytes = std::fs::read(&p).ok();
                        (p, bytes)
                    })
                    .collect()
            }
        }
    }
}

/// Reloads the configuration file and the Envoy rules into the limiter
/// and the Envoy service.
#[derive(Debug)]
pub struct Reloader {
    limiter: Arc<Limiter>,
    envoy: Arc<RateLimitService>,
    /// The flags and environment of the start, which keep winning; the
    /// Envoy rules' location is pinned to the start's.
    given: Overrides,
    config_file: Option<PathBuf>,
    sources: Vec<Source>,
    /// The settings in force (the start's restart-only settings stay).
    current: Mutex<Settings>,
    /// What the sources held when the configuration was read at start,
    /// which is what the watcher compares with once it is in place.
    loaded: Baseline,
}

/// What the configuration file and the Envoy rules held when they were
/// read at start. Take it right after reading them ([`Baseline::take`]),
/// before anything slow (opening the store, binding): [`Reloader::run`]
/// applies any difference it finds once its watcher is in place, so a
/// change made meanwhile, which no watcher saw, is not lost.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Baseline(Vec<Snapshot>);

impl Baseline {
    /// The contents of `settings.config_file` and `settings.envoy_config`
    /// (every YAML file of a directory) now; an unreadable file counts as
    /// its own state.
    pub fn take(settings: &Settings) -> Baseline {
        Baseline(snapshot_of(&sources_of(settings)))
    }
}

/// A file and its contents (`None`: unreadable).
type Snapshot = (PathBuf, Option<Vec<u8>>);

impl Reloader {
    /// A reloader for `settings.config_file` and `settings.envoy_config`,
    /// which held `loaded` when they were read; `None` when there is
    /// neither.
    pub fn new(
        limiter: Arc<Limiter>,
        envoy: Arc<RateLimitService>,
        given: Overrides,
        settings: Settings,
        loaded: Baseline,
    ) -> Option<Reloader> {
        let config_file = settings.config_file.clone();
        let sources = sources_of(&settings);
        if sources.is_empty() {
            return None;
        }
        let given = Overrides {
            envoy_config: settings.envoy_config.clone(),
            ..given
        };
        Some(Reloader {
            limiter,
            envoy,
            given,
            config_file,
            sources,
            current: Mutex::new(settings),
            loaded,
        })
    }

    /// What is reloaded: the configuration file, then the Envoy rules.
    pub fn paths(&self) -> Vec<&Path> {
        self.sources.iter().map(Source::path).collect()
    }

    /// Reads, checks and applies everything once. Logs what happened and
    /// counts it in `ratewarden_config_reloads_total{result}`.
    ///
    /// # Errors
    /// Every error found; then nothing was changed.
    pub fn reload(&self) -> Result<Applied, ConfigErrors> {
        let file = self
            .config_file
            .as_deref()
            .map(ConfigFile::load)
            .transpose();
        let result = file.and_then(|file| {
            let moved = file.as_ref().and_then(|f| f.overrides.envoy_config.clone());
            let current = self.current.lock().unwrap_or_else(|p| p.into_inner());
            current
                .resolve_again(self.given.clone(), file.as_ref())
                .map(|s| (s, moved))
        });
        let (next, envoy_in_file) = match result {
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
        let mut needing_restart = current.needing_restart(&next);
        if envoy_in_file.is_some_and(|p| Some(p) != current.envoy_config) {
            needing_restart.push("envoy_config");
        }
        for key in &needing_restart {
            tracing::warn!(
                key,
                "configuration reload: this setting changes only after a restart"
            );
        }
        // The rules hold their own policies; the set decides pruning.
        let rules = next
            .envoy
            .clone()
            .unwrap_or_else(|| Arc::new(EnvoyConfig::default()));
        if let Some(path) = &current.envoy_config {
            crate::envoy_setup::report_rules(path, &rules);
        }
        self.envoy
            .reload(rules, next.on_store_error, next.envoy_options.clone());
        let changes = self.limiter.replace_policies(next.policies.clone());
        current.policies = next.policies;
        current.envoy = next.envoy;
        current.on_store_error = next.on_store_error;
        current.envoy_options = next.envoy_options;
        metrics::counter!("ratewarden_config_reloads_total", "result" => "ok").increment(1);
        let from: Vec<String> = self
            .paths()
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        tracing::info!(
            from = %from.join(", "),
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
    /// change of what it reloads, until `stop`. A change made after the
    /// [`Baseline`] was taken but before the watcher is in place is
    /// applied too (regression: such a change was lost, and nothing
    /// reloaded until the next one).
    pub async fn run(self: Arc<Self>, mut hangups: Hangups, stop: CancellationToken) {
        let (tx, mut changed) = mpsc::unbounded_channel::<()>();
        let missed = tx.clone();
        let sources = self.sources.clone();
        let mut watcher = match notify::recommended_watcher(
            move |event: notify::Result<notify::Event>| {
                let touches = event.is_ok_and(|e| {
                    e.paths.is_empty()
                        || e.paths
                            .iter()
                            .any(|p| sources.iter().any(|s| s.touched_by(p)))
                });
                if touches {
                    let _ = tx.send(());
                }
            },
        ) {
            Ok(w) => Some(w),
            Err(e) => {
                tracing::warn!(error = %e, "cannot watch the configuration; reload with SIGHUP");
                None
            }
        };
        if let Some(w) = watcher.as_mut() {
            for source in &self.sources {
                let dir = source.directory();
                if let Err(e) = w.watch(&dir, RecursiveMode::NonRecursive) {
                    tracing::warn!(error = %e, dir = %dir.display(), "cannot watch this directory; reload with SIGHUP");
                }
            }
        }
        let snapshot = || snapshot_of(&self.sources);
        // Compared with what was read at start, not with what is there
        // now: a change before the watch was placed sent no event.
        let mut last = self.loaded.0.clone();
        if snapshot() != last {
            let _ = missed.send(());
        }
        drop(missed);
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
                let now = snapshot();
                if now == last {
                    continue;
                }
                last = now;
            } else {
                tracing::info!("SIGHUP: reloading the configuration");
                last = snapshot();
            }
            let this = Arc::clone(&self);
            // File IO and parsing off the async threads.
            let _ = tokio::task::spawn_blocking(move || this.reload()).await;
        }
        drop(watcher);
    }
}

/// The configuration file, then the Envoy rules, of `settings`.
fn sources_of(settings: &Settings) -> Vec<Source> {
    settings
        .config_file
        .iter()
        .chain(&settings.envoy_config)
        .map(|p| Source::of(p))
        .collect()
}

/// The contents of every source, in order.
fn snapshot_of(sources: &[Source]) -> Vec<Snapshot> {
    sources.iter().flat_map(Source::snapshot).collect()
}

/// Takes SIGHUP (`hangups`) when there is nothing to reload (its default
/// action would end the process) and logs that there is nothing to do,
/// until `stop`.
pub async fn without_file(mut hangups: Hangups, stop: CancellationToken) {
    loop {
        tokio::select! {
            () = stop.cancelled() => break,
            () = next_hangup(&mut hangups) => {
                tracing::warn!("SIGHUP: nothing to reload (start with --config FILE or --envoy-config PATH)");
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

    use super::*;
    use ratewarden_core::clock::SystemClock;
    use ratewarden_core::memory::MemoryStore;

    fn policies(limit: u64) -> String {
        format!(
            "[[policies]]\nname = \"api\"\nalgorithm = \"gcra\"\nlimit = {limit}\nwindow = \"1h\"\n"
        )
    }

    fn limit_of(limiter: &Limiter) -> Option<u64> {
        limiter
            .policies()
            .get("api")
            .map(|p| p.policy.quota.limit())
    }

    /// Regression (a clean-clone CI run): the watcher was placed by the
    /// reload task once it ran, and it took its first snapshot then. A
    /// file replaced in between sent no event and matched that snapshot,
    /// so the change was never applied. Here the change comes after the
    /// file was read and before the reloader is even made, the widest
    /// the gap can be.
    #[cfg(unix)] // `run`'s SIGHUP stream
    #[tokio::test]
    async fn a_change_before_the_watcher_is_in_place_is_applied() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rw.toml");
        std::fs::write(&path, policies(3)).unwrap();
        let given = Overrides::default();
        let file = ConfigFile::load(&path).unwrap();
        let settings = Settings::resolve(given.clone(), Some(&file), None).unwrap();
        let loaded = Baseline::take(&settings);
        std::fs::write(&path, policies(2)).unwrap();
        let limiter = Arc::new(Limiter::new(
            Arc::new(MemoryStore::new()),
            Arc::new(SystemClock),
            settings.policies.clone(),
        ));
        let envoy = Arc::new(RateLimitService::new(
            Arc::clone(&limiter),
            Arc::new(EnvoyConfig::default()),
            settings.on_store_error,
        ));
        let reloader = Reloader::new(Arc::clone(&limiter), envoy, given, settings, loaded).unwrap();
        assert_eq!(limit_of(&limiter), Some(3));

        let stop = CancellationToken::new();
        let running = tokio::spawn(Arc::new(reloader).run(None, stop.clone()));
        // Generous for a loaded machine; it returns as soon as applied.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while limit_of(&limiter) != Some(2) && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        stop.cancel();
        running.await.unwrap();
        assert_eq!(limit_of(&limiter), Some(2), "the change was applied");
    }
}
