#!/usr/bin/env bash
# HTTP throughput of ratewarden against the bare axum baseline, measured in
# one run on this machine (BENCHMARKS.md). Needs wrk (apt-get install wrk).
#
#   scripts/bench-http.sh [runs=5] [duration=10s] [connections=64] [threads=2] [scenario...]
#
# Scenarios (default: all): bare bare_post ping_1_key ping_10k_keys
# rate_check mem_ping_1_key mem_ping_10k_keys mem_rate_check v1_one
# v1_batch3, and with BASELINE_BIN=path/to/an/older/ratewarden also
# old_ping_10k_keys and old_mem_ping_10k_keys (that binary on the same
# routes, for before/after comparisons in one run).
#
# Prints one line per scenario and run, then the median requests/s of each
# scenario and its ratio to the bare GET route's median (and, for the
# POST scenarios, to the bare POST route's).
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
cat > "$tmp/v1_one.lua" <<'LUA'
-- POST /v1/check: one check of a GCRA policy, 10,000 keys.
math.randomseed(os.time())
request = function()
  return wrk.format("POST", "/v1/check", { ["Content-Type"] = "application/json" },
    '{"policy":"api","key":"client-' .. math.random(1, 10000) .. '"}')
end
LUA
cat > "$tmp/v1_batch3.lua" <<'LUA'
-- POST /v1/check: a batch of 3 (GCRA per key, sliding window per key and
-- path, a global fixed window), 10,000 keys.
math.randomseed(os.time())
request = function()
  local k = "client-" .. math.random(1, 10000)
  return wrk.format("POST", "/v1/check", { ["Content-Type"] = "application/json" },
    '{"checks":[{"policy":"api","key":"' .. k .. '"},{"policy":"per-path","key":["' .. k ..
    '","/orders"]},{"policy":"global","key":"all"}]}')
end
LUA
cat > "$tmp/policies.toml" <<'TOML'
[[policies]]
name = "api"
algorithm = "gcra"
limit = 1000000000000
window = "1m"

[[policies]]
name = "per-path"
algorithm = "sliding_window"
limit = 1000000000000
window = "1m"

[[policies]]
name = "global"
algorithm = "fixed_window"
limit = 1000000000000
window = "1h"
TOML
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
  --ping-limit 1000000000000 --check-limit 1000000000 --config "$tmp/policies.toml" & pids+=($!)
if [ -n "${BASELINE_BIN:-}" ]; then
  RATEWARDEN_LOG=warn "$BASELINE_BIN" serve --listen 127.0.0.1:18093 --db "$tmp/old.db" \
    --ping-limit 1000000000000 --check-limit 1000000000 & pids+=($!)
  RATEWARDEN_LOG=warn "$BASELINE_BIN" serve --listen 127.0.0.1:18094 --store memory \
    --ping-limit 1000000000000 --check-limit 1000000000 & pids+=($!)
fi
sleep 1

rps() { wrk -t"$threads" -c"$conns" -d"$duration" "$@" | awk '/Requests\/sec/ {print $2}'; }
declare -A results
scenarios=("${@:5}")
if [ ${#scenarios[@]} -eq 0 ]; then
  scenarios=(bare bare_post ping_1_key ping_10k_keys rate_check mem_ping_1_key mem_ping_10k_keys mem_rate_check v1_one v1_batch3)
  [ -z "${BASELINE_BIN:-}" ] || scenarios+=(old_ping_10k_keys old_mem_ping_10k_keys)
fi
for run in $(seq 1 "$runs"); do
  for s in "${scenarios[@]}"; do
    case $s in
      bare) r=$(rps http://127.0.0.1:18090/ping) ;;
      bare_post) r=$(rps -s "$tmp/v1_one.lua" http://127.0.0.1:18090/v1/check) ;;
      v1_one) r=$(rps -s "$tmp/v1_one.lua" http://127.0.0.1:18092/v1/check) ;;
      v1_batch3) r=$(rps -s "$tmp/v1_batch3.lua" http://127.0.0.1:18092/v1/check) ;;
      old_ping_10k_keys) r=$(rps -s "$tmp/keys.lua" http://127.0.0.1:18093/ping) ;;
      old_mem_ping_10k_keys) r=$(rps -s "$tmp/keys.lua" http://127.0.0.1:18094/ping) ;;
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

median() { tr ' ' '\n' | { grep -v '^$' || true; } | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
base=$(echo "${results[bare]:-}" | median)
post=$(echo "${results[bare_post]:-}" | median)
echo "median req/s over $runs runs (wrk -t$threads -c$conns -d$duration):"
for s in "${scenarios[@]}"; do
  m=$(echo "${results[$s]}" | median)
  line=$(printf '  %-22s %10.0f' "$s" "$m")
  [ -z "$base" ] || line+=$(printf '  %.2fx bare' "$(echo "$m / $base" | bc -l)")
  case $s in v1_*|bare_post) [ -z "$post" ] || line+=$(printf '  %.2fx bare POST' "$(echo "$m / $post" | bc -l)") ;; esac
  echo "$line"
done
