#!/usr/bin/env bash
# run_ioredis.sh - runs test_ioredis.js (ctest's clients/ioredis), installing
# ioredis first: `npm ci` into tests/clients/node_modules from the committed
# package-lock.json when node_modules is missing or older than the lock file.
# VP_BINARY names the verbproxy binary. A failed install is a failed test.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

for tool in node npm; do
    if ! command -v "$tool" >/dev/null; then
        echo "run_ioredis: '$tool' not found (scripts/test.sh installs Debian's nodejs and npm)" >&2
        exit 1
    fi
done

stamp="$here/node_modules/.package-lock.json" # npm writes it on every install
if [ ! -f "$stamp" ] || [ "$here/package-lock.json" -nt "$stamp" ]; then
    log=$(mktemp)
    if ! (cd "$here" && npm ci --no-audit --no-fund --no-progress --no-update-notifier \
        --loglevel=error) >"$log" 2>&1; then
        echo "run_ioredis: 'npm ci' in $here failed, so ioredis is not installed:" >&2
        cat "$log" >&2
        rm -f "$log"
        exit 1
    fi
    rm -f "$log"
fi

cd "$here"
exec node --test test_ioredis.js
