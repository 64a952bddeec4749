#!/usr/bin/env bash
# bench/conveyor.sh - what conveyor keys cost (docs/conveyor.md):
#
#   1. ZTICK server time. ZTICK through verbproxy on a conveyor key
#      (`conveyor cv:*`: the offset moves, only the exits are removed) of
#      1k, 100k, 1M and 10M members with 0, 1 and 10 exits per tick, and
#      on a plain key (every member rescored) of 1k, 100k and 1M members.
#      Members m0..m<N-1> at positions 0..N-1; each tick moves them by 1
#      with the threshold just below the top `exits` positions, so exactly
#      that many leave. Server time is cmdstat_evalsha's usec per call in
#      INFO commandstats after a CONFIG RESETSTAT, over BENCH_TICKS ticks
#      per sample (the plain 1M line: 1 tick). Target: <= 50 us per ZTICK
#      at every size of conveyor key. The floor: Redis's own
#      ZREMRANGEBYSCORE of as many top members, straight to Redis (no
#      script), on the same line after each conveyor sample: what removing
#      a tick's exits costs Redis at all.
#   2. ZTICK latency at 1M members, end to end: redis-benchmark -c 1 -n
#      BENCH_LAT_N of `ZTICK cv:lat 1 1e300` (nothing leaves) through the
#      proxy: p50 and p99.
#   3. The cost of translation: ZRANGE key 0 99 WITHSCORES,
#      ZRANGEBYSCORE key -inf +inf LIMIT 0 100 (both sent as they are, the
#      first in a transaction with the offset: docs/conveyor.md, "How reads
#      are sent"), ZRANGEBYSCORE key 500 +inf LIMIT 0 100 (a finite end:
#      checked, the command with the offset expected and its script checking
#      it in one transaction) and ZADD key <score> <member> (a script)
#      through verbproxy, on a conveyor key (its offset not 0) against the
#      same command on a plain key holding the same 1000 members. Redis CPU
#      per call (redis-server's main thread user+sys over the run, divided
#      by the requests) and requests per second, redis-benchmark -c 50 at
#      -P 1 and -P 16. Target: conveyor / plain <= 1.5 in Redis CPU per
#      call, >= 1 / 1.5 in throughput.
#   4. The floors of translation (bench/translation_floor.py): the same four
#      commands straight to Redis on the plain key, on one connection, 1 and
#      16 at a time, alone, inside MULTI with an HGET of an offset (a read
#      atomic with the offset, no script), and as EVALSHA of a script that
#      only runs the command: Redis CPU per call. What any translation by a
#      script, or by MULTI, costs at the least. And for the finite end,
#      what the proxy sends for it (a checked read, its script only checking).
#
# Rounds alternate the order of the sides; medians over BENCH_ROUNDS.
#
# Usage: bash bench/conveyor.sh            (from anywhere)
#
# Environment (all optional):
#   BENCH_ROUNDS=3                  rounds
#   BENCH_SIZES="1000 100000 1000000 10000000"   conveyor line sizes (part 1)
#   BENCH_PLAIN_SIZES="1000 100000 1000000"      plain line sizes (part 1)
#   BENCH_EXITS="0 1 10"            exits per tick (part 1)
#   BENCH_TICKS=200                 ticks per sample (part 1)
#   BENCH_LAT_N=20000               ZTICKs of part 2
#   BENCH_N=100000                  requests per run of part 3 (x4 at -P 16)
#   BENCH_FLOOR_N=32000             units of part 4 at 16 at a time (/8 at 1)
#   BENCH_SKIP_TICK=1, BENCH_SKIP_LATENCY=1, BENCH_SKIP_TRANSLATION=1,
#   BENCH_SKIP_FLOOR=1
#   VERBPROXY_BIN, BENCH_BUILD_DIR=build-bench, BENCH_NO_BUILD, BENCH_NO_INSTALL,
#   BENCH_TASKSET_SERVER, BENCH_TASKSET_CLIENT   as in bench/run.sh
#   BENCH_RESULTS=path              where to write the section (default: the
#                                   "Conveyor keys" section of bench/RESULTS.md)
# Raw data: bench/out/conveyor-*.csv (git-ignored).

