//! One file of envoyproxy/ratelimit's YAML format read into the raw model,
//! every value with its position. Only the shape is checked here (known
//! keys, types, one document); what the values mean is checked when the
//! rules are built (`build.rs`).
//!
//! Scalars are read as the reference server's YAML library (YAML 1.1)
//! reads them into its fields: a string field takes the scalar's text
//! (`value: 123` is the string `123`), a boolean accepts `true`/`false`
//! and YAML 1.1's `yes`/`no`/`on`/`off` (any case), a number must be a
//! plain whole number. Anchors and aliases work; a mapping key given twice
//! is an error.
//!
//! # Layout
//! - `mod.rs`: the raw model and [`read`].
//! - `nodes.rs`: one node read as a value (string, boolean, number,
//!   mapping, list), as the reference's YAML library reads it.
//! - `rules.rs`: the format's keys: a file, its descriptors, their
//!   `rate_limit` blocks.

mod nodes;
mod rules;

use std::path::Path;

use saphyr::{MarkedYaml, ScalarStyle, YamlLoader};
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

/// Walks one file's tree, collecting errors.
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
}
