//! The crate's modules form a one-way chain: error → types → defaults →
//! values → policy → overrides → file / envoy → settings → the crate
//! root. A module may name (`crate::…`) only modules before it, never a
//! sibling of its rank (file and envoy know nothing of each other) and
//! never the crate root's items; so the chain cannot turn into a cycle.

use std::path::{Path, PathBuf};

/// Every module under the root, with its rank in the chain.
const CHAIN: [(&str, usize); 9] = [
    ("error", 0),
    ("types", 1),
    ("defaults", 2),
    ("values", 3),
    ("policy", 4),
    ("overrides", 5),
    ("file", 6),
    ("envoy", 6),
    ("settings", 7),
];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The `.rs` files of module `name`: `name.rs`, or everything under
/// `name/`.
fn files_of(name: &str) -> Vec<PathBuf> {
    let file = src().join(format!("{name}.rs"));
    if file.is_file() {
        return vec![file];
    }
    let mut files = Vec::new();
    let mut dirs = vec![src().join(name)];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    files
}

/// The first segment of every path after `crate::` in `code`:
/// `crate::values::parse_limit` gives `values`, `crate::{a::b, c}` gives
/// `a` and `c`.
fn crate_paths(code: &str) -> Vec<String> {
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    let mut found = Vec::new();
    for (at, _) in code.match_indices("crate::") {
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$') {
            continue;
        }
        let rest = &code[at + "crate::".len()..];
        let Some(group) = rest.strip_prefix('{') else {
            found.push(ident(rest));
            continue;
        };
        // The first identifier of each item at the group's top level.
        let mut depth = 0;
        let mut item_start = true;
        for (i, c) in group.char_indices() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => break,
                '}' => depth -= 1,
                ',' if depth == 0 => item_start = true,
                c if c.is_whitespace() => {}
                _ if item_start && depth == 0 => {
                    found.push(ident(&group[i..]));
                    item_start = false;
                }
                _ => {}
            }
        }
    }
    found
}

/// The code of a file: comment lines left out (doc links name any
/// module and make no dependency).
fn code(path: &Path) -> String {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn every_module_uses_only_the_modules_before_it() {
    let rank = |name: &str| CHAIN.iter().find(|(n, _)| *n == name).map(|(_, r)| *r);
    let mut wrong = Vec::new();
    for (module, own) in CHAIN {
        let files = files_of(module);
        assert!(!files.is_empty(), "no source of the module {module}");
        for file in files {
            for used in crate_paths(&code(&file)) {
                let allowed = used == module || rank(&used).is_some_and(|r| r < own);
                if !allowed {
                    let what = if rank(&used).is_some() {
                        format!("the module {used}")
                    } else {
                        format!("the crate root's {used}")
                    };
                    wrong.push(format!(
                        "{} (module {module}) uses {what}",
                        file.strip_prefix(src()).unwrap_or(&file).display()
                    ));
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "the chain {CHAIN:?} is broken:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn every_module_is_in_the_chain() {
    for entry in std::fs::read_dir(src()).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        if name == "lib" {
            continue;
        }
        assert!(
            CHAIN.iter().any(|(n, _)| *n == name),
            "src/{name}: place the module in the chain of tests/layering.rs"
        );
    }
}

#[test]
fn crate_paths_are_found_alone_and_in_groups() {
    let code = "use crate::values::{a, b};\nuse crate::{error::{X, Y}, types::Z};\nfoo(crate::describe(x));\n$crate::no";
    assert_eq!(crate_paths(code), ["values", "error", "types", "describe"]);
}
