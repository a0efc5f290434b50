//! One file of envoyproxy/ratelimit's YAML format read into the raw model,
//! every value with its position. Only the shape is checked here (known
//! keys, types, one document); what the values mean is checked when the
//! rules are built (`tree.rs`).
//!
//! Scalars are read as the reference server's YAML library (YAML 1.1)
//! reads them into its fields: a string field takes the scalar's text
//! (`value: 123` is the string `123`), a boolean accepts `true`/`false`
//! and YAML 1.1's `yes`/`no`/`on`/`off` (any case), a number must be a
//! plain whole number. Anchors and aliases work; a mapping key given twice
//! is an error.

use std::path::Path;

use saphyr::{MarkedYaml, ScalarStyle, YamlData, YamlLoader};
use saphyr_parser::{Event, Parser};

use crate::error::{ConfigError, Location};

/// A descriptor as written.
#[derive(Debug, Clone)]
pub(super) struct RawDescriptor {
    pub at: Location,
    /// `descriptors[0].descriptors[2]`: where it is, for messages.
    pub path: String,
    pub key: String,
    /// Empty when not given (the reference treats both alike).
    pub value: String,
    pub rate_limit: Option<RawRateLimit>,
    pub descriptors: Vec<RawDescriptor>,
    pub shadow_mode: bool,
    pub detailed_metric: bool,
    pub value_to_metric: bool,
    pub share_threshold: bool,
}

/// A `rate_limit` block as written.
#[derive(Debug, Clone, Default)]
pub(super) struct RawRateLimit {
    pub at: Option<Location>,
    pub unit: Option<(String, Location)>,
    /// Missing reads as 0, as in the reference (a limit that refuses all).
    pub requests_per_unit: u32,
    pub unlimited: bool,
    pub name: String,
    pub replaces: Vec<(String, Location)>,
    /// Extension: `fixed_window` (default), `sliding_log`, `sliding_window`, `gcra`.
    pub algorithm: Option<(String, Location)>,
    /// Extension: GCRA's burst.
    pub burst: Option<(u64, Location)>,
    /// Extension: a window such as `30s`, instead of `unit`.
    pub window: Option<(String, Location)>,
}

/// A whole file as written.
#[derive(Debug, Clone)]
pub(super) struct RawFile {
    pub domain: String,
    pub domain_at: Location,
    pub descriptors: Vec<RawDescriptor>,
}

/// Keys of the format that ratewarden refuses rather than ignore, with why.
const NOT_IMPLEMENTED: [(&str, &str); 2] = [
    (
        "quota_mode",
        "quota_mode is not implemented by ratewarden; remove it (the limit then denies as a normal rate limit)",
    ),
    (
        "metadata",
        "metadata (dynamic metadata for passed descriptors) is not implemented by ratewarden; remove it",
    ),
];

/// The deepest nesting of mappings and lists a rules file may have: 64
/// allows 31 levels of descriptors (the reference's own examples use 3).
/// Deeper files are refused before they are loaded, since loading and
/// reading them would recurse once per level (regression: 600 levels
/// overflowed a worker thread's stack on reload and ended the process).
pub(super) const MAX_NESTING: usize = 64;

