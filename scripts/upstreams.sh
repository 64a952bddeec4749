#!/usr/bin/env bash
# upstreams.sh - builds the Redis and Valkey releases verbproxy supports
# besides Debian's redis-server (7.0), from their release sources in
# ../shared/upstreams/ (beside the checkout; its README says what each is),
# into a cache outside the checkout, reusing a build that is already there.
#
#     scripts/upstreams.sh list            the releases there are (one name a line)
#     scripts/upstreams.sh build [NAME...] build them (default: all); prints nothing more
#     scripts/upstreams.sh path NAME       build it if needed; print its server binary
#     scripts/upstreams.sh built NAME      print it only if built already (else exit 1)
#
# NAME is a tarball's name without .tar.gz (redis-6.2.16, valkey-8.0.1).
# The cache is $VP_UPSTREAMS_CACHE, else ~/.cache/verbproxy/upstreams: one
# directory per release holding its server binary and the SHA-256 of the
# tarball it was built from (a changed tarball is built again). Each builds
# with `make MALLOC=libc BUILD_TLS=yes` (TLS, so a TLS story can run on it
# too) in a temp dir that is removed after. Exit status 3 when
# ../shared/upstreams is absent (a user's own clone): callers skip, saying so.
#
# Any test runs against a release by pointing VP_TEST_REDIS_SERVER at it:
#     VP_TEST_REDIS_SERVER=$(scripts/upstreams.sh path redis-6.2.16) ctest -R test_verbs
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
src=${VP_UPSTREAMS_DIR:-$(cd "$root/.." && pwd)/shared/upstreams}
cache=${VP_UPSTREAMS_CACHE:-${HOME:-/tmp}/.cache/verbproxy/upstreams}

die() {
    echo "upstreams.sh: $*" >&2
    exit 1
}

[ -d "$src" ] || {
    echo "upstreams.sh: no $src (the release sources sit beside the project, not in it)" >&2
    exit 3
}

names() {
    local t
    for t in "$src"/*.tar.gz; do
        [ -e "$t" ] && basename "$t" .tar.gz
    done
}

# The server binary's name in a release: valkey-server for Valkey.
binary_of() {
    case "$1" in
    valkey-*) echo valkey-server ;;
    *) echo redis-server ;;
    esac
}

# The tarball's SHA-256, checked against SHA256SUMS when the folder has one.
checked_sum() {
    local name=$1 tarball="$src/$1.tar.gz" sum want
    [ -f "$tarball" ] || die "no release $name in $src (there are: $(names | tr '\n' ' '))"
    sum=$(sha256sum "$tarball" | cut -d' ' -f1)
    if [ -f "$src/SHA256SUMS" ]; then
        want=$(awk -v f="$name.tar.gz" '$2 == f { print $1 }' "$src/SHA256SUMS")
        [ -z "$want" ] || [ "$want" = "$sum" ] || die "$name.tar.gz does not match SHA256SUMS"
    fi
    echo "$sum"
}

# Built already, from this very tarball?
is_built() { # name
    [ -x "$cache/$1/$(binary_of "$1")" ] && [ "$(cat "$cache/$1/built-from" 2>/dev/null)" = "$(checked_sum "$1")" ]
}

build_one() {
    local name=$1 sum bin dir work
    is_built "$name" && return 0
    sum=$(checked_sum "$name")
    bin=$(binary_of "$name")
    dir="$cache/$name"
    echo "==> building $name (into $dir)" >&2
    mkdir -p "$cache"
    work=$(mktemp -d "$cache/.build-$name.XXXXXX")
    # (removed on the way out, built or not)
    trap 'rm -rf "$work"' RETURN
    tar -xzf "$src/$name.tar.gz" -C "$work" --strip-components=1
    if ! make -C "$work" -j"$(nproc)" MALLOC=libc BUILD_TLS=yes >"$work/build.log" 2>&1; then
        tail -30 "$work/build.log" >&2
        die "$name did not build"
    fi
    rm -rf "$dir"
    mkdir -p "$dir"
    cp "$work/src/$bin" "$dir/$bin"
    echo "$sum" >"$dir/built-from"
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case "$cmd" in
list)
    names
    ;;
build)
    if [ $# -eq 0 ]; then
        mapfile -t all < <(names)
        set -- "${all[@]}"
    fi
    for n in "$@"; do
        build_one "$n"
    done
    ;;
path)
    [ $# -eq 1 ] || die "usage: upstreams.sh path NAME"
    build_one "$1"
    echo "$cache/$1/$(binary_of "$1")"
    ;;
built)
    # The path only if built already from this very tarball; else exit 1,
    # building nothing (for a check that must not take minutes).
    [ $# -eq 1 ] || die "usage: upstreams.sh built NAME"
    is_built "$1" || exit 1
    echo "$cache/$1/$(binary_of "$1")"
    ;;
*)
    die "usage: upstreams.sh list | build [NAME...] | path NAME | built NAME"
    ;;
esac
