//! `ratewarden serve --config FILE` as a real process on every store
//! (memory, SQLite, a Redis of the test's own): reloads on file change
//! and on SIGHUP keep counters, a broken file changes nothing, and
//! `check-config` and `serve` name every error with FILE:LINE:COLUMN.
//!
//! Windows are an hour long; a test that counts in a fixed window first
//! waits out the last seconds of one (`avoid_window_edge`), since the
//! count starts over at the edge. The other waits are for the reload
//! itself. The watcher applies a change within a fraction of a second;
//! the tests allow 10 seconds, so that a loaded machine fails none of
//! them (each wait ends as soon as it is met).

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

#[macro_use]
mod common;

use std::path::Path;
use std::time::Duration;

use common::{Instance, RedisServer, StoreKind, avoid_window_edge, run};
use serde_json::{Value, json};

/// How long a change of the file may take to apply.
const PICKUP: Duration = Duration::from_secs(10);

fn policies(api_limit: u64, extra: &str) -> String {
    format!(
        r#"
[[policies]]
name = "api"
algorithm = "sliding_log"
limit = {api_limit}
window = "1h"
{extra}"#
    )
}

/// Writes `text` the way editors do: a new file renamed over the old.
fn replace(path: &Path, text: &str) {
    let tmp = path.with_extension("toml.tmp");
    std::fs::write(&tmp, text).expect("write the new file");
    std::fs::rename(&tmp, path).expect("rename it into place");
}

