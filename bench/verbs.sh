#!/usr/bin/env bash
# bench/verbs.sh - what the virtual verbs cost:
#
#   1. Throughput. redis-benchmark sends a verb to verbproxy, which rewrites
#      it into EVALSHA of its pinned script (lua/<verb>.lua), against the
#      same EVALSHA sent by redis-benchmark straight to redis-server
#      (SCRIPT LOAD of the same file). -c 50, at -P 1 and -P 16, for
#        LOCKRELEASE lock:__rand_int__ tok         (cheap: a GET of a missing key, reply 0)
#        ZWINDOW win:__rand_int__ 60000 __rand_int__ LIMIT 1000000
#                                                  (real work: TIME, ZREMRANGEBYSCORE, ZCARD,
#                                                   ZADD, PEXPIRE on a 300-member window)
#      The windows are refilled before every ZWINDOW run (300 keys x 300
#      members, the whole -r 300 space), so every call updates one existing
#      member of a 300-member set and the per-call cost is the same in every
#      run. Target: verb rps >= 0.9 x direct EVALSHA rps.
#
#   2. ZTICK server time. lua/ztick.lua (max-members 0) against the seed
#      script bench/ztick_seed.lua (ZRANGE ... WITHSCORES, then one ZADD or
#      ZREM per member), both by EVALSHA on redis-server, on sorted sets of
#      1k, 10k and 100k members (member m<i>, score i), in two cases:
#        none  delta 1, threshold 1e18: nothing leaves
#        10%   delta 1, threshold 0.9*n + 1: the top 10% leave (and are returned)
#      Server time is cmdstat_evalsha's usec from INFO commandstats after a
#      CONFIG RESETSTAT. Each call gets a fresh copy of the set (COPY from a
#      source key, not timed), so both scripts see the same data. One sample
#      = enough calls to touch BENCH_ZTICK_MEMBERS members. Target: ZTICK
#      server time <= 0.8 x the seed's.
#
# Runs alternate between the two sides (the side that goes first rotates
# every round) and medians over the rounds are reported, because the
# machine is small and noisy. Before any figure, each verb's reply through
# the proxy is checked against the direct EVALSHA, and ZTICK's replies and
# resulting sets against the seed script's.
#
# Usage: bash bench/verbs.sh            (from anywhere; idempotent)
#
# Environment (all optional):
#   BENCH_ROUNDS=5              rounds of each part
#   BENCH_CLIENTS=50            redis-benchmark -c
#   BENCH_PIPELINES="1 16"      redis-benchmark -P values
#   BENCH_VERBS="lockrelease zwindow"  verbs of part 1 (also: qack)
#   BENCH_N_P1, BENCH_N_P16     requests per run (-n) for -P 1 / -P 16; when unset
#                               it is calibrated per verb so a direct run takes
#   BENCH_TARGET_SECS=1.5       ... about this many seconds (at least 50000 / 500000)
#   BENCH_ZTICK_SIZES="1000 10000 100000"  sorted-set sizes of part 2
#   BENCH_ZTICK_MEMBERS=500000  members touched per sample (calls = this / size, at least 1)
#   BENCH_SKIP_THROUGHPUT=1     skip part 1;  BENCH_SKIP_ZTICK=1  skip part 2
#   BENCH_LUA_DIR=path          where <verb>.lua live (default: lua/ of this tree)
#   VERBPROXY_BIN, BENCH_BUILD_DIR=build-bench, BENCH_NO_BUILD, BENCH_NO_INSTALL,
#   BENCH_TASKSET_SERVER, BENCH_TASKSET_CLIENT   as in bench/run.sh
#   BENCH_PERF=1                also `perf record -g` verbproxy during the last
#                               round's runs (report in bench/out/perf-*.txt)
#   BENCH_RESULTS=path          where to write the section. Default: the
#                               "Virtual verbs" section of bench/RESULTS.md (the rest
#                               of the file is kept) when both parts ran with the
#                               proxy; bench/out/RESULTS.verbs.partial.md otherwise.
# Raw per-run data goes to bench/out/verbs-throughput.csv and
# bench/out/verbs-ztick.csv (bench/out/ is git-ignored).

set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$SCRIPT_DIR/.." && pwd)
OUT_DIR="$SCRIPT_DIR/out"

