use std::sync::Arc;
use std::time::Duration;

use ratewarden_core::{Algorithm, Key, MemoryStore, Quota};

use super::*;

#[test]
fn times_past_i64_nanoseconds_are_refused_not_decided_wrongly() {
    // The largest time is the last millisecond whose nanoseconds fit an
    // i64 (GCRA's MAX_TAT, the stores' integers), and its date is right.
    assert_eq!(MAX_UNIX_MS, 9_223_372_036_854);
    assert!(u128::from(MAX_UNIX_MS) * 1_000_000 <= i64::MAX as u128);
    assert!(u128::from(MAX_UNIX_MS + 1) * 1_000_000 > i64::MAX as u128);
    let max = time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(MAX_UNIX_MS) * 1_000_000)
        .unwrap();
    assert_eq!(max.date().to_string(), MAX_DATE);

    // Past it GCRA's stored instant saturates below the request time and
    // every request would be allowed: the line stops the replay instead.
    let trace = "9300000000000 a\n9300000000000 a\n";
    let err = run_trace(Algorithm::Gcra, 1, Duration::from_secs(1), trace).unwrap_err();
    assert_eq!(
        err.to_string(),
        "line 1: time 9300000000000 is after the largest supported time 9223372036854 (2262-04-11)"
    );
    let last = format!("{MAX_UNIX_MS} a\n{MAX_UNIX_MS} a\n{} a\n", MAX_UNIX_MS + 1);
    let err = run_trace(Algorithm::Gcra, 1, Duration::from_secs(1), &last).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("line 3: time 9223372036855 is after"),
        "{err}"
    );
    // Every algorithm still limits at the largest time, and is refused
    // one millisecond later (the check is the parser's).
    for algorithm in Algorithm::ALL {
        let (out, _) = run_trace(
            algorithm,
            1,
            Duration::from_secs(1),
            &format!("{MAX_UNIX_MS} a\n{MAX_UNIX_MS} a\n"),
        )
        .unwrap();
        let outcomes: Vec<&str> = out.lines().map(|l| l.split(' ').nth(2).unwrap()).collect();
        assert_eq!(outcomes, ["allow", "deny"], "{algorithm}: {out}");
        assert!(run_trace(algorithm, 1, Duration::from_secs(1), "9223372036855 a\n").is_err());
    }
}

fn run_trace(
    algorithm: Algorithm,
    limit: u64,
    window: Duration,
    trace: &str,
) -> Result<(String, Summary), ReplayError> {
    let policy = Policy::new("t", algorithm, Quota::new(limit, window).unwrap());
    let mut out = Vec::new();
    let summary = replay(
        &policy,
        Arc::new(MemoryStore::new()),
        trace.as_bytes(),
        &mut out,
        Progress::Off,
    )?;
    Ok((String::from_utf8(out).unwrap(), summary))
}

#[test]
fn errors_carry_the_line_number_counting_blank_and_comment_lines() {
    let trace = "# header\n1000 a\n\n2000 b\n1999 c\n";
    let err = run_trace(Algorithm::FixedWindow, 2, Duration::from_secs(1), trace).unwrap_err();
    assert_eq!(
        err.to_string(),
        "line 5: time 1999 is before the previous 2000"
    );
    let err = run_trace(
        Algorithm::FixedWindow,
        2,
        Duration::from_secs(1),
        "1 a\n2 b c d\n",
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "line 2: expected '<unix_ms> <key> [<cost>]', found '2 b c d'"
    );
    let long = format!("1 {}\n", "k".repeat(Key::MAX_BYTES + 1));
    let err = run_trace(Algorithm::FixedWindow, 2, Duration::from_secs(1), &long).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("line 1: key is 4097 bytes long; the maximum is 4096 bytes ('kkk"),
        "{err}"
    );
}

