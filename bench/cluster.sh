#!/usr/bin/env bash
# bench/cluster.sh - verbproxy in front of a Redis Cluster (issue 13, "Benchmark"):
#   redis-benchmark --cluster -> the nodes            (direct: a cluster-aware client
#                                                      straight to the primaries)
#   redis-benchmark -> verbproxy -> the nodes         (proxy: a plain client, verbproxy
#                                                      with --upstream-mode cluster)
#
# One real cluster, started here: 3 primaries + 3 replicas (redis-server
# --cluster-enabled yes, each node in its own temp dir with its own nodes.conf
# and bus port, then redis-cli --cluster create --cluster-replicas 1), waited
# for until every node says cluster_state:ok (bench/lib.sh, start_cluster).
# Both paths run against it in the same run: in each round, for each -P and
# test, the two paths back to back, the first path alternating every round;
# medians over rounds.
#
# Keys: -r KEYSPACE (100000) on both paths. Through the proxy the keys are
# key:NNNNNNNNNNNN, spread over all 16384 slots; redis-benchmark --cluster
# puts a hash tag in them (key:{tag}:NNNNNNNNNNNN) that is one slot per
# primary - the first slot it owns, for the whole run (Redis 7.0's
# redis-benchmark never moves a node's current_slot_index) - so the direct
# path spreads its keys over the three primaries, not over their slots.
#
# Commands per read = each primary's INFO stats total_commands_processed /
# total_reads_processed over the run (a figure that load does not blur: how
# many requests Redis gets per read, hence how many reads, wakeups and reply
# writes it pays per request), per primary, "a/b/c".
#
# CPU per request = utime+stime from /proc/PID/stat, before and after each
# run, divided by the requests: "redis" = all six redis-server processes
# (replicas too: they apply every SET), "proxy" = verbproxy, "server side" =
# both (the issue's figure); the client's own (redis-benchmark's rusage, from
# /usr/bin/time) is given for reference, not counted.
#
# Every run is checked: no error reply from any node (INFO's
# total_error_replies on every primary stays put), the primaries served at
# least N commands of the test (so nothing answered them elsewhere), and
# redis-benchmark printed no error (Redis 7 redis-benchmark exits at the first
# error reply; -e is a no-op there); a run failing a check stops the bench.
#
# Run time: in threaded mode (--cluster always is) redis-benchmark ends a run
# on a 250 ms tick of its threads' timers, not at the last reply, so a run's
# time is rounded up to a multiple of 250 ms (Redis 7.0.15: a 5000-request run
# reports 5000 / 0.252 s whatever its speed). Runs are made long (above) and
# a run under 2.5 s is flagged in the report.
#
# Targets (issue 13): proxy/direct throughput >= 1.0x at -P 1, >= 0.6x at
# -P 16; server-side CPU per request at -P 1, proxy path / direct path <= 1.0.
#
# Usage: bash bench/cluster.sh
#        VERBPROXY_BIN=/path/to/verbproxy bash bench/cluster.sh   (a binary built elsewhere)
#        ROUNDS=1 REQUESTS=20000 bash bench/cluster.sh            (a quick look)
# Environment (optional):
#   ROUNDS (or BENCH_ROUNDS)=5    rounds
#   REQUESTS=N                    -n of every run; else BENCH_N_P1 / BENCH_N_P16
#                                 per -P; else calibrated so that a direct run takes
#   BENCH_TARGET_SECS=5           ... about this long (at least 100000 / 1000000):
#                                 see "Run time" below
#   BENCH_CLIENTS=50, BENCH_PIPELINES="1 16", BENCH_TESTS="set get" (one
#   redis-benchmark run per test, SET first so that GET finds keys),
#   BENCH_KEYSPACE=100000 (-r), BENCH_WARMUP_N=200000 (a SET -P 16 per path first)
#   BENCH_THREADS=3               redis-benchmark --threads on BOTH paths: --cluster
#                                 always runs threaded (one thread per primary unless
#                                 told), plain redis-benchmark would run one thread;
#                                 the same client on both paths. 0 = each path's own
#                                 default (direct: 3 threads, proxy: none).
#   BENCH_SEEDS=1                 how many nodes verbproxy gets as --upstream seeds
#                                 (node 0 first; 1-6)
#   BENCH_VP_ARGS="..."           extra verbproxy flags
#   VERBPROXY_BIN, BENCH_BUILD_DIR=build-bench, BENCH_NO_BUILD=1, BENCH_NO_INSTALL=1
#   BENCH_TASKSET_SERVER / BENCH_TASKSET_CLIENT  (as bench/run.sh)
#   BENCH_RESULTS=path            report file; default: the "Cluster" block of
#                                 bench/RESULTS.md when both paths ran, else
#                                 bench/out/cluster.partial.md
# Output: the tables on stdout; progress on stderr and in bench/out/cluster.log;
# per-run data in bench/out/cluster_raw.csv.
# Exit status: 0 when both paths were measured (whether or not the targets are
# met: see the verdicts), 2 when the proxy path could not run (verbproxy did not
# build, refused --upstream-mode cluster, or did not serve): the direct figures
# are still reported. 1 on any other failure.

