"""volley --http2 against real HTTP/2 servers: nginx (h2c and TLS), nghttpd
and Go's net/http, each counting what it served; wrk's example scripts over
HTTP/2 through nginx to volley-testd, which logs every request whole; the
hostile peer's every mode, each ending in time and counted under its cause,
malformed responses, header blocks that would cost gigabytes and servers
that refuse every request among them; and -m, the requests in flight per
connection, for both protocols.
SPDX-License-Identifier: MIT
"""
import json
import os
import re
import subprocess
import time

import pytest

from conftest import (H2_LOG, ROOT, VOLLEY, WRK_SCRIPTS, check_auth_log,
                      check_sanitizer, header, max_open_is, ok, printed, run_json,
                      volley)

OUR_SCRIPTS = os.path.join(ROOT, "scripts")


def causes(doc):
    return {k: v for k, v in doc["error_causes"].items() if v}


def socket_errors(doc):
    e = doc["errors"]
    return e["connect"] + e["read"] + e["write"] + e["timeout"]


def h2_log(server):
    """nginx's access log (H2_LOG fields) as (protocol, method, uri, connection)."""
    return [tuple(line.split()[:4]) for line in server.log()]


# --------------------------------------------------------------------------
# nginx: exact counts, over h2c and TLS
# --------------------------------------------------------------------------

@pytest.mark.parametrize("tls", [False, True], ids=["h2c", "tls"])
def test_n_requests_reach_nginx_exactly_over_http2(nginx_h2, tmp_path, tls):
    srv = nginx_h2(tls=tls)
    run, doc = run_json(tmp_path, "--http2", "-t2", "-c4", "-m8", "-n", "20000", srv.url + "/n")
    assert run.report["requests"] == 20000, run
    assert run.stdout.startswith(f"Running 20000 requests test @ {srv.url}/n over HTTP/2\n")
    log = h2_log(srv)
    assert len(log) == 20000
    assert {(p, m, u) for p, m, u, _ in log} == {("HTTP/2.0", "GET", "/n")}
    # four connections, kept for the whole run
    assert len({c for *_, c in log}) == 4 and doc["connects"] == 4
    assert socket_errors(doc) == 0 and doc["status_codes"] == {"200": 20000}
    assert doc["options"]["protocol"] == "HTTP/2" and doc["options"]["streams"] == 8
    assert doc["http2"]["streams"] == 8
    assert doc["tls"] is None if not tls else doc["tls"]["handshakes"] == 4


def test_server_stream_limit_caps_m_and_is_reported(nginx_h2, tmp_path):
    srv = nginx_h2(max_streams=8)
    run, doc = run_json(tmp_path, "--http2", "-t1", "-c2", "-m64", "-n", "5000", srv.url)
    assert run.report["requests"] == 5000
    assert len(srv.log()) == 5000
    assert socket_errors(doc) == 0 and doc["status_codes"] == {"200": 5000}, doc["errors"]
    assert doc["http2"]["streams"] == 8
    assert doc["options"]["streams"] == 64
    # Streams opened before nginx's SETTINGS came over its limit were refused,
    # unprocessed, and sent again.
    assert doc["http2"]["refused"] == doc["http2"]["rst_stream_received"].get(
        "REFUSED_STREAM", 0)
    note = "Note: the server allows 8 concurrent streams per connection: -m 64 ran as -m 8"
    assert run.stderr.count(note) == 1, run


def test_http11_only_tls_server_stops_the_run(nginx, certs):
    srv = nginx(tls=True, server=f'ssl_certificate {certs["server.pem"]}; '
                f'ssl_certificate_key {certs["server.key"]}; location / {{ return 200; }}')
    run = volley("--http2", "-d1s", srv.url)
    assert run.returncode == 1, run
    assert run.stdout == ""
    host = srv.url.split("//")[1]
    assert run.stderr == f"volley: --http2: {host} does not speak HTTP/2 " \
                         f"(it refused ALPN h2)\n", run
    assert srv.log() == []


@pytest.mark.parametrize("server", ["testd", "nginx"])
def test_http11_only_cleartext_server_stops_the_run(testd, nginx, server):
    # h2c with prior knowledge: an HTTP/1.1 server answers the preface with
    # a 400, and every request of the run would be an http2_protocol error.
    if server == "testd":
        srv = testd()
    else:
        srv = nginx(log_format="$request $status",
                    server='location / { return 200 "x"; }')
    run = volley("--http2", "-t1", "-c2", "-d1s", srv.url + "/x")
    assert run.returncode == 1, run
    assert run.stdout == ""
    host = srv.url.split("//")[1]
    assert run.stderr == f"volley: --http2: {host} does not speak HTTP/2 in cleartext (it " \
                         f"answered the connection preface with 'HTTP/1.1 400 Bad Request')\n", run
    # What the server saw: the preface, as a request it could not read.
    if server == "testd":
        stats = srv.stop()
        assert stats["requests"] == 0 and stats["bad_requests"] == 1, stats
    else:
        assert srv.log() == ["PRI * HTTP/2.0 400"]


