//! The totals printed on standard error at the end of a replay.
//!
//! Besides the store's own state (bounded by expiry), the only per-key
//! data a replay keeps is the exact denial count of each key that was
//! ever denied, for the top ten: at most one small entry per distinct
//! key, tens of megabytes for a million distinct keys. A bounded
//! heavy-hitter sketch (Space-Saving) would cap it, but its top ten is
//! approximate and depends on arrival order; exact counts keep the
//! summary deterministic (ties are broken by the key's bytes).

use std::collections::HashMap;
use std::fmt;

use ratewarden_core::Outcome;

use crate::quote::Quoted;

/// How many of the most denied keys the summary names.
const TOP: usize = 10;

/// Totals of a replay, printed on standard error at the end.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    /// Requests decided (blank and comment lines are not requests).
    pub requests: u64,
    /// Requests allowed.
    pub allowed: u64,
    /// Requests denied.
    pub denied: u64,
    /// Requests that could never pass.
    pub never: u64,
    /// Up to ten keys with the most denials and their counts, most first,
    /// ties in byte order of the key.
    pub most_denied: Vec<(Vec<u8>, u64)>,
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "requests: {}", self.requests)?;
        writeln!(f, "allowed: {}", self.allowed)?;
        writeln!(f, "denied: {}", self.denied)?;
        writeln!(f, "never: {}", self.never)?;
        if self.most_denied.is_empty() {
            return writeln!(f, "most denied keys: none");
        }
        writeln!(f, "most denied keys:")?;
        for (key, denials) in &self.most_denied {
            writeln!(f, "{denials:>12} {}", Quoted(key))?;
        }
        Ok(())
    }
}

/// The counts of a replay so far, decision by decision.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    summary: Summary,
    denials: HashMap<Box<[u8]>, u64, foldhash::fast::RandomState>,
}

impl Tally {
    /// Counts one decision for `key`.
    pub(crate) fn count(&mut self, key: &[u8], outcome: Outcome) {
        let summary = &mut self.summary;
        summary.requests += 1;
        match outcome {
            Outcome::Allowed => summary.allowed += 1,
            Outcome::Denied { .. } => {
                summary.denied += 1;
                match self.denials.get_mut(key) {
                    Some(n) => *n += 1,
                    None => {
                        self.denials.insert(key.into(), 1);
                    }
                }
            }
            Outcome::Never => summary.never += 1,
        }
    }

    /// The totals, with the most denied keys.
    pub(crate) fn summary(self) -> Summary {
        Summary {
            most_denied: most_denied(self.denials, TOP),
            ..self.summary
        }
    }
}

/// The `n` keys with the most denials, most first, ties by key bytes.
fn most_denied(
    denials: HashMap<Box<[u8]>, u64, impl std::hash::BuildHasher>,
    n: usize,
) -> Vec<(Vec<u8>, u64)> {
    let order =
        |a: &(Box<[u8]>, u64), b: &(Box<[u8]>, u64)| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0));
    let mut all: Vec<(Box<[u8]>, u64)> = denials.into_iter().collect();
    if all.len() > n {
        all.select_nth_unstable_by(n, order);
        all.truncate(n);
    }
    all.sort_unstable_by(order);
    all.into_iter().map(|(k, c)| (k.into_vec(), c)).collect()
}
