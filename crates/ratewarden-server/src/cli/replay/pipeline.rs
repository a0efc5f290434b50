//! The replay as a pipeline of blocks on two threads. The calling thread
//! reads a block of whole lines (about [`BLOCK_BYTES`]), parses and checks
//! its requests, and hands it to a second thread, which decides the
//! requests one by one, in trace order, on the one store; the calling
//! thread then writes the block's decisions and counts them while the next
//! block is being decided. On the memory store reading, parsing and
//! writing are about a third of the work and deciding two thirds
//! (BENCHMARKS.md), so on two cores the deciding thread sets the pace.
//!
//! Nothing changes in what is decided: one thread decides, in the trace's
//! order, exactly as a plain loop would (the output is byte-identical).
//! A replay that stops (a malformed line, a store or IO error) writes
//! every decision before the stopping line and no later one; the decision
//! thread stops at a store error, so nothing after it is decided.

use std::collections::HashMap;
use std::io::{self, BufWriter, Read, Write};
use std::num::NonZeroU64;
use std::ops::Range;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread;

use ratewarden_core::{Attempt, Decision, Key, Outcome, StoreError, Timestamp, ceil_millis};

use super::parse::{LineError, MAX_LINE_BYTES, parse_line, quote};
use super::{PROGRESS_EVERY, Progress, ReplayError, Summary};

/// Input bytes read per block: about 11,000 requests of a typical trace.
pub(super) const BLOCK_BYTES: usize = 256 * 1024;

/// Blocks read ahead of the last one written: one being decided, one
/// waiting, one being parsed.
const AHEAD: usize = 2;

/// One request of a block, its key as a range of the block's bytes.
#[derive(Debug)]
struct Pending {
    /// The 1-based line number, for a store error.
    line: u64,
    unix_ms: u64,
    key: Range<usize>,
    cost: NonZeroU64,
}

/// Whole lines of the trace, their requests and, once decided, the
/// decisions of the first `decisions.len()` requests.
#[derive(Debug, Default)]
struct Block {
    bytes: Vec<u8>,
    requests: Vec<Pending>,
    decisions: Vec<Decision>,
    /// Why the replay stops after this block's decisions.
    stop: Option<ReplayError>,
}

impl Block {
    fn clear(&mut self) {
        self.bytes.clear();
        self.requests.clear();
        self.decisions.clear();
        self.stop = None;
    }
}

/// Replays `input` to `output`, deciding each request with `decide`
/// (given the key's one part) on a thread of its own. `block_bytes` is
/// [`BLOCK_BYTES`] but for tests of block edges.
///
/// # Errors
/// [`ReplayError`] at the first malformed line, IO or store failure; the
/// decisions before it have been written and flushed.
pub(super) fn replay_with<D>(
    decide: D,
    input: impl Read,
    output: impl Write,
    progress: Progress,
    block_bytes: usize,
) -> Result<Summary, ReplayError>
where
    D: FnMut(&[u8], Attempt) -> Result<Decision, StoreError> + Send,
{
    let mut reader = Reader {
        input,
        block_bytes: block_bytes.max(1),
        carry: Vec::new(),
        line: 0,
        previous_ms: 0,
        progress,
        finished: false,
    };
    let mut writer = Writer::new(output);
    let stopped = thread::scope(|scope| {
        let (to_decide, blocks) = sync_channel::<Block>(AHEAD);
        let (to_write, decided) = sync_channel::<Block>(AHEAD);
        let spawned = thread::Builder::new()
            .name("replay-decide".into())
            .spawn_scoped(scope, move || decide_blocks(&blocks, &to_write, decide));
        if let Err(e) = spawned {
            return Some(ReplayError::Thread(e));
        }
        let mut spare: Vec<Block> = Vec::new();
        let mut ahead = 0;
        loop {
            let mut block = spare.pop().unwrap_or_default();
            if !reader.fill(&mut block) {
                break;
            }
            // Refused only once the decision thread has stopped at a store
            // error; its last block, with the error, is in `decided`.
            if to_decide.send(block).is_err() {
                break;
            }
            ahead += 1;
            loop {
                let next = if ahead > AHEAD {
                    decided.recv().ok()
                } else {
                    decided.try_recv().ok()
                };
                let Some(mut block) = next else { break };
                ahead -= 1;
                if let Err(e) = writer.write(&mut block) {
                    return Some(e);
                }
                spare.push(block);
            }
        }
        drop(to_decide);
        for mut block in decided {
            if let Err(e) = writer.write(&mut block) {
                return Some(e);
            }
        }
        None
    });
    if progress == Progress::Terminal && reader.line >= PROGRESS_EVERY {
        // Clear the progress line so the summary starts on a clean one.
        let _ = write!(io::stderr().lock(), "\r\x1b[2K");
    }
    let flushed = writer.out.flush().map_err(ReplayError::Write);
    if let Some(e) = stopped {
        return Err(e);
    }
    flushed?;
    let mut summary = writer.summary;
    summary.most_denied = super::most_denied(writer.denials, 10);
    Ok(summary)
}

