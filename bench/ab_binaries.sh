#!/usr/bin/env bash
# bench/ab_binaries.sh - two verbproxy binaries side by side, same Redis.
#
# Did a change cost anything? bench/run.sh compares verbproxy with direct
# and twemproxy; on this noisy 2-core machine two of its runs minutes apart
# can differ by more than a small change could. Here both binaries run in
# front of one redis-server at once, and the rounds alternate them (A then B,
# B then A), so a drift of the machine hits both alike. Reported per binary
# and test: median rps and median Redis CPU per request, and the medians of
# the per-round B/A ratios.
#
# Usage: BENCH_A=path/to/old BENCH_B=path/to/new bash bench/ab_binaries.sh
#   BENCH_ROUNDS=6  BENCH_PIPELINE=16  BENCH_N=800000  BENCH_TESTS="get set"
# Prints a markdown table; writes nothing else.
set -uo pipefail
SCRIPT_DIR=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$SCRIPT_DIR")
# (what lib.sh expects of the script that sources it: `shellcheck -x`)
OUT_DIR="$SCRIPT_DIR/out"
BUILD_DIR="$ROOT/build-bench"
SKIP_VP=0
LOG_TAG=ab
TMP=""
PIDS=()
TS_SERVER=()
EPH_LOW=$(awk '{print $1}' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
USED_PORTS=" "
# shellcheck source=bench/lib.sh
source "$SCRIPT_DIR/lib.sh"
trap cleanup EXIT

# shellcheck disable=SC2034 # (read as ${!side} below)
A=${BENCH_A:?BENCH_A: the first verbproxy binary}
# shellcheck disable=SC2034
B=${BENCH_B:?BENCH_B: the second verbproxy binary}
ROUNDS=${BENCH_ROUNDS:-6}
P=${BENCH_PIPELINE:-16}
N=${BENCH_N:-800000}
TESTS=${BENCH_TESTS:-get set}
CLK_TCK=$(getconf CLK_TCK)

start_redis
declare -A PORT
for side in A B; do
    VP_BIN=${!side}
    start_verbproxy
    [ "$SKIP_VP" = 1 ] && die "verbproxy $side did not start"
    PORT[$side]=$VPORT
done

RAW="$TMP/ab.csv"
for r in $(seq 1 "$ROUNDS"); do
    order="A B"
    [ $((r % 2)) = 0 ] && order="B A"
    for t in $TESTS; do
        for side in $order; do
            c0=$(cpu_ticks "$REDIS_PID")
            rps=$(redis-benchmark -h 127.0.0.1 -p "${PORT[$side]}" -c 50 -n "$N" -t "$t" -P "$P" -q --csv |
                tail -1 | cut -d, -f2 | tr -d '"')
            c1=$(cpu_ticks "$REDIS_PID")
            us=$(awk -v a="$c0" -v b="$c1" -v n="$N" -v k="$CLK_TCK" 'BEGIN {printf "%.4f", (b - a) * 1e6 / k / n}')
            echo "$r,$t,$side,$rps,$us" >>"$RAW"
            log "round $r $t $side: $rps rps, redis $us us/req"
        done
    done
done

col() { awk -F, -v t="$1" -v s="$2" -v c="$3" '$2 == t && $3 == s {print $c}' "$RAW"; }
per_round() {  # per_round test column -> B/A per round
    awk -F, -v t="$1" -v c="$2" '$2 == t {v[$1 "," $3] = $c; r[$1] = 1}
        END {for (k in r) if (v[k ",A"] > 0) printf "%.4f\n", v[k ",B"] / v[k ",A"]}' "$RAW"
}
echo "| -P | test | A rps | B rps | A redis us/req | B redis us/req | B/A rps (per-round median) | B/A redis CPU (per-round median) |"
echo "|---:|------|------:|------:|---------------:|---------------:|---------------------------:|---------------------------------:|"
for t in $TESTS; do
    printf '| %s | %s | %.0f | %.0f | %.3f | %.3f | %.3f | %.3f |\n' "$P" "$t" \
        "$(col "$t" A 4 | median)" "$(col "$t" B 4 | median)" "$(col "$t" A 5 | median)" "$(col "$t" B 5 | median)" \
        "$(per_round "$t" 4 | median)" "$(per_round "$t" 5 | median)"
done
