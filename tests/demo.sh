#!/bin/sh
# make demo: start the in-tree test server on a free port of 127.0.0.1, run a
# short benchmark against it with volley, print the report, stop the server.
# SPDX-License-Identifier: MIT
set -eu
cd "$(dirname "$0")/.."
out=$(mktemp)
trap 'kill "$server" 2>/dev/null; rm -f "$out"' EXIT
build/tests/volley-testd --listen 127.0.0.1:0 --max-time 60 >"$out" &
server=$!
port=
for _ in $(seq 50); do
    port=$(sed -n 's/^port //p' "$out")
    [ -n "$port" ] && break
    sleep 0.1
done
[ -n "$port" ] || { echo "demo: the test server did not start" >&2; exit 1; }
echo "\$ ./volley -t2 -c50 -d3s --latency http://127.0.0.1:$port/"
./volley -t2 -c50 -d3s --latency "http://127.0.0.1:$port/"
