#!/usr/bin/env bash
# ratewarden's HTTP throughput beside its peers, in one run on this machine
# (BENCHMARKS.md). Needs wrk, redis-server, curl and python3.
#
#   scripts/bench-peers.sh [rounds=5] [duration=10s] [connections=50] [threads=2] [scenario...]
#   scripts/bench-peers.sh redis-anchor [rounds=3]
#   scripts/bench-peers.sh replay [rounds=3] [lines=10000000]
#   scripts/bench-peers.sh governor [rounds=5]
#   scripts/bench-peers.sh --help   (this text)
#
# HTTP mode. Scenarios (default: all available), each `wrk --latency` with
# a key drawn from 10,000 at random per request and limits no run reaches
# (every request is a full, allowed decision):
#   bare              examples/bare, GET /ping (the axum baseline)
#   bare_full         examples/bare, GET /ping-full: ratewarden's /ping answer
#                     (five rate-limit headers, the seed's body) without a limiter
#   rw_mem_ping       ratewarden --store memory, GET /ping (X-Client-Key: client-N)
#   rw_mem_check      the same server, POST /rate/check (X-User-Id: N)
#   rw_mem_v1         the same server, POST /v1/check, one GCRA policy
#   rw_sqlite_ping    ratewarden on SQLite (--db, the default store), GET /ping
#   rw_sqlite_ping1   the same server, GET /ping, always the same key (the
#                     aim: 10,000 keys at least 0.8x one key)
#   rw_sqlite_check   the same server, POST /rate/check
#   rw_redis_ping     ratewarden --store redis://…, GET /ping
#   rw_redis_check    the same server, POST /rate/check
#   throttlecrab      throttlecrab-server 0.4.40 (crates.io), POST /throttle (GCRA)
#   limitador_mem     limitador-server, memory, POST /check_and_report
#   limitador_redis   limitador-server, redis, POST /check_and_report
# Every round runs every scenario once (1 s warm-up, then the measured run),
# each round starting one scenario later than the one before, so the
# machine's drift falls on all alike; each server is started once and
# serves every round. A round in which wrk saw a non-2xx answer or a socket
# error fails its scenario (reported, left out of every figure).
# Prints a line per scenario and round, then a Markdown table (median req/s,
# ratio to bare's median, median p99), paired ratios of req/s and of p99
# (the ratio within each round, then its median), the SQLite file's size,
# the command and date.
#
# Before each round it waits while a compiler (rustc, cc1, cc1plus) runs, up
# to WAIT_FOR_RUSTC seconds (default 600), then says the round is noisy.
#
# Binaries: RATEWARDEN_BIN and BARE_BIN (default: built here with cargo);
# peers live in ${RATEWARDEN_PEERS_DIR:-~/.cache/ratewarden-peers} ($PEERS):
# throttlecrab is `cargo install`ed into $PEERS/throttlecrab when missing
# (its build needs protoc: apt-get install -y protobuf-compiler);
# limitador-server is ${LIMITADOR_BIN:-$PEERS/limitador-server} and is never
# built here (not on crates.io: build it from its repository, outside this
# project, with `cargo build --release -p limitador-server`, which needs
# protoc and libclang-dev for its RocksDB bindings, 25 to 40 minutes on
# 2 cores); without it the limitador scenarios are skipped.
#
# redis-anchor mode: what Redis itself does per call, at redis-benchmark's
# -c 64 -r 10000 (random keys, every call allowed), beside ratewarden's
# in-process Redis store bench (crates/ratewarden-bench/benches/
# redis_throughput.rs, 64 tokio callers), all on one redis-server of its own:
#   CL.THROTTLE   redis-cell's native GCRA (built from crates.io into $PEERS)
#   incr_pexpire  EVALSHA of a plain INCRBY + PEXPIRE Lua script
#   rw_batch_gcra EVALSHA of the store's own script (decimal.lua + batch.lua)
#                 with one GCRA item, as the store sends it before Redis 7
#   rw_fcall_gcra FCALL of the same code as a function library, as the
#                 store sends it on Redis 7 (crates/ratewarden-redis/src/scripts.rs)
#
# replay mode: `ratewarden replay` on the memory store of a trace of LINES
# lines over 100,000 keys (scripts/gen-trace.py LINES 100000 42, written
# once into $PEERS), every algorithm (limit 10 per 1 s), rounds
# interleaved: median wall seconds and decisions per second (the aim:
# 10 M/s). REPLAY_BASE_BIN, when set, is a second build measured in the
# same rounds, and the table gives the ratio to it.
#
# governor mode: criterion's gcra_vs_governor group (crates/ratewarden-bench/
# benches/decisions.rs: the memory store's GCRA beside governor's keyed
# limiter, 10,000 keys, with their clocks and at a fixed instant), ROUNDS
# runs of 3 s per benchmark: the medians of criterion's per-run medians
# (ns per decision) and of the ratio within each run (the aim: with the
# clock, at most 1.0x governor). GOVERNOR_BENCH_BIN is the bench binary
# (default: built here with `cargo bench --no-run`); GOVERNOR_BASE_BENCH_BIN,
# when set, is another build's, run in turn with it in every round.
set -euo pipefail
cd "$(dirname "$0")/.."
PEERS=${RATEWARDEN_PEERS_DIR:-$HOME/.cache/ratewarden-peers}
cmdline="scripts/bench-peers.sh $*"
mode=http
[ "${1:-}" != redis-anchor ] || { mode=redis-anchor; shift; }
[ "${1:-}" != replay ] || { mode=replay; shift; }
[ "${1:-}" != governor ] || { mode=governor; shift; }
fail() { echo "bench-peers: $*" >&2; exit 1; }
case ${1:-} in -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | cut -c3-; exit 0 ;; esac
# count NAME VALUE: VALUE is a whole number from 1 (up to 9 digits)
count() { [[ $2 =~ ^[1-9][0-9]{0,8}$ ]] || fail "$1 must be a whole number from 1, not '$2' (scripts/bench-peers.sh --help)"; }
case $mode in
  http)
    rounds=${1:-5} duration=${2:-10s} conns=${3:-50} threads=${4:-2}
    [[ $duration =~ ^[1-9][0-9]{0,5}[smh]?$ ]] ||
      fail "duration must be wrk's, a whole number with s, m or h (10s, 2m), not '$duration'"
    count connections "$conns"; count threads "$threads"
    [ "$conns" -ge "$threads" ] ||
      fail "connections ($conns) must be at least threads ($threads): wrk gives every thread its own" ;;
  replay) rounds=${1:-3} lines=${2:-10000000} usage="[rounds] [lines]"; count lines "$lines" ;;
  redis-anchor) rounds=${1:-3} usage="[rounds]" ;;
  governor) rounds=${1:-5} usage="[rounds]" ;;