def test_tls_server_without_alpn_stops_the_run(nginx, certs, testd):
    from conftest import tls_front
    front = tls_front(nginx, certs, testd().port)
    run = volley("--http2", "-d1s", front.url)
    assert run.returncode == 1, run
    host = front.url.split("//")[1]
    assert run.stderr == f"volley: --http2: {host} does not speak HTTP/2 " \
                         f"(it chose no protocol in ALPN)\n", run


def test_alpn_each_connection_speaks_what_its_server_chose(go_h2c, certs, tmp_path):
    """--alpn h2,http/1.1 against a TLS server that offers each new
    connection only h2, then only http/1.1, in turn: every other connection
    speaks HTTP/2, the others HTTP/1.1, each with its own session; the mix
    is in --json and on a line after the report, and the server counted the
    same."""
    srv = go_h2c(tls=["--cert", certs["server.pem"], "--key", certs["server.key"],
                      "--alternate"])
    run, doc = run_json(tmp_path, "--alpn", "h2,http/1.1", "-t1", "-c4", "-n", "400", srv.url)
    seen = srv.stats()
    assert run.report["requests"] == 400 == seen["requests"], run
    assert run.stdout.startswith(f"Running 400 requests test @ {srv.url} over HTTP/2 or "
                                 "HTTP/1.1\n"), run
    assert doc["connects"] == 4 and socket_errors(doc) == 0
    assert doc["protocols"] == {"HTTP/1.1": 2, "HTTP/2": 2}
    assert seen["connection_protocols"] == {"HTTP/1.1": 2, "HTTP/2.0": 2}
    assert sum(seen["protocols"].values()) == 400 and len(seen["protocols"]) == 2
    assert doc["options"]["protocol"] is None
    assert doc["options"]["alpn"] == ["h2", "http/1.1"]
    assert doc["http2"] is not None and doc["status_codes"] == {"200": 400}
    assert "Protocols: 2 connections over HTTP/1.1, 2 over HTTP/2\n" in run.stderr, run


def test_alpn_falls_back_to_http11_when_the_server_chooses_it(nginx, certs, tmp_path):
    srv = nginx(tls=True, server=f'ssl_certificate {certs["server.pem"]}; '
                f'ssl_certificate_key {certs["server.key"]}; location / {{ return 200; }}')
    run, doc = run_json(tmp_path, "--alpn", "h2,http/1.1", "-t1", "-c2", "-n", "50", srv.url)
    assert run.report["requests"] == 50 == len(srv.log()), run
    assert doc["protocols"] == {"HTTP/1.1": 2} and "Protocols:" not in run.stderr


@pytest.mark.parametrize("args,why", [
    (["--alpn", "spdy/3"], "invalid --alpn 'spdy/3': a list of protocols volley speaks, each "
                           "once: h2, http/1.1"),
    (["--alpn", "h2,h2"], "invalid --alpn 'h2,h2': a list of protocols volley speaks, each "
                          "once: h2, http/1.1"),
    (["--alpn", ""], "invalid --alpn '': a list of protocols volley speaks, each once: h2, "
                     "http/1.1"),
    (["--http2", "--alpn", "h2"], "--http2 is --alpn h2: give one of them"),
    (["--alpn", "h2,http/1.1", "http://127.0.0.1:1/"],
     "--alpn h2,http/1.1: several protocols need an https URL, where TLS chooses one; over "
     "http, --alpn h2 speaks HTTP/2 with prior knowledge"),
])
def test_alpn_errors_are_one_line(args, why):
    run = volley(*args, *([] if args[-1].startswith("http") else ["https://127.0.0.1:1/"]))
    assert run.returncode == 1 and run.stderr.startswith(f"volley: {why}\n"), run


def test_alpn_h2_is_http2(nginx, certs, go_h2c):
    """--alpn h2 stops as --http2 does against a server that speaks no
    HTTP/2, and over cleartext speaks h2c with prior knowledge."""
    srv = nginx(tls=True, server=f'ssl_certificate {certs["server.pem"]}; '
                f'ssl_certificate_key {certs["server.key"]}; location / {{ return 200; }}')
    run = volley("--alpn", "h2", "-d1s", srv.url)
    host = srv.url.split("//")[1]
    assert run.returncode == 1 and run.stderr == f"volley: --alpn h2: {host} does not speak " \
                                                 f"HTTP/2 (it refused ALPN h2)\n", run
    h2c = go_h2c()
    run = ok(volley("--alpn", "h2", "-t1", "-c1", "-n", "10", h2c.url))
    assert run.stdout.startswith(f"Running 10 requests test @ {h2c.url} over HTTP/2\n")
    assert h2c.stats()["protocols"] == {"HTTP/2.0": 10}


