//! Black-box HTTP tests of the seed routes and the `/v1` API: each test
//! starts its own application on `127.0.0.1:0` with a fresh SQLite file
//! (or the memory store, or a Redis of its own) and a manual clock, and
//! talks to it with `reqwest`.

mod concurrency;
mod errors;
mod helpers;
mod keys;
mod ping;
mod rate;
mod restart;
mod v1;
