//! Black-box tests of `ratewarden replay`: the built binary, a trace on
//! standard input, decisions on standard output. Expected lines are worked
//! out by hand from docs/semantics.md §2.

use std::io::Write;
use std::process::{Command, Output, Stdio};

/// Runs `ratewarden replay ARGS` with `input` on standard input.
fn replay(args: &[&str], input: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ratewarden"))
        .arg("replay")
        .args(args)
        .env("RATEWARDEN_LOG", "warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the ratewarden binary starts");
    let mut stdin = child.stdin.take().expect("piped stdin");
    let input = input.to_owned();
    // A separate writer, so a large trace cannot deadlock against a full
    // stdout pipe; a replay that stops early closes stdin (ignore EPIPE).
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(input.as_bytes());
    });
    let output = child.wait_with_output().expect("ratewarden runs");
    writer.join().expect("the writer thread finishes");
    output
}

fn stdout(output: &Output) -> &str {
    std::str::from_utf8(&output.stdout).expect("stdout is UTF-8")
}

fn stderr(output: &Output) -> &str {
    std::str::from_utf8(&output.stderr).expect("stderr is UTF-8")
}

/// Replays `input` and expects success with exactly `expected` on stdout.
fn assert_replays(args: &[&str], input: &str, expected: &str) -> Output {
    let output = replay(args, input);
    assert!(
        output.status.success(),
        "status {:?}, stderr: {}",
        output.status,
        stderr(&output)
    );
    assert_eq!(stdout(&output), expected, "args {args:?}");
    output
}

#[test]
fn fixed_window_counts_only_allowed_requests_by_default() {
    assert_replays(
        &[
            "--algorithm",
            "fixed_window",
            "--limit",
            "2",
            "--window",
            "1s",
        ],
        "1000 a\n1200 a\n1500 a\n2000 a\n2100 a 2\n2100 a\n",
        "1000 a allow 1 0\n\
         1200 a allow 0 0\n\
         1500 a deny 0 500\n\
         2000 a allow 1 0\n\
         2100 a deny 1 900\n\
         2100 a allow 0 0\n",
    );
    let refused = replay(
        &[
            "--algorithm",
            "gcra",
            "--limit",
            "2",
            "--window",
            "1s",
            "--count-denied",
        ],
        "",
    );
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        stderr(&refused).contains("--count-denied applies only to --algorithm fixed_window"),
        "{}",
        stderr(&refused)
    );
}

#[test]
fn fixed_window_counts_every_attempt_per_epoch_aligned_window_with_count_denied() {
    let output = assert_replays(
        &[
            "--algorithm",
            "fixed_window",
            "--limit",
            "2",
            "--window",
            "1s",
            "--count-denied",
        ],
        "1000 a\n1200 a\n1500 a\n1999 b\n2000 a\n2100 a 2\n2100 a\n2500 a 3\n3000 a\n",
        "1000 a allow 1 0\n\
         1200 a allow 0 0\n\
         1500 a deny 0 500\n\
         1999 b allow 1 0\n\
         2000 a allow 1 0\n\
         2100 a deny 0 900\n\
         2100 a deny 0 900\n\
         2500 a never - -\n\
         3000 a allow 1 0\n",
    );
    assert_eq!(
        stderr(&output),
        "requests: 9\nallowed: 5\ndenied: 3\nnever: 1\nmost denied keys:\n           3 a\n"
    );
}

#[test]
fn sliding_log_waits_for_the_jth_oldest_live_event() {
    assert_replays(
        &[
            "--algorithm",
            "sliding_log",
            "--limit",
            "2",
            "--window",
            "1s",
        ],
        "0 u\n100 u\n500 u\n500 u 2\n1000 u\n1000 u 3\n1100 u\n",
        "0 u allow 1 0\n\
         100 u allow 0 0\n\
         500 u deny 0 500\n\
         500 u deny 0 600\n\
         1000 u allow 0 0\n\
         1000 u never - -\n\
         1100 u allow 0 0\n",
    );
}

#[test]
fn sliding_window_weighs_the_previous_window_by_its_overlap() {
    assert_replays(
        &[
            "--algorithm",
            "sliding_window",
            "--limit",
            "4",
            "--window",
            "1000ms",
        ],
        "500 s 4\n900 s\n1250 s\n1500 s\n1500 s\n1500 s 5\n2600 s 2\n",
        "500 s allow 0 0\n\
         900 s deny 0 350\n\
         1250 s allow 0 0\n\
         1500 s allow 0 0\n\
         1500 s deny 0 250\n\
         1500 s never - -\n\
         2600 s allow 1 0\n",
    );
}

