//! The protobuf JSON form of `RateLimitRequest` and `RateLimitResponse`
//! (proto3's JSON mapping, as envoyproxy/ratelimit's `POST /json` speaks
//! it): field names in lowerCamelCase (the proto names are accepted too),
//! enums by name (numbers accepted), integers as numbers or strings,
//! durations as `"42s"`, fields at their default left out. The types
//! carry their OpenAPI schemas (utoipa).

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::{
    Entry, RateLimitOverride,
};
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use envoy_types::pb::google::protobuf::UInt64Value;
use ratewarden_config::envoy::Unit;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// `RateLimitRequest`: a domain and its descriptors.
///
/// The schema documents the common form; protobuf JSON also takes the
/// proto field names (`hits_addend`), integers as strings and enums by
/// number. It bounds a descriptor to 4 entries of 512 characters, which
/// always fit the 4096 bytes a counter's key may hold (the server takes
/// more, shorter entries too).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(
    as = EnvoyRateLimitRequest,
    example = json!({"domain": "edge", "descriptors": [{"entries": [{"key": "remote_address", "value": "10.0.0.1"}]}]})
)]
pub struct JsonRequest {
    /// The rules' domain; must not be empty.
    #[schema(value_type = String, required = true, min_length = 1)]
    domain: Option<String>,
    /// At least one.
    #[schema(value_type = Vec<JsonDescriptor>, required = true, min_items = 1)]
    descriptors: Option<Vec<JsonDescriptor>>,
    /// Units each descriptor costs (0 or absent: 1).
    #[serde(rename = "hitsAddend", alias = "hits_addend")]
    #[schema(rename = "hitsAddend", value_type = Option<u32>, maximum = 4_294_967_295_f64)]
    hits_addend: Option<U64>,
}

/// `RateLimitDescriptor`: entries, and optionally its own limit and cost.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = EnvoyDescriptor)]
pub struct JsonDescriptor {
    /// `(key, value)` pairs, matched level by level against the rules.
    #[schema(value_type = Option<Vec<JsonEntry>>, max_items = 4)]
    entries: Option<Vec<JsonEntry>>,
    /// A fixed window given by the request (the domain must exist).
    limit: Option<JsonOverride>,
    /// This descriptor's cost; 0 reads without charging.
    #[serde(rename = "hitsAddend", alias = "hits_addend")]
    #[schema(rename = "hitsAddend", value_type = Option<u64>)]
    hits_addend: Option<U64>,
    /// `isNegativeHits` (giving quota back) is not supported: `true` is
    /// refused with 400, so the schema leaves it out.
    #[serde(rename = "isNegativeHits", alias = "is_negative_hits")]
    #[schema(ignore)]
    is_negative_hits: Option<bool>,
}

/// One descriptor entry.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = EnvoyDescriptorEntry)]
pub struct JsonEntry {
    #[schema(value_type = Option<String>, max_length = 512)]
    key: Option<String>,
    #[schema(value_type = Option<String>, max_length = 512)]
    value: Option<String>,
}

/// `RateLimitOverride`: a limit given by the request.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = EnvoyLimitOverride)]
pub struct JsonOverride {
    #[serde(rename = "requestsPerUnit", alias = "requests_per_unit")]
    #[schema(rename = "requestsPerUnit", value_type = Option<u32>, maximum = 4_294_967_295_f64)]
    requests_per_unit: Option<U64>,
    /// `SECOND` … `YEAR` (or its number); required: a limit needs a unit.
    #[schema(value_type = UnitName, required = true)]
    unit: Option<EnumValue>,
}

/// An unsigned integer as a number or a string of digits; 32-bit fields
/// read it with [`U64::get_u32`].
#[derive(Debug, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum U64 {
    /// As a number.
    Number(u64),
    /// As a string.
    Text(String),
    /// As a number with a fraction or exponent that is a whole number
    /// (`2.0`, `1e3`), as protobuf JSON allows.
    Float(f64),
}

impl U64 {
    fn get(&self, field: &str) -> Result<u64, String> {
        match self {
            U64::Number(n) => Ok(*n),
            U64::Text(s) => s.parse().map_err(|_| not_a_number(field, s)),
            U64::Float(f) => whole(*f, u64::MAX as f64)
                .map(|n| n as u64)
                .ok_or_else(|| not_a_number(field, &f.to_string())),
        }
    }

    fn get_u32(&self, field: &str) -> Result<u32, String> {
        let n = self.get(field)?;
        u32::try_from(n).map_err(|_| not_a_number(field, &n.to_string()))
    }
}

