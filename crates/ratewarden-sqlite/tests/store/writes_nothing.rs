//! What writes nothing: a status, even of a key never seen, and a cost
//! above the limit.

use std::num::NonZeroU64;
use std::time::Duration;

use ratewarden_core::{Acquire, Algorithm, Audit, Batch, Outcome, Store};

use crate::common::{acquire, acquire_audited, at, key, open, policy, snapshot, sql, temp_db};
use crate::denied;

#[tokio::test]
async fn status_never_writes_even_for_a_key_it_has_never_seen() {
    let (_dir, path) = temp_db();
    let store = open(&path);
    let fixed = policy(Algorithm::FixedWindow, 2, 60);
    let sliding = policy(Algorithm::SlidingLog, 2, 60);
    let alice = key(["alice"]);
    let user7 = key(["7", "/orders"]);
    for _ in 0..3 {
        acquire_audited(&store, &fixed, &alice, at(10), "/ping").await;
    }
    acquire(&store, &sliding, &user7, at(10)).await;
    acquire(&store, &sliding, &user7, at(11)).await;

    let conn = sql(&path);
    let before = snapshot(&conn);
    assert_eq!(before.len(), 1 + 2 + 2);

    let d = store.status(&fixed, &alice, at(20)).await.unwrap();
    assert_eq!(d.outcome, denied(Duration::from_secs(40)));
    assert_eq!((d.used, d.remaining), (3, 0));
    let d = store.status(&fixed, &alice, at(60)).await.unwrap();
    assert_eq!(d.outcome, Outcome::Allowed, "a new window");
    assert_eq!((d.used, d.remaining), (0, 2));
    let d = store.status(&sliding, &user7, at(20)).await.unwrap();
    assert_eq!(d.outcome, denied(Duration::from_secs(50)));
    assert_eq!((d.used, d.remaining), (2, 0));

    for algorithm in Algorithm::ALL {
        let p = policy(algorithm, 2, 60);
        for never_seen in [key(["nobody"]), key(["8", "/orders"]), key(["a", "b", "c"])] {
            for _ in 0..3 {
                let d = store.status(&p, &never_seen, at(20)).await.unwrap();
                assert_eq!(d.outcome, Outcome::Allowed, "{algorithm}: {never_seen}");
                assert_eq!((d.used, d.remaining), (0, 2));
            }
        }
    }
    assert_eq!(snapshot(&conn), before, "status changed no row");

    let d = acquire(&store, &fixed, &alice, at(20)).await;
    assert_eq!(d.used, 4, "status did not count as an attempt");
    store.close().await;
}

#[tokio::test]
async fn a_cost_above_the_limit_is_never_and_writes_nothing() {
    let (_dir, path) = temp_db();
    let store = open(&path);
    let alice = key(["alice"]);
    let user7 = key(["7", "/orders"]);
    for algorithm in Algorithm::ALL {
        let p = policy(algorithm, 3, 60);
        for k in [&alice, &user7] {
            let check = Acquire {
                cost: NonZeroU64::new(4).unwrap(),
                audit: Some(Audit { path: "/ping" }),
                ..Acquire::one(&p, k)
            };
            let d = store.acquire(&Batch::one(at(0), check)).await.unwrap()[0];
            assert_eq!(d.outcome, Outcome::Never, "{algorithm}: {k}");
            assert_eq!(d.retry_after(), None);
        }
    }
    let conn = sql(&path);
    assert!(snapshot(&conn).is_empty(), "{:?}", snapshot(&conn));
    store.close().await;
}
