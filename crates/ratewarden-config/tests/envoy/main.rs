//! envoyproxy/ratelimit's YAML format: the reference's own files load
//! unchanged, lookups follow the reference's precedence, and every
//! mistake is named with file, line and key.
//!
//! - `reference.rs`: the reference's files, its lookup and its YAML.
//! - `mistakes.rs`: every error, with its file, line and key.
//! - `files.rs`: rules directories, refused files, reloads, names.

#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

mod files;
mod mistakes;
mod reference;

use std::path::{Path, PathBuf};

use ratewarden_config::envoy::EnvoyConfig;
use ratewarden_limiter::FailureMode;

fn reference(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/envoy/reference")
        .join(path)
}

fn parse(yaml: &str) -> Result<EnvoyConfig, String> {
    EnvoyConfig::parse(Path::new("rules.yaml"), yaml, FailureMode::Open).map_err(|e| e.to_string())
}

/// The reference example without the keys ratewarden does not implement.
fn example_without_unimplemented() -> String {
    let text = std::fs::read_to_string(reference("examples/example.yaml")).unwrap();
    let mut out = Vec::new();
    let mut skipping_under: Option<usize> = None;
    for line in text.lines() {
        let indent = line.len() - line.trim_start().len();
        if let Some(at) = skipping_under {
            if indent > at {
                continue;
            }
            skipping_under = None;
        }
        let trimmed = line.trim_start();
        if trimmed.starts_with("quota_mode:") {
            continue;
        }
        if trimmed.starts_with("metadata:") {
            skipping_under = Some(indent);
            continue;
        }
        out.push(line);
    }
    out.join("\n")
}
