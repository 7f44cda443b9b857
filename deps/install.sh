#!/bin/sh
# Installs the system packages volley builds against: LuaJIT, OpenSSL and
# libev (with a C compiler, make and pkg-config). With --test, also what the
# tests and `make bench` use: Python 3 with pytest and hdrhistogram, nginx, wrk,
# gnuplot, clang (libFuzzer), man, dpkg-buildflags, Lua 5.1, Go (1.19 or later,
# for the Kubernetes manifest check; its modules come from the Go module proxy,
# pinned in tests/kube/go.sum) and a few tools.
#
# usage: deps/install.sh [--test] [--dry-run]
# Knows apt (Debian, Ubuntu), dnf (Fedora), pacman (Arch), apk (Alpine) and
# Homebrew. Elsewhere it says which libraries to install.
# SPDX-License-Identifier: MIT
set -eu

test=0
dry=0
for arg in "$@"; do
    case $arg in
    --test) test=1 ;;
    --dry-run) dry=1 ;;
    -h | --help)
        sed -n '2,11s/^# \{0,1\}//p' "$0"
        exit 0
        ;;
    *)
        echo "deps/install.sh: unknown argument '$arg'" >&2
        exit 1
        ;;
    esac
done

run() {
    echo "+ $*"
    [ "$dry" = 1 ] || "$@"
}

as_root() {
    if [ "$(id -u)" = 0 ]; then run "$@"; else run sudo "$@"; fi
}

if command -v apt-get >/dev/null 2>&1; then
    build="gcc make pkg-config libluajit-5.1-dev libev-dev libssl-dev"
    tests="python3 python3-pytest python3-pip nginx-light wrk gnuplot-nox clang
           libclang-rt-14-dev valgrind procps util-linux time curl man-db groff-base
           dpkg-dev liblua5.1-0-dev openssl"
    # Go checks the Kubernetes manifests (tests/kube): Debian's 1.19 will do.
    command -v go >/dev/null 2>&1 || [ -x /usr/local/go/bin/go ] || tests="$tests golang-go"
    [ "$test" = 1 ] && build="$build $tests"
    missing=$(for p in $build; do
        dpkg-query -W -f '${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$' || echo "$p"
    done)
    if [ -n "$missing" ]; then
        as_root apt-get update -qq
        # shellcheck disable=SC2086
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing
    fi
elif command -v dnf >/dev/null 2>&1; then
    build="gcc make pkgconf-pkg-config luajit-devel libev-devel openssl-devel"
    tests="python3 python3-pytest python3-pip nginx wrk gnuplot clang compiler-rt valgrind
           procps-ng util-linux time curl man-db compat-lua-devel openssl golang"
    [ "$test" = 1 ] && build="$build $tests"
    # shellcheck disable=SC2086
    as_root dnf install -y $build
elif command -v pacman >/dev/null 2>&1; then
    build="gcc make pkgconf luajit libev openssl"
    tests="python python-pytest python-pip nginx wrk gnuplot clang compiler-rt valgrind
           procps-ng util-linux time curl man-db lua51 go"
    [ "$test" = 1 ] && build="$build $tests"
    # shellcheck disable=SC2086
    as_root pacman -S --needed --noconfirm $build
elif command -v apk >/dev/null 2>&1; then
    build="build-base pkgconf luajit-dev libev-dev openssl-dev"
    tests="python3 py3-pytest py3-pip nginx wrk gnuplot clang compiler-rt valgrind procps
           util-linux curl mandoc lua5.1-dev openssl go"
    [ "$test" = 1 ] && build="$build $tests"
    # shellcheck disable=SC2086
    as_root apk add $build
elif command -v brew >/dev/null 2>&1; then
    build="pkg-config luajit libev openssl@3"
    tests="python nginx wrk gnuplot go"
    [ "$test" = 1 ] && build="$build $tests"
    # shellcheck disable=SC2086
    run brew install $build
    echo "Homebrew: build with  make PKG_CONFIG_PATH=\$(brew --prefix openssl@3)/lib/pkgconfig" \
        "EV_CFLAGS=-I\$(brew --prefix)/include EV_LIBS='-L\$(brew --prefix)/lib -lev'"
else
    cat >&2 <<'MSG'
deps/install.sh: no known package manager (apt, dnf, pacman, apk, brew).
Install these with your system's packages, then run make:
  a C compiler, GNU make, pkg-config,
  LuaJIT 2.x (or Lua 5.1) with headers, OpenSSL >= 1.1.1 with headers, libev 4 with headers.
MSG
    exit 1
fi

# The test suite decodes volley's HdrHistogram output with an independent
# implementation, the hdrhistogram package from PyPI.
if [ "$test" = 1 ]; then
    py=${PYTHON:-python3}
    if ! "$py" -c 'import hdrh, pytest' >/dev/null 2>&1; then
        run "$py" -m pip install --quiet hdrhistogram pytest ||
            run "$py" -m pip install --quiet --break-system-packages hdrhistogram pytest
    fi
fi
