//! Command-line errors of the real `ratewarden` binary (issue 9): an
//! invalid value from a `RATEWARDEN_*` variable names the variable, not
//! the flag; address settings say what to write instead of a host name;
//! malformed Redis URLs are refused instead of read as defaults; and
//! `replay` refuses a SQLite file that a running service uses.

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

mod common;

use std::ffi::OsString;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use clap::CommandFactory;
use clap::error::ErrorKind;
use common::{Instance, RedisServer, TEST_STORE_TIMEOUT_MS};
use ratewarden_server::cli::Cli;
use serde_json::{Value, json};

/// The longest a command that should fail at once may run.
const PATIENCE: Duration = Duration::from_secs(20);

/// `ratewarden ARGS` in `dir` with only `env` of the `RATEWARDEN_*`
/// variables set and `input` on standard input; killed after
/// [`PATIENCE`] (a command that should have been refused started).
fn ratewarden(args: &[&str], env: &[(&str, &str)], dir: &Path, input: &str) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_ratewarden"));
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("RATEWARDEN_") {
            command.env_remove(name);
        }
    }
    let mut child = command
        .args(args)
        .envs(env.iter().copied())
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("ratewarden starts");
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_owned();
    // Ignore EPIPE: a refused command never reads its input.
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(input.as_bytes());
    });
    let deadline = Instant::now() + PATIENCE;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    writer.join().unwrap();
    child.wait_with_output().unwrap()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Expects exit status 2 and returns standard error.
fn refused(output: &Output) -> String {
    let err = stderr(output);
    assert_eq!(output.status.code(), Some(2), "stderr: {err}");
    err
}

/// Every argument declared with `env = …`: (subcommand, long flag,
/// variable), read from clap's own definition so a new flag is covered
/// without a new test.
fn env_backed_args() -> Vec<(String, String, String)> {
    let mut cli = Cli::command();
    cli.build();
    cli.get_subcommands()
        .flat_map(|sub| {
            sub.get_arguments().filter_map(|arg| {
                Some((
                    sub.get_name().to_owned(),
                    arg.get_long()?.to_owned(),
                    arg.get_env()?.to_string_lossy().into_owned(),
                ))
            })
        })
        .collect()
}

/// A value that the flag refuses (`None`: the flag takes any text, as a
/// path does).
fn refused_value(sub: &str, flag: &str) -> Option<&'static str> {
    ["bad", "-1", "0"].into_iter().find(|value| {
        let argv = ["ratewarden", sub, &format!("--{flag}"), value];
        matches!(
            <Cli as clap::Parser>::try_parse_from(argv).map_err(|e| e.kind()),
            Err(ErrorKind::ValueValidation | ErrorKind::InvalidValue)
        )
    })
}

// ---------------------------------------------------------------------------
// 1. Values from environment variables
// ---------------------------------------------------------------------------

#[test]
fn an_invalid_value_from_any_environment_variable_names_the_variable_not_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let mut covered = Vec::new();
    for (sub, flag, variable) in env_backed_args() {
        let Some(value) = refused_value(&sub, &flag) else {
            continue;
        };
        let err = refused(&ratewarden(&[&sub], &[(&variable, value)], dir.path(), ""));
        let expected = format!(
            "error: invalid value '{value}' in the environment variable {variable} (for --{flag}): "
        );
        assert!(err.starts_with(&expected), "{variable}={value}: {err}");
        assert!(!err.contains("for '--"), "{variable}={value}: {err}");
        covered.push(variable);
    }
    for variable in [
        "RATEWARDEN_LISTEN",
        "RATEWARDEN_GRPC_LISTEN",
        "RATEWARDEN_STORE",
        "RATEWARDEN_PING_LIMIT",
        "RATEWARDEN_PING_KEY",
        "RATEWARDEN_TRUSTED_PROXIES",
        "RATEWARDEN_ON_STORE_ERROR",
        "RATEWARDEN_STORE_TIMEOUT_MS",
        "RATEWARDEN_MAX_CONNECTIONS",
    ] {
        assert!(
            covered.iter().any(|v| v == variable),
            "{variable}: {covered:?}"
        );
    }
}

