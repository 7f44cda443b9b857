"""The core engine against real servers on 127.0.0.1 (volley-testd and nginx):
what the server counted against what the report says, connections, headers,
error classes, latency figures, HTTP framing cases, the end of the run and the
report's layout next to Debian's wrk.
SPDX-License-Identifier: MIT
"""
import json
import re
import resource
import shutil
import signal
import subprocess
import time

import pytest

from conftest import VOLLEY, TESTD, Run, max_open_is, parse_report, volley


def check_counts(run, stats, conns):
    """volley's completed requests never exceed what the server answered and
    fall short by at most the requests in flight at the end (one per connection)."""
    n = run.report["requests"]
    assert n <= stats["responses"] <= n + conns, (run, stats)
    assert n <= stats["requests"] <= n + conns, (run, stats)


def no_errors(run):
    assert run.returncode == 0, run
    assert not run.report["socket_errors_line"], run
    assert run.report["non2xx"] == 0, run


def served_by_nginx(run, srv, conns):
    """served() for nginx: its access log has a line per request answered;
    returns the log."""
    no_errors(run)
    log = srv.log()
    n = run.report["requests"]
    assert n > 0 and n <= len(log) <= n + conns, (run, len(log))
    return log


def served(run, srv, conns):
    """A run that must have gone well: exit 0, no errors, counts that agree."""
    no_errors(run)
    stats = srv.stop()
    assert run.report["requests"] > 0, run
    check_counts(run, stats, conns)
    return stats


# --------------------------------------------------------------------------
# Counts and connections
# --------------------------------------------------------------------------

def test_counts_agree_with_the_server(testd):
    srv = testd("--body-size", 1000)
    run = volley("-t2", "-c8", "-d1s", srv.url + "/")
    stats = served(run, srv, 8)
    assert stats["status"] == {"200": stats["responses"]}
    # bytes read: the responses the report counted (the report rounds to 2 decimals)
    per_response = stats["bytes_out"] / stats["responses"]
    assert abs(run.report["bytes"] - run.report["requests"] * per_response) \
        <= 0.01 * run.report["bytes"] + 8 * per_response, (run, stats)


def test_connections_are_exact_and_kept_alive(testd):
    srv = testd()
    run = volley("-t3", "-c10", "-d1s", srv.url)
    stats = served(run, srv, 10)
    assert run.report["threads"] == 3 and run.report["connections"] == 10
    # the start-up probe, then exactly 10 keep-alive connections, never reopened
    assert stats["connections"] == 11, stats
    assert max_open_is(stats, 10), stats
    assert stats["closed_by_server"] == 0, stats
    conns = {r["conn"] for r in srv.log()}
    assert len(conns) == 10, conns


def test_counts_agree_with_nginx(nginx):
    srv = nginx(server='location / { return 200 "hello from nginx\\n"; }',
                log_format="$connection $status $request")
    log = served_by_nginx(volley("-t2", "-c6", "-d1s", srv.url + "/n"), srv, 6)
    assert all(line.endswith(" 200 GET /n HTTP/1.1") for line in log)
    # keep-alive: the 6 connections carried everything (the probe sent nothing)
    assert len({line.split()[0] for line in log}) == 6


def test_nginx_closing_every_connection_is_not_an_error(nginx):
    srv = nginx(server='location / { return 200 "x"; }', http="keepalive_timeout 0;",
                log_format="$connection")
    log = served_by_nginx(volley("-t1", "-c4", "-d1s", srv.url), srv, 4)
    assert len(set(log)) == len(log)  # one request per connection


def test_nginx_keepalive_requests_limit_is_not_an_error(nginx):
    srv = nginx(server='keepalive_requests 50; location / { return 200 "x"; }',
                log_format="$connection")
    log = served_by_nginx(volley("-t1", "-c4", "-d1s", srv.url), srv, 4)
    per_conn = {}
    for c in log:
        per_conn[c] = per_conn.get(c, 0) + 1
    assert max(per_conn.values()) == 50
    assert len(per_conn) >= len(log) // 50


