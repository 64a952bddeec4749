#!/usr/bin/env bash
# bench/soak.sh - a bounded soak (minutes; not part of the test command).
#
# One redis-server and verbproxy (default settings: shared upstream
# connection) in front of it; bench/soak.py drives SOAK_CONNS connections
# (default 200) of mixed passthrough commands and every verb for
# SOAK_SECONDS (default 120), checking every reply in order, while the script
# cache is flushed (SCRIPT FLUSH through the proxy) every SOAK_FLUSH_EVERY s
# (default 10) and Redis is restarted once at half time (SHUTDOWN SAVE, then started
# again here on the same port with its data). Reports throughput, the
# proxy's RSS over time, p50/p99 batch latency, and that no reply was lost,
# wrong or reordered and every QPOP job was popped once; writes the "Soak"
# section of bench/RESULTS.md (the other sections are kept).
#
# Usage: bash bench/soak.sh
# Environment: SOAK_SECONDS, SOAK_CONNS, SOAK_FLUSH_EVERY, SOAK_REPORT_EVERY,
#   BENCH_RESULTS=path (default bench/RESULTS.md), VERBPROXY_BIN,
#   BENCH_BUILD_DIR=build-bench, BENCH_NO_BUILD, BENCH_NO_INSTALL as in run.sh.
set -euo pipefail
SCRIPT_DIR=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$SCRIPT_DIR/.." && pwd)
OUT_DIR="$SCRIPT_DIR/out"
BUILD_DIR="$ROOT/${BENCH_BUILD_DIR:-build-bench}"
SKIP_VP=0
LOG_TAG=soak
mkdir -p "$OUT_DIR"
# shellcheck source=bench/lib.sh
source "$SCRIPT_DIR/lib.sh"

SOAK_SECONDS=${SOAK_SECONDS:-120}
SOAK_CONNS=${SOAK_CONNS:-200}
need_redis
build_verbproxy
[ "$SKIP_VP" != 1 ] || die "no verbproxy to soak"
ulimit -n 4096 2>/dev/null || true
start_redis
start_verbproxy
[ "$SKIP_VP" != 1 ] || die "verbproxy did not start"
TREE=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
git -C "$ROOT" diff --quiet 2>/dev/null || TREE="$TREE+changes"
STARTED=$(date -u '+%Y-%m-%d %H:%M UTC')

restart_file="$TMP/restart-now"
log "soaking for ${SOAK_SECONDS}s with $SOAK_CONNS connections"
SOAK_PROXY_PORT=$VPORT SOAK_REDIS_PORT=$RPORT SOAK_PROXY_PID=$VPID SOAK_SECONDS=$SOAK_SECONDS \
    SOAK_CONNS=$SOAK_CONNS SOAK_RESTART_FILE=$restart_file \
    /usr/bin/python3 "$SCRIPT_DIR/soak.py" >"$OUT_DIR/soak.jsonl" 2>"$OUT_DIR/soak.err" &
soak_pid=$!
# Bring Redis back when soak.py asks (it shut it down with SAVE).
while kill -0 "$soak_pid" 2>/dev/null; do
    if [ -e "$restart_file" ]; then
        rm -f "$restart_file"
        for _ in $(seq 1 100); do kill -0 "$REDIS_PID" 2>/dev/null || break; sleep 0.05; done
        "${TS_SERVER[@]}" redis-server --port "$RPORT" --bind 127.0.0.1 --save "" --appendonly no \
            --dir "$TMP" --dbfilename dump.rdb --daemonize no --protected-mode no --logfile "$TMP/redis.log" &
        REDIS_PID=$!; PIDS+=("$REDIS_PID")
        wait_ready redis "$REDIS_PID" "$RPORT" || die "redis-server did not come back"
        log "redis-server restarted (pid $REDIS_PID)"
    fi
    sleep 0.1
done
rc=0; wait "$soak_pid" || rc=$?
cat "$OUT_DIR/soak.err" >&2
kill -0 "$VPID" 2>/dev/null || die "verbproxy died during the soak (log: $TMP/vp.log)"
summary=$(grep '^SUMMARY ' "$OUT_DIR/soak.jsonl" | sed 's/^SUMMARY //')
[ -n "$summary" ] || die "soak.py gave no summary (exit $rc)"
log "summary: $summary"

get() { /usr/bin/python3 -c 'import json,sys; v=json.loads(sys.argv[1]).get(sys.argv[2]); print("-" if v is None else v)' "$summary" "$1"; }
SECTION=$(
    echo "$SOAK_BEGIN"
    echo "## Soak"
    echo
    echo "\`SOAK_SECONDS=$SOAK_SECONDS SOAK_CONNS=$SOAK_CONNS bash bench/soak.sh\`, $STARTED, tree $TREE."
    echo "Mixed passthrough commands and every verb on $SOAK_CONNS connections, SCRIPT FLUSH through the"
    echo "proxy every ${SOAK_FLUSH_EVERY:-10} s, Redis restarted once at half time; every reply checked in order."
    echo
    echo "| figure | value |"
    echo "|---|---:|"
    echo "| replies checked | $(get replies_checked) |"
    echo "| wrong, lost or reordered replies | $( [ "$(get failure)" = - ] && echo 0 || echo "FAILED: $(get failure)") |"
    echo "| clean closes at the restart (clients owed replies then) | $(get clean_closes) |"
    echo "| QPOP jobs produced / popped / never popped (allowed: in doubt at the restart) | $(get jobs_produced) / $(get jobs_popped) / $(get jobs_never_popped) ($(get qpop_jobs_in_doubt)) |"
    echo "| proxy RSS first / last / max sample (KiB) | $(get rss_kb_first) / $(get rss_kb_last) / $(get rss_kb_max) |"
    echo "| batch latency p50 (median of samples) / p99 (worst sample), ms | $(get p50_ms_median) / $(get p99_ms_max) |"
    echo
    echo "Every ${SOAK_REPORT_EVERY:-5} s:"
    echo
    echo "| t (s) | replies/s | proxy RSS (KiB) | p50 ms | p99 ms |"
    echo "|---:|---:|---:|---:|---:|"
    grep -v '^SUMMARY ' "$OUT_DIR/soak.jsonl" | /usr/bin/python3 -c '
import json, sys
for line in sys.stdin:
    s = json.loads(line)
    print("| %s | %s | %s | %s | %s |" % (s["t"], s["replies_per_s"], s["proxy_rss_kb"], s["p50_ms"], s["p99_ms"]))'
    echo "$SOAK_END"
)
RESULTS=${BENCH_RESULTS:-$SCRIPT_DIR/RESULTS.md}
{ without_block "$RESULTS" "$SOAK_BEGIN" "$SOAK_END"; echo; echo "$SECTION"; } >"$TMP/results.md"
mv "$TMP/results.md" "$RESULTS"
log "wrote ${RESULTS#$ROOT/}"
exit "$rc"
