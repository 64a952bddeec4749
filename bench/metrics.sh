#!/usr/bin/env bash
# bench/metrics.sh - what the metrics cost (issue 12): redis-benchmark through
# verbproxy with the admin endpoint on (--metrics-port: every command counted
# and timed, /metrics scraped once a second as Prometheus would) against
# verbproxy with it off (--metrics-port 0: counted for VERBPROXY INFO, not
# timed), both in front of the same redis-server, in the same run. Paths
# alternate, the first rotating every round; the figure is the median over
# rounds of the per-round ratio on/off.
#
# Target: >= 0.97x at -P 1 and at -P 16, GET and SET.
#
# Usage: bash bench/metrics.sh
# Environment (optional): BENCH_ROUNDS=5, BENCH_CLIENTS=50,
#   BENCH_PIPELINES="1 16", BENCH_TESTS="get set", BENCH_N_P1=100000,
#   BENCH_N_P16=1000000, BENCH_VP_ARGS (extra verbproxy flags for both),
#   VERBPROXY_BIN, BENCH_BUILD_DIR, BENCH_NO_BUILD=1, BENCH_NO_INSTALL=1,
#   BENCH_RESULTS=path (default: the "Metrics" section of bench/RESULTS.md).

set -uo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$SCRIPT_DIR/.." && pwd)
OUT_DIR="$SCRIPT_DIR/out"
LOG_TAG=metrics

ROUNDS=${BENCH_ROUNDS:-5}
CLIENTS=${BENCH_CLIENTS:-50}
PIPELINES=${BENCH_PIPELINES:-"1 16"}
TESTS=${BENCH_TESTS:-"get set"}
BUILD_DIR="$ROOT/${BENCH_BUILD_DIR:-build-bench}"
SKIP_VP=0
SKIP_TW=1
declare -A NREQ=([1]=${BENCH_N_P1:-100000} [16]=${BENCH_N_P16:-1000000})

ORIG_CMD="bash bench/metrics.sh"
ORIG_ENV=$(env | grep -E '^(BENCH_|VERBPROXY_BIN=)' | sort | tr '\n' ' ')

# shellcheck source=bench/lib.sh
. "$SCRIPT_DIR/lib.sh"

need_redis
command -v curl >/dev/null || apt_install curl || die "curl not found"
mkdir -p "$OUT_DIR"
build_verbproxy
[ "$SKIP_VP" != 1 ] || die "verbproxy did not build"

TMP=$(mktemp -d /tmp/verbproxy-bench.XXXXXX)
start_redis

# ---------------------------------------------------------------- the two proxies
start_proxy() { # start_proxy name extra-flags... -> sets PORT_<name>, PID_<name>
    local name=$1 port pid
    shift
    port=$(free_port) || die "no free port"
    "${TS_SERVER[@]}" "$VP_BIN" --port "$port" --bind 127.0.0.1 --upstream "127.0.0.1:$RPORT" \
        --loglevel warning "$@" ${BENCH_VP_ARGS:-} >"$TMP/vp-$name.log" 2>&1 &
    pid=$!; PIDS+=("$pid")
    wait_ready "verbproxy ($name)" "$pid" "$port" || { sed 's/^/    /' "$TMP/vp-$name.log" >&2; die "verbproxy ($name) did not answer"; }
    printf -v "PORT_$name" '%s' "$port"
    printf -v "PID_$name" '%s' "$pid"
    log "verbproxy ($name) pid $pid on 127.0.0.1:$port $*"
}
MPORT=$(free_port) || die "no free port"
start_proxy on --metrics-port "$MPORT"
start_proxy off --metrics-port 0
curl -sf "http://127.0.0.1:$MPORT/metrics" | grep -q '^verbproxy_up ' || die "no /metrics on $MPORT"

# Prometheus's part: a scrape of the "on" proxy every second, all along.
( while :; do curl -sf -o /dev/null "http://127.0.0.1:$MPORT/metrics"; sleep 1; done ) &
SCRAPER=$!; PIDS+=("$SCRAPER")

PATHS=(on off)
declare -A PPORT=([on]=$PORT_on [off]=$PORT_off)
declare -A PPID_OF=([on]=$PID_on [off]=$PID_off)

RPS=""
bench_run() { # bench_run path P test N -> RPS
    RPS=""
    redis-benchmark -h 127.0.0.1 -p "${PPORT[$1]}" -c "$CLIENTS" -n "$4" -t "$3" -P "$2" -q --csv \
        >"$TMP/rb.out" 2>"$TMP/rb.err" &
    BENCH_PID=$!
    wait "$BENCH_PID"; local rc=$?
    BENCH_PID=""
    [ "$rc" = 0 ] || { log "redis-benchmark exited $rc: $(tail -n 3 "$TMP/rb.err" "$TMP/rb.out" | tr '\n' ' ')"; return; }
    RPS=$(awk -F'"' -v t="${3^^}" '$2 == t {print $4}' "$TMP/rb.out")
}

