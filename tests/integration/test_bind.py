"""Source addresses (--bind) and local ports (--bind-port-range) against
nginx, which logs each request's source address and port: connections spread
round-robin over the addresses, each address has its own ports to the
target, so one address runs out of a narrow port range where four do not,
and the report and --json say how many connections each address made.
The full-size version of that (150,000 connections from four addresses) is
`make check-big` (tests/big/check_big.py).
SPDX-License-Identifier: MIT
"""
import json
import os
import re

import pytest

from conftest import free_port, ok, run_json, volley

# What nginx logs of each request: where it came from.
LOG = "$remote_addr $remote_port"


def web(nginx, listen=None):
    server = 'location / { return 200 "ok\\n"; }'
    if listen:
        return nginx(listen=False, log_format=LOG, server=f"listen {listen}; {server}")
    return nginx(log_format=LOG, server=server)


def sources(doc):
    return {s["address"]: (s["connects"], s["connect_errors"]) for s in doc["sources"]}


def connections(srv):
    """The connections nginx saw (address, port), each once."""
    return {tuple(line.split()) for line in srv.log()}


def test_connections_spread_round_robin_over_the_source_addresses(nginx, tmp_path):
    srv = web(nginx)
    addresses = ["127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"]
    # -R: every connection opens before the run and sends in its turn (in
    # the closed model one thread could spend -n before the other's connect)
    run, doc = run_json(tmp_path, "-t2", "-c8", "-n", 80, "-R", 400, "--bind",
                        ",".join(addresses), srv.url + "/")
    ok(run)
    assert sources(doc) == {a: (2, 0) for a in addresses}
    assert doc["connects"] == 8 and doc["options"]["bind"] == ",".join(addresses)
    seen = connections(srv)
    assert len(seen) == 8 and sorted({a for a, _ in seen}) == addresses
    # after wrk's report, which stdout keeps as it is
    assert "address" not in run.stdout
    assert "Note: connections by source address: 127.0.0.2 2, 127.0.0.3 2, 127.0.0.4 2, " \
        "127.0.0.5 2\n" in run.stderr, run


def test_a_range_of_source_addresses(nginx, tmp_path):
    srv = web(nginx)
    # a /29's six host addresses: not its network's, nor its broadcast
    run, doc = run_json(tmp_path, "-t2", "-c12", "-d300ms", "--bind", "127.0.0.0/29",
                        srv.url + "/")
    ok(run)
    hosts = [f"127.0.0.{i}" for i in range(1, 7)]
    assert sources(doc) == {a: (2, 0) for a in hosts}
    assert sorted({a for a, _ in connections(srv)}) == hosts


def test_ipv6_source_addresses(nginx, tmp_path):
    port = free_port()
    srv = web(nginx, listen=f"[::1]:{port}")
    lo, hi = port_range(10, outside=False)
    run, doc = run_json(tmp_path, "-t1", "-c12", "-d500ms", "--bind", "::1/128",
                        "--bind-port-range", f"{lo}-{hi}", f"http://[::1]:{port}/")
    assert sources(doc)["::1"][0] == 10 and doc["error_causes"]["no_free_port"] > 0, run
    seen = connections(srv)
    assert len(seen) == 10 and all(a == "::1" and lo <= int(p) <= hi for a, p in seen)


# 127.0.0.1 and ::1 as /proc/net/tcp{,6} write them: the source address
# connect() picks for a loopback destination on its own.
DEFAULT_SOURCES = ("0100007F", "00000000000000000000000001000000")


def used_ports():
    """The local ports no connect() of the kernel's choice takes, whatever
    the addresses: those a socket holds by bind(). Told apart from the
    ports connect() took itself (which, TIME_WAIT included, may fill the
    whole range on a busy machine) as well as /proc allows: a listening
    socket's, and any socket's whose address is not the loopback one
    connect() picks (a proxy's connection to its upstream from an address
    of its own, which TIME_WAIT keeps for a minute); and every UDP port
    (HTTP/3's)."""
    ports = set()
    for name in ("tcp", "tcp6", "udp", "udp6"):
        with open(f"/proc/net/{name}") as f:
            for fields in (line.split() for line in f.readlines()[1:]):
                address, port = fields[1].rsplit(":", 1)
                if name.startswith("udp") or fields[3] == "0A" or address not in DEFAULT_SOURCES:
                    ports.add(int(port, 16))
    return ports