ROUNDS=${BENCH_ROUNDS:-5}
CLIENTS=${BENCH_CLIENTS:-50}
PIPELINES=${BENCH_PIPELINES:-"1 16"}
VERBS=${BENCH_VERBS:-"lockrelease zwindow"}
TARGET_SECS=${BENCH_TARGET_SECS:-1.5}
ZSIZES=${BENCH_ZTICK_SIZES:-"1000 10000 100000"}
ZMEMBERS=${BENCH_ZTICK_MEMBERS:-500000}
SKIP_TP=${BENCH_SKIP_THROUGHPUT:-0}
SKIP_ZT=${BENCH_SKIP_ZTICK:-0}
LUA_DIR=${BENCH_LUA_DIR:-$ROOT/lua}
BUILD_DIR="$ROOT/${BENCH_BUILD_DIR:-build-bench}"
SKIP_VP=$SKIP_TP

# Targets (from the issue).
TARGET_VERB=0.9     # verb rps / direct EVALSHA rps, >=
TARGET_ZTICK=0.8    # ZTICK server time / seed server time, <=

ORIG_CMD="bash bench/verbs.sh"
ORIG_ENV=$(env | grep -E '^(BENCH_|VERBPROXY_BIN=)' | sort | tr '\n' ' ' || true)

LOG_TAG=verbs
# shellcheck source=bench/lib.sh
. "$SCRIPT_DIR/lib.sh"

need_redis
mkdir -p "$OUT_DIR"
build_verbproxy

TMP=$(mktemp -d /tmp/verbproxy-bench.XXXXXX)
start_redis
[ "$SKIP_VP" = 1 ] || start_verbproxy

# ================================================================ part 1: throughput
# verb_case NAME: sets V_WORDS (the verb's command, words), V_FILE (its
# script), V_NKEYS, V_R (redis-benchmark -r), V_PREP (run before each run, or "").
verb_case() {
    V_PREP=""
    case $1 in
    lockrelease) V_WORDS=(LOCKRELEASE lock:__rand_int__ tok); V_NKEYS=1; V_R=100000 ;;
    qack)        V_WORDS=(QACK lease:__rand_int__ m); V_NKEYS=1; V_R=100000 ;;
    zwindow)     V_WORDS=(ZWINDOW win:__rand_int__ 60000 __rand_int__ LIMIT 1000000); V_NKEYS=1; V_R=300
                 V_PREP=prep_zwindow ;;
    *) die "unknown verb case '$1' (known: lockrelease qack zwindow)" ;;
    esac
    V_FILE="$LUA_DIR/$1.lua"
}

