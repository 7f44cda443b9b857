#!/bin/sh
# Installs the system packages volley builds against: LuaJIT, OpenSSL, libev,
# libnghttp2, libsnappy and liburing (with a C compiler and the C library's headers, make
# and pkg-config), and for HTTP/3 ngtcp2 >= 1.11 (with its GnuTLS helper),
# nghttp3 >= 1.8 and GnuTLS: on Debian 12 those two come from
# bookworm-backports, which it enables for them alone. With --test, also what
# the tests and `make bench` use: Python 3 with pytest, hdrhistogram, hpack,
# aioquic and prometheus_client, nginx, wrk, Prometheus, nghttp2's h2load and
# nghttpd, tinyproxy and microsocks (Debian), Go >= 1.24, gnuplot, chromium,
# clang (libFuzzer), man, Lua 5.1, dpkg-buildflags and a few tools, the
# clang-format, cppcheck, shellcheck and pyflakes of make lint, and on Debian and Ubuntu what builds and checks the
# packages under packaging/ (debhelper, lintian, autopkgtest, rpm and ruby to
# parse the spec and formula) and what make check-kube's one-node Kubernetes
# cluster runs on (etcd, containerd, runc, the CNI plugins, debootstrap).
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
        sed -n '2,18s/^# \{0,1\}//p' "$0"
        exit 0
        ;;
    *)
        echo "deps/install.sh: unknown argument '$arg'" >&2
        exit 1
        ;;
    esac
done

# Whether a command was run (or with --dry-run, would have been).
ran=0
run() {
    echo "+ $*"
    ran=1
    [ "$dry" = 1 ] || "$@"
}

as_root() {
    if [ "$(id -u)" = 0 ]; then run "$@"; else run sudo "$@"; fi
}

# HTTP/3's libraries: the oldest versions volley builds with (deps/libs.mk).
NGTCP2_MIN=1.11
NGHTTP3_MIN=1.8

# apt: the version of package $1 that is installed, or nothing.
deb_installed() {
    dpkg-query -W -f '${Status} ${Version}\n' "$1" 2>/dev/null |
        sed -n 's/^install ok installed //p'
}

# apt: the version of $1 that apt would install from release $2 (the
# configured default when empty), or nothing.
deb_candidate() {
    if [ -n "$2" ]; then
        apt-cache madison "$1" 2>/dev/null | awk -F' *[|] *' -v r="$2" '$3 ~ " " r "/" {print $2; exit}'
    else
        apt-cache policy "$1" 2>/dev/null | sed -n 's/^ *Candidate: //p' | grep -v '^(none)$'
    fi
}

deb_at_least() { [ -n "$1" ] && dpkg --compare-versions "$1" ge "$2"; }

# Debian 12 has ngtcp2 0.12 and nghttp3 0.8, too old for HTTP/3 (1.x changed
# their API); bookworm-backports has ngtcp2 1.11 and nghttp3 1.8, as Debian 13
# does. Its packages are not installed unless asked for by name (priority
# 100), so enabling it changes nothing else on the system.
enable_backports() {
    grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/ && return 0
    echo "+ enable bookworm-backports in /etc/apt/sources.list.d/volley-backports.sources"
    [ "$dry" = 1 ] && return 0
    printf '%s\n' 'Types: deb' 'URIs: http://deb.debian.org/debian' 'Suites: bookworm-backports' \
        'Components: main' 'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg' |
        as_root tee /etc/apt/sources.list.d/volley-backports.sources >/dev/null
    as_root apt-get update -qq
}

# apt: HTTP/3's development packages into $http3, each as "name" or
# "name/release" (the distribution's own where new enough, else Debian 12's
# backports); empty when they are installed already or nowhere to be had.
deb_http3() {
    http3=
    pkgs="libngtcp2-dev:$NGTCP2_MIN libngtcp2-crypto-gnutls-dev:$NGTCP2_MIN libnghttp3-dev:$NGHTTP3_MIN"
    old=
    for p in $pkgs; do
        deb_at_least "$(deb_installed "${p%%:*}")" "${p#*:}" || old=1
    done
    [ -n "$old" ] || return 0
    release=
    codename=$(sed -n 's/^VERSION_CODENAME=//p' /etc/os-release 2>/dev/null)
    for p in $pkgs; do
        deb_at_least "$(deb_candidate "${p%%:*}")" "${p#*:}" && continue
        if [ "$codename" != bookworm ]; then
            echo "deps/install.sh: no ${p%%:*} >= ${p#*:} here: volley builds without HTTP/3" >&2
            return 0
        fi
        release=bookworm-backports
    done
    if [ -n "$release" ]; then
        enable_backports
        for p in $pkgs; do
            if [ "$dry" = 0 ] && ! deb_at_least "$(deb_candidate "${p%%:*}" "$release")" "${p#*:}"; then
                echo "deps/install.sh: no ${p%%:*} >= ${p#*:} in $release: volley builds" \
                    "without HTTP/3" >&2
                return 0
            fi
        done
    fi
    for p in $pkgs; do http3="$http3 ${p%%:*}${release:+/$release}"; done
}