set -uo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$SCRIPT_DIR/.." && pwd)
OUT_DIR="$SCRIPT_DIR/out"
LOG_TAG=cluster

ROUNDS=${ROUNDS:-${BENCH_ROUNDS:-5}}
CLIENTS=${BENCH_CLIENTS:-50}
PIPELINES=${BENCH_PIPELINES:-"1 16"}
TESTS=${BENCH_TESTS:-"set get"}
KEYSPACE=${BENCH_KEYSPACE:-100000}
WARMUP_N=${BENCH_WARMUP_N:-200000}
THREADS=${BENCH_THREADS:-3}
SEEDS=${BENCH_SEEDS:-1}
BUILD_DIR="$ROOT/${BENCH_BUILD_DIR:-build-bench}"
SKIP_VP=0
SKIP_TW=1
TARGET_SECS=${BENCH_TARGET_SECS:-5}
declare -A NREQ   # -n per -P: REQUESTS, else BENCH_N_P<P>, else calibrated below
for P in $PIPELINES; do
    v="BENCH_N_P$P"
    NREQ[$P]=${REQUESTS:-${!v:-}}
done

ORIG_CMD="bash bench/cluster.sh"
ORIG_ENV=$(env | grep -E '^(BENCH_|VERBPROXY_BIN=|ROUNDS=|REQUESTS=)' | sort | tr '\n' ' ')

# shellcheck source=bench/lib.sh
. "$SCRIPT_DIR/lib.sh"

mkdir -p "$OUT_DIR"
LOG_FILE="$OUT_DIR/cluster.log"
: >"$LOG_FILE"
log "$(date -u '+%Y-%m-%d %H:%M:%S UTC'): ${ORIG_ENV}${ORIG_CMD}"

need_redis
[ -x /usr/bin/time ] || apt_install time || die "/usr/bin/time not found (Debian package time)"
case $SEEDS in [1-6]) ;; *) die "BENCH_SEEDS=$SEEDS: 1 to 6" ;; esac
build_verbproxy
VP_WHY=""   # why the proxy path did not run (empty: it did)
if [ "$SKIP_VP" = 1 ]; then
    if [ -n "${VERBPROXY_BIN:-}" ]; then VP_WHY="VERBPROXY_BIN=$VERBPROXY_BIN is not executable"
    else VP_WHY="verbproxy did not build (bench/out/build.log)"; fi
fi

TMP=$(mktemp -d /tmp/verbproxy-bench.XXXXXX)

# ---------------------------------------------------------------- cluster
start_cluster
NODE0=${CL_PORTS[0]}

