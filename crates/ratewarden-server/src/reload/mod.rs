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

//!
//! A reload applies only files that have stopped changing (`settle.rs`:
//! no writer has them open, they were quiet for [`SETTLE`], and two reads
//! [`SETTLE`] apart match), and refuses a file emptied since the last
//! reload: a truncation in progress is never taken for the new
//! configuration. A reload that removes policies says so at WARN.

mod settle;
mod source;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use notify::{RecursiveMode, Watcher};
use ratewarden_config::envoy::EnvoyConfig;
use ratewarden_config::{ConfigErrors, ConfigFile, Overrides, Settings};
use ratewarden_envoy::RateLimitService;
use ratewarden_limiter::{Changes, Limiter};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

pub use settle::{SETTLE, WRITER_PATIENCE};
use settle::{Wait, Watch};
pub use source::Baseline;
use source::{Snapshot, Source, emptied, snapshot_of, sources_of};

/// What a reload applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    /// The policies added, removed and changed (the Envoy rules' limits
    /// included).
    pub changes: Changes,
    /// The keys whose new values wait for a restart.
    pub needing_restart: Vec<&'static str>,
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

/// The watcher in place ([`Reloader::watch`]) and its changes, for
/// [`Reloader::run`].
#[derive(Debug)]
pub struct Watching {
    watcher: Option<notify::RecommendedWatcher>,
    changes: mpsc::UnboundedReceiver<settle::Change>,
    /// To report a change made before the watcher was in place.
    missed: mpsc::UnboundedSender<settle::Change>,
}

