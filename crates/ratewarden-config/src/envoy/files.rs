//! Which files a rules path names and their text: one file, or the
//! `*.yaml` and `*.yml` files at the top of a directory, in name order.
//! Names starting with `.` are never read (Kubernetes' `..data` link and
//! `..2024_…` directory of a mounted ConfigMap hold a second copy of the
//! same files); any other entry that is not read is listed, so that a
//! directory laid out for the reference server, which reads every file
//! under it, never loses rules silently.

use std::path::{Path, PathBuf};

use crate::error::{ConfigError, ConfigErrors, Location};

/// An entry of a rules directory that is not read, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// The entry.
    pub path: PathBuf,
    /// Why it is not read.
    pub why: &'static str,
}

/// The files `path` names, and the entries of a directory left unread.
///
/// # Errors
/// `path` missing, or a directory that cannot be listed.
pub(super) fn files_of(path: &Path) -> Result<(Vec<PathBuf>, Vec<Skipped>), ConfigErrors> {
    let cannot = |e: std::io::Error| {
        ConfigErrors::from(ConfigError::general(format!(
            "cannot read the Envoy rate limit configuration {}: {e}",
            path.display()
        )))
    };
    if !path.is_dir() {
        // A missing file is reported by the read, with its name.
        std::fs::metadata(path).map_err(cannot)?;
        return Ok((vec![path.to_path_buf()], Vec::new()));
    }
    let mut files = Vec::new();
    let mut skipped = Vec::new();
    for entry in std::fs::read_dir(path).map_err(cannot)? {
        let entry = entry.map_err(cannot)?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with('.') {
            continue;
        }
        let yaml = name.ends_with(".yaml") || name.ends_with(".yml");
        let dir = entry.path().is_dir();
        // A dangling link or a link loop is listed too, so that reading
        // it reports it (regression: such files were skipped silently).
        if yaml && !dir {
            files.push(entry.path());
        } else {
            skipped.push(Skipped {
                path: entry.path(),
                why: if dir {
                    "a subdirectory (only the files at the top of the rules directory are read)"
                } else {
                    "not a .yaml or .yml file"
                },
            });
        }
    }
    files.sort();
    skipped.sort_by(|a, b| a.path.cmp(&b.path));
    Ok((files, skipped))
}

/// The text of `file`; a file that is not UTF-8 is refused at the line
/// and column of its first bad byte (regression: with no position).
pub(super) fn read_text(file: &Path) -> Result<String, ConfigError> {
    let bytes = std::fs::read(file).map_err(|e| {
        ConfigError::general(format!(
            "cannot read the Envoy rate limit configuration {}: {e}",
            file.display()
        ))
    })?;
    String::from_utf8(bytes).map_err(|e| {
        let good = &e.as_bytes()[..e.utf8_error().valid_up_to()];
        let line = good.iter().filter(|b| **b == b'\n').count() + 1;
        let line_start = good.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
        let column = String::from_utf8_lossy(&good[line_start..]).chars().count() + 1;
        ConfigError {
            location: Some(Location {
                file: file.to_path_buf(),
                line,
                column,
            }),
            key: None,
            message: "not UTF-8 text (YAML files are UTF-8)".into(),
        }
    })
}
