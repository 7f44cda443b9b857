"""--engine: the io_uring engine and the epoll engine, each checked against what
the server saw; which one a run picks (io_uring where the kernel allows it,
for http URLs), and what it does where io_uring is refused, as a container's
seccomp profile refuses it (build/tests/no-uring). A build without liburing
is test_dist.py's Lua 5.1 build. The rest of the suite runs on the engine
volley picks by default; `make check ENGINE=epoll` runs it on the other
(`ENGINE=io_uring` stops at once where the kernel refuses io_uring).
SPDX-License-Identifier: MIT
"""
import json
import os
import re
import socket
import subprocess
import time

import pytest

from conftest import ROOT, VOLLEY, check_sanitizer, ok, run_json, uring_refused, volley

NO_URING = os.path.join(ROOT, "build", "tests", "no-uring")
ENGINES = ("epoll", "io_uring")


def own_env(**extra):
    """The environment without VOLLEY_ENGINE: the choice these tests check
    is volley's own."""
    env = {k: v for k, v in os.environ.items() if k != "VOLLEY_ENGINE"}
    env.update(extra)
    return env


def engines():
    """The engines this machine runs: epoll, and io_uring where allowed."""
    return ENGINES if uring_refused() is None else ("epoll",)


def test_each_engine_counts_what_the_server_answered(testd, tmp_path):
    for engine in engines():
        srv = testd()
        run, doc = run_json(tmp_path, "--engine", engine, "-t2", "-c16", "-n", "20000", srv.url,
                            env=own_env())
        ok(run)
        seen = srv.stats()
        assert run.report["engine"] == doc["options"]["engine"] == engine, run
        assert doc["requests"] == run.report["requests"] == 20000
        assert seen["requests"] == seen["responses"] == 20000
        assert doc["connects"] == 16 and seen["connections"] == 16 + 1  # and the probe
        assert doc["bytes"] == seen["bytes_out"]


def test_auto_is_io_uring_where_the_kernel_allows_it(testd):
    srv = testd()
    refused = uring_refused()
    run = ok(volley("-t1", "-c2", "-d300ms", srv.url, env=own_env()))
    assert run.report["engine"] == ("epoll" if refused else "io_uring"), (refused, run)
    if refused:  # then the run says why, in one line, when io_uring is asked for by name
        assert re.fullmatch(r"volley: --engine io_uring: io_uring is not available here \(.+\)",
                            refused), refused


@pytest.mark.parametrize("err,why", [(1, "Operation not permitted"),
                                     (38, "Function not implemented")])
def test_where_io_uring_is_refused_the_run_falls_back_to_epoll(testd, tmp_path, err, why):
    """EPERM as Docker's seccomp profile and kernel.io_uring_disabled give,
    ENOSYS as a kernel without io_uring does."""
    srv = testd()
    wrap = [NO_URING, "--errno", str(err)]
    path = os.path.join(tmp_path, "r.json")
    run = subprocess.run(wrap + [VOLLEY, "-t1", "-c4", "-n", "3000", "--json", path, srv.url],
                         capture_output=True, text=True, timeout=60, env=own_env())
    check_sanitizer("volley", run.stderr)
    assert run.returncode == 0 and "  engine: epoll\n" in run.stdout, run
    with open(path) as f:
        doc = json.load(f)
    assert doc["options"]["engine"] == "epoll" and doc["requests"] == 3000
    assert srv.stats()["responses"] == 3000
    for how in (["--engine", "io_uring"], []):
        env = own_env(VOLLEY_ENGINE="io_uring") if not how else own_env()
        run = subprocess.run(wrap + [VOLLEY, *how, "-t1", "-c1", "-n1", srv.url],
                             capture_output=True, text=True, timeout=60, env=env)
        named = "--engine io_uring" if how else "VOLLEY_ENGINE=io_uring"
        assert (run.returncode, run.stdout) == (1, ""), run
        assert run.stderr == (f"volley: {named}: io_uring is not available here "
                              f"(io_uring_setup: {why})\n"), run


def test_https_runs_on_epoll(nginx, tmp_path, certs):
    srv = nginx(tls=True, server=f'ssl_certificate {certs["server.pem"]}; '
                                 f'ssl_certificate_key {certs["server.key"]}; '
                                 'location / { return 200 "ok"; }')
    run = ok(volley("-t1", "-c2", "-n", "200", srv.url + "/", env=own_env()))
    assert run.report["engine"] == "epoll" and run.report["requests"] == 200
    run = volley("--engine", "io_uring", "-t1", "-c2", "-n", "200", srv.url + "/",
                 env=own_env())
    assert run.returncode == 1 and run.stdout == "", run
    assert run.stderr == ("volley: --engine io_uring: an https URL runs on epoll (TLS is read "
                          "and written through OpenSSL's socket calls)\n")


