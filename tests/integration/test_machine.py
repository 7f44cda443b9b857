"""The connection machine against servers that answer early, reset, die, close
idle connections or every connection: every request ends once, as a response
or as one counted error; the request stream never desynchronises; -n always
ends with exactly N outcomes; reconnects are lazy, backed off and reported.
Checked in what the servers saw as well as in volley's report and JSON.
SPDX-License-Identifier: MIT
"""
import ssl
import subprocess

import pytest

from conftest import run_json, tls_front
from test_tls import TlsServer, tls_context

POST_4M = 'wrk.method = "POST"\nwrk.body = string.rep("x", 4 * 1024 * 1024)\n'
BODY = 4 * 1024 * 1024


def outcomes(doc):
    """Responses plus socket errors in a --json document."""
    e = doc["errors"]
    return doc["requests"] + e["connect"] + e["read"] + e["write"] + e["timeout"]


# --------------------------------------------------------------------------
# A server that answers before it has read the request's body
# --------------------------------------------------------------------------

@pytest.mark.parametrize("status,path", [(413, "/"), (401, "/resource")])
@pytest.mark.parametrize("tls", [False, True], ids=["plain", "tls"])
def test_early_answers_never_desynchronise_the_stream(testd, nginx, certs, tmp_path,
                                                      status, path, tls):
    # The server answers each POST as soon as it has the head, keeps the
    # connection, then reads and discards exactly Content-Length bytes; its
    # small receive buffer makes volley's writes block, so the answer
    # arrives while the body is still being written. A request line found
    # where the next request must start would be a bad request.
    script = tmp_path / "post.lua"
    script.write_text(POST_4M)
    opts = ["--early", "--rcvbuf", 4096] + (["--status", status] if status == 413 else [])
    srv = testd(*opts)
    url = (tls_front(nginx, certs, srv.port).url if tls else srv.url) + path
    run, doc = run_json(tmp_path, "-t1", "-c2", "-n", 8, "-s", script, url, timeout=60)
    stats = srv.stop()
    assert stats["bad_requests"] == 0, stats
    assert doc["requests"] == 8, run
    assert doc["status_codes"] == {str(status): 8}, doc["status_codes"]
    assert outcomes(doc) == 8, doc["errors"]  # nothing blamed on the server
    # Every response answered a request the server read whole (the bodies
    # still being written when the eighth answer came excepted), on the two
    # connections volley opened.
    assert stats["responses"] == 8, stats
    assert stats["requests_with_body"] == stats["requests"] >= 6, stats
    assert stats["body_bytes_in"] >= stats["requests"] * BODY, stats
    assert doc["reopened"] == 0 and doc["connects"] == 2, doc


def test_early_answer_that_closes_is_counted_and_the_rest_not_sent(nginx, tmp_path):
    # nginx answers 413 to a body over client_max_body_size as soon as it has
    # the head, with Connection: close: the response counts, the connection
    # is reopened, and no error is counted against the server.
    script = tmp_path / "post.lua"
    script.write_text(POST_4M)
    srv = nginx(server="client_max_body_size 1k; location / { return 200 'ok'; }")
    run, doc = run_json(tmp_path, "-t1", "-c2", "-d1s", "-s", script, srv.url)
    n = doc["requests"]
    assert n > 0 and doc["status_codes"] == {"413": n}, doc["status_codes"]
    assert outcomes(doc) == n, doc["error_causes"]
    assert doc["reopened"] >= n - 2, doc
    assert "Connections reopened:" in run.stdout
    log = srv.log()
    assert n <= len(log) <= n + 2 and all(line.startswith("POST / ") for line in log)


# --------------------------------------------------------------------------
# -n: exactly N outcomes, whatever happens to the connections
# --------------------------------------------------------------------------

