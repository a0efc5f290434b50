//! A reload applies only a file that has stopped changing: a writer that
//! truncates and then writes slowly (a shell's `>`, `cat >`, editors that
//! save in place, config tools) never has a middle state applied, by any
//! instance watching the file; an emptied file is refused until it is
//! filled; a reload that removes policies says so at WARN.
//!
//! Each test polls `GET /v1/policies` throughout and asserts that every
//! set seen is the old one or the new one. The writer's pause is five
//! times the settle interval, and nothing relies on it being short: the
//! watcher waits for the writer to close the file, however long it
//! takes. Waits end as soon as they are met (20 s at most).

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

mod common;

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::Instance;
use ratewarden_server::reload::SETTLE;
use serde_json::Value;

/// How long a change may take to apply.
const PICKUP: Duration = Duration::from_secs(20);

/// The policies a file defines, named after the defaults' `ping` and `check`.
type Names = BTreeSet<String>;

fn names(list: &[&str]) -> Names {
    list.iter().map(|n| (*n).to_owned()).collect()
}

/// A configuration file of one GCRA policy per name.
fn toml_of(list: &[&str]) -> String {
    list.iter()
        .map(|n| format!("[[policies]]\nname = \"{n}\"\nalgorithm = \"gcra\"\nlimit = 10\nwindow = \"1h\"\n\n"))
        .collect()
}

/// envoyproxy/ratelimit rules of domain `d`, one descriptor per key
/// (policies `d.KEY`).
fn yaml_of(keys: &[&str]) -> String {
    let mut text = String::from("domain: d\ndescriptors:\n");
    for k in keys {
        text.push_str(&format!(
            "  - key: {k}\n    rate_limit: {{unit: hour, requests_per_unit: 5}}\n"
        ));
    }
    text
}

/// The policies an instance lists, without the default `ping` and `check`.
async fn listed(client: &reqwest::Client, base: &str) -> Option<Names> {
    let list: Value = client
        .get(format!("{base}/v1/policies"))
        .send()
        .await
        .ok()?
        .json()
        .await
        .ok()?;
    Some(
        list["policies"]
            .as_array()?
            .iter()
            .filter_map(|p| p["name"].as_str())
            .filter(|n| !matches!(*n, "ping" | "check"))
            .map(str::to_owned)
            .collect(),
    )
}

/// Polls every instance's policies until stopped; every set seen.
struct Poller {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<Vec<(String, Names)>>,
}

