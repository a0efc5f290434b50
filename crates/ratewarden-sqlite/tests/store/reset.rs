//! Reset deletes a key's (or a user's) state and no other's.

use ratewarden_core::{Algorithm, Key, KeyMatch, Outcome, Store};

use crate::common::{acquire, at, int, key, open, policy, rows, sql, temp_db};
use crate::used;

#[tokio::test]
async fn resetting_a_user_deletes_their_endpoints_and_no_other_users_events() {
    let (_dir, path) = temp_db();
    let store = open(&path);
    let p = policy(Algorithm::SlidingLog, 10, 60);
    let r1 = key(["21", "/r1"]);
    let r2 = key(["21", "/r2"]);
    let r1_deeper = key(["21", "/r1", "x"]);
    let bare = key(["21"]);
    let others = [
        key(["210", "/r1"]),
        key(["2", "/r1"]),
        key(["2", "1"]),
        key(["021", "/r1"]),
        key(["211"]),
        key(["21/r1"]),
    ];
    let seeded = [(&r1, 3), (&r2, 2), (&r1_deeper, 1), (&bare, 1)];
    for (k, n) in seeded {
        for i in 0..n {
            assert!(acquire(&store, &p, k, at(i)).await.allowed());
        }
    }
    for k in &others {
        assert!(acquire(&store, &p, k, at(0)).await.allowed());
    }
    let conn = sql(&path);
    assert_eq!(rows(&conn, "rate_events"), 7 + others.len() as i64);

    let now = at(5);
    let deleted = store
        .reset(&p, KeyMatch::StartingWith(&r1), now)
        .await
        .unwrap();
    assert_eq!(
        deleted, 2,
        "the endpoint (3 events) and a key below it (1 event): two counters"
    );
    assert_eq!(used(&store, &p, &r1, now).await, 0);
    assert_eq!(used(&store, &p, &r1_deeper, now).await, 0);
    assert_eq!(used(&store, &p, &r2, now).await, 2, "other endpoint kept");
    assert_eq!(used(&store, &p, &bare, now).await, 1);
    assert_eq!(
        int(
            &conn,
            "SELECT COUNT(*) FROM rate_events WHERE user_id = 21",
            []
        ),
        2
    );

    let user = Key::single("21").unwrap();
    let deleted = store
        .reset(&p, KeyMatch::StartingWith(&user), now)
        .await
        .unwrap();
    assert_eq!(deleted, 2, "/r2 (2 events) and the bare key (1 event)");
    assert_eq!(used(&store, &p, &r2, now).await, 0);
    assert_eq!(used(&store, &p, &bare, now).await, 0);
    assert_eq!(
        int(
            &conn,
            "SELECT COUNT(*) FROM rate_events WHERE user_id = 21",
            []
        ),
        0
    );
    for k in &others {
        assert_eq!(used(&store, &p, k, now).await, 1, "{k} is not user 21");
    }
    assert_eq!(rows(&conn, "rate_events"), others.len() as i64);

    let again = store
        .reset(&p, KeyMatch::StartingWith(&user), now)
        .await
        .unwrap();
    assert_eq!(again, 0, "nothing left to delete");
    let fixed = policy(Algorithm::FixedWindow, 10, 60);
    let wrong_algorithm = store
        .reset(&fixed, KeyMatch::StartingWith(&key(["210"])), now)
        .await
        .unwrap();
    assert_eq!(wrong_algorithm, 0);
    assert_eq!(rows(&conn, "rate_events"), others.len() as i64);
    store.close().await;
}

#[tokio::test]
async fn resetting_a_fixed_window_key_deletes_its_windows_and_restarts_its_count() {
    let (_dir, path) = temp_db();
    let store = open(&path);
    let p = policy(Algorithm::FixedWindow, 2, 60);
    let alice = key(["alice"]);
    let below = key(["alice", "/x"]);
    let others = [
        key(["alice2"]),
        key(["ALICE"]),
        key(["bob"]),
        key(["", "alice"]),
    ];
    for t in [0, 1, 2, 60, 61] {
        acquire(&store, &p, &alice, at(t)).await;
    }
    acquire(&store, &p, &below, at(0)).await;
    for k in &others {
        acquire(&store, &p, k, at(60)).await;
    }
    let conn = sql(&path);
    assert_eq!(rows(&conn, "rate_limit_windows"), 3 + others.len() as i64);
    assert!(!acquire(&store, &p, &alice, at(62)).await.allowed());

    let deleted = store
        .reset(&p, KeyMatch::StartingWith(&alice), at(62))
        .await
        .unwrap();
    assert_eq!(
        deleted, 1,
        "alice counts in the current window; the key below it only in an old one"
    );
    assert_eq!(
        rows(&conn, "rate_limit_windows"),
        others.len() as i64,
        "every window of alice and of the key below it is gone"
    );
    assert_eq!(used(&store, &p, &alice, at(62)).await, 0);
    let d = acquire(&store, &p, &alice, at(62)).await;
    assert_eq!(d.outcome, Outcome::Allowed, "the count restarts");
    assert_eq!(d.used, 1);
    for k in &others {
        assert_eq!(used(&store, &p, k, at(62)).await, 1, "{k} untouched");
    }
    assert_eq!(
        int(
            &conn,
            "SELECT COUNT(*) FROM rate_limit_windows WHERE key = 'alice'",
            []
        ),
        1
    );

    let never_seen = store
        .reset(&p, KeyMatch::Exactly(&key(["carol"])), at(62))
        .await
        .unwrap();
    assert_eq!(never_seen, 0);
    let log = policy(Algorithm::SlidingLog, 10, 60);
    let wrong_algorithm = store
        .reset(&log, KeyMatch::StartingWith(&alice), at(62))
        .await
        .unwrap();
    assert_eq!(wrong_algorithm, 0);
    assert_eq!(used(&store, &p, &alice, at(62)).await, 1);
    store.close().await;
}