#[test]
fn equal_times_keep_their_order_and_the_last_line_needs_no_newline() {
    let (out, _) = run_trace(
        Algorithm::FixedWindow,
        5,
        Duration::from_secs(1),
        "5 a\n5 a",
    )
    .unwrap();
    assert_eq!(out, "5 a allow 4 0\n5 a allow 3 0\n");
}

#[test]
fn the_summary_counts_outcomes_and_ranks_denied_keys_with_ties_by_key() {
    let mut trace = String::new();
    // Limit 1 per second: key k<i> gets i denials at time 0.
    for i in 0..13u64 {
        for _ in 0..=i {
            trace.push_str(&format!("0 k{i:02}\n"));
        }
    }
    trace.push_str("0 tie 1\n0 tie\n0 big 2\n");
    let (_, summary) =
        run_trace(Algorithm::FixedWindow, 1, Duration::from_secs(1), &trace).unwrap();
    assert_eq!(
        (
            summary.requests,
            summary.allowed,
            summary.denied,
            summary.never
        ),
        (94, 14, 79, 1)
    );
    let top: Vec<(String, u64)> = summary
        .most_denied
        .iter()
        .map(|(k, n)| (String::from_utf8(k.clone()).unwrap(), *n))
        .collect();
    let expected: Vec<(String, u64)> = (3..13u64).rev().map(|i| (format!("k{i:02}"), i)).collect();
    assert_eq!(top, expected);
    let (_, summary) =
        run_trace(Algorithm::FixedWindow, 0, Duration::from_secs(1), "0 a\n").unwrap();
    assert!(
        summary
            .to_string()
            .ends_with("never: 1\nmost denied keys: none\n")
    );
}

#[test]
fn ties_in_the_top_ten_are_broken_by_key() {
    let trace: String = ["b", "a", "c", "a", "b", "c"]
        .iter()
        .map(|k| format!("0 {k}\n0 {k}\n"))
        .collect();
    let (_, summary) =
        run_trace(Algorithm::FixedWindow, 1, Duration::from_secs(1), &trace).unwrap();
    assert_eq!(
        summary.most_denied,
        vec![(b"a".to_vec(), 3), (b"b".to_vec(), 3), (b"c".to_vec(), 3)]
    );
    assert!(
        summary
            .to_string()
            .contains("           3 a\n           3 b\n")
    );
}

#[test]
fn a_memory_store_held_elsewhere_too_decides_as_one_held_only_by_the_replay() {
    // The replay's sole store takes the lock-free path, a shared one goes
    // through the Store trait: the same decisions, into the caller's store.
    let mut trace = String::new();
    for i in 0..3_000u64 {
        let cost = match (i % 7, i % 13) {
            (0, _) => " 3",
            // Past the limit of 4: never.
            (_, 0) => " 5",
            _ => "",
        };
        trace.push_str(&format!("{} k{}{cost}\n", 1_000 + i / 3, i % 11));
    }
    for algorithm in Algorithm::ALL {
        let quota = Quota::new(4, Duration::from_millis(50)).unwrap();
        let policy = Policy::new("t", algorithm, quota);
        let (mut sole, mut shared_out) = (Vec::new(), Vec::new());
        let alone = replay(
            &policy,
            Arc::new(MemoryStore::new()),
            trace.as_bytes(),
            &mut sole,
            Progress::Off,
        )
        .unwrap();
        let shared = Arc::new(MemoryStore::new());
        let held = replay(
            &policy,
            Arc::clone(&shared) as Arc<dyn Store>,
            trace.as_bytes(),
            &mut shared_out,
            Progress::Off,
        )
        .unwrap();
        assert_eq!(String::from_utf8(sole), String::from_utf8(shared_out));
        assert_eq!(alone, held, "{algorithm}");
        assert!(alone.allowed > 0 && alone.denied > 0 && alone.never > 0);
        assert!(
            !shared.is_empty(),
            "{algorithm}: decided in the caller's store"
        );
    }
}