if command -v apt-get >/dev/null 2>&1; then
    build="gcc libc6-dev make pkg-config libluajit-5.1-dev libev-dev libssl-dev libnghttp2-dev
           libgnutls28-dev libsnappy-dev liburing-dev"
    tests="python3 python3-pytest python3-pip nginx-light libnginx-mod-stream wrk gnuplot-nox clang
           libclang-rt-14-dev valgrind procps util-linux time curl man-db groff-base
           dpkg-dev liblua5.1-0-dev openssl nghttp2-client nghttp2-server python3-hpack unzip
           prometheus tinyproxy microsocks chromium"
    tests="$tests clang-format cppcheck shellcheck pyflakes3"
    tests="$tests debhelper lintian autopkgtest rpm ruby"
    # make check-kube's one-node cluster (tests/kube/cluster.py).
    tests="$tests etcd-server containerd runc containernetworking-plugins debootstrap iptables"
    # make check-big's network namespace (ip link set lo up).
    tests="$tests iproute2"
    [ "$test" = 1 ] && build="$build $tests"
    missing=$(for p in $build; do
        dpkg-query -W -f '${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$' || echo "$p"
    done)
    if [ -n "$missing" ]; then
        as_root apt-get update -qq
        # shellcheck disable=SC2086
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing
    fi
    deb_http3
    if [ -n "$http3" ]; then
        # shellcheck disable=SC2086
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $http3
    fi
elif command -v dnf >/dev/null 2>&1; then
    build="gcc make pkgconf-pkg-config luajit-devel libev-devel openssl-devel libnghttp2-devel
           libngtcp2-devel libngtcp2-crypto-gnutls-devel libnghttp3-devel gnutls-devel snappy-devel
           liburing-devel"
    tests="python3 python3-pytest python3-pip nginx wrk gnuplot clang compiler-rt valgrind
           procps-ng util-linux time curl man-db compat-lua-devel openssl nghttp2 golang chromium"
    tests="$tests clang-tools-extra cppcheck ShellCheck python3-pyflakes"
    [ "$test" = 1 ] && build="$build $tests"
    # shellcheck disable=SC2086
    as_root dnf install -y $build
elif command -v pacman >/dev/null 2>&1; then
    build="gcc make pkgconf luajit libev openssl libnghttp2 libngtcp2 libnghttp3 gnutls snappy liburing"
    tests="python python-pytest python-pip nginx wrk gnuplot clang compiler-rt valgrind
           procps-ng util-linux time curl man-db lua51 nghttp2 go prometheus chromium"
    tests="$tests cppcheck shellcheck python-pyflakes"
    [ "$test" = 1 ] && build="$build $tests"
    # shellcheck disable=SC2086
    as_root pacman -S --needed --noconfirm $build
elif command -v apk >/dev/null 2>&1; then
    build="build-base pkgconf luajit-dev libev-dev openssl-dev nghttp2-dev ngtcp2-dev nghttp3-dev
           gnutls-dev snappy-dev liburing-dev"
    tests="python3 py3-pytest py3-pip nginx wrk gnuplot clang compiler-rt valgrind procps
           util-linux curl mandoc lua5.1-dev openssl nghttp2 go prometheus chromium"
    tests="$tests clang-extra-tools cppcheck shellcheck py3-pyflakes"
    [ "$test" = 1 ] && build="$build $tests"
    # shellcheck disable=SC2086
    as_root apk add $build
elif command -v brew >/dev/null 2>&1; then
    build="pkg-config luajit libev openssl@3 libnghttp2 libngtcp2 libnghttp3 gnutls snappy"
    tests="python nginx wrk gnuplot nghttp2 go"
    tests="$tests clang-format cppcheck shellcheck prometheus"
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
  LuaJIT 2.x (or Lua 5.1) with headers, OpenSSL >= 1.1.1 with headers, libev 4 with headers,
  libnghttp2 >= 1.52 with headers; libsnappy with headers (for --remote-write);
  on Linux, liburing >= 2.3 with headers (optional: without it volley has the epoll engine alone);
  for HTTP/3: ngtcp2 >= 1.11 with its GnuTLS helper, nghttp3 >= 1.8 and GnuTLS, with headers.
MSG
    exit 1
fi

