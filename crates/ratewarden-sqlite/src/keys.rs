//! Where a policy's state lives, and how a [`Key`] is written into the
//! key columns.
//!
//! State belongs to (policy name, algorithm, key). The two seed policies
//! keep the seeds' tables with exactly the seeds' rows: the policy named
//! `ping` as a fixed window lives in `rate_limit_windows`, the policy
//! named `check` as a sliding log in `rate_events` ([`Place`]). Every
//! other policy lives in ratewarden's own tables (`rw_fixed_window`,
//! `rw_sliding_log`, `rw_sliding_window`, `rw_gcra`), whose primary key
//! starts with the policy name, so two policies never share a row.
//!
//! Keys are opaque bytes and must never collide. In the own tables a key
//! is its [`Key::encoded`] BLOB. SQLite compares a TEXT value and a BLOB
//! value as different even when their bytes agree, so in the seed tables:
//!
//! - `rate_limit_windows.key`: a one-part UTF-8 key is stored as that TEXT
//!   (seed A writes the client key, e.g. `alice`); any other key is stored
//!   as its length-prefixed [`Key::encoded`] BLOB.
//! - `rate_events(user_id, endpoint)`: a key of two parts whose first part
//!   is a user id in canonical decimal (1 to 2^63 − 1, no leading zeros) is
//!   stored as seed B does, `user_id` INTEGER and `endpoint` TEXT (BLOB when
//!   not UTF-8). Any other key is stored with `user_id = 0`, which no seed
//!   user has, and its encoding as the `endpoint` BLOB.

use ratewarden_core::{Algorithm, Key, KeyMatch, Policy};
use rusqlite::ToSql;
use rusqlite::types::{ToSqlOutput, ValueRef};

/// The table a policy's state lives in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Place {
    /// `rate_limit_windows` (seed A): the fixed window named `ping`.
    SeedWindows,
    /// `rate_events` (seed B): the sliding log named `check`.
    SeedEvents,
    /// The algorithm's own `rw_*` table, keyed by policy name.
    Own,
}

/// The seed route policies' names.
pub(crate) const PING: &str = "ping";
pub(crate) const CHECK: &str = "check";

/// Where `policy`'s state lives.
pub(crate) fn place(policy: &Policy) -> Place {
    match (policy.algorithm, &*policy.name) {
        (Algorithm::FixedWindow, PING) => Place::SeedWindows,
        (Algorithm::SlidingLog, CHECK) => Place::SeedEvents,
        _ => Place::Own,
    }
}

/// The SQL condition selecting a policy's `keys` in an own table, over
/// three parameters: `?1` the policy name, `?2` the key's encoding, `?3`
/// its length in bytes (both conditions use all three, so one parameter
/// list fits either). Bind them with [`own_params`].
pub(crate) fn own_selection(keys: KeyMatch<'_>) -> &'static str {
    match keys {
        KeyMatch::Exactly(_) => "policy = ?1 AND key = ?2 AND length(key) = ?3",
        KeyMatch::StartingWith(_) => "policy = ?1 AND substr(key, 1, ?3) = ?2",
    }
}

/// The three parameters of [`own_selection`].
pub(crate) fn own_params<'a>(policy: &'a Policy, keys: KeyMatch<'a>) -> (&'a str, &'a [u8], i64) {
    let encoded = keys.key().encoded();
    (&policy.name, encoded, encoded.len() as i64)
}

/// A key column value: TEXT or BLOB.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Column<'a> {
    Text(&'a str),
    Blob(&'a [u8]),
}

impl ToSql for Column<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::Borrowed(match *self {
            Column::Text(s) => ValueRef::Text(s.as_bytes()),
            Column::Blob(b) => ValueRef::Blob(b),
        }))
    }
}

fn text_or_blob(bytes: &[u8]) -> Column<'_> {
    match std::str::from_utf8(bytes) {
        Ok(s) => Column::Text(s),
        Err(_) => Column::Blob(bytes),
    }
}

/// `rate_limit_windows.key` for `key`.
pub(crate) fn window_key(key: &Key) -> Column<'_> {
    let mut parts = key.parts();
    match (parts.next(), parts.next()) {
        (Some(only), None) if std::str::from_utf8(only).is_ok() => text_or_blob(only),
        _ => Column::Blob(key.encoded()),
    }
}

/// `(rate_events.user_id, rate_events.endpoint)` for `key`.
pub(crate) fn event_key(key: &Key) -> (i64, Column<'_>) {
    let mut parts = key.parts();
    if let (Some(user), Some(endpoint), None) = (parts.next(), parts.next(), parts.next())
        && let Some(id) = canonical_user_id(user)
    {
        return (id, text_or_blob(endpoint));
    }
    (0, Column::Blob(key.encoded()))
}

/// `Some(id)` for canonical decimal 1 ..= 2^63 − 1 (no sign, no leading zero).
fn canonical_user_id(bytes: &[u8]) -> Option<i64> {
    if bytes.first() == Some(&b'0') || !bytes.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(bytes)
        .ok()?
        .parse::<i64>()
        .ok()
        .filter(|&id| id > 0)
}

/// The SQL conditions and values that select every stored key starting
/// with `prefix`, for [`ratewarden_core::Store::reset`].
pub(crate) enum EventPrefix<'a> {
    /// `user_id = ?` (and `endpoint = ?` when given), plus encoded keys.
    User(i64, Option<Column<'a>>),
    /// Only encoded keys (`user_id = 0`).
    Encoded,
}

/// How [`event_key`] stored the keys that start with `prefix`.
pub(crate) fn event_prefix(prefix: &Key) -> EventPrefix<'_> {
    let mut parts = prefix.parts();
    match (parts.next(), parts.next(), parts.next()) {
        (Some(user), None, None) => {
            canonical_user_id(user).map_or(EventPrefix::Encoded, |id| EventPrefix::User(id, None))
        }
        (Some(_), Some(_), None) => match event_key(prefix) {
            (0, _) => EventPrefix::Encoded,
            (id, endpoint) => EventPrefix::User(id, Some(endpoint)),
        },
        _ => EventPrefix::Encoded,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn is_text(c: Column<'_>, expected: &str) -> bool {
        matches!(c, Column::Text(s) if s == expected)
    }

    #[test]
    fn seed_keys_are_stored_as_the_seeds_store_them() {
        assert!(is_text(window_key(&Key::single("alice").unwrap()), "alice"));
        let key = Key::new(["7", "/orders"]).unwrap();
        let (id, endpoint) = event_key(&key);
        assert_eq!(id, 7);
        assert!(is_text(endpoint, "/orders"));
    }

    #[test]
    fn other_keys_are_stored_encoded() {
        let two = Key::new(["a", "b"]).unwrap();
        assert!(matches!(window_key(&two), Column::Blob(b) if b == two.encoded()));
        for user in ["07", "0", "-1", "x", "9223372036854775808"] {
            let key = Key::new([user, "/e"]).unwrap();
            assert_eq!(event_key(&key).0, 0, "user part {user:?}");
        }
    }
}
