#!/usr/bin/env bash
# bench/run.sh - throughput and CPU-per-request benchmark:
#   redis-benchmark -> redis-server            (direct)
#   redis-benchmark -> verbproxy -> redis      (vp: default settings, a shared upstream connection)
#   redis-benchmark -> verbproxy -> redis      (vpown: --shared-upstreams 0, a connection per client)
#   redis-benchmark -> bare forwarder -> redis (bare: bench/bare_forwarder.c, a connection per client)
#   redis-benchmark -> nutcracker -> redis     (tw, Debian's twemproxy)
#
# One redis-server is shared by all paths. Runs alternate between the paths
# (direct, vp, tw, direct, vp, tw, ...; the starting path rotates every round)
# and medians over the rounds are reported, because the machine is small and
# noisy. CPU time is read from /proc/<pid>/stat (utime+stime) of each proxy and
# of redis-server before and after every run.
#
# Usage: bash bench/run.sh            (from anywhere; idempotent)
#
# Environment (all optional):
#   BENCH_ROUNDS=5             rounds (each round = every path x pipeline x test)
#   BENCH_CLIENTS=50           redis-benchmark -c
#   BENCH_PIPELINES="1 16"     redis-benchmark -P values
#   BENCH_TESTS="get set"      redis-benchmark -t values (one run per test)
#   BENCH_N_P1, BENCH_N_P16    requests per run (-n) for -P 1 / -P 16; when unset
#                              it is calibrated so a direct run takes
#   BENCH_TARGET_SECS=1.5      ... about this many seconds (at least 50000 / 500000
#                              requests, so that the 10 ms tick stays small per request)
#   BENCH_SKIP_VPOWN=1         skip the verbproxy-with-own-connections leg
#   BENCH_VP_ARGS="..."        extra flags for verbproxy (both legs)
#   BENCH_SKIP_VP=1            skip the verbproxy leg (also skipped automatically,
#                              with a message, when verbproxy does not build)
#   BENCH_SKIP_TW=1            skip the twemproxy leg (also skipped when
#                              nutcracker is not installed and cannot be)
#   VERBPROXY_BIN=path         use this binary instead of building one
#   BENCH_BUILD_DIR=build-bench  build directory (relative to the repo root)
#   BENCH_NO_INSTALL=1         never call apt-get
#   BENCH_NO_BUILD=1           do not (re)build verbproxy; use what is there
#   BENCH_TASKSET_SERVER=LIST  run redis-server and the proxies under
#                              `taskset -c LIST` (e.g. 0); default: no pinning
#   BENCH_TASKSET_CLIENT=LIST  run redis-benchmark under `taskset -c LIST`
#   BENCH_RESULTS=path         where to write the report. Default:
#                              bench/RESULTS.md when all three paths ran,
#                              bench/out/RESULTS.partial.md otherwise.
# Raw per-run data goes to bench/out/raw.csv (bench/out/ is git-ignored).

set -uo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$SCRIPT_DIR/.." && pwd)
OUT_DIR="$SCRIPT_DIR/out"

ROUNDS=${BENCH_ROUNDS:-5}
CLIENTS=${BENCH_CLIENTS:-50}
PIPELINES=${BENCH_PIPELINES:-"1 16"}
TESTS=${BENCH_TESTS:-"get set"}
TARGET_SECS=${BENCH_TARGET_SECS:-1.5}
BUILD_DIR="$ROOT/${BENCH_BUILD_DIR:-build-bench}"
SKIP_VP=${BENCH_SKIP_VP:-0}
SKIP_TW=${BENCH_SKIP_TW:-0}

ORIG_CMD="bash bench/run.sh"
ORIG_ENV=$(env | grep -E '^(BENCH_|VERBPROXY_BIN=)' | sort | tr '\n' ' ')

# Helpers shared with bench/verbs.sh: log/die, cleanup traps, apt_install,
# build_verbproxy, free_port, cpu_ticks, wait_ready, start_redis, median...
# shellcheck source=bench/lib.sh
. "$SCRIPT_DIR/lib.sh"

need_redis
need_nutcracker

mkdir -p "$OUT_DIR"

