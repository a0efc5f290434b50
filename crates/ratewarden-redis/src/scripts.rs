//! The Lua scripts: the batch script (every algorithm's decision and
//! write, all or nothing over the batch's keys) and the sliding log's
//! read-only one, each prefixed with `lua/decimal.lua`, the exact
//! decimal-string arithmetic they share.
//!
//! Why Lua: Redis runs a script atomically, so reading the state, deciding
//! whether to write and writing it (with its expiry) is one indivisible
//! step and one round trip: no `WATCH`/`MULTI` retries, no read-then-write
//! from Rust that two instances could interleave. The scripts keep only
//! that transition; Rust precomputes everything that depends on the
//! request alone and builds the decision with the reference algorithm from
//! the state the script saw.

use redis::Script;

const DECIMAL: &str = include_str!("lua/decimal.lua");

/// The compiled (hashed) scripts, run by `EVALSHA`; on `NOSCRIPT` (after a
/// restart or `SCRIPT FLUSH`) the caller loads the script and retries once
/// (`redis::Script` for the read-only one, `batch.rs` by hand for the
/// batch, whose command it builds in one buffer).
pub(crate) struct Scripts {
    pub(crate) batch: Script,
    pub(crate) sliding_log_read: Script,
}

fn script(body: &str) -> Script {
    Script::new(&format!("{DECIMAL}\n{body}"))
}

impl Scripts {
    pub(crate) fn new() -> Scripts {
        Scripts {
            batch: script(include_str!("lua/batch.lua")),
            sliding_log_read: script(include_str!("lua/sliding_log_read.lua")),
        }
    }

    /// Every script, to load them all when connecting.
    pub(crate) fn all(&self) -> [&Script; 2] {
        [&self.batch, &self.sliding_log_read]
    }
}
