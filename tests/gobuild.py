"""Building the Go programs under tests/ (the HTTP/2 and HTTP/3 test servers)
with the Go that deps/install.sh installs, for the tests and make bench.
Standard library only.
SPDX-License-Identifier: MIT
"""
import glob
import os
import re
import shlex
import shutil
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GO_MIN = (1, 24)  # http.Server's Protocols (SetUnencryptedHTTP2) came in Go 1.24


def find_go():
    """The first Go >= GO_MIN where deps/install.sh looks: on PATH, in
    /usr/local/go or a Debian golang-1.NN-go; (path, None) or (None, why)."""
    found = []
    candidates = [shutil.which("go"), "/usr/local/go/bin/go"] + \
        sorted(glob.glob("/usr/lib/go-1.*/bin/go"), reverse=True)
    for go in filter(None, candidates):
        try:
            v = subprocess.run([go, "env", "GOVERSION"], capture_output=True, text=True,
                               timeout=30).stdout.strip()
        except OSError:
            continue
        m = re.match(r"go(\d+)\.(\d+)", v)
        if m and (int(m.group(1)), int(m.group(2))) >= GO_MIN:
            return go, None
        found.append(f"{go} ({v or '?'})")
    return None, (f"Go >= {GO_MIN[0]}.{GO_MIN[1]} is needed to build the test servers under "
                  f"tests/server (found: {', '.join(found) or 'none'}); run deps/install.sh --test")


def go_build(src, out):
    """out, built from the Go module in src with the Go on this machine
    (again only when a source is newer); its modules, pinned in its go.sum,
    come from the Go module proxy the first time. RuntimeError saying why
    when it cannot be built."""
    sources = [os.path.join(src, f) for f in os.listdir(src)]
    if os.path.exists(out) and \
            os.path.getmtime(out) >= max(os.path.getmtime(f) for f in sources):
        return out
    go, why = find_go()
    if not go:
        raise RuntimeError(why)
    env = dict(os.environ, GOTOOLCHAIN="local", GOFLAGS="-mod=readonly -buildvcs=false")
    if not env.get("HOME") and not env.get("XDG_CACHE_HOME") and not env.get("GOCACHE"):
        env["GOCACHE"] = os.path.join(ROOT, "build", "go-cache")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    # Built aside and renamed: test processes running side by side may
    # build the same program at once, and start it meanwhile.
    tmp = f"{out}.{os.getpid()}.tmp"
    cmd = [go, "build", "-o", tmp, "."]
    p = subprocess.run(cmd, cwd=src, env=env, capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        raise RuntimeError(f"{shlex.join(cmd)} failed:\n{p.stdout}{p.stderr}")
    os.replace(tmp, out)
    return out
