"""make check-big: 150,000 connections established to one nginx port from
four source addresses on one machine (--bind), which one address cannot do,
with the memory each connection costs volley, nginx and the kernel. Too
heavy for every make check (test_bind.py has its small version: a port
range narrowed to 40 ports); run by hand, it prints its figures and writes
them to build/big/figures.txt.

It runs in a network namespace of its own (unshare -n), where it may raise
the kernel's limits without touching the machine's: the ephemeral ports to
1024-65535 (64,512 for each source address to the target: 258,048 for four,
and one address cannot hold 150,000), net.core.somaxconn for the listen
queues. The run is 8 shards of one run (--shard I/8) of 18,750 connections
each, as on a machine whose open-file limit (20,000) keeps one process from
holding 150,000 sockets, wherever it runs: the same check everywhere. nginx has 10
workers (25,000 connections each at most), its listening socket one per
worker (reuseport), and keeps idle connections an hour: every connection
stays open until the run ends.
SPDX-License-Identifier: MIT
"""
import json
import os
import re
import resource
import subprocess
import sys
import time
import urllib.request

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, TESTS)
from conftest import ROOT, VOLLEY, Nginx, free_port, wait_port  # noqa: E402

CONNECTIONS = 150000
SHARDS = 8
ADDRESSES = ["127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"]
EPHEMERAL = (1024, 65535)
DURATION = 30
RATE = 3000
NGINX_WORKERS = 10


