#!/usr/bin/env bash
# test_matrix.sh - the suites again, once per supported server besides
# Debian's Redis 7.0 (which the main suites run on): Redis 6.2, 7.2, 7.4 and
# Valkey 7.2, 8.0, each built from ../shared/upstreams by scripts/upstreams.sh
# (cached), run by pointing VP_TEST_REDIS_SERVER at it.
#
#     scripts/test_matrix.sh BUILD_DIR [NAME...]
#
# BUILD_DIR is a configured and built tree with the tests (scripts/test.sh's
# build-test); NAME limits the legs (default: every release there is). A leg
# is the ctest entries matching LEG below: the integration suites as they
# are (Redis standalone, shared upstream connections, and a Sentinel story
# and a cluster of the story's own among them) and in own-connection mode,
# the verbs', leaderboard and polyfill suites among them, the real
# clients (redis-py, ioredis), and the command table's checks against the
# server (it knows every command; keys found as COMMAND GETKEYS finds them;
# the table is what the newest servers say). Two legs run side by side: the suites wait on
# servers far more than they compute, and no story depends on a leg's
# timing (every wait is a condition with a deadline).
#
# tests/matrix_known.txt names the suites left out for a server (a
# difference not yet told by a story), each with why; the matrix prints
# them. Where ../shared/upstreams is absent (a user's own clone) this says
# so in one line and passes. The last line is "matrix: P passed, F failed";
# docs/compatibility.md has the table of what passed where.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:?usage: test_matrix.sh BUILD_DIR [NAME...]}
shift
build=$(cd "$build" && pwd)
LEG=${VP_MATRIX_LEG:-'^((integration|integration-own|clients)/|unit/(test_route_keys|test_conveyor_wrap|command_table_covers_redis|command_table_matches_redis)$)'}
jobs_per_leg=${VP_MATRIX_JOBS:-2}

if ! names=$("$root/scripts/upstreams.sh" list 2>/dev/null); then
    echo "==> [matrix] skipped: no ../shared/upstreams beside the checkout (the other servers' sources)"
    echo "matrix: 0 passed, 0 failed"
    exit 0
fi
[ $# -gt 0 ] && names=$(printf '%s\n' "$@")

# Build first (one at a time, each with every core), then run.
for n in $names; do
    "$root/scripts/upstreams.sh" build "$n" || {
        echo "==> [matrix $n] the server did not build"
        echo "matrix: 0 passed, 1 failed"
        exit 1
    }
done

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# The ctest -E regex of the entries tests/matrix_known.txt leaves out for
# a release ("*": for every one).
left_out() { # name
    awk -v n="$1" '!/^#/ && NF >= 2 && ($1 == n || $1 == "*") { print $2 }' "$root/tests/matrix_known.txt" |
        sort -u | sed -E 's/[.+]/\\&/g; s/^/^/; s/$/$/' | paste -sd'|'
}

run_leg() { # name
    local n=$1 bin ex
    bin=$("$root/scripts/upstreams.sh" path "$n")
    # A directory of its own that includes the build's tests: two ctest runs
    # in one tree would share its Testing/ state.
    mkdir -p "$out/$n"
    echo "subdirs(\"$build\")" >"$out/$n/CTestTestfile.cmake"
    ex=$(left_out "$n")
    (cd "$out/$n" && VP_TEST_REDIS_SERVER=$bin ctest --output-on-failure -j"$jobs_per_leg" -R "$LEG" \
        ${ex:+-E "$ex"} >"$out/$n.log" 2>&1)
    echo $? >"$out/$n.rc"
}

set -- $names
while [ $# -gt 0 ]; do
    pids=()
    for _ in 1 2; do
        [ $# -gt 0 ] || break
        echo "==> [matrix $1] $LEG against $1; left out (tests/matrix_known.txt): $(left_out "$1" | tr '|' ' ' | tr -d '^$\\')"
        run_leg "$1" &
        pids+=($!)
        shift
    done
    wait "${pids[@]}"
done

passed=0
failed=0
status=0
printf '%-16s %8s %8s %8s\n' server passed failed total
for n in $names; do
    line=$(grep -E 'tests failed out of [0-9]+' "$out/$n.log" | tail -1)
    f=$(echo "$line" | sed -E 's/.* ([0-9]+) tests failed out of ([0-9]+).*/\1/')
    t=$(echo "$line" | sed -E 's/.* ([0-9]+) tests failed out of ([0-9]+).*/\2/')
    if [ -z "$line" ]; then f=1 t=1; fi
    printf '%-16s %8d %8d %8d\n' "$n" $((t - f)) "$f" "$t"
    passed=$((passed + t - f))
    failed=$((failed + f))
    if [ "$(cat "$out/$n.rc")" != 0 ] || [ "$f" != 0 ]; then
        status=1
        echo "==> [matrix $n] FAILED:"
        grep -E '\*\*\*(Failed|Timeout|Exception)|^\[----\]   [^ ]|^\[FAIL\]|Error|FAIL|^vt: ' "$out/$n.log" | head -60
    fi
done
echo "matrix: $passed passed, $failed failed"
exit $status