#[test]
fn gcra_allows_a_burst_then_spaces_requests_by_the_emission_interval() {
    // T = 1 s / 2 = 500 ms, burst 3: B·T = 1500 ms.
    assert_replays(
        &[
            "--algorithm",
            "gcra",
            "--limit",
            "2",
            "--window",
            "1s",
            "--burst",
            "3",
        ],
        "0 k\n0 k\n0 k\n0 k\n250 k\n500 k\n1999 k 2\n2000 k 4\n2000 k 3\n3000 k 3\n",
        "0 k allow 2 0\n\
         0 k allow 1 0\n\
         0 k allow 0 0\n\
         0 k deny 0 500\n\
         250 k deny 0 250\n\
         500 k allow 0 0\n\
         1999 k allow 0 0\n\
         2000 k never - -\n\
         2000 k deny 1 1000\n\
         3000 k allow 0 0\n",
    );
}

#[test]
fn retry_after_is_rounded_up_to_whole_milliseconds() {
    // T = 333_333_333 ns; the fourth request waits 333.333333 ms.
    assert_replays(
        &["--algorithm", "gcra", "--limit", "3", "--window", "1s"],
        "0 x\n0 x\n0 x\n0 x\n",
        "0 x allow 2 0\n0 x allow 1 0\n0 x allow 0 0\n0 x deny 0 334\n",
    );
}

#[test]
fn a_limit_of_zero_makes_every_request_never() {
    for algorithm in ["fixed_window", "sliding_log", "sliding_window", "gcra"] {
        assert_replays(
            &["--algorithm", algorithm, "--limit", "0", "--window", "1s"],
            "5 a\n6 b 3\n",
            "5 a never - -\n6 b never - -\n",
        );
    }
}

