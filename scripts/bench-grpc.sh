#!/usr/bin/env bash
# Envoy's rate limit service over gRPC: ratewarden beside limitador-server
# in one run on this machine, memory and Redis stores (BENCHMARKS.md).
#
#   LIMITADOR_BIN=path/to/limitador-server scripts/bench-grpc.sh [runs=5] [duration=10s] [streams=64] [scenario...]
#
# Scenarios (default: all): rw_memory lim_memory rw_redis lim_redis
# lim_redis_cached (limitador's write-behind cache: approximate); the
# lim_* ones need LIMITADOR_BIN (limitador is not on crates.io: build it
# from its repository outside this project, BENCHMARKS.md says how).
# Each run goes round the scenarios once, so the machine's noise falls on
# every scenario alike. The load is crates/ratewarden-bench's rls-load:
# `streams` calls in flight over 4 HTTP/2 connections, one descriptor
# (key, client-N) per call, N uniform over 10,000 values, a limit no call
# reaches (every decision is a full one: read, decide, write). Both
# servers use one redis-server of this script's own, on a free port.
#
# Prints rls-load's line per scenario and run, then per scenario the
# median decisions/s and p99, and ratewarden's ratio to limitador's.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5} duration=${2:-10s} streams=${3:-64}
command -v redis-server >/dev/null || { echo "redis-server is missing: apt-get install -y redis-server" >&2; exit 1; }
cargo build --release --quiet -p ratewarden-server --bin ratewarden -p ratewarden-bench --bin rls-load
target=$(cargo metadata --format-version 1 --no-deps |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
ratewarden="$target/release/ratewarden" load="$target/release/rls-load"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.1; done; echo "nothing listens on $1" >&2; exit 1; }

tmp=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"' EXIT

cat > "$tmp/ratelimit.yaml" <<'YAML'
domain: bench
descriptors:
  - key: key
    rate_limit: {unit: minute, requests_per_unit: 4000000000}
YAML
cat > "$tmp/limits.yaml" <<'YAML'
- namespace: bench
  max_value: 4000000000
  seconds: 60
  conditions: []
  variables:
    - descriptors[0].key
YAML

redis_port=$(free_port)
redis-server --port "$redis_port" --bind 127.0.0.1 --save "" --appendonly no >/dev/null & redis_pid=$!
pids+=("$redis_pid")
wait_port "$redis_port"

declare -A grpc server
start() { # start NAME COMMAND...: runs COMMAND with $GRPC and $HTTP set
  local name=$1
  shift
  local g h
  g=$(free_port) h=$(free_port)
  GRPC=$g HTTP=$h "$@" & pids+=($!)
  grpc[$name]=$g server[$name]=$!
  wait_port "$g"
}
rw() { RATEWARDEN_LOG=warn exec "$ratewarden" serve --listen "127.0.0.1:$HTTP" --grpc-listen "127.0.0.1:$GRPC" \
  --envoy-config "$tmp/ratelimit.yaml" "$@"; }
lim() { RUST_LOG=error exec "$LIMITADOR_BIN" -b 127.0.0.1 -p "$GRPC" -B 127.0.0.1 -P "$HTTP" "$tmp/limits.yaml" "$@" >/dev/null; }
export -f rw lim
export ratewarden LIMITADOR_BIN="${LIMITADOR_BIN:-}" tmp

scenarios=("${@:4}")
if [ ${#scenarios[@]} -eq 0 ]; then
  scenarios=(rw_memory rw_redis)
  [ -z "${LIMITADOR_BIN:-}" ] || scenarios=(rw_memory lim_memory rw_redis lim_redis lim_redis_cached)
fi
for s in "${scenarios[@]}"; do
  case $s in
    rw_memory) start "$s" bash -c 'rw --store memory' ;;
    rw_redis) start "$s" bash -c "rw --store redis://127.0.0.1:$redis_port/0" ;;
    lim_memory) start "$s" bash -c 'lim memory --cache 1000000' ;;
    lim_redis) start "$s" bash -c "lim redis redis://127.0.0.1:$redis_port/1" ;;
    lim_redis_cached) start "$s" bash -c "lim redis_cached --max-cached 1000000 redis://127.0.0.1:$redis_port/2" ;;
    *) echo "unknown scenario $s" >&2; exit 2 ;;
  esac
done
sleep 1

declare -A rates p99s
for run in $(seq 1 "$runs"); do
  for s in "${scenarios[@]}"; do
    store=()
    case $s in *redis) store=(--store-pid "$redis_pid") ;; esac
    line=$("$load" --target "http://127.0.0.1:${grpc[$s]}" --domain bench --streams "$streams" \
      --keys 10000 --duration "$duration" --server-pid "${server[$s]}" "${store[@]}")
    echo "run $run $s $line"
    rates[$s]+="$(sed -E 's/.*decisions_per_sec=([0-9.]+).*/\1/' <<<"$line") "
    p99s[$s]+="$(sed -E 's/.*p99_us=([0-9]+).*/\1/' <<<"$line") "
  done
done

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
echo
printf '%-18s %14s %10s\n' scenario decisions/s p99_us
declare -A med_rate med_p99
for s in "${scenarios[@]}"; do
  med_rate[$s]=$(median <<<"${rates[$s]}")
  med_p99[$s]=$(median <<<"${p99s[$s]}")
  printf '%-18s %14.0f %10.0f\n' "$s" "${med_rate[$s]}" "${med_p99[$s]}"
done
for store in memory redis; do
  if [ -n "${med_rate[rw_$store]:-}" ] && [ -n "${med_rate[lim_$store]:-}" ]; then
    awk -v a="${med_rate[rw_$store]}" -v b="${med_rate[lim_$store]}" -v p="${med_p99[rw_$store]}" -v q="${med_p99[lim_$store]}" -v s="$store" \
      'BEGIN {printf "%s: ratewarden/limitador decisions/s %.2fx, p99 %.2fx\n", s, a/b, p/q}'
  fi
done
