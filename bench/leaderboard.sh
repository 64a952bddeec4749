#!/usr/bin/env bash
# bench/leaderboard.sh - what the leaderboard verbs cost on the server
# (issue 10). Not a test. Every figure is server time: INFO commandstats'
# usec per call (wall time inside Redis, measured by Redis), after a CONFIG
# RESETSTAT, the script sent by EVALSHA / EVALSHA_RO straight to
# redis-server (the text verbproxy pins: `verbproxy --script NAME`, which
# must equal lib.sh's assemble_script of lua/NAME.lua), so the proxy is not
# in the measurement.
#
#   1. ZPAGE on a sorted set of BENCH_ZPAGE_MEMBERS members (member
#      player:<i>, i = 0 .. n-1, score i mod (n / BENCH_ZPAGE_TIES): every
#      score is shared by BENCH_ZPAGE_TIES members). A page of
#      BENCH_ZPAGE_COUNT members at several depths (first page, 1%, 50%, 99%,
#      last page), `EVALSHA_RO <zpage> 1 key cursor count [REV] [WITHSCORES]`
#      against `ZRANGE key start stop [REV] [WITHSCORES]` of the same page
#      (the same options on both sides: modes asc, asc_ws = WITHSCORES, rev =
#      REV, rev_ws = REV WITHSCORES). The cursors come from ZPAGE's own
#      replies (the last page of a first page of `start` members; past half
#      the set, of a first page the other way round, its direction letter
#      swapped). Paths:
#        common    the cursor's member is there with its score (ZSCORE, ZRANK,
#                  ZRANGE)
#        slow      the cursor's member was removed (ZREM before the samples,
#                  ZADD back after; not timed): binary search by rank among
#                  the members tied at its score
#        allequal  (informational, no target) the slow path's worst case: a
#                  copy of the set with every score 0 (ZUNIONSTORE ... WEIGHTS
#                  0), the cursor's member at 50% removed
#      "lookups" is the number of binary-search probes per call, counted by
#      Redis (the script's nested ZRANGE calls per call, less the page's).
#      A third side, "floor", is a script that does nothing but return
#      {'0', ZRANGE's reply}: what any script returning the page costs.
#      A round of a case is one redis-cli stream of BENCH_ZPAGE_CALLS calls
#      of each side, cut in BENCH_ZPAGE_CHUNKS chunks: each chunk runs every
#      side in turn (`CONFIG RESETSTAT`, the calls, `INFO commandstats`), the
#      side that goes first moving on every chunk and every round, so the
#      sides are measured milliseconds apart; a side's figure for the round
#      is the median of its chunks' usec per call (a chunk in which the
#      machine's other jobs held Redis up does not move it; the plain mean is
#      in the CSV too). Target: ZPAGE <= 1.5 x ZRANGE.
#
#   2. ZSNAPSHOT of BENCH_SNAP_DAYS daily sets (each BENCH_SNAP_PER_DAY of
#      BENCH_SNAP_BOOKS distinct books, member book:<id>, score the day's
#      sales: Zipf-like popularity x noise, integers >= 1, so many ties), a
#      TTL of BENCH_SNAP_TTL ms, against `ZUNIONSTORE dest n day... ` +
#      `PEXPIRE dest ttl` sent by a client (the sum of both commands' usec).
#      dest is deleted before every call (not timed), so every call builds.
#      Cases: sum (default AGGREGATE), weights (WEIGHTS BENCH_SNAP_WEIGHTS),
#      count (AGGREGATE COUNT, computed in Lua on Redis < 8.8; against the
#      SUM union, no target). Target: sum and weights <= 1.2 x.
#
#   3. The AGGREGATE COUNT polyfill on the same sets: lua/zcountstore.lua
#      (`EVALSHA <sha> n+1 dest day... ZUNIONSTORE dest n day... AGGREGATE
#      COUNT`) against the native `ZUNIONSTORE dest n day... AGGREGATE SUM`
#      (target <= 5 x); also ZINTERSTORE (against ZINTERSTORE ... SUM) and
#      lua/zcount.lua's ZUNION ... WITHSCORES (`EVALSHA_RO <sha> n day... 2
#      ZUNION n day... AGGREGATE COUNT WITHSCORES`, sorted in Lua, against
#      ZUNION ... AGGREGATE SUM WITHSCORES), for information. dest is deleted
#      before every call (not timed) on both sides.
#
#      In parts 2 and 3 a round of a case is BENCH_SNAP_CALLS calls of each
#      side, the sides taking turns call by call (A B, then B A, ...).
#
# Parts 2 and 3 also record redis-server's main-thread CPU time per call
# (INFO cpu, read around each call), which preemption on a busy machine
# does not inflate as it does wall time.
#
# Before any figure: ZPAGE's page (and next cursor) equals the ZRANGE page
# in every case; ZSNAPSHOT's dest equals ZUNIONSTORE's (with its TTL, reply
# [1, ttl], then [0, ...] once it exists); AGGREGATE COUNT's results equal
# the SUM over copies of the sets with every score 1.
#
# Medians over the rounds are reported, as the ratio of the medians and the
# median of the per-round ratios (bench/verbs.sh's method; the sides of a
# round ran side by side, so the per-round ratio is the steadier one on a
# busy machine).
#
# Usage: bash bench/leaderboard.sh          (from anywhere; idempotent)
#
# Environment (all optional):
#   BENCH_ROUNDS=5                  rounds of every part
#   BENCH_ZPAGE_MEMBERS=1000000     members of part 1's set
#   BENCH_ZPAGE_TIES=1000           members per score in that set
#   BENCH_ZPAGE_COUNT=50            members per page
#   BENCH_ZPAGE_CALLS=1000          calls of each side per round of a case
#   BENCH_ZPAGE_CHUNKS=5            ... in this many chunks
#   BENCH_ZPAGE_DEPTHS="first 1% 50% 99% last"
#   BENCH_ZPAGE_MODES="asc asc_ws rev_ws"   (also: rev)
#   BENCH_ZPAGE_WORST=1             0: no allequal case (saves a 1M-member copy)
#   BENCH_SNAP_BOOKS=150000, BENCH_SNAP_DAYS=7, BENCH_SNAP_PER_DAY=100000
#   BENCH_SNAP_WEIGHTS="0.4 0.5 0.6 0.7 0.8 0.9 1"   (default: 0.1 x (day + 3))
#   BENCH_SNAP_TTL=86400000         ZSNAPSHOT's ttl-ms
#   BENCH_SNAP_CALLS=2              calls of each side per round of parts 2 and 3
#   BENCH_SKIP_ZPAGE=1, BENCH_SKIP_SNAPSHOT=1, BENCH_SKIP_POLYFILL=1   skip a part
#   BENCH_LUA_DIR=path              where the scripts live (default: lua/ of
#                                   this tree, checked against the built
#                                   binary's `--script`)
#   BENCH_BASELINE_REV=rev          also run lua/ of that git revision (git
#                                   archive, the worktree is not touched) as a
#                                   side "base" of every script case: before/after
#   VERBPROXY_BIN, BENCH_BUILD_DIR=build-bench, BENCH_NO_BUILD, BENCH_NO_INSTALL,
#   BENCH_TASKSET_SERVER            as in bench/run.sh
#   BENCH_RESULTS=path              where to write the section. Default: the
#                                   "Leaderboard verbs" section of bench/RESULTS.md
#                                   (the rest of the file is kept) when all three
#                                   parts ran; bench/out/RESULTS.leaderboard.partial.md
#                                   otherwise.
# Raw per-sample data: bench/out/leaderboard-zpage.csv and
# bench/out/leaderboard-aggregate.csv (bench/out/ is git-ignored).