# --------------------------------------------------------------------------
# What is sent: request line, Host, -H
# --------------------------------------------------------------------------

def test_request_line_and_default_host(testd):
    srv = testd()
    run = volley("-t1", "-c1", "-d300ms", srv.url + "/p/a?q=1&r=2#frag")
    no_errors(run)
    log = srv.log()
    assert log
    for r in log:
        # the fragment stays here (RFC 9110 §4.2.4); wrk would send it
        assert (r["method"], r["target"], r["version"]) == ("GET", "/p/a?q=1&r=2", "HTTP/1.1")
        # wrk adds nothing but Host (with the port, since the URL had one)
        assert r["headers"] == [["Host", f"127.0.0.1:{srv.port}"]], r


def test_headers_reach_the_server_in_order(testd):
    srv = testd()
    run = volley("-t1", "-c2", "-d300ms",
                 "-H", "X-First: 1", "-H", "X-Second:two", "-H", "X-Spaces:   a  b",
                 "-H", "User-Agent: foo: bar", "-H", "Content-Length: 5", srv.url + "/h")
    no_errors(run)
    log = srv.log()
    assert log
    for r in log:
        assert r["headers"] == [["Host", f"127.0.0.1:{srv.port}"], ["X-First", "1"],
                                ["X-Second", "two"], ["X-Spaces", "a  b"],
                                ["User-Agent", "foo: bar"]], r
        assert r["body"] == ""


def test_host_header_given_in_any_case_replaces_the_default(testd):
    srv = testd()
    run = volley("-t1", "-c1", "-d300ms", "-H", "host: example.test", "-H", "X-A: 1", srv.url)
    no_errors(run)
    for r in srv.log():
        assert r["headers"] == [["host", "example.test"], ["X-A", "1"]], r