# ---------------------------------------------------------------- build
build_verbproxy

# ---------------------------------------------------------------- start servers
TMP=$(mktemp -d /tmp/verbproxy-bench.XXXXXX)

start_redis

PATHS=(direct)
declare -A PORT PID
PORT[direct]=$RPORT; PID[direct]=""

if [ "$SKIP_VP" != 1 ]; then
    start_verbproxy # as configured by default: clients share an upstream connection
    if [ "$SKIP_VP" != 1 ]; then PATHS+=(vp); PORT[vp]=$VPORT; PID[vp]=$VPID; fi
fi
# The same binary with an upstream connection per client (shared-upstreams 0):
# what sharing buys, and the proxy's own cost next to the bare forwarder.
if [ "$SKIP_VP" != 1 ] && [ "${BENCH_SKIP_VPOWN:-0}" != 1 ]; then
    BENCH_VP_ARGS="${BENCH_VP_ARGS:-} --shared-upstreams 0" start_verbproxy
    if [ "$SKIP_VP" != 1 ]; then PATHS+=(vpown); PORT[vpown]=$VPORT; PID[vpown]=$VPID; fi
fi

# The floor of any one-connection-per-client proxy: a bare libuv byte
# forwarder (bench/bare_forwarder.c), measured in the same run.
if [ "${BENCH_SKIP_BARE:-0}" != 1 ] && cc -O2 -o "$TMP/bare_forwarder" "$SCRIPT_DIR/bare_forwarder.c" -luv 2>"$TMP/bare.build"; then
    BPORT=$(free_port) || die "no free port"
    "${TS_SERVER[@]}" "$TMP/bare_forwarder" "$BPORT" "$RPORT" &
    BPID=$!; PIDS+=("$BPID")
    if wait_ready bare "$BPID" "$BPORT"; then
        log "bare forwarder pid $BPID on 127.0.0.1:$BPORT"
        PATHS+=(bare); PORT[bare]=$BPORT; PID[bare]=$BPID
    fi
fi

if [ "$SKIP_TW" != 1 ]; then
    TPORT=$(free_port) || die "no free port"
    SPORT=$(free_port) || die "no free port"
    # One pool, one server, one server connection (twemproxy multiplexes all
    # clients onto it: that is its normal mode and what verbproxy is compared with).
    cat >"$TMP/nutcracker.yml" <<EOF
bench:
  listen: 127.0.0.1:$TPORT
  redis: true
  hash: fnv1a_64
  distribution: ketama
  preconnect: true
  auto_eject_hosts: false
  server_connections: 1
  backlog: 1024
  servers:
   - 127.0.0.1:$RPORT:1
EOF
    nutcracker -t -c "$TMP/nutcracker.yml" >"$TMP/tw.test" 2>&1 || { cat "$TMP/tw.test" >&2; die "bad nutcracker config"; }
    "${TS_SERVER[@]}" nutcracker -c "$TMP/nutcracker.yml" -s "$SPORT" -a 127.0.0.1 -v 4 -o "$TMP/tw.log" &
    TPID=$!; PIDS+=("$TPID")
    if wait_ready nutcracker "$TPID" "$TPORT"; then
        log "nutcracker pid $TPID on 127.0.0.1:$TPORT (stats $SPORT)"
        PATHS+=(tw); PORT[tw]=$TPORT; PID[tw]=$TPID
    else
        log "nutcracker did not answer PING on port $TPORT (alive: $(kill -0 "$TPID" 2>/dev/null && echo yes || echo no);" \
            "redis-cli says: $(redis-cli -h 127.0.0.1 -p "$TPORT" ping 2>&1 | head -c 200)): skipping the twemproxy leg. Its log:"
        sed 's/^/    /' "$TMP/tw.log" >&2
        kill -KILL "$TPID" 2>/dev/null
        SKIP_TW=1
    fi
fi

