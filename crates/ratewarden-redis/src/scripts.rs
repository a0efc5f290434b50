//! The Lua scripts, one per algorithm (plus the sliding log's read-only
//! one), each prefixed with `lua/decimal.lua`, the exact decimal-string
//! arithmetic they share.
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

/// The compiled (hashed) scripts. `redis::Script` runs `EVALSHA` and, on
/// `NOSCRIPT` (after a restart or `SCRIPT FLUSH`), loads the script and
/// retries once.
pub(crate) struct Scripts {
    pub(crate) fixed_window: Script,
    pub(crate) sliding_log: Script,
    pub(crate) sliding_log_read: Script,
    pub(crate) sliding_window: Script,
    pub(crate) gcra: Script,
}

fn script(body: &str) -> Script {
    Script::new(&format!("{DECIMAL}\n{body}"))
}

impl Scripts {
    pub(crate) fn new() -> Scripts {
        Scripts {
            fixed_window: script(include_str!("lua/fixed_window.lua")),
            sliding_log: script(include_str!("lua/sliding_log.lua")),
            sliding_log_read: script(include_str!("lua/sliding_log_read.lua")),
            sliding_window: script(include_str!("lua/sliding_window.lua")),
            gcra: script(include_str!("lua/gcra.lua")),
        }
    }

    /// Every script, to load them all when connecting.
    pub(crate) fn all(&self) -> [&Script; 5] {
        [
            &self.fixed_window,
            &self.sliding_log,
            &self.sliding_log_read,
            &self.sliding_window,
            &self.gcra,
        ]
    }
}
