//! The fixed window in the seeds' `rate_limit_windows`: the limit, then
//! denials until the window ends, every attempt counted and audited.

use std::time::Duration;

use ratewarden_core::{Algorithm, Outcome, Store, Timestamp};

use crate::common::{NS, acquire_audited, at, at_nanos, key, open, policy, sql, temp_db};
use crate::{audit_rows, denied, windows};

fn window_row(start: &str, count: i64) -> (String, String, String, i64) {
    ("text".into(), "alice".into(), start.into(), count)
}

fn audit_row(called_at: &str) -> (String, String, String, String) {
    (
        "text".into(),
        "alice".into(),
        "/ping".into(),
        called_at.into(),
    )
}

#[tokio::test]
async fn fixed_window_allows_the_limit_then_denies_until_the_window_ends_and_counts_every_attempt()
{
    let (_dir, path) = temp_db();
    let store = open(&path);
    let ping = policy(Algorithm::FixedWindow, 3, 60);
    let alice = key(["alice"]);
    let now = Timestamp::from_unix_secs(1_767_225_645); // 2026-01-01T00:00:45Z
    assert_eq!(now, at(45));

    for n in 1..=3 {
        let d = acquire_audited(&store, &ping, &alice, now, "/ping").await;
        assert_eq!(d.outcome, Outcome::Allowed, "attempt {n}");
        assert_eq!((d.limit, d.used, d.remaining), (3, n, 3 - n));
        assert_eq!(d.reset_after, Duration::from_secs(15));
    }
    let fourth = acquire_audited(&store, &ping, &alice, now, "/ping").await;
    assert_eq!(
        fourth.outcome,
        denied(Duration::from_secs(15)),
        "retry_after = window end − now = 00:01:00 − 00:00:45"
    );
    assert_eq!((fourth.used, fourth.remaining), (4, 0));

    let one_ns_later = at_nanos(45 * NS + 1);
    let fifth = acquire_audited(&store, &ping, &alice, one_ns_later, "/ping").await;
    assert_eq!(
        fifth.outcome,
        denied(Duration::from_secs(15) - Duration::from_nanos(1)),
        "retry_after is exact to the nanosecond"
    );
    assert_eq!(fifth.used, 5);

    let conn = sql(&path);
    assert_eq!(
        windows(&conn),
        [window_row("2026-01-01T00:00:00Z", 5)],
        "one row for the window; rejected attempts are counted (L + 2 = 5)"
    );
    assert_eq!(
        audit_rows(&conn),
        vec![audit_row("2026-01-01T00:00:45.000000000Z"); 3],
        "one api_calls row per allowed attempt, none for denied ones"
    );

    let last_ns = acquire_audited(&store, &ping, &alice, at_nanos(60 * NS - 1), "/ping").await;
    assert_eq!(last_ns.outcome, denied(Duration::from_nanos(1)));

    let next = acquire_audited(&store, &ping, &alice, at(60), "/ping").await;
    assert_eq!(
        next.outcome,
        Outcome::Allowed,
        "the next window starts fresh"
    );
    assert_eq!((next.used, next.remaining), (1, 2));
    assert_eq!(next.reset_after, Duration::from_secs(60));

    assert_eq!(
        windows(&conn),
        [
            window_row("2026-01-01T00:00:00Z", 6),
            window_row("2026-01-01T00:01:00Z", 1),
        ]
    );
    let audit = audit_rows(&conn);
    assert_eq!(audit.len(), 4);
    assert_eq!(audit[3], audit_row("2026-01-01T00:01:00.000000000Z"));
    store.close().await;
}
