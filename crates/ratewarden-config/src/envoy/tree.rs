//! The rules of one domain as a tree, and the reference server's lookup
//! (envoyproxy/ratelimit, `GetLimit`): at each level of a request's
//! descriptor, an exact `key_value` child wins, then the first wildcard
//! child (in file order) whose `key_value*` pattern matches, then the
//! key-only child; the limit is the one of the node the descriptor's last
//! entry reaches, with no fallback to a parent.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use ratewarden_limiter::PolicyDef;

/// A rate-limit time unit of the Envoy protocol; the numbers are the
/// protocol's (`RateLimitResponse.RateLimit.Unit`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Unit {
    /// A window that is not one unit (the `window:` extension).
    Unknown = 0,
    /// 1 s.
    Second = 1,
    /// 60 s.
    Minute = 2,
    /// 3,600 s.
    Hour = 3,
    /// 86,400 s.
    Day = 4,
    /// 30 days, as the reference server counts a month.
    Month = 5,
    /// 365 days.
    Year = 6,
    /// 7 days.
    Week = 7,
}

impl Unit {
    /// Every unit with a length.
    pub const TIMED: [Unit; 7] = [
        Unit::Second,
        Unit::Minute,
        Unit::Hour,
        Unit::Day,
        Unit::Week,
        Unit::Month,
        Unit::Year,
    ];

    /// The unit's length in seconds; `None` for [`Unit::Unknown`].
    pub fn seconds(self) -> Option<u64> {
        match self {
            Unit::Unknown => None,
            Unit::Second => Some(1),
            Unit::Minute => Some(60),
            Unit::Hour => Some(3_600),
            Unit::Day => Some(86_400),
            Unit::Week => Some(7 * 86_400),
            Unit::Month => Some(30 * 86_400),
            Unit::Year => Some(365 * 86_400),
        }
    }

    /// The protocol's name: `SECOND`, …, `UNKNOWN`.
    pub fn as_str(self) -> &'static str {
        match self {
            Unit::Unknown => "UNKNOWN",
            Unit::Second => "SECOND",
            Unit::Minute => "MINUTE",
            Unit::Hour => "HOUR",
            Unit::Day => "DAY",
            Unit::Week => "WEEK",
            Unit::Month => "MONTH",
            Unit::Year => "YEAR",
        }
    }

    /// The unit of a protocol number; `None` for a number it does not have.
    pub fn from_number(n: i32) -> Option<Unit> {
        [Unit::Unknown]
            .into_iter()
            .chain(Unit::TIMED)
            .find(|u| *u as i32 == n)
    }

    /// The unit whose length is `secs` seconds, else [`Unit::Unknown`].
    pub fn of_seconds(secs: u64) -> Unit {
        Unit::TIMED
            .into_iter()
            .find(|u| u.seconds() == Some(secs))
            .unwrap_or(Unit::Unknown)
    }

    /// The unit named `name`, any case (`minute`, `MINUTE`), as the
    /// reference reads `unit:`; never [`Unit::Unknown`].
    pub fn parse(name: &str) -> Option<Unit> {
        Unit::TIMED
            .into_iter()
            .find(|u| u.as_str().eq_ignore_ascii_case(name))
    }
}

/// What a rule does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Limit {
    /// `unlimited: true`: always OK, nothing counted.
    Unlimited,
    /// A limit, decided by its policy.
    Limited {
        /// The policy (name: the rule's path; algorithm, quota, shadow
        /// mode, failure mode).
        def: Arc<PolicyDef>,
        /// `requests_per_unit` as configured (a `window:` limit's count).
        requests_per_unit: u32,
        /// The unit reported in `current_limit`: the configured one, or
        /// the one a `window:` equals, else [`Unit::Unknown`].
        unit: Unit,
    },
}