def port_range(n, outside):
    """n local ports no socket uses: inside the kernel's ephemeral range
    (where it chooses the port, within the range), or above it (where volley
    binds each port itself)."""
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        lo, hi = map(int, f.read().split())
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    step = 200 * (int(worker[2:]) if worker[2:].isdigit() else 0) + 100
    first = hi + step if outside else lo + step
    taken = used_ports()
    while taken & set(range(first, first + n)):
        first += n
    assert (first > hi if outside else first + n - 1 <= hi) and first + n - 1 <= 65535
    return first, first + n - 1


@pytest.mark.parametrize("outside", [False, True], ids=["kernel's choice", "volley's ports"])
def test_one_address_runs_out_of_ports_where_four_do_not(nginx, tmp_path, outside):
    """60 connections, 40 ports: one address holds 40 of them, the rest fail
    with a hint; four hold all 60, each from ports of the range."""
    lo, hi = port_range(40, outside)
    srv = web(nginx)
    args = ["-t2", "-c60", "-d1s", "--bind-port-range", f"{lo}-{hi}"]
    run, doc = run_json(tmp_path, *args, "--bind", "127.0.0.2", srv.url + "/")
    assert run.returncode == 0, run
    connects, errors = sources(doc)["127.0.0.2"]
    assert connects == 40 and errors == doc["error_causes"]["no_free_port"] > 0
    assert {k for k, v in doc["error_causes"].items() if v} == {"no_free_port"}
    assert f"Note: {errors} connection attempts found no free local port (no_free_port): add " \
        "source addresses (--bind) or widen the port range (--bind-port-range)\n" in run.stderr
    seen = connections(srv)
    assert len(seen) == 40 and all(a == "127.0.0.2" and lo <= int(p) <= hi for a, p in seen)

    srv = web(nginx)
    four = "127.0.0.2,127.0.0.3,127.0.0.4,127.0.0.5"
    run, doc = run_json(tmp_path, *args, "--bind", four, srv.url + "/")
    ok(run)
    assert sources(doc) == {a: (15, 0) for a in four.split(",")}
    seen = connections(srv)
    assert len(seen) == 60 and all(lo <= int(p) <= hi for _, p in seen)


def kernel_at_least(major, minor):
    release = re.match(r"(\d+)\.(\d+)", os.uname().release)
    return (int(release[1]), int(release[2])) >= (major, minor)


def parities(srv):
    return {int(p) % 2 for _, p in connections(srv)}


@pytest.mark.skipif(not kernel_at_least(6, 8),
                    reason="before Linux 6.8 connect() gets even ports first whatever the "
                           "socket asks")
@pytest.mark.parametrize("bind", [[], ["--bind", "127.0.0.2"]], ids=["its own address", "--bind"])
def test_more_connections_than_the_even_ports_take_ports_in_order(nginx, tmp_path, bind):
    """Left to itself the kernel gives connect() the even ports of its range
    first (the odd ones it keeps for bind()), and once they hold connections
    to the target scans all of them before each odd one: past half the range
    (14,000 connections in the default one) every connect cost milliseconds,
    and 150,000 connections from four addresses timed out by the thousand
    (make check-big). A run with more connections from an address than the
    even half holds asks for the range searched in order: the connections
    that send first (opened first) have odd ports too. A smaller run leaves
    the kernel's choice alone, as wrk does."""
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        lo, hi = map(int, f.read().split())
    srv = web(nginx)
    ok(run_json(tmp_path, "-t2", "-c40", "-n", 200, *bind, srv.url + "/")[0])
    assert parities(srv) == {lo % 2}, sorted(connections(srv))
    srv = web(nginx)
    many = (hi - lo + 1) // 2 + 500
    # nginx's listen queue (511) overflows: SYNs dropped are sent again 1 s
    # and 3 s later, which a 2 s --timeout would count as failures
    run, doc = run_json(tmp_path, "-t2", f"-c{many}", "-R", 200, "-d1s", "--timeout", "10s",
                        *bind, srv.url + "/")
    assert doc["connects"] == many and doc["errors"]["connect"] == 0, run
    assert len(connections(srv)) >= 150 and parities(srv) == {0, 1}, sorted(connections(srv))