/// serde's message in protobuf JSON's terms, without this module's type
/// names (serde's own would say "untagged enum U64").
fn json_error(e: serde_json::Error) -> String {
    const TERMS: [(&str, &str); 6] = [
        (
            "data did not match any variant of untagged enum U64",
            "expected a whole number (a number or a string of digits)",
        ),
        (
            "data did not match any variant of untagged enum EnumValue",
            "expected a unit name (SECOND, MINUTE, HOUR, DAY, WEEK, MONTH, YEAR) or its number",
        ),
        ("struct JsonRequest", "a RateLimitRequest object"),
        ("struct JsonDescriptor", "a descriptor object"),
        ("struct JsonEntry", "an entry object"),
        ("struct JsonOverride", "a limit object"),
    ];
    let mut text = e.to_string();
    for (from, to) in TERMS {
        text = text.replace(from, to);
    }
    text
}

/// `f` when it is a whole number from 0 to `max`.
fn whole(f: f64, max: f64) -> Option<f64> {
    (f.fract() == 0.0 && (0.0..=max).contains(&f)).then_some(f)
}

fn not_a_number(field: &str, s: &str) -> String {
    format!("{field}: '{s}' is not a whole number in range")
}

/// An enum by name or number.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum EnumValue {
    /// By number.
    Number(i32),
    /// By name.
    Name(String),
}

/// `RateLimitResponse`.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = EnvoyRateLimitResponse)]
pub struct JsonResponse {
    /// `OVER_LIMIT` when any descriptor is over its limit.
    overall_code: CodeName,
    /// One per descriptor, in order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    statuses: Vec<JsonStatus>,
    /// `RateLimit-Policy` and `RateLimit`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    response_headers_to_add: Vec<JsonHeader>,
}

/// `DescriptorStatus`.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = EnvoyDescriptorStatus)]
pub struct JsonStatus {
    code: CodeName,
    /// Absent when no limit applies.
    #[serde(skip_serializing_if = "Option::is_none")]
    current_limit: Option<JsonLimit>,
    /// Absent when 0; 4294967295 for an unlimited descriptor.
    #[serde(skip_serializing_if = "is_zero")]
    limit_remaining: u32,
    /// Whole seconds, e.g. `"42s"`; present on every limited status.
    #[serde(skip_serializing_if = "Option::is_none")]
    duration_until_reset: Option<String>,
}

/// `RateLimit`: the limit that applied.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = EnvoyLimit)]
pub struct JsonLimit {
    #[serde(skip_serializing_if = "String::is_empty")]
    name: String,
    #[serde(skip_serializing_if = "is_zero")]
    requests_per_unit: u32,
    /// Absent for a window that is not one unit (UNKNOWN).
    #[serde(skip_serializing_if = "Option::is_none")]
    unit: Option<UnitName>,
}

/// A header for Envoy to add to the response.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = EnvoyHeader)]
pub struct JsonHeader {
    key: String,
    value: String,
}

/// `Code` by name.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum CodeName {
    /// Never sent.
    Unknown,
    /// Within the limit.
    Ok,
    /// Over the limit.
    OverLimit,
}

/// `Unit` by name.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
#[allow(missing_docs)]
pub enum UnitName {
    Second,
    Minute,
    Hour,
    Day,
    Week,
    Month,
    Year,
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's skip_serializing_if signature
fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// Parses a `RateLimitRequest` in protobuf JSON.
///
/// # Errors
/// A message naming the problem (JSON syntax with line and column, an
/// unknown field, a value of the wrong type or out of range, an unknown
/// unit name).
pub fn parse_request(body: &[u8]) -> Result<RateLimitRequest, String> {
    // serde would also read a struct from a list of its fields' values
    // (`["d", [...], 0]`), which protobuf JSON does not allow.
    if body.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Err("the body must be a JSON object (a RateLimitRequest)".into());
    }
    let request: JsonRequest = serde_json::from_slice(body).map_err(json_error)?;
    let mut descriptors = Vec::new();
    for (i, d) in request
        .descriptors
        .unwrap_or_default()
        .into_iter()
        .enumerate()
    {
        let limit = match d.limit {
            None => None,
            Some(o) => {
                let unit = match o.unit {
                    None => 0,
                    Some(EnumValue::Number(n)) => n,
                    Some(EnumValue::Name(name)) => match name.as_str() {
                        "UNKNOWN" => 0,
                        other => Unit::TIMED
                            .into_iter()
                            .find(|u| u.as_str() == other)
                            .map(|u| u as i32)
                            .ok_or_else(|| {
                                format!("descriptors[{i}].limit.unit: '{name}' is not a unit name")
                            })?,
                    },
                };
                let requests_per_unit = o
                    .requests_per_unit
                    .map(|n| n.get_u32(&format!("descriptors[{i}].limit.requestsPerUnit")))
                    .transpose()?
                    .unwrap_or(0);
                Some(RateLimitOverride {
                    requests_per_unit,
                    unit,
                })
            }
        };
        let hits_addend = d
            .hits_addend
            .map(|h| h.get(&format!("descriptors[{i}].hitsAddend")))
            .transpose()?
            .map(|value| UInt64Value { value });
        descriptors.push(RateLimitDescriptor {
            entries: d
                .entries
                .unwrap_or_default()
                .into_iter()
                .map(|e| Entry {
                    key: e.key.unwrap_or_default(),
                    value: e.value.unwrap_or_default(),
                })
                .collect(),
            limit,
            hits_addend,
            is_negative_hits: d.is_negative_hits.unwrap_or(false),
        });
    }
    Ok(RateLimitRequest {
        domain: request.domain.unwrap_or_default(),
        descriptors,
        hits_addend: request
            .hits_addend
            .map(|h| h.get_u32("hitsAddend"))
            .transpose()?
            .unwrap_or(0),
    })
}