/// A `rate_limit` of the configuration, at the node it belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// `domain.key_value.key…`: the node's path, as the reference names
    /// it in its statistics; also the policy's name.
    pub path: String,
    /// `rate_limit.name`; empty when not given.
    pub name: String,
    /// What it does.
    pub limit: Limit,
    /// The names of the rules this one replaces in a request (`replaces`).
    pub replaces: Vec<String>,
    /// `detailed_metric`: the metric name carries the request's values.
    pub detailed_metric: bool,
    /// Whether a node on the rule's path has `value_to_metric`.
    pub(super) value_to_metric_on_path: bool,
}

impl Rule {
    /// The name a status is shown under (`RateLimit` header items): the
    /// rule's `name`, else its path.
    pub fn display_name(&self) -> &str {
        if self.name.is_empty() {
            &self.path
        } else {
            &self.name
        }
    }
}

/// A node of the tree: a descriptor entry of the configuration.
#[derive(Debug, Clone, Default)]
pub(super) struct Node {
    /// Children by `key` or `key_value`.
    pub children: HashMap<String, Node>,
    /// The children whose `key_value` has a `*`, in file order, with the
    /// pattern split at the stars.
    pub wildcards: Vec<(String, Vec<String>)>,
    pub rule: Option<Arc<Rule>>,
    pub value_to_metric: bool,
    pub share_threshold: bool,
}

/// What a request's descriptor matched.
#[derive(Debug, Clone)]
pub struct Found<'a> {
    /// The rule.
    pub rule: &'a Arc<Rule>,
    /// The counter's key parts: each entry's value, or for an entry
    /// matched by a `share_threshold` wildcard, the pattern (all values
    /// it matches share one counter).
    pub key_parts: Vec<Cow<'a, str>>,
}

/// One domain's rules.
#[derive(Debug, Clone)]
pub struct Domain {
    /// The domain name.
    pub name: String,
    pub(super) root: Node,
}

impl Domain {
    /// The rule a descriptor (its entries as `(key, value)`, in order)
    /// reaches, if any; `None`: no limit applies (unmatched, or a value
    /// entry without `rate_limit`, which whitelists).
    pub fn find<'a>(&'a self, entries: &[(&'a str, &'a str)]) -> Option<Found<'a>> {
        self.walk(entries).map(|(found, _)| found)
    }

    /// As [`Domain::find`], with the name the reference server would
    /// count the descriptor's statistics under: the rule's path; with
    /// `detailed_metric`, the request's `key_value`s; with
    /// `value_to_metric`, the values of wildcard and key-only levels.
    pub fn find_with_metric<'a>(
        &'a self,
        entries: &[(&'a str, &'a str)],
    ) -> Option<(Found<'a>, Cow<'a, str>)> {
        self.walk(entries)
    }

    fn walk<'a>(&'a self, entries: &[(&'a str, &'a str)]) -> Option<(Found<'a>, Cow<'a, str>)> {
        let mut node = &self.root;
        let mut found: Option<&'a Arc<Rule>> = None;
        let mut key_parts: Vec<Cow<'a, str>> = Vec::with_capacity(entries.len());
        // The value_to_metric name, built along the way (cheap to skip).
        let mut levels: Vec<(&'a str, Cow<'a, str>)> = Vec::new();
        let mut composite = String::new();
        for (i, &(key, value)) in entries.iter().enumerate() {
            composite.clear();
            composite.push_str(key);
            composite.push('_');
            composite.push_str(value);
            let mut next = node.children.get(composite.as_str());
            let mut by_wildcard: Option<&'a str> = None;
            if next.is_none()
                && let Some((pattern, _)) = node
                    .wildcards
                    .iter()
                    .find(|(_, parts)| wildcard_match(parts, &composite))
            {
                next = node.children.get(pattern.as_str());
                by_wildcard = next.map(|_| pattern.as_str());
            }
            let by_value = next.is_some();
            if next.is_none() {
                next = node.children.get(key);
            }
            let Some(child) = next else {
                break;
            };
            let shared = by_wildcard
                .filter(|_| child.share_threshold)
                .map(|pattern| strip_key(pattern, key));
            let metric_value: Cow<'a, str> = match (by_wildcard, shared) {
                (Some(_), Some(p)) => Cow::Borrowed(p),
                (Some(_), None) if child.value_to_metric => Cow::Borrowed(value),
                (Some(pattern), None) => Cow::Borrowed(strip_key(pattern, key)),
                (None, _) if by_value => Cow::Borrowed(value),
                (None, _) if child.value_to_metric => Cow::Borrowed(value),
                (None, _) => Cow::Borrowed(""),
            };
            levels.push((key, metric_value));
            key_parts.push(Cow::Borrowed(shared.unwrap_or(value)));
            if i + 1 == entries.len() {
                found = child.rule.as_ref();
            }
            if child.children.is_empty() {
                break;
            }
            node = child;
        }
        let rule = found?;
        let metric = if rule.detailed_metric {
            let mut name = self.name.clone();
            // `key_value` for every entry, even an empty value (the
            // reference's form), the pattern for a shared one.
            for (&(key, _), part) in entries.iter().zip(&key_parts) {
                name.push('.');
                name.push_str(key);
                name.push('_');
                name.push_str(part);
            }
            Cow::Owned(name)
        } else if rule.value_to_metric_on_path {
            let mut name = self.name.clone();
            for (key, value) in &levels {
                name.push('.');
                name.push_str(key);
                if !value.is_empty() {
                    name.push('_');
                    name.push_str(value);
                }
            }
            Cow::Owned(name)
        } else {
            Cow::Borrowed(rule.path.as_str())
        };
        Some((Found { rule, key_parts }, metric))
    }
}

