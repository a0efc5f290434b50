//! Counts survive closing and reopening the file, and a lower limit
//! applies to them.

use std::time::Duration;

use ratewarden_core::{Algorithm, Outcome, Store};

use crate::common::{acquire, at, key, open, policy, temp_db};
use crate::denied;

#[tokio::test]
async fn counts_survive_reopening_the_same_file() {
    let (_dir, path) = temp_db();
    let fixed = policy(Algorithm::FixedWindow, 3, 60);
    let sliding = policy(Algorithm::SlidingLog, 3, 60);
    let client = key(["alice"]);
    let user = key(["7", "/orders"]);

    let store = open(&path);
    for t in [1, 2] {
        assert!(acquire(&store, &fixed, &client, at(t)).await.allowed());
        assert!(acquire(&store, &sliding, &user, at(t)).await.allowed());
    }
    store.close().await;
    drop(store);

    let store = open(&path);
    let d = acquire(&store, &fixed, &client, at(3)).await;
    assert_eq!(d.outcome, Outcome::Allowed);
    assert_eq!((d.used, d.remaining), (3, 0), "two attempts were kept");
    let d = acquire(&store, &fixed, &client, at(4)).await;
    assert_eq!(d.outcome, denied(Duration::from_secs(56)));
    assert_eq!(d.used, 4);

    let d = acquire(&store, &sliding, &user, at(3)).await;
    assert_eq!(d.outcome, Outcome::Allowed);
    assert_eq!((d.used, d.remaining), (3, 0), "two events were kept");
    let d = acquire(&store, &sliding, &user, at(4)).await;
    assert_eq!(
        d.outcome,
        denied(Duration::from_secs(57)),
        "the oldest kept event (t = 1 s) leaves at 61 s"
    );
    store.close().await;
}

#[tokio::test]
async fn a_lower_limit_after_reopening_applies_to_the_stored_counts() {
    let (_dir, path) = temp_db();
    let client = key(["alice"]);
    let user = key(["7", "/orders"]);

    let store = open(&path);
    for algorithm in Algorithm::ALL {
        let three = policy(algorithm, 3, 60);
        for t in [1, 2] {
            assert!(acquire(&store, &three, &client, at(t)).await.allowed());
            assert!(acquire(&store, &three, &user, at(t)).await.allowed());
        }
    }
    store.close().await;

    let store = open(&path);
    for algorithm in Algorithm::ALL {
        let two = policy(algorithm, 2, 60);
        for k in [&client, &user] {
            let d = acquire(&store, &two, k, at(3)).await;
            assert!(
                !d.allowed(),
                "{algorithm} {k}: two stored units fill a limit of 2"
            );
        }
    }
    store.close().await;
}