class Netns:
    """Commands run in a private network namespace with its own loopback, so
    a server can listen on port 80 without disturbing anything else. Where
    namespaces are not allowed, the commands run as they are (port 80 must
    then be free)."""

    UP = ("import fcntl, os, socket, struct\n"
          "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
          "fcntl.ioctl(s, 0x8914, struct.pack('16sH', b'lo', 0x1 | 0x8 | 0x40))\n"
          "os.write(1, b'up\\n')\n"
          "os.execvp('sleep', ['sleep', '120'])\n")

    def __init__(self):
        self.prefix = []
        self.proc = None
        unshare = shutil.which("unshare")
        if not unshare:
            return
        proc = subprocess.Popen([unshare, "--net", "python3", "-c", self.UP],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        if proc.stdout.readline() == b"up\n":
            self.proc = proc
            self.prefix = ["nsenter", "-t", str(proc.pid), "-n"]
        else:
            proc.wait()

    def close(self):
        if self.proc:
            self.proc.kill()
            self.proc.wait()


def test_host_header_without_port_when_the_url_has_none(tmp_path):
    ns = Netns()
    log = tmp_path / "log.json"
    srv = subprocess.Popen(ns.prefix + [TESTD, "--listen", "127.0.0.1:80", "--log", str(log),
                                        "--max-time", "30"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = srv.stdout.readline()
        assert line == "port 80\n", srv.stderr.read()
        start = time.monotonic()
        proc = subprocess.run(ns.prefix + [VOLLEY, "-t1", "-c1", "-d300ms",
                                           "http://127.0.0.1/x"],
                              capture_output=True, text=True, timeout=30)
        run = Run(proc, time.monotonic() - start)
        no_errors(run)
        assert run.report["url"] == "http://127.0.0.1/x"
    finally:
        srv.send_signal(signal.SIGTERM)
        srv.wait(timeout=10)
        ns.close()
    requests = [json.loads(line) for line in log.read_text().splitlines()]
    assert requests
    assert all(r["headers"] == [["Host", "127.0.0.1"]] for r in requests), requests[0]


def test_ipv6_literal(testd):
    srv = testd(listen="[::1]:0")
    assert srv.url.startswith("http://[::1]:")
    run = volley("-t2", "-c4", "-d500ms", srv.url + "/six")
    stats = served(run, srv, 4)
    assert max_open_is(stats, 4), stats
    assert len({r["conn"] for r in srv.log()}) == 4
    for r in srv.log():
        assert r["target"] == "/six"
        assert r["headers"] == [["Host", f"[::1]:{srv.port}"]], r


# --------------------------------------------------------------------------
# Error classes
# --------------------------------------------------------------------------

@pytest.mark.parametrize("code,counted", [(399, False), (400, True), (500, True)])
def test_status_errors_count_status_above_399(testd, code, counted):
    srv = testd("--status", code)
    run = volley("-t1", "-c2", "-d500ms", srv.url)
    assert run.returncode == 0, run
    assert not run.report["socket_errors_line"], run
    stats = srv.stop()
    check_counts(run, stats, 2)
    assert stats["status"] == {str(code): stats["responses"]}
    assert run.report["non2xx"] == (run.report["requests"] if counted else 0), run
    assert ("Non-2xx or 3xx responses" in run.stdout) == counted


def test_status_errors_every_nth(testd):
    srv = testd("--status-every", "5:503")
    run = volley("-t2", "-c4", "-d500ms", srv.url)
    assert run.returncode == 0, run
    stats = srv.stop()
    check_counts(run, stats, 4)
    errors = stats["status"]["503"]
    assert errors == stats["responses"] // 5
    assert errors - 4 <= run.report["non2xx"] <= errors, (run, stats)


@pytest.mark.parametrize("kind", ["reset", "garbage", "short-body", "huge-header",
                                  "bad-chunk"])
def test_broken_responses_are_read_errors(testd, kind):
    srv = testd("--hostile", kind)
    run = volley("-t1", "-c2", "-d500ms", srv.url)
    assert run.returncode == 0, run
    stats = srv.stop()
    e = run.report["errors"]
    assert run.report["requests"] == 0, run
    assert e["read"] > 0 and e["connect"] == 0 and e["timeout"] == 0, run
    # one error per broken answer, then the connection is reopened: the server
    # saw the probe plus one connection per error (and the last ones in flight)
    broken = e["read"] + e["write"]
    assert broken <= stats["connections"] - 1 <= broken + 2, (run, stats)


def test_a_run_without_responses_keeps_wrks_nan_only_in_wrks_rows(testd, tmp_path):
    # wrk prints -nan% in the +/- Stdev column of a row without samples, and
    # parsers of its report meet it there; everything volley adds says
    # nothing was measured in its own way (null, an empty field).
    srv = testd("--never")
    out, csv = tmp_path / "r.json", tmp_path / "t.csv"
    run = volley("-t1", "-c2", "-d1s", "-R", "10", "-U", "--latency", "--timeout", "300ms",
                 "--json", out, "--timeline", csv, "--threshold", "p99 < 1s", srv.url)
    assert run.returncode == 2 and run.report["requests"] == 0, run
    rows = [l for l in run.stdout.splitlines() if "nan" in l]
    assert rows == ["    Latency     0.00us    0.00us   0.00us    -nan%",
                    "    Req/Sec     0.00      0.00     0.00      -nan%"], run
    # volley's own row of the table leaves the field empty
    assert "    TTFB        0.00us    0.00us   0.00us" in run.stdout.splitlines(), run
    assert "Threshold p99 < 1s: FAILED (p99 >= 300.00ms: requests timed out)" in run.stdout
    assert "nan" not in run.stderr.lower() and "nan" not in csv.read_text().lower()

    def refuse(constant):
        raise AssertionError(f"{constant} in the JSON document")
    doc = json.loads(out.read_text(), parse_constant=refuse)
    assert doc["latency"]["within_stdev"] is None and doc["latency"]["count"] == 0
    srv.stop()


def test_never_answered_requests_time_out_and_the_run_ends_on_time(testd):
    srv = testd("--never")
    run = volley("-t1", "-c3", "-d2s", "--timeout", "1s", srv.url)
    assert run.returncode == 0, run
    assert run.elapsed < 3.5, run
    r = run.report
    assert r["requests"] == 0 and r["bytes"] == 0
    # each connection times out once after 1 s, is reopened and its second
    # request is cut short by the end of the run (or just times out too)
    assert 3 <= r["errors"]["timeout"] <= 6, run
    assert r["errors"]["read"] == r["errors"]["write"] == r["errors"]["connect"] == 0
    assert re.search(r"^    Latency\s+0\.00us\s+0\.00us\s+0\.00us\s+-nan%$", run.stdout, re.M)
    stats = srv.stop()
    # a timeout closes the connection and opens a new one; on a busy machine
    # the last reopened connections may end before the server read from them
    t = r["errors"]["timeout"]
    assert 1 + t <= stats["connections"] <= 1 + 3 + t, (run, stats)
    assert t <= stats["requests"] <= 3 + t, (run, stats)


def test_late_responses_time_out(testd):
    srv = testd("--delay", 1500)
    run = volley("-t1", "-c2", "-d2s", "--timeout", "1s", srv.url)
    assert run.returncode == 0, run
    assert run.report["requests"] == 0
    assert 2 <= run.report["errors"]["timeout"] <= 4, run


def test_dead_target_costs_no_cpu(testd):
    srv = testd("--hostile", "die-after:200")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    run = volley("-t1", "-c4", "-d2s", srv.url)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert run.returncode == 0, run
    assert run.report["requests"] > 0
    e = run.report["errors"]
    # connections refused after the server died: counted as connect errors,
    # retried with a back-off (1 ms doubling), not in a hot loop
    assert 4 <= e["connect"] <= 4 * 15, run
    assert e["write"] == 0, run
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    assert cpu < 1.0, cpu


# --------------------------------------------------------------------------
# Latency figures
# --------------------------------------------------------------------------

def test_fixed_delay_gives_p50_near_20ms_and_littles_law(testd):
    srv = testd("--delay", 20)
    run = volley("-t2", "-c10", "-d2s", "--latency", srv.url)
    served(run, srv, 10)
    r = run.report
    p50 = r["percentiles"][50] / 1000
    assert 20.0 <= p50 <= 22.0, run
    # The mean moves with the few responses a busy machine holds back for
    # tens of milliseconds; the median is the figure that sits at the delay.
    assert 20000 <= r["latency_avg"] <= 26000, run
    assert all(20000 <= v for v in r["percentiles"].values()), run
    # Little's law: connections = throughput x mean latency (a busy machine
    # holding volley off a CPU between a response and the next request
    # lowers it a little)
    ratio = r["rps"] * r["latency_avg"] / 1e6 / 10
    assert 0.92 <= ratio <= 1.02, (ratio, run)


def test_littles_law_against_a_fast_server(testd):
    srv = testd()
    run = volley("-t1", "-c8", "-d1s", srv.url)
    served(run, srv, 8)
    r = run.report
    ratio = r["rps"] * r["latency_avg"] / 1e6 / 8
    # the time between a response and the next request is outside every latency
    # sample, so it shows here: volley writes the next request at once (wrk's
    # ratio is about 0.9; a busy machine can take volley's a little below 0.95)
    assert 0.92 <= ratio <= 1.02, (ratio, run)


# --------------------------------------------------------------------------
# Response framing against a real server
# --------------------------------------------------------------------------

@pytest.mark.parametrize("options", [
    ["--chunked"],
    ["--chunked", "--chunk-size", "1", "--body-size", "100"],
    ["--body-size", "300k"],
    ["--body-size", "0"],
    ["--status", "204"],
    ["--status", "304"],
    ["--http10-keepalive"],
])
def test_keep_alive_framings(testd, options):
    srv = testd(*options)
    run = volley("-t1", "-c3", "-d500ms", srv.url)
    stats = served(run, srv, 3)
    assert stats["connections"] == 1 + 3, stats  # nothing reopened


@pytest.mark.parametrize("options", [
    ["--close-delimited"],
    ["--connection-close"],
    ["--http10"],
])
def test_responses_that_end_the_connection_are_not_errors(testd, options):
    srv = testd(*options)
    run = volley("-t1", "-c3", "-d500ms", srv.url)
    stats = served(run, srv, 3)
    # one connection per request, plus the probe
    n = run.report["requests"]
    assert n + 1 <= stats["connections"] <= n + 1 + 3, (run, stats)


def test_close_after_n_responses(testd):
    srv = testd("--close-after", 4)
    run = volley("-t1", "-c2", "-d500ms", srv.url)
    stats = served(run, srv, 2)
    assert abs((stats["connections"] - 1) - stats["responses"] / 4) <= 2, stats


def test_interim_responses_are_skipped(testd):
    srv = testd("--interim")
    run = volley("-t1", "-c2", "-d500ms", srv.url)
    stats = served(run, srv, 2)
    assert stats["interim_responses"] == 2 * stats["requests"]
    assert stats["connections"] == 3


def test_http10_requests(testd, tmp_path):
    # an HTTP/1.0 request without keep-alive: the server answers and closes
    script = tmp_path / "http10.lua"
    script.write_text('function request() return "GET /old HTTP/1.0\\r\\n\\r\\n" end\n')
    srv = testd()
    run = volley("-t1", "-c2", "-d500ms", "-s", script, srv.url)
    stats = served(run, srv, 2)
    n = run.report["requests"]
    assert n + 1 <= stats["connections"] <= n + 1 + 2, (run, stats)
    assert {r["version"] for r in srv.log()} == {"HTTP/1.0"}


def test_100_continue_before_the_response(testd, tmp_path):
    script = tmp_path / "expect.lua"
    script.write_text('wrk.method = "POST"\nwrk.body = "abc"\n'
                      'wrk.headers["Expect"] = "100-continue"\n')
    srv = testd()
    run = volley("-t1", "-c2", "-d500ms", "-s", script, srv.url)
    stats = served(run, srv, 2)
    assert stats["interim_responses"] == stats["requests"] > 0
    assert stats["connections"] == 3


def test_server_closing_idle_connections_is_not_an_error(testd, tmp_path):
    # delay() leaves every connection idle for 250 ms before each request, and
    # the server closes connections idle for 50 ms (a wide margin: a server
    # starved of CPU for longer than the gap would close a connection the
    # request had just gone out on, a race no client can avoid): the
    # connection is reopened when the pause ends, and the request goes out
    # on the new one
    script = tmp_path / "pause.lua"
    script.write_text("function delay() return 250 end\n")
    srv = testd("--idle-close", 50)
    run = volley("-t1", "-c2", "-d1s", "-s", script, srv.url)
    stats = served(run, srv, 2)
    assert stats["idle_closed"] >= run.report["requests"] - 2, stats


# --------------------------------------------------------------------------
# How the run ends
# --------------------------------------------------------------------------

def test_duration_bounds_the_run(testd):
    srv = testd()
    run = volley("-t2", "-c4", "-d1s", srv.url)
    served(run, srv, 4)
    assert 1.0 <= run.elapsed < 1.8, run
    assert 1.0e6 <= run.report["runtime_us"] < 1.2e6, run
    assert run.report["duration"] == "1s"


def test_ctrl_c_prints_the_full_report_and_exits_0(testd):
    srv = testd()
    proc = subprocess.Popen([VOLLEY, "-t2", "-c4", "-d30s", "--latency", srv.url],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    start = time.monotonic()
    assert proc.stdout.readline().startswith("Running 30s test @ ")
    time.sleep(0.7)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=10)
    elapsed = time.monotonic() - start
    assert proc.returncode == 0, err
    assert elapsed < 3, elapsed
    report = parse_report(out)
    assert "Latency Distribution" in out and "Transfer/sec:" in out, out
    assert 0.6e6 <= report["runtime_us"] <= 2.5e6, out
    assert report["requests"] > 0
    stats = srv.stop()
    assert report["requests"] <= stats["responses"] <= report["requests"] + 4


def test_version_ends_at_once(testd):
    srv = testd()
    run = volley("-v", "-t1", "-c1", "-d1s", srv.url)
    assert run.returncode == 0, run
    assert run.stdout.startswith("volley ") and len(run.stdout.splitlines()) == 1, run
    assert srv.stop()["connections"] == 0


# --------------------------------------------------------------------------
# The report next to wrk's
# --------------------------------------------------------------------------

NUMBER = re.compile(r"-?nan|\d+(?:\.\d+)?(?:us|ms|s|m|h|k|M|G|T|K)?")


def shape(line):
    """A report line's labels (numbers masked) and the column where each
    number's digits end: the column rule aligns those, whatever the unit."""
    labels = NUMBER.sub("#", line)
    ends = []
    for m in NUMBER.finditer(line):
        digits = re.match(r"-?nan|[\d.]+", m.group(0)).group(0)
        ends.append(m.start() + len(digits))
    return re.sub(r" +", " ", labels), ends


def compare_with_wrk(url, *args):
    ours = volley(*args, url)
    theirs = subprocess.run(["wrk", *args, url], capture_output=True, text=True, timeout=60)
    assert ours.returncode == theirs.returncode == 0, (ours, theirs.stderr)
    # volley's own warnings (a saturated generator, say) go to stderr; a line
    # of its own says how many connections it reopened, and with --latency
    # the thread-stats table ends with a row of its own, the time to first
    # byte (README: differences from wrk); the header names the engine.
    a = [l for l in ours.stdout.splitlines()
         if not l.startswith(("  Connections reopened: ", "    TTFB  ", "  engine: "))]
    b = theirs.stdout.splitlines()
    assert [shape(l)[0] for l in a] == [shape(l)[0] for l in b], (ours.stdout, theirs.stdout)
    for la, lb in zip(a, b):
        if la.startswith("  ") and not la.startswith(("  Socket", "  Non-2xx")) and \
                " requests in " not in la:
            # table rows: digits end in the same columns
            assert shape(la)[1] == shape(lb)[1], (la, lb)
        if la.startswith(("Requests/sec:", "Transfer/sec:")):
            assert len(la) == len(lb), (la, lb)
    return ours


def test_report_layout_matches_wrk(testd):
    srv = testd()
    compare_with_wrk(srv.url + "/", "-t2", "-c8", "-d1s", "--latency")


def test_report_layout_with_errors_matches_wrk(testd):
    srv = testd("--status-every", "3:500")
    ours = compare_with_wrk(srv.url + "/", "-t1", "-c2", "-d1s")
    assert "Non-2xx or 3xx responses:" in ours.stdout


def test_report_layout_with_socket_errors_matches_wrk(testd):
    srv = testd("--hostile", "reset")
    ours = compare_with_wrk(srv.url + "/", "-t1", "-c2", "-d1s")
    assert "Socket errors: connect 0, read " in ours.stdout
    lines = ours.stdout.splitlines()
    reopened = lines.index(next(l for l in lines if l.startswith("  Connections reopened: ")))
    assert lines[reopened - 1].startswith("  Socket errors: ")
    assert lines[reopened + 1].startswith("Requests/sec: ")
