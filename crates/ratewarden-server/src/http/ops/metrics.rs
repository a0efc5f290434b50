//! `GET /metrics`: the Prometheus text exposition of every metric the
//! service records through the `metrics` facade (docs/operations.md#metrics).
//!
//! The recorder is process-global: [`install`] sets it up once, before
//! the first [`ratewarden_limiter::Limiter`] registers its handles
//! (handles registered with no recorder installed stay no-ops).
//! Histograms (`*_duration_seconds`) are true Prometheus histograms with
//! the buckets of [`DURATION_BUCKETS`], in seconds. The exporter keeps
//! every recorded sample until an upkeep folds them into the buckets;
//! [`upkeep_until`] runs one every [`UPKEEP_INTERVAL`], whether or not
//! anyone scrapes.

use std::sync::OnceLock;
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use tokio_util::sync::CancellationToken;

use crate::http::problem::ApiError;
use crate::state::AppState;

/// The upper bounds of the duration histograms' buckets, in seconds:
/// 50 µs to 2.5 s.
pub const DURATION_BUCKETS: [f64; 15] = [
    0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1.0, 2.5,
];

static RECORDER: OnceLock<Option<PrometheusHandle>> = OnceLock::new();

/// Installs the Prometheus recorder as the process's metrics recorder,
/// once; later calls return the same handle. `None` when another
/// recorder was installed first (then `/metrics` answers 503).
pub fn install() -> Option<&'static PrometheusHandle> {
    RECORDER
        .get_or_init(|| {
            let installed = PrometheusBuilder::new()
                .set_buckets_for_metric(
                    Matcher::Suffix("_duration_seconds".into()),
                    &DURATION_BUCKETS,
                )
                .and_then(PrometheusBuilder::install_recorder);
            match installed {
                Ok(handle) => {
                    describe();
                    Some(handle)
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot install the Prometheus recorder; /metrics answers 503");
                    None
                }
            }
        })
        .as_ref()
}

/// How often [`upkeep_until`] folds the histograms' samples into their
/// buckets: one second, so that the samples held at any time are a
/// second's worth (two per decision, 8 bytes each).
pub const UPKEEP_INTERVAL: Duration = Duration::from_secs(1);

/// Runs the recorder's upkeep every [`UPKEEP_INTERVAL`] until `stop`
/// (nothing when no recorder is installed). Without it every histogram
/// sample stays in memory until the next scrape: about 40 bytes per
/// decision, without bound where no one scrapes `/metrics`
/// (metrics-exporter-prometheus, "Upkeep and maintenance": the caller of
/// `install_recorder` must run it). Each upkeep runs on a blocking
/// thread, so that folding a second's samples never holds up requests.
pub async fn upkeep_until(stop: CancellationToken) {
    let Some(handle) = RECORDER.get().and_then(Option::as_ref) else {
        return;
    };
    crate::startup::repeat_until(UPKEEP_INTERVAL, stop, || async {
        let _ = tokio::task::spawn_blocking(|| handle.run_upkeep()).await;
    })
    .await;
}