def test_without_http2_alpn_stays_http11(nginx_h2, tmp_path):
    srv = nginx_h2(tls=True)
    run = volley("-t1", "-c2", "-n", "100", srv.url)
    assert run.returncode == 0 and run.report["requests"] == 100, run
    assert {p for p, *_ in h2_log(srv)} == {"HTTP/1.1"}


def test_rate_is_held_across_streams(nginx_h2, tmp_path):
    srv = nginx_h2()
    run, doc = run_json(tmp_path, "--http2", "-R", "2000", "-c4", "-m8", "-d3s", srv.url)
    assert abs(doc["rate"]["sent"] - 2000) <= 40, doc["rate"]
    assert abs(doc["throughput"]["requests_per_sec"] - 2000) <= 40, doc["throughput"]
    assert socket_errors(doc) == 0
    n = len(srv.log())
    assert doc["requests"] <= n <= doc["requests"] + 4 * 8


def test_options_work_the_same_over_http2(nginx_h2, tmp_path):
    srv = nginx_h2(log_format="$server_protocol $request_method $uri $http_x_one $http_x_two "
                              "$http_connection")
    run, doc = run_json(tmp_path, "--http2", "-t1", "-c2", "-m4", "-d1s", "-R", "500", "-U",
                        "-H", "X-One: 1", "-H", "x-two: two words", srv.url + "/o")
    assert run.report["requests"] > 0 and socket_errors(doc) == 0
    assert "Latency Distribution (HdrHistogram - Recorded Latency)" in run.stdout
    assert "Uncorrected Latency" in run.stdout
    assert doc["latency_uncorrected"]["count"] == doc["requests"]
    assert set(srv.log()) == {"HTTP/2.0 GET /o 1 two words -"}


def test_no_keepalive_over_http2(nginx_h2, tmp_path):
    srv = nginx_h2(log_format="$server_protocol $connection $connection_requests "
                              "$http_connection")
    run, doc = run_json(tmp_path, "--http2", "--no-keepalive", "-t1", "-c2", "-n", "50",
                        srv.url)
    assert run.report["requests"] == 50 and socket_errors(doc) == 0
    log = [line.split() for line in srv.log()]
    # one request per connection, and no Connection field (HTTP/2 has none)
    assert len(log) == 50 and len({c for _, c, _, _ in log}) == 50
    assert {(p, n, h) for p, _, n, h in log} == {("HTTP/2.0", "1", "-")}


def test_unix_socket_over_h2c(nginx, tmp_path):
    path = tmp_path / "h2.sock"
    srv = nginx(listen=False, log_format=H2_LOG,
                server=f'listen unix:{path} http2; location / {{ return 200 "x"; }}')
    deadline = time.monotonic() + 10
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    run = volley("--http2", "-t1", "-c2", "-m4", "-n", "300", "--unix-socket", path,
                 "http://localhost/u")
    assert run.returncode == 0 and run.report["requests"] == 300, run
    assert {tuple(line.split()[:3]) for line in srv.log()} == {("HTTP/2.0", "GET", "/u")}


def test_request_http2_cannot_carry_is_a_start_up_error(nginx_h2):
    srv = nginx_h2()
    run = volley("--http2", "-d1s", "-H", "Host: a@b", srv.url)
    assert run.returncode == 1
    assert run.stderr == "volley: the request cannot be sent over HTTP/2: Host 'a@b' has " \
                         "user information, which HTTP/2 forbids\n", run
    assert srv.log() == []


def test_request_headers_over_nghttp2s_limit_are_a_start_up_error(h2peer, tmp_path):
    # nghttp2 sends no header block over 64 KiB: the static request (here
    # with a 70 KiB field from wrk.headers) is refused before the run.
    script = tmp_path / "big.lua"
    script.write_text('wrk.headers["X-Big"] = string.rep("a", 70 * 1024)\n')
    srv = h2peer()
    run = volley("--http2", "-t1", "-c1", "-n", "3", "-s", script, srv.url)
    assert run.returncode == 1, run
    assert run.stdout == ""
    m = re.fullmatch(r"volley: the request cannot be sent over HTTP/2: its header fields take up "
                     r"to (\d+) bytes, over nghttp2's limit of 65536\n", run.stderr)
    assert m and 70 * 1024 < int(m.group(1)) < 72 * 1024, run
    assert srv.stats()["requests"] == 0