esac
[ "$mode" = http ] || [ $# -le $(wc -w <<<"$usage") ] || fail "$mode takes $usage, not '$*'"
count rounds "$rounds"
need() { command -v "$1" >/dev/null || fail "$1 is missing: apt-get install -y $2"; }
need redis-server redis-server; need curl curl; need python3 python3
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
wait_port() { # wait_port PORT NAME PID
  for _ in $(seq 200); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    kill -0 "$3" 2>/dev/null || fail "$2 exited: $(tail -5 "$tmp/$2.log")"
    sleep 0.05
  done
  fail "$2 does not listen on port $1"
}
median() { tr ' ' '\n' | { grep -v '^$' || true; } | sort -g | awk '{a[NR]=$1} END {if (NR) print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
# pgrep refuses a pattern over 15 characters (a process name's length):
# one name per call.
compiling() { pgrep -x rustc >/dev/null || pgrep -x cc1 >/dev/null || pgrep -x cc1plus >/dev/null; }
wait_for_compilers() { # up to WAIT_FOR_RUSTC seconds (default 600), then the round runs anyway
  local i
  for i in $(seq $((${WAIT_FOR_RUSTC:-600} / 5))); do compiling || return 0
    [ "$i" -gt 1 ] || echo "(waiting until no compiler is running)"; sleep 5; done
  ! compiling || echo "(a compiler is running: this round is noisy)"
}
commas() { sed -e ':a' -e 's/\([0-9]\)\([0-9]\{3\}\)\($\|,\)/\1,\2\3/;ta'; }

tmp=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null; rm -rf "$tmp"' EXIT
unset "${!THROTTLECRAB_@}" # its env vars could turn on more listeners
redis_port=
start_redis() { # start_redis [redis-server args...]: a throwaway redis-server on loopback
  redis_port=$(free_port)
  redis-server --port "$redis_port" --bind 127.0.0.1 --save "" --appendonly no "$@" >"$tmp/redis.log" 2>&1 &
  pids+=($!)
  wait_port "$redis_port" redis $!
}

if [ "$mode" = redis-anchor ]; then
  need redis-benchmark redis-tools
  # redis-cell is a cdylib (cargo install cannot build it): fetch its crate
  # and build it under $PEERS. 0.2.2 is the newest on crates.io.
  cell_v=0.2.2 cell_dir=$PEERS/redis-cell-0.2.2
  cell_so=$cell_dir/target/release/libredis_cell.so
  if [ ! -f "$cell_so" ]; then
    mkdir -p "$PEERS"
    { curl -sSfL "https://static.crates.io/crates/redis-cell/redis-cell-$cell_v.crate" ||
      curl -sSfL "https://crates.io/api/v1/crates/redis-cell/$cell_v/download"; } | tar xz -C "$PEERS" &&
      (cd "$cell_dir" && cargo rustc --quiet --release --lib --crate-type cdylib 2>"$tmp/cell.log") ||
      echo "redis-cell $cell_v not built ($(tail -1 "$tmp/cell.log" 2>/dev/null || echo 'download failed')): CL.THROTTLE skipped"
  fi
  if [ -f "$cell_so" ]; then start_redis --loadmodule "$cell_so"; else start_redis; fi
  cargo bench -q -p ratewarden-bench --bench redis_throughput --no-run 2>/dev/null
  plain=$(redis-cli -p "$redis_port" SCRIPT LOAD \
    "local v = redis.call('INCRBY', KEYS[1], ARGV[1]) redis.call('PEXPIRE', KEYS[1], ARGV[2]) return v")
  code=$(cat crates/ratewarden-redis/src/lua/decimal.lua; echo; cat crates/ratewarden-redis/src/lua/batch.lua)
  batch=$(redis-cli -p "$redis_port" SCRIPT LOAD "$code
return batches(KEYS, ARGV)")
  redis-cli -p "$redis_port" FUNCTION LOAD "#!lua name=bench_batch
$code
redis.register_function('bench_batch', function(keys, argv) return batches(keys, argv) end)" >/dev/null
  now=$(date +%s%N) now_hi=$((now / 10**15)) now_lo=$((now % 10**15))
  rb() { redis-benchmark -p "$redis_port" -c 64 -n 192000 -r 10000 -q "$@" |
    tr '\r' '\n' | grep -o '[0-9.]* requests per second' | tail -1 | cut -d' ' -f1; }
  declare -A res usec
  redis-cli -p "$redis_port" CONFIG RESETSTAT >/dev/null
  anchors=(incr_pexpire rw_batch_gcra rw_fcall_gcra rw_store_bench)
  [ ! -f "$cell_so" ] || anchors=(cl_throttle "${anchors[@]}")
  for round in $(seq 1 "$rounds"); do
    wait_for_compilers
    for a in "${anchors[@]}"; do
      case $a in
        # 1 per 60 s, bursts of 1,000,001: every call allowed, every key kept.
        cl_throttle) r=$(rb CL.THROTTLE "cell:{__rand_int__}" 1000000 1 60 1) ;;
        incr_pexpire) r=$(rb EVALSHA "$plain" 1 "plain:{__rand_int__}" 1 60000) ;;
        # One batch of one GCRA item as gcra.rs sends it (batch.lua's
        # order: batches, items, code, flags, arguments): now div and
        # mod 10^15, 1 ns a call (c·T), 1 s TTL slack, 10^12 ns of
        # allowance (B·T − c·T).
        rw_batch_gcra) r=$(rb EVALSHA "$batch" 1 "rw:gcra:bench:{__rand_int__}" 1 1 gc e "$now_hi" \
          "$now_lo" 1 1000 1000000000000) ;;
        rw_fcall_gcra) r=$(rb FCALL bench_batch 1 "rw:gcra:fbench:{__rand_int__}" 1 1 gc e "$now_hi" \
          "$now_lo" 1 1000 1000000000000) ;;
        rw_store_bench) r=$(RW_REDIS_URL="redis://127.0.0.1:$redis_port/0" \
          cargo bench -q -p ratewarden-bench --bench redis_throughput 2>/dev/null |
          sed -n 's/.*: \([0-9.]*\) decisions\/s.*/\1/p') ;;
      esac
      [ -n "$r" ] || fail "$a gave no figure"
      # Redis's own time per call of the anchor's command (commands a
      # script calls count apart, and within its time): what a call costs
      # Redis, apart from the client's share of the 2 cores.
      case $a in cl_throttle) c=cl.throttle ;; incr_pexpire | rw_batch_gcra) c=evalsha ;; *) c=fcall ;; esac
      us=$(redis-cli -p "$redis_port" INFO commandstats | tr -d '\r' |
        awk -F'[:=,]' -v c="cmdstat_$c" '$1 == c {print $7}')
      redis-cli -p "$redis_port" CONFIG RESETSTAT >/dev/null
      printf 'round %d %-15s %10.0f calls/s  %6.2f us/call in Redis\n' "$round" "$a" "$r" "$us"
      res[$a]+="$r " usec[$a]+="$us "
    done
  done
  if [ -f "$cell_so" ]; then # a peek (quantity 0) at one key of the run: allowed, its state kept
    peek=$(redis-cli -p "$redis_port" CL.THROTTLE "cell:{000000000042}" 1000000 1 60 0 | paste -sd' ')
    echo "CL.THROTTLE peek at one key after the run (allowed=0, limit, remaining, retry, reset): $peek"
  fi
  echo
  echo "| anchor (redis-benchmark -c 64 -r 10000; the store bench: 64 callers) | median calls/s | vs CL.THROTTLE | median µs per call in Redis |"
  echo "| --- | ---: | ---: | ---: |"
  cell=$(median <<<"${res[cl_throttle]:-}")
  for a in "${anchors[@]}"; do
    m=$(median <<<"${res[$a]}")
    vs=; [ -z "$cell" ] || vs=$(awk -v a="$m" -v b="$cell" 'BEGIN {printf "%.2fx", a / b}')
    echo "| $a | $(printf '%.0f' "$m" | commas) | $vs | $(median <<<"${usec[$a]}") |"
  done
  echo
  echo "command: $cmdline ($(redis-server --version | sed 's/.*v=\([^ ]*\).*/Redis \1/'), redis-cell $cell_v), $(date -u '+%Y-%m-%d %H:%M UTC')"
  exit 0
