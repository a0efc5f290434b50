//! The format's keys, read into the raw model: a file's `domain` and
//! `descriptors`, a descriptor's keys, a `rate_limit` block's and its
//! `replaces`; unknown, misplaced and unimplemented keys refused by name.

use saphyr::{MarkedYaml, ScalarStyle, YamlData};

use super::{NOT_IMPLEMENTED, RawDescriptor, RawFile, RawRateLimit, Reader};
use crate::error::Location;

impl Reader<'_> {
    pub(super) fn unknown(
        &mut self,
        name: &str,
        key_node: &MarkedYaml<'_>,
        path: &str,
        known: &[&str],
    ) {
        let full = join(path, name);
        match NOT_IMPLEMENTED.iter().find(|(k, _)| *k == name) {
            Some((_, why)) => self.error(&key_node.span.start, Some(&full), *why),
            None => self.error(
                &key_node.span.start,
                Some(&full),
                format!("unknown key '{name}'; expected one of {}", known.join(", ")),
            ),
        }
    }

    pub(super) fn file_root(&mut self, doc: &MarkedYaml<'_>) -> Option<RawFile> {
        if let YamlData::Representation(t, ScalarStyle::Plain, _) = &doc.data
            && matches!(t.as_ref(), "" | "~" | "null")
        {
            return None;
        }
        let entries = self.mapping(doc, "(file)")?;
        let mut raw = RawFile {
            domain: String::new(),
            domain_at: self.at(&doc.span.start),
            descriptors: Vec::new(),
        };
        for (name, k, v) in entries {
            match name.as_str() {
                "domain" => {
                    raw.domain_at = self.at(&v.span.start);
                    raw.domain = self.string(v, "domain").unwrap_or_default();
                }
                "descriptors" => raw.descriptors = self.descriptors(v, ""),
                _ => self.unknown(&name, k, "", &["domain", "descriptors"]),
            }
        }
        Some(raw)
    }

    pub(super) fn descriptors(
        &mut self,
        node: &MarkedYaml<'_>,
        parent: &str,
    ) -> Vec<RawDescriptor> {
        let list_key = join(parent, "descriptors");
        self.sequence(node, &list_key)
            .into_iter()
            .enumerate()
            .filter_map(|(i, item)| self.descriptor(item, &format!("{list_key}[{i}]")))
            .collect()
    }

    pub(super) fn descriptor(
        &mut self,
        node: &MarkedYaml<'_>,
        path: &str,
    ) -> Option<RawDescriptor> {
        const KNOWN: [&str; 9] = [
            "key",
            "value",
            "rate_limit",
            "descriptors",
            "shadow_mode",
            "detailed_metric",
            "value_to_metric",
            "share_threshold",
            "quota_mode, metadata (not implemented)",
        ];
        let entries = self.mapping(node, path)?;
        let mut d = RawDescriptor {
            at: self.at(&node.span.start),
            path: path.to_owned(),
            key: String::new(),
            value: String::new(),
            rate_limit: None,
            descriptors: Vec::new(),
            shadow_mode: false,
            detailed_metric: false,
            value_to_metric: false,
            share_threshold: false,
        };
        for (name, k, v) in entries {
            let key = join(path, &name);
            match name.as_str() {
                "key" => d.key = self.string(v, &key).unwrap_or_default(),
                "value" => d.value = self.string(v, &key).unwrap_or_default(),
                "rate_limit" => d.rate_limit = self.rate_limit(v, &key),
                "descriptors" => d.descriptors = self.descriptors(v, path),
                "shadow_mode" => d.shadow_mode = self.boolean(v, &key).unwrap_or_default(),
                "detailed_metric" => d.detailed_metric = self.boolean(v, &key).unwrap_or_default(),
                "value_to_metric" => d.value_to_metric = self.boolean(v, &key).unwrap_or_default(),
                "share_threshold" => d.share_threshold = self.boolean(v, &key).unwrap_or_default(),
                "unit" | "requests_per_unit" | "unlimited" | "name" | "replaces" => self.error(
                    &k.span.start,
                    Some(&key),
                    format!("'{name}' belongs under rate_limit:, not directly in a descriptor"),
                ),
                _ => self.unknown(&name, k, path, &KNOWN[..KNOWN.len() - 1]),
            }
        }
        Some(d)
    }

    pub(super) fn rate_limit(&mut self, node: &MarkedYaml<'_>, path: &str) -> Option<RawRateLimit> {
        const KNOWN: [&str; 9] = [
            "unit",
            "requests_per_unit",
            "unlimited",
            "name",
            "replaces",
            "algorithm",
            "burst",
            "window",
            "",
        ];
        let entries = self.mapping(node, path)?;
        let mut r = RawRateLimit {
            at: Some(self.at(&node.span.start)),
            ..RawRateLimit::default()
        };
        for (name, k, v) in entries {
            let key = join(path, &name);
            let at = self.at(&v.span.start);
            match name.as_str() {
                "unit" => r.unit = self.string(v, &key).map(|s| (s, at)),
                "requests_per_unit" => {
                    r.requests_per_unit = self
                        .number(v, &key, u64::from(u32::MAX))
                        .and_then(|n| u32::try_from(n).ok())
                        .unwrap_or_default();
                }
                "unlimited" => r.unlimited = self.boolean(v, &key).unwrap_or_default(),
                "name" => r.name = self.string(v, &key).unwrap_or_default(),
                "replaces" => r.replaces = self.replaces(v, &key),
                "algorithm" => r.algorithm = self.string(v, &key).map(|s| (s, at)),
                "burst" => r.burst = self.number(v, &key, u64::MAX).map(|n| (n, at)),
                "window" => r.window = self.string(v, &key).map(|s| (s, at)),
                _ => self.unknown(&name, k, path, &KNOWN[..KNOWN.len() - 1]),
            }
        }
        Some(r)
    }

    pub(super) fn replaces(
        &mut self,
        node: &MarkedYaml<'_>,
        path: &str,
    ) -> Vec<(String, Location)> {
        let mut names = Vec::new();
        for (i, item) in self.sequence(node, path).into_iter().enumerate() {
            let item_path = format!("{path}[{i}]");
            let Some(entries) = self.mapping(item, &item_path) else {
                continue;
            };
            let mut name = None;
            for (n, k, v) in entries {
                if n == "name" {
                    let at = self.at(&v.span.start);
                    name = self.string(v, &join(&item_path, "name")).map(|s| (s, at));
                } else {
                    self.unknown(&n, k, &item_path, &["name"]);
                }
            }
            names.push(name.unwrap_or_else(|| (String::new(), self.at(&item.span.start))));
        }
        names
    }
}

fn join(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_owned()
    } else {
        format!("{path}.{name}")
    }
}