async fn check(client: &reqwest::Client, base: &str, policy: &str) -> (u16, Value) {
    let r = client
        .post(format!("{base}/v1/check"))
        .json(&json!({ "policy": policy, "key": "alice" }))
        .send()
        .await
        .expect("POST /v1/check");
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

async fn limit_of(client: &reqwest::Client, base: &str, policy: &str) -> Option<u64> {
    let list: Value = client
        .get(format!("{base}/v1/policies"))
        .send()
        .await
        .ok()?
        .json()
        .await
        .ok()?;
    list["policies"]
        .as_array()?
        .iter()
        .find(|p| p["name"] == policy)
        .and_then(|p| p["limit"].as_u64())
}

/// Waits up to [`PICKUP`] for policy `policy` to have limit `limit`.
async fn until_limit(client: &reqwest::Client, base: &str, policy: &str, limit: u64) -> bool {
    let deadline = std::time::Instant::now() + PICKUP;
    while std::time::Instant::now() < deadline {
        if limit_of(client, base, policy).await == Some(limit) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

/// The store argument for `kind`, with what must live as long as the test.
fn store(kind: StoreKind, dir: &Path) -> (String, Option<RedisServer>) {
    match kind {
        StoreKind::Memory => ("memory".into(), None),
        StoreKind::Sqlite => (format!("sqlite:{}", dir.join("rw.db").display()), None),
        StoreKind::Redis => {
            let redis = RedisServer::start();
            (redis.url(), Some(redis))
        }
    }
}

async fn reload_on_change_keeps_counters_and_a_broken_file_changes_nothing(kind: StoreKind) {
    let dir = tempfile::tempdir().unwrap();
    let (store, _redis) = store(kind, dir.path());
    let config = dir.path().join("rw.toml");
    std::fs::write(&config, policies(3, "")).unwrap();
    let app = Instance::start(&store, &["--config", config.to_str().unwrap()]).await;
    let client = reqwest::Client::new();
    for _ in 0..2 {
        assert_eq!(check(&client, &app.base, "api").await.0, 200);
    }

    // A lower limit and a new policy: the two stored events meet it.
    let extra =
        "\n[[policies]]\nname = \"new\"\nalgorithm = \"gcra\"\nlimit = 5\nwindow = \"1h\"\n";
    replace(&config, &policies(2, extra));
    assert!(
        until_limit(&client, &app.base, "api", 2).await,
        "the change was not picked up within {PICKUP:?}; log:\n{}",
        app.log()
    );
    let (status, body) = check(&client, &app.base, "api").await;
    assert_eq!(status, 429, "counters survive the reload: {body}");
    assert_eq!(check(&client, &app.base, "new").await.0, 200);

    // A broken file: refused whole, the old policies keep serving.
    replace(
        &config,
        &policies(9, "\n[[policies]]\nname = \"bad\"\nlimit = -1\n"),
    );
    assert!(
        app.wait_for_log(PICKUP, |log| log.contains("configuration reload refused"))
            .await,
        "no refusal logged:\n{}",
        app.log()
    );
    let log = app.log();
    assert!(
        log.contains("rw.toml:"),
        "the error names the file and line:\n{log}"
    );
    assert_eq!(
        limit_of(&client, &app.base, "api").await,
        Some(2),
        "nothing changed"
    );
    assert_eq!(check(&client, &app.base, "new").await.0, 200);

    // Mended: applied again, still with the counts; a setting that needs
    // a restart is reported and left alone.
    replace(
        &config,
        &format!("max_body_bytes = 100\n{}", policies(4, "")),
    );
    assert!(
        until_limit(&client, &app.base, "api", 4).await,
        "log:\n{}",
        app.log()
    );
    let log = app.log();
    assert!(
        log.contains("only after a restart") && log.contains("max_body_bytes"),
        "{log}"
    );
    assert_eq!(check(&client, &app.base, "api").await.0, 200, "2 of 4 used");
    assert_eq!(check(&client, &app.base, "api").await.0, 200);
    assert_eq!(check(&client, &app.base, "api").await.0, 429);
    assert_eq!(check(&client, &app.base, "new").await.0, 404, "removed");
}

/// Every algorithm through `/v1/check` of the real process, a batch denied
/// by one policy charging none, shadow and unknown policies, bad bodies.
async fn every_algorithm_and_all_or_nothing_over_a_real_process(kind: StoreKind) {
    let dir = tempfile::tempdir().unwrap();
    let (store, _redis) = store(kind, dir.path());
    let mut config = String::new();
    for algorithm in ["fixed_window", "sliding_log", "sliding_window", "gcra"] {
        config.push_str(&format!(
            "[[policies]]\nname = \"{algorithm}\"\nalgorithm = \"{algorithm}\"\nlimit = 2\nwindow = \"1h\"\n\n"
        ));
    }
    config.push_str("[[policies]]\nname = \"dry\"\nalgorithm = \"gcra\"\nlimit = 1\nwindow = \"1h\"\nshadow = true\n");
    let path = dir.path().join("rw.toml");
    std::fs::write(&path, config).unwrap();
    let app = Instance::start(&store, &["--config", path.to_str().unwrap()]).await;
    let client = reqwest::Client::new();
    avoid_window_edge(Duration::from_secs(3600), Duration::from_secs(30)).await;
    for algorithm in ["fixed_window", "sliding_log", "sliding_window", "gcra"] {
        assert_eq!(
            check(&client, &app.base, algorithm).await.0,
            200,
            "{algorithm}"
        );
        assert_eq!(
            check(&client, &app.base, algorithm).await.0,
            200,
            "{algorithm}"
        );
        let (status, body) = check(&client, &app.base, algorithm).await;
        assert_eq!(status, 429, "{algorithm}: {body}");
        assert_eq!(body["violated-policies"], json!([algorithm]));
    }
    let post = |body: Value| {
        client
            .post(format!("{}/v1/check", app.base))
            .json(&body)
            .send()
    };
    // gcra is used up for alice: the batch is denied and charges fixed_window nothing.
    let batch = json!({"checks": [
        {"policy": "fixed_window", "key": "bob"},
        {"policy": "gcra", "key": "alice"},
        {"policy": "dry", "key": "x"}
    ]});
    assert_eq!(post(batch.clone()).await.unwrap().status(), 429);
    let status: Value = client
        .get(format!(
            "{}/v1/status?policy=fixed_window&key=bob",
            app.base
        ))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(status["remaining"], 2, "the denied batch charged nothing");
    let r = post(json!({"policy": "nope", "key": "k"})).await.unwrap();
    assert_eq!(r.status(), 404);
    let r = client
        .post(format!("{}/v1/check", app.base))
        .header("Content-Type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    assert_eq!(
        r.headers()["content-type"].to_str().unwrap(),
        "application/problem+json"
    );
    let r = post(json!({"policy": "dry", "key": "k", "cost": 0}))
        .await
        .unwrap();
    assert_eq!(r.status(), 422);
}

/// SIGHUP rereads a file whose changes the watcher cannot see (a symlink
/// to a file elsewhere, edited in place).
async fn sighup_reloads(kind: StoreKind) {
    let dir = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let (store, _redis) = store(kind, dir.path());
    let target = elsewhere.path().join("real.toml");
    std::fs::write(&target, policies(3, "")).unwrap();
    let link = dir.path().join("rw.toml");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let app = Instance::start(&store, &["--config", link.to_str().unwrap()]).await;
    let client = reqwest::Client::new();
    assert_eq!(check(&client, &app.base, "api").await.0, 200);
    std::fs::write(&target, policies(1, "")).unwrap();
    app.signal("HUP");
    assert!(
        until_limit(&client, &app.base, "api", 1).await,
        "log:\n{}",
        app.log()
    );
    assert_eq!(
        check(&client, &app.base, "api").await.0,
        429,
        "the event is kept"
    );
    assert!(app.log().contains("SIGHUP"), "{}", app.log());
}

on_every_store!(
    every_algorithm_and_all_or_nothing_over_a_real_process,
    reload_on_change_keeps_counters_and_a_broken_file_changes_nothing,
    sighup_reloads,
);

/// Regression: with a relative rules directory (`rules/`), the watcher's
/// absolute paths never matched it, so a new file reloaded nothing.
#[tokio::test]
async fn a_relative_rules_directory_reloads_on_change() {
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("rules");
    std::fs::create_dir(&rules).unwrap();
    let domain = |name: &str| {
        format!(
            "domain: {name}\ndescriptors:\n  - key: k\n    rate_limit: {{unit: hour, requests_per_unit: 5}}\n"
        )
    };
    std::fs::write(rules.join("a.yaml"), domain("a")).unwrap();
    for given in ["rules/", "./rules", "rules"] {
        let app = Instance::serve_in(
            dir.path(),
            &["--store", "memory", "--envoy-config", given],
            &[],
        )
        .await;
        let b = rules.join("b.yaml");
        let _ = std::fs::remove_file(&b);
        tokio::time::sleep(Duration::from_millis(300)).await;
        std::fs::write(&b, domain("b")).unwrap();
        let client = reqwest::Client::new();
        let limited = || async {
            let body = json!({"domain": "b", "descriptors": [{"entries": [{"key": "k", "value": "v"}], "hitsAddend": 0}]});
            let r: Value = client
                .post(format!("{}/json", app.base))
                .json(&body)
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            r["statuses"][0].get("currentLimit").is_some()
        };
        let deadline = std::time::Instant::now() + PICKUP;
        while !limited().await {
            assert!(
                std::time::Instant::now() < deadline,
                "{given}: the new file was not picked up within {PICKUP:?}; log:\n{}",
                app.log()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// Regression: without `--config`, SIGHUP's default action ended the
/// process; now it is answered with a log line.
#[tokio::test]
async fn sighup_without_a_configuration_file_is_harmless() {
    let app = Instance::start("memory", &[]).await;
    app.signal("HUP");
    assert!(
        app.wait_for_log(PICKUP, |log| log.contains("SIGHUP: nothing to reload"))
            .await,
        "log:\n{}",
        app.log()
    );
    let client = reqwest::Client::new();
    let r = client
        .get(format!("{}/ping", app.base))
        .send()
        .await
        .expect("still serving after SIGHUP");
    assert_eq!(r.status(), 200);
}

#[test]
fn check_config_lists_the_policies_or_names_every_error_with_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("ok.toml"), policies(3, "")).unwrap();
    let ok = run(&["check-config", "ok.toml"], dir.path());
    assert_eq!(ok.status.code(), Some(0));
    let out = String::from_utf8_lossy(&ok.stdout);
    assert!(out.contains("api: sliding_log, 3 per 3600s"), "{out}");
    assert!(out.contains("ping: fixed_window, 3 per 60s"), "{out}");

    std::fs::write(
        dir.path().join("bad.toml"),
        "ping_limit = \"three\"\n\n[[policies]]\nname = \"x\"\nalgorithm = \"gcra\"\nlimit = 1\nwindow = \"0s\"\ncolour = 1\n",
    )
    .unwrap();
    let bad = run(&["check-config", "bad.toml"], dir.path());
    assert_eq!(bad.status.code(), Some(2));
    let err = String::from_utf8_lossy(&bad.stderr);
    for expected in [
        "bad.toml:1:14: ping_limit: expected a whole number, found a string (\"three\")",
        "bad.toml:7:10: policies[0].window: '0s' must be longer than zero",
        "bad.toml:8:1: policies[0].colour: unknown key 'colour'",
        "3 error(s)",
    ] {
        assert!(err.contains(expected), "missing {expected:?} in\n{err}");
    }
    let missing = run(&["check-config", "missing.toml"], dir.path());
    assert_eq!(missing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("missing.toml"));

    // serve refuses the same file at start, with the same messages.
    let serve = run(
        &[
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--store",
            "memory",
            "--config",
            "bad.toml",
        ],
        dir.path(),
    );
    assert_eq!(serve.status.code(), Some(2));
    let err = String::from_utf8_lossy(&serve.stderr);
    assert!(err.contains("bad.toml:7:10: policies[0].window"), "{err}");
}

/// The example configuration shipped in the repository is valid.
#[test]
fn the_example_configuration_is_valid() {
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../ratewarden.example.toml");
    let out = run(&["check-config", example.to_str().unwrap()], Path::new("."));
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
