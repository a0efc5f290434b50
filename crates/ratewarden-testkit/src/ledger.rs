//! The reference model of several policies decided together: one
//! [`Model`] per policy (name and algorithm) and the all-or-nothing rule,
//! written from docs/semantics.md (§4, "Several policies per request") without
//! `ratewarden_core::batch`.
//!
//! The rule, as the model applies it to a batch at `t`:
//! - checks of the same policy and key count as one check with the sum of
//!   their costs;
//! - each check is decided by its policy's model on the state before the
//!   batch;
//! - the batch is refused when an enforcing (not shadow) check was not
//!   allowed;
//! - an accepted batch records every check as its model records it alone
//!   (a shadow check's would-be denial records nothing, except that a
//!   fixed window counting denied attempts counts it);
//! - a refused batch records nothing but the attempts of fixed windows
//!   that count denied attempts;
//! - a check whose own policy allowed it but that was not recorded
//!   reports what could pass now.
//!
//! ```
//! use ratewarden_core::{Algorithm, Policy, Quota};
//! use ratewarden_testkit::ledger::{Item, Ledger};
//! use ratewarden_testkit::model::Expected;
//! use std::time::Duration;
//!
//! let quota = |limit| Quota::new(limit, Duration::from_secs(60)).unwrap();
//! let user = Policy::new("user", Algorithm::SlidingLog, quota(5));
//! let global = Policy::new("global", Algorithm::Gcra, quota(1));
//! let mut ledger = Ledger::default();
//! let batch = |key: &'static [u8]| [Item::new(&user, key, 1), Item::new(&global, b"all", 1)];
//! assert!(ledger.acquire(&batch(b"a"), 0).iter().all(|a| a.outcome == Expected::Allowed));
//! let refused = ledger.acquire(&batch(b"b"), 0);
//! assert_eq!(refused[0].outcome, Expected::Allowed, "user b alone would pass");
//! assert_eq!(refused[0].remaining, 5, "and was not charged");
//! ```

use std::collections::HashMap;

use ratewarden_core::{Algorithm, Mode, Policy};

use crate::model::{Answer, Expected, Model, ReferenceModel};

/// One check of a batch, in the model's terms.
#[derive(Debug, Clone, Copy)]
pub struct Item<'a> {
    /// The policy (name, algorithm, quota, mode).
    pub policy: &'a Policy,
    /// The key's bytes (any injective encoding).
    pub key: &'a [u8],
    /// Units, at least 1.
    pub cost: u64,
}

impl<'a> Item<'a> {
    /// A check of `cost` units of `policy` for `key`.
    pub fn new(policy: &'a Policy, key: &'a [u8], cost: u64) -> Item<'a> {
        Item { policy, key, cost }
    }
}

/// Reference models of every policy seen, by (name, algorithm).
#[derive(Debug, Clone, Default)]
pub struct Ledger {
    models: HashMap<(String, Algorithm), Model>,
}

impl Ledger {
    fn model(&mut self, policy: &Policy) -> &mut Model {
        self.models
            .entry((policy.name.to_string(), policy.algorithm))
            .or_insert_with(|| Model::new(policy.algorithm))
    }

    fn model_ref(&self, policy: &Policy) -> Option<&Model> {
        self.models
            .get(&(policy.name.to_string(), policy.algorithm))
    }

    /// Decides `items` together at `t` (see the module docs); one answer
    /// per item, in order (items of one counter share their answer).
    pub fn acquire(&mut self, items: &[Item<'_>], t: u64) -> Vec<Answer> {
        // Merge checks of one counter.
        let mut merged: Vec<Item<'_>> = Vec::new();
        let mut slot = Vec::with_capacity(items.len());
        for item in items {
            let same = merged.iter().position(|m| {
                m.policy.name == item.policy.name
                    && m.policy.algorithm == item.policy.algorithm
                    && m.key == item.key
            });
            match same {
                Some(i) => {
                    merged[i].cost = merged[i].cost.saturating_add(item.cost);
                    slot.push(i);
                }
                None => {
                    slot.push(merged.len());
                    merged.push(*item);
                }
            }
        }
        // Each alone, on the state before the batch.
        let own: Vec<Answer> = merged
            .iter()
            .map(|m| {
                let mut alone = self.model(m.policy).clone();
                alone.acquire(m.key, &m.policy.quota, t, m.cost)
            })
            .collect();
        let refused = merged
            .iter()
            .zip(&own)
            .any(|(m, a)| m.policy.mode == Mode::Enforce && a.outcome != Expected::Allowed);
        let answers: Vec<Answer> = merged
            .iter()
            .zip(own)
            .map(|(m, own)| {
                let counts_attempts =
                    m.policy.algorithm == Algorithm::FixedWindow && m.policy.quota.counts_denied();
                if !refused || counts_attempts {
                    self.model(m.policy)
                        .acquire(m.key, &m.policy.quota, t, m.cost);
                    own
                } else if own.outcome == Expected::Allowed {
                    Answer {
                        outcome: Expected::Allowed,
                        remaining: self.status(m.policy, m.key, t).remaining,
                    }
                } else {
                    own
                }
            })
            .collect();
        slot.into_iter().map(|i| answers[i]).collect()
    }

    /// What a request of cost 1 for `key` under `policy` would get at `t`.
    pub fn status(&self, policy: &Policy, key: &[u8], t: u64) -> Answer {
        match self.model_ref(policy) {
            Some(model) => model.status(key, &policy.quota, t),
            None => Model::new(policy.algorithm).status(key, &policy.quota, t),
        }
    }

    /// Forgets the keys of `policy` that `selected` picks; returns how
    /// many held usage at `t`.
    pub fn reset(&mut self, policy: &Policy, selected: &dyn Fn(&[u8]) -> bool, t: u64) -> u64 {
        self.model(policy).reset(selected, &policy.quota, t)
    }
}