set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$SCRIPT_DIR/.." && pwd)
OUT_DIR="$SCRIPT_DIR/out"

ROUNDS=${BENCH_ROUNDS:-5}
ZP_MEMBERS=${BENCH_ZPAGE_MEMBERS:-1000000}
ZP_TIES=${BENCH_ZPAGE_TIES:-1000}
ZP_COUNT=${BENCH_ZPAGE_COUNT:-50}
ZP_CALLS=${BENCH_ZPAGE_CALLS:-1000}
ZP_CHUNKS=${BENCH_ZPAGE_CHUNKS:-5}
ZP_DEPTHS=${BENCH_ZPAGE_DEPTHS:-"first 1% 50% 99% last"}
ZP_MODES=${BENCH_ZPAGE_MODES:-"asc asc_ws rev_ws"}
ZP_WORST=${BENCH_ZPAGE_WORST:-1}
SN_BOOKS=${BENCH_SNAP_BOOKS:-150000}
SN_DAYS=${BENCH_SNAP_DAYS:-7}
SN_PER_DAY=${BENCH_SNAP_PER_DAY:-100000}
SN_TTL=${BENCH_SNAP_TTL:-86400000}
SN_CALLS=${BENCH_SNAP_CALLS:-2}
SN_WEIGHTS=${BENCH_SNAP_WEIGHTS:-$(awk -v n="$SN_DAYS" 'BEGIN { for (d = 1; d <= n; d++) printf "%s%g", (d > 1 ? " " : ""), 0.1 * (d + 3) }')}
SKIP_ZP=${BENCH_SKIP_ZPAGE:-0}
SKIP_SN=${BENCH_SKIP_SNAPSHOT:-0}
SKIP_PF=${BENCH_SKIP_POLYFILL:-0}
LUA_DIR=${BENCH_LUA_DIR:-$ROOT/lua}
BASE_REV=${BENCH_BASELINE_REV:-}
BUILD_DIR="$ROOT/${BENCH_BUILD_DIR:-build-bench}"
SKIP_VP=0

# Targets (from the issue).
TARGET_ZPAGE=1.5      # ZPAGE server time / ZRANGE's, <=
TARGET_SNAP=1.2       # ZSNAPSHOT / (ZUNIONSTORE + PEXPIRE), <=
TARGET_POLYFILL=5     # ZUNIONSTORE ... AGGREGATE COUNT (polyfill) / native ZUNIONSTORE ... SUM, <=

ORIG_CMD="bash bench/leaderboard.sh"
ORIG_ENV=$(env | grep -E '^(BENCH_|VERBPROXY_BIN=)' | sort | tr '\n' ' ' || true)

LOG_TAG=leaderboard
# shellcheck source=bench/lib.sh
. "$SCRIPT_DIR/lib.sh"

[ "$(wc -w <<<"$SN_WEIGHTS")" = "$SN_DAYS" ] || die "BENCH_SNAP_WEIGHTS needs $SN_DAYS weights"
[ $((ZP_MEMBERS / 2)) -gt "$ZP_COUNT" ] || die "BENCH_ZPAGE_MEMBERS must be over twice BENCH_ZPAGE_COUNT"
[ $((ZP_CALLS % ZP_CHUNKS)) = 0 ] || die "BENCH_ZPAGE_CALLS must be a multiple of BENCH_ZPAGE_CHUNKS"

need_redis
mkdir -p "$OUT_DIR"
build_verbproxy

TMP=$(mktemp -d /tmp/verbproxy-bench.XXXXXX)
start_redis

# ================================================================ scripts
# The text Redis runs: lua/NAME.lua with its helpers; when LUA_DIR is this
# tree's lua/ and verbproxy built, it must be what the binary pins.
declare -A SHA BASE_SHA
for name in zpage zsnapshot zcountstore zcount; do
    SHA[$name]=$(script_load "$LUA_DIR/$name.lua")
    if [ "$SKIP_VP" != 1 ] && [ "$LUA_DIR" = "$ROOT/lua" ]; then
        "$VP_BIN" --script "$name" >"$TMP/vp.$name.lua" || die "$VP_BIN --script $name failed"
        cmp -s "$TMP/vp.$name.lua" "$TMP/assembled.$name.lua" \
            || die "$VP_BIN --script $name differs from lua/$name.lua assembled (stale build?)"
    fi
done
log "scripts: $(for n in zpage zsnapshot zcountstore zcount; do printf '%s %s  ' "$n" "${SHA[$n]:0:12}"; done)"
if [ -n "$BASE_REV" ]; then
    mkdir -p "$TMP/base"
    (cd "$ROOT" && git archive "$BASE_REV" lua) | tar -x -C "$TMP/base" || die "cannot read lua/ at $BASE_REV"
    BASE_REV_SHORT=$(cd "$ROOT" && git rev-parse --short "$BASE_REV")
    for name in zpage zsnapshot zcountstore zcount; do
        BASE_SHA[$name]=$(script_load "$TMP/base/lua/$name.lua")
    done
    log "baseline: lua/ at $BASE_REV_SHORT: $(for n in zpage zsnapshot zcountstore zcount; do printf '%s %s  ' "$n" "${BASE_SHA[$n]:0:12}"; done)"
fi
FLOOR_SCRIPT="#!lua flags=no-writes
return { '0', redis.call('ZRANGE', KEYS[1], unpack(ARGV)) }"
SHA[floor]=$(rcli SCRIPT LOAD "$FLOOR_SCRIPT")

# hex string -> its lower-case hex
hex() { printf '%s' "$1" | od -An -tx1 -v | tr -d ' \n'; }
# unhex hex -> the bytes
unhex() { printf '%s' "$1" | xxd -r -p; }
load1() { cut -d' ' -f1 /proc/loadavg; }

# ================================================================ part 1: ZPAGE
ZP_RAW="$OUT_DIR/leaderboard-zpage.csv"
ZP_KEY=lb:players
ZP_SAME=lb:same

# Member player:<i>, score i mod (n / ties).
ZP_FILL='
local n, ties = tonumber(ARGV[1]), tonumber(ARGV[2])
local distinct = math.max(1, math.floor(n / ties))
redis.call("DEL", KEYS[1])
local i = 0
while i < n do
    local args = {}
    for j = i, math.min(i + 999, n - 1) do
        args[#args + 1] = j % distinct
        args[#args + 1] = string.format("player:%07d", j)
    end
    redis.call("ZADD", KEYS[1], unpack(args))
    i = i + 1000
end
return redis.call("ZCARD", KEYS[1])'

# depth_start depth -> the rank the page starts at
depth_start() {
    case $1 in
    first) echo 0 ;;
    last) echo $((ZP_MEMBERS - ZP_COUNT)) ;;
    *%) awk -v n="$ZP_MEMBERS" -v p="${1%\%}" 'BEGIN { printf "%d\n", n * p / 100 }' ;;
    *) die "unknown depth '$1' (first, last or N%)" ;;
    esac
}
depth_label() { local d=${1//%/pct}; echo "${d//./_}"; }

# mode_opts mode -> the options ZPAGE and ZRANGE both get; mode_dir -> a|r
mode_opts() {
    case $1 in
    asc) echo "" ;; asc_ws) echo "WITHSCORES" ;; rev) echo "REV" ;; rev_ws) echo "REV WITHSCORES" ;;
    *) die "unknown mode '$1' (asc asc_ws rev rev_ws)" ;;
    esac
}
mode_dir() { case $1 in rev*) echo r ;; *) echo a ;; esac; }

