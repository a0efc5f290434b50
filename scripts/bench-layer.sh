#!/usr/bin/env bash
# The tower Layer (crates/ratewarden-tower) in its example app beside the same
# routes without the layer and beside tower_governor on the same routes, in
# one run on this machine (BENCHMARKS.md). Needs wrk (apt-get install wrk).
#
#   scripts/bench-layer.sh [rounds=5] [duration=10s] [connections=50] [threads=2] [variant...]
#
# Variants (default: all, in this order within every round):
#   bare           examples/axum_sqlite.rs with STORE `none`: the routes without the layer
#   layer_memory   the same app with the layer on the memory store
#   governor       tower_governor 0.8 on the same routes (a standalone app, below)
#   governor_none  that standalone app without its GovernorLayer (its own build's baseline)
#   layer_sqlite   the layer on the SQLite store (a fresh database per round)
#
# Load: `GET /api/orders` with `Authorization: Bearer user-N`, N uniform in
# 1..10000 per request, so every request is allowed (policy `api`: GCRA
# 100/s per user, burst 100); any non-2xx answer or socket error fails the
# run. Every variant is started fresh in every round on a free port
# (127.0.0.1:0, the address read from its `listening on ADDR`), gets a 1 s
# wrk warm-up, then the measured wrk run.
#
# tower_governor's app is written into
# ${PEERS_DIR:-$HOME/.cache/ratewarden-peers}/tower-governor-app and built
# there with its own target dir, never as a workspace member; its axum,
# tokio and serde_json are pinned to the workspace's Cargo.lock versions, and
# it starts from a copy of that lock file so shared dependencies match.
#
# Prints one line per round and variant, then per variant the median req/s,
# its ratio to bare's median, the median of the per-round ratios to bare in
# the same round (paired), the median p99; and the layer against governor.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5} duration=${2:-10s} conns=${3:-50} threads=${4:-2}
variants=("${@:5}")
[ ${#variants[@]} -gt 0 ] || variants=(bare layer_memory governor governor_none layer_sqlite)
command -v wrk >/dev/null || { echo "wrk is missing: apt-get install -y wrk" >&2; exit 1; }
command -v curl >/dev/null || { echo "curl is missing: apt-get install -y curl" >&2; exit 1; }
fail() { echo "bench-layer: $*" >&2; exit 1; }

# `--workspace --examples` is what `cargo test --workspace` builds too, so
# it reuses the workspace's artifacts; `-p ratewarden-tower --example ..`
# resolves other features and recompiles about 25 crates.
cargo build --release --quiet --workspace --examples
example=target/release/examples/axum_sqlite
lock_version() { awk -v n="$1" '$0 == "name = \"" n "\"" {getline; gsub(/version = |"/, ""); print; exit}' Cargo.lock; }
axum_v=$(lock_version axum) tokio_v=$(lock_version tokio) serde_json_v=$(lock_version serde_json) http_v=$(lock_version http)
[ -n "$axum_v" ] && [ -n "$tokio_v" ] && [ -n "$serde_json_v" ] && [ -n "$http_v" ] || fail "versions not found in Cargo.lock"

peer=${PEERS_DIR:-$HOME/.cache/ratewarden-peers}/tower-governor-app
mkdir -p "$peer/src"
cat > "$peer/Cargo.toml" <<TOML
# Written by ratewarden's scripts/bench-layer.sh: tower_governor on the routes
# of ratewarden-tower's examples/axum_sqlite.rs. Not part of any workspace.
[package]
name = "tower-governor-app"
version = "0.0.0"
edition = "2024"
publish = false

[workspace]

[dependencies]
# The workspace's versions and features (tower_governor's own axum dependency
# turns axum's default features on as well).
axum = { version = "=$axum_v", default-features = false, features = ["http1", "http2", "json", "query", "tokio", "tracing"] }
http = "=$http_v"
serde_json = { version = "=$serde_json_v", features = ["preserve_order"] }
tokio = { version = "=$tokio_v", features = ["macros", "rt-multi-thread", "net", "signal", "sync", "time"] }
tower_governor = { version = "=0.8.0", default-features = false, features = ["axum"] }

[profile.release]
debug = "line-tables-only"
TOML
cat > "$peer/src/main.rs" <<'RUST'
//! tower_governor on the routes of ratewarden-tower's examples/axum_sqlite.rs
//! (written by ratewarden's scripts/bench-layer.sh).
//!
//!     tower-governor-app [LISTEN] [governor|none]
//!
//! The same `authenticate` middleware, handlers and JSON as the example's
//! `none` variant; with `governor` (the default) a `GovernorLayer` on
//! `/api/orders` keyed by the bearer user, 100 per second, bursts of 100
//! (the example's policy `api`). Prints `listening on ADDR` when ready.

use std::net::SocketAddr;

use axum::body::Body;
use axum::extract::Request;
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use tower_governor::governor::GovernorConfigBuilder;
use tower_governor::key_extractor::KeyExtractor;
use tower_governor::{GovernorError, GovernorLayer};

/// The authenticated user, put into the request's extensions by
/// [`authenticate`].
#[derive(Debug, Clone)]
struct User(String);

/// Keys by the user [`authenticate`] found (or, in front of it, the bearer
/// token itself).
#[derive(Debug, Clone, Copy)]
struct UserKey;

impl KeyExtractor for UserKey {
    type Key = String;

    fn extract<T>(&self, req: &http::Request<T>) -> Result<String, GovernorError> {
        if let Some(user) = req.extensions().get::<User>() {
            return Ok(user.0.clone());
        }
        bearer(req.headers()).ok_or(GovernorError::UnableToExtractKey)
    }
}

fn bearer(headers: &http::HeaderMap) -> Option<String> {
    headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .filter(|u| !u.is_empty())
        .map(str::to_owned)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let listen = args.next().unwrap_or_else(|| "127.0.0.1:3000".into());
    let governed = match args.next().as_deref() {
        None | Some("governor") => true,
        Some("none") => false,
        Some(other) => return Err(format!("the second argument is governor or none, not '{other}'").into()),
    };
    let mut app = Router::new().route("/api/orders", get(orders));
    if governed {
        // GCRA with one token every 10 ms (100 per second) and bursts of 100,
        // as the example's `limit(100).per(1s).burst(100)`. Careful:
        // tower_governor's `per_second(n)` means one token every n seconds.
        let config = GovernorConfigBuilder::default()
            .key_extractor(UserKey)
            .per_millisecond(10)
            .burst_size(100)
            .finish()
            .ok_or("invalid governor quota")?;
        // A request without a user: 401, as the example's layer answers.
        app = app.layer(GovernorLayer::new(config).error_handler(|e: GovernorError| match e {
            GovernorError::UnableToExtractKey => StatusCode::UNAUTHORIZED.into_response(),
            other => Response::<Body>::from(other),
        }));
    }
    // Outermost, so it runs before the rate limit layer sees the request.
    let app = app.route("/login", post(login)).layer(middleware::from_fn(authenticate));
    let listener = tokio::net::TcpListener::bind(&listen).await?;
    println!("listening on {}", listener.local_addr()?);
    axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>()).await?;
    Ok(())
}

/// Puts the bearer token's user into the request's extensions.
async fn authenticate(mut request: Request, next: Next) -> Response {
    if let Some(user) = bearer(request.headers()).map(User) {
        request.extensions_mut().insert(user);
    }
    next.run(request).await
}

async fn orders(request: Request) -> Json<serde_json::Value> {
    let user = request.extensions().get::<User>().map(|u| u.0.clone());
    Json(serde_json::json!({ "user": user, "orders": [{ "id": 1, "total_cents": 4200 }] }))
}

async fn login() -> Json<serde_json::Value> {
    Json(serde_json::json!({ "token": "demo" }))
}
RUST
# Shared dependencies at the workspace's versions: cargo keeps a lock file's
# entries that fit and drops the rest.
cp Cargo.lock "$peer/Cargo.lock"
(cd "$peer" && CARGO_TARGET_DIR="$peer/target" cargo build --release --quiet)
governor_bin=$peer/target/release/tower-governor-app

tmp=$(mktemp -d)
cur=
trap '[ -z "$cur" ] || { kill "$cur" 2>/dev/null; wait "$cur" 2>/dev/null; }; rm -rf "$tmp"' EXIT
cat > "$tmp/users.lua" <<'LUA'
-- GET /api/orders as one of 10,000 users, chosen at random per request;
-- prints the p99 latency at the end.
local n = 0
function setup(thread)
  n = n + 1
  thread:set("id", n)
end
function init(args)
  math.randomseed(os.time() * 100 + (id or 0))
end
request = function()
  return wrk.format("GET", "/api/orders", { ["Authorization"] = "Bearer user-" .. math.random(1, 10000) })
end
done = function(summary, latency, requests)
  io.write(string.format("p99_us %d\n", latency:percentile(99)))
end
LUA

# Starts variant $1 fresh and waits until it answers; sets cur (its pid) and addr.
start() {
  local out=$tmp/$1.out
  case $1 in
    bare) "$example" 127.0.0.1:0 none >"$out" 2>&1 & ;;
    layer_memory) "$example" 127.0.0.1:0 memory >"$out" 2>&1 & ;;
    layer_sqlite) rm -f "$tmp"/layer.db*; "$example" 127.0.0.1:0 "sqlite:$tmp/layer.db" >"$out" 2>&1 & ;;
    governor) "$governor_bin" 127.0.0.1:0 governor >"$out" 2>&1 & ;;
    governor_none) "$governor_bin" 127.0.0.1:0 none >"$out" 2>&1 & ;;
    *) fail "unknown variant '$1'" ;;
  esac
  cur=$!
  addr=
  for _ in $(seq 200); do
    addr=$(sed -n 's/^listening on //p' "$out")
    [ -z "$addr" ] || break
    kill -0 "$cur" 2>/dev/null || fail "$1 exited: $(cat "$out")"
    sleep 0.05
  done
  [ -n "$addr" ] || fail "$1 did not print its address"
  local code
  code=$(curl -s -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer user-1' "http://$addr/api/orders") || true
  [ "$code" = 200 ] || fail "$1 answered $code, not 200, on /api/orders"
}
stop() { kill "$cur" 2>/dev/null || true; wait "$cur" 2>/dev/null || true; cur=; }

