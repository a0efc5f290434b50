//! The replay as a pipeline of blocks on two threads. The calling thread
//! reads a block of whole lines (about [`BLOCK_BYTES`]), parses and checks
//! its requests ([`reader`]), and hands it to a second thread, which
//! decides the requests one by one, in trace order, on the one store; the
//! calling thread then writes the block's decisions and counts them
//! ([`writer`]) while the next block is being decided. Reading, parsing
//! and writing are the smaller part of the work on the memory store, so
//! on two cores the deciding thread sets the pace.
//!
//! Nothing changes in what is decided: one thread decides, in the trace's
//! order, exactly as a plain loop would (the output is byte-identical).
//! A replay that stops (a malformed line, a store or IO error) writes
//! every decision before the stopping line and no later one; the decision
//! thread stops at a store error, so nothing after it is decided.

mod reader;
mod writer;

use std::io::{self, Read, Write};
use std::num::NonZeroU64;
use std::ops::Range;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread;

use ratewarden_core::{Attempt, Decision, StoreError, Timestamp};

use crate::{ReplayError, Summary};
use reader::Reader;
use writer::Writer;

/// Input bytes read per block: about 11,000 requests of a typical trace.
pub(crate) const BLOCK_BYTES: usize = 256 * 1024;

/// Blocks read ahead of the last one written: one being decided, one
/// waiting, one being parsed.
const AHEAD: usize = 2;

/// How often progress is shown on a terminal, in lines.
const PROGRESS_EVERY: u64 = 100_000;

/// Whether to show progress on standard error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// Every 100,000 lines, on one overwritten line.
    Terminal,
    /// Not at all (standard error is a file or a pipe).
    Off,
}

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
pub(crate) fn replay_with<D>(
    decide: D,
    input: impl Read,
    output: impl Write,
    progress: Progress,
    block_bytes: usize,
) -> Result<Summary, ReplayError>
where
    D: FnMut(&[u8], Attempt) -> Result<Decision, StoreError> + Send,
{
    let mut reader = Reader::new(input, block_bytes, progress);
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
    if progress == Progress::Terminal && reader.lines() >= PROGRESS_EVERY {
        // Clear the progress line so the summary starts on a clean one.
        let _ = write!(io::stderr().lock(), "\r\x1b[2K");
    }
    let (flushed, summary) = writer.finish();
    if let Some(e) = stopped {
        return Err(e);
    }
    flushed.map_err(ReplayError::Write)?;
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

#[cfg(test)]
mod tests;