# zp_cursor key dir start -> ZPAGE's cursor after which a page in direction
# dir starts at rank start (counted in that direction): the cursor ZPAGE
# returns with a first page of `start` members; past half the set, with a
# first page of n - start + 1 members the other way round (whose last member
# is the same), its direction letter swapped.
declare -A CURSOR_CACHE
zp_cursor() {
    local key=$1 dir=$2 s=$3 n c
    if [ -n "${CURSOR_CACHE[$key/$dir/$s]:-}" ]; then echo "${CURSOR_CACHE[$key/$dir/$s]}"; return 0; fi
    n=$(rcli ZCARD "$key")
    if [ $((2 * s)) -le "$n" ]; then
        if [ "$dir" = a ]; then rcli EVALSHA_RO "${SHA[zpage]}" 1 "$key" 0 "$s" >"$TMP/bigpage"
        else rcli EVALSHA_RO "${SHA[zpage]}" 1 "$key" 0 "$s" REV >"$TMP/bigpage"; fi
        c=$(head -n 1 "$TMP/bigpage")
    else
        if [ "$dir" = a ]; then rcli EVALSHA_RO "${SHA[zpage]}" 1 "$key" 0 $((n - s + 1)) REV >"$TMP/bigpage"
        else rcli EVALSHA_RO "${SHA[zpage]}" 1 "$key" 0 $((n - s + 1)) >"$TMP/bigpage"; fi
        c=$(head -n 1 "$TMP/bigpage")
        c="$dir${c#?}"
    fi
    [[ "$c" =~ ^[ar][^:]+:([0-9a-f][0-9a-f])+$ ]] || die "ZPAGE gave no cursor for $key $dir $s: '$c'"
    CURSOR_CACHE[$key/$dir/$s]=$c
    echo "$c"
}

# Cases: ZC_* indexed by case number.
declare -a ZC_MODE ZC_DEPTH ZC_PATH ZC_KEY ZC_CURSOR ZC_START ZC_RMSCORE ZC_RMMEMBER
ZP_N=0
zp_add() {  # zp_add mode depth path key cursor start-during-sample [score member removed]
    ZC_MODE[$ZP_N]=$1; ZC_DEPTH[$ZP_N]=$2; ZC_PATH[$ZP_N]=$3; ZC_KEY[$ZP_N]=$4
    ZC_CURSOR[$ZP_N]=$5; ZC_START[$ZP_N]=$6; ZC_RMSCORE[$ZP_N]=${7:-}; ZC_RMMEMBER[$ZP_N]=${8:-}
    ZP_N=$((ZP_N + 1))
}
# cursor_score cursor, cursor_member cursor
cursor_score() { local c=${1#?}; echo "${c%%:*}"; }
cursor_member() { unhex "${1##*:}"; }

# zp_enter i / zp_leave i: the case's state (its cursor's member removed on
# the slow path, put back afterwards; not timed).
zp_enter() {
    [ "${ZC_PATH[$1]}" = slow ] || return 0
    [ "$(rcli ZREM "${ZC_KEY[$1]}" "${ZC_RMMEMBER[$1]}")" = 1 ] || die "ZREM ${ZC_RMMEMBER[$1]} failed"
}
zp_leave() {
    [ "${ZC_PATH[$1]}" = slow ] || return 0
    [ "$(rcli ZADD "${ZC_KEY[$1]}" "${ZC_RMSCORE[$1]}" "${ZC_RMMEMBER[$1]}")" = 1 ] || die "ZADD back ${ZC_RMMEMBER[$1]} failed"
}
# zp_cmd i side -> the command of that side, one line
zp_cmd() {
    local i=$1 opts stop
    opts=$(mode_opts "${ZC_MODE[$i]}")
    stop=$((ZC_START[$i] + ZP_COUNT - 1))
    case $2 in
    zpage) echo "EVALSHA_RO ${SHA[zpage]} 1 ${ZC_KEY[$i]} ${ZC_CURSOR[$i]} $ZP_COUNT $opts" ;;
    base)  echo "EVALSHA_RO ${BASE_SHA[zpage]} 1 ${ZC_KEY[$i]} ${ZC_CURSOR[$i]} $ZP_COUNT $opts" ;;
    floor) echo "EVALSHA_RO ${SHA[floor]} 1 ${ZC_KEY[$i]} ${ZC_START[$i]} $stop $opts" ;;
    zrange) echo "ZRANGE ${ZC_KEY[$i]} ${ZC_START[$i]} $stop $opts" ;;
    esac
}
# zp_check i: (in the case's state) every script side's page is the ZRANGE
# page, and ZPAGE's next cursor is the last member's (or 0 at the end).
zp_check() {
    local i=$1 side lines want card stop last score dir revopt="" next
    # shellcheck disable=SC2046
    rcli $(zp_cmd "$i" zrange) >"$TMP/want"
    lines=$(wc -l <"$TMP/want")
    case $(mode_opts "${ZC_MODE[$i]}") in *WITHSCORES*) want=$((2 * ZP_COUNT)) ;; *) want=$ZP_COUNT ;; esac
    [ "$lines" = "$want" ] || die "case $i: $(zp_cmd "$i" zrange) gave $lines lines, not $want"
    card=$(rcli ZCARD "${ZC_KEY[$i]}")
    stop=$((ZC_START[$i] + ZP_COUNT - 1))
    dir=$(mode_dir "${ZC_MODE[$i]}")
    [ "$dir" = a ] || revopt=REV
    if [ $((stop + 1)) -ge "$card" ]; then
        next=0
    else
        # shellcheck disable=SC2086
        last=$(rcli ZRANGE "${ZC_KEY[$i]}" "$stop" "$stop" $revopt)
        score=$(rcli ZSCORE "${ZC_KEY[$i]}" "$last")
        next="$dir$score:$(hex "$last")"
    fi
    for side in "${ZP_SIDES[@]}"; do
        [ "$side" != zrange ] || continue
        # shellcheck disable=SC2046
        rcli $(zp_cmd "$i" "$side") >"$TMP/got"
        if [ "$side" = floor ]; then
            [ "$(head -n 1 "$TMP/got")" = 0 ] || die "case $i: floor script's reply"
        else
            [ "$(head -n 1 "$TMP/got")" = "$next" ] \
                || die "case $i (${ZC_MODE[$i]} ${ZC_DEPTH[$i]} ${ZC_PATH[$i]}): $side's next cursor '$(head -n 1 "$TMP/got")', expected '$next'"
        fi
        tail -n +2 "$TMP/got" | cmp -s - "$TMP/want" \
            || die "case $i (${ZC_MODE[$i]} ${ZC_DEPTH[$i]} ${ZC_PATH[$i]}): $side's page differs from $(zp_cmd "$i" zrange)"
    done
}

