# deps.sh - sourced by the run and test scripts: installs the Debian 12
# packages given as arguments when any is missing (apt-get update first).
vp_install_deps() {
    local missing=()
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    echo "==> installing: ${missing[*]}"
    local sudo=""
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

VP_BUILD_DEPS=(build-essential cmake pkg-config libuv1-dev libjemalloc-dev libssl-dev libhttp-parser-dev liblua5.1-0-dev)