/// `key_` removed from the front of a `key_value` pattern.
fn strip_key<'a>(pattern: &'a str, key: &str) -> &'a str {
    pattern
        .strip_prefix(key)
        .and_then(|rest| rest.strip_prefix('_'))
        .unwrap_or(pattern)
}

/// Whether `value` matches a pattern split at its `*`s (each `*` matches
/// any run of characters, the empty one included).
pub(super) fn wildcard_match(parts: &[String], value: &str) -> bool {
    let [first, middle @ .., last] = parts else {
        return parts.first().is_some_and(|p| p == value);
    };
    let fixed: usize = parts.iter().map(String::len).sum();
    if value.len() < fixed || !value.starts_with(first.as_str()) || !value.ends_with(last.as_str())
    {
        return false;
    }
    let mut rest = &value[first.len()..value.len() - last.len()];
    for part in middle {
        match rest.find(part.as_str()) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(p: &str) -> Vec<String> {
        p.split('*').map(str::to_owned).collect()
    }

    #[test]
    fn stars_match_any_run_anywhere() {
        assert!(wildcard_match(&parts("k_files/*"), "k_files/a.pdf"));
        assert!(wildcard_match(&parts("k_files/*"), "k_files/"));
        assert!(!wildcard_match(&parts("k_files/*"), "k_file"));
        assert!(wildcard_match(&parts("k_a*b*c"), "k_axxbyyc"));
        assert!(wildcard_match(&parts("k_a*b*c"), "k_abc"));
        assert!(!wildcard_match(&parts("k_a*b*c"), "k_acb"));
        // The fixed parts may not overlap.
        assert!(!wildcard_match(&parts("k_ab*ba"), "k_aba"));
        assert!(wildcard_match(&parts("k_exact"), "k_exact"));
        assert!(!wildcard_match(&parts("k_exact"), "k_exactly"));
    }

    #[test]
    fn units_have_the_protocol_numbers_and_lengths() {
        assert_eq!(Unit::parse("minute"), Some(Unit::Minute));
        assert_eq!(Unit::parse("Hour"), Some(Unit::Hour));
        assert_eq!(Unit::parse("unknown"), None);
        assert_eq!(Unit::of_seconds(60), Unit::Minute);
        assert_eq!(Unit::of_seconds(30), Unit::Unknown);
        assert_eq!(Unit::from_number(7), Some(Unit::Week));
        assert_eq!(Unit::from_number(8), None);
        assert_eq!(Unit::Month.seconds(), Some(2_592_000));
    }
}
