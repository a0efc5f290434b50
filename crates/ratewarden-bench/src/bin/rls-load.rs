//! `rls-load`: a closed-loop gRPC load of Envoy's rate limit service
//! (`envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit`), for
//! `scripts/bench-grpc.sh`, which runs it against ratewarden and against
//! limitador-server in one run (BENCHMARKS.md).
//!
//! ```text
//! rls-load --target http://127.0.0.1:8081 --domain bench --streams 64 \
//!     --keys 10000 --duration 10s [--warmup 2s] [--connections 4]
//! ```
//!
//! `--streams` tasks each keep one call in flight (so that many calls are
//! in flight at all times), spread round-robin over `--connections` HTTP/2
//! connections. Each call carries one descriptor with one entry,
//! `key` = `client-N`, `N` drawn uniformly from `0..--keys` by a seeded
//! RNG per task (the same sequence on every run and every target).
//!
//! It prints one line of `name=value` fields on stdout:
//!
//! ```text
//! decisions_per_sec=41234 p50_us=1480 p90_us=... p99_us=3210 p999_us=5120 max_us=...
//! calls=... ok=... over=... unknown=... errors=... warmup_errors=... elapsed_s=...
//! streams=64 connections=4 keys=10000 client_cpu_pct=... [server_cpu_pct=...]
//! [store_cpu_pct=...] machine_cpu_pct=... other_cpu_pct=... result=ok
//! ```
//!
//! Decisions are answers with `overall_code` OK or OVER_LIMIT; an answer
//! with code UNKNOWN counts in `unknown`, a non-OK gRPC status (including
//! a deadline of [`CALL_TIMEOUT`]) in `errors`, and neither is a decision
//! nor in the latency figures. A run with any error or unknown answer, in
//! the warm-up too, says `result=errors`, names the statuses on stderr and
//! exits with status 3. Latencies are of the measured window only (calls
//! started after the warm-up), nearest-rank percentiles of every call.
//! CPU figures are percent of one core over the measured window (so up to
//! 200 on two cores), read from `/proc` (Linux; absent elsewhere):
//! this process, `--server-pid`, `--store-pid`, the whole machine, and
//! what is left of the machine's (other work on a shared machine shows
//! there, so a disturbed run can be told apart).

use std::collections::BTreeMap;
use std::num::NonZeroUsize;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Parser;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tonic::transport::{Channel, Endpoint};

/// The longest one call may take before it counts as an error.
const CALL_TIMEOUT: Duration = Duration::from_secs(5);

/// How long connecting to the target may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// `/proc/PID/stat` counts CPU time in `USER_HZ` ticks, which Linux fixes
/// at 100 per second on every architecture it exposes to user space.
const TICKS_PER_SEC: f64 = 100.0;

/// Exit status of a run that saw errors or unknown answers.
const EXIT_ERRORS: u8 = 3;

/// Command-line arguments.
#[derive(Debug, Parser)]
#[command(about = "gRPC load of Envoy's rate limit service (ShouldRateLimit)")]
struct Args {
    /// The server, as `http://HOST:PORT` (plaintext HTTP/2).
    #[arg(long)]
    target: String,
    /// `RateLimitRequest.domain`.
    #[arg(long, default_value = "bench")]
    domain: String,
    /// Calls kept in flight at all times, one task each.
    #[arg(long, default_value_t = NonZeroUsize::new(64).unwrap_or(NonZeroUsize::MIN))]
    streams: NonZeroUsize,
    /// Distinct descriptor values `client-0` … `client-{keys-1}`.
    #[arg(long, default_value_t = 10_000)]
    keys: u32,
    /// How long to measure after the warm-up (`10s`, `500ms`, `2m`).
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    duration: Duration,
    /// How long to load before measuring; its calls are not in the figures.
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    warmup: Duration,
    /// HTTP/2 connections the streams are spread over, round-robin.
    ///
    /// One connection's frames are read and written by one task on each
    /// side, so a single connection caps a multi-threaded server at about
    /// one core; 4 gives each of this machine's 2 cores more than one to
    /// drive, as several Envoy workers (one connection each) would.
    #[arg(long, default_value_t = NonZeroUsize::new(4).unwrap_or(NonZeroUsize::MIN))]
    connections: NonZeroUsize,
    /// The entry's key in each descriptor.
    #[arg(long, default_value = "key")]
    entry_key: String,
    /// Seed of the key sequence (task `i` uses `seed + i`).
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Runtime worker threads of the load generator (default: one per core).
    #[arg(long)]
    threads: Option<NonZeroUsize>,
    /// Also report this process's CPU over the measured window (the
    /// server's pid).
    #[arg(long)]
    server_pid: Option<u32>,
    /// Also report this process's CPU over the measured window (the
    /// server's store, e.g. `redis-server`).
    #[arg(long)]
    store_pid: Option<u32>,
}

