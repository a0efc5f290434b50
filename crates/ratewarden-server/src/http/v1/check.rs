//! `POST /v1/check`: one check, or a batch of 1 to 64 decided all or
//! nothing.

use std::num::NonZeroU64;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use ratewarden_core::Key;
use ratewarden_limiter::{Check, Outcome};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;

use super::schema::{KeyParts, PolicyName};
use super::{CheckAnswer, MAX_CHECKS, key_from_parts};
use crate::http::allowed_json;
use crate::http::extract::JsonObject;
use crate::http::problem::{ApiError, Problem};
use crate::state::AppState;
use ratewarden_http::headers::outcome_headers;
use ratewarden_http::problem::{denial_detail, violated_policies};

/// One check.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"policy": "api", "key": "alice", "cost": 1}))]
#[allow(dead_code)] // documents the request shape; the handler reads JSON by hand
pub struct CheckRequest {
    /// The policy's name.
    pub policy: PolicyName,
    /// Whose counter.
    pub key: KeyParts,
    /// Units, at least 1 (default 1).
    #[serde(default = "one")]
    #[schema(minimum = 1)]
    pub cost: u64,
}

fn one() -> u64 {
    1
}

/// Several checks, decided all or nothing.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)] // documents the request shape; the handler reads JSON by hand
pub struct BatchRequest {
    /// 1 to 64 checks.
    #[schema(min_items = 1, max_items = 64)]
    pub checks: Vec<CheckRequest>,
}

/// The body of `POST /v1/check`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(untagged)]
#[allow(dead_code)] // documents the request shape; the handler reads JSON by hand
pub enum CheckBody {
    /// One check: its answer has the check's fields at the top level.
    One(CheckRequest),
    /// A batch: its answer has `allowed` and `results`.
    Batch(BatchRequest),
}

/// The answer of `POST /v1/check`: the check's fields for one check,
/// `{allowed, results}` for a batch.
#[derive(Debug, Serialize, ToSchema)]
#[serde(untagged)]
#[allow(dead_code)] // documents the answer's shape; `render` builds it
pub enum CheckResponse {
    /// One check.
    One(CheckAnswer),
    /// A batch.
    Batch(BatchAnswer),
}

/// A batch's answer.
#[derive(Debug, Serialize, ToSchema)]
pub struct BatchAnswer {
    /// Whether every check passed (the request may proceed).
    pub allowed: bool,
    /// One answer per check, in order.
    pub results: Vec<CheckAnswer>,
}

/// One check as parsed from the body.
struct Parsed {
    policy: String,
    key: Key,
    cost: NonZeroU64,
}