def test_request_hook_header_block_too_large_is_an_error_not_a_retry(h2peer, tmp_path):
    # A request() that returns one too large during the run: that request
    # is a write error, never sent; the others go on.
    script = tmp_path / "big.lua"
    script.write_text("""
        n = 0
        function request()
           n = n + 1
           if n % 2 == 0 then
              return wrk.format(nil, "/big", {["X-Big"] = string.rep("a", 70 * 1024)})
           end
           return wrk.format(nil, "/ok")
        end
    """)
    srv = h2peer()
    run, doc = run_json(tmp_path, "--http2", "-t1", "-c1", "-n", "10", "-s", script, srv.url,
                        timeout=30)
    assert doc["requests"] == 5 and socket_errors(doc) == 5, doc
    assert doc["errors"]["write"] == 5 and causes(doc) == {"request_too_large": 5}, doc
    stats = srv.stats()
    assert stats["requests"] == 5 and stats["paths"] == {"/ok": 5}, stats


# --------------------------------------------------------------------------
# nghttpd and Go's net/http
# --------------------------------------------------------------------------

@pytest.mark.parametrize("tls", [False, True], ids=["h2c", "tls"])
def test_nghttpd_serves_exactly_n(nghttpd, tls):
    srv = nghttpd(tls=tls, max_streams=4)
    run = volley("--http2", "-t1", "-c3", "-m8", "-n", "1000", srv.url + "/index.html")
    assert run.returncode == 0 and run.report["requests"] == 1000, run
    assert not run.report["socket_errors_line"] and run.report["non2xx"] == 0, run
    reqs = srv.requests()
    assert len(reqs) == 1000
    assert {(r["method"], r["path"]) for r in reqs} == {("GET", "/index.html")}
    assert len({r["conn"] for r in reqs}) == 3


def test_ttfb_over_http2_is_the_first_headers_frame(h2peer, tmp_path):
    """A peer that sends each response's HEADERS frame 50 ms before its DATA
    frame: the time to first byte is the HEADERS frame's, the latency the
    DATA frame's, 50 ms later, response by response."""
    peer = h2peer("slow-body", "--body-delay", "50")
    run, doc = run_json(tmp_path, "--http2", "-t1", "-c2", "-n6", "--latency", peer.url)
    lat, ttfb = doc["latency"], doc["ttfb"]
    assert doc["requests"] == 6 == lat["count"] == ttfb["count"] == peer.stats()["answered"]
    assert lat["min"] >= 45000
    assert lat["mean"] - ttfb["mean"] >= 45000
    assert "    TTFB  " in run.stdout


def test_go_h2c_counts_requests_bodies_and_streams(go_h2c, tmp_path):
    srv = go_h2c(max_streams=6)
    script = tmp_path / "post.lua"
    script.write_text('wrk.method = "POST"\nwrk.body = string.rep("b", 100000)\n')
    run, doc = run_json(tmp_path, "--http2", "-t2", "-c4", "-m16", "-n", "400", "-s", script,
                        srv.url + "/go?q")
    assert run.report["requests"] == 400 and socket_errors(doc) == 0, run
    stats = srv.stats()
    assert stats["requests"] == 400
    assert stats["protocols"] == {"HTTP/2.0": 400}
    assert stats["methods"] == {"POST": 400} and stats["paths"] == {"/go": 400}
    assert stats["body_bytes_in"] == 400 * 100000
    per_conn = [n for n in stats["streams_per_connection"] if n]
    assert len(per_conn) == 4 and sum(per_conn) == 400, stats
    assert 1 < stats["max_concurrent"] <= 6
    assert doc["http2"]["streams"] == 6


# --------------------------------------------------------------------------
# wrk's example scripts, unmodified, through nginx (HTTP/2) to volley-testd
# --------------------------------------------------------------------------

@pytest.fixture
def h2_front(nginx, testd):
    """Factory: volley-testd (started with its options) behind nginx speaking
    h2c; the server's log has every request as nginx passed it on."""
    def start(*options):
        upstream = testd(*options)
        front = nginx(http2=True, log_format=H2_LOG,
                      http=f"upstream testd {{ server 127.0.0.1:{upstream.port}; keepalive 8; }}",
                      server="location / { proxy_pass http://testd; proxy_http_version 1.1; "
                             "proxy_set_header Connection \"\"; "
                             "proxy_set_header Host $http_host; }")
        front.upstream = upstream
        return front
    return start


def wrk_script(name):
    path = os.path.join(WRK_SCRIPTS, name + ".lua")
    assert os.path.exists(path), f"{path} is missing (install Debian's wrk package)"
    return path




def test_wrk_post_over_http2(h2_front):
    front = h2_front()
    ok(volley("--http2", "-t1", "-c2", "-m4", "-d300ms", "-s", wrk_script("post"),
              front.url + "/form"))
    log = front.upstream.log()
    assert log
    for r in log:
        assert (r["method"], r["target"], r["body"]) == ("POST", "/form", "foo=bar&baz=quux")
        assert header(r, "Content-Type") == "application/x-www-form-urlencoded"
        assert header(r, "Content-Length") == "16"
    assert {line.split()[0] for line in front.log()} == {"HTTP/2.0"}