def test_ports_of_its_own_are_taken_again_past_time_wait(nginx, tmp_path):
    """A run leaves the ports of the connections it closed in TIME_WAIT for
    a minute; the next run from the same address and range (here to
    another server), or its own reconnects, still bind them."""
    lo, hi = port_range(20, outside=True)
    args = ["-t1", "-c20", "-n", 200, "--bind", "127.0.0.2", "--bind-port-range", f"{lo}-{hi}"]
    for _ in range(2):
        srv = web(nginx)
        run, doc = run_json(tmp_path, *args, srv.url + "/")
        ok(run)
        assert sources(doc) == {"127.0.0.2": (20, 0)}
        seen = connections(srv)
        assert len(seen) == 20 and all(lo <= int(p) <= hi for _, p in seen)
    waiting = [line.split() for line in open("/proc/net/tcp").readlines()[1:]]
    assert any(f[3] == "06" and lo <= int(f[1].rsplit(":", 1)[1], 16) <= hi for f in waiting)


def test_http3_connections_come_from_the_source_addresses(go_h3, tmp_path):
    """Over QUIC each connection's UDP socket is bound to its address (its
    port the kernel's, at connect), round-robin as over TCP."""
    srv = go_h3()
    four = ["127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"]
    run, doc = run_json(tmp_path, "--http3", "-t2", "-c8", "-n", 400, "--bind", ",".join(four),
                        srv.url + "/")
    ok(run)
    assert sources(doc) == {a: (2, 0) for a in four} and doc["requests"] == 400
    peers = {r["conn"]: r["peer"] for r in srv.log()}
    assert len(peers) == 8 and len(set(peers.values())) == 8
    assert sorted(p.rsplit(":", 1)[0] for p in peers.values()) == sorted(four * 2)
    # volley's own ports: 4 of them, each address's own (two connections each)
    lo, hi = port_range(4, outside=True)
    srv = go_h3()
    run, doc = run_json(tmp_path, "--http3", "-t2", "-c8", "-n", 400, "--bind", ",".join(four),
                        "--bind-port-range", f"{lo}-{hi}", srv.url + "/")
    ok(run)
    assert sources(doc) == {a: (2, 0) for a in four}
    peers = {r["conn"]: r["peer"] for r in srv.log()}
    assert len(set(peers.values())) == 8
    assert all(lo <= int(p.rsplit(":", 1)[1]) <= hi for p in peers.values())


def test_through_a_proxy_the_sources_are_the_connections_to_it(nginx, tinyproxy, tmp_path):
    srv, proxy = web(nginx), tinyproxy()
    run, doc = run_json(tmp_path, "-t1", "-c4", "-n", 100, "--bind", "127.0.0.2,127.0.0.3",
                        "--proxy", proxy.url, srv.url + "/")
    ok(run)
    proxy.stop()
    with open(proxy.log_file) as f:
        clients = re.findall(r"Connect \(file descriptor \d+\): (\S+)", f.read())
    # the check before the run comes from the first address; then each
    # connection (tinyproxy closes them after each response) from its own
    assert sorted(set(clients)) == ["127.0.0.1", "127.0.0.2", "127.0.0.3"]
    assert sum(c for c, _ in sources(doc).values()) == doc["connects"] == \
        clients.count("127.0.0.2") + clients.count("127.0.0.3") - 1


def test_addresses_that_cannot_be_used_stop_the_run(nginx):
    url = web(nginx).url
    run = volley("-n1", "--bind", "127.0.0.2,192.0.2.200", url)
    assert run.returncode == 1 and run.stderr == (
        "volley: --bind 192.0.2.200: Cannot assign requested address (add the address to one of "
        "this machine's interfaces)\n"), run
    run = volley("-n1", "--bind", "::1", url)
    assert run.returncode == 1 and run.stderr == (
        "volley: --bind ::1: an IPv6 address, and the connections go to an IPv4 one\n"), run


def test_merged_shards_add_up_their_sources(nginx, tmp_path):
    srv = web(nginx)
    files = []
    for i in range(2):
        path = str(tmp_path / f"{i}.json")
        ok(volley("-t1", "-c4", "-d300ms", "--shard", f"{i}/2", "--bind", "127.0.0.2,127.0.0.3",
                  "--json", path, srv.url + "/"))
        files.append(path)
    out = str(tmp_path / "m.json")
    run = volley("merge", "--json", out, *files)
    assert run.returncode == 0, run
    with open(out) as f:
        merged = json.load(f)
    parts = []
    for path in files:
        with open(path) as f:
            parts.append(json.load(f))
    # shard 0 has connections 0 and 1 of the run, shard 1 connections 2 and 3
    assert [sources(p) for p in parts] == [{"127.0.0.2": (1, 0), "127.0.0.3": (1, 0)}] * 2
    assert sources(merged) == {"127.0.0.2": (2, 0), "127.0.0.3": (2, 0)}
    assert "Note: connections by source address: 127.0.0.2 2, 127.0.0.3 2\n" in run.stderr
