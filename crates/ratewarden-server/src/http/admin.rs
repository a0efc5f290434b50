//! The admin key check shared by every admin route: fail closed (no key
//! configured refuses everything), exactly one `X-Admin-Key` header,
//! compared in constant time. Every admin action is logged; refused
//! attempts are counted (`ratewarden_admin_refusals_total{reason}`) and
//! logged once, then summarised every [`REFUSAL_SUMMARY`] (a flood of
//! guesses cannot flood the log); never with the key's value.

use std::net::SocketAddr;
use std::sync::LazyLock;
use std::time::Duration;

use axum::http::HeaderMap;
use ratewarden_limiter::LogSummary;
use subtle::ConstantTimeEq;

use super::problem::ApiError;
use crate::state::AppState;

/// How often a run of refused admin requests is summarised in the log.
pub const REFUSAL_SUMMARY: Duration = Duration::from_secs(10);

static REFUSALS: LazyLock<LogSummary> =
    LazyLock::new(|| LogSummary::new("admin request refused", REFUSAL_SUMMARY));

/// Logs the refusal summary that is due ([`LogSummary::tick`]); the
/// service calls it every second.
pub fn tick_logs() {
    REFUSALS.tick();
}

/// `Ok` when the request carries the admin key; else 403, logged with the
/// client's address, the action tried and why it was refused.
///
/// # Errors
/// [`ApiError::forbidden`] when no key is configured, none or several
/// were sent, or the one sent is wrong.
pub fn authorize(
    state: &AppState,
    headers: &HeaderMap,
    peer: SocketAddr,
    action: &str,
) -> Result<(), ApiError> {
    let refused = |reason: &'static str, detail: &'static str| {
        let label = match reason {
            "no admin key configured" => "not_configured",
            "no X-Admin-Key" => "missing",
            "several X-Admin-Key headers" => "several",
            _ => "wrong",
        };
        metrics::counter!("ratewarden_admin_refusals_total", "reason" => label).increment(1);
        REFUSALS.record(&format_args!("{reason} from {peer} ({action})"));
        Err(ApiError::forbidden(detail))
    };
    let Some(expected) = &state.admin_key else {
        return refused(
            "no admin key configured",
            "admin actions are disabled: no admin key is configured on the server",
        );
    };
    let mut sent = headers.get_all("x-admin-key").iter();
    match (sent.next(), sent.next()) {
        (Some(key), None) if bool::from(expected.as_bytes().ct_eq(key.as_bytes())) => Ok(()),
        (None, _) => refused("no X-Admin-Key", "an X-Admin-Key header is required"),
        (Some(_), Some(_)) => refused(
            "several X-Admin-Key headers",
            "send exactly one X-Admin-Key header",
        ),
        (Some(_), None) => refused("wrong X-Admin-Key", "the X-Admin-Key is not valid"),
    }
}
