//! What is reloaded (a file, or a directory of YAML files), which watcher
//! events concern it, and its contents at one moment.

use std::path::{Path, PathBuf};

use ratewarden_config::Settings;

/// What is reloaded: a file, or a directory of YAML files.
#[derive(Debug, Clone)]
pub(super) enum Source {
    File(PathBuf),
    /// The directory as given, and the names the watcher may report it
    /// by: absolute, and with symlinks resolved.
    Directory(PathBuf, Vec<PathBuf>),
}

impl Source {
    fn of(path: &Path) -> Source {
        if path.is_dir() {
            // The watcher reports absolute paths: a relative directory
            // such as `rules/` must match them.
            let names = [std::path::absolute(path), path.canonicalize()]
                .into_iter()
                .flatten()
                .collect();
            Source::Directory(path.to_path_buf(), names)
        } else {
            Source::File(path.to_path_buf())
        }
    }

    pub(super) fn path(&self) -> &Path {
        match self {
            Source::File(p) | Source::Directory(p, _) => p,
        }
    }

    /// The directory to watch.
    pub(super) fn directory(&self) -> PathBuf {
        match self {
            Source::Directory(d, _) => d.clone(),
            Source::File(f) => f
                .parent()
                .filter(|d| !d.as_os_str().is_empty())
                .unwrap_or(Path::new("."))
                .to_path_buf(),
        }
    }

    /// Whether a change of `path` concerns this source. A Kubernetes
    /// ConfigMap swaps a `..data` symlink in the directory.
    pub(super) fn touched_by(&self, path: &Path) -> bool {
        let name = path.file_name().map(|n| n.to_string_lossy());
        let k8s_swap = name.as_ref().is_some_and(|n| n.starts_with(".."));
        match self {
            Source::File(f) => k8s_swap || f.file_name() == path.file_name(),
            Source::Directory(d, names) => {
                let is_it = |p: &Path| p == d || names.iter().any(|n| n == p);
                let inside = path.parent().is_some_and(is_it) || is_it(path);
                let yaml = name
                    .as_ref()
                    .is_some_and(|n| n.ends_with(".yaml") || n.ends_with(".yml"));
                inside && (yaml || k8s_swap)
            }
        }
    }

    /// The contents now.
    fn snapshot(&self) -> Vec<Snapshot> {
        match self {
            Source::File(f) => vec![(f.clone(), std::fs::read(f).ok())],
            Source::Directory(d, _) => {
                let mut files: Vec<PathBuf> = std::fs::read_dir(d)
                    .into_iter()
                    .flatten()
                    .flatten()
                    .map(|e| e.path())
                    .filter(|p| self.touched_by(p) && p.is_file())
                    .collect();
                files.sort();
                files
                    .into_iter()
                    .map(|p| {
                        let bytes = std::fs::read(&p).ok();
                        (p, bytes)
                    })
                    .collect()
            }
        }
    }
}

/// A file and its contents (`None`: unreadable).
pub(super) type Snapshot = (PathBuf, Option<Vec<u8>>);

/// What the configuration file and the Envoy rules held when they were
/// read at start. Take it right after reading them ([`Baseline::take`]),
/// before anything slow (opening the store, binding): the reloader
/// applies any difference it finds once its watcher is in place, so a
/// change made meanwhile, which no watcher saw, is not lost.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Baseline(pub(super) Vec<Snapshot>);

impl Baseline {
    /// The contents of `settings.config_file` and `settings.envoy_config`
    /// (every YAML file of a directory) now; an unreadable file counts as
    /// its own state.
    pub fn take(settings: &Settings) -> Baseline {
        Baseline(snapshot_of(&sources_of(settings)))
    }
}

/// The configuration file, then the Envoy rules, of `settings`.
pub(super) fn sources_of(settings: &Settings) -> Vec<Source> {
    settings
        .config_file
        .iter()
        .chain(&settings.envoy_config)
        .map(|p| Source::of(p))
        .collect()
}

/// The contents of every source, in order.
pub(super) fn snapshot_of(sources: &[Source]) -> Vec<Snapshot> {
    sources.iter().flat_map(Source::snapshot).collect()
}

/// The files of `now` that are empty (zero bytes) where they held
/// something in `applied`, the contents last applied: a truncation
/// whose new contents are not written yet.
pub(super) fn emptied<'a>(applied: &[Snapshot], now: &'a [Snapshot]) -> Vec<&'a Path> {
    now.iter()
        .filter(|(path, bytes)| {
            bytes.as_ref().is_some_and(Vec::is_empty)
                && applied
                    .iter()
                    .any(|(p, b)| p == path && b.as_ref().is_some_and(|b| !b.is_empty()))
        })
        .map(|(path, _)| path.as_path())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_file_that_held_something_counts_as_emptied() {
        let snap =
            |name: &str, bytes: Option<&[u8]>| (PathBuf::from(name), bytes.map(<[u8]>::to_vec));
        let applied = vec![
            snap("a.yaml", Some(b"domain: a")),
            snap("b.yaml", Some(b"")),
            snap("c.yaml", None),
        ];
        let now = vec![
            snap("a.yaml", Some(b"")),
            snap("b.yaml", Some(b"")),
            snap("c.yaml", Some(b"")),
            snap("d.yaml", Some(b"")),
        ];
        assert_eq!(emptied(&applied, &now), vec![Path::new("a.yaml")]);
        assert!(emptied(&applied, &applied).is_empty());
    }
}