# ---------------------------------------------------------------- one run
# bench_rps port P test N -> sets RPS (empty on failure). Not run in a $(...)
# subshell, so that the traps can kill redis-benchmark at once.
RPS=""
bench_rps() {
    RPS=""
    "${TS_CLIENT[@]}" redis-benchmark -h 127.0.0.1 -p "$1" -c "$CLIENTS" -n "$4" -t "$3" -P "$2" -q --csv \
        >"$TMP/rb.out" 2>"$TMP/rb.err" &
    BENCH_PID=$!
    wait "$BENCH_PID"; local rc=$?
    BENCH_PID=""
    [ "$rc" = 0 ] || { log "redis-benchmark exited $rc: $(tail -n 3 "$TMP/rb.err" "$TMP/rb.out" | tr '\n' ' ')"; return; }
    RPS=$(awk -F'"' -v t="${3^^}" '$2 == t {print $4}' "$TMP/rb.out")
}

RAW="$OUT_DIR/raw.csv"
echo "round,pipeline,test,path,n,rps,proxy_us_per_req,redis_us_per_req,load1,proxy_user_us_per_req,redis_cmds_per_read" >"$RAW"

# Redis's commands and reads so far ("commands reads"): commands per read
# is how large the batches reaching it are, what its CPU per request follows.
redis_reads() { rcli info stats | tr -d '\r' | awk -F: '$1 == "total_commands_processed" {c = $2} $1 == "total_reads_processed" {r = $2} END {print c, r}'; }

run_one() {     # run_one round path P test N
    local path=$2 P=$3 t=$4 n=$5 ppid=${PID[$2]}
    local r0 r1 p0="" p1="" u0="" u1="" rps pus rus uus=""
    for pp in $REDIS_PID $ppid; do kill -0 "$pp" 2>/dev/null || die "process $pp died (path $path); logs in $TMP"; done
    local k0 k1 cpr
    k0=$(redis_reads)
    r0=$(cpu_ticks "$REDIS_PID"); [ -n "$ppid" ] && { p0=$(cpu_ticks "$ppid"); u0=$(cpu_ticks "$ppid" user); }
    bench_rps "${PORT[$path]}" "$P" "$t" "$n"; rps=$RPS
    r1=$(cpu_ticks "$REDIS_PID"); [ -n "$ppid" ] && { p1=$(cpu_ticks "$ppid"); u1=$(cpu_ticks "$ppid" user); }
    k1=$(redis_reads)
    # (the INFO itself is one command and one read on each side)
    cpr=$(awk -v a="$k0" -v b="$k1" 'BEGIN { split(a, x, " "); split(b, y, " "); r = y[2] - x[2] - 1; if (r > 0) printf "%.2f", (y[1] - x[1] - 1) / r }')
    [ -n "$rps" ] || rps=NA
    rus=$(us_per_req "$r0" "$r1" "$n")
    if [ -n "$ppid" ]; then pus=$(us_per_req "$p0" "$p1" "$n"); uus=$(us_per_req "$u0" "$u1" "$n"); else pus=""; fi
    echo "$1,$P,$t,$path,$n,$rps,$pus,$rus,$(cut -d' ' -f1 /proc/loadavg),$uus,$cpr" >>"$RAW"
    printf '[bench] round %s/%s  -P %-2s %-3s %-6s  %10s rps   proxy %6s us/req   redis %6s us/req  %6s cmds/read\n' \
        "$1" "$ROUNDS" "$P" "$t" "$path" "$rps" "${pus:--}" "$rus" "$cpr" >&2
}

# ---------------------------------------------------------------- calibrate + warm up
declare -A NREQ
for P in $PIPELINES; do
    v="BENCH_N_P$P"
    if [ -n "${!v:-}" ]; then
        NREQ[$P]=${!v}
    else
        cal=$(( P == 1 ? 20000 : 200000 ))
        bench_rps "$RPORT" "$P" set "$cal"; rps=$RPS
        [ -n "$rps" ] || die "calibration run failed"
        # floor: keep the 1/CLK_TCK granularity of the CPU figures small (10 ms / 50k = 0.2 us/req)
        floor=$(( P == 1 ? 50000 : 500000 ))
        NREQ[$P]=$(awk -v r="$rps" -v s="$TARGET_SECS" -v f="$floor" 'BEGIN { n = int(r * s / 10000 + 0.5) * 10000; if (n < f) n = f; print n }')
        log "calibrated -P $P: direct ~${rps%.*} rps -> -n ${NREQ[$P]} (set BENCH_N_P$P to override)"
    fi
