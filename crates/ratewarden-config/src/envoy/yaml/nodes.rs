//! One node of the YAML tree read as a field's value, as the reference
//! server's YAML library (YAML 1.1) reads it into its fields: a string
//! field takes a scalar's text, booleans take `yes`/`no`/`on`/`off`,
//! numbers YAML 1.1's forms, mappings follow merge keys (`<<`).

use saphyr::{MarkedYaml, ScalarStyle, YamlData};

use super::{Reader, Text};

impl Reader<'_> {
    /// The scalar text of `node`, or an error naming `key` and `expected`.
    pub(super) fn scalar<'n>(
        &mut self,
        node: &'n MarkedYaml<'_>,
        key: &str,
        expected: &str,
    ) -> Option<Text<'n>> {
        match &node.data {
            YamlData::Representation(text, style, _) => Some(Text {
                text: text.as_ref(),
                style: *style,
            }),
            _ => {
                self.error(
                    &node.span.start,
                    Some(key),
                    format!("expected {expected}, found {}", kind(node)),
                );
                None
            }
        }
    }

    /// A string field: the scalar's text; `~`/`null`/nothing reads as empty.
    pub(super) fn string(&mut self, node: &MarkedYaml<'_>, key: &str) -> Option<String> {
        let t = self.scalar(node, key, "a string")?;
        if t.style == ScalarStyle::Plain && matches!(t.text, "" | "~" | "null" | "Null" | "NULL") {
            return Some(String::new());
        }
        Some(t.text.to_owned())
    }

    pub(super) fn boolean(&mut self, node: &MarkedYaml<'_>, key: &str) -> Option<bool> {
        let t = self.scalar(node, key, "true or false")?;
        match t.text.to_ascii_lowercase().as_str() {
            "true" | "yes" | "on" | "y" => Some(true),
            "false" | "no" | "off" | "n" | "" | "~" | "null" => Some(false),
            _ => {
                self.error(
                    &node.span.start,
                    Some(key),
                    format!("'{}' is not true or false", t.text),
                );
                None
            }
        }
    }

    pub(super) fn number(&mut self, node: &MarkedYaml<'_>, key: &str, max: u64) -> Option<u64> {
        let t = self.scalar(node, key, "a whole number")?;
        let n = if t.style == ScalarStyle::Plain {
            yaml11_uint(t.text)
        } else {
            t.text.parse::<u64>().ok()
        };
        match n {
            Some(n) if n <= max => Some(n),
            _ => {
                self.error(
                    &node.span.start,
                    Some(key),
                    format!("'{}' is not a whole number from 0 to {max}", t.text),
                );
                None
            }
        }
    }

    /// The entries of a mapping, keys as text; an error when `node` is
    /// not a mapping.
    pub(super) fn mapping<'n>(
        &mut self,
        node: &'n MarkedYaml<'n>,
        key: &str,
    ) -> Option<Vec<(String, &'n MarkedYaml<'n>, &'n MarkedYaml<'n>)>> {
        match &node.data {
            YamlData::Mapping(map) => {
                let mut entries = Vec::with_capacity(map.len());
                let mut merged = Vec::new();
                for (k, v) in map {
                    match &k.data {
                        // A merge key (`<<: *defaults`, or a list of
                        // them), as the reference's YAML 1.1 parser
                        // reads it: the mappings' entries, where this
                        // one has none of its own, earlier ones first.
                        YamlData::Representation(text, ScalarStyle::Plain, _) if text == "<<" => {
                            let sources: Vec<&'n MarkedYaml<'n>> = match &v.data {
                                YamlData::Sequence(items) => items.iter().collect(),
                                _ => vec![v],
                            };
                            for source in sources {
                                if let Some(more) = self.mapping(source, key) {
                                    merged.extend(more);
                                }
                            }
                        }
                        YamlData::Representation(text, _, _) => {
                            entries.push((text.to_string(), k, v));
                        }
                        _ => self.error(&k.span.start, Some(key), "a key must be a plain string"),
                    }
                }
                for entry in merged {
                    if !entries.iter().any(|(name, _, _)| *name == entry.0) {
                        entries.push(entry);
                    }
                }
                Some(entries)
            }
            _ => {
                self.error(
                    &node.span.start,
                    Some(key),
                    format!("expected a mapping, found {}", kind(node)),
                );
                None
            }
        }
    }

    /// The items of a list; `null`/nothing is an empty list.
    pub(super) fn sequence<'n>(
        &mut self,
        node: &'n MarkedYaml<'n>,
        key: &str,
    ) -> Vec<&'n MarkedYaml<'n>> {
        match &node.data {
            YamlData::Sequence(items) => items.iter().collect(),
            YamlData::Representation(t, ScalarStyle::Plain, _)
                if matches!(t.as_ref(), "" | "~" | "null") =>
            {
                Vec::new()
            }
            _ => {
                self.error(
                    &node.span.start,
                    Some(key),
                    format!("expected a list, found {}", kind(node)),
                );
                Vec::new()
            }
        }
    }
}

/// A plain scalar as YAML 1.1 reads an unsigned integer (the reference's
/// Go parser): `_` separators, `0x` hexadecimal, `0o` or a leading `0`
/// octal, `0b` binary, else decimal; an optional `+`.
fn yaml11_uint(text: &str) -> Option<u64> {
    let digits: String = text.chars().filter(|c| *c != '_').collect();
    let digits = digits.strip_prefix('+').unwrap_or(&digits);
    let (radix, rest) = if let Some(rest) = digits.strip_prefix("0x") {
        (16, rest)
    } else if let Some(rest) = digits.strip_prefix("0o") {
        (8, rest)
    } else if let Some(rest) = digits.strip_prefix("0b") {
        (2, rest)
    } else if digits.len() > 1 && digits.starts_with('0') {
        (8, &digits[1..])
    } else {
        (10, digits)
    };
    if rest.is_empty() || rest.starts_with(['+', '-']) {
        return None;
    }
    u64::from_str_radix(rest, radix).ok()
}

fn kind(node: &MarkedYaml<'_>) -> &'static str {
    match &node.data {
        YamlData::Mapping(_) => "a mapping",
        YamlData::Sequence(_) => "a list",
        YamlData::Representation(..) | YamlData::Value(_) => "a single value",
        _ => "something else",
    }
}