# zp_round i r: one round of case i, every side of it in one redis-cli
# stream: BENCH_ZPAGE_CHUNKS chunks, each a run of every side in turn (the
# side that goes first moves on every chunk and every round), each run
# `CONFIG RESETSTAT`, its calls, `INFO commandstats`; so the sides are
# measured within milliseconds of each other. Sets, per side, ZP_UPC[side]
# (the median of its runs' usec per call), ZP_MEAN[side] (the mean) and
# ZP_LOOKUPS[side] (binary-search probes per call; scripts only).
declare -A ZP_UPC ZP_MEAN ZP_LOOKUPS
zp_round() {
    local i=$1 r=$2 k j side order="" per=$((ZP_CALLS / ZP_CHUNKS)) out
    {
        for k in $(seq 1 "$ZP_CHUNKS"); do
            for j in $(seq 0 $((NS - 1))); do
                side=${ZP_SIDES[$(((j + r + k - 2) % NS))]}
                echo "CONFIG RESETSTAT"
                yes "$(zp_cmd "$i" "$side")" | head -n "$per" || true
                echo "INFO commandstats"
            done
        done
    } >"$TMP/zp.round"
    for k in $(seq 1 "$ZP_CHUNKS"); do
        for j in $(seq 0 $((NS - 1))); do order="$order ${ZP_SIDES[$(((j + r + k - 2) % NS))]}"; done
    done
    out=$(rcli <"$TMP/zp.round" | tr -d '\r' | awk -F'[:,=]' -v order="$order" -v per="$per" '
        BEGIN { nb = split(order, side, " ") }
        /^# Commandstats/ { b++; st = (side[b] == "zrange") ? "cmdstat_zrange" : "cmdstat_evalsha_ro"; next }
        b && $1 == st { calls[b] = $3; usec[b] = $5; failed[b] = $11 }
        b && $1 == "cmdstat_zrange" { zr[b] = $3 }
        END {
            if (b != nb) { print "bad: " b " runs of " nb; exit }
            for (x = 1; x <= nb; x++) {
                if (calls[x] != per || failed[x] != 0) { print "bad: run " x " (" side[x] "): " calls[x] " calls, " failed[x] " failed"; exit }
                s = side[x]; n[s]++; m[s, n[s]] = usec[x] / per; tu[s] += usec[x]; tz[s] += zr[x]
            }
            for (s in n) {
                k = n[s]
                for (a = 2; a <= k; a++) for (c = a; c > 1 && m[s, c - 1] > m[s, c]; c--) { t = m[s, c]; m[s, c] = m[s, c - 1]; m[s, c - 1] = t }
                med = (k % 2) ? m[s, (k + 1) / 2] : (m[s, k / 2] + m[s, k / 2 + 1]) / 2
                printf "%s %.3f %.3f %.2f\n", s, med, tu[s] / (k * per), tz[s] / (k * per) - 1
            }
        }')
    case $out in bad*|"") die "ZPAGE case $i round $r: $out" ;; esac
    while read -r side med mean lk; do
        ZP_UPC[$side]=$med; ZP_MEAN[$side]=$mean; ZP_LOOKUPS[$side]=$lk
        case $side in zpage|base) ;; *) ZP_LOOKUPS[$side]="" ;; esac
    done <<<"$out"
}

ZP_SIDES=(zpage zrange floor)
[ -z "$BASE_REV" ] || ZP_SIDES+=(base)
NS=${#ZP_SIDES[@]}
if [ "$SKIP_ZP" != 1 ]; then
    log "part 1: filling $ZP_KEY ($ZP_MEMBERS members, $ZP_TIES per score)"
    [ "$(rcli EVAL "$ZP_FILL" 1 "$ZP_KEY" "$ZP_MEMBERS" "$ZP_TIES")" = "$ZP_MEMBERS" ] || die "could not fill $ZP_KEY"
    for mode in $ZP_MODES; do
        dir=$(mode_dir "$mode")
        for depth in $ZP_DEPTHS; do
            s=$(depth_start "$depth")
            if [ "$s" = 0 ]; then
                zp_add "$mode" "$(depth_label "$depth")" none "$ZP_KEY" 0 0
                continue
            fi
            c=$(zp_cursor "$ZP_KEY" "$dir" "$s")
            zp_add "$mode" "$(depth_label "$depth")" common "$ZP_KEY" "$c" "$s"
            zp_add "$mode" "$(depth_label "$depth")" slow "$ZP_KEY" "$c" $((s - 1)) "$(cursor_score "$c")" "$(cursor_member "$c")"
        done
    done
    if [ "$ZP_WORST" = 1 ]; then
        rcli ZUNIONSTORE "$ZP_SAME" 1 "$ZP_KEY" WEIGHTS 0 >/dev/null
        s=$(depth_start 50%)
        c=$(zp_cursor "$ZP_SAME" a "$s")
        [ "$(rcli ZREM "$ZP_SAME" "$(cursor_member "$c")")" = 1 ] || die "ZREM from $ZP_SAME failed"
        zp_add asc 50pct allequal "$ZP_SAME" "$c" $((s - 1))
    fi
    for i in $(seq 0 $((ZP_N - 1))); do
        zp_enter "$i"; zp_check "$i"; zp_leave "$i"
    done
    log "check: in all $ZP_N cases ZPAGE's page is ZRANGE's, and its next cursor the last member's"

    echo "round,mode,depth,path,side,calls,usec_per_call,usec_per_call_mean,lookups,load1" >"$ZP_RAW"
    log "part 1: ZPAGE vs ZRANGE; $ZP_N cases; sides ${ZP_SIDES[*]}; rounds $ROUNDS; $ZP_CALLS calls of each side per round in $ZP_CHUNKS chunks"
    ZP_DATE=$(date -u '+%Y-%m-%d %H:%M:%S UTC')
    ZP_LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
    for r in $(seq 1 "$ROUNDS"); do
        for i in $(seq 0 $((ZP_N - 1))); do
            zp_enter "$i"
            zp_round "$i" "$r"
            zp_leave "$i"
            line=""
            for side in "${ZP_SIDES[@]}"; do
                echo "$r,${ZC_MODE[$i]},${ZC_DEPTH[$i]},${ZC_PATH[$i]},$side,$ZP_CALLS,${ZP_UPC[$side]},${ZP_MEAN[$side]},${ZP_LOOKUPS[$side]},$(load1)" >>"$ZP_RAW"
                line="$line $side ${ZP_UPC[$side]}${ZP_LOOKUPS[$side]:+ (${ZP_LOOKUPS[$side]} lookups)}"
            done
            log "round $r/$ROUNDS  ${ZC_MODE[$i]} ${ZC_DEPTH[$i]} ${ZC_PATH[$i]}: us/call$line"
        done
    done
    ZP_LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)
    # the 1M-member copy is no longer needed
    rcli DEL "$ZP_SAME" >/dev/null
fi

