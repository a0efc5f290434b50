//! Reset: delete a policy's state for one key or every key under a
//! prefix, and count the counters that still held usage.
//!
//! `SCAN MATCH` over the keys' pattern (one exact name when the algorithm
//! keeps one key per counter), then per batch one pipelined read of the
//! states (to count those in use by the reference algorithms' own rule)
//! and one `UNLINK`, each round trip with its own timeout. Not atomic
//! across keys (see the crate docs).

use std::collections::HashSet;

use ratewarden_core::algorithm::{fixed_window, gcra, sliding_window};
use ratewarden_core::{Algorithm, KeyMatch, Policy, StoreError, Timestamp};

use crate::{RedisStore, keys, redis_error, sliding_log, sliding_window as sw};

/// Keys deleted per `UNLINK` during a reset, and the `SCAN` count hint.
const RESET_BATCH: usize = 500;

pub(crate) async fn reset(
    store: &RedisStore,
    policy: &Policy,
    selected: KeyMatch<'_>,
    now: Timestamp,
) -> Result<u64, StoreError> {
    let prefix = store.config.key_prefix();
    let mut live = HashSet::new();
    match (selected, policy.algorithm) {
        (KeyMatch::Exactly(key), algorithm) if algorithm != Algorithm::FixedWindow => {
            let name = keys::state(prefix, policy, key);
            unlink_counting(store, policy, &[name.into_bytes()], now, &mut live).await?;
        }
        _ => {
            let pattern = match selected {
                KeyMatch::Exactly(key) => keys::windows_pattern(prefix, policy, key),
                KeyMatch::StartingWith(key) => keys::scan_pattern(prefix, policy, key),
            };
            let mut cursor = 0u64;
            loop {
                let pattern = &pattern;
                let (next, found): (u64, Vec<Vec<u8>>) = store
                    .call(|mut con| async move {
                        redis::cmd("SCAN")
                            .arg(cursor)
                            .arg("MATCH")
                            .arg(pattern)
                            .arg("COUNT")
                            .arg(RESET_BATCH)
                            .query_async(&mut con)
                            .await
                            .map_err(redis_error)
                    })
                    .await?;
                for batch in found.chunks(RESET_BATCH) {
                    unlink_counting(store, policy, batch, now, &mut live).await?;
                }
                if next == 0 {
                    break;
                }
                cursor = next;
            }
        }
    }
    Ok(live.len() as u64)
}

/// Reads the states at `names`, adds the counters of those in use at `now`
/// to `live`, and unlinks them all.
async fn unlink_counting(
    store: &RedisStore,
    policy: &Policy,
    names: &[Vec<u8>],
    now: Timestamp,
    live: &mut HashSet<Vec<u8>>,
) -> Result<(), StoreError> {
    if names.is_empty() {
        return Ok(());
    }
    let quota = &policy.quota;
    let in_use: Vec<bool> = store
        .call(|mut con| async move {
            let mut pipe = redis::pipe();
            for name in names {
                match policy.algorithm {
                    Algorithm::FixedWindow | Algorithm::Gcra => pipe.cmd("GET").arg(name),
                    Algorithm::SlidingWindow => {
                        pipe.cmd("HMGET").arg(name).arg("k").arg("curr").arg("prev")
                    }
                    Algorithm::SlidingLog => pipe
                        .cmd("ZLEXCOUNT")
                        .arg(name)
                        .arg(sliding_log::live_from(quota, now))
                        .arg("+"),
                };
            }
            Ok(match policy.algorithm {
                Algorithm::FixedWindow => {
                    let counts: Vec<Option<String>> =
                        pipe.query_async(&mut con).await.map_err(redis_error)?;
                    let k = fixed_window::window_index(quota, now);
                    names
                        .iter()
                        .zip(counts)
                        .map(|(name, count)| {
                            let window = keys::window_of(name);
                            let state =
                                crate::fixed_window::state(window.unwrap_or(u64::MAX), count)?;
                            Ok(window == Some(k)
                                && state.is_some_and(|s| fixed_window::in_use(s, quota, now)))
                        })
                        .collect::<Result<_, StoreError>>()?
                }
                Algorithm::Gcra => {
                    let tats: Vec<Option<String>> =
                        pipe.query_async(&mut con).await.map_err(redis_error)?;
                    tats.into_iter()
                        .map(|tat| {
                            Ok(crate::gcra::decode(tat)?.is_some_and(|s| gcra::in_use(s, now)))
                        })
                        .collect::<Result<_, StoreError>>()?
                }
                Algorithm::SlidingWindow => {
                    let states: Vec<sw::Stored> =
                        pipe.query_async(&mut con).await.map_err(redis_error)?;
                    states
                        .into_iter()
                        .map(|s| {
                            Ok(sw::decode(s)?
                                .is_some_and(|s| sliding_window::in_use(s, quota, now)))
                        })
                        .collect::<Result<_, StoreError>>()?
                }
                Algorithm::SlidingLog => {
                    let counts: Vec<u64> = pipe.query_async(&mut con).await.map_err(redis_error)?;
                    counts.into_iter().map(|n| n > 0).collect()
                }
            })
        })
        .await?;
    for (name, used) in names.iter().zip(in_use) {
        if used {
            live.insert(keys::counter_of(name).to_vec());
        }
    }
    store
        .call(|mut con| async move {
            redis::cmd("UNLINK")
                .arg(names)
                .query_async::<u64>(&mut con)
                .await
                .map_err(redis_error)
        })
        .await?;
    Ok(())
}