def test_wrk_auth_over_http2(h2_front):
    # auth.lua reads headers["X-Token"]: HTTP/2's names are lower case, and
    # the table answers either spelling.
    front = h2_front()
    ok(volley("--http2", "-t2", "-c4", "-m2", "-d500ms", "-s", wrk_script("auth"), front.url))
    # two threads, eight streams in flight
    check_auth_log(front.upstream.log(), logins_at_most=8, resources_over=50)


def test_wrk_counter_over_http2(h2_front):
    front = h2_front()
    run = ok(volley("--http2", "-t1", "-c1", "-m4", "-d300ms", "-s", wrk_script("counter"),
                    front.url))
    log = front.upstream.log()
    numbers = sorted(int(r["target"][1:]) for r in log)
    # request() ran once before the run to check it: /1 is the first sent;
    # none twice, none missing but among the last four (nginx may drop the
    # streams in flight when volley closes)
    assert numbers[0] == 1 and len(set(numbers)) == len(numbers), numbers[:10]
    assert numbers[-1] - len(numbers) <= 4, numbers[-10:]
    assert all(header(r, "X-Counter") == r["target"][1:] for r in log)
    assert len(log) - 4 <= run.report["requests"] <= len(log)


def test_wrk_pipeline_over_http2_is_concurrent_streams(h2_front):
    front = h2_front()
    ok(volley("--http2", "-t1", "-c2", "-m6", "-d300ms", "-s", wrk_script("pipeline"), front.url))
    counts = {}
    for r in front.upstream.log():
        counts[r["target"]] = counts.get(r["target"], 0) + 1
    assert set(counts) == {"/?foo", "/?bar", "/?baz"}, counts
    assert max(counts.values()) - min(counts.values()) <= 2 * 6, counts
    # the three requests of a batch are streams of one connection
    log = h2_log(front)
    assert {(p, u) for p, _, u, _ in log} <= {("HTTP/2.0", "/?foo"), ("HTTP/2.0", "/?bar"),
                                               ("HTTP/2.0", "/?baz")}
    assert len({c for *_, c in log}) == 2


def check_report_script(run):
    """wrk's report.lua, -m2 against a server 2 ms a response: its lines
    after the report, a rule and the 4 latency figures, each >= 2 ms."""
    lines = run.stdout.split("Transfer/sec:")[1].splitlines()[1:]
    lines = [line for line in lines if not line.startswith(("Warning: ", "Note: "))]
    assert lines[0] == "-" * 30
    values = [int(line.split(",")[1]) for line in lines[1:]]
    assert len(values) == 4 and values == sorted(values) and values[0] >= 2000, lines


def check_setup_script(run):
    """wrk's setup.lua at -t2 -c3 -m3: a line per thread whose responses add
    up to the report's; returns the requests request() made."""
    done = [line for line in run.stdout.split("Transfer/sec:")[1].splitlines()[1:]
            if line.startswith("thread ")]
    made = got = 0
    for i, line in enumerate(done, 1):
        m = re.fullmatch(r"thread (\d+) made (\d+) requests and got (\d+) responses", line)
        assert m and int(m.group(1)) == i, line
        requests, responses = int(m.group(2)), int(m.group(3))
        # in flight at the end: up to 3 streams on each of 2 (or 1)
        # connections, plus the check before the run
        assert 0 <= requests - responses <= (7 if i == 1 else 4), line
        made, got = made + requests, got + responses
    assert len(done) == 2 and got == run.report["requests"]
    return made


def test_wrk_report_over_http2(h2_front):
    front = h2_front("--delay", 2)
    run = ok(volley("--http2", "-t1", "-c2", "-m2", "-d500ms", "--latency", "-s",
                    wrk_script("report"), front.url))
    check_report_script(run)


def test_wrk_setup_over_http2(h2_front):
    front = h2_front()
    run = ok(volley("--http2", "-t2", "-c3", "-m3", "-d500ms", "-s", wrk_script("setup"),
                    front.url))
    made = check_setup_script(run)
    # everything request() made was sent, except the check before the run;
    # nginx may drop what was in flight when volley closed (3 x 3 streams)
    assert made - 1 - 9 <= front.upstream.stop()["requests"] <= made - 1


def test_wrk_stop_over_http2(h2_front):
    front = h2_front()
    run = ok(volley("--http2", "-t2", "-c4", "-m4", "-d20s", "-s", wrk_script("stop"), front.url))
    assert run.report["requests"] == 200, run
    assert run.elapsed < 5, run
    assert 200 <= front.upstream.stop()["responses"] <= 200 + 4 * 4


