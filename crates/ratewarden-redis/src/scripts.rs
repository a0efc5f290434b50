//! The Lua code: the batch (every algorithm's decision and write, all or
//! nothing over the batch's keys) and the sliding log's read-only script,
//! each prefixed with `lua/decimal.lua`, the exact decimal-string
//! arithmetic they share.
//!
//! Why Lua: Redis runs a script atomically, so reading the state, deciding
//! whether to write and writing it (with its expiry) is one indivisible
//! step and one round trip: no `WATCH`/`MULTI` retries, no read-then-write
//! from Rust that two instances could interleave. The scripts keep only
//! that transition; Rust precomputes everything that depends on the
//! request alone and builds the decision with the reference algorithm from
//! the state the script saw.
//!
//! # Two forms of the batch
//! - **A function library** (Redis ≥ 7.0, Valkey): `FUNCTION LOAD` once,
//!   then `FCALL`. The library's top level runs once at load, so a call
//!   runs only the batch itself; `EVALSHA` of the same code re-creates
//!   every local function of `decimal.lua` and `batch.lua` on each call,
//!   which made a third of the script's time
//!   (docs/design/redis-script.md#fcall-and-evalsha). The library and its
//!   one function are named after the code's SHA-1, so instances of
//!   different versions sharing one Redis each call their own code; a
//!   library of an older version stays until an operator deletes it
//!   (`FUNCTION DELETE`).
//!   Functions are kept in Redis's snapshots and replicated, unlike
//!   scripts; after `FUNCTION FLUSH`, or a restart without persistence,
//!   `FCALL` answers "Function not found" and the store loads the library
//!   again and retries once.
//! - **A script** run by `EVALSHA` (`NOSCRIPT` → `SCRIPT LOAD` and one
//!   retry, by `redis::Script`): where `FUNCTION` is unknown (Redis 6,
//!   or renamed away), not permitted (ACLs), or refused for any other
//!   reason when the store connects. The answer is the same either way:
//!   both run the same `batch` body.

use std::sync::atomic::{AtomicBool, Ordering};

use crate::link::Conn;
use redis::{Cmd, RedisError, Script};

const DECIMAL: &str = include_str!("lua/decimal.lua");
const BATCH: &str = include_str!("lua/batch.lua");

/// The batch's code and how to run it, and the sliding log's read-only
/// script (run by `EVALSHA` only: it serves status reads).
pub(crate) struct Scripts {
    batch: Script,
    /// `FUNCTION LOAD`'s argument: `#!lua name=…`, the code, the register.
    library: String,
    /// The function's name, `ratewarden_batch_<12 hex digits of the SHA-1>`.
    function: String,
    /// The library's name, `ratewarden_<the same 12 hex digits>`, as
    /// `FUNCTION LIST` shows it.
    library_name: String,
    /// Whether calls go through `FCALL` (decided when connecting, turned
    /// off for good if the server later refuses `FCALL`).
    functions: AtomicBool,
    pub(crate) sliding_log_read: Script,
}

/// What a refusal of `FUNCTION LOAD` or `FCALL` means.
enum Refusal {
    /// The library is loaded already (by another instance, or a race).
    AlreadyLoaded,
    /// The server has no such library (flushed, or restarted empty).
    NotFound,
    /// Functions cannot be used here: the script form instead.
    Unusable,
    /// Anything else: the error stands.
    Other,
}

fn refusal(e: &RedisError) -> Refusal {
    let detail = e.detail().unwrap_or_default();
    if detail.contains("already exists") {
        Refusal::AlreadyLoaded
    } else if detail.contains("Function not found") {
        Refusal::NotFound
    } else if e.code().is_some_and(|c| c == "NOPERM")
        || detail.starts_with("unknown command")
        || detail.starts_with("unknown subcommand")
    {
        Refusal::Unusable
    } else {
        Refusal::Other
    }
}

impl Scripts {
    pub(crate) fn new() -> Scripts {
        let code = format!("{DECIMAL}\n{BATCH}");
        let batch = Script::new(&format!("{code}\nreturn batches(KEYS, ARGV)\n"));
        let hash = batch.get_hash().get(..12).unwrap_or_default().to_owned();
        let function = format!("ratewarden_batch_{hash}");
        let library_name = format!("ratewarden_{hash}");
        let library = format!(
            "#!lua name={library_name}\n{code}\n\
             redis.register_function('{function}', function(keys, argv) return batches(keys, argv) end)\n"
        );
        Scripts {
            batch,
            library,
            function,
            library_name,
            functions: AtomicBool::new(false),
            sliding_log_read: Script::new(&format!(
                "{DECIMAL}\n{}",
                include_str!("lua/sliding_log_read.lua")
            )),
        }
    }

    /// Whether batches run as `FCALL` of the function library.
    pub(crate) fn uses_functions(&self) -> bool {
        self.functions.load(Ordering::Relaxed)
    }

    /// Loads everything when connecting: the scripts, then the library
    /// (functions are used only if that succeeds).
    pub(crate) async fn load(&self, con: &mut Conn) -> Result<(), RedisError> {
        self.batch.load_async(con).await?;
        self.sliding_log_read.load_async(con).await?;
        let loaded = self.load_library(con).await?;
        if loaded {
            tracing::debug!(library = %self.library_name, "Redis batches run by FCALL");
        }
        self.functions.store(loaded, Ordering::Relaxed);
        Ok(())
    }

    /// `Ok(true)` when the library is there now, `Ok(false)` when
    /// functions are unusable on this server.
    async fn load_library(&self, con: &mut Conn) -> Result<bool, RedisError> {
        let loaded: Result<String, RedisError> = redis::cmd("FUNCTION")
            .arg("LOAD")
            .arg(&self.library)
            .query_async(con)
            .await;
        match loaded {
            Ok(_) => Ok(true),
            Err(e) => match refusal(&e) {
                Refusal::AlreadyLoaded => Ok(true),
                Refusal::Unusable => {
                    tracing::info!(error = %e, "Redis functions unavailable: batches run by EVALSHA");
                    Ok(false)
                }
                // Refused for another reason the server gives as ERR: the
                // script form, and the reason said. Transient errors (I/O,
                // LOADING, READONLY, OOM) stand: the connection is retried.
                _ if e.code() == Some("ERR") => {
                    tracing::warn!(error = %e, "FUNCTION LOAD refused: batches run by EVALSHA");
                    Ok(false)
                }
                _ => Err(e),
            },
        }
    }

    /// Runs the batch with `keys` and `args` (as `batch.lua` takes them):
    /// `FCALL` of the library, or `EVALSHA` of the script.
    pub(crate) async fn run_batch<T: redis::FromRedisValue>(
        &self,
        con: &mut Conn,
        keys: &[&str],
        args: &[&str],
    ) -> Result<T, RedisError> {
        if self.uses_functions() {
            let mut fcall = Cmd::new();
            fcall
                .arg("FCALL")
                .arg(&self.function)
                .arg(keys.len())
                .arg(keys)
                .arg(args);
            match fcall.query_async(con).await {
                Ok(reply) => return Ok(reply),
                Err(e) => match refusal(&e) {
                    Refusal::NotFound => {
                        if self.load_library(con).await? {
                            return fcall.query_async(con).await;
                        }
                        self.functions.store(false, Ordering::Relaxed);
                    }
                    Refusal::Unusable => self.functions.store(false, Ordering::Relaxed),
                    Refusal::AlreadyLoaded | Refusal::Other => return Err(e),
                },
            }
        }
        let mut invocation = self.batch.prepare_invoke();
        invocation.key(keys).arg(args);
        invocation.invoke_async(con).await
    }
}
