//! The reading side of the pipeline: the trace read as blocks of whole
//! lines, each line parsed and checked against the ones before it.

use std::io::{self, Read, Write};
use std::num::NonZeroU64;
use std::ops::Range;

use ratewarden_core::Key;

use super::{Block, PROGRESS_EVERY, Pending, Progress};
use crate::ReplayError;
use crate::line::{LineError, MAX_LINE_BYTES, parse_line};
use crate::quote::quote;

/// Reads the trace as blocks of whole lines and parses them.
pub(super) struct Reader<R> {
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
    /// A reader of `input` in reads of `block_bytes` (at least 1).
    pub(super) fn new(input: R, block_bytes: usize, progress: Progress) -> Reader<R> {
        Reader {
            input,
            block_bytes: block_bytes.max(1),
            carry: Vec::new(),
            line: 0,
            previous_ms: 0,
            progress,
            finished: false,
        }
    }

    /// Lines read so far, blank and comment lines too.
    pub(super) fn lines(&self) -> u64 {
        self.line
    }

    /// Fills `block` with the next whole lines and their requests; `false`
    /// when there is nothing more to replay. A block ends early, with its
    /// `stop`, at a malformed line or a read error (after the whole lines
    /// read before it).
    pub(super) fn fill(&mut self, block: &mut Block) -> bool {
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
