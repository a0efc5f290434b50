//! Black-box HTTP tests of the seed routes (SPEC sections 1, 2, 3 and 5):
//! each test starts its own application on `127.0.0.1:0` with a fresh
//! SQLite file and a manual clock, and talks to it with `reqwest`.

mod concurrency;
mod errors;
mod helpers;
mod keys;
mod ping;
mod rate;
mod restart;
