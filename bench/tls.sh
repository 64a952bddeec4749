#!/usr/bin/env bash
# bench/tls.sh - what the TLS sidecar costs and buys (issue 11):
#   redis-benchmark --tls -> redis-server (TLS port)            (direct-tls: what an
#                                                                application does without the proxy)
#   redis-benchmark -> verbproxy -> redis-server (TLS port)      (sidecar: plaintext on the
#                                                                loopback, one shared TLS connection upstream)
#   redis-benchmark -> redis-server (plaintext port)             (direct: the floor, for reference)
#
# One redis-server listens on both a plaintext and a TLS port (certificates
# made here with openssl, in a temp dir). Runs alternate between the paths,
# the first path rotating every round; medians over rounds. CPU per request
# is counted for every process of a path: redis-benchmark (its rusage, from
# /usr/bin/time), the proxy and redis-server (/proc/PID/stat around the run),
# because the sidecar moves the client's TLS work into the proxy and the
# target is the total.
#
# Targets: at -P 1 the sidecar serves >= 1.2x the direct TLS throughput with
# less total CPU per request; at -P 16 >= 0.8x.
# (That TLS costs the plaintext paths nothing is bench/run.sh's job.)
#
# Usage: bash bench/tls.sh
# Environment (optional): BENCH_ROUNDS=5, BENCH_CLIENTS=50,
#   BENCH_PIPELINES="1 16", BENCH_TESTS="get set", BENCH_N_P1=100000,
#   BENCH_N_P16=1000000, BENCH_VP_ARGS (extra verbproxy flags),
#   VERBPROXY_BIN, BENCH_BUILD_DIR, BENCH_NO_BUILD=1, BENCH_NO_INSTALL=1,
#   BENCH_RESULTS=path (default: the "TLS" section of bench/RESULTS.md).

set -uo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$SCRIPT_DIR/.." && pwd)
OUT_DIR="$SCRIPT_DIR/out"
LOG_TAG=tls

ROUNDS=${BENCH_ROUNDS:-5}
CLIENTS=${BENCH_CLIENTS:-50}
PIPELINES=${BENCH_PIPELINES:-"1 16"}
TESTS=${BENCH_TESTS:-"get set"}
BUILD_DIR="$ROOT/${BENCH_BUILD_DIR:-build-bench}"
SKIP_VP=0
SKIP_TW=1
declare -A NREQ=([1]=${BENCH_N_P1:-100000} [16]=${BENCH_N_P16:-1000000})

ORIG_CMD="bash bench/tls.sh"
ORIG_ENV=$(env | grep -E '^(BENCH_|VERBPROXY_BIN=)' | sort | tr '\n' ' ')

# shellcheck source=bench/lib.sh
. "$SCRIPT_DIR/lib.sh"

need_redis
command -v openssl >/dev/null || apt_install openssl || die "openssl not found"
mkdir -p "$OUT_DIR"
build_verbproxy
[ "$SKIP_VP" != 1 ] || die "verbproxy did not build"

TMP=$(mktemp -d /tmp/verbproxy-bench.XXXXXX)

# ---------------------------------------------------------------- certificates
# A CA and a server certificate for 127.0.0.1 (what the proxy verifies).
make_certs() {
    local d=$TMP/tls
    mkdir -p "$d"
    openssl req -x509 -newkey rsa:2048 -nodes -keyout "$d/ca.key" -out "$d/ca.crt" -days 2 \
        -subj "/CN=verbproxy bench CA" >/dev/null 2>&1 || die "openssl: CA"
    openssl req -newkey rsa:2048 -nodes -keyout "$d/server.key" -out "$d/server.csr" \
        -subj "/CN=127.0.0.1" >/dev/null 2>&1 || die "openssl: server key"
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' >"$d/san.ext"
    openssl x509 -req -in "$d/server.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial \
        -out "$d/server.crt" -days 2 -extfile "$d/san.ext" >/dev/null 2>&1 || die "openssl: server cert"
}
make_certs
CA=$TMP/tls/ca.crt

# ---------------------------------------------------------------- servers
RPORT=$(free_port) || die "no free port"
TLSPORT=$(free_port) || die "no free port"
redis-server --port "$RPORT" --tls-port "$TLSPORT" --bind 127.0.0.1 --save "" --appendonly no \
    --tls-cert-file "$TMP/tls/server.crt" --tls-key-file "$TMP/tls/server.key" --tls-ca-cert-file "$CA" \
    --tls-auth-clients no --dir "$TMP" --daemonize no --protected-mode no --logfile "$TMP/redis.log" &
REDIS_PID=$!; PIDS+=("$REDIS_PID")
wait_ready redis "$REDIS_PID" "$RPORT" || { cat "$TMP/redis.log" >&2; die "redis-server did not start"; }
log "redis-server pid $REDIS_PID: plaintext 127.0.0.1:$RPORT, TLS 127.0.0.1:$TLSPORT"