# Every window key (win:000000000000 .. win:000000000299, as redis-benchmark
# -r 300 spells them) gets every member, at the server's current time.
ZWINDOW_FILL='
local t = redis.call("TIME")
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local n = tonumber(ARGV[1])
local pairs = {}
for m = 0, n - 1 do pairs[#pairs + 1] = now; pairs[#pairs + 1] = string.format("%012d", m) end
for k = 0, n - 1 do
    local key = string.format("win:%012d", k)
    redis.call("DEL", key)
    redis.call("ZADD", key, unpack(pairs))
    redis.call("PEXPIRE", key, 60000)
end
return n'
prep_zwindow() { rcli EVAL "$ZWINDOW_FILL" 0 300 >/dev/null; }

# bench_rps port P N R words... -> sets RPS (empty on failure). Not run in a
# $(...) subshell, so that the traps can kill redis-benchmark at once.
RPS=""
bench_rps() {
    local port=$1 P=$2 n=$3 r=$4 rc=0
    shift 4
    RPS=""
    "${TS_CLIENT[@]}" redis-benchmark -h 127.0.0.1 -p "$port" -c "$CLIENTS" -n "$n" -P "$P" -r "$r" -q --csv "$@" \
        >"$TMP/rb.out" 2>"$TMP/rb.err" &
    BENCH_PID=$!
    wait "$BENCH_PID" || rc=$?
    BENCH_PID=""
    if [ "$rc" != 0 ]; then
        log "redis-benchmark exited $rc: $(tail -n 3 "$TMP/rb.err" "$TMP/rb.out" | tr '\n' ' ')"
        return 0
    fi
    RPS=$(awk -F'"' 'NR > 1 && $4 != "" {v = $4} END {print v}' "$TMP/rb.out")
}

declare -A SHA
TP_RAW="$OUT_DIR/verbs-throughput.csv"

# run_verb round verb path P N: one redis-benchmark run, one row of TP_RAW.
run_verb() {
    local round=$1 verb=$2 path=$3 P=$4 n=$5 port ppid="" r0 r1 p0="" p1="" pus="" rus
    local words calls usec failed ecalls
    verb_case "$verb"
    case $path in
    vp)     port=$VPORT; ppid=$VPID; words=("${V_WORDS[@]}") ;;
    bare)   port=$BPORT; ppid=$BPID; words=(EVALSHA "${SHA[$verb]}" "$V_NKEYS" "${V_WORDS[@]:1}") ;;
    direct) port=$RPORT; words=(EVALSHA "${SHA[$verb]}" "$V_NKEYS" "${V_WORDS[@]:1}") ;;
    esac
    for pp in $REDIS_PID $ppid; do kill -0 "$pp" 2>/dev/null || die "process $pp died (path $path); logs in $TMP"; done
    [ -z "$V_PREP" ] || "$V_PREP"
    rcli CONFIG RESETSTAT >/dev/null
    r0=$(cpu_ticks "$REDIS_PID"); [ -z "$ppid" ] || p0=$(cpu_ticks "$ppid")
    if [ "$path" = vp ] && [ "${BENCH_PERF:-0}" = 1 ] && [ "$round" = "$ROUNDS" ]; then
        # cpu-clock: this VM has no hardware cycle counter.
        perf record -e cpu-clock -g -o "$OUT_DIR/perf-$verb-P$P.data" -p "$ppid" >/dev/null 2>&1 &
        PERF_PID=$!; PIDS+=("$PERF_PID")
        sleep 0.3   # let perf attach before the run starts
    fi
    bench_rps "$port" "$P" "$n" "$V_R" "${words[@]}"
    if [ -n "${PERF_PID:-}" ]; then
        kill -INT "$PERF_PID" 2>/dev/null || true
        wait "$PERF_PID" 2>/dev/null || true
        PERF_PID=""
        perf report -i "$OUT_DIR/perf-$verb-P$P.data" --no-children -g none --sort dso,sym --percent-limit 0.5 --stdio \
            >"$OUT_DIR/perf-$verb-P$P.txt" 2>/dev/null || true
    fi
    r1=$(cpu_ticks "$REDIS_PID"); [ -z "$ppid" ] || p1=$(cpu_ticks "$ppid")
    read -r calls usec failed <<<"$(cmdstat evalsha)"
    read -r ecalls _ _ <<<"$(cmdstat eval)"
    rus=$(us_per_req "$r0" "$r1" "$n")
    [ -z "$ppid" ] || pus=$(us_per_req "$p0" "$p1" "$n")
    # Every request must have been one EVALSHA on the server (redis-benchmark
    # may send up to -c x -P more than -n): else the figures mean something else.
    if [ "$failed" != 0 ] || [ "$ecalls" != 0 ] || [ "$calls" -lt "$n" ] || [ "$calls" -gt $((n + CLIENTS * P)) ]; then
        log "WARNING: $verb via $path: -n $n gave $calls EVALSHA ($failed failed) and $ecalls EVAL on the server"
    fi
    echo "$round,$verb,$P,$path,$n,${RPS:-NA},$pus,$rus,$calls,$(awk -v u="$usec" -v c="$calls" 'BEGIN { if (c > 0) printf "%.3f", u / c }'),$ecalls,$(cut -d' ' -f1 /proc/loadavg)" >>"$TP_RAW"
    printf '[verbs] round %s/%s  %-11s -P %-2s %-6s %10s rps   proxy %6s us/req   redis %6s us/req\n' \
        "$round" "$ROUNDS" "$verb" "$P" "$path" "${RPS:-NA}" "${pus:--}" "$rus" >&2
}

# check_verb verb: the verb through the proxy and its EVALSHA straight to
# redis answer the same (on the same data). Returns 1 if the proxy does not
# know the verb.
check_verb() {
    local verb=$1 a b w words=()
    verb_case "$verb"
    for w in "${V_WORDS[@]}"; do words+=("${w//__rand_int__/000000000007}"); done
    [ -z "$V_PREP" ] || "$V_PREP"
    a=$(rcli EVALSHA "${SHA[$verb]}" "$V_NKEYS" "${words[@]:1}" 2>&1)
    [ -z "$V_PREP" ] || "$V_PREP"
    b=$(redis-cli -h 127.0.0.1 -p "$VPORT" "${words[@]}" 2>&1)
    if [ "$a" != "$b" ]; then
        log "${words[*]}: verbproxy answers '$(echo "$b" | tr '\n' ' ')', direct EVALSHA '$(echo "$a" | tr '\n' ' ')'"
        return 1
    fi
    log "check: ${words[*]} -> $(echo "$b" | tr '\n' ' ')(same as direct EVALSHA)"
}