fi

if [ "$mode" = governor ]; then
  bench=${GOVERNOR_BENCH_BIN:-}
  if [ -z "$bench" ]; then
    bench=$(cargo bench --locked -p ratewarden-bench --bench decisions --no-run --message-format json 2>/dev/null |
      python3 -c 'import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "decisions" and m.get("executable"):
        print(m["executable"])')
    [ -n "$bench" ] || fail "cargo bench --no-run built no decisions bench"
  fi
  builds=(this "$bench")
  [ -z "${GOVERNOR_BASE_BENCH_BIN:-}" ] || builds=(base "$GOVERNOR_BASE_BENCH_BIN" "${builds[@]}")
  export CRITERION_HOME=$tmp/criterion
  names=("ratewarden memory gcra" "governor keyed" "ratewarden memory gcra, fixed time" "governor keyed, fake clock")
  estimate() { python3 -c 'import json, sys; print("%.1f" % json.load(open(sys.argv[1]))["median"]["point_estimate"])' \
    "$CRITERION_HOME/gcra_vs_governor/$1/new/estimates.json"; }
  declare -A ns
  for round in $(seq 1 "$rounds"); do
    wait_for_compilers
    for ((i = 0; i < ${#builds[@]}; i += 2)); do
      build=${builds[i]}
      "${builds[i + 1]}" --bench 'gcra_vs_governor/(ratewarden|governor)' --warm-up-time 1 \
        --measurement-time 3 --noplot >"$tmp/governor.out" 2>&1 || fail "bench failed: $(tail -3 "$tmp/governor.out")"
      line="round $round: $build"
      for n in "${names[@]}"; do v=$(estimate "$n"); ns[$build $n]+="$v "; line+=" | $n $v"; done
      for pair in clock fixed; do
        if [ $pair = clock ]; then a=${names[0]} b=${names[1]}; else a=${names[2]} b=${names[3]}; fi
        r=$(awk -v a="$(estimate "$a")" -v b="$(estimate "$b")" 'BEGIN {printf "%.3f", a / b}')
        ns[$build ratio $pair]+="$r "
      done
      echo "$line ns"
    done
  done
  echo
  echo "| build | ratewarden, clock | governor | ratio | ratewarden, fixed time | governor, fake clock | ratio |"
  echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"
  for ((i = 0; i < ${#builds[@]}; i += 2)); do
    build=${builds[i]} row="| ${builds[i]}"
    for n in "${names[@]:0:2}"; do row+=" | $(median <<<"${ns[$build $n]}")"; done
    row+=" | $(median <<<"${ns[$build ratio clock]}")x"
    for n in "${names[@]:2:2}"; do row+=" | $(median <<<"${ns[$build $n]}")"; done
    echo "$row | $(median <<<"${ns[$build ratio fixed]}")x |"
  done
  echo
  echo "command: $cmdline (ns per decision, medians of $rounds runs; ratios paired within each run), $(date -u '+%Y-%m-%d %H:%M UTC')"
  exit 0
fi

if [ "$mode" = replay ]; then
  [ -n "${RATEWARDEN_BIN:-}" ] || cargo build --release --quiet -p ratewarden-server --bin ratewarden
  builds=(this "${RATEWARDEN_BIN:-${CARGO_TARGET_DIR:-target}/release/ratewarden}")
  [ -z "${REPLAY_BASE_BIN:-}" ] || builds=(base "$REPLAY_BASE_BIN" "${builds[@]}")
  trace=$PEERS/trace-$lines-100000-42.txt
  if [ ! -f "$trace" ]; then
    mkdir -p "$PEERS"
    python3 scripts/gen-trace.py "$lines" 100000 42 >"$trace.part" && mv "$trace.part" "$trace"
  fi
  algorithms=(gcra fixed_window sliding_window sliding_log)
  declare -A secs
  TIMEFORMAT=%R
  for round in $(seq 1 "$rounds"); do
    wait_for_compilers
    for alg in "${algorithms[@]}"; do
      for ((i = 0; i < ${#builds[@]}; i += 2)); do
        name=${builds[i]}
        s=$({ time "${builds[i + 1]}" replay --algorithm "$alg" --limit 10 --window 1s \
          <"$trace" >/dev/null 2>"$tmp/replay.err" || fail "replay failed: $(tail -1 "$tmp/replay.err")"; } 2>&1)
        echo "round $round: $alg $name ${s} s"
        secs[$alg $name]+="$s "
      done
    done
  done
  echo
  echo "| algorithm | build | median s | decisions/s | vs base |"
  echo "| --- | --- | ---: | ---: | ---: |"
  for alg in "${algorithms[@]}"; do
    base=$(median <<<"${secs[$alg base]:-}")
    for ((i = 0; i < ${#builds[@]}; i += 2)); do
      name=${builds[i]} m=$(median <<<"${secs[$alg ${builds[i]}]}")
      vs=; [ -z "$base" ] || vs=$(awk -v a="$base" -v b="$m" 'BEGIN {printf "%.2fx", a / b}')
      rate=$(awk -v n="$lines" -v t="$m" 'BEGIN {printf "%.2f M", n / t / 1e6}')
      echo "| $alg | $name | $m | $rate | $vs |"
    done
  done
  echo
  echo "command: $cmdline (trace: scripts/gen-trace.py $lines 100000 42), $(date -u '+%Y-%m-%d %H:%M UTC')"
  exit 0
fi

# Every scenario, in the first round's order; the given ones are checked
# before anything is built or started.
all_scenarios=(bare bare_full rw_mem_ping rw_mem_check rw_mem_v1 rw_sqlite_ping rw_sqlite_ping1 rw_sqlite_check
  rw_redis_ping rw_redis_check throttlecrab limitador_mem limitador_redis)
scenarios=("${@:5}")
[ ${#scenarios[@]} -gt 0 ] || scenarios=("${all_scenarios[@]}")
for s in "${scenarios[@]}"; do
  [[ " ${all_scenarios[*]} " == *" $s "* ]] || fail "unknown scenario '$s' (one of: ${all_scenarios[*]})"
done

need wrk wrk
if [ -z "${RATEWARDEN_BIN:-}" ] || [ -z "${BARE_BIN:-}" ]; then
  cargo build --release --quiet -p ratewarden-server --bin ratewarden --example bare
fi
target=${CARGO_TARGET_DIR:-target}
ratewarden=${RATEWARDEN_BIN:-$target/release/ratewarden} bare=${BARE_BIN:-$target/release/examples/bare}
limitador=${LIMITADOR_BIN:-$PEERS/limitador-server}
throttlecrab=${THROTTLECRAB_BIN:-$PEERS/throttlecrab/bin/throttlecrab-server}

# scenario -> "server kind path"
scenario_route() {
  case $1 in
    bare) echo bare ping /ping ;;
    bare_full) echo bare ping /ping-full ;;
    rw_*_ping) echo "${1%_ping} ping /ping" ;;
    rw_*_ping1) echo "${1%_ping1} ping1 /ping" ;;
    rw_*_check) echo "${1%_check} check /rate/check" ;;
    rw_mem_v1) echo rw_mem v1 /v1/check ;;
    throttlecrab) echo throttlecrab throttle /throttle ;;
    limitador_*) echo "$1 limitador /check_and_report" ;;
    *) fail "unknown scenario '$1'" ;;
  esac
}
if [[ " ${scenarios[*]} " == *" limitador_"* ]] && [ ! -x "$limitador" ]; then
  echo "limitador-server not found at $limitador: build it from its repository and set LIMITADOR_BIN (limitador scenarios skipped)"
  read -ra scenarios <<<"$(printf '%s ' "${scenarios[@]}" | sed 's/limitador_[a-z]* //g')"
fi
if [[ " ${scenarios[*]} " == *" throttlecrab "* ]] && [ ! -x "$throttlecrab" ]; then
  # Its build script compiles its gRPC protocol with protoc; without
  # protoc the build fails with unresolved `throttlecrab_proto` imports.
  need protoc protobuf-compiler
  cargo install --quiet throttlecrab-server --version 0.4.40 --locked --root "$PEERS/throttlecrab"
fi

# The requests: one Lua file, its kind given after `--`; per-thread seeds.
cat >"$tmp/req.lua" <<'LUA'
local n = 0
function setup(thread) n = n + 1; thread:set("id", n) end
local make
function init(args)
  math.randomseed(os.time() * 100 + (id or 0))
  -- The path is the URL's (scenario_route's), never written here: wrk
  -- sends the path a request names, whatever the URL says.
  local path = wrk.path
  local json = { ["Content-Type"] = "application/json" }
  local post = function(body) return wrk.format("POST", path, json, body) end
  make = ({
    ping = function(k) return wrk.format("GET", path, { ["X-Client-Key"] = "client-" .. k }) end,
    ping1 = function(k) return wrk.format("GET", path, { ["X-Client-Key"] = "client-one" }) end,
    check = function(k)
      return wrk.format("POST", path, { ["X-User-Id"] = tostring(k),
        ["Content-Type"] = "application/json" }, '{"endpoint":"/orders"}')
    end,
    v1 = function(k) return post('{"policy":"api","key":"client-' .. k .. '"}') end,
    throttle = function(k)
      return post('{"key":"client-' .. k ..
        '","max_burst":1000000000,"count_per_period":1000000000,"period":60,"quantity":1}')
    end,
    limitador = function(k)
      return post('{"namespace":"bench","values":{"key":"client-' .. k .. '"},"delta":1}')
    end,
  })[args[1]]
end
request = function() return make(math.random(1, 10000)) end
LUA
cat >"$tmp/policies.toml" <<'TOML'
[[policies]]
name = "api"
algorithm = "gcra"
limit = 1000000000000
window = "1m"
TOML
cat >"$tmp/limits.yaml" <<'YAML'
- namespace: bench
  max_value: 1000000000000
  seconds: 60
  conditions: []
  variables:
    - descriptors[0]['key']
YAML

# Servers, each started once on a free loopback port; port[server] is set.
declare -A port started
start() { # start SERVER: starts it (and Redis if it needs it) unless running
  local s=$1 p
  [ -z "${started[$s]:-}" ] || return 0
  case $s in rw_redis | limitador_redis) [ -n "$redis_port" ] || start_redis ;; esac
  p=$(free_port)
  local rw=(serve --listen "127.0.0.1:$p" --ping-limit 1000000000000 --check-limit 1000000000)
  case $s in
    bare) exec "$bare" "127.0.0.1:$p" ;;
    rw_mem) RATEWARDEN_LOG=warn exec "$ratewarden" "${rw[@]}" --store memory --config "$tmp/policies.toml" ;;
    rw_sqlite) RATEWARDEN_LOG=warn exec "$ratewarden" "${rw[@]}" --db "$tmp/bench.db" ;;
    rw_redis) RATEWARDEN_LOG=warn exec "$ratewarden" "${rw[@]}" --store "redis://127.0.0.1:$redis_port/0" ;;
    throttlecrab) exec "$throttlecrab" --http --http-host 127.0.0.1 --http-port "$p" --log-level warn ;;
    # limitador listens on 0.0.0.0 by default: both its ports on loopback.
    limitador_mem) RUST_LOG=error exec "$limitador" -b 127.0.0.1 -p "$(free_port)" -B 127.0.0.1 -P "$p" \
      "$tmp/limits.yaml" memory --cache 1000000 ;;
    limitador_redis) RUST_LOG=error exec "$limitador" -b 127.0.0.1 -p "$(free_port)" -B 127.0.0.1 -P "$p" \
      "$tmp/limits.yaml" redis "redis://127.0.0.1:$redis_port/1" ;;
  esac >"$tmp/$s.log" 2>&1 &
  pids+=($!)
  wait_port "$p" "$s" $!
  port[$s]=$p started[$s]=1
}
for s in "${scenarios[@]}"; do
  read -r server kind path < <(scenario_route "$s")
  start "$server"
  # One request by hand: the route answers 200 (and throttlecrab allows).
  out=$(wrk -t1 -c1 -d1s -s "$tmp/req.lua" "http://127.0.0.1:${port[$server]}$path" -- "$kind" 2>&1)
  ! grep -qE 'Non-2xx|Socket errors' <<<"$out" || fail "$s does not answer 2xx on $path: $(grep -E 'Non-2xx|Socket' <<<"$out")"
