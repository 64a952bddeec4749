# shellcheck shell=bash
# bench/lib.sh - helpers shared by bench/run.sh, bench/verbs.sh,
# bench/leaderboard.sh and the others. Sourced, not run. Every function is
# safe under `set -e` (none fails unless it means to), so it serves both
# run.sh (`set -uo pipefail`) and verbs.sh (`set -euo pipefail`).
#
# The sourcing script sets, before sourcing:
#   SCRIPT_DIR, ROOT, OUT_DIR   bench/, the repo root, bench/out/
#   BUILD_DIR                   where build_verbproxy builds
#   SKIP_VP                     1 = no verbproxy wanted
# and may set LOG_TAG (default "bench") for the log prefix.
#
# State the helpers own: TMP (temp dir, removed on exit), PIDS (processes
# killed on exit), BENCH_PID (the running redis-benchmark, killed on exit or
# interrupt), VP_BIN (set by build_verbproxy), REDIS_PID/RPORT (start_redis).

LOG_TAG=${LOG_TAG:-bench}
# LOG_FILE (set by the script after sourcing, empty by default): log and die
# also append their lines there, so a run leaves its progress in bench/out/.
LOG_FILE=""
# VERBPROXY_BIN names the binary to bench; it is no directive, and verbproxy
# refuses every VERBPROXY_* variable that names none
# (docs/configuration.md#three-sources-file-environment-flags):
# kept as a shell variable, not passed on to the processes started here.
export -n VERBPROXY_BIN 2>/dev/null || true
log() {
    printf '[%s] %s\n' "$LOG_TAG" "$*" >&2
    [ -z "$LOG_FILE" ] || printf '[%s] %s\n' "$LOG_TAG" "$*" >>"$LOG_FILE"
}
die() { log "ERROR: $*"; exit 1; }

# ---------------------------------------------------------------- cleanup
TMP=""
PIDS=()
BENCH_PID=""
cleanup() {
    local rc=$?
    set +e
    trap - EXIT INT TERM
    [ -n "$BENCH_PID" ] && kill -TERM "$BENCH_PID" 2>/dev/null
    local p
    for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
    for _ in $(seq 1 30); do
        local alive=0
        for p in "${PIDS[@]}" $BENCH_PID; do kill -0 "$p" 2>/dev/null && alive=1; done
        [ "$alive" = 0 ] && break
        sleep 0.1
    done
    for p in "${PIDS[@]}" $BENCH_PID; do kill -KILL "$p" 2>/dev/null; done
    wait 2>/dev/null
    [ -n "$TMP" ] && rm -rf "$TMP"
    exit "$rc"
}
trap cleanup EXIT
trap 'log "interrupted"; exit 130' INT
trap 'log "terminated"; exit 143' TERM

