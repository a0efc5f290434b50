//! One `[[policies]]` table into a [`PolicySpec`]: its keys read, its
//! quota built by [`PolicyParts::build`] as the Envoy rules' are, its
//! `key` and `match`, and policy names used twice.

use ratewarden_limiter::{FailureMode, KeyPart, PathPattern, RequestMatch};
use toml::Spanned;
use toml::de::{DeTable, DeValue};

use super::PolicySpec;
use super::reader::Reader;
use crate::error::Location;
use crate::policy::PolicyParts;
use crate::types::SEED_POLICIES;
use crate::values;

/// The keys of a `[[policies]]` table.
const POLICY_KEYS: [&str; 10] = [
    "name",
    "algorithm",
    "limit",
    "window",
    "burst",
    "count_denied",
    "shadow",
    "on_store_error",
    "key",
    "match",
];

impl<'a> Reader<'a> {
    pub(super) fn policies(&mut self, value: &Spanned<DeValue<'_>>) -> Vec<PolicySpec> {
        let DeValue::Array(items) = value.get_ref() else {
            self.wrong_type(value, Some("policies"), "an array of tables ([[policies]])");
            return Vec::new();
        };
        items
            .iter()
            .enumerate()
            .filter_map(|(i, item)| match item.get_ref() {
                DeValue::Table(table) => self.policy(i, item.span().start, table),
                _ => {
                    self.wrong_type(item, Some(&format!("policies[{i}]")), "a table");
                    None
                }
            })
            .collect()
    }

    /// One `[[policies]]` table: every key checked, every error recorded.
    fn policy(&mut self, index: usize, at: usize, table: &DeTable<'_>) -> Option<PolicySpec> {
        let prefix = format!("policies[{index}]");
        let path = |k: &str| format!("{prefix}.{k}");
        let field = |name: &str| {
            table
                .iter()
                .find(|(k, _)| k.get_ref().as_ref() == name)
                .map(|(_, v)| v)
        };
        for (key, _) in table.iter() {
            if !POLICY_KEYS.contains(&key.get_ref().as_ref()) {
                self.unknown(key, Some(&prefix), &POLICY_KEYS);
            }
        }
        let errors_before = self.errors.len();
        let required = |r: &mut Reader<'_>, name: &str| {
            let found = field(name);
            if found.is_none() {
                r.error(
                    at,
                    Some(&path(name)),
                    format!("the key '{name}' is required"),
                );
            }
            found
        };
        let name = required(self, "name").and_then(|v| {
            let p = path("name");
            let s = self.string(v, Some(&p))?;
            let at = v.span().start;
            self.names.push((s.to_owned(), at, index));
            let s = self.check(at, &p, values::check_policy_name(s).map(str::to_owned))?;
            if SEED_POLICIES.contains(&s.as_str()) {
                let settings = if s == "ping" {
                    "ping_limit, ping_window and ping_algorithm"
                } else {
                    "check_limit and check_window"
                };
                let message = format!("'{s}' is the seed route's policy; set {settings} instead");
                return self.check::<String>(at, &p, Err(message));
            }
            Some(s)
        });
        let algorithm = required(self, "algorithm")
            .and_then(|v| self.parsed(v, Some(&path("algorithm")), values::parse_algorithm));
        // Read as written; checked with the other parts by `build`.
        let limit = required(self, "limit").and_then(|v| {
            let n = self.number(v, Some(&path("limit")), Ok)?;
            Some(self.sited(v, path("limit"), n))
        });
        let window = required(self, "window")
            .and_then(|v| self.parsed(v, Some(&path("window")), values::parse_duration));
        let burst = field("burst").and_then(|v| {
            let n = self.number(v, Some(&path("burst")), Ok)?;
            Some(self.sited(v, path("burst"), n))
        });
        let count_denied = field("count_denied").and_then(|v| {
            let c = self.boolean(v, Some(&path("count_denied")))?;
            Some(self.sited(v, path("count_denied"), c))
        });
        let shadow = field("shadow").and_then(|v| self.boolean(v, Some(&path("shadow"))));
        let on_store_error = field("on_store_error").and_then(|v| {
            self.parsed(v, Some(&path("on_store_error")), |s| {
                s.parse::<FailureMode>()
            })
        });
        let key = field("key").map(|v| self.key_parts(v, &path("key")));
        let matcher = field("match").and_then(|v| self.matcher(v, &path("match")));
        if let (Some(m), None) = (field("match"), &key) {
            let message = "a policy with 'match' needs a 'key' to count requests by".to_owned();
            self.error(m.span().start, Some(&path("match")), message);
        }
        let parts = PolicyParts {
            site: self.site(at, &prefix),
            algorithm,
            limit,
            window,
            burst,
            count_denied,
            shadow: shadow == Some(true),
        };
        let built = parts.build(&mut self.errors, errors_before)?;
        Some(PolicySpec {
            policy: built.named(name?),
            on_store_error,
            key: key.unwrap_or_default(),
            matcher,
            location: Location::of(self.path, self.text, at),
        })
    }

    fn key_parts(&mut self, value: &Spanned<DeValue<'_>>, key: &str) -> Vec<KeyPart> {
        let Some(items) = self.strings(value, key) else {
            return Vec::new();
        };
        if items.is_empty() {
            self.error(
                value.span().start,
                Some(key),
                "a key needs at least one part".into(),
            );
        }
        items
            .into_iter()
            .filter_map(|(at, path, s)| self.check(at, &path, s.parse::<KeyPart>()))
            .collect()
    }

    fn matcher(&mut self, value: &Spanned<DeValue<'_>>, key: &str) -> Option<RequestMatch> {
        let DeValue::Table(table) = value.get_ref() else {
            self.wrong_type(
                value,
                Some(key),
                "a table such as { methods = [\"GET\"], path = \"/api/*\" }",
            );
            return None;
        };
        let mut matcher = RequestMatch::default();
        for (k, v) in table.iter() {
            match k.get_ref().as_ref() {
                "methods" => {
                    let path = format!("{key}.methods");
                    let methods = self.strings(v, &path)?;
                    if methods.is_empty() {
                        let message = "an empty list matches no request; leave 'methods' out to match every method".to_owned();
                        self.error(v.span().start, Some(&path), message);
                    }
                    let checked = methods.into_iter().filter_map(|(at, p, m)| {
                        let checked = ratewarden_limiter::check_method(m).map(str::to_owned);
                        self.check(at, &p, checked)
                    });
                    matcher.methods = Some(checked.collect());
                }
                "path" => {
                    matcher.path = self.parsed(v, Some(&format!("{key}.path")), PathPattern::new);
                }
                _ => self.unknown(k, Some(key), &["methods", "path"]),
            }
        }
        Some(matcher)
    }

    pub(super) fn no_duplicate_names(&mut self) {
        let names = std::mem::take(&mut self.names);
        for (i, (name, at, index)) in names.iter().enumerate() {
            if let Some((_, first, _)) = names[..i].iter().find(|(n, _, _)| n == name) {
                let first_line = Location::of(self.path, self.text, *first).line;
                let message =
                    format!("the policy name '{name}' is used twice (first at line {first_line})");
                self.error(*at, Some(&format!("policies[{index}].name")), message);
            }
        }
    }
}