# ================================================================ parts 2 and 3: aggregates
AG_RAW="$OUT_DIR/leaderboard-aggregate.csv"
AG_DEST=lb:dest
AG_REF=lb:ref
DAYS=""; ONES=""
for d in $(seq 1 "$SN_DAYS"); do DAYS="$DAYS lb:day:$d"; ONES="$ONES lb:one:$d"; done
DAYS=${DAYS# }; ONES=${ONES# }

# KEYS = the daily sets; ARGV = books, members per day, seed. Each day a
# random subset (Park-Miller generator, so every run has the same data);
# book b sells about 100000 / b^0.8 a day, times 0.5-1.5, at least 1.
SN_FILL='
local books, per_day, x = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local function rand() x = (16807 * x) % 2147483647 return x / 2147483647 end
local pop, ids = {}, {}
for b = 1, books do pop[b] = 100000 / b ^ 0.8; ids[b] = b end
for d = 1, #KEYS do
    redis.call("DEL", KEYS[d])
    for i = 1, per_day do
        local j = i + math.floor(rand() * (books - i + 1))
        ids[i], ids[j] = ids[j], ids[i]
    end
    local args = {}
    for i = 1, per_day do
        local b = ids[i]
        args[#args + 1] = math.max(1, math.floor(pop[b] * (0.5 + rand())))
        args[#args + 1] = string.format("book:%06d", b)
        if #args == 2000 or i == per_day then
            redis.call("ZADD", KEYS[d], unpack(args))
            args = {}
        end
    end
end
return redis.call("ZCARD", KEYS[1])'
# KEYS[1] copied to KEYS[2] with every score 1.
SN_ONES='
redis.call("DEL", KEYS[2])
local members = redis.call("ZRANGE", KEYS[1], 0, -1)
local args = {}
for i, m in ipairs(members) do
    args[#args + 1] = 1
    args[#args + 1] = m
    if #args == 2000 or i == #members then
        redis.call("ZADD", KEYS[2], unpack(args))
        args = {}
    end
end
return redis.call("ZCARD", KEYS[2])'

# ag_cmds case side -> the side's command lines; ag_stats case side -> the
# commandstats names whose usec make its server time (the first one's calls
# are checked)
ag_cmds() {
    local sha
    case $2 in base) sha=BASE_SHA ;; *) sha=SHA ;; esac
    local -n S=$sha
    if [ "$2" = native ]; then
        case $1 in
        sum|count) printf 'ZUNIONSTORE %s %s %s\nPEXPIRE %s %s\n' "$AG_DEST" "$SN_DAYS" "$DAYS" "$AG_DEST" "$SN_TTL" ;;
        weights) printf 'ZUNIONSTORE %s %s %s WEIGHTS %s\nPEXPIRE %s %s\n' "$AG_DEST" "$SN_DAYS" "$DAYS" "$SN_WEIGHTS" "$AG_DEST" "$SN_TTL" ;;
        zunionstore) echo "ZUNIONSTORE $AG_DEST $SN_DAYS $DAYS AGGREGATE SUM" ;;
        zinterstore) echo "ZINTERSTORE $AG_DEST $SN_DAYS $DAYS AGGREGATE SUM" ;;
        zunion) echo "ZUNION $SN_DAYS $DAYS AGGREGATE SUM WITHSCORES" ;;
        esac
        return 0
    fi
    case $1 in
    sum) echo "EVALSHA ${S[zsnapshot]} $((SN_DAYS + 1)) $AG_DEST $DAYS $SN_TTL $SN_DAYS $DAYS" ;;
    weights) echo "EVALSHA ${S[zsnapshot]} $((SN_DAYS + 1)) $AG_DEST $DAYS $SN_TTL $SN_DAYS $DAYS WEIGHTS $SN_WEIGHTS" ;;
    count) echo "EVALSHA ${S[zsnapshot]} $((SN_DAYS + 1)) $AG_DEST $DAYS $SN_TTL $SN_DAYS $DAYS AGGREGATE COUNT" ;;
    zunionstore) echo "EVALSHA ${S[zcountstore]} $((SN_DAYS + 1)) $AG_DEST $DAYS ZUNIONSTORE $AG_DEST $SN_DAYS $DAYS AGGREGATE COUNT" ;;
    zinterstore) echo "EVALSHA ${S[zcountstore]} $((SN_DAYS + 1)) $AG_DEST $DAYS ZINTERSTORE $AG_DEST $SN_DAYS $DAYS AGGREGATE COUNT" ;;
    zunion) echo "EVALSHA_RO ${S[zcount]} $SN_DAYS $DAYS 2 ZUNION $SN_DAYS $DAYS AGGREGATE COUNT WITHSCORES" ;;
    esac
}
ag_stats() {
    if [ "$2" = native ]; then
        case $1 in sum|count|weights) echo "zunionstore pexpire" ;; *) echo "$1" ;; esac
    else
        case $1 in zunion) echo evalsha_ro ;; *) echo evalsha ;; esac
    fi
}
ag_part() { case $1 in sum|weights|count) echo snapshot ;; *) echo polyfill ;; esac; }

# dump key -> md5 of its members and scores
dump() { rcli ZRANGE "$1" 0 -1 WITHSCORES | md5sum | cut -d' ' -f1; }

# ag_check case: every script side's result is the reference's.
# shellcheck disable=SC2086,SC2046  # DAYS, ONES, SN_WEIGHTS and the commands are word lists
ag_check() {
    local c=$1 side ref reply got
    case $c in
    sum) rcli ZUNIONSTORE "$AG_REF" "$SN_DAYS" $DAYS >/dev/null ;;
    weights) rcli ZUNIONSTORE "$AG_REF" "$SN_DAYS" $DAYS WEIGHTS $SN_WEIGHTS >/dev/null ;;
    count|zunionstore|zunion) rcli ZUNIONSTORE "$AG_REF" "$SN_DAYS" $ONES >/dev/null ;;
    zinterstore) rcli ZINTERSTORE "$AG_REF" "$SN_DAYS" $ONES >/dev/null ;;
    esac
    ref=$(dump "$AG_REF")
    [ "$(rcli ZCARD "$AG_REF")" -gt 0 ] || die "$c: the reference is empty"
    for side in "${AG_SIDES[@]}"; do
        [ "$side" != native ] || continue
        rcli DEL "$AG_DEST" >/dev/null
        # shellcheck disable=SC2046
        reply=$(rcli $(ag_cmds "$c" "$side") | tr '\n' ' ')
        case $c in
        sum|weights|count)
            [ "$reply" = "1 $SN_TTL " ] || die "$c ($side): ZSNAPSHOT replied '$reply', not [1, $SN_TTL]"
            got=$(dump "$AG_DEST")
            pttl=$(rcli PTTL "$AG_DEST")
            [ "$pttl" -gt 0 ] && [ "$pttl" -le "$SN_TTL" ] || die "$c ($side): dest's PTTL is $pttl"
            # shellcheck disable=SC2046
            reply=$(rcli $(ag_cmds "$c" "$side") | head -n 1)
            [ "$reply" = 0 ] || die "$c ($side): ZSNAPSHOT on an existing dest replied '$reply' first, not 0"
            ;;
        zunionstore|zinterstore)
            [ "$reply" = "$(rcli ZCARD "$AG_REF") " ] || die "$c ($side): replied '$reply', not the reference's size"
            got=$(dump "$AG_DEST") ;;
        zunion)
            # shellcheck disable=SC2046
            got=$(rcli $(ag_cmds "$c" "$side") | md5sum | cut -d' ' -f1)
            ref=$(rcli ZUNION "$SN_DAYS" $ONES WITHSCORES | md5sum | cut -d' ' -f1) ;;
        esac
        [ "$got" = "$ref" ] || die "$c ($side): the result differs from the reference"
    done
    rcli DEL "$AG_DEST" "$AG_REF" >/dev/null
}