#[test]
fn comments_blank_lines_and_crlf_are_skipped_and_keys_are_echoed_verbatim() {
    let output = assert_replays(
        &[
            "--algorithm",
            "fixed_window",
            "--limit",
            "1",
            "--window",
            "1h",
        ],
        "# recorded on the gateway\n\n   \n1000\tuser:7/orders  \r\n  # 1000 not-a-request\n0001000 \"quoted\" 1\r\n1001 user:7/orders\n",
        "1000 user:7/orders allow 0 0\n\
         1000 \"quoted\" allow 0 0\n\
         1001 user:7/orders deny 0 3598999\n",
    );
    assert!(
        stderr(&output).starts_with("requests: 3\n"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn a_malformed_line_stops_with_status_2_naming_the_line_and_its_text() {
    let output = replay(
        &[
            "--algorithm",
            "fixed_window",
            "--limit",
            "2",
            "--window",
            "1s",
        ],
        "# header\n1000 a\n\n1001 a two\n1002 a\n",
    );
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("line 4: cost 'two' is not a whole number of at least 1"),
        "{}",
        stderr(&output)
    );
    assert_eq!(
        stdout(&output),
        "1000 a allow 1 0\n",
        "what came before is flushed"
    );

    let output = replay(
        &["--algorithm", "gcra", "--limit", "2", "--window", "1s"],
        "1000 a\n1001 a 1 extra\n",
    );
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output)
            .contains("line 2: expected '<unix_ms> <key> [<cost>]', found '1001 a 1 extra'"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn a_decreasing_time_stops_with_status_2() {
    let output = replay(
        &[
            "--algorithm",
            "sliding_log",
            "--limit",
            "5",
            "--window",
            "1s",
        ],
        "1000 a\n2000 b\n2000 a\n# note\n\n2500 c\n1000 d\n3000 a\n",
    );
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("line 7: time 1000 is before the previous 2500"),
        "{}",
        stderr(&output)
    );
    assert_eq!(stdout(&output).lines().count(), 4);
}

#[test]
fn invalid_flags_are_refused_with_status_2_naming_the_flag() {
    for (args, needle) in [
        (
            vec![
                "--algorithm",
                "fixed_window",
                "--limit",
                "2",
                "--window",
                "1s",
                "--burst",
                "4",
            ],
            "--burst applies only to --algorithm gcra, not fixed_window",
        ),
        (
            vec!["--algorithm", "gcra", "--limit", "2", "--window", "60"],
            "'60'",
        ),
        (
            vec!["--algorithm", "gcra", "--limit", "2", "--window", "0s"],
            "'0s'",
        ),
        (
            vec!["--algorithm", "gcra", "--limit", "2", "--window", "-1s"],
            "'-1s'",
        ),
        (
            vec!["--algorithm", "gcra", "--limit", "2", "--window", "1.5s"],
            "'1.5s'",
        ),
        (
            vec!["--algorithm", "token", "--limit", "2", "--window", "1s"],
            "'token'",
        ),
        (
            vec!["--algorithm", "gcra", "--limit", "-2", "--window", "1s"],
            "'-2'",
        ),
        (
            vec![
                "--algorithm",
                "gcra",
                "--limit",
                "2",
                "--window",
                "1s",
                "--store",
                "redis",
            ],
            "'redis'",
        ),
    ] {
        let output = replay(&args, "");
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        assert!(
            stderr(&output).contains(needle),
            "{args:?}: {}",
            stderr(&output)
        );
        assert!(output.stdout.is_empty());
    }
}

#[test]
fn a_time_past_2262_stops_with_status_2_instead_of_being_allowed_twice() {
    // Past i64::MAX nanoseconds GCRA's stored instant would saturate below
    // the request time, and every request would be allowed.
    let dir = tempfile::tempdir().expect("a temporary directory");
    let db = dir.path().join("late.db");
    let sqlite = format!("sqlite:{}", db.display());
    for store in ["memory", sqlite.as_str()] {
        let output = replay(
            &[
                "--algorithm",
                "gcra",
                "--limit",
                "1",
                "--window",
                "1s",
                "--store",
                store,
            ],
            "9300000000000 a\n9300000000000 a\n",
        );
        assert_eq!(output.status.code(), Some(2), "{store}");
        assert!(
            stderr(&output).contains(
                "line 1: time 9300000000000 is after the largest supported time 9223372036854 (2262-04-11)"
            ),
            "{store}: {}",
            stderr(&output)
        );
        assert_eq!(stdout(&output), "", "{store}");
    }

    // The largest time itself is decided; one millisecond later is refused.
    let output = replay(
        &["--algorithm", "gcra", "--limit", "1", "--window", "1s"],
        "9223372036854 a\n9223372036854 a\n9223372036855 a\n",
    );
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("line 3: time 9223372036855 is after the largest supported time"),
        "{}",
        stderr(&output)
    );
    let lines: Vec<&str> = stdout(&output).lines().collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(lines[0].starts_with("9223372036854 a allow "), "{lines:?}");
    assert!(lines[1].starts_with("9223372036854 a deny "), "{lines:?}");
}

#[test]
fn a_burst_of_zero_is_refused_instead_of_making_every_request_never() {
    let output = replay(
        &[
            "--algorithm",
            "gcra",
            "--limit",
            "2",
            "--window",
            "1s",
            "--burst",
            "0",
        ],
        "1000 a\n",
    );
    assert_eq!(output.status.code(), Some(2));
    let err = stderr(&output);
    assert!(
        err.contains("--burst") && err.contains("must be at least 1"),
        "{err}"
    );
    assert!(output.stdout.is_empty());

    assert_replays(
        &[
            "--algorithm",
            "gcra",
            "--limit",
            "2",
            "--window",
            "1s",
            "--burst",
            "1",
        ],
        "1000 a\n1000 a\n",
        "1000 a allow 0 0\n1000 a deny 0 500\n",
    );
}

#[test]
fn a_foreign_sqlite_database_is_refused_naming_the_path_and_its_tables() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let db = dir.path().join("other.db");
    {
        let conn = rusqlite::Connection::open(&db).expect("create other.db");
        conn.execute_batch("CREATE TABLE users(id INTEGER);")
            .expect("create a table");
    }
    let before = std::fs::read(&db).expect("read other.db");
    let store = format!("sqlite:{}", db.display());
    let output = replay(
        &[
            "--algorithm",
            "gcra",
            "--limit",
            "1",
            "--window",
            "1s",
            "--store",
            &store,
        ],
        "1000 a\n",
    );
    assert_eq!(output.status.code(), Some(2));
    let err = stderr(&output);
    assert!(err.contains(&store) && err.contains("users"), "{err}");
    assert!(output.stdout.is_empty());
    assert_eq!(
        std::fs::read(&db).expect("read other.db"),
        before,
        "untouched"
    );
}