# ---------------------------------------------------------------- verbproxy
VPORT=""; VPID=""
# try_proxy: start verbproxy in cluster mode and check that it serves keys of
# every primary; else VP_WHY says why (and the process is gone).
try_proxy() {
    local seeds=() addrs=() i
    for i in $(seq 0 $((SEEDS - 1))); do
        seeds+=(--upstream "127.0.0.1:${CL_PORTS[$i]}"); addrs+=("127.0.0.1:${CL_PORTS[$i]}")
    done
    VPORT=$(free_port) || die "no free port"
    # shellcheck disable=SC2086
    "${TS_SERVER[@]}" "$VP_BIN" --port "$VPORT" --bind 127.0.0.1 --upstream-mode cluster "${seeds[@]}" \
        --loglevel warning ${BENCH_VP_ARGS:-} >"$TMP/vp.log" 2>&1 &
    VPID=$!; PIDS+=("$VPID")
    if ! wait_ready verbproxy "$VPID" "$VPORT"; then
        kill -KILL "$VPID" 2>/dev/null; wait "$VPID" 2>/dev/null
        if grep -qi 'not supported' "$TMP/vp.log"; then
            VP_WHY="verbproxy refuses --upstream-mode cluster: $(grep -i -m1 'not supported' "$TMP/vp.log")"
        else
            VP_WHY="verbproxy --upstream-mode cluster did not answer PING on port $VPORT: $(tail -n 3 "$TMP/vp.log" | tr '\n' ' ')"
        fi
        VPID=""
        return
    fi
    # Keys through the proxy until one of every primary was written, each
    # read back on the primary that owns it (the one that answers GET without
    # -MOVED) and through the proxy.
    local k want got owner seen=" " port
    for i in $(seq 0 100); do
        k="cluster:probe:$i"
        owner=""
        for port in "${CL_PRIMARIES[@]}"; do
            case $(redis-cli -p "$port" GET "$k" 2>&1) in MOVED*|ASK*) ;; *) owner=$port ;; esac
        done
        [ -n "$owner" ] || { VP_WHY="no primary owns $k (every one answered -MOVED or -ASK)"; break; }
        case "$seen" in *" $owner "*) continue ;; esac
        want="v$i.$RANDOM"
        got=$(redis-cli -p "$VPORT" SET "$k" "$want" 2>&1)
        [ "$got" = OK ] || { VP_WHY="SET $k through verbproxy answered '$got'"; break; }
        got=$(redis-cli -p "$owner" GET "$k" 2>&1)
        [ "$got" = "$want" ] || { VP_WHY="$k: its primary ($owner) has '$got', not '$want'"; break; }
        got=$(redis-cli -p "$VPORT" GET "$k" 2>&1)
        [ "$got" = "$want" ] || { VP_WHY="GET $k through verbproxy answered '$got'"; break; }
        seen="$seen$owner "
        [ "$(wc -w <<<"$seen")" -lt "${#CL_PRIMARIES[@]}" ] || break
    done
    if [ -z "$VP_WHY" ] && [ "$(wc -w <<<"$seen")" -lt "${#CL_PRIMARIES[@]}" ]; then
        VP_WHY="the probe keys reached only the primaries$seen"
    fi
    if [ -n "$VP_WHY" ]; then
        kill -KILL "$VPID" 2>/dev/null; wait "$VPID" 2>/dev/null; VPID=""
        return
    fi
    log "verbproxy pid $VPID on 127.0.0.1:$VPORT (--upstream-mode cluster, seeds ${addrs[*]}); a key of every primary went through it"
}
[ -n "$VP_WHY" ] || try_proxy

PATHS=(direct)
declare -A PROXY_PID=([direct]="")
declare -A BENCH_ARGS=([direct]="--cluster -p $NODE0")
if [ -z "$VP_WHY" ]; then
    PATHS+=(proxy); PROXY_PID[proxy]=$VPID; BENCH_ARGS[proxy]="-p $VPORT"
else
    log "PROXY PATH NOT MEASURED: $VP_WHY"
    [ -s "$TMP/vp.log" ] && sed 's/^/    /' "$TMP/vp.log" | tee -a "$LOG_FILE" >&2
    log "measuring the direct path only"
fi

# ---------------------------------------------------------------- one run
THREAD_ARGS=""
[ "$THREADS" = 0 ] || THREAD_ARGS="--threads $THREADS"

