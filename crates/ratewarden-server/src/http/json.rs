//! Every JSON body the server reads, read one way: a member given twice
//! in one object is refused, naming it, wherever it is.
//!
//! RFC 8259 §4 leaves duplicate names' meaning to the reader, and readers
//! differ: serde_json's `Value` keeps the last, other parsers the first
//! or both. `{"policy":"api","policy":"logins"}` would be decided under
//! `logins` here and might be logged, audited or checked by a gateway in
//! front under `api`, so it has no single meaning and is refused with 400.

use std::fmt;

use serde::de::{DeserializeSeed, Error as _, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// `body` as one JSON value (anything after it but whitespace is an
/// error).
///
/// # Errors
/// serde_json's message with line and column: invalid JSON, or a member
/// given twice in one object (`the member 'policy' is given more than once,
/// at /checks/0/policy`).
pub fn parse(body: &[u8]) -> Result<Value, serde_json::Error> {
    let mut deserializer = serde_json::Deserializer::from_slice(body);
    let value = Strict { at: &Pointer::Root }.deserialize(&mut deserializer)?;
    deserializer.end()?;
    Ok(value)
}

/// Where a value is, as a JSON Pointer (RFC 6901), built only when an
/// error names it.
enum Pointer<'a> {
    Root,
    Member(&'a Pointer<'a>, &'a str),
    Index(&'a Pointer<'a>, usize),
}

impl fmt::Display for Pointer<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Pointer::Root => Ok(()),
            Pointer::Member(parent, name) => {
                write!(f, "{parent}/{}", name.replace('~', "~0").replace('/', "~1"))
            }
            Pointer::Index(parent, i) => write!(f, "{parent}/{i}"),
        }
    }
}

/// A value at `at`, read with every object's members checked.
struct Strict<'a> {
    at: &'a Pointer<'a>,
}

impl<'de> DeserializeSeed<'de> for Strict<'_> {
    type Value = Value;

    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Strict<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        // JSON has no NaN or infinity: serde_json never gives one here.
        Ok(Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(64));
        while let Some(item) = seq.next_element_seed(Strict {
            at: &Pointer::Index(self.at, items.len()),
        })? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut members: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(name) = members.next_key::<String>()? {
            let at = Pointer::Member(self.at, &name);
            if object.contains_key(&name) {
                return Err(A::Error::custom(format_args!(
                    "the member '{name}' is given more than once, at {at}"
                )));
            }
            let value = members.next_value_seed(Strict { at: &at })?;
            object.insert(name, value);
        }
        Ok(Value::Object(object))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_json_reads_as_serde_json_reads_it() {
        for text in [
            r#"{"policy":"api","key":["a","b"],"cost":1}"#,
            r#"{"a":{"b":[1,-2,3.5,1e300,true,false,null,"x\u00e9"]},"c":{}}"#,
            "[]",
            "  17 ",
            r#""text""#,
            r#"{"":1,"a/b~c":2}"#,
            r#"{"n":18446744073709551615,"m":-9223372036854775808}"#,
        ] {
            let expected: Value = serde_json::from_str(text).unwrap();
            assert_eq!(parse(text.as_bytes()).unwrap(), expected, "{text}");
        }
    }

    #[test]
    fn a_member_given_twice_is_refused_naming_it_and_where() {
        for (text, member, at) in [
            (
                r#"{"policy":"api","policy":"logins","key":"k"}"#,
                "policy",
                "/policy",
            ),
            (
                r#"{"checks":[{"policy":"a","key":"k","key":"j"}]}"#,
                "key",
                "/checks/0/key",
            ),
            (r#"{"a":{"b":{"c":1,"c":1}}}"#, "c", "/a/b/c"),
            (r#"{"x/y":1,"x/y":2}"#, "x/y", "/x~1y"),
            (r#"{"\u0070olicy":"a","policy":"b"}"#, "policy", "/policy"),
        ] {
            let e = parse(text.as_bytes()).unwrap_err().to_string();
            assert!(
                e.contains(&format!(
                    "the member '{member}' is given more than once, at {at}"
                )),
                "{text}: {e}"
            );
            assert!(e.contains("line 1 column"), "{text}: {e}");
        }
    }

    #[test]
    fn the_same_name_in_different_objects_is_fine() {
        let text = r#"{"checks":[{"policy":"a","key":"k"},{"policy":"b","key":"k"}]}"#;
        assert!(parse(text.as_bytes()).is_ok());
    }

    #[test]
    fn trailing_text_and_deep_nesting_are_errors_not_panics() {
        assert!(parse(br#"{"a":1} x"#).is_err());
        assert!(parse(br#"{"a":1}{"a":2}"#).is_err());
        let deep = "[".repeat(100_000);
        assert!(parse(deep.as_bytes()).is_err());
        let deep_objects = r#"{"a":"#.repeat(100_000);
        assert!(parse(deep_objects.as_bytes()).is_err());
    }
}