impl Poller {
    fn start(bases: Vec<String>) -> Poller {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let task = tokio::spawn(async move {
            let client = reqwest::Client::new();
            let mut seen: Vec<(String, Names)> = Vec::new();
            while !flag.load(Ordering::SeqCst) {
                for base in &bases {
                    if let Some(set) = listed(&client, base).await
                        && !seen.iter().any(|(b, s)| b == base && *s == set)
                    {
                        seen.push((base.clone(), set));
                    }
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            seen
        });
        Poller { stop, task }
    }

    async fn finish(self) -> Vec<(String, Names)> {
        self.stop.store(true, Ordering::SeqCst);
        self.task.await.unwrap()
    }
}

/// Waits up to [`PICKUP`] for `base` to list `want`.
async fn until_listed(base: &str, want: &Names) -> bool {
    let client = reqwest::Client::new();
    let deadline = Instant::now() + PICKUP;
    while Instant::now() < deadline {
        if listed(&client, base).await.as_ref() == Some(want) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

/// Writes `text` as a shell's `>` does with a slow producer: truncates
/// the file, writes the first `head` bytes, pauses five settle intervals,
/// writes the rest, closes. On a thread of its own.
async fn write_slowly(path: &Path, text: String, head: usize) {
    let path = path.to_path_buf();
    tokio::task::spawn_blocking(move || {
        let mut file = std::fs::File::create(&path).unwrap();
        file.write_all(&text.as_bytes()[..head]).unwrap();
        file.flush().unwrap();
        std::thread::sleep(SETTLE * 5);
        file.write_all(&text.as_bytes()[head..]).unwrap();
    })
    .await
    .unwrap();
}

fn assert_only(seen: &[(String, Names)], allowed: &[&Names], logs: &str) {
    for (base, set) in seen {
        assert!(
            allowed.contains(&set),
            "{base} applied a middle state {set:?}; logs:\n{logs}"
        );
    }
}

#[tokio::test]
async fn a_slow_writer_is_never_applied_half_written_by_two_instances() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("rw.toml");
    let old = ["logins", "global", "per-client", "api"];
    let new = ["logins", "global", "per-client", "api", "new1"];
    std::fs::write(&config, toml_of(&old)).unwrap();
    let path = config.to_str().unwrap();
    let a = Instance::start("memory", &["--config", path]).await;
    let b = Instance::start("memory", &["--config", path]).await;
    let poller = Poller::start(vec![a.base.clone(), b.base.clone()]);
    // The head is the first policy: a file that parses, and would remove
    // the other three.
    let text = toml_of(&new);
    let head = toml_of(&old[..1]).len();
    write_slowly(&config, text, head).await;
    let (old, new) = (names(&old), names(&new));
    let logs = || format!("{}\n---\n{}", a.log(), b.log());
    assert!(until_listed(&a.base, &new).await, "{}", logs());
    assert!(until_listed(&b.base, &new).await, "{}", logs());
    let seen = poller.finish().await;
    assert_only(&seen, &[&old, &new], &logs());
    assert!(!logs().contains("policies removed"), "{}", logs());
}

#[tokio::test]
async fn an_emptied_file_is_refused_until_it_is_filled_and_removals_warn() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("rw.toml");
    let old = ["logins", "global", "per-client"];
    let new = ["logins", "global"];
    std::fs::write(&config, toml_of(&old)).unwrap();
    let app = Instance::start("memory", &["--config", config.to_str().unwrap()]).await;
    let poller = Poller::start(vec![app.base.clone()]);
    // `: > rw.toml`: truncated and closed.
    drop(std::fs::File::create(&config).unwrap());
    assert!(
        app.wait_for_log(PICKUP, |l| l.contains("a file was emptied"))
            .await,
        "the empty file is refused with a warning:\n{}",
        app.log()
    );
    std::fs::write(&config, toml_of(&new)).unwrap();
    let (old, new) = (names(&old), names(&new));
    assert!(until_listed(&app.base, &new).await, "{}", app.log());
    let seen = poller.finish().await;
    assert_only(&seen, &[&old, &new], &app.log());
    let log = app.log();
    let refused = log
        .lines()
        .find(|l| l.contains("a file was emptied"))
        .unwrap();
    assert!(refused.contains("WARN"), "{refused}");
    let removal = log
        .lines()
        .find(|l| l.contains("configuration reloaded"))
        .unwrap_or_default();
    assert!(
        removal.contains("WARN") && removal.contains(r#"removed=["per-client"]"#),
        "a removal is named at WARN: {removal}"
    );
}

#[tokio::test]
async fn a_slowly_written_envoy_rules_file_is_never_applied_half_written() {
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("rules");
    std::fs::create_dir(&rules).unwrap();
    let file: PathBuf = rules.join("a.yaml");
    let old = ["k1", "k2", "k3"];
    let new = ["k1", "k2", "k3", "k4"];
    std::fs::write(&file, yaml_of(&old)).unwrap();
    let args = ["--envoy-config", rules.to_str().unwrap()];
    let a = Instance::start("memory", &args).await;
    let b = Instance::start("memory", &args).await;
    let poller = Poller::start(vec![a.base.clone(), b.base.clone()]);
    let text = yaml_of(&new);
    let head = yaml_of(&old[..1]).len();
    write_slowly(&file, text, head).await;
    let policies = |keys: &[&str]| -> Names { keys.iter().map(|k| format!("d.{k}")).collect() };
    let (old, new) = (policies(&old), policies(&new));
    let logs = || format!("{}\n---\n{}", a.log(), b.log());
    assert!(until_listed(&a.base, &new).await, "{}", logs());
    assert!(until_listed(&b.base, &new).await, "{}", logs());
    // Truncated, then the old rules back: the empty file is never applied.
    drop(std::fs::File::create(&file).unwrap());
    assert!(
        a.wait_for_log(PICKUP, |l| l.contains("a file was emptied"))
            .await,
        "{}",
        logs()
    );
    std::fs::write(&file, yaml_of(&["k1", "k2", "k3"])).unwrap();
    assert!(until_listed(&a.base, &old).await, "{}", logs());
    assert!(until_listed(&b.base, &old).await, "{}", logs());
    let seen = poller.finish().await;
    assert_only(&seen, &[&old, &new], &logs());
}
