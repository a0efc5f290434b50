//! The sliding log in the seeds' `rate_events`: allowed checks only, and
//! an event exactly one window old has left it.

use std::time::Duration;

use ratewarden_core::{Algorithm, Outcome, Store};

use crate::common::{NS, acquire, at, at_nanos, key, open, policy, rows, sql, temp_db};
use crate::{denied, events};

fn order_event(created_at: &str) -> (String, i64, String, String, String) {
    (
        "integer".into(),
        7,
        "text".into(),
        "/orders".into(),
        created_at.into(),
    )
}

#[tokio::test]
async fn sliding_log_records_allowed_checks_only_and_an_event_exactly_one_window_old_has_left() {
    let (_dir, path) = temp_db();
    let store = open(&path);
    let orders = policy(Algorithm::SlidingLog, 2, 10);
    let user7 = key(["7", "/orders"]);
    let e1 = at(45);
    let e2 = at_nanos(47 * NS + 250_000_000);

    let d = acquire(&store, &orders, &user7, e1).await;
    assert_eq!(d.outcome, Outcome::Allowed);
    assert_eq!((d.limit, d.used, d.remaining), (2, 1, 1));
    let d = acquire(&store, &orders, &user7, e2).await;
    assert_eq!(d.outcome, Outcome::Allowed);
    assert_eq!((d.used, d.remaining), (2, 0));

    let d = acquire(&store, &orders, &user7, at(48)).await;
    assert_eq!(
        d.outcome,
        denied(Duration::from_secs(7)),
        "retry_after = oldest (00:00:45) + 10 s − 00:00:48"
    );
    assert_eq!((d.used, d.remaining), (2, 0));

    let conn = sql(&path);
    assert_eq!(
        events(&conn),
        [
            order_event("2026-01-01T00:00:45.000000000Z"),
            order_event("2026-01-01T00:00:47.250000000Z"),
        ],
        "seed B's columns; the denied check is not recorded"
    );

    let just_before = acquire(&store, &orders, &user7, at_nanos(55 * NS - 1)).await;
    assert_eq!(
        just_before.outcome,
        denied(Duration::from_nanos(1)),
        "at e + W − 1 ns the oldest event still counts"
    );
    assert_eq!(rows(&conn, "rate_events"), 2);

    let at_edge = acquire(&store, &orders, &user7, at(55)).await;
    assert_eq!(
        at_edge.outcome,
        Outcome::Allowed,
        "an event exactly W old has left"
    );
    assert_eq!((at_edge.used, at_edge.remaining), (2, 0));
    assert_eq!(rows(&conn, "rate_events"), 3);

    let d = acquire(&store, &orders, &user7, at(56)).await;
    assert_eq!(
        d.outcome,
        denied(Duration::from_millis(1250)),
        "retry_after = oldest live (00:00:47.25) + 10 s − 00:00:56"
    );
    assert_eq!(rows(&conn, "rate_events"), 3);
    store.close().await;
}