/// The decision thread: decides every block in order until the blocks end,
/// the writer is gone, or the store fails (the block with the error is the
/// last one passed on).
fn decide_blocks<D>(blocks: &Receiver<Block>, decided: &SyncSender<Block>, mut decide: D)
where
    D: FnMut(&[u8], Attempt) -> Result<Decision, StoreError>,
{
    for mut block in blocks {
        for request in &block.requests {
            let attempt = Attempt {
                now: Timestamp::from_unix_millis(request.unix_ms),
                cost: request.cost,
            };
            match decide(&block.bytes[request.key.clone()], attempt) {
                Ok(decision) => block.decisions.push(decision),
                Err(error) => {
                    block.stop = Some(ReplayError::Store {
                        line: request.line,
                        error,
                    });
                    break;
                }
            }
        }
        // Fewer decisions than requests: the store failed.
        let failed = block.decisions.len() < block.requests.len();
        if decided.send(block).is_err() || failed {
            return;
        }
    }
}

/// Reads the trace as blocks of whole lines and parses them.
struct Reader<R> {
    input: R,
    block_bytes: usize,
    /// The start of a line the previous block cut off.
    carry: Vec<u8>,
    /// Lines read so far (every line, blank and comment lines too).
    line: u64,
    previous_ms: u64,
    progress: Progress,
    /// The input ended, failed, or held a malformed line.
    finished: bool,
}

impl<R: Read> Reader<R> {
    /// Fills `block` with the next whole lines and their requests; `false`
    /// when there is nothing more to replay. A block ends early, with its
    /// `stop`, at a malformed line or a read error (after the whole lines
    /// read before it).
    fn fill(&mut self, block: &mut Block) -> bool {
        if self.finished {
            return false;
        }
        block.clear();
        block.bytes.append(&mut self.carry);
        let ended = loop {
            let start = block.bytes.len();
            block.bytes.resize(start + self.block_bytes, 0);
            let read = self.input.read(&mut block.bytes[start..]);
            block.bytes.truncate(start + *read.as_ref().unwrap_or(&0));
            match read {
                Ok(0) => break true,
                Ok(_) if memchr::memchr(b'\n', &block.bytes[start..]).is_some() => break false,
                // No newline in the block: it is all one line so far.
                Ok(_) if block.bytes.len() > MAX_LINE_BYTES => {
                    block.stop = Some(ReplayError::Input {
                        line: self.line + 1,
                        problem: LineError::TooLong(quote(&block.bytes)),
                    });
                    block.bytes.clear();
                    self.finished = true;
                    return true;
                }
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    block.stop = Some(ReplayError::Read(e));
                    break true;
                }
            }
        };
        // At a clean end the last line needs no newline; otherwise the
        // bytes after the last newline start a line still to be read.
        let whole = if ended && block.stop.is_none() {
            block.bytes.len()
        } else {
            memchr::memrchr(b'\n', &block.bytes).map_or(0, |i| i + 1)
        };
        if !ended {
            self.carry.extend_from_slice(&block.bytes[whole..]);
        }
        block.bytes.truncate(whole);
        self.finished = ended;
        self.parse(block);
        !block.bytes.is_empty() || block.stop.is_some()
    }

    fn parse(&mut self, block: &mut Block) {
        let bytes = &block.bytes;
        let mut at = 0;
        while at < bytes.len() {
            let end = memchr::memchr(b'\n', &bytes[at..]).map_or(bytes.len(), |i| at + i + 1);
            let line = &bytes[at..end];
            self.line += 1;
            if self.progress == Progress::Terminal && self.line.is_multiple_of(PROGRESS_EVERY) {
                let _ = write!(io::stderr().lock(), "\r{} lines", self.line);
            }
            match self.request(line) {
                Ok(Some((unix_ms, key, cost))) => block.requests.push(Pending {
                    line: self.line,
                    unix_ms,
                    key: at + key.start..at + key.end,
                    cost,
                }),
                Ok(None) => {}
                Err(problem) => {
                    // A malformed line ends the replay, even before a read
                    // error later in the block.
                    block.stop = Some(ReplayError::Input {
                        line: self.line,
                        problem,
                    });
                    self.finished = true;
                    return;
                }
            }
            at = end;
        }
    }

    /// One line's request: its time, its key as a range of `line`, its
    /// cost; `None` for a blank or comment line.
    fn request(
        &mut self,
        line: &[u8],
    ) -> Result<Option<(u64, Range<usize>, NonZeroU64)>, LineError> {
        // Whatever the block size, as `fill` refuses it before it is whole.
        if line.strip_suffix(b"\n").unwrap_or(line).len() > MAX_LINE_BYTES {
            return Err(LineError::TooLong(quote(line)));
        }
        let Some(request) = parse_line(line)? else {
            return Ok(None);
        };
        if request.unix_ms < self.previous_ms {
            return Err(LineError::Backwards {
                time: request.unix_ms,
                previous: self.previous_ms,
            });
        }
        if request.key.len() > Key::MAX_BYTES
            && let Err(error) = Key::single(request.key)
        {
            return Err(LineError::Key {
                text: quote(request.key),
                error,
            });
        }
        self.previous_ms = request.unix_ms;
        // The key is a subslice of the line: its place is the distance
        // between their starts.
        let start = request.key.as_ptr().addr() - line.as_ptr().addr();
        let key = start..start + request.key.len();
        Ok(Some((request.unix_ms, key, request.cost)))
    }
}

