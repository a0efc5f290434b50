//! What the store keeps: status reads only, reset clears exactly a key or
//! a prefix, and keys are opaque bytes with state of their own.

use std::sync::Arc;

use ratewarden_core::{Algorithm, Key, Store};

use super::{SEC, Session, T0, key, quota};

const W: u64 = 10 * SEC;

/// Status never creates state (a reset afterwards deletes nothing) and
/// never changes it (later decisions match a model that saw no status).
pub async fn status_never_creates_or_changes_state(store: Arc<dyn Store>, algorithm: Algorithm) {
    let store = &*store;
    let k = key(["status", "fresh"]);
    let mut s = Session::new(store, algorithm, quota(3, W));
    for t in [0, T0, T0 + 1, T0 + W, T0 + 5 * W] {
        let first = s.status(&k, t).await;
        let again = s.status(&k, t).await;
        assert_eq!(first, again, "{algorithm}: two status reads at {t} differ");
    }
    assert_eq!(
        s.reset(&k, T0).await,
        0,
        "{algorithm}: status created state for {k}"
    );

    let k = key(["status", "used"]);
    let mut s = Session::new(store, algorithm, quota(3, W));
    let mut t = T0;
    for step in [0, 1, W / 3, W / 2, W - 1, 1, 2 * W, 0, W / 7, W] {
        t += step;
        for _ in 0..3 {
            s.status(&k, t).await;
        }
        s.acquire(&k, t, 1).await;
        for _ in 0..2 {
            s.status(&k, t).await;
            s.status(&k, t + W / 4).await;
        }
        s.acquire(&k, t, 2).await;
    }
}

/// Reset of a whole key clears that key; reset of `["u"]` clears
/// `["u"]`, `["u", "a"]` and `["u", "b"]` but not `["uu"]`.
pub async fn reset_clears_a_key_or_a_prefix_only(store: Arc<dyn Store>, algorithm: Algorithm) {
    let store = &*store;
    let ua = key(["u", "a"]);
    let ub = key(["u", "b"]);
    let u = key(["u"]);
    let uu = key(["uu"]);
    let seven = key(["7", "/orders"]);
    let seventy = key(["70", "/orders"]);
    let all = [&ua, &ub, &u, &uu, &seven, &seventy];
    let mut s = Session::new(store, algorithm, quota(5, W));
    for (i, k) in all.iter().enumerate() {
        s.acquire(k, T0, 1 + i as u64 % 3).await;
    }
    status_all(&mut s, &all, T0 + 1).await;

    assert_eq!(
        s.reset(&key(["nobody"]), T0 + 2).await,
        0,
        "{algorithm}: reset of an unknown key"
    );
    assert!(
        s.reset(&ub, T0 + 2).await > 0,
        "{algorithm}: reset of {ub} deleted nothing"
    );
    status_all(&mut s, &all, T0 + 2).await;
    assert_eq!(
        s.reset(&ub, T0 + 2).await,
        0,
        "{algorithm}: {ub} was reset twice"
    );

    assert!(
        s.reset(&u, T0 + 3).await > 0,
        "{algorithm}: reset of prefix {u} deleted nothing"
    );
    status_all(&mut s, &all, T0 + 3).await;

    assert!(
        s.reset(&key(["7"]), T0 + 4).await > 0,
        "{algorithm}: reset of prefix [\"7\"]"
    );
    status_all(&mut s, &all, T0 + 4).await;

    // Cleared keys start over; the others kept their usage.
    for k in all {
        s.acquire(k, T0 + 5, 2).await;
        s.acquire(k, T0 + 5, 3).await;
    }
}

async fn status_all(s: &mut Session<'_>, keys: &[&Key], t: u64) {
    for k in keys {
        s.status(k, t).await;
    }
}

/// Keys that join to the same bytes, or hold quotes, colons, NUL, invalid
/// UTF-8, SQL or the encoding of another key, each have their own state.
pub async fn keys_are_opaque_and_independent(store: Arc<dyn Store>, algorithm: Algorithm) {
    let store = &*store;
    let two_parts = key(["ab", "c"]);
    let seed_b = key(["7", "/orders"]);
    let mut keys: Vec<Key> = vec![
        two_parts.clone(),
        key(["a", "bc"]),
        key(["abc"]),
        key(["a", "b", "c"]),
        key(["abc", ""]),
        key([""]),
        key(["", ""]),
        key(["a:b"]),
        key(["a", ":b"]),
        key(["a:", "b"]),
        key(["quote\"d'", "x"]),
        key(["quote\"d'"]),
        key([b"nul\0byte".as_slice()]),
        key([b"nul".as_slice()]),
        key([b"nul".as_slice(), b"byte"]),
        key([b"\xff\xfe invalid".as_slice()]),
        key([b"\xff".as_slice(), b"\xfe invalid"]),
        key([b"\xf0\x9f\x98".as_slice()]),
        key(["\u{1F600}"]),
        key(["%_*?[]", "\\"]),
        key(["'; DROP TABLE rate_events;--"]),
        seed_b.clone(),
        key(["07", "/orders"]),
        key(["7", "/orders", "x"]),
        key(["7"]),
        key(["a b"]),
        key([vec![b'x'; Key::MAX_BYTES]]),
    ];
    // Single keys whose bytes are another key's encoding: a store that
    // writes some keys raw and others encoded must keep them apart.
    keys.push(key([two_parts.encoded()]));
    keys.push(key([seed_b.encoded()]));

    let mut s = Session::new(store, algorithm, quota(100, 60 * SEC));
    for (i, k) in keys.iter().enumerate() {
        s.acquire(k, T0, i as u64 + 1).await;
    }
    for k in &keys {
        s.status(k, T0 + 1).await;
    }
    s.reset(&key(["abc"]), T0 + 2).await;
    s.reset(&key(["a"]), T0 + 2).await;
    for k in &keys {
        s.status(k, T0 + 2).await;
        s.acquire(k, T0 + 2, 1).await;
    }
}