set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$SCRIPT_DIR/.." && pwd)
OUT_DIR="$SCRIPT_DIR/out"
ROUNDS=${BENCH_ROUNDS:-3}
SIZES=${BENCH_SIZES:-"1000 100000 1000000 10000000"}
PLAIN_SIZES=${BENCH_PLAIN_SIZES:-"1000 100000 1000000"}
EXITS=${BENCH_EXITS:-"0 1 10"}
TICKS=${BENCH_TICKS:-200}
LAT_N=${BENCH_LAT_N:-20000}
NREQ=${BENCH_N:-100000}
BUILD_DIR="$ROOT/${BENCH_BUILD_DIR:-build-bench}"
SKIP_VP=0
ORIG_CMD="bash bench/conveyor.sh"
ORIG_ENV=$(env | grep -E '^(BENCH_|VERBPROXY_BIN=)' | sort | tr '\n' ' ' || true)
TARGET_TICK_US=50
TARGET_RATIO=1.5

LOG_TAG=conveyor
# shellcheck source=bench/lib.sh
. "$SCRIPT_DIR/lib.sh"

need_redis
mkdir -p "$OUT_DIR"
build_verbproxy
[ "$SKIP_VP" = 1 ] && die "no verbproxy binary: nothing to measure"
TMP=$(mktemp -d /tmp/verbproxy-bench.XXXXXX)
start_redis
BENCH_VP_ARGS="--conveyor cv:* --ztick-max-members 0" start_verbproxy
[ "$SKIP_VP" = 1 ] && die "verbproxy did not start"
vcli() { redis-cli -h 127.0.0.1 -p "$VPORT" "$@"; }

# fill KEY N: members m0..m<N-1> at scores 0..N-1, straight into Redis, in
# chunks of 100k per EVAL (no one script blocks Redis for long). A
# conveyor key is deleted through the proxy first, which deletes its offset
# key too: it starts with no offset, its stored scores its positions.
FILL='
local key, from, to = KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2])
local args = { "ZADD", key }
for i = from, to do
  args[#args + 1] = i
  args[#args + 1] = "m" .. i
  if #args >= 2002 or i == to then
    redis.call(unpack(args))
    args = { "ZADD", key }
  end
end
return to'
fill() {
    local key=$1 n=$2 from=0
    vcli DEL "$key" >/dev/null
    while [ "$from" -lt "$n" ]; do
        local to=$((from + 99999 < n - 1 ? from + 99999 : n - 1))
        rcli EVAL "$FILL" 1 "$key" "$from" "$to" >/dev/null
        from=$((to + 1))
    done
    [ "$(rcli ZCARD "$key")" = "$n" ] || die "fill $key: ZCARD is not $n"
}

# evalsha_us: cmdstat_evalsha usec per call since the last CONFIG RESETSTAT
evalsha_us() {
    cmdstat evalsha | awk '{ if ($1 > 0) printf "%.2f", $2 / $1 }'
}

# ================================================================ part 1
TICK_RAW="$OUT_DIR/conveyor-tick.csv"
echo "round,kind,size,exits,ticks,us_per_tick" >"$TICK_RAW"
# tick_sample KIND KEY SIZE EXITS COUNT: COUNT ticks of KEY (positions
# 0..SIZE-1 when it starts), each leaving EXITS members; the server time.
# ticks_for SIZE EXITS MAX: at most MAX ticks, and no more than a line of
# SIZE members has members to leave at EXITS a tick.
ticks_for() {
    local n=$3
    [ "$2" -gt 0 ] && [ $(($1 / $2 - 1)) -lt "$n" ] && n=$(($1 / $2 - 1))
    echo "$n"
}

tick_sample() {
    local kind=$1 key=$2 size=$3 exits=$4 count=$5 got
    # One connection for every tick (a process per tick would measure a
    # cold CPU cache: ~100 us more per call): the thresholds follow from
    # the line, so they are all written first.
    awk -v key="$key" -v top=$((size - 1)) -v e="$exits" -v n="$count" 'BEGIN {
        for (i = 0; i < n; i++) { printf "ZTICK %s 1 %d\n", key, top + 2 - e; top += 1 - e } }' >"$TMP/ticks"
    rcli CONFIG RESETSTAT >/dev/null
    got=$(vcli <"$TMP/ticks" | grep -c . || true)
    [ "$got" = $((exits * count)) ] || die "$count ZTICKs of $key: $got members left, not $((exits * count))"
    evalsha_us
}
# floor_sample KEY EXITS COUNT: COUNT calls of ZREMRANGEBYSCORE straight to
# Redis, each removing the top EXITS members of KEY (by its stored scores,
# consecutive integers); cmdstat_zremrangebyscore's usec per call.
floor_sample() {
    local key=$1 exits=$2 count=$3 top got
    top=$(rcli ZRANGE "$key" -1 -1 WITHSCORES | tail -n 1)
    awk -v key="$key" -v top="$top" -v e="$exits" -v n="$count" 'BEGIN {
        for (i = 0; i < n; i++) { printf "ZREMRANGEBYSCORE %s (%d +inf\n", key, top - e; top -= e } }' >"$TMP/floor"
    rcli CONFIG RESETSTAT >/dev/null
    got=$(rcli <"$TMP/floor" | awk '{ s += $1 } END { print s + 0 }')
    [ "$got" = $((exits * count)) ] || die "$count ZREMRANGEBYSCOREs of $key: $got members removed, not $((exits * count))"
    cmdstat zremrangebyscore | awk '{ if ($1 > 0) printf "%.2f", $2 / $1 }'
}
if [ "${BENCH_SKIP_TICK:-0}" != 1 ]; then
    START_DATE=$(date -u '+%Y-%m-%d %H:%M:%S UTC')
    LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
    for size in $SIZES; do
        log "conveyor line of $size members"
        fill cv:line "$size"
        for r in $(seq 1 "$ROUNDS"); do
            for e in $EXITS; do
                # ticks move the top: refill small lines so each sample starts the same
                [ "$size" -le 100000 ] && fill cv:line "$size"
                top=$(vcli ZRANGE cv:line -1 -1 WITHSCORES | tail -n 1)
                # (each sample starts from the line as it is: positions top-size+1..top)
                count=$(ticks_for "$size" "$e" "$TICKS")
                us=$(tick_sample conveyor cv:line "$((top + 1))" "$e" "$count")
                echo "$r,conveyor,$size,$e,$count,$us" >>"$TICK_RAW"
                if [ "$e" -gt 0 ]; then
                    [ "$size" -le 100000 ] && fill cv:line "$size"
                    us=$(floor_sample cv:line "$e" "$count")
                    echo "$r,floor,$size,$e,$count,$us" >>"$TICK_RAW"
                fi
            done
        done
        log "conveyor $size: $(sel "$TICK_RAW" us_per_tick kind=conveyor size="$size" | tr '\n' ' ')"
    done
    rcli DEL cv:line >/dev/null
    for size in $PLAIN_SIZES; do
        count=$TICKS
        [ "$size" -ge 100000 ] && count=$((TICKS / 40 > 1 ? TICKS / 40 : 1))
        [ "$size" -ge 1000000 ] && count=1
        log "plain line of $size members ($count ticks per sample)"
        for r in $(seq 1 "$ROUNDS"); do
            for e in $EXITS; do
                fill plain:line "$size"
                n=$(ticks_for "$size" "$e" "$count")
                us=$(tick_sample plain plain:line "$size" "$e" "$n")
                echo "$r,plain,$size,$e,$n,$us" >>"$TICK_RAW"
            done
        done
        rcli DEL plain:line >/dev/null
    done
    LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)