/// A configuration read and resolved, not applied yet.
#[derive(Debug)]
struct Prepared {
    next: Settings,
    /// The Envoy rules' location the file names, if it names one.
    envoy_in_file: Option<PathBuf>,
}

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

    /// Reads, checks and applies everything once, as it is now (the
    /// watcher's rules of when a file is finished are [`Reloader::run`]'s).
    /// Logs what happened and counts it in
    /// `ratewarden_config_reloads_total{result}`.
    ///
    /// # Errors
    /// Every error found; then nothing was changed.
    pub fn reload(&self) -> Result<Applied, ConfigErrors> {
        match self.read() {
            Ok(prepared) => Ok(self.apply(prepared)),
            Err(errors) => {
                self.refuse(&errors);
                Err(errors)
            }
        }
    }

    /// Reads and resolves everything, changing nothing.
    fn read(&self) -> Result<Prepared, ConfigErrors> {
        let file = self
            .config_file
            .as_deref()
            .map(ConfigFile::load)
            .transpose()?;
        let envoy_in_file = file.as_ref().and_then(|f| f.overrides.envoy_config.clone());
        let next = {
            let current = self.current.lock().unwrap_or_else(|p| p.into_inner());
            current.resolve_again(self.given.clone(), file.as_ref())?
        };
        Ok(Prepared {
            next,
            envoy_in_file,
        })
    }

    /// Logs and counts a refused reload.
    fn refuse(&self, errors: &ConfigErrors) {
        metrics::counter!("ratewarden_config_reloads_total", "result" => "error").increment(1);
        for e in errors.iter() {
            tracing::error!(error = %e, "configuration reload refused; the previous configuration stays");
        }
    }

    /// Swaps in a configuration [`Reloader::read`] made, and logs what
    /// changed: at WARN when policies were removed (a request naming one
    /// is refused from now on).
    fn apply(&self, prepared: Prepared) -> Applied {
        let Prepared {
            next,
            envoy_in_file,
        } = prepared;
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
        let from = from.join(", ");
        if changes.removed.is_empty() {
            tracing::info!(
                %from,
                added = ?changes.added,
                removed = ?changes.removed,
                changed = ?changes.changed,
                "configuration reloaded; counters kept"
            );
        } else {
            tracing::warn!(
                %from,
                added = ?changes.added,
                removed = ?changes.removed,
                changed = ?changes.changed,
                "configuration reloaded; policies removed: requests naming them are refused from now on"
            );
        }
        Applied {
            changes,
            needing_restart,
        }
    }

    /// Refuses, with a WARN, a reload that finds files emptied since the
    /// last one applied; whether it did.
    fn refuse_emptied(&self, applied: &[Snapshot], now: &[Snapshot]) -> bool {
        let emptied = emptied(applied, now);
        if emptied.is_empty() {
            return false;
        }
        metrics::counter!("ratewarden_config_reloads_total", "result" => "error").increment(1);
        let files: Vec<String> = emptied.iter().map(|p| p.display().to_string()).collect();
        tracing::warn!(
            files = %files.join(", "),
            "configuration reload refused: a file was emptied (a truncation whose new contents \
             are still to come?); the previous configuration stays. To remove everything a file \
             holds, write a comment in it, or remove it from a rules directory"
        );
        true
    }

    /// Places the watcher on the directories of what it reloads. Call it
    /// before serving, so that once the service answers, every change is
    /// seen: a writer that had opened the file before the watcher was in
    /// place could not be told from a finished one.
    pub fn watch(&self) -> Watching {
        let (tx, changes) = mpsc::unbounded_channel::<settle::Change>();
        let missed = tx.clone();
        let sources = self.sources.clone();
        let mut watcher = match notify::recommended_watcher(
            move |event: notify::Result<notify::Event>| {
                let Ok(event) = event else { return };
                let concerns = |p: &Path| sources.iter().any(|s| s.touched_by(p));
                for change in settle::classify(&event, concerns) {
                    let _ = tx.send(change);
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
        Watching {
            watcher,
            changes,
            missed,
        }
    }

    /// Reloads on SIGHUP (`hangups`, from [`hangup_signals`]) and on every
    /// change of what it reloads, until `stop`, applying only files that
    /// have stopped changing (the module's rules). A change made after
    /// the [`Baseline`] was taken but before the watcher is in place is
    /// applied too.
    pub async fn run(
        self: Arc<Self>,
        watching: Watching,
        mut hangups: Hangups,
        stop: CancellationToken,
    ) {
        let Watching {
            watcher,
            changes,
            missed,
        } = watching;
        let snapshot = || snapshot_of(&self.sources);
        // Compared with what was read at start, not with what is there
        // now: a change before the watch was placed sent no event.
        let mut seen = self.loaded.0.clone();
        let mut applied = seen.clone();
        if snapshot() != seen {
            let _ = missed.send(settle::Change::Other);
        }
        drop(missed);
        let mut watch = Watch::new(changes);
        loop {
            if watch.next(&mut hangups, &stop).await == Wait::Stop {
                break;
            }
            // Until the files are finished, then read twice alike.
            let stable = loop {
                if watch.settle(&mut hangups, &stop).await == Wait::Stop {
                    break None;
                }
                let first = snapshot();
                if first == seen && !watch.signalled {
                    break Some(None);
                }
                match watch.quiet_for(SETTLE, &mut hangups, &stop).await {
                    Wait::Stop => break None,
                    Wait::Changed => continue,
                    Wait::Done => {}
                }
                let this = Arc::clone(&self);
                // File IO and parsing off the async threads.
                let Ok(read) = tokio::task::spawn_blocking(move || this.read()).await else {
                    break Some(None);
                };
                if snapshot() == first && !watch.changed_meanwhile() {
                    break Some(Some((first, read)));
                }
            };
            let Some(stable) = stable else { break };
            if watch.signalled {
                tracing::info!("SIGHUP: reloading the configuration");
                watch.signalled = false;
            }
            let Some((now, read)) = stable else { continue };
            seen = now.clone();
            if self.refuse_emptied(&applied, &now) {
                continue;
            }
            match read {
                Ok(prepared) => {
                    self.apply(prepared);
                    applied = now;
                }
                Err(errors) => self.refuse(&errors),
            }
        }
        drop(watcher);
    }
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
    use std::time::Duration;

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

    /// A watcher placed by the reload task once it runs would take its
    /// first snapshot then: a file replaced in between sends no event and
    /// matches that snapshot, so the change would never be applied. Here
    /// the change comes after the file was read and before the reloader
    /// is even made, the widest the gap can be.
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
        let watching = reloader.watch();
        let running = tokio::spawn(Arc::new(reloader).run(watching, None, stop.clone()));
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
