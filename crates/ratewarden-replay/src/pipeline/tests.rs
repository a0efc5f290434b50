use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use ratewarden_core::{Algorithm, MemoryStore, Policy, Quota};

use super::*;
use crate::line::{MAX_LINE_BYTES, parse_line};

/// A trace with every kind of line: requests over 40 keys (some with a
/// cost, some with tabs or CRLF), blank and comment lines, and no
/// newline after the last line.
fn trace(lines: usize) -> Vec<u8> {
    let mut rng = StdRng::seed_from_u64(42);
    let mut next = move || rng.random::<u64>();
    let mut now = 1_700_000_000_000u64;
    let mut out = String::new();
    for _ in 0..lines {
        now += next() % 3;
        let key = next() % 40;
        match next() % 10 {
            0 => out.push_str(&format!("{now} k{key} {}\n", 1 + next() % 4)),
            1 => out.push_str(&format!("{now}\tk{key}\r\n")),
            2 => out.push_str("# a comment\n"),
            3 => out.push('\n'),
            _ => out.push_str(&format!("{now} k{key}\n")),
        }
    }
    out.push_str(&format!("{now} last"));
    out.into_bytes()
}

fn policy() -> Policy {
    let quota = Quota::new(3, Duration::from_millis(20)).unwrap();
    Policy::new("t", Algorithm::SlidingWindow, quota)
}

/// The plain loop the pipeline must equal: each line parsed and
/// decided in turn on a store of its own.
fn sequential(input: &[u8]) -> Vec<u8> {
    let policy = policy();
    let store = MemoryStore::new();
    let mut writer = Writer::new(Vec::new());
    for line in input.split_inclusive(|&b| b == b'\n') {
        let Some(request) = parse_line(line).unwrap() else {
            continue;
        };
        let attempt = Attempt {
            now: Timestamp::from_unix_millis(request.unix_ms),
            cost: request.cost,
        };
        let decision = store.acquire_single_now(&policy, request.key, attempt);
        writer
            .line(request.unix_ms, request.key, &decision.unwrap())
            .unwrap();
    }
    writer.out.into_inner().unwrap()
}

fn pipelined(
    input: &[u8],
    block_bytes: usize,
    decide: impl FnMut(&[u8], Attempt) -> Result<Decision, StoreError> + Send,
) -> (Vec<u8>, Result<Summary, ReplayError>) {
    let mut out = Vec::new();
    let result = replay_with(decide, input, &mut out, Progress::Off, block_bytes);
    (out, result)
}

fn memory(store: &MemoryStore) -> impl FnMut(&[u8], Attempt) -> Result<Decision, StoreError> {
    let policy = policy();
    move |key, attempt| Ok(store.acquire_single_now(&policy, key, attempt).unwrap())
}

#[test]
fn every_block_size_decides_exactly_as_a_plain_loop() {
    let input = trace(5_000);
    let expected = sequential(&input);
    let requests = expected.iter().filter(|&&b| b == b'\n').count() as u64;
    assert!(requests > 3_000, "{requests}");
    for block_bytes in [1, 2, 7, 64, 4096, BLOCK_BYTES] {
        let store = MemoryStore::new();
        let (out, summary) = pipelined(&input, block_bytes, memory(&store));
        let summary = summary.unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            String::from_utf8(expected.clone()).unwrap(),
            "block of {block_bytes} bytes"
        );
        assert_eq!(summary.requests, requests);
        assert!(summary.allowed > 0 && summary.denied > 0 && summary.never > 0);
        assert_eq!(summary.allowed + summary.denied + summary.never, requests);
    }
}

#[test]
fn a_malformed_line_blocks_later_prints_every_decision_before_it() {
    let mut before = trace(2_000);
    before.push(b'\n');
    let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
    let mut input = before.clone();
    input.extend_from_slice(b"1 late\n9999999999999 never-decided\n");
    for block_bytes in [1, 100, BLOCK_BYTES] {
        let store = MemoryStore::new();
        let (out, result) = pipelined(&input, block_bytes, memory(&store));
        let err = result.unwrap_err().to_string();
        assert!(
            err.starts_with(&format!("line {line}: time 1 is before")),
            "{err}"
        );
        // Every request before it decided and printed, none after.
        assert_eq!(out, sequential(&before), "block of {block_bytes} bytes");
    }
}