# ag_round case r: one round of the case: BENCH_SNAP_CALLS calls of every
# side, the sides taking turns call by call (the side that goes first moves
# on every call and every round: A B, B A, ...), each call after `DEL dest`
# and `CONFIG RESETSTAT` (not timed). Sets, per side, AG_UPC[side] (server
# usec per call) and AG_CPC[side] (main-thread CPU us per call).
declare -A AG_UPC AG_CPC
ag_round() {
    local c=$1 r=$2 k j side c0 c1 st calls usec failed total
    local -A tu tc
    for side in "${AG_SIDES[@]}"; do tu[$side]=0; tc[$side]=0; done
    for k in $(seq 1 "$SN_CALLS"); do
        for j in $(seq 0 $((NAS - 1))); do
            side=${AG_SIDES[$(((j + r + k - 2) % NAS))]}
            ag_cmds "$c" "$side" >"$TMP/ag.cmd"
            rcli DEL "$AG_DEST" >/dev/null
            rcli CONFIG RESETSTAT >/dev/null
            c0=$(main_cpu)
            rcli <"$TMP/ag.cmd" >/dev/null
            c1=$(main_cpu)
            total=0
            for st in $(ag_stats "$c" "$side"); do
                read -r calls usec failed <<<"$(cmdstat "$st")"
                [ "$calls" = 1 ] && [ "$failed" = 0 ] || die "$c $side: $calls $st calls ($failed failed), expected 1"
                total=$((total + usec))
            done
            tu[$side]=$((tu[$side] + total))
            tc[$side]=$(awk -v a="$c0" -v b="$c1" -v t="${tc[$side]}" 'BEGIN { printf "%.6f", t + b - a }')
        done
    done
    for side in "${AG_SIDES[@]}"; do
        AG_UPC[$side]=$(awk -v u="${tu[$side]}" -v n="$SN_CALLS" 'BEGIN { printf "%.0f", u / n }')
        AG_CPC[$side]=$(awk -v t="${tc[$side]}" -v n="$SN_CALLS" 'BEGIN { printf "%.0f", t * 1e6 / n }')
    done
}

AG_CASES=()
[ "$SKIP_SN" = 1 ] || AG_CASES+=(sum weights count)
[ "$SKIP_PF" = 1 ] || AG_CASES+=(zunionstore zinterstore zunion)
AG_SIDES=(script native)
[ -z "$BASE_REV" ] || AG_SIDES+=(base)
NAS=${#AG_SIDES[@]}
if [ ${#AG_CASES[@]} -gt 0 ]; then
    rcli DEL "$ZP_KEY" >/dev/null   # part 1's set: memory back before the big unions
    log "parts 2-3: filling $SN_DAYS days of $SN_PER_DAY of $SN_BOOKS books"
    # shellcheck disable=SC2086
    [ "$(rcli EVAL "$SN_FILL" "$SN_DAYS" $DAYS "$SN_BOOKS" "$SN_PER_DAY" 12345)" = "$SN_PER_DAY" ] || die "could not fill the days"
    for d in $(seq 1 "$SN_DAYS"); do
        [ "$(rcli EVAL "$SN_ONES" 2 "lb:day:$d" "lb:one:$d")" = "$SN_PER_DAY" ] || die "could not copy lb:day:$d"
    done
    # shellcheck disable=SC2086
    SN_UNION=$(rcli ZUNIONSTORE "$AG_REF" "$SN_DAYS" $DAYS)
    # shellcheck disable=SC2086
    SN_INTER=$(rcli ZINTERSTORE "$AG_REF" "$SN_DAYS" $DAYS)
    SN_TOP=$(rcli ZRANGE "$AG_REF" 0 0 REV WITHSCORES | tr '\n' ' ')
    SN_DAY1=$(rcli EVAL 'local s, n = {}, 0
for i, v in ipairs(redis.call("ZRANGE", KEYS[1], 0, -1, "WITHSCORES")) do
    if i % 2 == 0 and not s[v] then s[v] = true; n = n + 1 end
end
return { redis.call("ZRANGE", KEYS[1], 0, 0, "WITHSCORES")[2], redis.call("ZRANGE", KEYS[1], -1, -1, "WITHSCORES")[2], n }' 1 lb:day:1 | tr '\n' ' ')
    read -r SN_MIN SN_MAX SN_DISTINCT <<<"$SN_DAY1"
    log "union: $SN_UNION members, intersection: $SN_INTER; day 1's scores: $SN_MIN to $SN_MAX, $SN_DISTINCT distinct"
    for c in "${AG_CASES[@]}"; do ag_check "$c"; done
    log "check: ZSNAPSHOT = ZUNIONSTORE (+ TTL), AGGREGATE COUNT = SUM over score-1 copies (${AG_CASES[*]})"

    echo "round,part,case,side,calls,usec_per_call,cpu_us_per_call,load1" >"$AG_RAW"
    log "parts 2-3: cases ${AG_CASES[*]}; sides ${AG_SIDES[*]}; rounds $ROUNDS; $SN_CALLS calls of each side per round, taking turns"
    AG_DATE=$(date -u '+%Y-%m-%d %H:%M:%S UTC')
    AG_LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
    for r in $(seq 1 "$ROUNDS"); do
        for c in "${AG_CASES[@]}"; do
            ag_round "$c" "$r"
            line=""
            for side in "${AG_SIDES[@]}"; do
                echo "$r,$(ag_part "$c"),$c,$side,$SN_CALLS,${AG_UPC[$side]},${AG_CPC[$side]},$(load1)" >>"$AG_RAW"
                line="$line  $side $(awk -v u="${AG_UPC[$side]}" -v p="${AG_CPC[$side]}" 'BEGIN { printf "%.1f ms (CPU %.1f)", u / 1000, p / 1000 }')"
            done
            log "round $r/$ROUNDS  $c:$line"
        done
    done
    AG_LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)
fi

# ================================================================ figures
med() { sel "$@" | median; }
# cmp_row file field cols... : "ratio of medians|median of per-round ratios"
# of side A over side B, for the rows matching the conditions
ratio_pair() {  # ratio_pair file field A B conds...
    local file=$1 f=$2 a=$3 b=$4
    shift 4
    echo "$(ratio "$(med "$file" "$f" "$@" side="$a")" "$(med "$file" "$f" "$@" side="$b")")|$(paired_csv "$file" "$f" side "$a" "$b" "$@")"
}
pretty_depth() { case $1 in first) echo "first page" ;; last) echo "last page" ;; *) echo "${1/pct/%}" | tr _ . ;; esac; }
pretty_mode() { case $1 in asc) echo "asc" ;; asc_ws) echo "asc WITHSCORES" ;; rev) echo "REV" ;; rev_ws) echo "REV WITHSCORES" ;; esac; }