#[test]
fn an_invalid_value_from_the_flag_keeps_the_flags_message_even_with_the_variable_set() {
    let dir = tempfile::tempdir().unwrap();
    for (sub, flag, variable) in env_backed_args() {
        let Some(value) = refused_value(&sub, &flag) else {
            continue;
        };
        let long = format!("--{flag}");
        for env in [&[][..], &[(variable.as_str(), value)][..]] {
            let err = refused(&ratewarden(&[&sub, &long, value], env, dir.path(), ""));
            assert!(
                err.contains(&format!("invalid value '{value}' for '--{flag}")),
                "{long} {value}: {err}"
            );
            assert!(!err.contains("environment variable"), "{long}: {err}");
        }
    }
}

#[test]
fn environment_errors_show_the_whole_list_and_never_a_password() {
    let dir = tempfile::tempdir().unwrap();
    let err = refused(&ratewarden(
        &["serve"],
        &[("RATEWARDEN_TRUSTED_PROXIES", "10.0.0.0/8,bad")],
        dir.path(),
        "",
    ));
    assert!(
        err.starts_with(
            "error: invalid value 'bad' in the environment variable \
             RATEWARDEN_TRUSTED_PROXIES='10.0.0.0/8,bad' (for --trusted-proxy): \
             'bad' is neither an IP address nor a CIDR block"
        ),
        "{err}"
    );
    let err = refused(&ratewarden(
        &["serve"],
        &[("RATEWARDEN_STORE", "redis://:hunter2@127.0.0.1:/0")],
        dir.path(),
        "",
    ));
    assert!(
        err.starts_with(
            "error: invalid value 'redis://:<redacted>@127.0.0.1:/0' in the environment \
             variable RATEWARDEN_STORE (for --store): "
        ),
        "{err}"
    );
    assert!(!err.contains("hunter2"), "the password leaked: {err}");
    let err = refused(&ratewarden(
        &["serve"],
        &[("RATEWARDEN_PING_KEY", "peer_ip")],
        dir.path(),
        "",
    ));
    assert!(
        err.starts_with(
            "error: invalid value 'peer_ip' in the environment variable RATEWARDEN_PING_KEY \
             (for --ping-key): possible values: header, peer-ip, forwarded"
        ),
        "{err}"
    );
}

/// Set in a child process (this test binary run again): the argument
/// vector, space-separated, to parse with `ratewarden_server::cli`.
const CHILD_ARGV: &str = "RATEWARDEN_TEST_CLI_ARGV";

/// The child's side; without [`CHILD_ARGV`] it does nothing.
#[test]
fn child_process_parse_runs_only_when_asked() {
    let Ok(argv) = std::env::var(CHILD_ARGV) else {
        return;
    };
    let argv: Vec<OsString> = argv.split(' ').map(OsString::from).collect();
    match ratewarden_server::cli::try_parse_from(&argv) {
        Ok(cli) => println!("parsed: {cli:?}"),
        Err(e) => println!("exit={} {}", e.exit_code(), e.render()),
    }
}

/// The library's [`ratewarden_server::cli::parse`] path, in a process
/// whose environment holds the variable from its start.
#[test]
fn the_cli_parser_names_the_variable_in_a_process_with_it_set() {
    let output = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_process_parse_runs_only_when_asked",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(CHILD_ARGV, "ratewarden serve")
        .env("RATEWARDEN_LISTEN", "localhost:8080")
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&output.stdout);
    assert!(
        out.contains(
            "exit=2 error: invalid value 'localhost:8080' in the environment variable \
             RATEWARDEN_LISTEN (for --listen): 'localhost:8080' is not an IP address and port; \
             use 127.0.0.1:8080 or [::1]:8080 (host names are not resolved)"
        ),
        "{out}"
    );
    let output = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_process_parse_runs_only_when_asked",
            "--nocapture",
        ])
        .env(CHILD_ARGV, "ratewarden serve --listen localhost:8080")
        .env("RATEWARDEN_LISTEN", "127.0.0.1:8080")
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&output.stdout);
    assert!(
        out.contains("exit=2 error: invalid value 'localhost:8080' for '--listen <ADDR>'"),
        "{out}"
    );
}

// ---------------------------------------------------------------------------
// 2. Addresses
// ---------------------------------------------------------------------------