VPORT=$(free_port) || die "no free port"
"$VP_BIN" --port "$VPORT" --bind 127.0.0.1 --upstream "127.0.0.1:$TLSPORT" --upstream-tls yes \
    --upstream-tls-ca-cert-file "$CA" --loglevel warning ${BENCH_VP_ARGS:-} >"$TMP/vp.log" 2>&1 &
VPID=$!; PIDS+=("$VPID")
wait_ready verbproxy "$VPID" "$VPORT" || { sed 's/^/    /' "$TMP/vp.log" >&2; die "verbproxy did not answer"; }
[ "$(redis-cli -p "$VPORT" SET tls:probe ok)" = OK ] || die "verbproxy cannot reach the TLS upstream: $(cat "$TMP/vp.log")"
log "verbproxy pid $VPID on 127.0.0.1:$VPORT -> TLS 127.0.0.1:$TLSPORT"

PATHS=(direct-tls sidecar direct)
declare -A BENCH_ARGS=(
    [direct-tls]="-p $TLSPORT --tls --cacert $CA"
    [sidecar]="-p $VPORT"
    [direct]="-p $RPORT"
)
declare -A PROXY_PID=([direct-tls]="" [sidecar]=$VPID [direct]="")

# ---------------------------------------------------------------- one run
# bench_run path P test N -> RPS and CLIENT_S (redis-benchmark's user+sys seconds)
RPS=""; CLIENT_S=""
bench_run() {
    RPS=""; CLIENT_S=""
    # shellcheck disable=SC2086
    /usr/bin/time -f '%U %S' -o "$TMP/rb.time" redis-benchmark -h 127.0.0.1 ${BENCH_ARGS[$1]} -c "$CLIENTS" \
        -n "$4" -t "$3" -P "$2" -q --csv >"$TMP/rb.out" 2>"$TMP/rb.err" &
    BENCH_PID=$!
    wait "$BENCH_PID"; local rc=$?
    BENCH_PID=""
    [ "$rc" = 0 ] || { log "redis-benchmark exited $rc: $(tail -n 3 "$TMP/rb.err" "$TMP/rb.out" | tr '\n' ' ')"; return; }
    RPS=$(awk -F'"' -v t="${3^^}" '$2 == t {print $4}' "$TMP/rb.out")
    CLIENT_S=$(awk 'END {print $1 + $2}' "$TMP/rb.time")
}

RAW="$OUT_DIR/tls_raw.csv"
echo "round,pipeline,test,path,n,rps,client_us_per_req,proxy_us_per_req,redis_us_per_req,total_us_per_req" >"$RAW"
run_one() { # run_one round path P test N
    local path=$2 P=$3 t=$4 n=$5 pp=${PROXY_PID[$2]}
    local r0 r1 p0="" p1="" cus pus="" rus tot
    for x in $REDIS_PID $VPID; do kill -0 "$x" 2>/dev/null || die "process $x died; logs in $TMP"; done
    r0=$(cpu_ticks "$REDIS_PID"); [ -n "$pp" ] && p0=$(cpu_ticks "$pp")
    bench_run "$path" "$P" "$t" "$n"
    r1=$(cpu_ticks "$REDIS_PID"); [ -n "$pp" ] && p1=$(cpu_ticks "$pp")
    [ -n "$RPS" ] || die "redis-benchmark failed on $path"
    rus=$(us_per_req "$r0" "$r1" "$n")
    [ -n "$pp" ] && pus=$(us_per_req "$p0" "$p1" "$n")
    cus=$(awk -v s="$CLIENT_S" -v n="$n" 'BEGIN { printf "%.3f", s * 1e6 / n }')
    tot=$(awk -v a="$cus" -v b="${pus:-0}" -v c="$rus" 'BEGIN { printf "%.3f", a + b + c }')
    echo "$1,$P,$t,$path,$n,$RPS,$cus,$pus,$rus,$tot" >>"$RAW"
    printf '[tls] round %s/%s  -P %-2s %-3s %-10s %10s rps  client %6s  proxy %6s  redis %6s  total %6s us/req\n' \
        "$1" "$ROUNDS" "$P" "$t" "$path" "$RPS" "$cus" "${pus:--}" "$rus" "$tot" >&2
}

for path in "${PATHS[@]}"; do # warm-up; stores the GET key on every path
    bench_run "$path" 16 set 20000
    [ -n "$RPS" ] || die "warm-up through $path failed"
done

run_rounds