/// Where `text` first nests deeper than [`MAX_NESTING`], as (line,
/// column); `None` when it never does or is not valid YAML (the load
/// reports that). Reads the event stream, which needs no recursion.
fn too_deep(text: &str) -> Option<(usize, usize)> {
    let mut depth = 0usize;
    for event in Parser::new_from_str(text) {
        let (event, span) = event.ok()?;
        match event {
            Event::MappingStart(..) | Event::SequenceStart(..) => {
                depth += 1;
                if depth > MAX_NESTING {
                    return Some((span.start.line(), span.start.col() + 1));
                }
            }
            Event::MappingEnd | Event::SequenceEnd => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    None
}

/// Reads `text` (the contents of `file`); every error found, in file order.
pub(super) fn read(file: &Path, text: &str) -> Result<RawFile, Vec<ConfigError>> {
    let mut reader = Reader {
        file,
        errors: Vec::new(),
    };
    if let Some((line, column)) = too_deep(text) {
        return Err(vec![ConfigError {
            location: Some(Location {
                file: file.to_path_buf(),
                line,
                column,
            }),
            key: None,
            message: format!(
                "nested more than {MAX_NESTING} mappings and lists deep; \
                 descriptors may nest at most {} levels",
                MAX_NESTING / 2 - 1
            ),
        }]);
    }
    let docs = {
        let mut loader: YamlLoader<'_, MarkedYaml<'_>> = YamlLoader::default();
        loader.early_parse(false);
        let mut parser = Parser::new_from_str(text);
        let loaded = parser.load(&mut loader, true);
        match loaded.err().or_else(|| loader.error().cloned()) {
            Some(e) => {
                let at = Location {
                    file: file.to_path_buf(),
                    line: e.marker().line(),
                    column: e.marker().col() + 1,
                };
                return Err(vec![ConfigError {
                    location: Some(at),
                    key: None,
                    message: format!("not valid YAML: {}", e.info()),
                }]);
            }
            None => loader.into_documents(),
        }
    };
    let raw = match docs.as_slice() {
        [] => None,
        [doc, rest @ ..] => {
            if let Some(second) = rest.first() {
                reader.error(
                    &second.span.start,
                    None,
                    "a second YAML document: a file holds one domain (the reference server \
                     reads only the first document and would ignore this one)",
                );
            }
            reader.file_root(doc)
        }
    };
    let raw = raw.unwrap_or_else(|| {
        reader.error_at(
            Location {
                file: file.to_path_buf(),
                line: 1,
                column: 1,
            },
            Some("domain"),
            "the file is empty; it needs a domain",
        );
        RawFile {
            domain: String::new(),
            domain_at: reader.start(),
            descriptors: Vec::new(),
        }
    });
    if reader.errors.is_empty() {
        Ok(raw)
    } else {
        Err(reader.errors)
    }
}

struct Reader<'f> {
    file: &'f Path,
    errors: Vec<ConfigError>,
}

/// A scalar's text and style.
struct Text<'a> {
    text: &'a str,
    style: ScalarStyle,
}

impl Reader<'_> {
    fn start(&self) -> Location {
        Location {
            file: self.file.to_path_buf(),
            line: 1,
            column: 1,
        }
    }

    fn at(&self, marker: &saphyr::Marker) -> Location {
        Location {
            file: self.file.to_path_buf(),
            line: marker.line(),
            column: marker.col() + 1,
        }
    }

    fn error(&mut self, marker: &saphyr::Marker, key: Option<&str>, message: impl Into<String>) {
        let at = self.at(marker);
        self.error_at(at, key, message);
    }

    fn error_at(&mut self, at: Location, key: Option<&str>, message: impl Into<String>) {
        self.errors.push(ConfigError {
            location: Some(at),
            key: key.map(ToOwned::to_owned),
            message: message.into(),
        });
    }

    /// The scalar text of `node`, or an error naming `key` and `expected`.
    fn scalar<'n>(
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
    fn string(&mut self, node: &MarkedYaml<'_>, key: &str) -> Option<String> {
        let t = self.scalar(node, key, "a string")?;
        if t.style == ScalarStyle::Plain && matches!(t.text, "" | "~" | "null" | "Null" | "NULL") {
            return Some(String::new());
        }
        Some(t.text.to_owned())
    }

    fn boolean(&mut self, node: &MarkedYaml<'_>, key: &str) -> Option<bool> {
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

    fn number(&mut self, node: &MarkedYaml<'_>, key: &str, max: u64) -> Option<u64> {
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
    fn mapping<'n>(
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
    fn sequence<'n>(&mut self, node: &'n MarkedYaml<'n>, key: &str) -> Vec<&'n MarkedYaml<'n>> {
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

    fn unknown(&mut self, name: &str, key_node: &MarkedYaml<'_>, path: &str, known: &[&str]) {
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

    fn file_root(&mut self, doc: &MarkedYaml<'_>) -> Option<RawFile> {
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

    fn descriptors(&mut self, node: &MarkedYaml<'_>, parent: &str) -> Vec<RawDescriptor> {
        let list_key = join(parent, "descriptors");
        self.sequence(node, &list_key)
            .into_iter()
            .enumerate()
            .filter_map(|(i, item)| self.descriptor(item, &format!("{list_key}[{i}]")))
            .collect()
    }

    fn descriptor(&mut self, node: &MarkedYaml<'_>, path: &str) -> Option<RawDescriptor> {
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

    fn rate_limit(&mut self, node: &MarkedYaml<'_>, path: &str) -> Option<RawRateLimit> {
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

    fn replaces(&mut self, node: &MarkedYaml<'_>, path: &str) -> Vec<(String, Location)> {
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

fn join(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_owned()
    } else {
        format!("{path}.{name}")
    }
}

fn kind(node: &MarkedYaml<'_>) -> &'static str {
    match &node.data {
        YamlData::Mapping(_) => "a mapping",
        YamlData::Sequence(_) => "a list",
        YamlData::Representation(..) | YamlData::Value(_) => "a single value",
        _ => "something else",
    }
}