#[test]
fn a_host_name_or_a_missing_port_as_an_address_is_refused_with_what_to_write() {
    let dir = tempfile::tempdir().unwrap();
    for (args, message) in [
        (
            &["serve", "--listen", "localhost:8080"][..],
            "error: invalid value 'localhost:8080' for '--listen <ADDR>': 'localhost:8080' is \
             not an IP address and port; use 127.0.0.1:8080 or [::1]:8080 (host names are not \
             resolved)",
        ),
        (
            &["serve", "--grpc-listen", "127.0.0.1"],
            "'127.0.0.1' has no port; write an IP address and a port, e.g. 127.0.0.1:8081",
        ),
        (
            &["serve", "--listen", "127.0.0.1:65536"],
            "'127.0.0.1:65536' has the port 65536, which is out of range; ports are 0 to 65535",
        ),
    ] {
        let err = refused(&ratewarden(args, &[], dir.path(), ""));
        assert!(err.contains(message), "{args:?}: {err}");
    }
    let err = refused(&ratewarden(
        &["serve"],
        &[("RATEWARDEN_GRPC_LISTEN", "localhost:8081")],
        dir.path(),
        "",
    ));
    assert!(
        err.starts_with(
            "error: invalid value 'localhost:8081' in the environment variable \
             RATEWARDEN_GRPC_LISTEN (for --grpc-listen): 'localhost:8081' is not an IP address \
             and port; use 127.0.0.1:8081 or [::1]:8081"
        ),
        "{err}"
    );
}

#[test]
fn a_host_name_as_listen_address_in_the_file_is_refused_at_file_line_column_with_a_hint() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rw.toml");
    std::fs::write(&path, "ping_limit = 3\nlisten = \"localhost:8080\"\n").unwrap();
    let shown = path.display().to_string();
    for args in [
        &["check-config", shown.as_str()][..],
        &["serve", "--config", shown.as_str()],
    ] {
        let err = refused(&ratewarden(args, &[], dir.path(), ""));
        assert!(
            err.contains(&format!(
                "{shown}:2:10: listen: 'localhost:8080' is not an IP address and port; use \
                 127.0.0.1:8080 or [::1]:8080 (host names are not resolved)"
            )),
            "{args:?}: {err}"
        );
    }
}

// ---------------------------------------------------------------------------
// 3. Redis URLs
// ---------------------------------------------------------------------------

#[test]
fn a_redis_url_with_an_empty_port_is_refused_not_read_as_6379() {
    let dir = tempfile::tempdir().unwrap();
    for args in [
        &["serve", "--store", "redis://127.0.0.1:/0"][..],
        &[
            "replay",
            "--algorithm",
            "gcra",
            "--limit",
            "1",
            "--window",
            "1s",
            "--store",
            "redis://127.0.0.1:/0",
        ],
    ] {
        let err = refused(&ratewarden(args, &[], dir.path(), "0 a\n"));
        assert!(
            err.contains(
                "'redis://127.0.0.1:/0' is not a valid Redis URL: the port after ':' is empty"
            ),
            "{args:?}: {err}"
        );
    }
    for (url, problem) in [
        (
            "redis://127.0.0.1:70000/0",
            "the port 70000 is out of range",
        ),
        (
            "redis://127.0.0.1:6379/zero",
            "the database 'zero' is not a whole number",
        ),
        (
            "redis://127.0.0.1:6379?db=2",
            "the query parameter 'db' is not read",
        ),
    ] {
        let err = refused(&ratewarden(&["serve", "--store", url], &[], dir.path(), ""));
        assert!(
            err.contains(&format!("'{url}' is not a valid Redis URL: {problem}")),
            "{url}: {err}"
        );
    }
}

#[tokio::test]
async fn a_redis_url_without_a_database_means_database_0() {
    let redis = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("rw.toml");
    std::fs::write(&config, REPLAY_POLICY).unwrap();
    let config_arg = config.display().to_string();
    let service = Instance::start(
        &format!("redis://127.0.0.1:{}", redis.port()),
        &["--config", &config_arg],
    )
    .await;
    assert_eq!(check_alice(&service.base).await["remaining"], 4);
    let trace = format!("{} alice\n", now_ms());
    for (db, remaining) in ["/0", "/", "/1"].into_iter().zip(["3", "2", "4"]) {
        let store = format!("redis://127.0.0.1:{}{db}", redis.port());
        let mut args = REPLAY_ARGS.to_vec();
        // A call past the store timeout stops the replay: the tests' value
        // for Redis (replay's default too), not one a busy machine breaks.
        args.extend([
            "--store",
            &store,
            "--store-timeout-ms",
            TEST_STORE_TIMEOUT_MS,
        ]);
        let output = ratewarden(&args, &[], dir.path(), &trace);
        assert!(output.status.success(), "{store}: {}", stderr(&output));
        let out = String::from_utf8_lossy(&output.stdout);
        assert_eq!(out.split(' ').nth(3), Some(remaining), "{store}: {out}");
    }
}

