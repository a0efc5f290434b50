//! [`policy`]: the `[[policies]]` tables of a configuration file, built
//! in code so that a test says what its policies are in one line each:
//!
//! ```text
//! policy("api").fixed_window(10, "1m").key(["literal:a"]).match_path("/api/*")
//! ```
//!
//! [`PolicyToml`] prints as the TOML a user would write (name, algorithm,
//! limit, window, then burst, shadow, on_store_error, key and match when
//! set); [`policies`] joins several into a file's text. Tests about the
//! TOML syntax itself keep writing it out.

use std::fmt;

/// A policy named `name`; its algorithm and quota come next.
pub fn policy(name: &str) -> Named {
    Named(name.to_owned())
}

/// The text of a configuration file holding `policies`, in order.
pub fn policies(policies: impl IntoIterator<Item = PolicyToml>) -> String {
    policies.into_iter().map(|p| p.to_string()).collect()
}

/// A policy with a name and no algorithm yet.
pub struct Named(String);

impl Named {
    /// `algorithm = "fixed_window"`, `limit` per `window` (as TOML writes
    /// a duration: `"1m"`, `"1h"`).
    pub fn fixed_window(self, limit: u64, window: &str) -> PolicyToml {
        self.algorithm("fixed_window", limit, window)
    }

    /// `algorithm = "sliding_log"`, `limit` per `window`.
    pub fn sliding_log(self, limit: u64, window: &str) -> PolicyToml {
        self.algorithm("sliding_log", limit, window)
    }

    /// `algorithm = "sliding_window"`, `limit` per `window`.
    pub fn sliding_window(self, limit: u64, window: &str) -> PolicyToml {
        self.algorithm("sliding_window", limit, window)
    }

    /// `algorithm = "gcra"`, `limit` per `window`.
    pub fn gcra(self, limit: u64, window: &str) -> PolicyToml {
        self.algorithm("gcra", limit, window)
    }

    fn algorithm(self, algorithm: &'static str, limit: u64, window: &str) -> PolicyToml {
        PolicyToml {
            name: self.0,
            algorithm,
            limit,
            window: window.to_owned(),
            burst: None,
            shadow: false,
            on_store_error: None,
            key: None,
            matching: None,
        }
    }
}

/// One `[[policies]]` table.
pub struct PolicyToml {
    name: String,
    algorithm: &'static str,
    limit: u64,
    window: String,
    burst: Option<u64>,
    shadow: bool,
    on_store_error: Option<String>,
    key: Option<Vec<String>>,
    matching: Option<Match>,
}

/// `match = { methods = [...], path = "..." }`, either part optional.
#[derive(Default)]
struct Match {
    methods: Option<Vec<String>>,
    path: Option<String>,
}

impl PolicyToml {
    /// `burst = burst` (GCRA).
    pub fn burst(mut self, burst: u64) -> PolicyToml {
        self.burst = Some(burst);
        self
    }

    /// `shadow = true`: decided and counted, never denying.
    pub fn shadow(mut self) -> PolicyToml {
        self.shadow = true;
        self
    }

    /// `on_store_error = "open"` or `"closed"`.
    pub fn on_store_error(mut self, mode: &str) -> PolicyToml {
        self.on_store_error = Some(mode.to_owned());
        self
    }

    /// `key = [parts]`: `"client_ip"`, `"header:NAME"`, `"literal:TEXT"`...
    pub fn key<'a>(mut self, parts: impl IntoIterator<Item = &'a str>) -> PolicyToml {
        self.key = Some(parts.into_iter().map(str::to_owned).collect());
        self
    }

    /// `match = { path = pattern }` (with the methods, if given).
    pub fn match_path(mut self, pattern: &str) -> PolicyToml {
        self.matching.get_or_insert_default().path = Some(pattern.to_owned());
        self
    }

    /// `match = { methods = [methods] }` (with the path, if given).
    pub fn match_methods<'a>(mut self, methods: impl IntoIterator<Item = &'a str>) -> PolicyToml {
        self.matching.get_or_insert_default().methods =
            Some(methods.into_iter().map(str::to_owned).collect());
        self
    }

    /// `match = {}`: every request.
    pub fn match_all(mut self) -> PolicyToml {
        self.matching.get_or_insert_default();
        self
    }
}

impl fmt::Display for PolicyToml {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "\n[[policies]]")?;
        writeln!(f, "name = {}", quote(&self.name))?;
        writeln!(f, "algorithm = {}", quote(self.algorithm))?;
        writeln!(f, "limit = {}", self.limit)?;
        writeln!(f, "window = {}", quote(&self.window))?;
        if let Some(burst) = self.burst {
            writeln!(f, "burst = {burst}")?;
        }
        if self.shadow {
            writeln!(f, "shadow = true")?;
        }
        if let Some(mode) = &self.on_store_error {
            writeln!(f, "on_store_error = {}", quote(mode))?;
        }
        if let Some(parts) = &self.key {
            writeln!(f, "key = {}", array(parts))?;
        }
        if let Some(matching) = &self.matching {
            let mut fields = Vec::new();
            if let Some(methods) = &matching.methods {
                fields.push(format!("methods = {}", array(methods)));
            }
            if let Some(path) = &matching.path {
                fields.push(format!("path = {}", quote(path)));
            }
            if fields.is_empty() {
                writeln!(f, "match = {{}}")?;
            } else {
                writeln!(f, "match = {{ {} }}", fields.join(", "))?;
            }
        }
        Ok(())
    }
}

/// `["a", "b"]`.
fn array(items: &[String]) -> String {
    let quoted: Vec<String> = items.iter().map(|item| quote(item)).collect();
    format!("[{}]", quoted.join(", "))
}

/// `text` as a TOML basic string.
fn quote(text: &str) -> String {
    assert!(
        !text.chars().any(char::is_control),
        "a control character in {text:?}: write this policy's TOML out"
    );
    format!("\"{}\"", text.replace('\\', "\\\\").replace('"', "\\\""))
}

#[test]
fn a_policy_prints_as_the_toml_a_user_writes() {
    let text = policies([
        policy("plain").sliding_window(2, "1h"),
        policy("every-key")
            .gcra(2, "1m")
            .burst(1)
            .shadow()
            .on_store_error("open")
            .key(["client_ip", "header:x-\"q\\"])
            .match_methods(["GET", "POST"])
            .match_path("/api/*"),
        policy("all").fixed_window(0, "1s").match_all(),
    ]);
    let expected = r#"
[[policies]]
name = "plain"
algorithm = "sliding_window"
limit = 2
window = "1h"

[[policies]]
name = "every-key"
algorithm = "gcra"
limit = 2
window = "1m"
burst = 1
shadow = true
on_store_error = "open"
key = ["client_ip", "header:x-\"q\\"]
match = { methods = ["GET", "POST"], path = "/api/*" }

[[policies]]
name = "all"
algorithm = "fixed_window"
limit = 0
window = "1s"
match = {}
"#;
    assert_eq!(text, expected);
}