def test_response_headers_are_lower_case_and_found_either_way(h2_front, tmp_path):
    script = tmp_path / "h.lua"
    script.write_text("""
        function response(status, headers, body)
           if seen then return end
           seen = true
           local names = {}
           for name in pairs(headers) do names[#names + 1] = name end
           table.sort(names)
           print(status, table.concat(names, ","), headers["Content-Type"],
                 headers["content-type"], headers["CONTENT-LENGTH"], body)
           wrk.thread:stop()
        end
    """)
    front = h2_front()
    run = ok(volley("--http2", "-t1", "-c1", "-d2s", "-s", script, front.url))
    first = printed(run.stdout)[0]
    fields = first.split("\t")
    assert fields[0] == "200"
    assert "content-type" in fields[1].split(",") and fields[1] == fields[1].lower()
    assert fields[2:] == ["text/plain", "text/plain", "12", "Hello world"], fields


# --------------------------------------------------------------------------
# The hostile peer: every case ends in time, counted under its cause
# --------------------------------------------------------------------------

HOSTILE = [
    # mode, peer options, volley options, the causes that may be counted
    ("goaway", ["--after", "25"], ["-n", "300"], set()),
    ("goaway", ["--after", "25", "--code", "INTERNAL_ERROR"], ["-d1s"], {"goaway"}),
    ("rst", ["--every", "2", "--code", "REFUSED_STREAM"], ["-n", "300"], set()),
    ("rst", ["--code", "CANCEL"], ["-d1s"], {"stream_reset"}),
    ("zero-window", [], ["-d1s", "-s", "BIG_POST"], {"flow_control"}),
    ("max-streams-0", [], ["-d1s"], {"stream_limit"}),
    ("no-settings-ack", [], ["-d1s"], {"settings_timeout"}),
    ("ping-flood", [], ["-d1s"], {"http2_flood"}),
    ("continuation-flood", ["--count", "1000"], ["-d1s"], {"http2_flood"}),
    ("garbage", [], ["-d1s"], {"http2_protocol"}),
    # Every request refused, every connection drained at once: a few
    # resends with back-off, then errors.
    ("rst", ["--code", "REFUSED_STREAM"], ["-d1s"], {"refused_stream"}),
    ("goaway-at-start", [], ["-d1s"], {"refused_stream"}),
    ("hpack-bomb", ["--count", "30000"], ["-d1s"], {"header_too_large"}),
    ("malformed", ["--kind", "cl-more"], ["-d1s"], {"truncated"}),
]


@pytest.mark.parametrize("mode,peer_options,options,allowed", HOSTILE,
                         ids=[f"{h[0]}{'-' + h[1][-1] if h[1] and h[0] != 'continuation-flood' else ''}"
                              f"{'-' + h[2][0] if h[0] == 'rst' else ''}" for h in HOSTILE])
def test_hostile_http2_peer(h2peer, tmp_path, mode, peer_options, options, allowed):
    srv = h2peer(mode, *peer_options)
    script = tmp_path / "big.lua"
    script.write_text('wrk.method = "POST"\nwrk.body = string.rep("x", 100000)\n')
    options = [str(script) if o == "BIG_POST" else o for o in options]
    # -R bounds the work of the peer (Python), whatever it answers.
    run, doc = run_json(tmp_path, "--http2", "-t1", "-c2", "-m4", "-R", "2000",
                        "--timeout", "500ms", *options, srv.url + "/h", timeout=30)
    stats = srv.stats()
    # -d1s and --timeout 500ms: a run never takes much longer than both
    assert run.elapsed < 4, run
    found = causes(doc)
    # The peer is Python: on a loaded machine, or flooding from many
    # connections at once, it can fall behind in acknowledging volley's
    # SETTINGS or in answering, which is counted as such.
    late = ({"settings_timeout", "response_timeout"} - allowed) if "-d1s" in options else set()
    assert set(found) <= allowed | late, (found, run)
    n = doc["requests"]
    assert n <= stats["answered"], (n, stats)
    if "-n" in options:
        # Exact: every request the server did not process was sent again.
        assert n == 300 and found == {}, doc
        assert stats["answered"] == 300, stats
    if mode == "goaway":
        # one on each connection may still be on its way when a timed run ends
        sent = stats["goaway_sent"]
        assert sent > 1 and sent - 2 <= doc["http2"]["goaway_received"] <= sent, (doc, stats)
    if mode == "rst":
        code = peer_options[-1]
        # a reset still on its way when the run ended is not counted
        got = doc["http2"]["rst_stream_received"][code]
        if code == "REFUSED_STREAM":
            assert doc["http2"]["refused"] == got, (doc, stats)
        assert stats["rst_sent"][code] - 2 * 4 <= got <= stats["rst_sent"][code], (doc, stats)
    if mode in ("zero-window", "max-streams-0", "no-settings-ack", "continuation-flood",
                "garbage", "goaway", "rst", "goaway-at-start", "hpack-bomb", "malformed") \
            and allowed:
        assert set(found) - late == allowed, (found, run)
    if "refused_stream" in allowed:
        # Resends back off: a few dozen requests a second, not thousands.
        assert stats["requests"] < 150, stats
        assert "Note: HTTP/2: " in run.stderr and "refused too often (read errors)" in run.stderr
    if mode == "ping-flood":
        # Either volley kept up (every PING answered) or it counted the flood.
        assert found or stats["ping_acks_received"] > 0, (found, stats)
        assert n > 0
    if mode == "no-settings-ack":
        assert n > 0  # answered meanwhile
    if mode in ("zero-window", "max-streams-0", "continuation-flood", "garbage", "goaway-at-start",
                "hpack-bomb", "malformed") or "refused_stream" in allowed:
        assert n == 0


