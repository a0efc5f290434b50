//! Reading one value of the file's spanned tree: its type, its range
//! (through the checks of [`crate::values`]) and, when it is wrong, an
//! error with its position, key and the value as written.

use std::path::Path;

use toml::Spanned;
use toml::de::DeValue;

use crate::error::{ConfigError, Location};
use crate::policy::{Site, Sited};

/// Walks the spanned tree, collecting errors.
pub(super) struct Reader<'a> {
    pub path: &'a Path,
    pub text: &'a str,
    pub errors: Vec<ConfigError>,
    /// Every policy's name with its position and index, valid policy or
    /// not, to find duplicates.
    pub names: Vec<(String, usize, usize)>,
}

/// How a value of the wrong type reads in a message.
fn kind(value: &DeValue<'_>) -> &'static str {
    match value {
        DeValue::String(_) => "a string",
        DeValue::Integer(_) => "an integer",
        DeValue::Float(_) => "a float",
        DeValue::Boolean(_) => "a boolean",
        DeValue::Datetime(_) => "a date-time",
        DeValue::Array(_) => "an array",
        DeValue::Table(_) => "a table",
    }
}

impl<'a> Reader<'a> {
    pub fn new(path: &'a Path, text: &'a str) -> Reader<'a> {
        Reader {
            path,
            text,
            errors: Vec::new(),
            names: Vec::new(),
        }
    }

    /// The site of byte offset `at`, under `key`.
    pub fn site(&self, at: usize, key: &str) -> Site {
        Site {
            location: Some(Location::of(self.path, self.text, at)),
            key: key.to_owned(),
        }
    }

    /// `value`, read from `at`, with its site.
    pub fn sited<T>(&self, at: &Spanned<DeValue<'_>>, key: String, value: T) -> Sited<T> {
        Sited {
            value,
            site: Site {
                location: Some(Location::of(self.path, self.text, at.span().start)),
                key,
            },
        }
    }

    pub fn error(&mut self, at: usize, key: Option<&str>, message: String) {
        self.errors.push(ConfigError {
            location: Some(Location::of(self.path, self.text, at)),
            key: key.map(str::to_owned),
            message,
        });
    }

    /// The value as written in the file, shortened for messages.
    pub fn source(&self, value: &Spanned<DeValue<'_>>) -> String {
        let text = self.text.get(value.span()).unwrap_or("").trim();
        match text.char_indices().nth(60) {
            Some((end, _)) => format!("{}…", &text[..end]),
            None => text.to_owned(),
        }
    }

    pub fn wrong_type(&mut self, value: &Spanned<DeValue<'_>>, key: Option<&str>, expected: &str) {
        let message = format!(
            "expected {expected}, found {} ({})",
            kind(value.get_ref()),
            self.source(value)
        );
        self.error(value.span().start, key, message);
    }

    pub fn unknown(
        &mut self,
        key: &Spanned<std::borrow::Cow<'_, str>>,
        table: Option<&str>,
        known: &[&str],
    ) {
        let name = key.get_ref().as_ref();
        let full = table.map_or_else(|| name.to_owned(), |t| format!("{t}.{name}"));
        let message = format!("unknown key '{name}'; expected one of {}", known.join(", "));
        self.error(key.span().start, Some(&full), message);
    }

    /// `Some(v)` when `result` is `Ok`, else records its message at `at`.
    pub fn check<T>(&mut self, at: usize, key: &str, result: Result<T, String>) -> Option<T> {
        result
            .map_err(|message| self.error(at, Some(key), message))
            .ok()
    }

    pub fn string<'v>(
        &mut self,
        value: &'v Spanned<DeValue<'_>>,
        key: Option<&str>,
    ) -> Option<&'v str> {
        match value.get_ref() {
            DeValue::String(s) => Some(s.as_ref()),
            _ => {
                self.wrong_type(value, key, "a string");
                None
            }
        }
    }

    /// A string turned into `T` by `parse`.
    pub fn parsed<T>(
        &mut self,
        value: &Spanned<DeValue<'_>>,
        key: Option<&str>,
        parse: impl FnOnce(&str) -> Result<T, String>,
    ) -> Option<T> {
        let s = self.string(value, key)?;
        let at = value.span().start;
        self.check(at, key.unwrap_or(""), parse(s))
    }

    pub fn boolean(&mut self, value: &Spanned<DeValue<'_>>, key: Option<&str>) -> Option<bool> {
        match value.get_ref() {
            DeValue::Boolean(b) => Some(*b),
            _ => {
                self.wrong_type(value, key, "true or false");
                None
            }
        }
    }

    /// A whole number of 0 or more, then range-checked by `check`.
    pub fn number<T>(
        &mut self,
        value: &Spanned<DeValue<'_>>,
        key: Option<&str>,
        check: impl FnOnce(u64) -> Result<T, String>,
    ) -> Option<T> {
        let DeValue::Integer(i) = value.get_ref() else {
            self.wrong_type(value, key, "a whole number");
            return None;
        };
        let at = value.span().start;
        let key_name = key.unwrap_or("");
        match i128::from_str_radix(i.as_str(), i.radix()) {
            Ok(n) if n < 0 => self.check(at, key_name, Err(format!("{n} is negative"))),
            Ok(n) => match u64::try_from(n) {
                Ok(n) => self.check(at, key_name, check(n)),
                Err(_) => self.check(at, key_name, Err(format!("{n} is too large"))),
            },
            Err(_) => self.check(
                at,
                key_name,
                Err(format!("'{}' is too large", self.source(value))),
            ),
        }
    }

    /// An array of strings, each with its position and key path.
    pub fn strings<'v>(
        &mut self,
        value: &'v Spanned<DeValue<'_>>,
        key: &str,
    ) -> Option<Vec<(usize, String, &'v str)>> {
        let DeValue::Array(items) = value.get_ref() else {
            self.wrong_type(value, Some(key), "an array of strings");
            return None;
        };
        let mut out = Vec::new();
        let mut ok = true;
        for (i, item) in items.iter().enumerate() {
            let path = format!("{key}[{i}]");
            match self.string(item, Some(&path)) {
                Some(s) => out.push((item.span().start, path, s)),
                None => ok = false,
            }
        }
        ok.then_some(out)
    }
}