/// Decides the checks; 200 when allowed, 429 problem details when denied.
/// Every answer carries the rate-limit headers of the counted checks.
#[utoipa::path(
    post,
    path = "/v1/check",
    operation_id = "check",
    tag = "decisions",
    request_body(content = CheckBody, description = "One check, or {\"checks\": [...]} with 1 to 64 checks decided all or nothing"),
    responses(
        (status = 200, description = "Allowed: the check's answer (one check) or {allowed, results} (a batch); RateLimit-Policy, RateLimit and X-RateLimit-* headers", body = CheckResponse),
        (status = 400, description = "The body is not a JSON object", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No policy has that name", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "The body is larger than --max-body-bytes", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "The body is not declared as JSON, or is in a content coding (gzip, …: the answer carries Accept-Encoding: identity)", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "A missing or mistyped field, a cost below 1, an empty key, more than 64 checks", body = Problem, content_type = "application/problem+json"),
        (status = 429, description = "Denied (type …#quota-exceeded): violated-policies, the answers, Retry-After unless only checks that can never pass denied", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The store is unavailable and a policy fails closed", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn handle(
    State(state): State<AppState>,
    body: Result<JsonObject, ApiError>,
) -> Result<Response, ApiError> {
    let JsonObject(body) = body?;
    let (parsed, batch) = parse(&body)?;
    let checks: Vec<Check<'_>> = parsed
        .iter()
        .map(|p| Check {
            cost: p.cost,
            ..Check::one(&p.policy, &p.key)
        })
        .collect();
    let outcome = state.limiter.check(&checks).await?;
    Ok(render(&outcome, batch))
}

/// The answer to `outcome`: one check's fields, or `{allowed, results}`.
fn render(outcome: &Outcome, batch: bool) -> Response {
    let answers: Vec<CheckAnswer> = outcome.results.iter().map(CheckAnswer::new).collect();
    if outcome.allowed {
        return if batch {
            let body = BatchAnswer {
                allowed: true,
                results: answers,
            };
            allowed_json(&body, Some(outcome))
        } else {
            allowed_json(&answers[0], Some(outcome))
        };
    }
    let detail = denial_detail(outcome);
    let mut members = Map::new();
    members.insert(
        "violated-policies".into(),
        violated_policies(outcome).into(),
    );
    if batch {
        members.insert("allowed".into(), false.into());
        members.insert(
            "results".into(),
            serde_json::to_value(&answers).unwrap_or_default(),
        );
    } else if let Ok(Value::Object(fields)) = serde_json::to_value(&answers[0]) {
        members.extend(fields);
    }
    ApiError::quota_exceeded(detail, outcome.retry_after(), members)
        .with_headers(&outcome_headers(outcome))
        .into_response()
}

/// The checks of `body` and whether it is a batch.
fn parse(body: &Map<String, Value>) -> Result<(Vec<Parsed>, bool), ApiError> {
    let Some(checks) = body.get("checks") else {
        return Ok((vec![parse_check(body, "")?], false));
    };
    if let Some(other) = body.keys().find(|k| *k != "checks") {
        return Err(ApiError::unprocessable(format!(
            "unknown field '{other}': a batch is {{\"checks\": [...]}} and nothing else"
        )));
    }
    let Value::Array(items) = checks else {
        return Err(ApiError::unprocessable(format!(
            "'checks' must be an array of 1 to {MAX_CHECKS} checks"
        )));
    };
    if items.is_empty() || items.len() > MAX_CHECKS {
        return Err(ApiError::unprocessable(format!(
            "'checks' holds {} checks; a batch holds 1 to {MAX_CHECKS}",
            items.len()
        )));
    }
    let parsed = items
        .iter()
        .enumerate()
        .map(|(i, item)| match item {
            Value::Object(check) => parse_check(check, &format!("checks[{i}].")),
            _ => Err(ApiError::unprocessable(format!(
                "'checks[{i}]' must be an object {{\"policy\": …, \"key\": …}}"
            ))),
        })
        .collect::<Result<_, _>>()?;
    Ok((parsed, true))
}

/// A JSON number that is a whole number (`1`, and `1.0` as JSON Schema's
/// `integer` has it), up to what a double holds exactly (2^53) when
/// written with a fraction.
fn whole_number(v: &Value) -> Option<u64> {
    const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53
    v.as_u64().or_else(|| {
        v.as_f64()
            .filter(|f| f.fract() == 0.0 && (0.0..=EXACT).contains(f))
            .map(|f| f as u64)
    })
}

/// One check object; `at` prefixes field names in messages (`checks[2].`).
fn parse_check(check: &Map<String, Value>, at: &str) -> Result<Parsed, ApiError> {
    if let Some(other) = check
        .keys()
        .find(|k| !["policy", "key", "cost"].contains(&k.as_str()))
    {
        return Err(ApiError::unprocessable(format!(
            "unknown field '{at}{other}': a check has policy, key and cost"
        )));
    }
    let policy = match check.get("policy") {
        Some(Value::String(p)) if !p.is_empty() => p.clone(),
        Some(Value::String(_)) => {
            return Err(ApiError::unprocessable(format!(
                "'{at}policy' must not be empty"
            )));
        }
        None => return Err(ApiError::unprocessable(format!("'{at}policy' is required"))),
        Some(_) => {
            return Err(ApiError::unprocessable(format!(
                "'{at}policy' must be a string"
            )));
        }
    };
    let field = format!("{at}key");
    let parts: Vec<Vec<u8>> = match check.get("key") {
        Some(Value::String(k)) => vec![k.as_bytes().to_vec()],
        Some(Value::Array(parts)) => parts
            .iter()
            .enumerate()
            .map(|(i, p)| match p {
                Value::String(s) => Ok(s.as_bytes().to_vec()),
                _ => Err(ApiError::unprocessable(format!(
                    "'{field}[{i}]' must be a string"
                ))),
            })
            .collect::<Result<_, _>>()?,
        None => return Err(ApiError::unprocessable(format!("'{field}' is required"))),
        Some(_) => {
            return Err(ApiError::unprocessable(format!(
                "'{field}' must be a string or an array of strings"
            )));
        }
    };
    let key = key_from_parts(&field, &parts)?;
    let cost = match check.get("cost") {
        None => NonZeroU64::MIN,
        Some(v) => whole_number(v).and_then(NonZeroU64::new).ok_or_else(|| {
            ApiError::unprocessable(format!(
                "'{at}cost' must be a whole number of at least 1, not {v}"
            ))
        })?,
    };
    Ok(Parsed { policy, key, cost })
}