// ---------------------------------------------------------------------------
// 4. Replay on a live SQLite file
// ---------------------------------------------------------------------------

/// A policy of the replay's name, so a replay on the service's file would
/// change the service's own counters.
const REPLAY_POLICY: &str = "[[policies]]\n\
    name = \"replay\"\n\
    algorithm = \"sliding_log\"\n\
    limit = 5\n\
    window = \"1h\"\n";

const REPLAY_ARGS: [&str; 7] = [
    "replay",
    "--algorithm",
    "sliding_log",
    "--limit",
    "5",
    "--window",
    "1h",
];

async fn remaining(base: &str) -> u64 {
    let status: Value = reqwest::get(format!("{base}/v1/status?policy=replay&key=alice"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    status["remaining"]
        .as_u64()
        .unwrap_or_else(|| panic!("{status}"))
}

async fn check_alice(base: &str) -> Value {
    reqwest::Client::new()
        .post(format!("{base}/v1/check"))
        .json(&json!({ "policy": "replay", "key": "alice" }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// Now, in milliseconds since the epoch, read through the one clock.
fn now_ms() -> u64 {
    use ratewarden_core::Clock;
    ratewarden_core::SystemClock.now().as_unix_nanos() / 1_000_000
}

#[tokio::test]
async fn replay_refuses_a_sqlite_file_a_running_service_uses_and_leaves_its_counters_alone() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("rw.toml");
    std::fs::write(&config, REPLAY_POLICY).unwrap();
    let db = dir.path().join("live.db");
    let store = format!("sqlite:{}", db.display());
    let config_arg = config.display().to_string();
    let service = Instance::start(&store, &["--config", &config_arg]).await;
    check_alice(&service.base).await;
    check_alice(&service.base).await;
    assert_eq!(remaining(&service.base).await, 3);

    let trace = format!("{0} alice\n{0} alice\n", now_ms());
    let mut args = REPLAY_ARGS.to_vec();
    args.extend(["--store", &store]);
    let output = ratewarden(&args, &[], dir.path(), &trace);
    let err = refused(&output);
    assert!(
        err.contains(&format!(
            "the SQLite file {} is in use by a running ratewarden service",
            db.display()
        )) && err.contains("--allow-live-store"),
        "{err}"
    );
    assert!(output.stdout.is_empty(), "nothing was decided");
    assert_eq!(
        remaining(&service.base).await,
        3,
        "the live counters changed"
    );

    // With the flag it proceeds, from the service's own state, and warns.
    args.push("--allow-live-store");
    let output = ratewarden(&args, &[("RATEWARDEN_LOG", "warn")], dir.path(), &trace);
    let err = stderr(&output);
    assert!(output.status.success(), "{err}");
    assert!(err.contains("--allow-live-store"), "no warning: {err}");
    let out = String::from_utf8_lossy(&output.stdout);
    let remainders: Vec<&str> = out.lines().map(|l| l.split(' ').nth(3).unwrap()).collect();
    assert_eq!(remainders, ["2", "1"], "{out}");
    assert_eq!(remaining(&service.base).await, 1);

    // Without a service the file is free again.
    drop(service);
    let output = ratewarden(&args[..args.len() - 1], &[], dir.path(), "");
    assert!(output.status.success(), "{}", stderr(&output));
}

#[tokio::test]
async fn two_services_on_one_sqlite_file_both_start_and_share_their_counters() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("rw.toml");
    std::fs::write(&config, REPLAY_POLICY).unwrap();
    let store = format!("sqlite:{}", dir.path().join("shared.db").display());
    let config_arg = config.display().to_string();
    let first = Instance::start(&store, &["--config", &config_arg]).await;
    let second = Instance::start(&store, &["--config", &config_arg]).await;
    assert_eq!(check_alice(&first.base).await["remaining"], 4);
    assert_eq!(check_alice(&second.base).await["remaining"], 3);
    assert_eq!(check_alice(&first.base).await["remaining"], 2);
    assert_eq!(remaining(&second.base).await, 2);
}
