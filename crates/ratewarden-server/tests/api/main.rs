//! Black-box tests of the seed routes, the `/v1` API and Envoy's rate
//! limit service (gRPC through tonic's client, and `POST /json`): each test
//! starts its own application on `127.0.0.1:0` with a fresh SQLite file
//! (or the memory store, or a Redis of its own) and a manual clock, and
//! talks to it with `reqwest`.

#[macro_use]
#[path = "../common/every_store.rs"]
mod every_store;

mod authorize;
mod bodies;
mod concurrency;
mod envoy;
mod envoy_ops;
mod errors;
mod forwarded_paths;
mod helpers;
mod keys;
mod ping;
mod rate;
mod restart;
mod v1;