fn describe() {
    use metrics::{Unit, describe_counter, describe_gauge, describe_histogram};
    describe_counter!(
        "ratewarden_decisions_total",
        "Decisions by policy and outcome (allowed, denied, never, shadow_denied, failed_open)."
    );
    describe_histogram!(
        "ratewarden_decision_duration_seconds",
        Unit::Seconds,
        "The time of a whole check, store included."
    );
    describe_histogram!(
        "ratewarden_store_duration_seconds",
        Unit::Seconds,
        "The time of the store's atomic step of a check, by store."
    );
    describe_counter!(
        "ratewarden_store_errors_total",
        "Store calls that failed, by store."
    );
    describe_counter!(
        "ratewarden_store_failures_total",
        "Checks decided without the store, by handling (open: allowed; closed: refused)."
    );
    describe_counter!(
        "ratewarden_config_reloads_total",
        "Configuration reloads by result (ok, error)."
    );
    describe_gauge!(
        "ratewarden_keys",
        "Entries (keys with state, per policy) the store holds, where it can tell (memory)."
    );
    describe_gauge!(
        "ratewarden_keys_max",
        "The most entries the store holds (memory: --max-keys)."
    );
    describe_counter!(
        "ratewarden_keys_refused_total",
        "Checks refused because the store held its most entries and the check would add one \
         (memory); each was answered by its policy's failure mode."
    );
    describe_counter!(
        "ratewarden_audit_rows_pruned_total",
        "Audit-log rows pruned, by reason (retention: past --audit-retention; size: the oldest \
         past --audit-max-rows), where the store keeps one (SQLite)."
    );
    describe_counter!(
        "ratewarden_audit_rows_total",
        "Audit-log rows (api_calls) the store wrote since the start, where it keeps one (SQLite)."
    );
    describe_gauge!(
        "ratewarden_store_disk_bytes",
        "Bytes the store's files take now (SQLite: the database and its write-ahead log)."
    );
    describe_counter!(
        "ratewarden_admin_refusals_total",
        "Refused admin requests, by reason."
    );
    describe_gauge!("ratewarden_connections", "Open client connections (HTTP).");
    describe_counter!(
        "ratewarden_connections_closed_total",
        "Client connections ratewarden closed, by reason (header_timeout, idle_timeout, evicted, lingered)."
    );
    describe_counter!(
        "ratewarden_log_lines_dropped_total",
        "Log lines that could not be written (standard error closed or failing)."
    );
    describe_gauge!(
        "ratewarden_build_info",
        "Always 1; the labels give the version."
    );
    metrics::gauge!("ratewarden_build_info", "version" => env!("CARGO_PKG_VERSION")).set(1.0);
    // Series that only move on rare events exist from the start, at 0,
    // so that rates and alerts on them work before the first event.
    for result in ["ok", "error"] {
        metrics::counter!("ratewarden_config_reloads_total", "result" => result).absolute(0);
    }
    for reason in ["not_configured", "missing", "several", "wrong"] {
        metrics::counter!("ratewarden_admin_refusals_total", "reason" => reason).absolute(0);
    }
    for reason in ["header_timeout", "idle_timeout", "evicted", "lingered"] {
        metrics::counter!("ratewarden_connections_closed_total", "reason" => reason).absolute(0);
    }
}

/// The exposition, `text/plain; version=0.0.4`. Updates the series read
/// at scrape time (`ratewarden_keys`, `ratewarden_keys_max`,
/// `ratewarden_keys_refused_total`, `ratewarden_audit_rows_total`,
/// `ratewarden_audit_rows_pruned_total`, `ratewarden_log_lines_dropped_total`,
/// `ratewarden_store_disk_bytes`)
/// first.
pub async fn handle(State(state): State<AppState>) -> Response {
    let Some(handle) = RECORDER.get().and_then(Option::as_ref) else {
        return ApiError::service_unavailable("no metrics recorder is installed in this process")
            .into_response();
    };
    let store = state.limiter.store().kind();
    if let Some(entries) = state.limiter.store_entries().await {
        metrics::gauge!("ratewarden_keys", "store" => store).set(entries as f64);
    }
    if let Some(max) = state.limiter.store().max_entries() {
        metrics::gauge!("ratewarden_keys_max", "store" => store).set(max as f64);
    }
    if let Some(refused) = state.limiter.store().entries_refused() {
        metrics::counter!("ratewarden_keys_refused_total", "store" => store).absolute(refused);
    }
    if let Some(pruned) = state.limiter.store().audit_rows_pruned() {
        for (reason, rows) in [("retention", pruned.retention), ("size", pruned.size)] {
            metrics::counter!("ratewarden_audit_rows_pruned_total", "store" => store, "reason" => reason)
                .absolute(rows);
        }
    }
    if let Some(rows) = state.limiter.store().audit_rows() {
        metrics::counter!("ratewarden_audit_rows_total", "store" => store).absolute(rows);
    }
    metrics::counter!("ratewarden_log_lines_dropped_total")
        .absolute(crate::logging::dropped_lines());
    if let Some(bytes) = state.limiter.store().disk_bytes() {
        metrics::gauge!("ratewarden_store_disk_bytes", "store" => store).set(bytes as f64);
    }
    handle.run_upkeep();
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
        )],
        handle.render(),
    )
        .into_response()
}