done
[ -z "${started[throttlecrab]:-}" ] || curl -s -X POST -H 'Content-Type: application/json' \
  -d '{"key":"probe","max_burst":1000000000,"count_per_period":1000000000,"period":60}' \
  "http://127.0.0.1:${port[throttlecrab]}/throttle" | grep -q '"allowed":true' || fail "throttlecrab does not allow"

# One measured wrk run: prints "REQ_PER_S P99_MS" or "FAILED reason".
measure() { # measure SCENARIO
  local server kind path out
  read -r server kind path < <(scenario_route "$1")
  out=$(wrk -t"$threads" -c"$conns" -d"$duration" --latency -s "$tmp/req.lua" \
    "http://127.0.0.1:${port[$server]}$path" -- "$kind" 2>&1) || { echo "FAILED wrk: $(tail -1 <<<"$out")"; return; }
  if grep -qE 'Non-2xx|Socket errors' <<<"$out"; then
    echo "FAILED $(grep -E 'Non-2xx|Socket errors' <<<"$out" | sed 's/^ *//' | paste -sd';')"
    return
  fi
  awk '/^Requests\/sec/ {r = $2}
       $1 == "99%" {v = $2 + 0; if ($2 ~ /us$/) v /= 1000; else if ($2 ~ /[0-9]s$/) v *= 1000; else if ($2 ~ /m$/) v *= 60000; p = v}
       END {if (r == "" || p == "") print "FAILED no figures in wrk output"; else printf "%s %.2f\n", r, p}' <<<"$out"
}

