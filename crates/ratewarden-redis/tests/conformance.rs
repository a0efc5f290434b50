//! The store conformance suite (docs/semantics.md §2) on Redis: all eleven
//! checks for each of the four algorithms, each test with a redis-server
//! of its own on a free port (killed when the test ends): once with the
//! batch as `FCALL` of the function library (Redis 7), once by `EVALSHA`
//! on a server without functions (as before Redis 7).

mod common;

use common::{RedisServer, server_without_functions, store_on};
use ratewarden_testkit::TestStore;

ratewarden_testkit::store_conformance!(redis, || async {
    let server = RedisServer::start();
    let store = store_on(&server).await;
    TestStore::with_guard(store, server)
});

ratewarden_testkit::store_conformance!(redis_evalsha, || async {
    let server = server_without_functions();
    let store = store_on(&server).await;
    assert!(!store.uses_functions());
    TestStore::with_guard(store, server)
});