declare -A NREQ
if [ "$SKIP_TP" != 1 ]; then
    for verb in $VERBS; do
        verb_case "$verb"
        SHA[$verb]=$(script_load "$V_FILE")
    done
    if [ "$SKIP_VP" != 1 ]; then
        for verb in $VERBS; do
            check_verb "$verb" || { log "verbproxy does not run $verb like its script: skipping the verbproxy leg"; SKIP_VP=1; break; }
        done
    fi
    PATHS=(direct); [ "$SKIP_VP" = 1 ] || PATHS+=(vp)

    # The floor of any one-connection-per-client proxy, as in bench/run.sh:
    # the same EVALSHA through a bare libuv byte forwarder.
    if [ "${BENCH_SKIP_BARE:-0}" != 1 ] && cc -O2 -o "$TMP/bare_forwarder" "$SCRIPT_DIR/bare_forwarder.c" -luv 2>"$TMP/bare.build"; then
        BPORT=$(free_port) || die "no free port"
        "${TS_SERVER[@]}" "$TMP/bare_forwarder" "$BPORT" "$RPORT" &
        BPID=$!; PIDS+=("$BPID")
        if wait_ready bare "$BPID" "$BPORT"; then
            log "bare forwarder pid $BPID on 127.0.0.1:$BPORT"
            PATHS+=(bare)
        fi
    fi

    # calibrate: -n per verb and P, from a direct run
    for verb in $VERBS; do
        verb_case "$verb"
        for P in $PIPELINES; do
            v="BENCH_N_P$P"
            if [ -n "${!v:-}" ]; then
                NREQ[$verb/$P]=${!v}
                continue
            fi
            [ -z "$V_PREP" ] || "$V_PREP"
            bench_rps "$RPORT" "$P" $((P == 1 ? 20000 : 200000)) "$V_R" EVALSHA "${SHA[$verb]}" "$V_NKEYS" "${V_WORDS[@]:1}"
            [ -n "$RPS" ] || die "calibration run of $verb failed"
            NREQ[$verb/$P]=$(awk -v r="$RPS" -v s="$TARGET_SECS" -v f=$((P == 1 ? 50000 : 500000)) \
                'BEGIN { n = int(r * s / 10000 + 0.5) * 10000; if (n < f) n = f; print n }')
            log "calibrated $verb -P $P: direct ~${RPS%.*} rps -> -n ${NREQ[$verb/$P]}"
        done
    done

    echo "round,verb,pipeline,path,n,rps,proxy_us_per_req,redis_us_per_req,evalsha_calls,evalsha_usec_per_call,eval_calls,load1" >"$TP_RAW"
    log "part 1: paths ${PATHS[*]}; verbs $VERBS; rounds $ROUNDS; pipelines $PIPELINES; clients $CLIENTS"
    TP_DATE=$(date -u '+%Y-%m-%d %H:%M:%S UTC')
    TP_LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
    NP=${#PATHS[@]}
    for r in $(seq 1 "$ROUNDS"); do
        for verb in $VERBS; do
            for P in $PIPELINES; do
                for i in $(seq 0 $((NP - 1))); do
                    run_verb "$r" "$verb" "${PATHS[$(((i + r - 1) % NP))]}" "$P" "${NREQ[$verb/$P]}"
                done
            done
        done
    done
    TP_LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)
fi

# ================================================================ part 2: ZTICK server time
ZT_RAW="$OUT_DIR/verbs-ztick.csv"

# Source sets src:<n>: member m<i> with score i, i = 0 .. n-1.
ZTICK_FILL='
local n = tonumber(ARGV[1])
redis.call("DEL", KEYS[1])
local i = 0
while i < n do
    local args = {}
    for j = i, math.min(i + 999, n - 1) do args[#args + 1] = j; args[#args + 1] = "m" .. j end
    redis.call("ZADD", KEYS[1], unpack(args))
    i = i + 1000
end
return redis.call("ZCARD", KEYS[1])'

# zt_args n case -> "delta threshold"
zt_args() {
    case $2 in
    none) echo "1 1e18" ;;
    10pct) echo "1 $(($1 * 9 / 10 + 1))" ;;
    esac
}