/// Parses `10s`, `500ms`, `2m` or a bare number of seconds.
fn parse_duration(text: &str) -> Result<Duration, String> {
    let (number, unit_ms) = if let Some(n) = text.strip_suffix("ms") {
        (n, 1.0)
    } else if let Some(n) = text.strip_suffix('s') {
        (n, 1_000.0)
    } else if let Some(n) = text.strip_suffix('m') {
        (n, 60_000.0)
    } else {
        (text, 1_000.0)
    };
    let value: f64 = number
        .parse()
        .map_err(|_| format!("not a duration: {text:?} (e.g. 10s, 500ms, 2m)"))?;
    if !value.is_finite() || value < 0.0 {
        return Err(format!("not a duration: {text:?}"));
    }
    Ok(Duration::from_secs_f64(value * unit_ms / 1_000.0))
}

/// What one task saw.
#[derive(Debug, Default)]
struct Tally {
    /// Latency of every measured decision, in nanoseconds.
    latencies_ns: Vec<u64>,
    /// Measured answers with `overall_code` OK.
    ok: u64,
    /// Measured answers with `overall_code` OVER_LIMIT.
    over: u64,
    /// Answers with any other code, warm-up included.
    unknown: u64,
    /// Non-OK gRPC statuses in the measured window, by code.
    errors: BTreeMap<String, u64>,
    /// Non-OK gRPC statuses during the warm-up.
    warmup_errors: u64,
    /// The first error's message, to show on stderr.
    first_error: Option<String>,
    /// When this task's last call ended.
    last_done: Option<Instant>,
}

impl Tally {
    fn merge(&mut self, other: Tally) {
        self.latencies_ns.extend(other.latencies_ns);
        self.ok += other.ok;
        self.over += other.over;
        self.unknown += other.unknown;
        for (code, n) in other.errors {
            *self.errors.entry(code).or_default() += n;
        }
        self.warmup_errors += other.warmup_errors;
        if self.first_error.is_none() {
            self.first_error = other.first_error;
        }
        self.last_done = self.last_done.max(other.last_done);
    }
}

/// One task: calls back to back until `end`, recording the calls that
/// start at or after `measure_from`.
async fn stream(
    mut client: RateLimitServiceClient<Channel>,
    domain: Arc<str>,
    entry_key: Arc<str>,
    values: Arc<Vec<String>>,
    mut rng: StdRng,
    measure_from: Instant,
    end: Instant,
) -> Tally {
    let mut tally = Tally::default();
    loop {
        let value = values[rng.random_range(0..values.len())].clone();
        let request = RateLimitRequest {
            domain: domain.to_string(),
            descriptors: vec![RateLimitDescriptor {
                entries: vec![Entry {
                    key: entry_key.to_string(),
                    value,
                }],
                ..RateLimitDescriptor::default()
            }],
            hits_addend: 0,
        };
        let started = Instant::now();
        if started >= end {
            break;
        }
        let answer = client.should_rate_limit(request).await;
        let done = Instant::now();
        tally.last_done = Some(done);
        let measured = started >= measure_from;
        match answer {
            Ok(response) => match Code::try_from(response.get_ref().overall_code) {
                Ok(Code::Ok) if measured => tally.ok += 1,
                Ok(Code::OverLimit) if measured => tally.over += 1,
                Ok(Code::Ok | Code::OverLimit) => continue,
                Ok(Code::Unknown) | Err(_) => {
                    tally.unknown += 1;
                    continue;
                }
            },
            Err(status) => {
                if tally.first_error.is_none() {
                    tally.first_error = Some(format!("{:?}: {}", status.code(), status.message()));
                }
                if measured {
                    *tally
                        .errors
                        .entry(format!("{:?}", status.code()))
                        .or_default() += 1;
                } else {
                    tally.warmup_errors += 1;
                }
                continue;
            }
        }
        let latency = done.duration_since(started);
        tally
            .latencies_ns
            .push(u64::try_from(latency.as_nanos()).unwrap_or(u64::MAX));
    }
    tally
}