# primaries_stat -> "errors calls": total_error_replies and the test's calls, summed over the primaries
primaries_stat() {
    local port
    for port in "${CL_PRIMARIES[@]}"; do
        redis-cli -p "$port" INFO all | tr -d '\r'
    done | awk -F'[:,=]' -v n="cmdstat_$1" '
        $1 == "total_error_replies" { e += $2 }
        $1 == n { for (i = 2; i < NF; i += 2) if ($i == "calls") c += $(i + 1) }
        END { printf "%d %d\n", e, c }'
}

# node_reads -> one "commands reads" line per primary (INFO stats)
node_reads() {
    local port
    for port in "${CL_PRIMARIES[@]}"; do
        redis-cli -p "$port" INFO stats | tr -d '\r' | awk -F: '
            $1 == "total_commands_processed" { c = $2 } $1 == "total_reads_processed" { r = $2 }
            END { print c + 0, r + 0 }'
    done
}

# bench_run path P test N -> RPS, CLIENT_S (redis-benchmark's user+sys
# seconds), and BENCH_ERR (its error lines). Not in a $(...) subshell, so
# that the traps can kill redis-benchmark at once.
RPS=""; CLIENT_S=""; BENCH_ERR=""
bench_run() {
    RPS=""; CLIENT_S=""; BENCH_ERR=""
    # shellcheck disable=SC2086
    "${TS_CLIENT[@]}" /usr/bin/time -f '%U %S' -o "$TMP/rb.time" redis-benchmark -h 127.0.0.1 ${BENCH_ARGS[$1]} \
        $THREAD_ARGS -c "$CLIENTS" -n "$4" -r "$KEYSPACE" -t "$3" -P "$2" -q --csv >"$TMP/rb.out" 2>"$TMP/rb.err" &
    BENCH_PID=$!
    wait "$BENCH_PID"; local rc=$?
    BENCH_PID=""
    BENCH_ERR=$(grep -i -m3 'error' "$TMP/rb.out" "$TMP/rb.err" | tr '\n' ' ')
    [ "$rc" = 0 ] || { log "redis-benchmark ($1) exited $rc: $(tail -n 3 "$TMP/rb.err" "$TMP/rb.out" | tr '\n' ' ')"; return; }
    RPS=$(awk -F'"' -v t="${3^^}" '$2 == t {print $4}' "$TMP/rb.out")
    CLIENT_S=$(awk 'END {print $1 + $2}' "$TMP/rb.time")
}

# check_run path P test N stats_before stats_after: dies unless the run was
# clean (stats: primaries_stat before and after it)
check_run() {
    [ -n "$RPS" ] || die "redis-benchmark failed on the $1 path (-P $2 $3)"
    [ -z "$BENCH_ERR" ] || die "errors on the $1 path (-P $2 $3): $BENCH_ERR"
    awk -v a="$5" -v b="$6" -v n="$4" 'BEGIN { split(a, x, " "); split(b, y, " ");
        exit !(y[1] == x[1] && y[2] - x[2] >= n) }' \
        || die "the $1 path (-P $2 $3 -n $4): the primaries' (error replies, calls) went from ($5) to ($6): an error reply, or fewer calls than requests"
}

