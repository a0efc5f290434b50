//! Schemas of the API's small values, written out because they carry
//! bounds a derive cannot put on a newtype. They document what the
//! handlers accept; the handlers check it themselves (and name the field
//! in a 422).
//!
//! A key holds 4096 bytes in all, which a schema cannot say of several
//! parts: a key of one part is documented exactly (1 to 4096 characters:
//! bytes, for the ASCII text of headers and of the API tests), a key of
//! parts as at most four parts of at most 1024 characters, which always
//! fits, though the server also takes more, shorter parts.

use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, OneOfBuilder, Schema, Type};
use utoipa::{PartialSchema, ToSchema};

/// The regular expression of decimal numbers from 1 to `max` (given in
/// decimal, no leading zero), leading zeros allowed: for each digit of
/// `max`, the numbers that agree up to it and are smaller there, plus the
/// shorter numbers and `max` itself.
pub fn one_to(max: &str) -> String {
    let digits = max.as_bytes();
    let mut branches = Vec::new();
    if digits.len() > 1 {
        branches.push(format!("[1-9][0-9]{{0,{}}}", digits.len() - 2));
    }
    for (i, &d) in digits.iter().enumerate() {
        let low = if i == 0 { b'1' } else { b'0' };
        if d > low {
            let rest = digits.len() - i - 1;
            let tail = if rest > 0 {
                format!("[0-9]{{{rest}}}")
            } else {
                String::new()
            };
            branches.push(format!(
                "{}[{}-{}]{tail}",
                &max[..i],
                char::from(low),
                char::from(d - 1)
            ));
        }
    }
    branches.push(max.to_owned());
    format!("^0*({})$", branches.join("|"))
}

/// A user id as seed B takes it: ASCII digits for a number from 1 to
/// 2^63 − 1, leading zeros allowed.
pub struct UserId;

impl PartialSchema for UserId {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .pattern(Some(one_to(&i64::MAX.to_string())))
            .description(Some(
                "ASCII digits for a number from 1 to 9223372036854775807, leading zeros allowed",
            ))
            .into()
    }
}

impl ToSchema for UserId {}

fn string(min: usize, max: usize, description: &str) -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .min_length(Some(min))
        .max_length(Some(max))
        .description(Some(description))
}

/// A policy name: 1 to 64 characters of `[A-Za-z0-9_.-]`.
#[derive(Debug, serde::Deserialize)]
#[allow(dead_code)] // documents a value; handlers read JSON by hand
pub struct PolicyName(String);

impl PartialSchema for PolicyName {
    fn schema() -> RefOr<Schema> {
        string(1, 64, "A policy's name")
            .pattern(Some("^[A-Za-z0-9_.-]+$"))
            .into()
    }
}

impl ToSchema for PolicyName {}

/// One part of a key.
#[derive(Debug, serde::Deserialize)]
#[allow(dead_code)] // documents a value; handlers read JSON by hand
pub struct KeyPart(String);

impl PartialSchema for KeyPart {
    fn schema() -> RefOr<Schema> {
        string(1, 1024, "One part of a key").into()
    }
}

impl ToSchema for KeyPart {}

/// A key in a JSON body: a string (one part) or an array of parts (never
/// colliding with a joined string).
#[derive(Debug, serde::Deserialize)]
#[serde(untagged)]
#[allow(dead_code)] // documents a value; handlers read JSON by hand
pub enum KeyParts {
    /// One part.
    One(String),
    /// Parts in order.
    Parts(Vec<KeyPart>),
}

impl PartialSchema for KeyParts {
    fn schema() -> RefOr<Schema> {
        let one = string(1, 4096, "A key of one part");
        let parts = ArrayBuilder::new()
            .items(KeyPart::schema())
            .min_items(Some(1))
            .max_items(Some(4))
            .description(Some("A key of several parts, in order"));
        OneOfBuilder::new().item(one).item(parts).into()
    }
}

impl ToSchema for KeyParts {}

#[cfg(test)]
mod tests {
    use super::one_to;

    #[test]
    fn the_user_id_pattern_accepts_exactly_one_to_i64_max() {
        let re = one_to("9223372036854775807");
        assert!(re.starts_with("^0*("));
        // A small bound, checked by brute force against the rule.
        let small = one_to("305");
        let branches: Vec<&str> = small[4..small.len() - 2].split('|').collect();
        assert_eq!(
            branches,
            ["[1-9][0-9]{0,1}", "[1-2][0-9]{2}", "30[0-4]", "305"]
        );
    }
}
