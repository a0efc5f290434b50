//! Several checks decided as one atomic step, all or nothing.
//!
//! A request may have to pass several policies at once (per user, per
//! route, a global cap). The rule every store follows:
//!
//! 1. Each item is decided by its own algorithm on its key's stored state,
//!    as if it were alone (its "own decision").
//! 2. The batch is **denied** when any enforcing item ([`Mode::Enforce`])
//!    is not allowed. Shadow items never deny a batch.
//! 3. An allowed batch writes every item's next state: allowed items are
//!    charged, a shadow item's would-be denial charges nothing (except a
//!    fixed window that counts denied attempts, which counts its attempt).
//! 4. A denied batch charges nothing, with one exception: a fixed window
//!    that counts denied attempts ([`Policy::counts_denied`]) records its
//!    attempt whichever item denied it (seed A counts every attempt).
//! 5. Each item reports its own decision; an item that its own policy
//!    allowed but that was not charged (rule 4) reports the key's standing
//!    (what could pass now, nothing charged) with the outcome allowed.
//!
//! Stores do steps 1, 3 and 5 inside one atomic step (memory: the keys'
//! shard locks taken in a fixed order; SQLite: one transaction; Redis: one
//! Lua script); [`Settlement`] is step 2 and the rules of 3–5, so every
//! store applies the same rule.
//!
//! Items are distinct: [`Batch::new`] merges checks of the same policy
//! (name and algorithm) and key into one item whose cost is their sum, so
//! no store ever sees one counter twice in a batch.

use std::num::NonZeroU64;

use crate::{Decision, Key, Mode, Outcome, Policy, Timestamp};

/// One policy's claim within a [`Batch`].
#[derive(Debug, Clone, Copy)]
pub struct Acquire<'a> {
    /// Which algorithm and quota apply; the policy's name namespaces its
    /// state.
    pub policy: &'a Policy,
    /// Whose counter.
    pub key: &'a Key,
    /// How many units (1 for an ordinary request).
    pub cost: NonZeroU64,
    /// An audit entry to record when the item is charged, in the same
    /// atomic step (seed A's `api_calls`). Stores without an audit log
    /// ignore it; [`crate::Store::keeps_audit_log`] says which.
    pub audit: Option<Audit<'a>>,
}

impl<'a> Acquire<'a> {
    /// A claim of cost 1 without an audit entry.
    pub fn one(policy: &'a Policy, key: &'a Key) -> Acquire<'a> {
        Acquire {
            policy,
            key,
            cost: NonZeroU64::MIN,
            audit: None,
        }
    }

    /// Whether `self` and `other` name the same counter: the same policy
    /// name, algorithm and key.
    pub fn same_counter(&self, other: &Acquire<'_>) -> bool {
        self.policy.algorithm == other.policy.algorithm
            && self.policy.name == other.policy.name
            && self.key == other.key
    }
}

/// What the audit log keeps of a charged request besides its key and time.
#[derive(Debug, Clone, Copy)]
pub struct Audit<'a> {
    /// The request path, e.g. `/ping`.
    pub path: &'a str,
}

/// Checks decided together at one instant, all or nothing (see the module
/// docs). Items are distinct counters by construction.
#[derive(Debug, Clone)]
pub struct Batch<'a> {
    now: Timestamp,
    items: Vec<Acquire<'a>>,
    /// For each check given to [`Batch::new`], the index of its item.
    slots: Vec<usize>,
}

impl<'a> Batch<'a> {
    /// A batch of `checks` at `now`. Checks of the same counter
    /// ([`Acquire::same_counter`]) become one item: the first one's
    /// policy and audit entry, the sum of their costs (saturating).
    pub fn new(now: Timestamp, checks: impl IntoIterator<Item = Acquire<'a>>) -> Batch<'a> {
        let mut items: Vec<Acquire<'a>> = Vec::new();
        let mut slots = Vec::new();
        for check in checks {
            match items.iter().position(|item| item.same_counter(&check)) {
                Some(i) => {
                    let item = &mut items[i];
                    item.cost = item.cost.saturating_add(check.cost.get());
                    slots.push(i);
                }
                None => {
                    slots.push(items.len());
                    items.push(check);
                }
            }
        }
        Batch { now, items, slots }
    }

    /// A batch of one check.
    pub fn one(now: Timestamp, check: Acquire<'a>) -> Batch<'a> {
        Batch {
            now,
            items: vec![check],
            slots: vec![0],
        }
    }

    /// The instant every item is decided at.
    pub fn now(&self) -> Timestamp {
        self.now
    }

    /// The distinct items, in the order of their first check.
    pub fn items(&self) -> &[Acquire<'a>] {
        &self.items
    }

    /// For each check given to [`Batch::new`], in order, the index of the
    /// item (and of its decision) that answers it.
    pub fn slots(&self) -> &[usize] {
        &self.slots
    }
}

/// The all-or-nothing rule applied to a batch's own decisions (module
/// docs, steps 2–5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settlement {
    denied: bool,
}

impl Settlement {
    /// Settles a batch whose items (in order) got `decisions` from their
    /// own algorithms: denied iff an enforcing item was not allowed.
    pub fn of<'d>(
        items: &[Acquire<'_>],
        decisions: impl IntoIterator<Item = &'d Decision>,
    ) -> Settlement {
        let denied = items
            .iter()
            .zip(decisions)
            .any(|(item, d)| item.policy.mode == Mode::Enforce && !d.allowed());
        Settlement { denied }
    }

