//! `GET /v1/policies`: the loaded policies and their settings.

use axum::Json;
use axum::extract::State;
use ratewarden_core::{Algorithm, Mode};
use ratewarden_limiter::PolicyDef;
use serde::Serialize;
use utoipa::ToSchema;

use crate::state::AppState;

/// Every policy in force, in configuration order (`ping` and `check`
/// first).
#[derive(Debug, Serialize, ToSchema)]
pub struct Policies {
    /// The policies.
    pub policies: Vec<PolicyInfo>,
}

/// One policy's settings.
#[derive(Debug, Serialize, ToSchema)]
pub struct PolicyInfo {
    /// The name.
    #[schema(example = "api")]
    pub name: String,
    /// `fixed_window`, `sliding_log`, `sliding_window` or `gcra`.
    #[schema(example = "gcra")]
    pub algorithm: String,
    /// Units per window.
    pub limit: u64,
    /// The window, in milliseconds.
    pub window_ms: u64,
    /// GCRA: units that may pass at once (default: the limit); absent
    /// for other algorithms.
    pub burst: Option<u64>,
    /// Fixed window: whether denied attempts count.
    pub count_denied: bool,
    /// Shadow mode: decided and counted, never denying.
    pub shadow: bool,
    /// `open` or `closed`: what a decision does when the store is down.
    pub on_store_error: String,
    /// How a request seen by ratewarden itself becomes the key, e.g.
    /// `header:x-api-key`; empty when callers give the key.
    pub key: Vec<String>,
    /// Which requests it applies to; absent: all.
    pub r#match: Option<MatchInfo>,
}

/// A policy's `match`.
#[derive(Debug, Serialize, ToSchema)]
pub struct MatchInfo {
    /// Methods, uppercase; absent: any.
    pub methods: Option<Vec<String>>,
    /// The path pattern (`*` matches any run of characters); absent: any.
    pub path: Option<String>,
}

impl PolicyInfo {
    fn new(def: &PolicyDef) -> PolicyInfo {
        let policy = &def.policy;
        PolicyInfo {
            name: def.name().to_owned(),
            algorithm: policy.algorithm.as_str().to_owned(),
            limit: policy.quota.limit(),
            window_ms: u64::try_from(policy.quota.window().as_millis()).unwrap_or(u64::MAX),
            burst: (policy.algorithm == Algorithm::Gcra).then(|| policy.quota.burst()),
            count_denied: policy.counts_denied(),
            shadow: policy.mode == Mode::Shadow,
            on_store_error: def.on_store_error.as_str().to_owned(),
            key: def.key.iter().map(ToString::to_string).collect(),
            r#match: def.matcher.as_ref().map(|m| MatchInfo {
                methods: m.methods.clone(),
                path: m.path.as_ref().map(|p| p.as_str().to_owned()),
            }),
        }
    }
}

/// The loaded policies (after the latest reload).
#[utoipa::path(
    get,
    path = "/v1/policies",
    operation_id = "listPolicies",
    tag = "decisions",
    responses((status = 200, description = "Every policy in force", body = Policies))
)]
pub async fn handle(State(state): State<AppState>) -> Json<Policies> {
    let set = state.limiter.policies();
    Json(Policies {
        policies: set.iter().map(|d| PolicyInfo::new(d)).collect(),
    })
}