# zt_sample impl n case -> sets ZT_UPC (server usec per call: cmdstat_evalsha
# usec / calls), ZT_CPC (redis-server main-thread CPU us per call) and
# ZT_CALLS. The calls run on fresh copies of src:<n> (w:1 .. w:reps), all made
# before the timed part, one EVALSHA per copy.
zt_sample() {
    local impl=$1 n=$2 c=$3 reps delta thr calls usec failed cpu0 cpu1 k
    reps=$(( (ZMEMBERS + n - 1) / n ))
    read -r delta thr <<<"$(zt_args "$n" "$c")"
    for k in $(seq 1 "$reps"); do echo "COPY src:$n w:$k REPLACE"; done | rcli >/dev/null
    rcli CONFIG RESETSTAT >/dev/null
    cpu0=$(main_cpu)
    for k in $(seq 1 "$reps"); do echo "EVALSHA ${ZSHA[$impl]} 1 w:$k 0 $delta $thr"; done | rcli >/dev/null
    cpu1=$(main_cpu)
    read -r calls usec failed <<<"$(cmdstat evalsha)"
    [ "$calls" = "$reps" ] && [ "$failed" = 0 ] || die "ZTICK sample $impl n=$n $c: $calls calls ($failed failed), expected $reps"
    ZT_UPC=$(awk -v u="$usec" -v c="$calls" 'BEGIN { printf "%.1f", u / c }')
    ZT_CPC=$(awk -v a="$cpu0" -v b="$cpu1" -v c="$calls" 'BEGIN { printf "%.1f", (b - a) * 1e6 / c }')
    ZT_CALLS=$calls
}

# check_ztick n case: ztick.lua and the seed leave the same set and reply the same.
check_ztick() {
    local n=$1 c=$2 delta thr impl out=()
    read -r delta thr <<<"$(zt_args "$n" "$c")"
    for impl in ztick seed; do
        rcli COPY "src:$n" work REPLACE >/dev/null
        out+=("$( { rcli EVALSHA "${ZSHA[$impl]}" 1 work 0 "$delta" "$thr"; rcli ZRANGE work 0 -1 WITHSCORES; } | md5sum)")
        [ "$impl" = seed ] || ZT_LEFT[$n/$c]=$(rcli ZCARD work)
    done
    [ "${out[0]}" = "${out[1]}" ] || die "ZTICK and the seed script disagree on n=$n, case $c (delta $delta, threshold $thr)"
}

declare -A ZSHA ZT_LEFT
ZIMPLS=(ztick seed)
if [ "$SKIP_ZT" != 1 ]; then
    ZSHA[ztick]=$(script_load "$LUA_DIR/ztick.lua")
    ZSHA[seed]=$(script_load "$SCRIPT_DIR/ztick_seed.lua")
    for n in $ZSIZES; do
        [ "$(rcli EVAL "$ZTICK_FILL" 1 "src:$n" "$n")" = "$n" ] || die "could not fill src:$n"
        for c in none 10pct; do check_ztick "$n" "$c"; done
    done
    log "check: ztick.lua and bench/ztick_seed.lua give the same replies and sets (sizes $ZSIZES)"
    echo "round,members,case,impl,calls,usec_per_call,us_per_member,cpu_us_per_call,cpu_us_per_member,load1" >"$ZT_RAW"
    log "part 2: ZTICK vs seed; sizes $ZSIZES; rounds $ROUNDS; ~$ZMEMBERS members per sample"
    ZT_DATE=$(date -u '+%Y-%m-%d %H:%M:%S UTC')
    ZT_LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
    for r in $(seq 1 "$ROUNDS"); do
        for n in $ZSIZES; do
            for c in none 10pct; do
                for i in 0 1; do
                    impl=${ZIMPLS[$(((i + r - 1) % 2))]}
                    zt_sample "$impl" "$n" "$c"
                    upm=$(awk -v u="$ZT_UPC" -v n="$n" 'BEGIN { printf "%.4f", u / n }')
                    cpm=$(awk -v u="$ZT_CPC" -v n="$n" 'BEGIN { printf "%.4f", u / n }')
                    echo "$r,$n,$c,$impl,$ZT_CALLS,$ZT_UPC,$upm,$ZT_CPC,$cpm,$(cut -d' ' -f1 /proc/loadavg)" >>"$ZT_RAW"
                    printf '[verbs] round %s/%s  ZTICK n=%-6s %-5s %-5s %10s us/call  %7s us/member  (CPU %7s us/member; %s calls)\n' \
                        "$r" "$ROUNDS" "$n" "$c" "$impl" "$ZT_UPC" "$upm" "$cpm" "$ZT_CALLS" >&2
                done
            done
        done
    done
    ZT_LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)