/// CPU time (user + system) of a process so far, in seconds, from
/// `/proc/PID/stat`; `None` where that cannot be read.
fn cpu_secs(pid: Option<u32>) -> Option<f64> {
    let path = match pid {
        Some(pid) => format!("/proc/{pid}/stat"),
        None => "/proc/self/stat".to_owned(),
    };
    let stat = std::fs::read_to_string(path).ok()?;
    // The command name (field 2) may hold spaces; the fields after it
    // start at field 3, so utime (14) and stime (15) are the 12th and 13th.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace().skip(11);
    let utime: f64 = fields.next()?.parse().ok()?;
    let stime: f64 = fields.next()?.parse().ok()?;
    Some((utime + stime) / TICKS_PER_SEC)
}

/// CPU time the whole machine spent busy so far (every core, every
/// process: user, nice, system, irq, softirq, steal), in seconds, from
/// `/proc/stat`; `None` where that cannot be read.
fn machine_busy_secs() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let total = stat.lines().next()?.strip_prefix("cpu ")?;
    let ticks: Vec<f64> = total
        .split_whitespace()
        .map(str::parse)
        .collect::<Result<_, _>>()
        .ok()?;
    // user nice system idle iowait irq softirq steal (guest time is
    // already inside user and nice)
    let busy = [0, 1, 2, 5, 6, 7]
        .iter()
        .filter_map(|&i| ticks.get(i))
        .sum::<f64>();
    Some(busy / TICKS_PER_SEC)
}

/// CPU use of the processes the load is about, over one window.
#[derive(Debug, Clone, Copy)]
struct CpuSample {
    client: Option<f64>,
    server: Option<f64>,
    store: Option<f64>,
    machine: Option<f64>,
}

impl CpuSample {
    fn now(args: &Args) -> CpuSample {
        CpuSample {
            client: cpu_secs(None),
            server: args.server_pid.and_then(|pid| cpu_secs(Some(pid))),
            store: args.store_pid.and_then(|pid| cpu_secs(Some(pid))),
            machine: machine_busy_secs(),
        }
    }

    /// ` client_cpu_pct=… server_cpu_pct=… store_cpu_pct=… machine_cpu_pct=…
    /// other_cpu_pct=…`, each in percent of one core over `elapsed_s`, for
    /// the figures both samples have; `other` is the machine's busy time
    /// that none of the named processes account for (other work on a
    /// shared machine, the kernel's softirqs).
    fn fields(before: CpuSample, after: CpuSample, elapsed_s: f64) -> String {
        let pct = |b: Option<f64>, a: Option<f64>| Some(100.0 * (a? - b?) / elapsed_s);
        let client = pct(before.client, after.client);
        let server = pct(before.server, after.server);
        let store = pct(before.store, after.store);
        let machine = pct(before.machine, after.machine);
        let mut out = String::new();
        for (name, value) in [
            ("client", client),
            ("server", server),
            ("store", store),
            ("machine", machine),
        ] {
            if let Some(v) = value {
                out += &format!(" {name}_cpu_pct={v:.0}");
            }
        }
        if let (Some(m), Some(c)) = (machine, client) {
            out += &format!(
                " other_cpu_pct={:.0}",
                m - c - server.unwrap_or(0.0) - store.unwrap_or(0.0)
            );
        }
        out
    }
}

/// The nearest-rank `p` quantile of `sorted` (ascending), in microseconds.
fn quantile_us(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = (p * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1] / 1_000
}

/// Opens `n` separate HTTP/2 connections to `target`.
async fn connect(target: &str, n: usize) -> anyhow::Result<Vec<Channel>> {
    let endpoint = Endpoint::from_shared(target.to_owned())
        .with_context(|| format!("--target {target:?} is not a URI"))?
        .tcp_nodelay(true)
        .connect_timeout(CONNECT_TIMEOUT)
        .timeout(CALL_TIMEOUT);
    let mut channels = Vec::with_capacity(n);
    for _ in 0..n {
        let channel = endpoint
            .connect()
            .await
            .with_context(|| format!("connecting to {target}"))?;
        channels.push(channel);
    }
    Ok(channels)
}

