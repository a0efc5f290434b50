//! Real `ratewarden serve` processes for black-box tests, killed on drop,
//! and `on_every_store!` (`every_store.rs`).

#![allow(dead_code)] // each test binary uses part of this

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[allow(unused_imports)] // each test binary uses part of this
pub use every_store::StoreKind;
use ratewarden_core::{Clock, SystemClock};
#[allow(unused_imports)] // each test binary uses part of this
pub use ratewarden_testkit::redis_server::{RedisServer, TEST_STORE_TIMEOUT_MS, free_port};

#[macro_use]
mod every_store;

/// One `ratewarden serve` process, its standard error kept in a file.
pub struct Instance {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    log: tempfile::NamedTempFile,
}

impl Instance {
    /// `ratewarden serve --listen 127.0.0.1:PORT --store STORE ARGS`, once
    /// it answers HTTP.
    ///
    /// On Redis, unless `args` set them, the store timeout is
    /// [`TEST_STORE_TIMEOUT_MS`] and the instance fails closed: tests count
    /// admissions exactly, so a call slowed by a busy machine must neither
    /// time out nor, should it all the same, pass as an uncounted 200 (it
    /// shows as a 503). A test about the failure policy names it.
    pub async fn start(store: &str, args: &[&str]) -> Instance {
        let mut all = vec!["--store", store];
        if store.starts_with("redis://") {
            if !args.contains(&"--store-timeout-ms") {
                all.extend(["--store-timeout-ms", TEST_STORE_TIMEOUT_MS]);
            }
            if !args.contains(&"--on-store-error") {
                all.extend(["--on-store-error", "closed"]);
            }
        }
        all.extend_from_slice(args);
        Instance::serve(&all, &[]).await
    }

    /// `ratewarden serve --listen 127.0.0.1:PORT ARGS` with `env` set,
    /// once it answers HTTP.
    pub async fn serve(args: &[&str], env: &[(&str, &str)]) -> Instance {
        Instance::serve_in(Path::new("."), args, env).await
    }

    /// [`Instance::serve`] with `dir` as the working directory.
    pub async fn serve_in(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Instance {
        let port = free_port();
        let log = tempfile::NamedTempFile::new().expect("a log file");
        let child = Command::new(env!("CARGO_BIN_EXE_ratewarden"))
            .current_dir(dir)
            .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
            .args(args)
            .env("RATEWARDEN_LOG", "info")
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(log.reopen().expect("the log file"))
            .spawn()
            .expect("ratewarden starts");
        let instance = Instance {
            child,
            base: format!("http://127.0.0.1:{port}"),
            log,
        };
        let client = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if client
                .get(format!("{}/status?key=probe", instance.base))
                .send()
                .await
                .is_ok()
            {
                return instance;
            }
            assert!(
                Instant::now() < deadline,
                "ratewarden did not answer; its log:\n{}",
                instance.log()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// What the process wrote to standard error so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log.path()).unwrap_or_default()
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends it `signal` (`HUP`, `TERM`) with `kill`.
    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([&format!("-{signal}"), &self.pid().to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill -{signal} failed");
    }

    /// Waits up to `limit` for `condition` on the log.
    pub async fn wait_for_log(&self, limit: Duration, condition: impl Fn(&str) -> bool) -> bool {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if condition(&self.log()) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        condition(&self.log())
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `ratewarden ARGS`, run to the end.
pub fn run(args: &[&str], dir: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_ratewarden"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("ratewarden runs")
}

/// A file of `dir`.
pub fn file(dir: &Path, name: &str) -> PathBuf {
    dir.join(name)
}

/// Waits for the next window when less than `needed` is left of the
/// current one, so that what a test counts from now on, in a fixed window
/// of length `window` (or of a multiple of it) on the real clock, falls in
/// one window. Windows are aligned to the Unix epoch as ratewarden's are
/// (docs/semantics.md): one of a day is a UTC day. The wait is at most
/// `needed` plus 50 ms, whatever the window.
///
/// `needed` is a generous bound on how long the test counts from here, and
/// shorter than `window`.
pub async fn avoid_window_edge(window: Duration, needed: Duration) {
    assert!(
        needed < window,
        "needed ({needed:?}) must be shorter than the window ({window:?})"
    );
    let window_ns = u64::try_from(window.as_nanos()).expect("a window of less than 584 years");
    let into = Duration::from_nanos(SystemClock.now().as_unix_nanos() % window_ns);
    let left = window - into;
    if left < needed {
        // The margin covers the service's own reading of the clock.
        tokio::time::sleep(left + Duration::from_millis(50)).await;
    }
}