RAW="$OUT_DIR/cluster_raw.csv"
echo "round,pipeline,test,path,n,rps,proxy_us_per_req,redis_us_per_req,server_us_per_req,client_us_per_req,load1,secs,cmds_per_read" >"$RAW"
SHORT_RUNS=0   # runs under 2.5 s in threaded mode: their rps is low by up to 10% (the 250 ms tick)
run_one() { # run_one round path P test N
    local path=$2 P=$3 t=$4 n=$5 pp=${PROXY_PID[$2]}
    local r0 r1 p0="" p1="" rus pus="" sus cus s0 s1 x secs k0 k1 cpr
    for x in "${CL_PIDS[@]}" $pp; do kill -0 "$x" 2>/dev/null || die "process $x died; logs in $TMP"; done
    s0=$(primaries_stat "$t")
    k0=$(node_reads)
    r0=$(cpu_ticks_sum "${CL_PIDS[@]}"); [ -n "$pp" ] && p0=$(cpu_ticks "$pp")
    bench_run "$path" "$P" "$t" "$n"
    r1=$(cpu_ticks_sum "${CL_PIDS[@]}"); [ -n "$pp" ] && p1=$(cpu_ticks "$pp")
    s1=$(primaries_stat "$t")
    k1=$(node_reads)
    check_run "$path" "$P" "$t" "$n" "$s0" "$s1"
    rus=$(us_per_req "$r0" "$r1" "$n")
    [ -n "$pp" ] && pus=$(us_per_req "$p0" "$p1" "$n")
    sus=$(awk -v a="${pus:-0}" -v b="$rus" 'BEGIN { printf "%.3f", a + b }')
    cus=$(awk -v s="$CLIENT_S" -v n="$n" 'BEGIN { printf "%.3f", s * 1e6 / n }')
    secs=$(awk -v r="$RPS" -v n="$n" 'BEGIN { printf "%.3f", n / r }')
    cpr=$(paste -d' ' <(echo "$k0") <(echo "$k1") | awk '{ sep = NR > 1 ? "/" : ""; r = $4 > $2 ? ($3 - $1) / ($4 - $2) : 0; printf "%s%.1f", sep, r }')
    if [ "$path" = direct ] || [ "$THREADS" != 0 ]; then
        awk -v x="$secs" 'BEGIN { exit !(x < 2.5) }' && SHORT_RUNS=1
    fi
    echo "$1,$P,$t,$path,$n,$RPS,$pus,$rus,$sus,$cus,$(cut -d' ' -f1 /proc/loadavg),$secs,$cpr" >>"$RAW"
    log "$(printf 'round %s/%s  -P %-2s %-3s %-6s %10s rps  proxy %6s  redis %6s  server side %6s  (client %6s) us/req  commands per read %s' \
        "$1" "$ROUNDS" "$P" "$t" "$path" "$RPS" "${pus:--}" "$rus" "$sus" "$cus" "$cpr")"
}

# ---------------------------------------------------------------- warm-up
# Fills each path's keys (GET finds most of them) and checks that it works.
for path in "${PATHS[@]}"; do
    s0=$(primaries_stat set)
    bench_run "$path" 16 set "$WARMUP_N"
    check_run "$path" 16 set "$WARMUP_N" "$s0" "$(primaries_stat set)"
    log "warm-up $path: SET -P 16 -n $WARMUP_N: $RPS rps"
done

# ---------------------------------------------------------------- calibrate
# redis-benchmark's threaded mode (which --cluster always uses) ends a run on
# a 250 ms tick of its threads' timers, not when the last reply arrives: a
# run's time is rounded up to a multiple of 250 ms and its rps is low by up to
# 250 ms / run time. Hence long runs: N such that a direct run takes about
# TARGET_SECS (at least 100000 / 1000000 requests).
for P in $PIPELINES; do
    [ -z "${NREQ[$P]}" ] || continue
    cal=$(( P == 1 ? 50000 : 500000 ))
    s0=$(primaries_stat get)
    bench_run direct "$P" get "$cal"
    check_run direct "$P" get "$cal" "$s0" "$(primaries_stat get)"
    floor=$(( P == 1 ? 100000 : 1000000 ))
    NREQ[$P]=$(awk -v r="$RPS" -v s="$TARGET_SECS" -v f="$floor" 'BEGIN { n = int(r * s / 10000 + 0.5) * 10000; if (n < f) n = f; print n }')
    log "calibrated -P $P: direct ~${RPS%.*} rps -> -n ${NREQ[$P]} (REQUESTS or BENCH_N_P$P to override)"
done

# ---------------------------------------------------------------- rounds
log "paths: ${PATHS[*]}; rounds: $ROUNDS; pipelines: $PIPELINES; tests: $TESTS; clients: $CLIENTS; threads: ${THREAD_ARGS:-default}; -n $(for P in $PIPELINES; do printf '%s (-P %s) ' "${NREQ[$P]}" "$P"; done)"
run_rounds

