//! The defaults the docs state are the defaults ([`defaults::documented`]).
//!
//! docs/configuration.md: the Markdown table whose header has the
//! columns `key`, `flag` and `default` has one row per setting of
//! `serve`, its key in the first code span of the `key` cell and its
//! flag in the first code span of the `flag` cell. A default cell that
//! starts with a code span states a value: the span (a string's double
//! quotes removed) must be the setting's default as the file writes it.
//! A setting without a value (`grpc_listen`, `store`, …) must have a
//! cell that does not start with a code span (`none`, prose), or states
//! an empty list (`` `[]` ``).
//!
//! README.md: any Markdown table with a `default` column; a row is
//! checked when its first cell starts with a code span holding a flag of
//! `serve` (`` `--listen ADDR` ``), the row names a `RATEWARDEN_*`
//! variable (`replay`'s flags, whose defaults differ, take none), and
//! its default cell starts with a code span. Other rows, and any prose,
//! are not checked.

use std::path::{Path, PathBuf};

use ratewarden_config::defaults::{self, Documented, Stated};

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(name: &str) -> String {
    let path = repository().join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A table row's cells, trimmed, `\|` read as `|`.
fn cells(line: &str) -> Vec<String> {
    let inner = line.trim().trim_start_matches('|');
    let inner = inner.strip_suffix('|').unwrap_or(inner);
    let mut cells = Vec::new();
    let mut cell = String::new();
    let mut escaped = false;
    for c in inner.chars() {
        match c {
            '|' if !escaped => cells.push(std::mem::take(&mut cell)),
            '\\' if !escaped => escaped = true,
            c => {
                if escaped && c != '|' {
                    cell.push('\\');
                }
                escaped = false;
                cell.push(c);
            }
        }
    }
    cells.push(cell);
    cells.iter().map(|c| c.trim().to_owned()).collect()
}

/// A Markdown table: its header's cells (lowercase) and its rows' cells,
/// each row with its line number.
struct Table {
    header: Vec<String>,
    rows: Vec<(usize, Vec<String>)>,
}

/// Every table of `text`.
fn tables(text: &str) -> Vec<Table> {
    let lines: Vec<&str> = text.lines().collect();
    let mut tables = Vec::new();
    let mut i = 0;
    while i + 1 < lines.len() {
        let separator = lines[i + 1].trim();
        let is_table = lines[i].trim_start().starts_with('|')
            && separator.starts_with('|')
            && separator.chars().all(|c| "|-: ".contains(c));
        if !is_table {
            i += 1;
            continue;
        }
        let header = cells(lines[i])
            .into_iter()
            .map(|c| c.to_lowercase())
            .collect();
        let mut rows = Vec::new();
        i += 2;
        while i < lines.len() && lines[i].trim_start().starts_with('|') {
            rows.push((i + 1, cells(lines[i])));
            i += 1;
        }
        tables.push(Table { header, rows });
    }
    tables
}

/// The text of the cell's first code span.
fn first_code(cell: &str) -> Option<&str> {
    let start = cell.find('`')? + 1;
    let len = cell[start..].find('`')?;
    Some(&cell[start..start + len])
}

/// What a default cell states: `Some(value)` when it starts with a code
/// span (a string's quotes removed), `None` for prose and for an empty
/// list (`[]`, as TOML writes "none").
fn stated_value(cell: &str) -> Option<&str> {
    if !cell.starts_with('`') {
        return None;
    }
    let code = first_code(cell)?.trim();
    if code == "[]" {
        return None;
    }
    Some(
        code.strip_prefix('"')
            .and_then(|c| c.strip_suffix('"'))
            .unwrap_or(code),
    )
}

/// Whether `cell` agrees with `default`; else what is wrong.
fn agrees(cell: &str, default: &Stated) -> Result<(), String> {
    match (stated_value(cell), default) {
        (Some(said), Stated::Value { text, .. }) if said == text => Ok(()),
        (None, Stated::Unset(_)) => Ok(()),
        (Some(said), Stated::Value { text, .. }) => {
            Err(format!("states `{said}`, the default is `{text}`"))
        }
        (Some(said), Stated::Unset(what)) => Err(format!(
            "states the value `{said}`, but the setting has none ({what})"
        )),
        (None, Stated::Value { text, .. }) => Err(format!(
            "'{cell}' does not state the default `{text}` (as a code span first in the cell)"
        )),
    }
}

#[test]
fn the_settings_table_of_the_configuration_page_states_every_default() {
    let text = read("docs/configuration.md");
    let documented = defaults::documented();
    let Table { header, rows } = tables(&text)
        .into_iter()
        .find(|t| {
            ["key", "flag", "default"]
                .iter()
                .all(|c| t.header.iter().any(|h| h == c))
        })
        .expect("docs/configuration.md has a table with the columns key, flag and default");
    let column = |name: &str| header.iter().position(|h| h == name).unwrap();
    let (key_at, flag_at, default_at) = (column("key"), column("flag"), column("default"));
    let mut wrong = Vec::new();
    let mut seen = Vec::new();
    for (line, row) in &rows {
        let cell = |at: usize| row.get(at).map_or("", String::as_str);
        let key = first_code(cell(key_at)).unwrap_or(cell(key_at));
        let Some(setting) = documented.iter().find(|d| d.key == key) else {
            wrong.push(format!("line {line}: '{key}' is not a setting"));
            continue;
        };
        seen.push(key.to_owned());
        let flag = first_code(cell(flag_at)).unwrap_or("");
        if flag != setting.flag {
            wrong.push(format!(
                "line {line}: {key}'s flag is {}, not '{flag}'",
                setting.flag
            ));
        }
        if let Err(e) = agrees(cell(default_at), &setting.default) {
            wrong.push(format!("line {line}: {key}: {e}"));
        }
    }
    for Documented { key, .. } in &documented {
        if !seen.iter().any(|s| s == key) {
            wrong.push(format!("no row for {key}"));
        }
    }
    assert!(
        wrong.is_empty(),
        "docs/configuration.md:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_readme_states_the_defaults_it_mentions_as_they_are() {
    let text = read("README.md");
    let documented = defaults::documented();
    let mut wrong = Vec::new();
    for Table { header, rows } in tables(&text) {
        let Some(default_at) = header.iter().position(|h| h == "default") else {
            continue;
        };
        for (line, row) in &rows {
            let flag = row
                .first()
                .filter(|c| c.starts_with('`'))
                .and_then(|c| first_code(c))
                .and_then(|c| c.split_whitespace().next())
                .unwrap_or("");
            let Some(setting) = documented.iter().find(|d| d.flag == flag) else {
                continue;
            };
            let serve_row = row.iter().any(|c| c.contains("RATEWARDEN_"));
            let cell = row.get(default_at).map_or("", String::as_str);
            if !serve_row || stated_value(cell).is_none() {
                continue;
            }
            if let Err(e) = agrees(cell, &setting.default) {
                wrong.push(format!("line {line}: {flag}: {e}"));
            }
        }
    }
    assert!(wrong.is_empty(), "README.md:\n{}", wrong.join("\n"));
}

#[test]
fn a_wrong_default_in_a_table_is_found() {
    let table = "| flag | variable | default |\n| --- | --- | --- |\n| `--ping-limit N` | `RATEWARDEN_PING_LIMIT` | `4` |\n| `--store S` | `RATEWARDEN_STORE` | SQLite at `--db` |\n";
    let Table { header, rows } = tables(table).remove(0);
    assert_eq!(header, ["flag", "variable", "default"]);
    let limit = Stated::Value {
        text: "3".into(),
        gloss: None,
    };
    assert!(agrees(&rows[0].1[2], &limit).is_err());
    assert!(agrees("`\"3\"` (three)", &limit).is_ok());
    assert!(agrees(&rows[1].1[2], &Stated::Unset("SQLite at --db")).is_ok());
    assert!(agrees("`x`", &Stated::Unset("none")).is_err());
    assert!(agrees("`[]`", &Stated::Unset("none")).is_ok());
    assert_eq!(cells("| `a\\|b` | c |"), ["`a|b`", "c"]);
}