def raised_limits():
    """In the namespace: loopback up, its ephemeral ports and listen queues
    widened; the open-file limit at its hard limit, which it returns."""
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    for name, value in (("net/ipv4/ip_local_port_range", "%d %d" % EPHEMERAL),
                        ("net/core/somaxconn", "65535")):
        with open("/proc/sys/" + name, "w") as f:
            f.write(value)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (CONNECTIONS + 1000, CONNECTIONS + 1000))
        return CONNECTIONS + 1000
    except (ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        return hard


def rss_kib(pids):
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/status") as f:
            total += int(re.search(r"VmRSS:\s+(\d+) kB", f.read()).group(1))
    return total


def children(pid):
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        return [int(p) for p in f.read().split()]


def slab_kib():
    with open("/proc/meminfo") as f:
        return int(re.search(r"^Slab:\s+(\d+) kB", f.read(), re.M).group(1))


def active(url):
    with urllib.request.urlopen(url + "/status", timeout=10) as r:
        return int(re.search(r"Active connections: (\d+)", r.read().decode()).group(1))


def run(tmp_path, addresses, label, target):
    """One run of CONNECTIONS connections from addresses to nginx on target,
    in SHARDS shards; what nginx and volley held at the height of it, and the
    results."""
    port = free_port()
    srv = Nginx(str(tmp_path / label), listen=False, workers=NGINX_WORKERS,
                log_format="$remote_addr",
                server=f"listen {target}:{port} reuseport backlog=65535; access_log off; "
                       "keepalive_timeout 1h; client_header_timeout 1h; "
                       'location / { return 200 "ok\\n"; } '
                       "location = /status { stub_status; }")
    url = f"http://{target}:{port}"
    wait_port(port, srv.proc, host=target)
    time.sleep(0.5)
    nginx_pids = [srv.proc.pid] + children(srv.proc.pid)
    nginx_idle, slab_idle = rss_kib(nginx_pids), slab_kib()
    outs = [str(tmp_path / f"{label}-{i}.json") for i in range(SHARDS)]
    procs = [subprocess.Popen([VOLLEY, "-t2", f"-c{CONNECTIONS}", f"-d{DURATION}s", f"-R{RATE}",
                               "--timeout", "60s", "--shard", f"{i}/{SHARDS}",
                               "--bind", ",".join(addresses), "--json", outs[i], url + "/"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(SHARDS)]
    try:
        # the height of the run: the connections all opened, or given up on
        # (with -R they open before the run's DURATION starts)
        peak, held, deadline = 0, [], time.monotonic() + 600
        while any(p.poll() is None for p in procs) and time.monotonic() < deadline:
            time.sleep(2)
            n = active(url) - 1
            held.append(n)
            if n > peak:
                peak, volley_kib = n, rss_kib(p.pid for p in procs)
                nginx_kib, slab = rss_kib(nginx_pids), slab_kib()
            if len(held) >= 3 and held[-1] == held[-2] == held[-3]:
                break
        docs = []
        for p, out in zip(procs, outs):
            stdout, stderr = p.communicate(timeout=60)
            assert p.returncode == 0, (stdout, stderr)
            with open(out) as f:
                docs.append(json.load(f))
    finally:
        # a run that failed leaves no process behind in the namespace
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        srv.stop()
    return {"peak": peak, "volley_kib": volley_kib, "nginx_kib": nginx_kib - nginx_idle,
            "slab_kib": slab - slab_idle, "docs": docs,
            "connect_errors": sum(d["errors"]["connect"] for d in docs)}


def by_address(docs):
    """Connections established and failed from each address, over the shards."""
    total = {}
    for r in docs:
        for s in r["sources"]:
            c, e = total.get(s["address"], (0, 0))
            total[s["address"]] = (c + s["connects"], e + s["connect_errors"])
    return total


def measure(tmp_path):
    """Both runs, in the namespace: what the test checks."""
    hard = raised_limits()
    # a shard's connections and its threads' descriptors within the limit
    assert CONNECTIONS // SHARDS + 100 <= hard, f"an open-file limit of {hard} is too low"
    # each run to a target address of its own: the ports the other's
    # connections left in TIME_WAIT are not this one's 4-tuples
    four = run(tmp_path, ADDRESSES, "four", "127.0.0.10")
    one = run(tmp_path, ADDRESSES[:1], "one", "127.0.0.11")
    for r in (four, one):
        docs = r.pop("docs")
        r["sources"] = by_address(docs)
        r["no_free_port"] = sum(d["error_causes"]["no_free_port"] for d in docs)
        r["requests"] = [d["requests"] for d in docs]
        r["connect_max_us"] = max(d["connect_time"]["max"] for d in docs)
    return {"hard": hard, "four": four, "one": one}


def test_150000_connections_from_four_addresses_where_one_cannot(tmp_path):
    out = tmp_path / "figures.json"
    proc = subprocess.run(["unshare", "-n", sys.executable, __file__, str(tmp_path), str(out)],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    with open(out) as f:
        m = json.load(f)
    four, one, span = m["four"], m["one"], EPHEMERAL[1] - EPHEMERAL[0] + 1
    assert four["sources"] == {a: [CONNECTIONS // 4, 0] for a in ADDRESSES}, four["sources"]
    assert four["peak"] == CONNECTIONS and four["connect_errors"] == 0
    # -R 3000 for DURATION s: each shard sends its share all through the run
    # (the turns go round the shards), not all of it at the start
    share = RATE * DURATION / SHARDS
    assert all(0.9 * share <= n <= share for n in four["requests"]), four["requests"]
    # one address: its ports to the target are all there is, less the few
    # each shard's start-up check left in TIME_WAIT (and, over the run, the
    # ports of a shard that ended first go to connections of the others)
    (connects, errors), = one["sources"].values()
    assert span - SHARDS <= one["peak"] <= span and connects >= one["peak"] and errors > 0
    assert one["no_free_port"] >= errors

    lines = [
        f"open-file limit {m['hard']}: {SHARDS} volley process(es) of "
        f"{CONNECTIONS // SHARDS} connections, nginx with {NGINX_WORKERS} workers",
        f"four addresses: {four['peak']} connections established at once at nginx; by address "
        + ", ".join(f"{a} {c}" for a, (c, _) in four["sources"].items()),
        f"one address: {one['peak']} established at once (its {span} ports), {errors} attempts "
        "found no free port",
        f"four addresses: requests by shard {four['requests']} (each due {share:.0f}), "
        f"the slowest connect {four['connect_max_us'] / 1e6:.2f} s",
        "memory per connection at the height of the four-address run: "
        f"volley {four['volley_kib'] * 1024 / CONNECTIONS:.0f} B (RSS of its processes), "
        f"nginx {four['nginx_kib'] * 1024 / CONNECTIONS:.0f} B (RSS growth of its workers), "
        f"kernel {four['slab_kib'] * 1024 / CONNECTIONS:.0f} B (slab growth, both ends' sockets)",
    ]
    os.makedirs(os.path.join(ROOT, "build", "big"), exist_ok=True)
    with open(os.path.join(ROOT, "build", "big", "figures.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n" + "\n".join(lines))


if __name__ == "__main__":
    # unshare -n python3 check_big.py DIR OUT: the runs, in the namespace
    import pathlib
    figures = measure(pathlib.Path(sys.argv[1]))
    with open(sys.argv[2], "w") as f:
        json.dump(figures, f)