# One wrk run against $addr; prints "REQ_PER_S P99_MS", fails on any
# non-2xx answer or socket error.
measure() {
  local out=$tmp/wrk.out
  wrk -t"$threads" -c"$conns" -d"$1" -s "$tmp/users.lua" "http://$addr/api/orders" >"$out" 2>&1 || fail "wrk failed: $(cat "$out")"
  if grep -q 'Non-2xx' "$out" || grep -q 'Socket errors' "$out"; then
    fail "$variant: not every response was a 200: $(grep -E 'Non-2xx|Socket errors' "$out")"
  fi
  local rps p99
  rps=$(awk '/^Requests\/sec/ {print $2}' "$out")
  p99=$(awk '/^p99_us/ {printf "%.2f", $2 / 1000}' "$out")
  [ -n "$rps" ] && [ -n "$p99" ] || fail "no figures in wrk's output: $(cat "$out")"
  echo "$rps $p99"
}

wait_for_compilers() {
  local said=
  while pgrep -x rustc >/dev/null; do
    [ -n "$said" ] || { echo "(waiting until no rustc is running)"; said=1; }
    sleep 5
  done
}

declare -A rps p99
for round in $(seq 1 "$rounds"); do
  wait_for_compilers
  for variant in "${variants[@]}"; do
    start "$variant"
    measure 1s >/dev/null
    read -r r p < <(measure "$duration")
    [ -n "$r" ] || exit 1
    stop
    printf 'round %d %-14s %10.0f req/s  p99 %6.2f ms\n' "$round" "$variant" "$r" "$p"
    rps[$variant]+="$r " p99[$variant]+="$p "
  done
