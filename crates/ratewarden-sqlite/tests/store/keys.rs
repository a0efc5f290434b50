//! Keys are opaque: every adversarial key has a counter of its own.

use std::collections::HashSet;

use ratewarden_core::{Algorithm, Key, Outcome, Store};

use crate::common::{acquire, at, key, open, policy, rows, sql, temp_db};
use crate::schema::TABLES;
use crate::user_tables;

/// Keys any client may send; none may share a counter with another.
fn adversarial_keys() -> Vec<Key> {
    let kib = "k".repeat(1024);
    let kib_other = format!("{}x", "k".repeat(1023));
    let joined = key(["ab", "c"]);
    let not_utf8 = key([b"ab".as_slice(), b"\xff"]);
    vec![
        key(["a"]),
        key([""]),
        key(["a:b"]),
        key(["a:b:c"]),
        key(["a b"]),
        key([" a b "]),
        key(["it's"]),
        key(["\"quoted\""]),
        key(["'; DROP TABLE rate_limit_windows;--"]),
        key(["*"]),
        key(["?"]),
        key(["[a-z]"]),
        key(["a*?[]"]),
        key(["%"]),
        key(["_"]),
        key(["café"]),
        key(["cafe\u{301}"]),
        key(["日本"]),
        key(["🦀"]),
        key(["a\0b"]),
        key(["a\0c"]),
        key([b"\xff".as_slice()]),
        key([b"\xff\xfe".as_slice()]),
        key([b"caf\xc3".as_slice()]),
        key([b"\x01\xff".as_slice()]),
        key([kib.as_str()]),
        key([kib_other.as_str()]),
        key(["ab", "c"]),
        key(["a", "bc"]),
        key(["abc"]),
        key(["a", "b", "c"]),
        key(["abc", ""]),
        key(["", "abc"]),
        // A one-part key whose bytes are another key's encoding.
        Key::single(joined.encoded()).expect("short enough"),
        Key::single(not_utf8.encoded()).expect("short enough"),
        not_utf8,
        // Seed B's shapes and their near misses.
        key(["7", "/orders"]),
        key(["7", "/orders "]),
        key(["7", "/Orders"]),
        key(["07", "/orders"]),
        key(["70", "/orders"]),
        key(["0", "/orders"]),
        key(["-7", "/orders"]),
        key(["+7", "/orders"]),
        key(["9223372036854775807", "/orders"]),
        key(["9223372036854775808", "/orders"]),
        key([b"7".as_slice(), b"/orders\xff"]),
        key(["7", "/orders", ""]),
        key(["7"]),
        key(["7/orders"]),
        key(["7", kib.as_str()]),
    ]
}

/// Exhausts each key in turn (limit 2): every key must still have its
/// full limit when its turn comes, and end with exactly its own usage.
async fn assert_every_key_has_its_own_counter(algorithm: Algorithm) {
    let (_dir, path) = temp_db();
    let store = open(&path);
    let p = policy(algorithm, 2, 60);
    let keys = adversarial_keys();
    let distinct: HashSet<&Key> = keys.iter().collect();
    assert_eq!(distinct.len(), keys.len(), "the test's keys are distinct");

    for k in &keys {
        for n in 1..=2 {
            let d = acquire(&store, &p, k, at(10)).await;
            assert_eq!(d.outcome, Outcome::Allowed, "{algorithm}: {k} attempt {n}");
            assert_eq!(d.used, n, "{algorithm}: {k} starts untouched");
        }
        let d = acquire(&store, &p, k, at(10)).await;
        assert!(!d.allowed(), "{algorithm}: {k} is exhausted after 2");
    }

    let expected_used = match algorithm {
        Algorithm::FixedWindow => 3, // the refused attempt is counted
        _ => 2,
    };
    for k in &keys {
        let d = store
            .status(&p, k, at(11))
            .await
            .expect("the store answers");
        assert_eq!(d.used, expected_used, "{algorithm}: {k} kept its own count");
    }

    let conn = sql(&path);
    let n = keys.len() as i64;
    match algorithm {
        Algorithm::FixedWindow => assert_eq!(rows(&conn, "rate_limit_windows"), n),
        _ => assert_eq!(rows(&conn, "rate_events"), 2 * n),
    }
    assert_eq!(user_tables(&conn), TABLES, "no key was executed as SQL");
    store.close().await;
}

#[tokio::test]
async fn every_key_gets_its_own_fixed_window_counter() {
    assert_every_key_has_its_own_counter(Algorithm::FixedWindow).await;
}

#[tokio::test]
async fn every_key_gets_its_own_sliding_log() {
    assert_every_key_has_its_own_counter(Algorithm::SlidingLog).await;
}