# ---------------------------------------------------------------- figures
col() { awk -F, -v P="$1" -v t="$2" -v p="$3" -v f="$4" 'NR > 1 && $2 == P && $3 == t && $4 == p {print $f}' "$RAW"; }
TABLE=$(
    echo "| -P | test | path | median rps | min-max rps | client CPU us/req | proxy CPU us/req | redis CPU us/req | total CPU us/req |"
    echo "|---:|------|------|-----------:|------------:|------------------:|-----------------:|-----------------:|-----------------:|"
    for P in $PIPELINES; do for t in $TESTS; do for path in "${PATHS[@]}"; do
        printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$P" "$t" "$path" \
            "$(fmt "$(col "$P" "$t" "$path" 6 | median)" '%.0f')" "$(col "$P" "$t" "$path" 6 | minmax)" \
            "$(fmt "$(col "$P" "$t" "$path" 7 | median)" '%.2f')" "$(fmt "$(col "$P" "$t" "$path" 8 | median)" '%.2f')" \
            "$(fmt "$(col "$P" "$t" "$path" 9 | median)" '%.2f')" "$(fmt "$(col "$P" "$t" "$path" 10 | median)" '%.2f')"
    done; done; done
)
TARGETS=$(
    echo "| ratio (median of per-round ratios, sidecar / direct TLS) | GET | SET | target | verdict |"
    echo "|---|---:|---:|---:|---|"
    for P in $PIPELINES; do
        g=$(paired_csv "$RAW" rps path sidecar direct-tls pipeline="$P" test=get)
        s=$(paired_csv "$RAW" rps path sidecar direct-tls pipeline="$P" test=set)
        tgt=$([ "$P" = 1 ] && echo 1.2 || echo 0.8)
        worst=$(printf '%s\n%s\n' "$g" "$s" | sort -g | head -1)
        printf '| -P %s throughput | %s | %s | >= %s | %s |\n' "$P" "$(fmt "$g" '%.3f')" "$(fmt "$s" '%.3f')" "$tgt" "$(verdict "$worst" '>=' "$tgt")"
        g=$(paired_csv "$RAW" total_us_per_req path sidecar direct-tls pipeline="$P" test=get)
        s=$(paired_csv "$RAW" total_us_per_req path sidecar direct-tls pipeline="$P" test=set)
        worst=$(printf '%s\n%s\n' "$g" "$s" | sort -g | tail -1)
        if [ "$P" = 1 ]; then
            printf '| -P 1 total CPU per request | %s | %s | < 1 | %s |\n' "$(fmt "$g" '%.3f')" "$(fmt "$s" '%.3f')" \
                "$(awk -v x="$worst" 'BEGIN { print (x != "" && x < 1) ? "met" : "NOT met" }')"
        else
            printf '| -P %s total CPU per request | %s | %s | - | - |\n' "$P" "$(fmt "$g" '%.3f')" "$(fmt "$s" '%.3f')"
        fi
    done
)
echo; echo "$TABLE"; echo; echo "$TARGETS"; echo

# ---------------------------------------------------------------- report
TLS_BEGIN='<!-- bench/tls.sh: begin -->'
TLS_END='<!-- bench/tls.sh: end -->'
REV=$(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null || echo "no commit")
DIRTY=$(cd "$ROOT" && [ -n "$(git status --porcelain -- proxy protocol 2>/dev/null)" ] && echo " (+ uncommitted changes)" || true)
SECTION=$(
    echo "$TLS_BEGIN"
    echo "## TLS: the sidecar against clients speaking TLS themselves"
    echo
    echo "Generated by \`bench/tls.sh\` (see its header for the method)."
    echo
    echo "- command: \`${ORIG_ENV}${ORIG_CMD}\`"
    echo "- each run: \`redis-benchmark -c $CLIENTS -n N -t TEST -P P -q --csv\`, with \`--tls --cacert\` on the direct-tls path; N = ${NREQ[1]} at -P 1, ${NREQ[16]} at -P 16; $ROUNDS rounds, paths alternating, medians"
    echo "- date: $START_DATE; load average before/after: $LOAD_BEFORE / $LOAD_AFTER"
    echo "- machine: nproc=$(nproc), CPU: $(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo), kernel $(uname -r)"
    echo "- versions: $(redis-server --version | awk '{print $1, $2, $3}'); $(openssl version); verbproxy ${REV}${DIRTY} (Release)"
    echo "- topology: one redis-server with a plaintext port and a TLS port (\`tls-auth-clients no\`, RSA 2048 certificate); sidecar = verbproxy with defaults (one shared upstream connection) and \`--upstream-tls yes --upstream-tls-ca-cert-file\` (verification on)"
    echo "- CPU = user+sys per request: redis-benchmark from /usr/bin/time, verbproxy and redis-server from /proc/PID/stat; total = all three"
    echo
    echo "$TABLE"
    echo
    echo "$TARGETS"
    echo "$TLS_END"
)
if [ -n "${BENCH_RESULTS:-}" ]; then RESULTS=$BENCH_RESULTS; else RESULTS="$SCRIPT_DIR/RESULTS.md"; fi
put_block "$RESULTS" "$TLS_BEGIN" "$TLS_END" "$SECTION"
log "wrote ${RESULTS#$ROOT/}; raw runs in ${RAW#$ROOT/}"