/// Runs the load and prints its line; `Ok(false)` when it saw errors.
async fn run(args: Args) -> anyhow::Result<bool> {
    if args.keys == 0 {
        bail!("--keys must be at least 1");
    }
    let channels = connect(&args.target, args.connections.get()).await?;
    let values: Arc<Vec<String>> =
        Arc::new((0..args.keys).map(|i| format!("client-{i}")).collect());
    let domain: Arc<str> = Arc::from(args.domain.as_str());
    let entry_key: Arc<str> = Arc::from(args.entry_key.as_str());

    let start = Instant::now();
    let measure_from = start + args.warmup;
    let end = measure_from + args.duration;
    let mut tasks = Vec::with_capacity(args.streams.get());
    for i in 0..args.streams.get() {
        let client = RateLimitServiceClient::new(channels[i % channels.len()].clone());
        let rng = StdRng::seed_from_u64(args.seed.wrapping_add(i as u64));
        tasks.push(tokio::spawn(stream(
            client,
            Arc::clone(&domain),
            Arc::clone(&entry_key),
            Arc::clone(&values),
            rng,
            measure_from,
            end,
        )));
    }

    tokio::time::sleep_until(measure_from.into()).await;
    let cpu_before = CpuSample::now(&args);
    let mut tally = Tally::default();
    for task in tasks {
        tally.merge(task.await.context("a load task panicked")?);
    }
    let cpu_after = CpuSample::now(&args);
    // Calls started before `end` finish after it: the window runs until
    // the last one ended, so every counted call is inside it.
    let elapsed = tally
        .last_done
        .map_or(args.duration, |done| {
            done.saturating_duration_since(measure_from)
        })
        .max(Duration::from_micros(1));
    let elapsed_s = elapsed.as_secs_f64();

    tally.latencies_ns.sort_unstable();
    let lat = &tally.latencies_ns;
    let errors: u64 = tally.errors.values().sum();
    let clean = errors == 0 && tally.warmup_errors == 0 && tally.unknown == 0;
    let decisions = tally.ok + tally.over;
    let mut line = format!(
        "decisions_per_sec={:.0} p50_us={} p90_us={} p99_us={} p999_us={} max_us={} \
         calls={} ok={} over={} unknown={} errors={errors} warmup_errors={} elapsed_s={elapsed_s:.3} \
         streams={} connections={} keys={}",
        decisions as f64 / elapsed_s,
        quantile_us(lat, 0.50),
        quantile_us(lat, 0.90),
        quantile_us(lat, 0.99),
        quantile_us(lat, 0.999),
        lat.last().map_or(0, |max| max / 1_000),
        decisions + errors,
        tally.ok,
        tally.over,
        tally.unknown,
        tally.warmup_errors,
        args.streams,
        args.connections,
        args.keys,
    );
    line += &CpuSample::fields(cpu_before, cpu_after, elapsed_s);
    line += if clean {
        " result=ok"
    } else {
        " result=errors"
    };
    println!("{line}");
    if !clean {
        let by_code: Vec<String> = tally
            .errors
            .iter()
            .map(|(c, n)| format!("{c}={n}"))
            .collect();
        eprintln!(
            "rls-load: {errors} errors in the measured window ({}), {} in the warm-up, {} answers with code UNKNOWN; first: {}",
            if by_code.is_empty() {
                "none".to_owned()
            } else {
                by_code.join(" ")
            },
            tally.warmup_errors,
            tally.unknown,
            tally.first_error.as_deref().unwrap_or("-"),
        );
    }
    Ok(clean)
}

fn main() -> anyhow::Result<ExitCode> {
    let args = Args::parse();
    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    if let Some(threads) = args.threads {
        runtime.worker_threads(threads.get());
    }
    let runtime = runtime
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    let clean = runtime.block_on(run(args))?;
    Ok(if clean {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_ERRORS)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_with_and_without_units() {
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("3"), Ok(Duration::from_secs(3)));
        assert_eq!(parse_duration("0s"), Ok(Duration::ZERO));
        assert!(parse_duration("ten").is_err());
        assert!(parse_duration("-1s").is_err());
    }

    #[test]
    fn quantiles_are_nearest_rank_in_microseconds() {
        let sorted: Vec<u64> = (1..=1_000).map(|i| i * 1_000).collect();
        assert_eq!(quantile_us(&sorted, 0.50), 500);
        assert_eq!(quantile_us(&sorted, 0.99), 990);
        assert_eq!(quantile_us(&sorted, 0.999), 999);
        assert_eq!(quantile_us(&sorted, 1.0), 1_000);
        assert_eq!(quantile_us(&[], 0.99), 0);
    }

    #[test]
    fn cpu_time_of_this_process_is_readable_on_linux() {
        if cfg!(target_os = "linux") {
            assert!(cpu_secs(None).is_some());
            assert!(machine_busy_secs().is_some());
        }
    }
}