fi

# ================================================================ aggregate

TP_TABLE=""; ZT_TABLE=""; TARGETS=""
if [ "$SKIP_TP" != 1 ]; then
    TP_TABLE=$(
        echo "| verb | -P | path | median rps | min-max rps | rps vs direct | proxy CPU us/req | redis CPU us/req | EVALSHA server us/call |"
        echo "|------|---:|------|-----------:|------------:|--------------:|-----------------:|-----------------:|-----------------------:|"
        for verb in $VERBS; do for P in $PIPELINES; do for path in "${PATHS[@]}"; do
            k=(verb="$verb" pipeline="$P" path="$path")
            rps=$(sel "$TP_RAW" rps "${k[@]}" | median)
            drps=$(sel "$TP_RAW" rps verb="$verb" pipeline="$P" path=direct | median)
            case $path in
            vp) name="verbproxy (\`${verb^^}\`)" ;;
            bare) name="bare forwarder (\`EVALSHA\`)" ;;
            *) name="direct (\`EVALSHA\`)" ;;
            esac
            printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "${verb^^}" "$P" "$name" \
                "$(fmt "$rps" '%.0f')" "$(sel "$TP_RAW" rps "${k[@]}" | minmax)" "$(fmt "$(ratio "$rps" "$drps")" '%.3f')" \
                "$(fmt "$(sel "$TP_RAW" proxy_us_per_req "${k[@]}" | median)" '%.2f')" \
                "$(fmt "$(sel "$TP_RAW" redis_us_per_req "${k[@]}" | median)" '%.2f')" \
                "$(fmt "$(sel "$TP_RAW" evalsha_usec_per_call "${k[@]}" | median)" '%.2f')"
        done; done; done
    )
fi
if [ "$SKIP_ZT" != 1 ]; then
    ZT_TABLE=$(
        echo "| members | leave | members left | script | median server us/call | min-max us/call | median server us/member | median main-thread CPU us/member | calls per sample |"
        echo "|--------:|------|-------------:|--------|---------------------:|----------------:|-----------------:|-----------------:|-----------------:|"
        for n in $ZSIZES; do for c in none 10pct; do for impl in ztick seed; do
            k=(members="$n" case="$c" impl="$impl")
            name=$impl; [ "$impl" = ztick ] && name="lua/ztick.lua"; [ "$impl" = seed ] && name="bench/ztick_seed.lua"
            printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$n" "${c/pct/%}" "${ZT_LEFT[$n/$c]}" "$name" \
                "$(fmt "$(sel "$ZT_RAW" usec_per_call "${k[@]}" | median)" '%.0f')" "$(sel "$ZT_RAW" usec_per_call "${k[@]}" | minmax)" \
                "$(fmt "$(sel "$ZT_RAW" us_per_member "${k[@]}" | median)" '%.3f')" \
                "$(fmt "$(sel "$ZT_RAW" cpu_us_per_member "${k[@]}" | median)" '%.3f')" "$(sel "$ZT_RAW" calls "${k[@]}" | head -1)"
        done; done; done
    )