def test_pipelined_batches_lost_to_resets_count_one_error_per_request(testd, tmp_path):
    # Every connection is reset after its first complete request: each batch
    # of three pipelined requests ends in one response at most, and every
    # request still outstanding counts one error.
    script = tmp_path / "pipe.lua"
    script.write_text('init = function() req = wrk.format() .. wrk.format() .. wrk.format() end\n'
                      'request = function() return req end\n')
    srv = testd("--hostile", "reset")
    run, doc = run_json(tmp_path, "-t1", "-c2", "-n", 300, "-s", script, srv.url, timeout=30)
    assert outcomes(doc) == 300, doc
    r = run.report
    assert r["requests"] + sum(r["errors"].values()) == 300, run
    assert doc["errors"]["read"] + doc["errors"]["write"] > 0


def test_requests_against_a_tls_port_that_cannot_handshake_end_the_run(certs, tmp_path):
    # After the check before the run, a server that speaks only TLS 1.1:
    # every handshake fails, each a counted outcome, so -n ends instead of
    # hanging.
    srv = TlsServer(lambda n: tls_context(certs, None if n == 0 else ssl.TLSVersion.TLSv1_1))
    try:
        run, doc = run_json(tmp_path, "-t1", "-c2", "-n", 200, f"https://127.0.0.1:{srv.port}/",
                            timeout=30)
    finally:
        srv.close()
    assert doc["errors"]["connect"] == 200 and doc["requests"] == 0, doc
    assert doc["error_causes"]["tls_handshake"] == 200
    assert doc["tls"]["handshake_failures"]["protocol_version"] == 200
    assert run.report["errors"]["connect"] == 200
    assert run.elapsed < 10, run


def test_server_killed_mid_run_ends_n_with_every_request_counted(testd, tmp_path):
    srv = testd("--delay", 1, "--hostile", "die-after:300")
    run, doc = run_json(tmp_path, "-t1", "-c4", "-n", 100000, "-T", "500ms", srv.url,
                        timeout=60)
    stats = srv.stop()
    # After the server died each failed connect is one request's outcome,
    # and with back-off up to 1 s four connections need a few seconds for
    # the rest: the run ends, and the responses are those the server sent.
    assert outcomes(doc) == 100000, doc
    assert doc["requests"] <= stats["responses"] <= doc["requests"] + 4
    assert doc["errors"]["connect"] > 0 and doc["error_causes"]["refused"] > 0
    assert run.elapsed < 40, run


def test_thread_stop_on_one_thread_still_ends_n_exactly(testd, tmp_path):
    script = tmp_path / "stop_one.lua"
    script.write_text(
        "local n, created = 0, 0\n"
        'function setup(t) created = created + 1; t:set("first", created == 1) end\n'
        "function response(s)\n"
        '  n = n + 1; if n == 10 and wrk.thread:get("first") then wrk.thread:stop() end\n'
        "end\n")
    srv = testd()
    run, doc = run_json(tmp_path, "-t2", "-c4", "-n", 1000, "-s", script, srv.url, timeout=30)
    stats = srv.stop()
    assert outcomes(doc) == 1000 and doc["requests"] == 1000, doc
    # What the stopped thread had in flight was sent again by the other one.
    assert 1000 <= stats["requests"] <= 1002, stats


# --------------------------------------------------------------------------
# Reconnecting with manners
# --------------------------------------------------------------------------

def test_rate_against_a_server_closing_after_each_response(testd, tmp_path):
    srv = testd("--connection-close")
    run, doc = run_json(tmp_path, "-t1", "-c10", "-d3s", "-R", 10, srv.url)
    stats = srv.stop()
    sent = doc["rate"]["sent"] * doc["duration_us"] / 1e6
    # One new connection per request sent after the first ten, none ahead.
    assert doc["connects"] <= round(sent) + 10, doc
    assert stats["connections"] <= stats["requests"] + 10 + 1, stats  # + the start-up probe
    assert 20 <= doc["requests"] <= 40, doc
    assert outcomes(doc) == doc["requests"], doc["errors"]
    assert f"Connections reopened: {doc['reopened']}" in run.stdout, run