def test_an_engine_that_is_none_is_a_usage_error():
    for args, env, what in ((["--engine", "kqueue"], {}, "--engine"),
                            ([], {"VOLLEY_ENGINE": "poll"}, "VOLLEY_ENGINE")):
        run = volley(*args, "http://127.0.0.1:1/", env=own_env(**env))
        assert run.returncode == 1, run
        name = args[1] if args else env["VOLLEY_ENGINE"]
        assert run.stderr.splitlines()[0] == \
            f"volley: invalid {what} '{name}': epoll, io_uring or auto"
    # the command line wins over the environment, and auto is a name too
    run = volley("--engine", "epoll", "-t1", "-c1", "-n1", "http://127.0.0.1:1/",
                 env=own_env(VOLLEY_ENGINE="io_uring"))
    assert "unable to connect" in run.stderr, run


def test_more_connections_than_receive_buffers(testd, tmp_path):
    """Past 512 connections a worker's ring has fewer buffers than
    connections, and 16 KiB responses take two each: receives that find none
    left end and are armed again, and every response still counts once."""
    for engine in engines():
        srv = testd("--body-size", "16k")
        run, doc = run_json(tmp_path, "--engine", engine, "-t1", "-c1500", "-n", "30000",
                            "--timeout", "10s", srv.url, timeout=120, env=own_env())
        ok(run)
        seen = srv.stats()
        assert doc["requests"] == seen["responses"] == 30000, (engine, seen)
        assert doc["bytes"] == seen["bytes_out"]
        assert doc["connects"] == 1500


def test_a_close_while_a_body_is_going_out(testd, tmp_path):
    """The server answers a 4 MiB upload from its head and closes: the send
    still in flight is cancelled, and the connection's next socket waits
    for it before the request it refills goes out again."""
    script = tmp_path / "upload.lua"
    script.write_text('wrk.method = "POST"\nwrk.body = string.rep("x", 4 * 1024 * 1024)\n'
                      'request = function() return wrk.format() end\n')
    for engine in engines():
        srv = testd("--early", "--connection-close")
        run, doc = run_json(tmp_path, "--engine", engine, "-t1", "-c2", "-n", "40",
                            "-s", script, srv.url, timeout=120, env=own_env())
        ok(run)
        seen = srv.stats()
        assert doc["requests"] == 40 and seen["responses"] == 40, (engine, seen)
        assert seen["bad_requests"] == 0 and doc["reconnects"] >= 38, (engine, doc)


def test_a_unix_socket_whose_backlog_is_full_is_a_connect_error(tmp_path):
    """A Unix socket's connect fails at once when the listener's backlog is
    full (EAGAIN), and the socket is then writable: it is an error of the
    connect (connect_other), on either engine, not a connection that
    failed to write."""
    path = str(tmp_path / "full.sock")
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(path)
    listener.listen(0)
    # the backlog full before volley's own start-up probe: that fails too
    fillers, accepted = [], []
    for _ in range(4):
        s = socket.socket(socket.AF_UNIX)
        s.setblocking(False)
        try:
            s.connect(path)
        except BlockingIOError:
            pass
        fillers.append(s)
    try:
        for engine in engines():
            run = volley("--engine", engine, "-t1", "-c2", "-d300ms", "--unix-socket", path,
                         "http://localhost/", env=own_env())
            assert run.returncode == 1, run
            assert run.stderr == (f"volley: unable to connect to {path}: "
                                  "Resource temporarily unavailable\n"), run
        accepted = []
        listener.settimeout(5)
        for engine in engines():
            # room for the probe only (a connection closed before it is
            # accepted still takes its place): the run's then find it full
            accepted.append(listener.accept()[0])
            start = time.monotonic()
            run, doc = run_json(tmp_path, "--engine", engine, "-t1", "-c2", "-d500ms",
                                "--timeout", "200ms", "--unix-socket", path, "http://localhost/",
                                env=own_env())
            assert time.monotonic() - start < 10
            causes = {k: v for k, v in doc["error_causes"].items() if v}
            assert doc["errors"]["write"] == 0 and doc["connects"] == 0, (engine, doc)
            assert set(causes) <= {"connect_other", "connect_timeout"} and causes, (engine, doc)
    finally:
        for s in fillers + accepted:
            s.close()
        listener.close()