done
for path in "${PATHS[@]}"; do   # warm-up: also checks that every path works, and stores the GET key
    bench_rps "${PORT[$path]}" 16 set 20000
    [ -n "$RPS" ] || die "warm-up through $path failed"
done

# ---------------------------------------------------------------- rounds
log "paths: ${PATHS[*]}; rounds: $ROUNDS; pipelines: $PIPELINES; tests: $TESTS; clients: $CLIENTS"
START_DATE=$(date -u '+%Y-%m-%d %H:%M:%S UTC')
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
NP=${#PATHS[@]}
for r in $(seq 1 "$ROUNDS"); do
    for P in $PIPELINES; do
        for t in $TESTS; do
            for i in $(seq 0 $((NP - 1))); do
                path=${PATHS[$(( (i + r - 1) % NP ))]}
                run_one "$r" "$path" "$P" "$t" "${NREQ[$P]}"
            done
        done
    done
done
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)

# ---------------------------------------------------------------- aggregate
col() {         # col P test path fieldno -> values
    awk -F, -v P="$1" -v t="$2" -v p="$3" -v f="$4" 'NR > 1 && $2 == P && $3 == t && $4 == p {print $f}' "$RAW"
}
declare -A MRPS MPUS MRUS MUUS MCPR RANGE
for P in $PIPELINES; do for t in $TESTS; do for path in "${PATHS[@]}"; do
    k="$P/$t/$path"
    MRPS[$k]=$(col "$P" "$t" "$path" 6 | median)
    RANGE[$k]=$(col "$P" "$t" "$path" 6 | minmax)
    MPUS[$k]=$(col "$P" "$t" "$path" 7 | median)
    MUUS[$k]=$(col "$P" "$t" "$path" 10 | median)
    MRUS[$k]=$(col "$P" "$t" "$path" 8 | median)
    MCPR[$k]=$(col "$P" "$t" "$path" 11 | median)
done; done; done

paired() {      # paired P test pathA pathB field -> median over rounds of A/B
    awk -F, -v P="$1" -v t="$2" -v a="$3" -v b="$4" -v f="$5" '
        NR > 1 && $2 == P && $3 == t && $f ~ /^[0-9.]+$/ { if ($4 == a) A[$1] = $f; if ($4 == b) B[$1] = $f }
        END { for (r in A) if ((r in B) && B[r] + 0 > 0) printf "%.4f\n", A[r] / B[r] }' "$RAW" | median
}
TABLE=$(
    echo "| -P | test | path | median rps | min-max rps | rps vs direct | proxy CPU us/req | of which user | redis CPU us/req | proxy+redis us/req | redis commands per read |"
    echo "|---:|------|------|-----------:|------------:|--------------:|-----------------:|--------------:|-----------------:|-------------------:|------------------------:|"
    for P in $PIPELINES; do for t in $TESTS; do for path in "${PATHS[@]}"; do
        k="$P/$t/$path"
        tot=""; [ -n "${MPUS[$k]}" ] && [ -n "${MRUS[$k]}" ] && tot=$(awk -v a="${MPUS[$k]}" -v b="${MRUS[$k]}" 'BEGIN{print a+b}')
        [ "$path" = direct ] && tot=${MRUS[$k]}
        name=$path; case $path in vp) name=verbproxy;; vpown) name="verbproxy, own connections";; tw) name=twemproxy;; bare) name="bare forwarder";; esac
        printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$P" "$t" "$name" \
            "$(fmt "${MRPS[$k]}" '%.0f')" "${RANGE[$k]}" "$(fmt "$(ratio "${MRPS[$k]}" "${MRPS[$P/$t/direct]}")" '%.3f')" \
            "$(fmt "${MPUS[$k]}" '%.2f')" "$(fmt "${MUUS[$k]}" '%.2f')" "$(fmt "${MRUS[$k]}" '%.2f')" "$(fmt "$tot" '%.2f')" \
            "$(fmt "${MCPR[$k]}" '%.1f')"
    done; done; done
)

