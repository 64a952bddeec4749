#!/usr/bin/env bash
# bench/idle_memory.sh - the RSS of an idle proxy and its memory per idle
# client connection, at 1,000 and 10,000 clients (not a test): what an
# operator sizes a sidecar's memory request with
# (docs/operations.md#sizing-the-sidecar; deploy/kubernetes/README.md#sizing).
#   clients -> redis-server                    (direct: Redis's own cost, the reference)
#   clients -> verbproxy -> redis              (vp: default settings, a shared upstream connection)
#   clients -> verbproxy -> redis              (vpown: --shared-upstreams 0, a connection per client)
#   clients -> nutcracker -> redis             (tw, Debian's twemproxy)
#
# Each measurement starts a fresh redis-server and the path's proxy, reads
# the proxy's VmRSS with no client at all (the idle RSS), opens one warm-up
# connection, then N more (N in BENCH_IDLE_CLIENTS) (bench/idle_clients.py:
# each sends one PING and reads its reply, then stays open and idle), and
# reports (VmRSS with the clients open - VmRSS before) / clients for the
# proxy, and the same for the redis-server behind it. Two ways to get there:
# "one at a time" (each client PINGs and reads its reply before the next
# connects) and "all at once" (all connect, then all PING before any reply
# is read: what a server needed for all of them at once and then kept, in a
# free list or an allocator, stays in its RSS). Fresh processes per
# measurement, because an allocator keeps freed pages: a second batch of
# clients in the same process would reuse the first batch's memory. The
# paths alternate (the starting path rotates every round) and medians over
# the rounds are reported.
#
# Usage: bash bench/idle_memory.sh      (from anywhere; idempotent)
#
# Environment (all optional):
#   BENCH_ROUNDS=3              rounds (each round measures every path once)
#   BENCH_IDLE_CLIENTS="1000 10000"  idle client connections per measurement
#                               (each count is measured on every path); the
#                               fd limit is raised to 2 N + 256 (own
#                               connections: 2 descriptors per client), the
#                               hard one too when allowed (root); a path
#                               that would not fit is skipped with a note
#   BENCH_SKIP_VP=1, BENCH_SKIP_VPOWN=1, BENCH_SKIP_TW=1   skip those paths
#   VERBPROXY_BIN, BENCH_BUILD_DIR=build-bench, BENCH_NO_BUILD, BENCH_NO_INSTALL,
#   BENCH_TASKSET_SERVER        as in bench/run.sh
#   BENCH_RESULTS=path          where to write the section. Default: the
#                               "Memory per idle client" section of
#                               bench/RESULTS.md (the rest of the file is kept)
#                               when every path ran; bench/out/RESULTS.idle.partial.md
#                               otherwise.
# Raw per-measurement data goes to bench/out/idle-memory.csv.

set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$SCRIPT_DIR/.." && pwd)
OUT_DIR="$SCRIPT_DIR/out"

ROUNDS=${BENCH_ROUNDS:-3}
read -r -a COUNTS <<<"${BENCH_IDLE_CLIENTS:-1000 10000}"
MAXN=0
for n in "${COUNTS[@]}"; do [ "$n" -gt "$MAXN" ] && MAXN=$n; done
BUILD_DIR="$ROOT/${BENCH_BUILD_DIR:-build-bench}"
SKIP_VP=${BENCH_SKIP_VP:-0}
SKIP_TW=${BENCH_SKIP_TW:-0}
LOG_TAG=idle
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3

# The issue's target: a client on the shared connection costs no more than
# twemproxy's measured 2.5 KiB.
TARGET_KIB=2.5

ORIG_CMD="bash bench/idle_memory.sh"
ORIG_ENV=$(env | grep -E '^(BENCH_|VERBPROXY_BIN=)' | sort | tr '\n' ' ' || true)

# shellcheck source=bench/lib.sh
. "$SCRIPT_DIR/lib.sh"

need_redis
need_nutcracker
mkdir -p "$OUT_DIR"
build_verbproxy
# The tree the binary was built from (not what it is when the run ends).
REV=$(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null || echo "no commit")
DIRTY=$(cd "$ROOT" && [ -n "$(git status --porcelain -- proxy protocol CMakeLists.txt 2>/dev/null)" ] && echo " (+ uncommitted changes)" || true)

# Every client is a file descriptor here, in the proxy (two with own
# connections: the client's and its upstream's) and (direct, or own
# connections) in redis-server: all of them inherit this limit.
WANT_FDS=$((2 * MAXN + 256))
HARD_FDS=$(ulimit -Hn)
if [ "$HARD_FDS" != unlimited ] && [ "$HARD_FDS" -lt "$WANT_FDS" ]; then
    ulimit -Hn "$WANT_FDS" 2>/dev/null || log "ulimit -Hn is $HARD_FDS and cannot be raised to $WANT_FDS"
    HARD_FDS=$(ulimit -Hn)
fi
FDS=$WANT_FDS
[ "$HARD_FDS" != unlimited ] && [ "$HARD_FDS" -lt "$FDS" ] && FDS=$HARD_FDS
ulimit -n "$FDS"
fits() {  # fits path n: does the fd limit hold n idle clients on that path?
    local per=1
    [ "$1" = vpown ] && per=2
    [ $((per * $2 + 256)) -le "$FDS" ]
}
NOTES=""