fi
TARGETS=$(
    echo "| ratio | ratio of medians | median of per-round ratios | target | verdict (ratio of medians / per-round ratios) |"
    echo "|-------|-----------------:|---------------------------:|-------:|---------|"
    if [ "$SKIP_TP" != 1 ]; then
        for verb in $VERBS; do for P in $PIPELINES; do
            a=$(sel "$TP_RAW" rps verb="$verb" pipeline="$P" path=vp | median)
            b=$(sel "$TP_RAW" rps verb="$verb" pipeline="$P" path=direct | median)
            x=$(ratio "$a" "$b")
            y=""; [ "$SKIP_VP" = 1 ] || y=$(paired_csv "$TP_RAW" rps path vp direct verb="$verb" pipeline="$P")
            printf '| -P %s %s: verbproxy rps / direct EVALSHA rps | %s | %s | >= %s | %s |\n' "$P" "${verb^^}" \
                "$(fmt "$x" '%.3f')" "$(fmt "$y" '%.3f')" "$TARGET_VERB" "$(verdict "$x" '>=' "$TARGET_VERB") / $(verdict "$y" '>=' "$TARGET_VERB")"
        done; done
        # Where the gap comes from: the hop itself (bare forwarder) or verbproxy.
        for verb in $VERBS; do for P in $PIPELINES; do
            case " ${PATHS[*]} " in *" bare "*) ;; *) continue ;; esac
            c=$(sel "$TP_RAW" rps verb="$verb" pipeline="$P" path=bare | median)
            b=$(sel "$TP_RAW" rps verb="$verb" pipeline="$P" path=direct | median)
            printf '| -P %s %s: bare forwarder rps / direct EVALSHA rps (the floor of any 1:1 proxy) | %s | %s | - | - |\n' "$P" "${verb^^}" \
                "$(fmt "$(ratio "$c" "$b")" '%.3f')" "$(fmt "$(paired_csv "$TP_RAW" rps path bare direct verb="$verb" pipeline="$P")" '%.3f')"
            [ "$SKIP_VP" = 1 ] && continue
            a=$(sel "$TP_RAW" rps verb="$verb" pipeline="$P" path=vp | median)
            printf '| -P %s %s: verbproxy rps / bare forwarder rps | %s | %s | - | - |\n' "$P" "${verb^^}" \
                "$(fmt "$(ratio "$a" "$c")" '%.3f')" "$(fmt "$(paired_csv "$TP_RAW" rps path vp bare verb="$verb" pipeline="$P")" '%.3f')"
            a=$(sel "$TP_RAW" proxy_us_per_req verb="$verb" pipeline="$P" path=vp | median)
            c=$(sel "$TP_RAW" proxy_us_per_req verb="$verb" pipeline="$P" path=bare | median)
            printf '| -P %s %s: verbproxy CPU/req / bare forwarder CPU/req | %s | %s | - | - |\n' "$P" "${verb^^}" \
                "$(fmt "$(ratio "$a" "$c")" '%.3f')" "$(fmt "$(paired_csv "$TP_RAW" proxy_us_per_req path vp bare verb="$verb" pipeline="$P")" '%.3f')"
        done; done
    fi
    if [ "$SKIP_ZT" != 1 ]; then
        for n in $ZSIZES; do for c in none 10pct; do
            a=$(sel "$ZT_RAW" us_per_member members="$n" case="$c" impl=ztick | median)
            b=$(sel "$ZT_RAW" us_per_member members="$n" case="$c" impl=seed | median)
            x=$(ratio "$a" "$b")
            y=$(paired_csv "$ZT_RAW" us_per_member impl ztick seed members="$n" case="$c")
            printf '| ZTICK %s members, %s leave: ztick.lua server time / seed script'"'"'s | %s | %s | <= %s | %s |\n' \
                "$n" "${c/pct/%}" "$(fmt "$x" '%.3f')" "$(fmt "$y" '%.3f')" "$TARGET_ZTICK" "$(verdict "$x" '<=' "$TARGET_ZTICK") / $(verdict "$y" '<=' "$TARGET_ZTICK")"
        done; done
        # The same from redis-server's main-thread CPU time, which a busy
        # machine's preemption does not inflate (commandstats is wall time).
        for n in $ZSIZES; do for c in none 10pct; do
            a=$(sel "$ZT_RAW" cpu_us_per_member members="$n" case="$c" impl=ztick | median)
            b=$(sel "$ZT_RAW" cpu_us_per_member members="$n" case="$c" impl=seed | median)
            x=$(ratio "$a" "$b")
            y=$(paired_csv "$ZT_RAW" cpu_us_per_member impl ztick seed members="$n" case="$c")
            printf '| ZTICK %s members, %s leave: same, main-thread CPU time | %s | %s | (<= %s) | %s |\n' \
                "$n" "${c/pct/%}" "$(fmt "$x" '%.3f')" "$(fmt "$y" '%.3f')" "$TARGET_ZTICK" "$(verdict "$x" '<=' "$TARGET_ZTICK") / $(verdict "$y" '<=' "$TARGET_ZTICK")"
        done; done
    fi
)

echo
[ -z "$TP_TABLE" ] || { echo "$TP_TABLE"; echo; }
[ -z "$ZT_TABLE" ] || { echo "$ZT_TABLE"; echo; }
echo "$TARGETS"
echo