fi

# ================================================================ part 2
LAT_LINE=""
if [ "${BENCH_SKIP_LATENCY:-0}" != 1 ]; then
    log "ZTICK latency at 1M members, $LAT_N ticks"
    fill cv:lat 1000000
    redis-benchmark -h 127.0.0.1 -p "$VPORT" -c 1 -n "$LAT_N" --csv ZTICK cv:lat 1 1e300 >"$TMP/lat.csv"
    # "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"
    LAT_LINE=$(awk -F'"' 'NR == 2 { printf "| %s | %s | %s | %s |", $4, $10, $14, $16 }' "$TMP/lat.csv")
    cp "$TMP/lat.csv" "$OUT_DIR/conveyor-latency.csv"
    rcli DEL cv:lat >/dev/null
fi

# ================================================================ part 3
# words TEST KEY (parts 3 and 4) -> the command's words
words() {
    case $1 in
    zrange) echo "ZRANGE $2 0 99 WITHSCORES" ;;
    zrangebyscore) echo "ZRANGEBYSCORE $2 -inf +inf LIMIT 0 100" ;;
    zrangebyscore_from) echo "ZRANGEBYSCORE $2 500 +inf LIMIT 0 100" ;;
    zadd) echo "ZADD $2 __rand_int__ m__rand_int__" ;;
    esac
}
TR_RAW="$OUT_DIR/conveyor-translation.csv"
echo "round,test,P,key,n,rps,redis_us_per_req" >"$TR_RAW"
if [ "${BENCH_SKIP_TRANSLATION:-0}" != 1 ]; then
    fill cv:tr 1000
    fill plain:tr 1000
    # An offset that is not 0: one tick that moves the line by 1, nothing leaves.
    vcli ZTICK cv:tr 1 1e300 >/dev/null
    for r in $(seq 1 "$ROUNDS"); do
        for P in 1 16; do
            n=$NREQ
            [ "$P" = 16 ] && n=$((NREQ * 4))
            for t in zrange zrangebyscore zrangebyscore_from zadd; do
                order="cv plain"
                [ $((r % 2)) = 0 ] && order="plain cv"
                for side in $order; do
                    key="$side:tr"
                    # (ZADD adds members: the sets go back to 1000 members first)
                    if [ "$t" = zadd ]; then fill "$key" 1000; [ "$side" = cv ] && vcli ZTICK cv:tr 1 1e300 >/dev/null; fi
                    c0=$(main_cpu)
                    # shellcheck disable=SC2046
                    "${TS_CLIENT[@]}" redis-benchmark -h 127.0.0.1 -p "$VPORT" -c 50 -n "$n" -P "$P" -r 1000 -q --csv \
                        $(words "$t" "$key") >"$TMP/tr.csv" 2>/dev/null
                    c1=$(main_cpu)
                    rps=$(awk -F'"' 'NR > 1 && $4 != "" {v = $4} END {print v}' "$TMP/tr.csv")
                    us=$(awk -v a="$c0" -v b="$c1" -v n="$n" 'BEGIN { printf "%.3f", (b - a) * 1e6 / n }')
                    echo "$r,$t,$P,$side,$n,$rps,$us" >>"$TR_RAW"
                done
            done
        done
        log "translation round $r done"
    done
