//! The values of the IETF draft's `RateLimit-Policy` and `RateLimit`
//! fields (draft-ietf-httpapi-ratelimit-headers-10), for every interface
//! that sends them (HTTP responses, Envoy's `response_headers_to_add`):
//! one list item per policy, items comma-separated on one line (proxies
//! such as nginx 1.22 keep only a field's first line).

/// One policy's item.
#[derive(Debug, Clone, Copy)]
pub struct FieldItem<'a> {
    /// The policy's name (a structured-field string: quoted, `\` and `"`
    /// escaped, characters outside printable ASCII left out).
    pub name: &'a str,
    /// `q`: the quota, in units per window.
    pub quota: u64,
    /// `w`: the window, in whole seconds (at least 1).
    pub window_secs: u64,
    /// `r`: the units that could still pass now.
    pub remaining: u64,
    /// `t`: seconds until the quota resets, rounded up.
    pub reset_secs: u64,
}

/// `("\"a\";q=10;w=60, …", "\"a\";r=4;t=12, …")`: the `RateLimit-Policy`
/// and `RateLimit` values of `items`, in order; `None` when there is none.
pub fn field_values<'a>(
    items: impl IntoIterator<Item = FieldItem<'a>, IntoIter: Clone>,
) -> Option<(String, String)> {
    let items = items.into_iter();
    let mut policies = String::with_capacity(48);
    let mut limits = String::with_capacity(48);
    push_policy_field(&mut policies, items.clone());
    push_limit_field(&mut limits, items);
    (!policies.is_empty()).then_some((policies, limits))
}

/// Appends the `RateLimit-Policy` value of `items` to `out`:
/// `"<name>";q=<quota>;w=<window secs, at least 1>`, comma-separated.
pub fn push_policy_field<'a>(out: &mut String, items: impl IntoIterator<Item = FieldItem<'a>>) {
    push_field(out, items, |i| {
        [(";q=", i.quota), (";w=", i.window_secs.max(1))]
    });
}

/// Appends the `RateLimit` value of `items` to `out`:
/// `"<name>";r=<remaining>;t=<secs until reset>`, comma-separated.
pub fn push_limit_field<'a>(out: &mut String, items: impl IntoIterator<Item = FieldItem<'a>>) {
    push_field(out, items, |i| {
        [(";r=", i.remaining), (";t=", i.reset_secs)]
    });
}

/// One list item per item: its name, then its two parameters.
fn push_field<'a>(
    out: &mut String,
    items: impl IntoIterator<Item = FieldItem<'a>>,
    parameters: impl Fn(&FieldItem<'a>) -> [(&'static str, u64); 2],
) {
    // itoa, not `write!`: these are built for every answer.
    let mut n = itoa::Buffer::new();
    for (i, item) in items.into_iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        push_sf_string(out, item.name);
        for (label, value) in parameters(&item) {
            out.push_str(label);
            out.push_str(n.format(value));
        }
    }
}

/// Appends `name` as a structured-field string (RFC 8941).
fn push_sf_string(out: &mut String, name: &str) {
    out.push('"');
    for c in name.chars().filter(|c| (' '..='~').contains(c)) {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_are_comma_separated_with_names_escaped() {
        let item = |name, quota, remaining| FieldItem {
            name,
            quota,
            window_secs: 0,
            remaining,
            reset_secs: 7,
        };
        let (policy, limit) = field_values([item("a", 10, 4), item("b\"\\é", 3, 0)]).unwrap();
        assert_eq!(policy, r#""a";q=10;w=1, "b\"\\";q=3;w=1"#);
        assert_eq!(limit, r#""a";r=4;t=7, "b\"\\";r=0;t=7"#);
        assert!(field_values([]).is_none());
    }
}
