"""10,000 connections held open against nginx for 10 s: no errors, every
connection opened once and kept (nginx's own counters say so), and volley's
memory steady from the first seconds to the last.
SPDX-License-Identifier: MIT
"""
import re
import resource
import subprocess
import time
import urllib.request

import pytest

from conftest import VOLLEY, Run, check_sanitizer, free_port, wait_port

CONNECTIONS = 10000
DURATION = 10


def stub_status(url):
    with urllib.request.urlopen(url + "/status", timeout=5) as r:
        text = r.read().decode()
    active = int(re.search(r"Active connections: (\d+)", text).group(1))
    accepts, handled, requests = map(int, re.search(r"\n\s*(\d+) (\d+) (\d+)", text).groups())
    return active, accepts, requests


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(r"VmRSS:\s+(\d+) kB", f.read()).group(1))


def test_ten_thousand_connections_against_nginx(nginx):
    # volley needs its connections plus a few descriptors per thread; nginx
    # gets as many as the hard limit allows (worker_rlimit_nofile).
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard < CONNECTIONS + 100:
        pytest.skip(f"the open file hard limit ({hard}) is below {CONNECTIONS} connections")
    # A listen queue deep enough for 10,000 connects at once (the kernel
    # caps it at somaxconn), so that none waits for a SYN retransmission.
    port = free_port()
    srv = nginx(listen=False, server=f"listen 127.0.0.1:{port} backlog=65535; access_log off; "
                                     'location / { return 200 "ok\\n"; } '
                                     "location = /status { stub_status; }")
    url = f"http://127.0.0.1:{port}"
    wait_port(port, srv.proc)
    _, accepts_before, _ = stub_status(url)
    start = time.monotonic()
    # At 1 request/s per connection: the point is holding them, and nginx's
    # one worker must keep up on a busy two-core machine.
    proc = subprocess.Popen([VOLLEY, "-t2", f"-c{CONNECTIONS}", f"-d{DURATION}s",
                             f"-R{CONNECTIONS}", "--timeout", "5s", url + "/"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            errors="replace")
    try:
        time.sleep(3)
        rss_early = rss_kib(proc.pid)
        active, _, _ = stub_status(url)
        time.sleep(DURATION - 4)
        rss_late = rss_kib(proc.pid)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    run = Run(subprocess.CompletedProcess(proc.args, proc.returncode, out, err),
              time.monotonic() - start)
    check_sanitizer("volley", err)
    _, accepts_after, _ = stub_status(url)

    assert run.returncode == 0, run
    assert run.report["connections"] == CONNECTIONS, run
    assert not run.report["socket_errors_line"] and run.report["non2xx"] == 0, run
    assert run.report["requests"] > CONNECTIONS, run
    # All of them open at once (the status request is one more)...
    assert active >= CONNECTIONS + 1, active
    # ...and each opened exactly once: the start-up probe, the connections,
    # and the status requests made meanwhile are all nginx accepted.
    assert accepts_after - accepts_before == 1 + CONNECTIONS + 2, run
    # Memory: nothing grows per request once every connection is open.
    assert rss_late - rss_early < 4096 + rss_early // 20, (rss_early, rss_late)
