//! How a [`Key`] is written into the seeds' key columns.
//!
//! Keys are opaque bytes and must never collide (SPEC section 5). SQLite
//! compares a TEXT value and a BLOB value as different even when their bytes
//! agree, so:
//!
//! - `rate_limit_windows.key`: a one-part UTF-8 key is stored as that TEXT
//!   (seed A writes the client key, e.g. `alice`); any other key is stored
//!   as its length-prefixed [`Key::encoded`] BLOB.
//! - `rate_events(user_id, endpoint)`: a key of two parts whose first part
//!   is a user id in canonical decimal (1 to 2^63 − 1, no leading zeros) is
//!   stored as seed B does, `user_id` INTEGER and `endpoint` TEXT (BLOB when
//!   not UTF-8). Any other key is stored with `user_id = 0`, which no seed
//!   user has, and its encoding as the `endpoint` BLOB.

use ratewarden_core::Key;
use rusqlite::ToSql;
use rusqlite::types::{ToSqlOutput, ValueRef};

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
    if let (Some(user), Some(endpoint), None) = (parts.next(), parts.next(), parts.next()) {
        if let Some(id) = canonical_user_id(user) {
            return (id, text_or_blob(endpoint));
        }
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