ZP_TABLE=""; AG_TABLE=""; TARGETS=""
if [ "$SKIP_ZP" != 1 ]; then
    ZP_TABLE=$(
        h="| options | depth | start rank | path | lookups | ZPAGE us/call (min-max) | ZRANGE us/call (min-max) | floor us/call | ZPAGE / ZRANGE: ratio of medians | median of per-round ratios | floor / ZRANGE |"
        s="|---------|-------|-----------:|------|--------:|------------------------:|------------------------:|--------------:|------------:|------------:|------------:|"
        if [ -n "$BASE_REV" ]; then h="$h $BASE_REV_SHORT us/call | this / $BASE_REV_SHORT (per-round) |"; s="$s------:|------:|"; fi
        echo "$h"; echo "$s"
        for i in $(seq 0 $((ZP_N - 1))); do
            k=(mode="${ZC_MODE[$i]}" depth="${ZC_DEPTH[$i]}" path="${ZC_PATH[$i]}")
            IFS='|' read -r x y <<<"$(ratio_pair "$ZP_RAW" usec_per_call zpage zrange "${k[@]}")"
            IFS='|' read -r fx _ <<<"$(ratio_pair "$ZP_RAW" usec_per_call floor zrange "${k[@]}")"
            row=$(printf '| %s | %s | %s | %s | %s | %s (%s) | %s (%s) | %s | %s | %s | %s |' \
                "$(pretty_mode "${ZC_MODE[$i]}")" "$(pretty_depth "${ZC_DEPTH[$i]}")" "${ZC_START[$i]}" "${ZC_PATH[$i]/none/-}" \
                "$(fmt "$(med "$ZP_RAW" lookups "${k[@]}" side=zpage)" '%.0f')" \
                "$(fmt "$(med "$ZP_RAW" usec_per_call "${k[@]}" side=zpage)" '%.1f')" \
                "$(sel "$ZP_RAW" usec_per_call "${k[@]}" side=zpage | minmax)" \
                "$(fmt "$(med "$ZP_RAW" usec_per_call "${k[@]}" side=zrange)" '%.1f')" \
                "$(sel "$ZP_RAW" usec_per_call "${k[@]}" side=zrange | minmax)" \
                "$(fmt "$(med "$ZP_RAW" usec_per_call "${k[@]}" side=floor)" '%.1f')" \
                "$(fmt "$x" '%.2f')" "$(fmt "$y" '%.2f')" "$(fmt "$fx" '%.2f')")
            if [ -n "$BASE_REV" ]; then
                IFS='|' read -r bx by <<<"$(ratio_pair "$ZP_RAW" usec_per_call zpage base "${k[@]}")"
                row="$row $(fmt "$(med "$ZP_RAW" usec_per_call "${k[@]}" side=base)" '%.1f') | $(fmt "$bx" '%.2f') ($(fmt "$by" '%.2f')) |"
            fi
            echo "$row"
        done
    )
fi
if [ ${#AG_CASES[@]} -gt 0 ]; then
    AG_TABLE=$(
        h="| case | script | against | script ms/call (min-max) | against ms/call (min-max) | ratio of medians | median of per-round ratios | main-thread CPU ratio (medians) |"
        s="|------|--------|---------|-------------------------:|--------------------------:|------:|------:|------:|"
        if [ -n "$BASE_REV" ]; then h="$h $BASE_REV_SHORT ms/call | this / $BASE_REV_SHORT (per-round) |"; s="$s------:|------:|"; fi
        echo "$h"; echo "$s"
        for c in "${AG_CASES[@]}"; do
            case $c in
            sum) what="\`ZSNAPSHOT dest ttl $SN_DAYS day...\`"; against="\`ZUNIONSTORE dest $SN_DAYS day...\` + \`PEXPIRE dest ttl\`" ;;
            weights) what="\`ZSNAPSHOT ... WEIGHTS $SN_WEIGHTS\`"; against="\`ZUNIONSTORE ... WEIGHTS $SN_WEIGHTS\` + \`PEXPIRE\`" ;;
            count) what="\`ZSNAPSHOT ... AGGREGATE COUNT\` (Lua)"; against="\`ZUNIONSTORE\` (SUM) + \`PEXPIRE\`" ;;
            zunionstore) what="lua/zcountstore.lua \`ZUNIONSTORE ... AGGREGATE COUNT\`"; against="\`ZUNIONSTORE ... AGGREGATE SUM\`" ;;
            zinterstore) what="lua/zcountstore.lua \`ZINTERSTORE ... AGGREGATE COUNT\`"; against="\`ZINTERSTORE ... AGGREGATE SUM\`" ;;
            zunion) what="lua/zcount.lua \`ZUNION ... AGGREGATE COUNT WITHSCORES\`"; against="\`ZUNION ... AGGREGATE SUM WITHSCORES\`" ;;
            esac
            IFS='|' read -r x y <<<"$(ratio_pair "$AG_RAW" usec_per_call script native case="$c")"
            IFS='|' read -r cx _ <<<"$(ratio_pair "$AG_RAW" cpu_us_per_call script native case="$c")"
            ms() { awk -v u="$1" 'BEGIN { if (u == "") print "-"; else printf "%.1f", u / 1000 }'; }
            mm() { sel "$AG_RAW" usec_per_call case="$c" side="$1" | minmax | awk -F- '{ printf "%.0f-%.0f", $1 / 1000, $2 / 1000 }'; }
            row=$(printf '| %s | %s | %s | %s (%s) | %s (%s) | %s | %s | %s |' "$c" "$what" "$against" \
                "$(ms "$(med "$AG_RAW" usec_per_call case="$c" side=script)")" "$(mm script)" \
                "$(ms "$(med "$AG_RAW" usec_per_call case="$c" side=native)")" "$(mm native)" \
                "$(fmt "$x" '%.2f')" "$(fmt "$y" '%.2f')" "$(fmt "$cx" '%.2f')")
            if [ -n "$BASE_REV" ]; then
                IFS='|' read -r bx by <<<"$(ratio_pair "$AG_RAW" usec_per_call script base case="$c")"
                row="$row $(ms "$(med "$AG_RAW" usec_per_call case="$c" side=base)") | $(fmt "$bx" '%.2f') ($(fmt "$by" '%.2f')) |"
            fi
            echo "$row"
        done
    )
