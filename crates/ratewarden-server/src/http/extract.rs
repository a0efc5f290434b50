//! Reading and validating request input (docs/semantics.md §6's validation table
//! and section 5's decisions). Every failure is an [`ApiError`].

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::{HeaderMap, header};
use ratewarden_http::key::form_decode;

use super::problem::ApiError;
use crate::state::AppState;

/// The longest `endpoint`, in Unicode scalar values (seed B, docs/semantics.md §6).
pub const MAX_ENDPOINT_CHARS: usize = 128;

/// A user id, 1 to 2^63 − 1, from ASCII digits with leading zeros allowed
/// (`05` is 5). `+5`, ` 5`, `1e3`, `0x10`, `-1`, `0` and non-ASCII digits
/// are invalid (docs/semantics.md).
pub fn parse_user_id(raw: &[u8]) -> Option<u64> {
    if raw.is_empty() || !raw.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let digits = std::str::from_utf8(raw).ok()?;
    let id = digits.parse::<u64>().ok()?;
    (1..=i64::MAX as u64).contains(&id).then_some(id)
}

/// The `X-User-Id` header as a user id.
///
/// # Errors
/// 400 when it is missing, repeated or not a valid user id.
pub fn user_id(headers: &HeaderMap) -> Result<u64, ApiError> {
    let mut values = headers.get_all("x-user-id").iter();
    let (Some(value), None) = (values.next(), values.next()) else {
        return Err(ApiError::bad_request(
            "send exactly one X-User-Id header with a positive integer user id",
        ));
    };
    parse_user_id(value.as_bytes()).ok_or_else(|| {
        ApiError::bad_request(format!(
            "X-User-Id '{}' is not a user id: use ASCII digits for a number from 1 to {}",
            value.as_bytes().escape_ascii(),
            i64::MAX
        ))
    })
}

/// The value of query parameter `name`, percent-decoded to bytes (`+` is a
/// space, as in HTML forms). `None` when absent.
///
/// # Errors
/// 422 when the parameter is given more than once (which one counts would
/// be ambiguous).
pub fn query_param(query: Option<&str>, name: &str) -> Result<Option<Vec<u8>>, ApiError> {
    let mut found = None;
    for pair in query.unwrap_or("").split('&') {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        if form_decode(k) != name.as_bytes() {
            continue;
        }
        if found.is_some() {
            return Err(ApiError::unprocessable(format!(
                "query parameter '{name}' is given more than once"
            )));
        }
        found = Some(form_decode(v));
    }
    Ok(found)
}

/// Every value of query parameter `name`, in order, percent-decoded (a
/// repeated `key` gives a key of several parts).
pub fn query_params(query: Option<&str>, name: &str) -> Vec<Vec<u8>> {
    query
        .unwrap_or("")
        .split('&')
        .filter(|pair| !pair.is_empty())
        .filter_map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (form_decode(k) == name.as_bytes()).then(|| form_decode(v))
        })
        .collect()
}

/// A valid `endpoint`: a non-empty string of at most
/// [`MAX_ENDPOINT_CHARS`] Unicode scalar values.
///
/// # Errors
/// 422 naming the rule that failed.
pub fn endpoint(raw: Option<&[u8]>) -> Result<String, ApiError> {
    let raw = raw.ok_or_else(|| ApiError::unprocessable("'endpoint' is required"))?;
    let text = std::str::from_utf8(raw)
        .map_err(|_| ApiError::unprocessable("'endpoint' must be UTF-8 text"))?;
    if text.is_empty() {
        return Err(ApiError::unprocessable("'endpoint' must not be empty"));
    }
    let chars = text.chars().count();
    if chars > MAX_ENDPOINT_CHARS {
        return Err(ApiError::unprocessable(format!(
            "'endpoint' is {chars} characters long; the maximum is {MAX_ENDPOINT_CHARS}"
        )));
    }
    Ok(text.to_owned())
}

/// A request body that is a JSON object. Rejections are problem details:
/// 413 over `--max-body-bytes`, 415 for a non-JSON content type or any
/// content coding, 400 for an empty body, invalid JSON, a member given
/// twice ([`super::json`]) or JSON that is not an object.
#[derive(Debug)]
pub struct JsonObject(pub serde_json::Map<String, serde_json::Value>);

/// The whole body, at most `--max-body-bytes` (413 problem details past
/// it; a declared length over the limit is refused at once, before
/// waiting for a body that may never come).
///
/// # Errors
/// 415 for a body in a content coding ([`no_content_coding`]), 413 for a
/// body too large, 400 for one that could not be read.
pub async fn body_bytes(request: Request, state: &AppState) -> Result<Bytes, ApiError> {
    no_content_coding(request.headers())?;
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > state.max_body_bytes as u64) {
        return Err(ApiError::payload_too_large(state.max_body_bytes));
    }
    Bytes::from_request(request, state)
        .await
        .map_err(|rejection| {
            if rejection.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::payload_too_large(state.max_body_bytes)
            } else {
                ApiError::bad_request("the request body could not be read")
            }
        })
}

