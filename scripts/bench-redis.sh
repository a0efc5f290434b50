#!/usr/bin/env bash
# Decisions/s through ratewarden's Redis store beside redis-benchmark running
# the same GCRA script with EVALSHA at the same concurrency, in one run
# (BENCHMARKS.md). Starts its own redis-server on a free port.
#
#   scripts/bench-redis.sh [runs=3]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-3}
command -v redis-benchmark >/dev/null || { echo "redis-benchmark is missing: apt-get install -y redis-tools" >&2; exit 1; }
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --daemonize no >/dev/null 2>&1 &
redis_pid=$!
trap 'kill "$redis_pid" 2>/dev/null || true' EXIT
for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
cargo bench -q -p ratewarden-bench --bench redis_throughput --no-run 2>/dev/null

# The store's GCRA script, exactly as it sends it (decimal.lua + gcra.lua).
script=$(cat crates/ratewarden-redis/src/lua/decimal.lua; echo; cat crates/ratewarden-redis/src/lua/gcra.lua)
sha=$(redis-cli -p "$port" SCRIPT LOAD "$script")
now=$(date +%s%N)
for run in $(seq 1 "$runs"); do
  # 10,000 random keys; arguments that always allow (as the store's run).
  rb=$(redis-benchmark -p "$port" -c 64 -n 192000 -r 10000 -q \
    EVALSHA "$sha" 1 "rw:gcra:{key:__rand_int__}" "$now" "$((now + 1000000000000))" 1 9223372036854775807 1000 \
    | tr '\r' '\n' | grep -o '[0-9.]* requests per second' | tail -1 | cut -d' ' -f1)
  echo "run $run redis-benchmark EVALSHA gcra: $rb requests/s (64 clients)"
  RW_REDIS_URL="redis://127.0.0.1:$port/0" cargo bench -q -p ratewarden-bench --bench redis_throughput 2>/dev/null | sed "s/^/run $run ratewarden /"
done