RATIOS=$(
    echo "| ratio | ratio of medians | median of per-round ratios | target | verdict (ratio of medians) |"
    echo "|-------|-----------------:|---------------------------:|-------:|---------|"
    for t in get set; do
        T=${t^^}
        x=$(ratio "${MRPS[16/$t/vp]:-}" "${MRPS[16/$t/tw]:-}"); y=$(paired 16 "$t" vp tw 6)
        printf '| -P 16 %s: verbproxy rps / twemproxy rps | %s | %s | >= 1.3 | %s |\n' "$T" "$(fmt "$x" '%.3f')" "$(fmt "$y" '%.3f')" "$(verdict "$x" '>=' 1.3)"
        x=$(ratio "${MPUS[16/$t/vp]:-}" "${MPUS[16/$t/tw]:-}"); y=$(paired 16 "$t" vp tw 7)
        printf '| -P 16 %s: verbproxy CPU/req / twemproxy CPU/req | %s | %s | <= 0.5 | %s |\n' "$T" "$(fmt "$x" '%.3f')" "$(fmt "$y" '%.3f')" "$(verdict "$x" '<=' 0.5)"
    done
    for t in get set; do
        T=${t^^}
        x=$(ratio "${MPUS[16/$t/bare]:-}" "${MPUS[16/$t/tw]:-}"); y=$(paired 16 "$t" bare tw 7)
        printf '| -P 16 %s: bare forwarder CPU/req / twemproxy CPU/req (the floor of 1:1) | %s | %s | - | - |\n' "$T" "$(fmt "$x" '%.3f')" "$(fmt "$y" '%.3f')"
        x=$(ratio "${MPUS[16/$t/vpown]:-}" "${MPUS[16/$t/bare]:-}"); y=$(paired 16 "$t" vpown bare 7)
        printf '| -P 16 %s: verbproxy (own connections) CPU/req / bare forwarder CPU/req | %s | %s | - | - |\n' "$T" "$(fmt "$x" '%.3f')" "$(fmt "$y" '%.3f')"
        x=$(ratio "${MRPS[1/$t/vpown]:-}" "${MRPS[1/$t/bare]:-}"); y=$(paired 1 "$t" vpown bare 6)
        printf '| -P 1 %s: verbproxy (own connections) rps / bare forwarder rps | %s | %s | - | - |\n' "$T" "$(fmt "$x" '%.3f')" "$(fmt "$y" '%.3f')"
        for P in $PIPELINES; do
            x=$(ratio "${MRPS[$P/$t/vp]:-}" "${MRPS[$P/$t/vpown]:-}"); y=$(paired "$P" "$t" vp vpown 6)
            printf '| -P %s %s: verbproxy (shared) rps / verbproxy (own connections) rps | %s | %s | - | - |\n' "$P" "$T" "$(fmt "$x" '%.3f')" "$(fmt "$y" '%.3f')"
        done
    done
    for t in get set; do
        T=${t^^}
        x=$(ratio "${MRPS[1/$t/vp]:-}" "${MRPS[1/$t/direct]:-}"); y=$(paired 1 "$t" vp direct 6)
        printf '| -P 1 %s: verbproxy rps / direct rps | %s | %s | >= 0.65 | %s |\n' "$T" "$(fmt "$x" '%.3f')" "$(fmt "$y" '%.3f')" "$(verdict "$x" '>=' 0.65)"
    done
    # Redis's own CPU per request behind each proxy: how well the shared
    # connection batches (issue 9: behind verbproxy <= behind twemproxy).
    for P in $PIPELINES; do for t in get set; do
        T=${t^^}
        x=$(ratio "${MRUS[$P/$t/vp]:-}" "${MRUS[$P/$t/tw]:-}"); y=$(paired "$P" "$t" vp tw 8)
        printf '| -P %s %s: redis CPU/req behind verbproxy / behind twemproxy | %s | %s | <= 1 | %s |\n' "$P" "$T" "$(fmt "$x" '%.3f')" "$(fmt "$y" '%.3f')" "$(verdict "$x" '<=' 1)"
    done; done
)