/// A `RateLimitResponse` in protobuf JSON.
pub fn render_response(response: &RateLimitResponse) -> JsonResponse {
    JsonResponse {
        overall_code: code_name(response.overall_code),
        statuses: response
            .statuses
            .iter()
            .map(|s| JsonStatus {
                code: code_name(s.code),
                current_limit: s.current_limit.as_ref().map(|l| JsonLimit {
                    name: l.name.clone(),
                    requests_per_unit: l.requests_per_unit,
                    unit: Unit::from_number(l.unit).and_then(unit_name),
                }),
                limit_remaining: s.limit_remaining,
                duration_until_reset: s.duration_until_reset.map(|d| format!("{}s", d.seconds)),
            })
            .collect(),
        response_headers_to_add: response
            .response_headers_to_add
            .iter()
            .map(|h| JsonHeader {
                key: h.key.clone(),
                value: h.value.clone(),
            })
            .collect(),
    }
}

fn code_name(code: i32) -> CodeName {
    match Code::try_from(code) {
        Ok(Code::Ok) => CodeName::Ok,
        Ok(Code::OverLimit) => CodeName::OverLimit,
        _ => CodeName::Unknown,
    }
}

fn unit_name(unit: Unit) -> Option<UnitName> {
    Some(match unit {
        Unit::Unknown => return None,
        Unit::Second => UnitName::Second,
        Unit::Minute => UnitName::Minute,
        Unit::Hour => UnitName::Hour,
        Unit::Day => UnitName::Day,
        Unit::Week => UnitName::Week,
        Unit::Month => UnitName::Month,
        Unit::Year => UnitName::Year,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_field_spellings_numbers_as_strings_and_enum_names_are_read() {
        let r = parse_request(
            br#"{"domain":"d","hits_addend":"2","descriptors":[
                {"entries":[{"key":"k","value":"v"},{"key":"only"}],"hitsAddend":"0"},
                {"entries":[],"limit":{"requests_per_unit":5,"unit":"MINUTE"},"isNegativeHits":false},
                {"limit":{"requestsPerUnit":"7","unit":4}}]}"#,
        )
        .unwrap();
        assert_eq!(r.domain, "d");
        assert_eq!(r.hits_addend, 2);
        assert_eq!(r.descriptors[0].entries[1].value, "");
        assert_eq!(r.descriptors[0].hits_addend, Some(UInt64Value { value: 0 }));
        assert_eq!(
            r.descriptors[1].limit,
            Some(RateLimitOverride {
                requests_per_unit: 5,
                unit: 2
            })
        );
        assert_eq!(
            r.descriptors[2].limit,
            Some(RateLimitOverride {
                requests_per_unit: 7,
                unit: 4
            })
        );
    }

    #[test]
    fn mistakes_are_refused_with_a_message() {
        for (body, needle) in [
            (
                &br#"{"domain":"d","colour":1}"#[..],
                "unknown field `colour`",
            ),
            (br#"{"domain":"d","hitsAddend":-1}"#, ""),
            (br#"{"domain":"d","hitsAddend":"x"}"#, "hitsAddend: 'x'"),
            (br#"{"domain":"d","hitsAddend":2.5}"#, "hitsAddend: '2.5'"),
            (br#"{"domain":"d","hitsAddend":5e9}"#, "hitsAddend"),
            (
                br#"{"descriptors":[{"limit":{"unit":"FORTNIGHT"}}]}"#,
                "'FORTNIGHT' is not a unit name",
            ),
            (br#"{"domain":"d""#, "EOF"),
            (br#"[]"#, "must be a JSON object"),
            (
                br#"  ["d",[{"entries":[{"key":"k","value":"v"}]}],0]"#,
                "must be a JSON object",
            ),
            (
                br#"{"domain":"d","hitsAddend":{"value":1}}"#,
                "expected a whole number",
            ),
            (
                br#"{"domain":"d","descriptors":[{"limit":{"unit":[1]}}]}"#,
                "expected a unit name",
            ),
            (br#"{"domain":"d","descriptors":7}"#, "invalid type"),
        ] {
            let err = parse_request(body).unwrap_err();
            assert!(err.contains(needle), "{err}");
            assert!(
                !["U32", "U64", "EnumValue", "Json"]
                    .iter()
                    .any(|internal| err.contains(internal)),
                "{err}"
            );
        }
    }
}
