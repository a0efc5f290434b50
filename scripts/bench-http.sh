#!/usr/bin/env bash
# HTTP throughput of ratewarden against the bare axum baseline, measured in
# one run on this machine (BENCHMARKS.md). Needs wrk (apt-get install wrk).
#
#   scripts/bench-http.sh [runs=5] [duration=10s] [connections=64] [threads=2]
#
# Prints one line per scenario and run, then the median requests/s of each
# scenario and its ratio to the bare route's median.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5} duration=${2:-10s} conns=${3:-64} threads=${4:-2}
command -v wrk >/dev/null || { echo "wrk is missing: apt-get install -y wrk" >&2; exit 1; }
cargo build --release --quiet -p ratewarden-server --bin ratewarden --example bare

tmp=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"' EXIT

cat > "$tmp/keys.lua" <<'LUA'
-- 10,000 distinct client keys, chosen at random per request.
math.randomseed(os.time())
request = function()
  return wrk.format("GET", "/ping", { ["X-Client-Key"] = "client-" .. math.random(1, 10000) })
end
LUA
cat > "$tmp/check.lua" <<'LUA'
-- POST /rate/check for 10,000 users on one endpoint.
math.randomseed(os.time())
request = function()
  return wrk.format("POST", "/rate/check",
    { ["X-User-Id"] = tostring(math.random(1, 10000)), ["Content-Type"] = "application/json" },
    '{"endpoint":"/orders"}')
end
LUA

target/release/examples/bare 127.0.0.1:18090 & pids+=($!)
# Limits high enough that every request is allowed: the measured path is
# the full one (counter upsert + audit row, or count + insert).
RATEWARDEN_LOG=warn target/release/ratewarden serve --listen 127.0.0.1:18091 --db "$tmp/bench.db" \
  --ping-limit 1000000000000 --check-limit 1000000000 & pids+=($!)
RATEWARDEN_LOG=warn target/release/ratewarden serve --listen 127.0.0.1:18092 --store memory \
  --ping-limit 1000000000000 --check-limit 1000000000 & pids+=($!)
sleep 1

rps() { wrk -t"$threads" -c"$conns" -d"$duration" "$@" | awk '/Requests\/sec/ {print $2}'; }
declare -A results
scenarios=(bare ping_1_key ping_10k_keys rate_check mem_ping_1_key mem_ping_10k_keys mem_rate_check)
for run in $(seq 1 "$runs"); do
  for s in "${scenarios[@]}"; do
    case $s in
      bare) r=$(rps http://127.0.0.1:18090/ping) ;;
      ping_1_key) r=$(rps -H 'X-Client-Key: one' http://127.0.0.1:18091/ping) ;;
      ping_10k_keys) r=$(rps -s "$tmp/keys.lua" http://127.0.0.1:18091/ping) ;;
      rate_check) r=$(rps -s "$tmp/check.lua" http://127.0.0.1:18091/rate/check) ;;
      mem_ping_1_key) r=$(rps -H 'X-Client-Key: one' http://127.0.0.1:18092/ping) ;;
      mem_ping_10k_keys) r=$(rps -s "$tmp/keys.lua" http://127.0.0.1:18092/ping) ;;
      mem_rate_check) r=$(rps -s "$tmp/check.lua" http://127.0.0.1:18092/rate/check) ;;
    esac
    echo "run $run $s $r req/s"
    results[$s]+="$r "
  done
done

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
base=$(echo "${results[bare]}" | median)
echo "median req/s over $runs runs (wrk -t$threads -c$conns -d$duration):"
for s in "${scenarios[@]}"; do
  m=$(echo "${results[$s]}" | median)
  printf '  %-18s %10.0f  %.2fx bare\n' "$s" "$m" "$(echo "$m / $base" | bc -l)"
done