RAW="$OUT_DIR/metrics_raw.csv"
echo "round,pipeline,test,path,n,rps,proxy_us_per_req" >"$RAW"
run_one() { # run_one round path P test N
    local pp=${PPID_OF[$2]} p0 p1 pus
    for x in $REDIS_PID $PID_on $PID_off; do kill -0 "$x" 2>/dev/null || die "process $x died; logs in $TMP"; done
    p0=$(cpu_ticks "$pp")
    bench_run "$2" "$3" "$4" "$5"
    p1=$(cpu_ticks "$pp")
    [ -n "$RPS" ] || die "redis-benchmark failed on $2"
    pus=$(us_per_req "$p0" "$p1" "$5")
    echo "$1,$3,$4,$2,$5,$RPS,$pus" >>"$RAW"
    printf '[metrics] round %s/%s  -P %-2s %-3s %-3s %10s rps  proxy %6s us/req\n' "$1" "$ROUNDS" "$3" "$4" "$2" "$RPS" "$pus" >&2
}

for path in "${PATHS[@]}"; do # warm-up; stores the GET key
    bench_run "$path" 16 set 20000
    [ -n "$RPS" ] || die "warm-up through $path failed"
done

run_rounds
SCRAPES=$(curl -sf "http://127.0.0.1:$MPORT/metrics" | awk '$1 == "verbproxy_readiness_checks_total" {print $2}')

# ---------------------------------------------------------------- figures
col() { awk -F, -v P="$1" -v t="$2" -v p="$3" -v f="$4" 'NR > 1 && $2 == P && $3 == t && $4 == p {print $f}' "$RAW"; }
TABLE=$(
    echo "| -P | test | metrics | median rps | min-max rps | proxy CPU us/req |"
    echo "|---:|------|---------|-----------:|------------:|-----------------:|"
    for P in $PIPELINES; do for t in $TESTS; do for path in "${PATHS[@]}"; do
        printf '| %s | %s | %s | %s | %s | %s |\n' "$P" "$t" "$path" \
            "$(fmt "$(col "$P" "$t" "$path" 6 | median)" '%.0f')" "$(col "$P" "$t" "$path" 6 | minmax)" \
            "$(fmt "$(col "$P" "$t" "$path" 7 | median)" '%.2f')"
    done; done; done
)
TARGETS=$(
    echo "| ratio (median of per-round ratios, on / off) | GET | SET | target | verdict |"
    echo "|---|---:|---:|---:|---|"
    for P in $PIPELINES; do
        g=$(paired_csv "$RAW" rps path on off pipeline="$P" test=get)
        s=$(paired_csv "$RAW" rps path on off pipeline="$P" test=set)
        worst=$(printf '%s\n%s\n' "$g" "$s" | sort -g | head -1)
        printf '| -P %s throughput | %s | %s | >= 0.97 | %s |\n' "$P" "$(fmt "$g" '%.3f')" "$(fmt "$s" '%.3f')" "$(verdict "$worst" '>=' 0.97)"
        g=$(paired_csv "$RAW" proxy_us_per_req path on off pipeline="$P" test=get)
        s=$(paired_csv "$RAW" proxy_us_per_req path on off pipeline="$P" test=set)
        printf '| -P %s proxy CPU per request | %s | %s | - | - |\n' "$P" "$(fmt "$g" '%.3f')" "$(fmt "$s" '%.3f')"
    done
)
echo; echo "$TABLE"; echo; echo "$TARGETS"; echo

# ---------------------------------------------------------------- report
M_BEGIN='<!-- bench/metrics.sh: begin -->'
M_END='<!-- bench/metrics.sh: end -->'
REV=$(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null || echo "no commit")
DIRTY=$(cd "$ROOT" && [ -n "$(git status --porcelain -- proxy protocol 2>/dev/null)" ] && echo " (+ uncommitted changes)" || true)
SECTION=$(
    echo "$M_BEGIN"
    echo "## Metrics: the admin endpoint on against off"
    echo
    echo "Generated by \`bench/metrics.sh\` (see its header for the method)."
    echo
    echo "- command: \`${ORIG_ENV}${ORIG_CMD}\`"
    echo "- each run: \`redis-benchmark -c $CLIENTS -n N -t TEST -P P -q --csv\` through verbproxy; N = ${NREQ[1]} at -P 1, ${NREQ[16]} at -P 16; $ROUNDS rounds, paths alternating, medians"
    echo "- on: \`--metrics-port\` set (every command counted and timed, the readiness probe running: $SCRAPES checks by the end), \`/metrics\` scraped every second with curl during the whole run; off: \`--metrics-port 0\` (counted for VERBPROXY INFO, not timed); both proxies in front of the same redis-server, defaults otherwise (one shared upstream connection)"
    echo "- date: $START_DATE; load average before/after: $LOAD_BEFORE / $LOAD_AFTER (a shared machine: other jobs ran meanwhile; the paired per-round ratio is what is compared)"
    echo "- machine: nproc=$(nproc), CPU: $(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo), kernel $(uname -r)"
    echo "- versions: $(redis-server --version | awk '{print $1, $2, $3}'); verbproxy ${REV}${DIRTY} (Release)"
    echo
    echo "$TABLE"
    echo
    echo "$TARGETS"
    echo "$M_END"
)
if [ -n "${BENCH_RESULTS:-}" ]; then RESULTS=$BENCH_RESULTS; else RESULTS="$SCRIPT_DIR/RESULTS.md"; fi
put_block "$RESULTS" "$M_BEGIN" "$M_END" "$SECTION"
log "wrote ${RESULTS#$ROOT/}; raw runs in ${RAW#$ROOT/}"
