//! The tests' own `redis-server` (from the testkit) and stores on it.

#![allow(dead_code)] // each test binary uses part of this

use std::sync::atomic::{AtomicU64, Ordering};

use ratewarden_redis::{RedisConfig, RedisStore};
#[allow(unused_imports)] // redis_store.rs names them, conformance.rs does not
pub use ratewarden_testkit::redis_server::{INSTALL, RedisServer, test_store_timeout};

/// A key prefix no other store of this process uses.
pub fn fresh_prefix() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    format!("t{}:", NEXT.fetch_add(1, Ordering::Relaxed))
}

/// A connected store on `server` with a fresh key prefix and the tests'
/// timeout, [`test_store_timeout`] (10 s): the conformance suite runs many
/// tests at once on 2 cores, and a call past the timeout fails its test.
pub async fn store_on(server: &RedisServer) -> RedisStore {
    let config = RedisConfig::from_url(&server.url())
        .expect("a valid URL")
        .with_key_prefix(&fresh_prefix())
        .expect("a valid prefix")
        .with_timeout(test_store_timeout());
    RedisStore::connect(config)
        .await
        .expect("connect to the test redis-server")
}

/// A `redis-server` without Redis 7's functions, as before 7.0 or where
/// an operator renamed the commands away, on a free port.
pub fn server_without_functions() -> RedisServer {
    RedisServer::start_with(
        ratewarden_testkit::redis_server::free_port(),
        &[
            "--rename-command",
            "FUNCTION",
            "",
            "--rename-command",
            "FCALL",
            "",
        ],
    )
}