def test_idle_connections_closed_by_the_server_reopen_only_to_send(testd, tmp_path):
    # -R 20 over 10 connections: each waits 500 ms between requests, and the
    # server closes connections idle for 25 ms (before the second connection's
    # first turn). A connection reopens when its next request is due, not as
    # soon as it was closed.
    srv = testd("--idle-close", 25)
    run, doc = run_json(tmp_path, "-t1", "-c10", "-d2s", "-R", 20, srv.url)
    stats = srv.stop()
    assert outcomes(doc) == doc["requests"] and doc["requests"] >= 30, doc
    assert stats["connections"] <= stats["requests"] + 10 + 1, stats
    # Latency does not count the reopening: the server answers at once.
    assert doc["latency"]["percentiles"]["50"] < 50000, doc["latency"]
    assert doc["connect_time"]["count"] == doc["connects"]


def test_server_closing_every_connection_at_once_is_not_hammered(testd, tmp_path):
    # The server closes each connection 10 us after it falls idle: at once,
    # for a connection waiting for its -R slot. Each slot reconnects when its
    # next request is due, not as soon as it was closed.
    srv = testd("--idle-close", 0.01)
    run, doc = run_json(tmp_path, "-t1", "-c10", "-d2s", "-R", 10, srv.url)
    stats = srv.stop()
    sent = round(doc["rate"]["sent"] * doc["duration_us"] / 1e6)
    assert 15 <= sent <= 25, doc
    # The first ten, one per request sent, and at most one per slot that was
    # reopening for its next request when the run ended.
    assert doc["connects"] <= sent + 20, doc
    assert stats["connections"] <= sent + 20 + 1, stats
    # Each request sent ended once (but those still in flight at the end):
    # failed, or answered when it reached the server within the 10 us before
    # its close (a request that goes out as its connect completes, as on
    # io_uring, sometimes does), as the server counted.
    errors = doc["errors"]["read"] + doc["errors"]["write"]
    assert outcomes(doc) == doc["requests"] + errors and sent - 10 <= outcomes(doc) <= sent, doc
    assert doc["requests"] <= stats["responses"], (doc, stats)  # some at the very end unread


# --------------------------------------------------------------------------
# What latency counts under -R
# --------------------------------------------------------------------------

def test_delay_pause_under_rate_is_not_latency(testd, tmp_path):
    # One connection, 10 requests/s asked for, and a script that pauses
    # 200 ms before each request: the pause is the script's think time, not
    # the server's, and the warning says that it limits the rate.
    script = tmp_path / "pause.lua"
    script.write_text("function delay() return 200 end\n")
    srv = testd()
    run, doc = run_json(tmp_path, "-t1", "-c1", "-d2s", "-R", 10, "-s", script, srv.url)
    assert 6 <= doc["requests"] <= 11, doc
    assert doc["latency"]["percentiles"]["50"] < 50000, doc["latency"]
    assert "mean delay() pause of 200.00ms, 1 connections carry at most 5 requests/sec" \
        in run.stdout + run.stderr, run


def test_reconnect_under_rate_is_not_latency(nginx, tmp_path):
    # Every response closes the connection, and every TLS handshake is a full
    # one with a slow RSA key, slower than the 5 ms between two requests of a
    # connection: each request waits for a new connection, and the schedule
    # falls behind. That wait is set-up time (reported as connect_time), not
    # the server's answer to the request, so the corrected latency stays near
    # the uncorrected one instead of growing with the backlog.
    key, cert = str(tmp_path / "rsa.key"), str(tmp_path / "rsa.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:4096", "-nodes", "-keyout", key,
                    "-out", cert, "-days", "2", "-subj", "/CN=localhost"],
                   check=True, capture_output=True, timeout=60)
    srv = nginx(tls=True, server=f"""
        ssl_certificate {cert};
        ssl_certificate_key {key};
        ssl_session_tickets off;
        keepalive_timeout 0;
        location / {{ return 200 "ok"; }}""")
    run, doc = run_json(tmp_path, "-t1", "-c2", "-d2s", "-R", 400, srv.url)
    assert doc["requests"] >= 20, doc
    assert doc["latency"]["percentiles"]["50"] <= \
        doc["latency_uncorrected"]["percentiles"]["50"] + 1000, doc["latency"]
    assert doc["reopened"] >= doc["requests"] - 2, doc
    assert doc["connect_time"]["count"] == doc["connects"]
    assert doc["connect_time"]["percentiles"]["50"] > 1000, doc["connect_time"]