# --------------------------------------------------------------------------
# -m over HTTP/1.1: the pipeline depth of the static request
# --------------------------------------------------------------------------

def test_m_pipelines_the_static_request_over_http11(testd):
    srv = testd()
    run = volley("-t1", "-c2", "-m5", "-n", "1000", srv.url + "/p")
    assert run.returncode == 0 and run.report["requests"] == 1000, run
    stats = srv.stop()
    assert stats["requests"] == 1000
    assert stats["max_requests_per_read"] == 5
    assert max_open_is(stats, 2)


@pytest.mark.parametrize("when", ["start", "run"])
def test_m_with_a_request_hook_over_http11_is_an_error(testd, tmp_path, when):
    script = tmp_path / "r.lua"
    define = "function request() return wrk.format() end\n"
    # defined at the start, or by response() during the run
    script.write_text(define if when == "start" else
                      f"function response(status)\n{define}end\n")
    run = volley("-t1", "-c1", "-m4", "-d2s", "-s", script, testd().url)
    assert run.returncode == 1
    assert run.stderr == "volley: -m/--streams pipelines the static request over HTTP/1.1; " \
                         "a script's request() pipelines by returning several requests at once\n"


def test_request_hook_http2_cannot_carry_stops_volley(nginx_h2, tmp_path):
    script = tmp_path / "r.lua"
    script.write_text("""
        n = 0
        function request()
           n = n + 1
           if n < 3 then return wrk.format(nil, "/ok") end
           return wrk.format("CONNECT", "/tunnel")
        end
    """)
    run = volley("--http2", "-t1", "-c1", "-d2s", "-s", script, nginx_h2().url)
    assert run.returncode == 1, run
    assert run.stderr == "volley: request() returned a request HTTP/2 cannot carry: CONNECT " \
                         "opens a tunnel; volley cannot send it over HTTP/2\n", run


def test_shards_of_an_http2_run_merge(nginx_h2, tmp_path):
    from test_multi import merge, one_line_error, shards
    srv = nginx_h2(max_streams=4)
    docs, files = shards(2, ["--http2", "-t1", "-c2", "-m8", "-n", "2000"], srv.url, tmp_path)
    out = tmp_path / "merged.json"
    run = merge("--json", out, *files)
    with open(out) as f:
        whole = json.load(f)
    assert whole["requests"] == 2000 == len(srv.log())
    assert run.stdout.startswith(f"Running 2000 requests test @ {srv.url} over HTTP/2\n"), run
    assert whole["options"]["protocol"] == "HTTP/2" and whole["options"]["streams"] == 8
    assert whole["http2"]["streams"] == 4
    assert whole["http2"]["refused"] == sum(d["http2"]["refused"] for d in docs)
    assert "-m 8 ran as -m 4" in run.stdout + run.stderr
    # the same shard over HTTP/1.1 is not a part of it
    h1 = dict(docs[1], http2=None, options=dict(docs[1]["options"], protocol="HTTP/1.1"))
    other = tmp_path / "h1.json"
    other.write_text(json.dumps(h1))
    one_line_error(volley("merge", files[0], other),
                   f"{files[0]} over HTTP/2 and {other} over HTTP/1.1 cannot be one run")


# --------------------------------------------------------------------------
# What the hostile peer's responses count as, exactly, with -n
# --------------------------------------------------------------------------

HOOK = "function response(status, headers, body) end\n"