TMP=$(mktemp -d /tmp/verbproxy-idle.XXXXXX)
RAW="$OUT_DIR/idle-memory.csv"
echo "clients,round,path,pattern,proxy_bytes_per_client,redis_bytes_per_client,proxy_rss_idle_kb,proxy_rss_before_kb,proxy_rss_after_kb,redis_rss_before_kb,redis_rss_after_kb" >"$RAW"

PATHS=(direct)
[ "$SKIP_VP" != 1 ] && PATHS+=(vp)
[ "$SKIP_VP" != 1 ] && [ "${BENCH_SKIP_VPOWN:-0}" != 1 ] && PATHS+=(vpown)
[ "$SKIP_TW" != 1 ] && PATHS+=(tw)
declare -A NAME=([direct]="redis-server (direct)" [vp]="verbproxy (shared connection)"
    [vpown]="verbproxy, own connections" [tw]="twemproxy")

stop_pid() {  # stop_pid pid: TERM, then wait for it (KILL after 5 s)
    kill -TERM "$1" 2>/dev/null || return 0
    for _ in $(seq 1 50); do
        kill -0 "$1" 2>/dev/null || break
        sleep 0.1
    done
    kill -KILL "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
}

# start_path path: a fresh redis-server (RPORT, REDIS_PID) and the path's
# proxy in front of it; sets PPORT and PPID_ (the process measured).
start_path() {
    # Redis's maxclients: room for every client (and, with own connections,
    # every upstream connection) on top of the default.
    start_redis
    local maxclients=$((N + 1000))
    [ "$maxclients" -ge 10000 ] || maxclients=10000 # never below Redis's default
    redis-cli -h 127.0.0.1 -p "$RPORT" config set maxclients "$maxclients" >/dev/null
    case $1 in
    direct)
        PPORT=$RPORT; PPID_=$REDIS_PID ;;
    vp | vpown)
        local extra=""
        [ "$1" = vpown ] && extra="--shared-upstreams 0"
        extra="$extra --maxclients $((N + 100))" # the default 10000 is below N + the warm-up
        BENCH_VP_ARGS="${BENCH_VP_ARGS:-} $extra" start_verbproxy
        [ "$SKIP_VP" != 1 ] || die "verbproxy did not start"
        PPORT=$VPORT; PPID_=$VPID ;;
    tw)
        PPORT=$(free_port) || die "no free port"
        local sport
        sport=$(free_port) || die "no free port"
        # As in bench/run.sh: one pool, one server, one server connection.
        cat >"$TMP/nutcracker.yml" <<EOF
idle:
  listen: 127.0.0.1:$PPORT
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
        "${TS_SERVER[@]}" nutcracker -c "$TMP/nutcracker.yml" -s "$sport" -a 127.0.0.1 -v 4 -o "$TMP/tw.log" &
        PPID_=$!; PIDS+=("$PPID_")
        wait_ready nutcracker "$PPID_" "$PPORT" || { sed 's/^/    /' "$TMP/tw.log" >&2; die "nutcracker did not start"; }
        ;;
    esac
}