/// A deterministic trace: `lines` requests over 8 keys, a few per
/// millisecond, about one in six with a cost of 2 to 7.
fn generated_trace(lines: usize, seed: u64) -> String {
    let mut state = seed;
    let mut next = move || {
        // SplitMix64.
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    let mut now = 1_700_000_000_000u64;
    let mut trace = String::new();
    for _ in 0..lines {
        now += next() % 4;
        let key = next() % 8;
        match next() % 6 {
            0 => trace.push_str(&format!("{now} key-{key} {}\n", 2 + next() % 6)),
            _ => trace.push_str(&format!("{now} key-{key}\n")),
        }
    }
    trace
}

#[test]
fn memory_and_sqlite_print_identical_decisions_for_every_algorithm() {
    let trace = generated_trace(3000, 7);
    let dir = tempfile::tempdir().expect("a temporary directory");
    for (algorithm, extra) in [
        ("fixed_window", &[][..]),
        ("sliding_log", &[][..]),
        ("sliding_window", &[][..]),
        ("gcra", &["--burst", "3"][..]),
    ] {
        let mut args = vec![
            "--algorithm",
            algorithm,
            "--limit",
            "5",
            "--window",
            "250ms",
        ];
        args.extend(extra);
        let memory = replay(&args, &trace);
        assert!(memory.status.success(), "{}", stderr(&memory));

        let db = dir.path().join(format!("{algorithm}.db"));
        let store = format!("sqlite:{}", db.display());
        args.extend(["--store", store.as_str()]);
        let sqlite = replay(&args, &trace);
        assert!(sqlite.status.success(), "{}", stderr(&sqlite));

        let out = stdout(&memory);
        assert_eq!(out.lines().count(), 3000);
        for outcome in [" allow ", " deny ", " never "] {
            assert!(
                out.contains(outcome),
                "{algorithm}: the trace exercises{outcome}"
            );
        }
        if out != stdout(&sqlite) {
            let (line, (m, s)) = out
                .lines()
                .zip(stdout(&sqlite).lines())
                .enumerate()
                .find(|(_, (m, s))| m != s)
                .expect("outputs of equal length differ somewhere");
            panic!("{algorithm}: line {}: memory '{m}', sqlite '{s}'", line + 1);
        }
        assert_eq!(stderr(&memory), stderr(&sqlite), "{algorithm}: summaries");
    }
}

#[test]
fn redis_keeps_a_replays_state_a_day_whatever_the_traces_windows() {
    // Redis counts a TTL on its own clock while a replay decides at its
    // trace's times: with the service's 1 s slack, a replay slower than its
    // trace (2.5 s between two requests of a 1 s fixed window) would find
    // its count expired and allow a request it must deny.
    let redis = ratewarden_testkit::redis_server::RedisServer::start();
    let store = redis.url();
    let args = [
        "--algorithm",
        "fixed_window",
        "--limit",
        "2",
        "--window",
        "1s",
        "--store",
        &store,
        // A call past the store timeout stops the replay: the tests' value
        // for Redis (replay's default too), not one a busy machine breaks.
        "--store-timeout-ms",
        ratewarden_testkit::redis_server::TEST_STORE_TIMEOUT_MS,
    ];
    let output = replay(&args, "0 a\n0 a\n");
    assert_eq!(stdout(&output), "0 a allow 1 0\n0 a allow 0 0\n");
    let keys = redis.command(&["KEYS", "*"]);
    let key = keys
        .lines()
        .find(|l| l.starts_with("rw:fixed_window:replay:"))
        .unwrap_or_else(|| panic!("the window's counter in {keys:?}"));
    let ttl: u64 = redis.command(&["PTTL", key]).trim()[1..]
        .parse()
        .expect("a TTL in milliseconds");
    let day = 24 * 60 * 60 * 1000;
    assert!(ttl > day - 60_000 && ttl <= day + 1_000, "PTTL {ttl}");
    // A request at the same trace instant, however late in wall time, is
    // still counted against the window.
    let output = replay(&args, "500 a\n");
    assert_eq!(stdout(&output), "500 a deny 0 500\n");
}

#[test]
fn an_address_that_answers_http_is_one_line_saying_it_is_no_redis() {
    // --store pointed at an HTTP server: the Redis client's own report is
    // three lines of parser output ("Unexpected `33`"), with no hint.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    let port = listener.local_addr().expect("its address").port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let _ = stream.write_all(
                b"HTTP/1.0 400 Bad Request\r\nContent-Type: text/html\r\n\r\n<!DOCTYPE html>\n",
            );
        }
    });
    let store = format!("redis://127.0.0.1:{port}/0");
    let args = [
        "--algorithm",
        "gcra",
        "--limit",
        "10",
        "--window",
        "1s",
        "--store",
        &store,
        "--store-timeout-ms",
        "2000",
    ];
    let output = replay(&args, "1000 a\n");
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert_eq!(stdout(&output), "");
    let message = stderr(&output);
    assert_eq!(message.lines().count(), 1, "{message:?}");
    assert!(
        message.starts_with("error: line 1: store unavailable: Redis: the reply is not what a Redis server sends (is the address a Redis server?)"),
        "{message:?}"
    );
}