# ---------------------------------------------------------------- figures
# per_node_median "a/b/c" lines (one per round) -> the median of each position, "a/b/c"
per_node_median() {
    local i n out="" v
    n=$(head -n 1 <<<"$1" | awk -F/ '{ print NF }')
    [ -n "$1" ] && [ "${n:-0}" -gt 0 ] || { echo "-"; return; }
    for i in $(seq 1 "$n"); do
        v=$(awk -F/ -v i="$i" '{ print $i }' <<<"$1" | median)
        out="$out${out:+/}$(fmt "$v" '%.1f')"
    done
    echo "$out"
}
col() { awk -F, -v P="$1" -v t="$2" -v p="$3" -v f="$4" 'NR > 1 && $2 == P && $3 == t && $4 == p {print $f}' "$RAW"; }
TABLE=$(
    echo "| -P | test | path | median rps | min-max rps | proxy CPU us/req | redis CPU us/req (6 nodes) | server side us/req | client us/req (not counted) | redis commands per read (each primary) |"
    echo "|---:|------|------|-----------:|------------:|-----------------:|---------------------------:|-------------------:|----------------------------:|---------------------------------------:|"
    for P in $PIPELINES; do for t in $TESTS; do for path in "${PATHS[@]}"; do
        name=$path; [ "$path" = direct ] && name="direct (--cluster)"; [ "$path" = proxy ] && name=verbproxy
        printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$P" "$t" "$name" \
            "$(fmt "$(col "$P" "$t" "$path" 6 | median)" '%.0f')" "$(col "$P" "$t" "$path" 6 | minmax)" \
            "$(fmt "$(col "$P" "$t" "$path" 7 | median)" '%.2f')" "$(fmt "$(col "$P" "$t" "$path" 8 | median)" '%.2f')" \
            "$(fmt "$(col "$P" "$t" "$path" 9 | median)" '%.2f')" "$(fmt "$(col "$P" "$t" "$path" 10 | median)" '%.2f')" \
            "$(per_node_median "$(col "$P" "$t" "$path" 13)")"
    done; done; done
)
# target_row label field P op target: per test, the median over rounds of
# proxy/direct (run back to back); the verdict takes the worse test. op "-":
# no target (a figure for reference).
target_row() {
    local label=$1 f=$2 P=$3 op=$4 tgt=$5 t v worst=""
    printf '| %s |' "$label"
    for t in $TESTS; do
        v=""
        [ -n "$VP_WHY" ] || v=$(paired_csv "$RAW" "$f" path proxy direct pipeline="$P" test="$t")
        printf ' %s |' "$(fmt "$v" '%.3f')"
        if [ -n "$v" ] && { [ -z "$worst" ] || awk -v v="$v" -v w="$worst" -v op="$op" \
                'BEGIN { exit !(op == ">=" ? v < w : v > w) }'; }; then worst=$v; fi
    done
    if [ "$op" = - ]; then printf ' - | - |\n'
    elif [ -n "$VP_WHY" ]; then printf ' %s %s | n/a: proxy path not measured |\n' "$op" "$tgt"
    else printf ' %s %s | %s |\n' "$op" "$tgt" "$(verdict "$worst" "$op" "$tgt")"; fi
}
TARGETS=$(
    printf '| verbproxy / direct (median of per-round ratios) |'; for t in $TESTS; do printf ' %s |' "${t^^}"; done; echo ' target | verdict |'
    printf '|---|'; for t in $TESTS; do printf -- '---:|'; done; echo '---:|---|'
    for P in $PIPELINES; do
        tgt=0.6; [ "$P" = 1 ] && tgt=1.0
        target_row "-P $P throughput" rps "$P" '>=' "$tgt"
    done
    for P in $PIPELINES; do
        if [ "$P" = 1 ]; then
            target_row "-P 1 server-side CPU per request (proxy + 6 redis-servers)" server_us_per_req 1 '<=' 1.0
        else
            target_row "-P $P server-side CPU per request (for reference)" server_us_per_req "$P" - -
        fi
    done
)