# ---------------------------------------------------------------- install
SUDO=""
if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null; then SUDO="sudo"; fi
APT_UPDATED=0
apt_install() {   # apt_install pkg... ; returns non-zero on failure
    [ "${BENCH_NO_INSTALL:-0}" = 1 ] && return 1
    command -v apt-get >/dev/null || return 1
    if [ "$APT_UPDATED" = 0 ]; then
        log "apt-get update"
        $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null || return 1
        APT_UPDATED=1
    fi
    log "apt-get install $*"
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

# need_redis: redis-server, redis-benchmark and redis-cli, installed if missing.
need_redis() {
    local missing=()
    command -v redis-server >/dev/null || missing+=(redis-server)
    { command -v redis-benchmark >/dev/null && command -v redis-cli >/dev/null; } || missing+=(redis-tools)
    if [ ${#missing[@]} -gt 0 ]; then
        apt_install "${missing[@]}" || log "could not install: ${missing[*]}"
    fi
    command -v redis-server >/dev/null || die "redis-server not found"
    command -v redis-benchmark >/dev/null || die "redis-benchmark not found"
    command -v redis-cli >/dev/null || die "redis-cli not found"
}

# need_nutcracker: Debian's twemproxy, installed if missing; SKIP_TW=1 (with
# a message) when it cannot be had. A caller that set SKIP_TW=1 is left alone.
need_nutcracker() {
    [ "$SKIP_TW" != 1 ] || return 0
    command -v nutcracker >/dev/null || apt_install nutcracker || log "could not install: nutcracker"
    if ! command -v nutcracker >/dev/null; then
        log "nutcracker (twemproxy) not available: skipping twemproxy"
        SKIP_TW=1
    fi
}

# ---------------------------------------------------------------- build
# build_verbproxy: sets VP_BIN, or SKIP_VP=1 with a message. VERBPROXY_BIN
# names a binary to use as is; BENCH_NO_BUILD=1 uses what BUILD_DIR holds.
VP_BIN=""
build_verbproxy() {
    [ "$SKIP_VP" != 1 ] || return 0
    if [ -n "${VERBPROXY_BIN:-}" ]; then
        VP_BIN="$VERBPROXY_BIN"
        [ -x "$VP_BIN" ] || { log "VERBPROXY_BIN=$VP_BIN is not executable: skipping verbproxy leg"; SKIP_VP=1; }
        return 0
    fi
    if [ "${BENCH_NO_BUILD:-0}" = 1 ]; then
        VP_BIN="$BUILD_DIR/verbproxy"
        [ -x "$VP_BIN" ] || { log "$VP_BIN missing (BENCH_NO_BUILD=1): skipping verbproxy leg"; SKIP_VP=1; }
        return 0
    fi
    local bmissing=() pk=() p
    for p in cmake pkg-config gcc make; do command -v "$p" >/dev/null || bmissing+=("$p"); done
    for p in libuv1-dev libhiredis-dev libjemalloc-dev; do
        dpkg -s "$p" >/dev/null 2>&1 || bmissing+=("$p")
    done
    if [ ${#bmissing[@]} -gt 0 ]; then
        # map commands to packages
        for p in "${bmissing[@]}"; do case $p in gcc|make) pk+=(build-essential);; *) pk+=("$p");; esac; done
        apt_install $(printf '%s\n' "${pk[@]}" | sort -u) || log "could not install build deps: ${pk[*]}"
    fi
    log "building verbproxy (Release) in ${BUILD_DIR#$ROOT/} (log: bench/out/build.log)"
    # VP_TESTS=OFF: the bench needs only the proxy, not Criterion.
    if (cd "$ROOT" && cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DVP_TESTS=OFF -DVP_SANITIZE=OFF \
            && cmake --build "$BUILD_DIR" --target verbproxy -j"$(nproc)") >"$OUT_DIR/build.log" 2>&1 \
       && [ -x "$BUILD_DIR/verbproxy" ]; then
        VP_BIN="$BUILD_DIR/verbproxy"
    else
        log "verbproxy did not build: skipping the verbproxy leg (see bench/out/build.log; tail below)"
        tail -n 15 "$OUT_DIR/build.log" | sed 's/^/    /' >&2
        SKIP_VP=1
    fi
}

# ---------------------------------------------------------------- processes
TS_SERVER=(); TS_CLIENT=()
[ -n "${BENCH_TASKSET_SERVER:-}" ] && TS_SERVER=(taskset -c "$BENCH_TASKSET_SERVER")
[ -n "${BENCH_TASKSET_CLIENT:-}" ] && TS_CLIENT=(taskset -c "$BENCH_TASKSET_CLIENT")

CLK_TCK=$(getconf CLK_TCK)
USED_PORTS=" "
# Ports are taken below the ephemeral range, so that no client socket of
# another test (or one in TIME_WAIT) can hold them.
EPH_LOW=$(awk '{print $1}' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
[ "${EPH_LOW:-0}" -gt 12000 ] 2>/dev/null || EPH_LOW=32768
free_port() {
    local p
    for _ in $(seq 1 200); do
        p=$(( 10000 + RANDOM % (EPH_LOW - 10000) ))
        case "$USED_PORTS" in *" $p "*) continue;; esac
        if [ -z "$(ss -Htan "( sport = :$p )" 2>/dev/null)" ]; then
            USED_PORTS="$USED_PORTS$p "
            echo "$p"; return 0
        fi
    done
    return 1
}

cpu_ticks() {   # cpu_ticks pid [user] -> utime+stime (or utime only) of all threads, in clock ticks
    local s
    s=$(cat "/proc/$1/stat" 2>/dev/null) || { echo ""; return 0; }
    s=${s##*) }          # drop "pid (comm) ", comm may contain spaces/parens
    awk -v f="${2:-}" '{print (f == "user") ? $12 : $12 + $13}' <<<"$s"
}

cpu_ticks_sum() {   # cpu_ticks_sum pid... -> utime+stime of them all, in clock ticks (empty if one is gone)
    local p t sum=0
    for p in "$@"; do
        t=$(cpu_ticks "$p")
        [ -n "$t" ] || { echo ""; return 0; }
        sum=$((sum + t))
    done
    echo "$sum"
}

wait_ready() {  # wait_ready name pid port
    for _ in $(seq 1 100); do
        kill -0 "$2" 2>/dev/null || return 1
        [ "$(redis-cli -h 127.0.0.1 -p "$3" ping 2>/dev/null)" = PONG ] && return 0
        sleep 0.1
    done
    return 1
}

# start_redis: a throwaway redis-server on a free port, data in $TMP (made
# here if unset). Sets RPORT and REDIS_PID.
start_redis() {
    [ -n "$TMP" ] || TMP=$(mktemp -d /tmp/verbproxy-bench.XXXXXX)
    RPORT=$(free_port) || die "no free port"
    "${TS_SERVER[@]}" redis-server --port "$RPORT" --bind 127.0.0.1 --save "" --appendonly no \
        --dir "$TMP" --daemonize no --protected-mode no --logfile "$TMP/redis.log" &
    REDIS_PID=$!; PIDS+=("$REDIS_PID")
    wait_ready redis "$REDIS_PID" "$RPORT" || { cat "$TMP/redis.log" >&2; die "redis-server did not start"; }
    log "redis-server pid $REDIS_PID on 127.0.0.1:$RPORT"
}

# ---------------------------------------------------------------- redis cluster
# start_cluster: a real Redis Cluster of CLUSTER_NODES (default 6) nodes,
# CLUSTER_REPLICAS (default 1) replica per primary, as the tests make it
# (tests/support/cluster.c): each node in its own dir under $TMP with its own
# nodes.conf and an explicit bus port, then `redis-cli --cluster create`, then
# a wait (deadline CLUSTER_DEADLINE_S, default 30 s) until every node agrees.
# Sets CL_PORTS and CL_PIDS (every node, in creation order) and CL_PRIMARIES
# (the ports of the primaries). Dies on failure, with the logs.
CL_PORTS=(); CL_PIDS=(); CL_PRIMARIES=()
start_cluster() {
    local n=${CLUSTER_NODES:-6} reps=${CLUSTER_REPLICAS:-1} i port bus dir addrs=()
    [ -n "$TMP" ] || TMP=$(mktemp -d /tmp/verbproxy-bench.XXXXXX)
    for i in $(seq 0 $((n - 1))); do
        port=$(free_port) || die "no free port"
        bus=$(free_port) || die "no free port"
        dir="$TMP/node$i"
        mkdir -p "$dir"
        # diskless sync at once: a replica is attached (and CLUSTER SLOTS
        # lists it) within a second, not after the 5 s wait for more replicas
        "${TS_SERVER[@]}" redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no \
            --dir "$dir" --daemonize no --protected-mode no --logfile "$dir/redis.log" \
            --cluster-enabled yes --cluster-config-file nodes.conf --cluster-port "$bus" \
            --cluster-node-timeout 5000 --repl-diskless-sync-delay 0 &
        CL_PIDS+=($!); PIDS+=($!); CL_PORTS+=("$port")
        addrs+=("127.0.0.1:$port")
    done
    for i in $(seq 0 $((n - 1))); do
        wait_ready "node$i" "${CL_PIDS[$i]}" "${CL_PORTS[$i]}" \
            || { tail -n 20 "$TMP/node$i/redis.log" >&2; die "cluster node $i (port ${CL_PORTS[$i]}) did not start"; }
    done
    # </dev/null: --cluster-yes answers the one question; nothing may wait on a tty
    timeout "${CLUSTER_DEADLINE_S:-30}" redis-cli --cluster create "${addrs[@]}" --cluster-replicas "$reps" \
        --cluster-yes </dev/null >"$TMP/cluster-create.log" 2>&1 \
        || { tail -n 30 "$TMP/cluster-create.log" >&2; die "redis-cli --cluster create failed"; }
    cluster_wait_ok "${CLUSTER_DEADLINE_S:-30}" \
        || die "the cluster did not reach cluster_state:ok on every node within ${CLUSTER_DEADLINE_S:-30} s"
    log "redis cluster: primaries ${CL_PRIMARIES[*]}, all nodes ${CL_PORTS[*]} (pids ${CL_PIDS[*]})"
}

# cluster_ready: every node says cluster_state:ok with all 16384 slots ok and
# knows every node, there are nodes/(replicas+1) primaries, and every replica's
# link to its primary is up. Sets CL_PRIMARIES.
cluster_ready() {
    local n=${#CL_PORTS[@]} reps=${CLUSTER_REPLICAS:-1} port info prim=() role
    for port in "${CL_PORTS[@]}"; do
        info=$(redis-cli -h 127.0.0.1 -p "$port" CLUSTER INFO 2>/dev/null | tr -d '\r')
        grep -qx 'cluster_state:ok' <<<"$info" || return 1
        grep -qx 'cluster_slots_ok:16384' <<<"$info" || return 1
        grep -qx "cluster_known_nodes:$n" <<<"$info" || return 1
        info=$(redis-cli -h 127.0.0.1 -p "$port" INFO replication 2>/dev/null | tr -d '\r')
        role=$(awk -F: '$1 == "role" {print $2}' <<<"$info")
        case $role in
            master) grep -qx "connected_slaves:$reps" <<<"$info" || return 1; prim+=("$port") ;;
            slave) grep -qx 'master_link_status:up' <<<"$info" || return 1 ;;
            *) return 1 ;;
        esac
    done
    [ "${#prim[@]}" = $((n / (reps + 1))) ] || return 1
    CL_PRIMARIES=("${prim[@]}")
}

cluster_wait_ok() {   # cluster_wait_ok seconds -> 0 once cluster_ready, 1 at the deadline
    local end=$((SECONDS + $1))
    while [ "$SECONDS" -lt "$end" ]; do
        cluster_ready && return 0
        sleep 0.2
    done
    cluster_ready
}

# start_verbproxy: VP_BIN in front of RPORT, with BENCH_VP_ARGS (extra flags,
# word-split) if set. Sets VPORT and VPID, or
# SKIP_VP=1 (with its log) when it does not answer PING.
start_verbproxy() {
    VPORT=$(free_port) || die "no free port"
    "${TS_SERVER[@]}" "$VP_BIN" --port "$VPORT" --bind 127.0.0.1 --upstream "127.0.0.1:$RPORT" \
        --loglevel warning ${BENCH_VP_ARGS:-} >"$TMP/vp.log" 2>&1 &
    VPID=$!; PIDS+=("$VPID")
    if wait_ready verbproxy "$VPID" "$VPORT"; then
        log "verbproxy pid $VPID on 127.0.0.1:$VPORT"
    else
        log "verbproxy did not answer PING on port $VPORT: skipping the verbproxy leg. Its log:"
        sed 's/^/    /' "$TMP/vp.log" >&2
        kill -KILL "$VPID" 2>/dev/null || true
        SKIP_VP=1
    fi
}

# ---------------------------------------------------------------- redis-server
# (after start_redis: RPORT set)
# rcli args... -> redis-cli to the bench's redis-server
rcli() { redis-cli -h 127.0.0.1 -p "$RPORT" "$@"; }

# script_load file -> its SHA-1, after SCRIPT LOAD on the server of the
# text Redis runs (the file with its helpers put in, assemble_script: that is
# what verbproxy pins), which must answer that text's own SHA-1.
script_load() {
    local sha want text
    [ -f "$1" ] || die "no script $1"
    text="$TMP/assembled.$(basename "$1")"
    assemble_script "$1" >"$text"
    want=$(sha1sum "$text" | cut -d' ' -f1)
    sha=$(rcli -x SCRIPT LOAD <"$text")
    [ "$sha" = "$want" ] || die "SCRIPT LOAD $1 answered '$sha', not its SHA-1 $want"
    echo "$sha"
}

# cmdstat NAME -> "calls usec failed_calls" of INFO commandstats (0 0 0 if absent)
cmdstat() {
    rcli INFO commandstats | tr -d '\r' | awk -F'[:,=]' -v n="cmdstat_$1" '
        $1 == n { for (i = 2; i < NF; i += 2) v[$i] = $(i + 1) }
        END { printf "%d %d %d\n", v["calls"], v["usec"], v["failed_calls"] }'
}

# main_cpu -> redis-server's main-thread CPU time (user + sys), in seconds
main_cpu() {
    rcli INFO cpu | tr -d '\r' | awk -F: '$1 ~ /^used_cpu_(user|sys)_main_thread$/ {t += $2} END {printf "%.6f\n", t}'
}

# ---------------------------------------------------------------- raw CSVs
# sel file key=value... -> column `f` (name) of the rows matching every key=value
sel() {
    local file=$1 f=$2
    shift 2
    awk -F, -v f="$f" -v conds="$*" '
        NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; nc = split(conds, c, " "); next }
        { ok = 1; for (k = 1; k <= nc; k++) { split(c[k], kv, "="); if ($(col[kv[1]]) != kv[2]) ok = 0 }
          if (ok) print $(col[f]) }' "$file"
}
# paired_csv file field keycol A B conds... -> median over rounds of (row keycol=A)/(row keycol=B)
paired_csv() {
    local file=$1 f=$2 kc=$3 a=$4 b=$5
    shift 5
    paste -d' ' <(sel "$file" round "$@" "$kc=$a"; ) <(sel "$file" "$f" "$@" "$kc=$a") >"$TMP/pa"
    paste -d' ' <(sel "$file" round "$@" "$kc=$b"; ) <(sel "$file" "$f" "$@" "$kc=$b") >"$TMP/pb"
    awk 'NR == FNR { A[$1] = $2; next } ($1 in A) && $2 + 0 > 0 && A[$1] ~ /^[0-9.]+$/ { printf "%.4f\n", A[$1] / $2 }' \
        "$TMP/pa" "$TMP/pb" | median
}

# ---------------------------------------------------------------- figures
median() {      # numbers on stdin -> median (empty if none)
    { grep -E '^[0-9.eE+-]+$' || true; } | sort -g | awk '{a[NR]=$1} END {
        if (NR == 0) exit; if (NR % 2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2 }'
}
minmax() { { grep -E '^[0-9.eE+-]+$' || true; } | sort -g | awk 'NR==1{mn=$1} {mx=$1} END{if(NR) printf "%.0f-%.0f", mn, mx}'; }

us_per_req() {  # ticks_before ticks_after n
    awk -v a="$1" -v b="$2" -v n="$3" -v hz="$CLK_TCK" \
        'BEGIN { if (a == "" || b == "") print "NA"; else printf "%.3f", (b - a) / hz * 1e6 / n }'
}
fmt() { awk -v x="$1" -v f="$2" 'BEGIN { if (x == "") print "-"; else printf f, x }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b + 0 == 0) print ""; else printf "%.3f", a / b }'; }
verdict() {     # verdict value op target
    [ -n "$1" ] || { echo "n/a (no data: leg skipped?)"; return 0; }
    awk -v x="$1" -v op="$2" -v t="$3" 'BEGIN { ok = (op == ">=") ? (x >= t) : (x <= t); print ok ? "met" : "NOT met" }'
}

# ---------------------------------------------------------------- report
# RESULTS.md is shared: run.sh writes the file's head and its own sections;
# every other script (verbs.sh, soak.sh, idle_memory.sh) owns one block
# between its two markers. Each keeps the others'.
VERBS_BEGIN='<!-- bench/verbs.sh: begin -->'
VERBS_END='<!-- bench/verbs.sh: end -->'
SOAK_BEGIN='<!-- bench/soak.sh: begin -->'
SOAK_END='<!-- bench/soak.sh: end -->'
CONVEYOR_BEGIN='<!-- bench/conveyor.sh: begin -->'
CONVEYOR_END='<!-- bench/conveyor.sh: end -->'
IDLE_BEGIN='<!-- bench/idle_memory.sh: begin -->'
IDLE_END='<!-- bench/idle_memory.sh: end -->'
block() {  # block file begin end -> that block of file, markers included (nothing if none)
    [ -f "$1" ] || return 0
    awk -v b="$2" -v e="$3" '$0 == b {on = 1} on {print} $0 == e {on = 0}' "$1"
}
without_block() {  # without_block file begin end -> file without that block (and the blank lines before it)
    [ -f "$1" ] || return 0
    awk -v b="$2" -v e="$3" '
        $0 == b {on = 1; held = ""; next} on {if ($0 == e) on = 0; next}
        $0 == "" {held = held "\n"; next} {printf "%s%s\n", held, $0; held = ""}' "$1"
}
other_blocks() {  # other_blocks file -> everything after run.sh's own text
    # (from the first block marker to the end: the other scripts' blocks,
    # and the notes written by hand between them, which a rerun must keep)
    [ -f "$1" ] || return 0
    awk '/^<!-- bench\// {on = 1} on {print}' "$1"
}
put_block() {  # put_block file begin end section -> file with that block replaced by section (made if missing)
    if [ -f "$1" ]; then
        { without_block "$1" "$2" "$3"; echo; echo "$4"; } >"$TMP/results.md"
    else
        echo "$4" >"$TMP/results.md"
    fi
    mv "$TMP/results.md" "$1"
}
verbs_block() { block "$1" "$VERBS_BEGIN" "$VERBS_END"; }
without_verbs_block() { without_block "$1" "$VERBS_BEGIN" "$VERBS_END"; }
idle_block() { block "$1" "$IDLE_BEGIN" "$IDLE_END"; }
without_idle_block() { without_block "$1" "$IDLE_BEGIN" "$IDLE_END"; }

# assemble_script file.lua: the text Redis runs for a verb's script, as the
# build embeds it (proxy/verbs/script_text.h): each line `--#include lib/x.lua`
# is replaced by that helper file's code (its comment-only lines left out),
# from the script's directory, and the helpers' functions nothing names are
# dropped (bench/assemble_script.py, the same rules as the build's C).
assemble_script() {
    python3 "$(dirname "${BASH_SOURCE[0]}")/assemble_script.py" "$1"
}

# ---------------------------------------------------------------- rounds
# The measured rounds of tls.sh, metrics.sh and cluster.sh: every path at
# every pipeline depth and test, the paths' order rotated each round so no
# path always runs first. The caller defines run_one ROUND PATH P TEST N
# and sets PATHS (array), ROUNDS, PIPELINES, TESTS and NREQ (requests per
# -P). Sets START_DATE, LOAD_BEFORE and LOAD_AFTER for the report.
run_rounds() {
    START_DATE=$(date -u '+%Y-%m-%d %H:%M:%S UTC')
    LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
    local np=${#PATHS[@]} r P t i
    for r in $(seq 1 "$ROUNDS"); do
        for P in $PIPELINES; do for t in $TESTS; do
            for i in $(seq 0 $((np - 1))); do
                run_one "$r" "${PATHS[$(( (i + r - 1) % np ))]}" "$P" "$t" "${NREQ[$P]}"
            done
        done; done
    done
    LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)
}
