#!/usr/bin/env bash
# tests/deploy/test_packager_build.sh BUILD_DIR - a packager's build works on a
# machine with only the build dependencies (docs/install.md):
#
#   cmake -S . -B BUILD_DIR -DCMAKE_BUILD_TYPE=Release
#   cmake --build BUILD_DIR
#   DESTDIR=STAGING cmake --install BUILD_DIR --prefix /usr
#
# The tests' libraries (criterion, hiredis) are installed here, so they are
# hidden from pkg-config, which is how CMakeLists.txt looks for them: a
# search path of links to every other .pc file. Then:
# - the configure succeeds and says in one line that the tests are not
#   built and why, and no test target exists;
# - the build and the install succeed, and the install puts exactly the
#   files docs/install.md lists under the staging directory (nothing outside
#   the prefix, nothing missing, nothing more);
# - the installed binary answers --help and --version.
# scripts/test.sh runs it in build-release (the cache is started afresh, the
# objects are kept), then builds the same directory again with the tests.
# Exit status non-zero, with the reason, on any failure.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:?usage: test_packager_build.sh BUILD_DIR}
cd "$root"
mkdir -p "$build"
build=$(cd "$build" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() {
    echo "test_packager_build: $*" >&2
    exit 1
}

# Every .pc file pkg-config would find, but the tests' own.
mkdir "$work/pc"
IFS=: read -ra pc_dirs <<<"${PKG_CONFIG_PATH:+$PKG_CONFIG_PATH:}$(pkg-config --variable pc_path pkg-config)"
for d in "${pc_dirs[@]}"; do
    for f in "$d"/*.pc; do
        [ -e "$f" ] || continue
        case ${f##*/} in criterion.pc | hiredis.pc) continue ;; esac
        [ -e "$work/pc/${f##*/}" ] || ln -s "$f" "$work/pc/${f##*/}"
    done
done
hidden() { PKG_CONFIG_PATH="" PKG_CONFIG_LIBDIR="$work/pc" "$@"; }
hidden pkg-config --exists criterion && fail "criterion is still visible to pkg-config"
hidden pkg-config --exists libuv || fail "libuv is no longer visible to pkg-config"

# A cache from an earlier configure would remember where criterion was.
rm -f "$build/CMakeCache.txt"
hidden cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >"$work/configure.log" 2>&1 ||
    { cat "$work/configure.log"; fail "the configure without the tests' dependencies FAILED"; }
why=$(grep -c "verbproxy: tests not built: not found: criterion (libcriterion-dev), hiredis (libhiredis-dev)" \
    "$work/configure.log" || true)
[ "$why" = 1 ] || { cat "$work/configure.log"; fail "the configure did not say once why the tests are not built"; }
echo "configure: $(grep 'verbproxy: tests not built' "$work/configure.log")"
if cmake --build "$build" --target help | grep -q 'test_'; then
    fail "test targets exist without the tests' dependencies"
fi

cmake --build "$build" -j"$(nproc)" >"$build/build.log" 2>&1 ||
    { tail -40 "$build/build.log"; fail "the build without the tests' dependencies FAILED"; }
DESTDIR="$work/stage" cmake --install "$build" --prefix /usr >"$work/install.log" 2>&1 ||
    { cat "$work/install.log"; fail "cmake --install FAILED"; }

# What docs/install.md says install puts where.
{
    echo usr/bin/verbproxy
    echo usr/share/doc/verbproxy/README.md
    echo usr/share/doc/verbproxy/examples/verbproxy.conf
    find docs -name '*.md' | sed 's|^|usr/share/doc/verbproxy/|'
} | sort >"$work/want"
(cd "$work/stage" && find . -type f -o -type l) | sed 's|^\./||' | sort >"$work/got"
diff -u "$work/want" "$work/got" >&2 || fail "the installed files differ from docs/install.md's list (- wanted, + installed)"
# (the manifest names them as the prefix sees them, without DESTDIR: one
# installed outside the prefix would be on this machine, not in the stage)
sed 's|^|/|' "$work/want" | diff -u - <(sort "$build/install_manifest.txt") >&2 ||
    fail "install_manifest.txt differs from docs/install.md's list (- wanted, + in the manifest)"
cmp -s conf/verbproxy.conf "$work/stage/usr/share/doc/verbproxy/examples/verbproxy.conf" ||
    fail "the installed example config is not conf/verbproxy.conf"

bin="$work/stage/usr/bin/verbproxy"
[ -x "$bin" ] || fail "$bin is not executable"
"$bin" --help >"$work/help" 2>&1 || { cat "$work/help"; fail "verbproxy --help FAILED"; }
grep -q '^Usage: verbproxy' "$work/help" || { cat "$work/help"; fail "verbproxy --help printed no usage"; }
"$bin" --version | grep -qx "verbproxy [0-9.]*" || fail "verbproxy --version printed no version"
echo "installed $(wc -l <"$work/got") files; $("$bin" --version) answers --help"