fi

# ================================================================ part 4
FLOOR_RAW="$OUT_DIR/conveyor-floor.csv"
echo "round,test,shape,P,units,us_per_unit" >"$FLOOR_RAW"
if [ "${BENCH_SKIP_FLOOR:-0}" != 1 ]; then
    fill plain:tr 1000
    floor_n=${BENCH_FLOOR_N:-32000}
    for r in $(seq 1 "$ROUNDS"); do
        "$VP_BIN" --script conveyor_read >"$TMP/conveyor_read.lua"
        "${TS_CLIENT[@]}" /usr/bin/python3 "$SCRIPT_DIR/translation_floor.py" "$RPORT" plain:tr "$floor_n" \
            $((floor_n / 8)) "$TMP/conveyor_read.lua" | tail -n +2 | sed "s/^/$r,/" >>"$FLOOR_RAW"
        log "floor round $r done"
    done
fi

# ================================================================ report
VER_REDIS=$(redis-server --version | awk '{print $3}')
VER_VP=$(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null || echo "?")
{
    echo "$CONVEYOR_BEGIN"
    echo "## Conveyor keys (issue 25)"
    echo
    echo "Generated by \`bench/conveyor.sh\`."
    echo
    echo "- command: \`${ORIG_ENV}${ORIG_CMD}\`"
    echo "- date: ${START_DATE:-$(date -u '+%Y-%m-%d %H:%M:%S UTC')}; load average before/after part 1: ${LOAD_BEFORE:--} / ${LOAD_AFTER:--}"
    echo "- machine: nproc=$(nproc); redis-server $VER_REDIS; verbproxy $VER_VP (Release)"
    echo "- medians over $ROUNDS rounds; raw data in bench/out/conveyor-*.csv"
    echo
    if [ -s "$TICK_RAW" ] && [ "$(wc -l <"$TICK_RAW")" -gt 1 ]; then
        echo "### ZTICK server time (cmdstat_evalsha usec per call)"
        echo
        echo "Rows \`floor\`: Redis's own ZREMRANGEBYSCORE of as many top members of the"
        echo "same line, straight to Redis (cmdstat_zremrangebyscore usec per call): the"
        echo "cost of removing a tick's exits with no script at all."
        echo
        echo "| key | members | exits per tick | calls per sample | median us per call | min-max | target | verdict |"
        echo "|-----|--------:|---------------:|-----------------:|--------------------:|--------:|-------:|---------|"
        for kind in conveyor floor plain; do
            sizes=$SIZES
            [ "$kind" = plain ] && sizes=$PLAIN_SIZES
            for size in $sizes; do for e in $EXITS; do
                vals=$(sel "$TICK_RAW" us_per_tick kind="$kind" size="$size" exits="$e")
                [ -n "$vals" ] || continue
                med=$(echo "$vals" | median)
                cnt=$(sel "$TICK_RAW" ticks kind="$kind" size="$size" exits="$e" | head -n 1)
                if [ "$kind" = conveyor ]; then
                    tgt="<= $TARGET_TICK_US"; v=$(verdict "$med" "<=" "$TARGET_TICK_US")
                elif [ "$kind" = floor ]; then
                    tgt="-"; v="(ZREMRANGEBYSCORE alone)"
                else
                    tgt="-"; v="(today's way)"
                fi
                echo "| $kind | $size | $e | $cnt | $(fmt "$med" %.1f) | $(echo "$vals" | minmax) | $tgt | $v |"
            done; done
        done
        echo
    fi
    if [ -n "$LAT_LINE" ]; then
        echo "### ZTICK end to end at 1M members (redis-benchmark -c 1, ms)"
        echo
        echo "| rps | p50 | p99 | max |"
        echo "|----:|----:|----:|----:|"
        echo "$LAT_LINE"
        echo
    fi
    if [ "$(wc -l <"$TR_RAW")" -gt 1 ]; then
        echo "### The cost of translation (conveyor key / plain key, through verbproxy)"
        echo
        echo "| -P | command | plain rps | conveyor rps | rps ratio | plain redis us/req | conveyor redis us/req | CPU ratio | target | verdict |"
        echo "|---:|---------|----------:|-------------:|----------:|-------------------:|----------------------:|----------:|-------:|---------|"
        for P in 1 16; do for t in zrange zrangebyscore zrangebyscore_from zadd; do
            prps=$(sel "$TR_RAW" rps test="$t" P="$P" key=plain | median)
            crps=$(sel "$TR_RAW" rps test="$t" P="$P" key=cv | median)
            pus=$(sel "$TR_RAW" redis_us_per_req test="$t" P="$P" key=plain | median)
            cus=$(sel "$TR_RAW" redis_us_per_req test="$t" P="$P" key=cv | median)
            rr=$(ratio "$prps" "$crps"); cr=$(ratio "$cus" "$pus")
            v1=$(verdict "$rr" "<=" "$TARGET_RATIO"); v2=$(verdict "$cr" "<=" "$TARGET_RATIO")
            echo "| $P | \`$(words "$t" KEY)\` | $(fmt "$prps" %.0f) | $(fmt "$crps" %.0f) | $(fmt "$rr" %.2f)x slower | $(fmt "$pus" %.2f) | $(fmt "$cus" %.2f) | $(fmt "$cr" %.2f) | <= $TARGET_RATIO | rps $v1, CPU $v2 |"
        done; done
        echo
    fi
    if [ "$(wc -l <"$FLOOR_RAW")" -gt 1 ]; then
        echo "### The floors of translation (straight to Redis, bench/translation_floor.py)"
        echo
        echo "Redis CPU per call (us), one connection, P calls at a time, on the plain"
        echo "key: the command alone; in MULTI with an HGET of an offset hash (an"
        echo "offset read atomically with the command, no script); as EVALSHA of a"
        echo "script that runs only the command (no offset). A translation costs at"
        echo "least the second (reads whose scores the proxy would rewrite) or the"
        echo "third (anything a script does). Checked: what the proxy sends for a"
        echo "score range with a finite end (MULTI, HGET, the command, the read's"
        echo "script checking the offset expected, EXEC); no transaction can check"
        echo "the offset for less, as every command queued in MULTI runs."
        echo
        echo "| P | command | alone | MULTI+HGET | ratio | bare EVALSHA | ratio | checked | ratio |"
        echo "|--:|---------|------:|-----------:|------:|-------------:|------:|--------:|------:|"
        for P in 1 16; do for t in zrange zrangebyscore zrangebyscore_from zadd; do
            a=$(sel "$FLOOR_RAW" us_per_unit test="$t" shape=plain P="$P" | median)
            m=$(sel "$FLOOR_RAW" us_per_unit test="$t" shape=multi P="$P" | median)
            e=$(sel "$FLOOR_RAW" us_per_unit test="$t" shape=evalsha P="$P" | median)
            k=$(sel "$FLOOR_RAW" us_per_unit test="$t" shape=checked P="$P" | median)
            echo "| $P | \`$(words "$t" KEY)\` | $(fmt "$a" %.2f) | $(fmt "$m" %.2f) | $(fmt "$(ratio "$m" "$a")" %.2f) | $(fmt "$e" %.2f) | $(fmt "$(ratio "$e" "$a")" %.2f) | $(fmt "$k" %.2f) | $(fmt "$(ratio "$k" "$a")" %.2f) |"
        done; done
        echo
    fi
    echo "$CONVEYOR_END"
} >"$TMP/section.md"

RESULTS=${BENCH_RESULTS:-$SCRIPT_DIR/RESULTS.md}
put_block "$RESULTS" "$CONVEYOR_BEGIN" "$CONVEYOR_END" "$(cat "$TMP/section.md")"
log "results in ${RESULTS#$ROOT/}"
cat "$TMP/section.md"