fi
TARGETS=$(
    echo "| ratio | ratio of medians | median of per-round ratios | target | verdict (ratio of medians / per-round ratios) |"
    echo "|-------|-----------------:|---------------------------:|-------:|---------|"
    if [ "$SKIP_ZP" != 1 ]; then
        for i in $(seq 0 $((ZP_N - 1))); do
            k=(mode="${ZC_MODE[$i]}" depth="${ZC_DEPTH[$i]}" path="${ZC_PATH[$i]}")
            IFS='|' read -r x y <<<"$(ratio_pair "$ZP_RAW" usec_per_call zpage zrange "${k[@]}")"
            if [ "${ZC_PATH[$i]}" = allequal ]; then t="-"; v="(no target)"
            else t="<= $TARGET_ZPAGE"; v="$(verdict "$x" '<=' "$TARGET_ZPAGE") / $(verdict "$y" '<=' "$TARGET_ZPAGE")"; fi
            printf '| ZPAGE %s, %s, %s path / ZRANGE | %s | %s | %s | %s |\n' "$(pretty_mode "${ZC_MODE[$i]}")" \
                "$(pretty_depth "${ZC_DEPTH[$i]}")" "${ZC_PATH[$i]/none/first-page}" "$(fmt "$x" '%.2f')" "$(fmt "$y" '%.2f')" "$t" "$v"
        done
    fi
    for c in "${AG_CASES[@]}"; do
        IFS='|' read -r x y <<<"$(ratio_pair "$AG_RAW" usec_per_call script native case="$c")"
        case $c in
        sum|weights) t=$TARGET_SNAP; n="ZSNAPSHOT ($c) / ZUNIONSTORE + PEXPIRE" ;;
        count) t=""; n="ZSNAPSHOT AGGREGATE COUNT / ZUNIONSTORE (SUM) + PEXPIRE" ;;
        zunionstore) t=$TARGET_POLYFILL; n="polyfill ZUNIONSTORE AGGREGATE COUNT / native ZUNIONSTORE SUM" ;;
        zinterstore) t=""; n="polyfill ZINTERSTORE AGGREGATE COUNT / native ZINTERSTORE SUM" ;;
        zunion) t=""; n="polyfill ZUNION AGGREGATE COUNT WITHSCORES / native ZUNION SUM WITHSCORES" ;;
        esac
        if [ -n "$t" ]; then
            printf '| %s | %s | %s | <= %s | %s |\n' "$n" "$(fmt "$x" '%.2f')" "$(fmt "$y" '%.2f')" "$t" "$(verdict "$x" '<=' "$t") / $(verdict "$y" '<=' "$t")"
        else
            printf '| %s | %s | %s | - | (no target) |\n' "$n" "$(fmt "$x" '%.2f')" "$(fmt "$y" '%.2f')"
        fi
    done
)

echo
[ -z "$ZP_TABLE" ] || { echo "$ZP_TABLE"; echo; }
[ -z "$AG_TABLE" ] || { echo "$AG_TABLE"; echo; }
echo "$TARGETS"
echo

# ================================================================ report
LB_BEGIN='<!-- bench/leaderboard.sh: begin -->'
LB_END='<!-- bench/leaderboard.sh: end -->'
CPU_MODEL=$(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)
REV=$(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null || echo "no commit")
DIRTY=$(cd "$ROOT" && [ -n "$(git status --porcelain -- lua bench/leaderboard.sh bench/lib.sh 2>/dev/null)" ] && echo " (+ uncommitted changes)" || true)
[ "$LUA_DIR" = "$ROOT/lua" ] || DIRTY="$DIRTY (scripts from $LUA_DIR)"
SECTION=$(
    echo "$LB_BEGIN"
    echo "## Leaderboard verbs"
    echo
    echo "Generated by \`bench/leaderboard.sh\` (see its header for the method)."
    echo
    echo "- command: \`${ORIG_ENV}${ORIG_CMD}\`"
    echo "- date: ${ZP_DATE:-${AG_DATE:-}}; load average before/after: ZPAGE ${ZP_LOAD_BEFORE:--} / ${ZP_LOAD_AFTER:--}, aggregates ${AG_LOAD_BEFORE:--} / ${AG_LOAD_AFTER:--}"
    echo "- machine: nproc=$(nproc), CPU: ${CPU_MODEL:-unknown}, kernel $(uname -r); shared and noisy (other jobs run beside), so figures are medians of $ROUNDS alternating rounds"
    echo "- versions: $(redis-server --version | awk '{print $1, $2, $3}'); tree ${REV}${DIRTY}; scripts as \`verbproxy --script\` prints them (zpage ${SHA[zpage]:0:12}, zsnapshot ${SHA[zsnapshot]:0:12}, zcountstore ${SHA[zcountstore]:0:12}, zcount ${SHA[zcount]:0:12})${BASE_REV:+; baseline: lua/ at $BASE_REV_SHORT}"
    echo "- server time = INFO commandstats usec / calls after CONFIG RESETSTAT (wall time inside Redis; nested calls inside a script are part of its EVALSHA's time); scripts sent by EVALSHA / EVALSHA_RO straight to redis-server, as verbproxy rewrites the verbs"
    if [ "$SKIP_ZP" != 1 ]; then
        echo "- ZPAGE: $ZP_MEMBERS members \`player:<i>\`, $ZP_TIES per score (score = i mod $((ZP_MEMBERS / ZP_TIES))); pages of $ZP_COUNT; \`EVALSHA_RO <zpage> 1 key <cursor> $ZP_COUNT [REV] [WITHSCORES]\` (cmdstat_evalsha_ro) against \`ZRANGE key start stop [REV] [WITHSCORES]\` (cmdstat_zrange), the same options on both sides (the options column); $ZP_CALLS calls of each side per round of a case, in $ZP_CHUNKS chunks, each chunk running every side in turn (\`CONFIG RESETSTAT\`, $((ZP_CALLS / ZP_CHUNKS)) calls, \`INFO commandstats\`; who goes first moves on every chunk and round): a side's figure for a round is the median of its chunks' usec per call; cursors from ZPAGE's own replies; slow path: the cursor's member removed (ZREM before the case's samples, ZADD back after), so the page starts one rank earlier; allequal: every score 0 (no target); lookups = binary-search probes per call (nested ZRANGE calls less the page's, counted by Redis); floor = \`EVALSHA_RO\` of \`return { '0', redis.call('ZRANGE', KEYS[1], unpack(ARGV)) }\`, the cost of any script that returns the page"
    fi
    if [ ${#AG_CASES[@]} -gt 0 ]; then
        echo "- aggregates: $SN_DAYS daily sets of $SN_PER_DAY of $SN_BOOKS books (book \`book:<id>\`, a day's score its sales, ~100000 / id^0.8 x 0.5-1.5: day 1's run from $SN_MIN to $SN_MAX, $SN_DISTINCT distinct values; union $SN_UNION members, intersection $SN_INTER; top of the week: ${SN_TOP% }); $SN_CALLS calls of each side per round, the sides taking turns call by call (A B, B A), dest deleted before each (not timed); the native ZSNAPSHOT side is the sum of ZUNIONSTORE's and PEXPIRE's usec; main-thread CPU = INFO cpu used_cpu_{user,sys}_main_thread read around each call"
    fi
    echo
    if [ -n "$ZP_TABLE" ]; then
        echo "### ZPAGE server time against ZRANGE of the same page"
        echo
        echo "$ZP_TABLE"
        echo
    fi
    if [ -n "$AG_TABLE" ]; then
        echo "### ZSNAPSHOT and the AGGREGATE COUNT polyfill"
        echo
        echo "$AG_TABLE"
        echo
    fi
    echo "### Targets"
    echo
    echo "$TARGETS"
    echo "$LB_END"
)

if [ -n "${BENCH_RESULTS:-}" ]; then
    RESULTS=$BENCH_RESULTS
elif [ "$SKIP_ZP" != 1 ] && [ "$SKIP_SN" != 1 ] && [ "$SKIP_PF" != 1 ]; then
    RESULTS="$SCRIPT_DIR/RESULTS.md"
else
    RESULTS="$OUT_DIR/RESULTS.leaderboard.partial.md"
fi
# (A partial run's file holds that run alone.)
[ "$RESULTS" != "$OUT_DIR/RESULTS.leaderboard.partial.md" ] || rm -f "$RESULTS"
put_block "$RESULTS" "$LB_BEGIN" "$LB_END" "$SECTION"
log "wrote ${RESULTS#$ROOT/}; raw samples in ${ZP_RAW#$ROOT/}, ${AG_RAW#$ROOT/}"