/// Refuses a body in a content coding (`Content-Encoding: gzip`, say):
/// ratewarden reads bodies as sent, so a compressed one would be read as
/// garbage or, worse, as something else. `identity` and empty list
/// elements are no coding.
///
/// # Errors
/// 415 with `Accept-Encoding: identity` (RFC 9110 §15.5.16) naming the
/// coding.
pub fn no_content_coding(headers: &HeaderMap) -> Result<(), ApiError> {
    for line in headers.get_all(header::CONTENT_ENCODING) {
        let codings = line.as_bytes().split(|&b| b == b',');
        for coding in codings.map(<[u8]>::trim_ascii) {
            if !coding.is_empty() && !coding.eq_ignore_ascii_case(b"identity") {
                return Err(ApiError::unsupported_content_coding(format!(
                    "the body is in the content coding '{}'; send it uncompressed, without \
                     Content-Encoding",
                    coding.escape_ascii()
                )));
            }
        }
    }
    Ok(())
}

impl FromRequest<AppState> for JsonObject {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &AppState) -> Result<JsonObject, ApiError> {
        if let Some(raw) = request.headers().get(header::CONTENT_TYPE) {
            let ctype = raw.to_str().unwrap_or("").to_ascii_lowercase();
            let essence = ctype.split(';').next().unwrap_or("").trim();
            if essence != "application/json" && !essence.ends_with("+json") {
                return Err(ApiError::unsupported_media_type(format!(
                    "send the body as application/json, not '{}'",
                    raw.as_bytes().escape_ascii()
                )));
            }
        }
        let body = body_bytes(request, state).await?;
        if body.is_empty() {
            return Err(ApiError::bad_request("a JSON object body is required"));
        }
        match super::json::parse(&body) {
            Ok(serde_json::Value::Object(map)) => Ok(JsonObject(map)),
            Ok(_) => Err(ApiError::bad_request("the body must be a JSON object")),
            // Well-formed, but a member given twice.
            Err(e) if e.is_data() => Err(ApiError::bad_request(format!(
                "the body has no single meaning: {e}"
            ))),
            Err(e) => Err(ApiError::bad_request(format!(
                "the body is not valid JSON: {e}"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_ids_follow_spec_section_5() {
        for (raw, id) in [
            ("5", Some(5)),
            ("05", Some(5)),
            ("9223372036854775807", Some(i64::MAX as u64)),
        ] {
            assert_eq!(parse_user_id(raw.as_bytes()), id, "{raw}");
        }
        for raw in [
            "",
            "0",
            "000",
            "-1",
            "+5",
            " 5",
            "5 ",
            "1e3",
            "0x10",
            "1.5",
            "abc",
            "null",
            "9223372036854775808",
            "٣",
        ] {
            assert_eq!(parse_user_id(raw.as_bytes()), None, "{raw}");
        }
    }

    #[test]
    fn query_params_are_percent_decoded_and_must_be_unique() {
        let q = Some("a=1&key=%27%3B%20x+y&b");
        assert_eq!(query_param(q, "key").unwrap(), Some(b"'; x y".to_vec()));
        assert_eq!(query_param(q, "b").unwrap(), Some(Vec::new()));
        assert_eq!(query_param(q, "missing").unwrap(), None);
        assert_eq!(query_param(Some("k=%FF"), "k").unwrap(), Some(vec![0xff]));
        assert_eq!(query_param(Some("k=1&k=2"), "k").unwrap_err().status(), 422);
    }

    #[test]
    fn repeated_query_params_are_kept_in_order() {
        let q = Some("key=a&policy=p&key=b%20c&key=");
        assert_eq!(
            query_params(q, "key"),
            [b"a".to_vec(), b"b c".to_vec(), Vec::new()]
        );
        assert!(query_params(None, "key").is_empty());
    }

    #[test]
    fn endpoints_are_bounded_in_unicode_scalar_values() {
        assert!(endpoint(Some("e".repeat(128).as_bytes())).is_ok());
        assert!(endpoint(Some("é".repeat(128).as_bytes())).is_ok());
        assert_eq!(
            endpoint(Some("e".repeat(129).as_bytes()))
                .unwrap_err()
                .status(),
            422
        );
        assert_eq!(endpoint(Some(b"")).unwrap_err().status(), 422);
        assert_eq!(endpoint(None).unwrap_err().status(), 422);
    }
}