# The test suite decodes volley's HdrHistogram output with an independent
# implementation, the hdrhistogram package from PyPI; its HTTP/2 test peer
# encodes and decodes header blocks with hpack; its second HTTP/3 server and
# hostile QUIC peer are aioquic's; pytest-xdist runs test files side by side
# (tests/run.py); /metrics is parsed strictly by the reference parser of the
# exposition format, prometheus_client's.
if [ "$test" = 1 ]; then
    py=${PYTHON:-python3}
    if ! "$py" -c 'import aioquic, hdrh, hpack, pytest, xdist, prometheus_client' >/dev/null 2>&1; then
        run "$py" -m pip install --quiet aioquic hdrhistogram hpack pytest pytest-xdist \
            prometheus_client ||
            run "$py" -m pip install --quiet --break-system-packages aioquic hdrhistogram hpack \
                pytest pytest-xdist prometheus_client
    fi
fi

# The HTTP/2 tests build an h2c server with Go's standard library alone,
# which serves cleartext HTTP/2 from Go 1.24 on (Debian 12's golang-go is
# 1.19, its backports' 1.23). The same Go checks the Kubernetes manifests
# (tests/kube, whose k8s.io modules, pinned in its go.sum, build with Go 1.19
# and later). Found as tests/conftest.py finds it: go on PATH, /usr/local/go
# or a Debian golang-1.NN-go. Where the system has none, Go's own release
# comes from the Go module proxy (as the go command fetches a newer
# toolchain), checked against the checksum below, into /usr/local/go.
GO_RELEASE=go1.24.13
GO_RELEASE_SHA256=d2b048367a3d1a748b87f756fa06df12ce3b419e1d5f2a3612acb8950d615f9f # linux-amd64

go_version() { # the minor version of Go 1.x at $1, or nothing
    "$1" env GOVERSION 2>/dev/null | sed -n 's/^go1\.\([0-9][0-9]*\).*/\1/p'
}

find_go() {
    for go in "$(command -v go)" /usr/local/go/bin/go /usr/lib/go-1.*/bin/go; do
        [ -x "$go" ] || continue
        minor=$(go_version "$go")
        if [ -n "$minor" ] && [ "$minor" -ge 24 ]; then
            echo "$go"
            return 0
        fi
    done
    return 1
}

# Go's $GO_RELEASE for Linux on x86-64 into /usr/local/go, when that is free.
fetch_go() {
    [ "$(uname -sm)" = "Linux x86_64" ] && [ ! -e /usr/local/go ] &&
        command -v curl >/dev/null && command -v unzip >/dev/null || return 1
    # The first proxy of GOPROXY that is a URL, as the go command tries them.
    proxy=https://proxy.golang.org
    for p in $(echo "${GOPROXY-}" | tr ',|' '  '); do
        case $p in http://* | https://*) proxy=${p%/}; break ;; esac
    done
    module=golang.org/toolchain@v0.0.1-$GO_RELEASE.linux-amd64
    tmp=$(mktemp -d)
    run curl -fsSL -o "$tmp/go.zip" "$proxy/golang.org/toolchain/@v/${module#*@}.zip" &&
        { [ "$dry" = 1 ] || echo "$GO_RELEASE_SHA256  $tmp/go.zip" | sha256sum -c --quiet -; } &&
        run unzip -q "$tmp/go.zip" -d "$tmp" &&
        as_root mv "$tmp/$module" /usr/local/go
    status=$?
    rm -rf "$tmp"
    return $status
}

if [ "$test" = 1 ] && ! find_go >/dev/null; then
    if command -v apt-get >/dev/null 2>&1; then
        # A newer Go where the configured sources have one (backports, Debian 13).
        pkg=$(apt-cache search --names-only '^golang-1\.[0-9]+-go$' 2>/dev/null | cut -d' ' -f1 |
            sort -t. -k2,2n | tail -n 1)
        minor=$(echo "$pkg" | sed -n 's/^golang-1\.\([0-9][0-9]*\)-go$/\1/p')
        if [ -n "$minor" ] && [ "$minor" -ge 24 ]; then
            as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$pkg"
        fi
    fi
    if ! find_go >/dev/null; then
        fetch_go || true
    fi
    if ! find_go >/dev/null; then
        found=$(command -v go || echo none)
        [ "$found" = none ] || found="$found ($("$found" env GOVERSION 2>/dev/null))"
        echo "deps/install.sh: the tests need Go >= 1.24 (found: $found)." >&2
        echo "  Install golang-1.24-go or later, or Go from go.dev into /usr/local/go." >&2
        [ "$dry" = 1 ] || exit 1
    fi
fi

# Silence would leave the user guessing whether anything was checked.
if [ "$ran" = 0 ]; then
    if [ "$test" = 1 ]; then
        echo "deps/install.sh: everything volley builds and tests with is installed already"
    else
        echo "deps/install.sh: everything volley builds with is installed already"
    fi
fi
