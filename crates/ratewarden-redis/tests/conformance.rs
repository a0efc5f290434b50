//! The store conformance suite (docs/semantics.md §2) on Redis: all eleven
//! checks for each of the four algorithms, each test with a redis-server
//! of its own on a free port (killed when the test ends).

mod common;

use common::{RedisServer, store_on};
use ratewarden_testkit::TestStore;

ratewarden_testkit::store_conformance!(redis, || async {
    let server = RedisServer::start();
    let store = store_on(&server).await;
    TestStore::with_guard(store, server)
});
