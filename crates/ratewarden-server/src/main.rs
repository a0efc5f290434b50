//! The `ratewarden` binary: parse flags, set up logs, run the subcommand.

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use ratewarden_config::{ADMIN_KEY_ENV, Settings, StoreConfig, TimeSource};
use ratewarden_core::{Clock, SystemClock};
use ratewarden_redis::{RedisClock, RedisStore};
use ratewarden_server::cli::{Command, ReplayArgs, ServeArgs};
use ratewarden_server::reload::Baseline;
use ratewarden_server::startup::{Application, open_store, shutdown_signal};

/// mimalloc: requests allocate on tokio threads and free on the SQLite
/// thread; glibc's malloc pays for that cross-thread traffic in locks and
/// consolidation (docs/design/sqlite-write-path.md#the-allocator).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = ratewarden_server::cli::parse();
    if let Err(e) = ratewarden_server::logging::init() {
        let _ = writeln!(std::io::stderr(), "error: {e}");
        return ExitCode::from(2);
    }
    let result = match cli.command {
        Command::Serve(args) => serve(args),
        Command::Replay(args) => replay(args),
        Command::CheckConfig(args) => return ratewarden_server::cli::check_config::run(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // Not eprintln!: it panics when standard error is closed.
            let _ = writeln!(std::io::stderr(), "error: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn replay(args: ReplayArgs) -> anyhow::Result<()> {
    let settings = args.into_settings().context("invalid configuration")?;
    Ok(ratewarden_replay::run(&settings, open_store)?)
}

fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let (settings, overrides) =
        ratewarden_server::envoy_setup::settings(args, std::env::var(ADMIN_KEY_ENV).ok())
            .context("invalid configuration")?;
    // At once, before the store and the listeners: a change of the files
    // from here on is applied when the watcher starts.
    let loaded = Baseline::take(&settings);
    let envoy_limits = settings.envoy.as_ref().map_or(0, |e| e.policies().count());
    // The Envoy rules' limits come last in the set; they are counted, not listed.
    let policies: Vec<String> = settings
        .policies
        .iter()
        .take(settings.policies.len() - envoy_limits)
        .map(|p| p.policy.to_string())
        .collect();
    tracing::info!(
        listen = %settings.listen,
        grpc_listen = ?settings.grpc_listen,
        envoy_config = ?settings.envoy_config,
        envoy_domains = settings.envoy.as_ref().map_or(0, |e| e.domain_count()),
        envoy_limits,
        store = %settings.store,
        config = ?settings.config_file,
        policies = ?policies,
        ping_key = ?settings.ping_key,
        on_store_error = settings.on_store_error.as_str(),
        time_source = ?settings.time_source,
        admin_key = if settings.admin_key.is_some() { "set" } else { "unset: admin actions are refused" },
        audit_retention_secs = settings.audit_retention.as_secs(),
        audit_sample = settings.audit_sample,
        audit_max_rows = settings.audit_max_rows,
        max_keys = settings.max_keys,
        max_body_bytes = settings.max_body_bytes,
        header_read_timeout_secs = settings.connections.header_read_timeout.as_secs(),
        idle_timeout_secs = settings.connections.idle_timeout.as_secs(),
        "starting ratewarden"
    );
    match (&settings.envoy_config, &settings.envoy) {
        (Some(path), Some(rules)) => ratewarden_server::envoy_setup::report_rules(path, rules),
        _ if settings.grpc_listen.is_some() => tracing::warn!(
            "gRPC is served but no Envoy rules are given (--envoy-config): every \
             ShouldRateLimit call is answered OK"
        ),
        _ => {}
    }
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    runtime.block_on(async {
        let clock = clock(&settings).await?;
        let app = Application::build(settings, clock).await?;
        tracing::info!(
            addr = %app.local_addr(),
            max_connections = app.connection_rules().max_connections,
            "listening (HTTP)"
        );
        if let Some(addr) = app.grpc_addr() {
            tracing::info!(%addr, "listening (gRPC: envoy.service.ratelimit.v3, grpc.health.v1)");
        }
        app.run_until_stopped_reloading(overrides, loaded, shutdown_signal())
            .await
            .context("server failed")
    })
}

/// The clock the service decides with: the system clock, or Redis `TIME`
/// followed every second (`--time-source redis`).
async fn clock(settings: &Settings) -> anyhow::Result<Arc<dyn Clock>> {
    let (TimeSource::Redis, StoreConfig::Redis(config)) = (settings.time_source, &settings.store)
    else {
        return Ok(Arc::new(SystemClock));
    };
    let store = Arc::new(RedisStore::new(config.clone()).context("invalid Redis URL")?);
    let clock = RedisClock::new();
    match clock.sync(&store).await {
        Ok(()) => tracing::info!(offset_nanos = clock.offset_nanos(), "following Redis TIME"),
        Err(e) => {
            tracing::warn!(error = %e, "cannot read Redis TIME yet; using the local clock until it answers")
        }
    }
    tokio::spawn(
        clock
            .clone()
            .follow(store, std::time::Duration::from_secs(1)),
    );
    Ok(Arc::new(clock))
}
