//! What a replay needs to know: the one policy, the store and how to
//! treat a store in use. The command line builds it (`ratewarden replay`'s
//! flags, in the server crate).

use std::num::NonZeroU64;
use std::time::Duration;

use ratewarden_config::{StoreConfig, StoreOptions};
use ratewarden_core::Policy;
use ratewarden_sqlite::SqliteStore;

use crate::ReplayError;

/// What a replay adds to the TTL of every key it writes to Redis: one day
/// (the service adds 1 s). Redis counts a TTL down on its own clock, while
/// a replay decides at its trace's times: a replay slower than its trace,
/// or a second replay continuing on the same Redis later, would otherwise
/// find state forgotten that its trace still needs (a fixed window's count
/// gone after a pause, and the next request allowed). A longer TTL changes
/// no answer, since the state carries its window or its instants
/// ([`RedisConfig::ttl_slack`](ratewarden_redis::RedisConfig::ttl_slack)); a replay's
/// keys stay in Redis up to a day after their last write.
pub const REDIS_TTL_SLACK: Duration = Duration::from_secs(24 * 60 * 60);

/// Validated settings of a replay.
#[derive(Debug, Clone)]
pub struct ReplaySettings {
    /// The policy every request is decided by (named `replay`).
    pub policy: Policy,
    /// Where state lives.
    pub store: StoreConfig,
    /// What to do with a SQLite file that a running service has open.
    pub live_store: LiveStore,
    /// The longest one Redis call may take (`--store-timeout-ms`).
    pub store_timeout: Duration,
}

/// What a replay does with a SQLite store that a running service (or
/// another replay) holds open (`--allow-live-store`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LiveStore {
    /// Refuse it before opening it: replaying would change live counters.
    Refuse,
    /// Warn and replay on it anyway.
    Allow,
}

impl ReplaySettings {
    /// The store's configuration for a replay: a Redis store's keys get
    /// [`REDIS_TTL_SLACK`] on top of their TTLs.
    pub(crate) fn store_config(&self) -> StoreConfig {
        match &self.store {
            StoreConfig::Redis(config) => {
                StoreConfig::Redis(config.clone().with_ttl_slack(REDIS_TTL_SLACK))
            }
            other => other.clone(),
        }
    }

    /// The store's options for a replay.
    pub(crate) fn store_options(&self) -> StoreOptions {
        StoreOptions {
            call_timeout: self.store_timeout,
            // Offline, a trace's keys are the user's own: no bound but theirs.
            max_keys: NonZeroU64::MAX,
            ..StoreOptions::default()
        }
    }
}

/// Refuses (or, with [`LiveStore::Allow`], warns about) a SQLite store
/// whose file a running service holds. Runs before this process opens
/// the file (see [`SqliteStore::in_use`]): the replay's policy is named
/// `replay`, and a service with a policy of that name would see its
/// counters change under it.
///
/// # Errors
/// [`ReplayError::LiveStore`] for a held file, unless allowed;
/// [`ReplayError::InUseCheck`] when it cannot be told.
pub fn check_not_live(store: &StoreConfig, live: LiveStore) -> Result<(), ReplayError> {
    let StoreConfig::Sqlite(path) = store else {
        return Ok(());
    };
    let in_use = SqliteStore::in_use(path).map_err(|error| ReplayError::InUseCheck {
        path: path.clone(),
        error,
    })?;
    match (in_use, live) {
        (false, _) => Ok(()),
        (true, LiveStore::Refuse) => Err(ReplayError::LiveStore(path.clone())),
        (true, LiveStore::Allow) => {
            tracing::warn!(
                file = %path.display(),
                "the SQLite file is in use by a running ratewarden service; \
                 replaying on it anyway (--allow-live-store) changes its live counters"
            );
            Ok(())
        }
    }
}