# ================================================================ report
CPU_MODEL=$(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)
REV=$(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null || echo "no commit")
DIRTY=$(cd "$ROOT" && [ -n "$(git status --porcelain -- proxy protocol lua bench/ztick_seed.lua CMakeLists.txt 2>/dev/null)" ] && echo " (+ uncommitted changes)" || true)
SECTION=$(
    echo "$VERBS_BEGIN"
    echo "## Virtual verbs"
    echo
    echo "Generated by \`bench/verbs.sh\` (see its header for the method)."
    echo
    echo "- command: \`${ORIG_ENV}${ORIG_CMD}\`"
    echo "- date: ${TP_DATE:-${ZT_DATE:-}}; load average before/after: part 1 ${TP_LOAD_BEFORE:--} / ${TP_LOAD_AFTER:--}, part 2 ${ZT_LOAD_BEFORE:--} / ${ZT_LOAD_AFTER:--}"
    echo "- machine: nproc=$(nproc), CPU: ${CPU_MODEL:-unknown}, kernel $(uname -r); shared and noisy (other jobs run beside), so figures are medians of $ROUNDS alternating rounds"
    echo "- versions: $(redis-server --version | awk '{print $1, $2, $3}'); $(redis-benchmark --version); tree ${REV}${DIRTY}; verbproxy Release (${BUILD_DIR#$ROOT/})"
    echo "- pinning: server side ${BENCH_TASKSET_SERVER:-none}, client ${BENCH_TASKSET_CLIENT:-none}; redis-benchmark, verbproxy and redis-server share the 2 cores"
    if [ "$SKIP_TP" != 1 ]; then
        echo "- part 1 runs: \`redis-benchmark -h 127.0.0.1 -p PORT -c $CLIENTS -n N -P P -r R -q --csv CMD\`, CMD = the verb (to verbproxy) or \`EVALSHA <sha of lua/<verb>.lua> 1 ...\` (to redis-server); $(for verb in $VERBS; do verb_case "$verb"; printf '%s: `%s`, -r %s, N = %s; ' "$verb" "${V_WORDS[*]}" "$V_R" "$(for P in $PIPELINES; do printf '%s (-P %s) ' "${NREQ[$verb/$P]}" "$P"; done | sed 's/ $//')"; done | sed 's/; $//')"
        echo "- \"EVALSHA server us/call\" is cmdstat_evalsha usec/calls over the run: the script's own server time, the same on both paths when the proxy adds nothing on the server"
    fi
    if [ "$SKIP_ZT" != 1 ]; then
        echo "- part 2: \`EVALSHA <sha> 1 w:<k> 0 <delta> <threshold>\`, each call on its own fresh \`COPY src:<n> w:<k>\` (made before the timed part); server time = cmdstat_evalsha usec / calls after CONFIG RESETSTAT (wall time inside Redis, so preemption on a busy machine inflates it); main-thread CPU = used_cpu_user_main_thread + used_cpu_sys_main_thread (INFO cpu) over the same calls; $ZMEMBERS members touched per sample"
    fi
    [ "$SKIP_VP" = 1 ] && [ "$SKIP_TP" != 1 ] && echo "- **verbproxy leg skipped** (did not build or does not run the verbs)"
    echo
    if [ -n "$TP_TABLE" ]; then
        echo "### Verb throughput: through verbproxy vs the same script by EVALSHA"
        echo
        echo "$TP_TABLE"
        echo
    fi
    if [ -n "$ZT_TABLE" ]; then
        echo "### ZTICK server time: lua/ztick.lua vs the seed script"
        echo
        echo "$ZT_TABLE"
        echo
    fi
    echo "### Targets"
    echo
    echo "$TARGETS"
    echo "$VERBS_END"
)

if [ -n "${BENCH_RESULTS:-}" ]; then
    RESULTS=$BENCH_RESULTS
elif [ "$SKIP_TP" != 1 ] && [ "$SKIP_ZT" != 1 ] && [ "$SKIP_VP" != 1 ]; then
    RESULTS="$SCRIPT_DIR/RESULTS.md"
else
    RESULTS="$OUT_DIR/RESULTS.verbs.partial.md"
fi
if [ -f "$RESULTS" ] && [ "$RESULTS" != "$OUT_DIR/RESULTS.verbs.partial.md" ]; then
    { without_verbs_block "$RESULTS"; echo; echo "$SECTION"; } >"$TMP/results.md"
else
    echo "$SECTION" >"$TMP/results.md"
fi
mv "$TMP/results.md" "$RESULTS"
log "wrote ${RESULTS#$ROOT/}; raw runs in ${TP_RAW#$ROOT/}, ${ZT_RAW#$ROOT/}"