START_DATE=$(date -u '+%Y-%m-%d %H:%M:%S UTC')
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
for N in "${COUNTS[@]}"; do
for r in $(seq 1 "$ROUNDS"); do
    n=${#PATHS[@]}
    for i in $(seq 0 $((n - 1))); do
        path=${PATHS[$(((i + r - 1) % n))]}
        if ! fits "$path" "$N"; then
            [ "$r" = 1 ] && NOTES="$NOTES
- ${NAME[$path]}, $N clients: skipped (needs more descriptors than \`ulimit -n\` $FDS allows)"
            continue
        fi
        for pattern in one burst; do
            start_path "$path"
            flag=""
            [ "$pattern" = burst ] && flag=--burst
            out=$("$PY" "$SCRIPT_DIR/idle_clients.py" $flag 127.0.0.1 "$PPORT" "$N" "$PPID_" "$REDIS_PID") ||
                die "idle_clients.py failed on $path"
            read -r _ pi pb pa pper <<<"$(sed -n 1p <<<"$out")"
            if [ "$path" = direct ]; then
                rb=$pb; ra=$pa; rper=$pper
            else
                read -r _ _ rb ra rper <<<"$(sed -n 2p <<<"$out")"
            fi
            echo "$N,$r,$path,$pattern,$pper,$rper,$pi,$pb,$pa,$rb,$ra" >>"$RAW"
            log "$N clients, round $r $path ($pattern): idle RSS $pi KiB, $pper bytes per idle client (redis-server behind it: $rper)"
            [ "$path" = direct ] || stop_pid "$PPID_"
            stop_pid "$REDIS_PID"
        done
    done
done
done
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)

col() {  # col n path pattern field -> that field of every round, one a line
    awk -F, -v n="$1" -v p="$2" -v t="$3" -v f="$4" 'NR > 1 && $1 == n && $3 == p && $4 == t {print $f}' "$RAW"
}
num() { awk -v b="$1" -v d="$2" 'BEGIN { if (b == "") print "-"; else printf "%.*f", d, b }'; }
mib() { awk -v k="$1" 'BEGIN { if (k == "") print "-"; else printf "%.1f", k / 1024 }'; }
range() { col "$@" | minmax; }
cell() { echo "$(num "$(col "$@" | median)" 0) ($(range "$@"))"; }

TABLE="| path | clients | idle RSS, no client (MiB) | RSS with the clients, one at a time (MiB) | bytes per idle client, one at a time: median (min-max) | all at once | redis-server behind it, bytes per client (one at a time / all at once) |
|------|----:|-----:|-----:|-----:|-----:|-----:|"
for N in "${COUNTS[@]}"; do
    for path in "${PATHS[@]}"; do
        [ -n "$(col "$N" "$path" one 5)" ] || continue
        behind="-"
        [ "$path" = direct ] || behind="$(num "$(col "$N" "$path" one 6 | median)" 0) / $(num "$(col "$N" "$path" burst 6 | median)" 0)"
        TABLE="$TABLE
| ${NAME[$path]} | $N | $(mib "$(col "$N" "$path" one 7 | median)") | $(mib "$(col "$N" "$path" one 9 | median)") | $(cell "$N" "$path" one 5) | $(cell "$N" "$path" burst 5) | $behind |"
    done
done
target_line() {  # target_line n pattern description
    local med k
    med=$(col "$1" vp "$2" 5 | median)
    k=$(awk -v b="$med" 'BEGIN { if (b != "") printf "%.2f", b / 1024 }')
    echo "- verbproxy on the shared connection, $1 clients $3: $(num "$k" 2) KiB per idle client (target <= $TARGET_KIB KiB): $(verdict "$k" "<=" "$TARGET_KIB")"
}
TARGET_LINE=""
for N in "${COUNTS[@]}"; do
    TARGET_LINE="$TARGET_LINE$(target_line "$N" one "one at a time")
$(target_line "$N" burst "all at once")
"
done
TARGET_LINE="${TARGET_LINE%$'\n'}$NOTES"
echo
echo "$TABLE"
echo
echo "$TARGET_LINE"
echo

CPU_MODEL=$(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)
SECTION=$(
    echo "$IDLE_BEGIN"
    echo "## Memory: the idle proxy and per idle client"
    echo
    echo "Generated by \`bench/idle_memory.sh\` (see its header for the method)."
    echo
    echo "- command: \`${ORIG_ENV}${ORIG_CMD}\`"
    echo "- ${COUNTS[*]} idle clients per measurement (each sent one \`PING\` and read its reply, bench/idle_clients.py; one at a time: each before the next connects; all at once: all connected, then all PINGs sent, then all replies read); idle RSS = the proxy's VmRSS before any client connected; bytes per client = (VmRSS with them open - VmRSS before, after one warm-up client) / clients; fresh processes for every measurement; $ROUNDS rounds, paths alternating, medians; \`ulimit -n\` $FDS"
    echo "- date: $START_DATE; load average before/after: $LOAD_BEFORE / $LOAD_AFTER"
    echo "- machine: nproc=$(nproc), CPU: ${CPU_MODEL:-unknown}, kernel $(uname -r)"
    echo "- versions: $(redis-server --version | awk '{print $1, $2, $3}'); $(command -v nutcracker >/dev/null && nutcracker -V 2>&1 | head -1); verbproxy ${REV}${DIRTY} (Release, jemalloc, ${BUILD_DIR#$ROOT/})"
    echo "- topology: a fresh redis-server (\`--save \"\" --appendonly no\`, maxclients raised) per measurement; verbproxy with its defaults (\`shared-upstreams 1\`) or \`--shared-upstreams 0\` (and \`--maxclients\` clients + 100); twemproxy = Debian nutcracker as in bench/run.sh (one pool, one server, \`server_connections: 1\`)"
    echo
    echo "$TABLE"
    echo
    echo "$TARGET_LINE"
    echo "$IDLE_END"
)

ALL_RAN=1
[ "$SKIP_VP" = 1 ] && ALL_RAN=0
[ "$SKIP_TW" = 1 ] && ALL_RAN=0
[ "${BENCH_SKIP_VPOWN:-0}" = 1 ] && ALL_RAN=0
if [ -n "${BENCH_RESULTS:-}" ]; then
    RESULTS=$BENCH_RESULTS
elif [ "$ALL_RAN" = 1 ]; then
    RESULTS="$SCRIPT_DIR/RESULTS.md"
else
    RESULTS="$OUT_DIR/RESULTS.idle.partial.md"
fi
if [ -f "$RESULTS" ] && [ "$RESULTS" != "$OUT_DIR/RESULTS.idle.partial.md" ]; then
    { without_idle_block "$RESULTS"; echo; echo "$SECTION"; } >"$TMP/results.md"
else
    echo "$SECTION" >"$TMP/results.md"
fi
mv "$TMP/results.md" "$RESULTS"
log "wrote ${RESULTS#$ROOT/}; raw measurements in ${RAW#$ROOT/}"