    /// Whether the batch is refused.
    pub fn is_denied(self) -> bool {
        self.denied
    }

    /// Whether a store writes `item`'s next state, when its algorithm
    /// produced one: always in an allowed batch, and in a denied one only
    /// for a fixed window that counts denied attempts.
    pub fn charges(self, item: &Acquire<'_>) -> bool {
        !self.denied || item.policy.counts_denied()
    }

    /// Whether `item`, whose own decision is `own`, reports the key's
    /// standing instead: its own policy allowed it but it was not charged.
    pub fn reports_standing(self, item: &Acquire<'_>, own: &Decision) -> bool {
        own.allowed() && !self.charges(item)
    }

    /// The decision a store reports for `item`: its `own` decision, except
    /// that an item its own policy allowed but that was not charged reports
    /// `standing()` (the key's status now, nothing charged) as allowed.
    pub fn report(
        self,
        item: &Acquire<'_>,
        own: Decision,
        standing: impl FnOnce() -> Decision,
    ) -> Decision {
        if self.reports_standing(item, &own) {
            Decision {
                outcome: Outcome::Allowed,
                ..standing()
            }
        } else {
            own
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Algorithm, Quota};
    use std::time::Duration;

    fn policy(name: &str, algorithm: Algorithm) -> Policy {
        Policy::new(
            name,
            algorithm,
            Quota::new(5, Duration::from_secs(1)).unwrap(),
        )
    }

    fn decision(outcome: Outcome) -> Decision {
        Decision {
            outcome,
            limit: 5,
            remaining: 1,
            used: 4,
            reset_after: Duration::from_secs(1),
        }
    }

    #[test]
    fn checks_of_one_counter_merge_into_one_item_with_the_summed_cost() {
        let (a, b) = (policy("a", Algorithm::Gcra), policy("b", Algorithm::Gcra));
        let (k1, k2) = (Key::single("1").unwrap(), Key::single("2").unwrap());
        let checks = [
            Acquire::one(&a, &k1),
            Acquire::one(&b, &k1),
            Acquire::one(&a, &k1),
            Acquire::one(&a, &k2),
        ];
        let batch = Batch::new(Timestamp::EPOCH, checks);
        assert_eq!(batch.items().len(), 3);
        assert_eq!(batch.items()[0].cost.get(), 2);
        assert_eq!(batch.slots(), &[0, 1, 0, 2]);
    }

    #[test]
    fn a_policy_of_the_same_name_but_another_algorithm_is_another_counter() {
        let (a, b) = (
            policy("a", Algorithm::Gcra),
            policy("a", Algorithm::SlidingLog),
        );
        let k = Key::single("1").unwrap();
        let batch = Batch::new(
            Timestamp::EPOCH,
            [Acquire::one(&a, &k), Acquire::one(&b, &k)],
        );
        assert_eq!(batch.items().len(), 2);
    }

    #[test]
    fn one_enforcing_denial_denies_the_batch_and_shadow_denials_do_not() {
        let enforce = policy("e", Algorithm::Gcra);
        let shadow = policy("s", Algorithm::Gcra).in_shadow();
        let k = Key::single("k").unwrap();
        let items = [Acquire::one(&enforce, &k), Acquire::one(&shadow, &k)];
        let denied = decision(Outcome::Denied {
            retry_after: Duration::from_secs(1),
        });
        let allowed = decision(Outcome::Allowed);
        assert!(!Settlement::of(&items, &[allowed, denied]).is_denied());
        assert!(Settlement::of(&items, &[denied, allowed]).is_denied());
        assert!(Settlement::of(&items, &[decision(Outcome::Never), allowed]).is_denied());
    }

    #[test]
    fn a_denied_batch_charges_only_fixed_windows_that_count_denied_attempts() {
        let counting = Policy::new(
            "c",
            Algorithm::FixedWindow,
            Quota::new(5, Duration::from_secs(1))
                .unwrap()
                .counting_denied(),
        );
        let plain = policy("p", Algorithm::FixedWindow);
        let k = Key::single("k").unwrap();
        let items = [Acquire::one(&counting, &k), Acquire::one(&plain, &k)];
        let denied = Settlement { denied: true };
        assert!(denied.charges(&items[0]));
        assert!(!denied.charges(&items[1]));
        let standing = Decision {
            remaining: 2,
            ..decision(Outcome::Allowed)
        };
        let reported = denied.report(&items[1], decision(Outcome::Allowed), || standing);
        assert_eq!((reported.allowed(), reported.remaining), (true, 2));
        let kept = denied.report(&items[0], decision(Outcome::Allowed), || standing);
        assert_eq!(kept.remaining, 1, "a charged item reports its own decision");
    }
}
