#!/usr/bin/env bash
# Runs verbproxy on this machine from nothing: installs what is missing,
# builds, starts a throwaway redis-server as upstream when nothing answers at
# the upstream address, then runs verbproxy in the foreground on
# 127.0.0.1:6380. Extra arguments go to verbproxy (e.g. --upstream host:port).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
source scripts/deps.sh
vp_install_deps "${VP_BUILD_DEPS[@]}" redis-server redis-tools

cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DVP_TESTS=OFF >/dev/null
cmake --build build --target verbproxy -j"$(nproc)" >/dev/null

# The upstream to use: --upstream from the arguments, else the config file's.
upstream=$(awk '$1=="upstream"{print $2}' conf/verbproxy.conf)
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
    [ "${args[$i]}" = "--upstream" ] && upstream="${args[$((i + 1))]:-$upstream}"
done

redis_pid=""
cleanup() { [ -n "$redis_pid" ] && kill "$redis_pid" 2>/dev/null || true; }
trap cleanup EXIT

if [[ "$upstream" == /* || "$upstream" == unix:* ]]; then
    sock=${upstream#unix:}
    if ! redis-cli -s "$sock" ping >/dev/null 2>&1; then
        dir=$(mktemp -d)
        echo "==> nothing answers at $sock: starting a throwaway redis-server there (data in $dir)"
        redis-server --port 0 --unixsocket "$sock" --dir "$dir" --save "" --appendonly no >"$dir/redis.log" 2>&1 &
        redis_pid=$!
    fi
else
    host=${upstream%:*}
    port=${upstream##*:}
    host=${host#[}
    host=${host%]}
    if ! redis-cli -h "$host" -p "$port" ping >/dev/null 2>&1; then
        dir=$(mktemp -d)
        echo "==> nothing answers at $upstream: starting a throwaway redis-server there (data in $dir)"
        redis-server --bind "$host" --port "$port" --dir "$dir" --save "" --appendonly no >"$dir/redis.log" 2>&1 &
        redis_pid=$!
    fi
fi
if [ -n "$redis_pid" ]; then
    for _ in $(seq 100); do
        redis-cli -h "${host:-127.0.0.1}" -p "${port:-6379}" ${sock:+-s "$sock"} ping >/dev/null 2>&1 && break
        kill -0 "$redis_pid" 2>/dev/null || { echo "redis-server failed to start"; exit 1; }
        sleep 0.1
    done
fi

echo "==> verbproxy on 127.0.0.1:6380 -> $upstream (Ctrl-C stops)"
build/verbproxy --config conf/verbproxy.conf "$@" &
proxy_pid=$!
trap 'kill $proxy_pid 2>/dev/null; cleanup' INT TERM
wait $proxy_pid