NOTE=""
[ -z "$VP_WHY" ] || NOTE="**Proxy path not measured: $VP_WHY.** Direct figures only."
if [ "$SHORT_RUNS" = 1 ]; then
    NOTE="${NOTE:+$NOTE }**Some runs lasted under 2.5 s**: redis-benchmark's threaded mode ends a run on a 250 ms tick, so their rps is low by up to 250 ms / run time (bench/out/cluster_raw.csv, column secs); give more requests for figures to keep."
    log "some runs lasted under 2.5 s: their rps is low by up to 250 ms / run time (redis-benchmark's threaded mode)"
fi
echo
[ -z "$NOTE" ] || { echo "$NOTE"; echo; }
echo "$TABLE"
echo
echo "$TARGETS"
echo
{ echo; [ -z "$NOTE" ] || { echo "$NOTE"; echo; }; echo "$TABLE"; echo; echo "$TARGETS"; } >>"$LOG_FILE"

# ---------------------------------------------------------------- report
CLUSTER_BEGIN='<!-- bench/cluster.sh: begin -->'
CLUSTER_END='<!-- bench/cluster.sh: end -->'
REV=$(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null || echo "no commit")
DIRTY=""
[ -z "$(cd "$ROOT" && git status --porcelain -- proxy protocol 2>/dev/null)" ] || DIRTY=" (+ uncommitted changes)"
VP_DESC="verbproxy ${REV}${DIRTY} (Release, ${BUILD_DIR#"$ROOT"/})"
[ -n "${VERBPROXY_BIN:-}" ] && VP_DESC="verbproxy $VERBPROXY_BIN"
SECTION=$(
    echo "$CLUSTER_BEGIN"
    echo "## Cluster: verbproxy in front of a Redis Cluster against a cluster-aware client"
    echo
    echo "Generated by \`bench/cluster.sh\` (see its header for the method)."
    echo
    echo "- command: \`${ORIG_ENV}${ORIG_CMD}\`"
    echo "- each run: \`redis-benchmark -c $CLIENTS -n N -r $KEYSPACE -t TEST -P P ${THREAD_ARGS:+$THREAD_ARGS }-q --csv\`, with \`--cluster -p NODE0\` on the direct path and \`-p PROXY\` on the proxy path; N = $(for P in $PIPELINES; do printf '%s at -P %s, ' "${NREQ[$P]}" "$P"; done | sed 's/, $//'); $ROUNDS rounds, paths alternating, medians"
    echo "- date: $START_DATE; load average before/after: $LOAD_BEFORE / $LOAD_AFTER"
    echo "- machine: nproc=$(nproc), CPU: $(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo), kernel $(uname -r)"
    echo "- versions: $(redis-server --version | awk '{print $1, $2, $3}'); $VP_DESC"
    echo "- topology: 3 primaries + 3 replicas on 127.0.0.1 (\`--save \"\" --appendonly no\`); verbproxy \`--upstream-mode cluster\` with $SEEDS seed node(s)${BENCH_VP_ARGS:+ and \`$BENCH_VP_ARGS\`}"
    echo "- CPU = utime+stime per request from /proc/PID/stat: redis = the 6 redis-servers, server side = proxy + redis; client = redis-benchmark (/usr/bin/time), not counted"
    [ -z "$NOTE" ] || { echo; echo "$NOTE"; }
    echo
    echo "$TABLE"
    echo
    echo "$TARGETS"
    echo "$CLUSTER_END"
)
if [ -n "${BENCH_RESULTS:-}" ]; then RESULTS=$BENCH_RESULTS
elif [ -z "$VP_WHY" ]; then RESULTS="$SCRIPT_DIR/RESULTS.md"
else RESULTS="$OUT_DIR/cluster.partial.md"; fi
put_block "$RESULTS" "$CLUSTER_BEGIN" "$CLUSTER_END" "$SECTION"
log "wrote ${RESULTS#"$ROOT"/}; raw runs in ${RAW#"$ROOT"/}; log in ${LOG_FILE#"$ROOT"/}"
if [ -n "$VP_WHY" ]; then
    log "PROXY PATH NOT MEASURED: $VP_WHY"
    exit 2
fi