declare -A rps p99 failed
for round in $(seq 1 "$rounds"); do
  wait_for_compilers
  # Each round starts one scenario later than the one before, so that
  # whatever the first run of a round meets falls on each scenario alike.
  shift_by=$(((round - 1) % ${#scenarios[@]}))
  for s in "${scenarios[@]:shift_by}" "${scenarios[@]:0:shift_by}"; do
    read -r server kind path < <(scenario_route "$s")
    wrk -t"$threads" -c"$conns" -d1s -s "$tmp/req.lua" "http://127.0.0.1:${port[$server]}$path" -- "$kind" >/dev/null 2>&1 || true
    res=$(measure "$s")
    if [[ $res == FAILED* ]]; then
      printf 'round %d %-16s %s\n' "$round" "$s" "$res"
      failed[$s]+="round $round: ${res#FAILED }. "
    else
      read -r r p <<<"$res"
      printf 'round %d %-16s %10.0f req/s  p99 %7.2f ms\n' "$round" "$s" "$r" "$p"
      rps[$s:$round]=$r p99[$s:$round]=$p
    fi
  done
done

ok() { [ -z "${failed[$1]:-}" ] && [[ " ${scenarios[*]} " == *" $1 "* ]]; }
med_of() { local -n arr=$1; local i; for i in $(seq 1 "$rounds"); do echo "${arr[$2:$i]:-}"; done | median; }
echo
echo "| scenario | median req/s | vs bare | p99 ms |"
echo "| --- | ---: | ---: | ---: |"
base=; ! ok bare || base=$(med_of rps bare)
for s in "${scenarios[@]}"; do
  if ! ok "$s"; then echo "| $s | failed: ${failed[$s]% } | | |"; continue; fi
  m=$(med_of rps "$s")
  vs=; [ -z "$base" ] || vs=$(awk -v a="$m" -v b="$base" 'BEGIN {printf "%.2fx", a / b}')
  printf '| %s | %s | %s | %.2f |\n' "$s" "$(printf '%.0f' "$m" | commas)" "$vs" "$(med_of p99 "$s")"
done
echo
# paired ARRAY LABEL PAIR...: for each a/b pair both of whose scenarios
# ran, the median of the rounds' ratios of ARRAY (rps or p99) and the
# ratios themselves.
paired() {
  local -n arr=$1
  local label=$2 pair a b i per
  shift 2
  for pair in "$@"; do
    a=${pair%/*} b=${pair#*/}
    ok "$a" && ok "$b" || continue
    per=$(for i in $(seq 1 "$rounds"); do
      awk -v x="${arr[$a:$i]}" -v y="${arr[$b:$i]}" 'BEGIN {printf "%.2f ", x / y}'; done)
    echo "$label $a / $b: $(median <<<"$per" | xargs printf "%.2f")x (per round: ${per% })"
  done
}
paired rps paired rw_mem_ping/bare rw_mem_ping/bare_full bare_full/throttlecrab rw_mem_ping/throttlecrab \
  rw_mem_v1/throttlecrab rw_mem_ping/limitador_mem rw_sqlite_ping/limitador_mem rw_sqlite_check/limitador_mem \
  rw_sqlite_ping/rw_mem_ping rw_sqlite_ping/rw_sqlite_ping1 rw_redis_ping/limitador_redis rw_redis_check/limitador_redis
# The p99 aims: the SQLite store's tail against the memory store's, the
# memory store's against the peers' (a ratio above 1 is a longer tail).
paired p99 "paired p99" rw_sqlite_ping/rw_mem_ping rw_sqlite_check/rw_mem_check rw_mem_ping/bare rw_mem_ping/throttlecrab
if [ -n "${started[throttlecrab]:-}" ]; then # it answers 200 with "allowed":false when it denies
  denied=$(curl -s "http://127.0.0.1:${port[throttlecrab]}/metrics" | awk '/^throttlecrab_requests_denied / {print $2}')
  [ "${denied:-0}" = 0 ] || echo "warning: throttlecrab denied $denied requests (200 with allowed=false)"
fi
if [ -f "$tmp/bench.db" ]; then
  echo "SQLite file after the run: $(du -cb "$tmp"/bench.db "$tmp"/bench.db-wal 2>/dev/null | awk 'END {printf "%.1f MB", $1 / 1e6}') (bench.db + -wal)"
fi
versions="ratewarden ${RATEWARDEN_BIN:-$(git rev-parse --short HEAD 2>/dev/null)$(git diff --quiet HEAD 2>/dev/null || echo '+changes')}"
[ -z "${started[throttlecrab]:-}" ] || versions+=", throttlecrab-server 0.4.40"
if [ -n "${started[limitador_mem]:-}${started[limitador_redis]:-}" ]; then
  versions+=", $("$limitador" --version 2>/dev/null | head -1)"
fi
[ -z "$redis_port" ] || versions+=", $(redis-server --version | sed 's/.*v=\([^ ]*\).*/Redis \1/')"
echo "command: $cmdline (wrk -t$threads -c$conns -d$duration --latency, 10,000 random keys, $rounds interleaved rounds)"
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'); $versions"