echo
echo "$TABLE"
echo
echo "$RATIOS"
echo

# ---------------------------------------------------------------- report
if [ -n "${BENCH_RESULTS:-}" ]; then
    RESULTS=$BENCH_RESULTS
elif [ "$SKIP_VP" != 1 ] && [ "$SKIP_TW" != 1 ]; then
    RESULTS="$SCRIPT_DIR/RESULTS.md"
else
    RESULTS="$OUT_DIR/RESULTS.partial.md"
fi

CPU_MODEL=$(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)
VP_REV=$(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null || echo "no commit")
VP_DIRTY=$(cd "$ROOT" && [ -n "$(git status --porcelain -- proxy protocol CMakeLists.txt 2>/dev/null)" ] && echo " (+ uncommitted changes)")
skipped=""
[ "$SKIP_VP" = 1 ] && skipped="$skipped verbproxy"
[ "$SKIP_TW" = 1 ] && skipped="$skipped twemproxy"
KEEP_BLOCKS=$(other_blocks "$RESULTS")
{
    echo "# verbproxy benchmark results"
    echo
    echo "Generated by \`bench/run.sh\`."
    echo
    echo "- command: \`${ORIG_ENV}${ORIG_CMD}\`"
    echo "- each run: \`redis-benchmark -h 127.0.0.1 -p PORT -c $CLIENTS -n N -t TEST -P P -q --csv\` with TEST in {$TESTS}, P in {$PIPELINES}; N = $(for P in $PIPELINES; do printf -- '%s for -P %s, ' "${NREQ[$P]}" "$P"; done | sed 's/, $//')"
    echo "- $ROUNDS rounds; in each round the paths run back to back per (P, test), alternating (starting path rotates each round); medians over rounds"
    echo "- date: $START_DATE; load average before/after: $LOAD_BEFORE / $LOAD_AFTER"
    echo "- machine: nproc=$(nproc), CPU: ${CPU_MODEL:-unknown}, kernel $(uname -r)"
    echo "- versions: $(redis-server --version | awk '{print $1, $2, $3}'); $(redis-benchmark --version); $(command -v nutcracker >/dev/null && nutcracker -V 2>&1 | head -1); verbproxy ${VP_REV}${VP_DIRTY} (Release, ${BUILD_DIR#$ROOT/})"
    echo "- pinning: server side ${BENCH_TASKSET_SERVER:-none}, client ${BENCH_TASKSET_CLIENT:-none}"
    echo "- topology: one redis-server (\`--save \"\" --appendonly no\`); verbproxy (\`--upstream\` that server, defaults: clients share one upstream connection, \`shared-upstreams 1\`); verbproxy, own connections (the same with \`--shared-upstreams 0\`: one upstream connection per client); twemproxy = Debian nutcracker, one pool, one server, \`server_connections: 1\`, \`preconnect: true\`; bare forwarder = bench/bare_forwarder.c (libuv, one upstream connection per client, bytes only)"
    [ -n "$skipped" ] && echo "- **skipped legs:**$skipped"
    echo
    echo "CPU = utime+stime from /proc/PID/stat (all threads, clock tick = 1/$CLK_TCK s) read before and after each run, divided by N."
    echo "\"of which user\" is the proxy's utime alone (the rest is kernel time, mostly socket syscalls)."
    echo "\"redis CPU\" is redis-server's CPU per request on that path; \"proxy+redis\" is the server-side total (redis only, for direct)."
    echo "\"median of per-round ratios\" pairs the runs of the same round (run back to back), which is less sensitive to slow drifts of the machine's load."
    echo "Per-run data with the 1-min load average at each run: bench/out/raw.csv (not committed)."
    echo
    echo "## Results"
    echo
    echo "$TABLE"
    echo
    echo "## Targets"
    echo
    echo "$RATIOS"
    # The other scripts' sections of the same file survive a rerun of this one.
    if [ -n "$KEEP_BLOCKS" ]; then echo; echo "$KEEP_BLOCKS"; fi
} >"$RESULTS"
log "wrote ${RESULTS#$ROOT/}; raw runs in ${RAW#$ROOT/}"
