//! Configuration errors that say where: `FILE:LINE:COLUMN`, the key and
//! the offending value.

use std::fmt;
use std::path::{Path, PathBuf};

/// Where in a file an error is: 1-based line and column (in characters).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    /// The file, as given.
    pub file: PathBuf,
    /// 1-based line.
    pub line: usize,
    /// 1-based column, counted in characters.
    pub column: usize,
}

impl Location {
    /// The location of byte offset `offset` of `text`, read from `file`.
    pub fn of(file: &Path, text: &str, offset: usize) -> Location {
        let before = text.get(..offset.min(text.len())).unwrap_or(text);
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let column = before[line_start..].chars().count() + 1;
        Location {
            file: file.to_path_buf(),
            line,
            column,
        }
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.file.display(), self.line, self.column)
    }
}

/// One thing wrong with the configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// Where, when it comes from a file.
    pub location: Option<Location>,
    /// The key, as a path (`policies[2].window`), when one is to blame.
    pub key: Option<String>,
    /// What is wrong, naming the offending value.
    pub message: String,
}

impl ConfigError {
    /// An error of the configuration as a whole (no file position).
    pub fn general(message: impl Into<String>) -> ConfigError {
        ConfigError {
            location: None,
            key: None,
            message: message.into(),
        }
    }
}

/// `FILE:LINE:COLUMN: KEY: MESSAGE`, leaving out what is unknown.
impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(location) = &self.location {
            write!(f, "{location}: ")?;
        }
        if let Some(key) = &self.key {
            write!(f, "{key}: ")?;
        }
        f.write_str(&self.message)
    }
}

impl std::error::Error for ConfigError {}

/// Every error found, in file order; never empty.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigErrors(pub Vec<ConfigError>);

impl ConfigErrors {
    /// The errors.
    pub fn iter(&self) -> impl Iterator<Item = &ConfigError> {
        self.0.iter()
    }
}

/// One error per line.
impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}

impl From<ConfigError> for ConfigErrors {
    fn from(e: ConfigError) -> ConfigErrors {
        ConfigErrors(vec![e])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_count_lines_and_characters_from_one() {
        let text = "a = 1\nbé = 'x'\n";
        let at = text.find("'x'").unwrap();
        let loc = Location::of(Path::new("f.toml"), text, at);
        assert_eq!((loc.line, loc.column), (2, 6));
        assert_eq!(loc.to_string(), "f.toml:2:6");
        assert_eq!(Location::of(Path::new("f"), text, 0).column, 1);
    }
}