done

median() { tr ' ' '\n' | { grep -v '^$' || true; } | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
# Per-round ratios of variant $1 to variant $2 (same round), space-separated.
paired() {
  paste -d' ' <(echo "${rps[$1]}" | tr ' ' '\n' | grep -v '^$') <(echo "${rps[$2]}" | tr ' ' '\n' | grep -v '^$') \
    | awk '{printf "%.3f ", $1 / $2}'
}
echo "medians over $rounds rounds (wrk -t$threads -c$conns -d$duration, GET /api/orders, 10,000 users):"
printf '  %-14s %12s %9s %9s %9s\n' variant 'req/s' 'vs bare' paired 'p99 ms'
base=
[ -z "${rps[bare]:-}" ] || base=$(echo "${rps[bare]}" | median)
for v in "${variants[@]}"; do
  m=$(echo "${rps[$v]}" | median)
  vs=- pr=-
  if [ -n "$base" ]; then
    vs=$(printf '%.2fx' "$(echo "$m / $base" | bc -l)")
    pr=$(printf '%.2fx' "$(paired "$v" bare | median)")
  fi
  printf '  %-14s %12.0f %9s %9s %9s\n' "$v" "$m" "$vs" "$pr" "$(echo "${p99[$v]}" | median)"
done
if [ -n "${rps[layer_memory]:-}" ] && [ -n "${rps[governor]:-}" ]; then
  lm=$(echo "${rps[layer_memory]}" | median) gm=$(echo "${rps[governor]}" | median)
  printf 'layer_memory / governor: %.2fx (medians), paired %.2fx (per round: %s)\n' \
    "$(echo "$lm / $gm" | bc -l)" "$(paired layer_memory governor | median)" "$(paired layer_memory governor)"
fi
for v in "${variants[@]}"; do
  [ "$v" = bare ] || [ -z "$base" ] || echo "per-round $v / bare: $(paired "$v" bare)"
done