@pytest.mark.parametrize("kind,cause", [
    ("cl-more", "truncated"),
    ("cl-less", "unexpected_data"),
    ("body-204", "unexpected_data"),
    ("pseudo-after-regular", "http2_protocol"),
    ("uppercase-name", "http2_protocol"),
    ("connection-field", "http2_protocol"),
    ("te", "http2_protocol"),
    ("status-101", "http2_protocol"),
    ("trailers-pseudo", "http2_protocol"),
    ("interim-data", "http2_protocol"),
])
@pytest.mark.parametrize("hook", [False, True], ids=["plain", "hook"])
def test_malformed_responses_are_errors_whatever_the_script(h2peer, tmp_path, kind, cause, hook):
    # RFC 9113 §8.1.1, as h2load and curl read it: each request answered
    # with a malformed response is one error under its cause, and counts
    # the same whether or not response() takes the headers and the body.
    srv = h2peer("malformed", "--kind", kind)
    args = ["--http2", "-t1", "-c2", "-m4", "-n", "50", "--timeout", "5s"]
    if hook:
        script = tmp_path / "hook.lua"
        script.write_text(HOOK)
        args += ["-s", script]
    run, doc = run_json(tmp_path, *args, srv.url, timeout=30)
    assert doc["requests"] == 0 and doc["status_codes"] == {}, doc
    assert doc["errors"]["read"] == 50 and causes(doc) == {cause: 50}, doc
    assert doc["success"] == {"ok": 0, "attempts": 50, "percent": 0}
    stats = srv.stats()
    assert stats["requests"] == stats["answered"] == 50, stats


@pytest.mark.parametrize("hook", [False, True], ids=["plain", "hook"])
def test_hpack_bomb_costs_no_more_than_the_head_limit(h2peer, tmp_path, hook):
    # Each response's header block is 100 KB on the wire and decodes to
    # 400 MB (a 4000-byte field, referred to 100,000 times); eight are held
    # open at once. Past the 80 KiB head limit, volley stops looking.
    srv = h2peer("hpack-bomb", "--hold", "8")
    rss_file = tmp_path / "rss"
    args = ["--http2", "-t1", "-c1", "-m8", "-n", "8", "--timeout", "30s",
            "--json", tmp_path / "r.json"]
    if hook:
        script = tmp_path / "hook.lua"
        script.write_text(HOOK)
        args += ["-s", script]
    proc = subprocess.run(["/usr/bin/time", "-f", "%M", "-o", rss_file, VOLLEY, *args, srv.url],
                          capture_output=True, text=True, timeout=60)
    check_sanitizer("volley", proc.stderr)
    assert proc.returncode == 0, proc
    with open(tmp_path / "r.json") as f:
        doc = json.load(f)
    assert doc["requests"] == 0 and causes(doc) == {"header_too_large": 8}, doc
    stats = srv.stats()
    assert stats["requests"] == 8 and stats["frames_received"]["RST_STREAM"] == 8, stats
    # Without the limit this was gigabytes (a response() that takes headers
    # kept every field); with it, a few MB (16 in the sanitizer build).
    peak_kb = int(rss_file.read_text().split()[-1])
    assert peak_kb < 100 * 1024, peak_kb


def test_body_given_to_response_is_capped_at_64_mib(h2peer, tmp_path):
    script = tmp_path / "body.lua"
    script.write_text("function response(status, headers, body) print(status, #body) end\n")
    size = (64 << 20) + 1024
    srv = h2peer("big-body", "--body-size", size)
    run, doc = run_json(tmp_path, "--http2", "-t1", "-c1", "-n", "1", "--timeout", "30s",
                        "-s", script, srv.url, timeout=60)
    assert printed(run.stdout)[0] == f"200\t{64 << 20}", run
    assert doc["requests"] == 1 and doc["bytes"] > size and socket_errors(doc) == 0, doc
    assert srv.stats()["answered"] == 1


@pytest.mark.parametrize("mode,peer_options", [
    ("rst", ["--code", "REFUSED_STREAM"]),
    ("goaway-at-start", []),
], ids=["refuse-all", "goaway-at-start"])
def test_n_ends_when_every_request_is_refused(h2peer, tmp_path, mode, peer_options):
    # A server that refuses every request, or drains every connection at
    # once: each request goes a few times, with back-off, then is an error,
    # so -n ends with N outcomes, as h2load's "20 failed, 20 errored".
    srv = h2peer(mode, *peer_options)
    run, doc = run_json(tmp_path, "--http2", "-t1", "-c2", "-n", "20", srv.url, timeout=30)
    assert run.elapsed < 10, run
    assert doc["requests"] == 0 and doc["errors"]["read"] == 20, doc
    assert causes(doc) == {"refused_stream": 20}, doc
    assert run.report["errors"]["read"] == 20, run
    refused = doc["http2"]["refused"]
    # each request refused no more than 3 times in a row, per connection
    assert 20 <= refused <= 20 + 2 * 3, doc
    stats = srv.stats()
    if mode == "rst":
        # what volley sent is what the server saw, and refused
        assert stats["requests"] == refused == stats["rst_sent"]["REFUSED_STREAM"], stats
    else:
        # a request on its way when the GOAWAY came reached the server; one
        # not yet sent never went
        assert stats["requests"] <= refused and doc["http2"]["goaway_received"] >= 1, stats
    assert "Note: HTTP/2: " in run.stderr and \
        f"{refused} requests were refused unprocessed: {refused - 20} sent again, 20 refused " \
        f"too often (read errors)\n" in run.stderr, run