#[test]
fn a_store_error_stops_the_decisions_at_its_line() {
    let input = trace(3_000);
    let requests = sequential(&input).iter().filter(|&&b| b == b'\n').count();
    let fail_at = requests / 2;
    for block_bytes in [1, 300, BLOCK_BYTES] {
        let store = MemoryStore::new();
        let calls = AtomicUsize::new(0);
        let mut decide = memory(&store);
        let (out, result) = pipelined(&input, block_bytes, |key, attempt| {
            if calls.fetch_add(1, Ordering::Relaxed) + 1 == fail_at {
                return Err(StoreError::Unavailable("down".into()));
            }
            decide(key, attempt)
        });
        assert!(
            matches!(result, Err(ReplayError::Store { .. })),
            "{result:?}"
        );
        // Exactly the decisions before the failing one were printed,
        // and nothing after it was decided.
        assert_eq!(out.iter().filter(|&&b| b == b'\n').count(), fail_at - 1);
        assert_eq!(
            calls.load(Ordering::Relaxed),
            fail_at,
            "block of {block_bytes} bytes"
        );
    }
}

#[test]
fn a_line_longer_than_the_maximum_is_refused_at_every_block_size() {
    let comment = |len: usize| format!("#{}", "c".repeat(len - 1));
    let longest = format!("1 a\n{}\n2 b\n", comment(MAX_LINE_BYTES));
    let too_long = format!("1 a\n{}\r\n2 b\n", comment(MAX_LINE_BYTES + 1));
    let last = format!("1 a\n{}", comment(MAX_LINE_BYTES + 1));
    for block_bytes in [1, 4096, MAX_LINE_BYTES, BLOCK_BYTES] {
        let store = MemoryStore::new();
        let (out, result) = pipelined(longest.as_bytes(), block_bytes, memory(&store));
        assert_eq!(result.unwrap().requests, 2, "block of {block_bytes} bytes");
        assert_eq!(out, sequential(b"1 a\n2 b\n"));
        for input in [&too_long, &last] {
            let store = MemoryStore::new();
            let (out, result) = pipelined(input.as_bytes(), block_bytes, memory(&store));
            let err = result.unwrap_err().to_string();
            assert!(
                err.starts_with("line 2: the line is longer than 65536 bytes ('#ccc"),
                "block of {block_bytes} bytes: {err}"
            );
            assert_eq!(out, sequential(b"1 a\n"));
        }
    }
}

#[test]
fn an_endless_line_is_refused_without_reading_it_whole() {
    // An input that never ends and has no second newline: a replay
    // buffering the whole line would never return.
    let input = io::Cursor::new(&b"1 a\n2 "[..]).chain(io::repeat(b'k'));
    let store = MemoryStore::new();
    let mut out = Vec::new();
    let result = replay_with(memory(&store), input, &mut out, Progress::Off, BLOCK_BYTES);
    let err = result.unwrap_err().to_string();
    assert!(
        err.starts_with("line 2: the line is longer than 65536 bytes ('2 kkk"),
        "{err}"
    );
    assert_eq!(out, sequential(b"1 a\n"));
}

/// Accepts `room` bytes, then fails every write.
struct Full {
    room: usize,
}

impl Write for Full {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.room == 0 {
            return Err(io::Error::new(io::ErrorKind::BrokenPipe, "closed"));
        }
        let n = buf.len().min(self.room);
        self.room -= n;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_closed_output_stops_the_replay_without_waiting_for_the_input() {
    let input = trace(20_000);
    for (room, block_bytes) in [(0, 64), (100_000, 64), (100_000, BLOCK_BYTES)] {
        let store = MemoryStore::new();
        let output = Full { room };
        let result = replay_with(
            memory(&store),
            &input[..],
            output,
            Progress::Off,
            block_bytes,
        );
        match result {
            Err(ReplayError::Write(e)) => assert_eq!(e.kind(), io::ErrorKind::BrokenPipe),
            other => panic!("{other:?}"),
        }
    }
}

/// Yields its bytes in reads of `step`, then fails.
struct Broken<'a> {
    bytes: &'a [u8],
    step: usize,
}

impl Read for Broken<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.bytes.is_empty() {
            return Err(io::Error::other("disk gone"));
        }
        let n = buf.len().min(self.step).min(self.bytes.len());
        buf[..n].copy_from_slice(&self.bytes[..n]);
        self.bytes = &self.bytes[n..];
        Ok(n)
    }
}

#[test]
fn a_read_error_decides_the_whole_lines_before_it() {
    let input = b"1 a\n2 b\n3 c\n4 half-a-li";
    for (step, block_bytes) in [(1, 1), (5, 4), (100, BLOCK_BYTES)] {
        let store = MemoryStore::new();
        let mut out = Vec::new();
        let reader = Broken { bytes: input, step };
        let result = replay_with(memory(&store), reader, &mut out, Progress::Off, block_bytes);
        assert!(
            matches!(&result, Err(ReplayError::Read(e)) if e.to_string() == "disk gone"),
            "{result:?}"
        );
        assert_eq!(out, sequential(b"1 a\n2 b\n3 c\n"), "reads of {step}");
    }
}