/// Writes decisions and counts them.
struct Writer<W: Write> {
    out: BufWriter<W>,
    numbers: itoa::Buffer,
    summary: Summary,
    denials: HashMap<Box<[u8]>, u64, foldhash::fast::RandomState>,
}

impl<W: Write> Writer<W> {
    /// A writer of decisions to `output`, through a 64 KiB buffer.
    fn new(output: W) -> Writer<W> {
        Writer {
            out: BufWriter::with_capacity(64 * 1024, output),
            numbers: itoa::Buffer::new(),
            summary: Summary::default(),
            denials: HashMap::default(),
        }
    }

    /// Writes the block's decisions, then returns its `stop`, if any.
    fn write(&mut self, block: &mut Block) -> Result<(), ReplayError> {
        for (request, decision) in block.requests.iter().zip(&block.decisions) {
            let key = &block.bytes[request.key.clone()];
            self.summary.requests += 1;
            match decision.outcome {
                Outcome::Allowed => self.summary.allowed += 1,
                Outcome::Denied { .. } => {
                    self.summary.denied += 1;
                    match self.denials.get_mut(key) {
                        Some(n) => *n += 1,
                        None => {
                            self.denials.insert(key.into(), 1);
                        }
                    }
                }
                Outcome::Never => self.summary.never += 1,
            }
            self.line(request.unix_ms, key, decision)
                .map_err(ReplayError::Write)?;
        }
        block.stop.take().map_or(Ok(()), Err)
    }

    /// `<unix_ms> <key> allow|deny <remaining> <retry_after_ms>` or
    /// `<unix_ms> <key> never - -`.
    fn line(&mut self, unix_ms: u64, key: &[u8], decision: &Decision) -> io::Result<()> {
        let out = &mut self.out;
        out.write_all(self.numbers.format(unix_ms).as_bytes())?;
        out.write_all(b" ")?;
        out.write_all(key)?;
        let retry_after_ms = match decision.outcome {
            Outcome::Allowed => {
                out.write_all(b" allow ")?;
                0
            }
            Outcome::Denied { retry_after } => {
                out.write_all(b" deny ")?;
                ceil_millis(retry_after)
            }
            Outcome::Never => return out.write_all(b" never - -\n"),
        };
        out.write_all(self.numbers.format(decision.remaining).as_bytes())?;
        out.write_all(b" ")?;
        out.write_all(self.numbers.format(retry_after_ms).as_bytes())?;
        out.write_all(b"\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    use ratewarden_core::{Algorithm, MemoryStore, Policy, Quota};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

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
}
