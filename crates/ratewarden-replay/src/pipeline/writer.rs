//! The writing side of the pipeline: one line per decision, in the
//! trace's order, each counted for the summary.

use std::io::{self, BufWriter, Write};

use ratewarden_core::{Decision, Outcome, ceil_millis};

use super::Block;
use crate::ReplayError;
use crate::summary::{Summary, Tally};

/// Writes decisions and counts them.
pub(super) struct Writer<W: Write> {
    pub(super) out: BufWriter<W>,
    numbers: itoa::Buffer,
    tally: Tally,
}

impl<W: Write> Writer<W> {
    /// A writer of decisions to `output`, through a 64 KiB buffer.
    pub(super) fn new(output: W) -> Writer<W> {
        Writer {
            out: BufWriter::with_capacity(64 * 1024, output),
            numbers: itoa::Buffer::new(),
            tally: Tally::default(),
        }
    }

    /// Writes the block's decisions, then returns its `stop`, if any.
    pub(super) fn write(&mut self, block: &mut Block) -> Result<(), ReplayError> {
        for (request, decision) in block.requests.iter().zip(&block.decisions) {
            let key = &block.bytes[request.key.clone()];
            self.tally.count(key, decision.outcome);
            self.line(request.unix_ms, key, decision)
                .map_err(ReplayError::Write)?;
        }
        block.stop.take().map_or(Ok(()), Err)
    }

    /// Flushes what is buffered; the summary of what was written.
    pub(super) fn finish(mut self) -> (io::Result<()>, Summary) {
        (self.out.flush(), self.tally.summary())
    }

    /// `<unix_ms> <key> allow|deny <remaining> <retry_after_ms>` or
    /// `<unix_ms> <key> never - -`.
    pub(super) fn line(&mut self, unix_ms: u64, key: &[u8], decision: &Decision) -> io::Result<()> {
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
