"""Load models beyond wrk's closed loop: -R constant rate with corrected and
uncorrected latency, -n exact request counts, --no-keepalive, --unix-socket
and millisecond durations, each checked against what a real server saw.
SPDX-License-Identifier: MIT
"""
import json
import os
import re
import time

import pytest

from conftest import COUNT_FORM, parse_time_us, run_json, volley


def hdr_block(out, title):
    """The eight percentile lines of wrk2's block titled title, as {p: us}."""
    start = out.index(f"  Latency Distribution (HdrHistogram - {title})\n")
    lines = out[start:].splitlines()[1:9]
    return {float(m.group(1)): parse_time_us(m.group(2))
            for m in (re.fullmatch(r"\s*([\d.]+)%\s+(\S+)", line) for line in lines)}


def test_rate_is_held_precisely(testd, tmp_path):
    server = testd()
    out = tmp_path / "r.json"
    run = volley("-t2", "-c20", "-d3s", "-R2000", "--json", out, server.url + "/")
    assert run.returncode == 0, run
    assert abs(run.report["rps"] - 2000) / 2000 < 0.02, run
    stats = server.stop()
    with open(out) as f:
        answered = json.load(f)["requests"]
    # The requests due in the 3 s, 2000 a second, and not one more (not the
    # one due at the very end, nor any while the threads stop): fewer only
    # by those a loaded machine had not sent yet when the run ended.
    assert 6000 - 25 <= stats["requests"] <= 6000, stats
    assert stats["requests"] - 20 <= answered <= stats["requests"], (answered, stats)
    assert "Warning" not in run.stdout + run.stderr


def test_rate_below_threads_and_connections_is_not_biased(testd):
    server = testd()
    run = volley("-t2", "-c10", "-d2s", "-R5", server.url + "/")
    assert run.returncode == 0, run
    # Ten connections share 5 requests/sec: 10 requests in 2 s, evenly spaced.
    assert 9 <= server.stop()["requests"] <= 10, run
    assert 9 <= run.report["requests"] <= 10, run


def test_stalls_show_in_corrected_latency_only(testd):
    # Every 2 s the server holds all responses for 500 ms.
    server = testd("--freeze", "500:2000")
    run = volley("-t2", "-c50", "-d4s", "-R1000", "--latency", "-U", server.url + "/")
    assert run.returncode == 0, run
    corrected = hdr_block(run.stdout, "Recorded Latency")
    uncorrected = hdr_block(run.stdout,
                            "Uncorrected Latency (measured without taking delayed starts "
                            "into account)")
    # A quarter of all requests fall in a stall and wait on average 250 ms:
    # the 90th percentile of the intended-time latency is about 300 ms.
    assert 150e3 <= corrected[90] <= 450e3, run.stdout
    assert uncorrected[90] < 50e3, run.stdout
    # The rate is held through the stalls: the server got its 4000 requests
    # (less those sent during a stall at the very end; more when a loaded
    # machine ended the run late, 1000 a second of it).
    assert 3400 <= server.stop()["requests"] <= 1000 * max(run.elapsed, 4) + 50, run


def test_rate_latency_block_has_wrk2_shape(testd):
    server = testd()
    run = volley("-t1", "-c4", "-d1s", "-R400", "--latency", server.url + "/")
    out = run.stdout
    assert "  Latency Distribution (HdrHistogram - Recorded Latency)\n" in out
    percentiles = re.findall(r"^ ?(\d+\.\d{3})%\s+\S+$", out, re.M)
    assert percentiles == ["50.000", "75.000", "90.000", "99.000", "99.900", "99.990",
                           "99.999", "100.000"]
    assert "\n  Detailed Percentile spectrum:\n       Value   Percentile   TotalCount " \
           "1/(1-Percentile)\n\n" in out
    rows = re.findall(r"^\s+([\d.]+)\s+([\d.]+)\s+(\d+)\s+([\d.]+|inf)$", out, re.M)
    assert rows and rows[-1][1] == "1.000000" and rows[-1][3] == "inf"
    counts = [int(r[2]) for r in rows]
    assert counts == sorted(counts)
    total = int(re.search(r"Total count    = +(\d+)\]", out).group(1))
    assert counts[-1] == total == run.report["requests"]
    assert re.search(r"^#\[Buckets = +27, SubBuckets     = +2048\]\n-{58}$", out, re.M)
    # Without -U there is no uncorrected block.
    assert "Uncorrected" not in out


def test_rate_shortfall_is_explained(testd):
    # 10 connections at 50 ms a response carry at most 200 requests/sec.
    server = testd("--delay", "50")
    run = volley("-t1", "-c10", "-d2s", "-R1000", server.url + "/")
    assert run.returncode == 0, run
    assert run.report["rps"] < 250
    # The warning follows the report, on stderr (stdout stays wrk2's report).
    assert run.stdout.splitlines()[-1].startswith("Transfer/sec:"), run
    warning = [line for line in run.stderr.splitlines() if line.startswith("Warning: sent")]
    assert len(warning) == 1, run
    assert "short of the 1000" in warning[0] and "raise -c" in warning[0], warning


def test_requests_exact_count(testd):
    server = testd()
    run = volley("-t2", "-c10", "-n", "1000", server.url + "/")
    assert run.returncode == 0, run
    assert "Running 1000 requests test @" in run.stdout
    assert run.report["requests"] == 1000, run
    stats = server.stop()
    assert stats["requests"] == 1000, stats
    assert stats["responses"] == 1000, stats


def test_a_run_shorter_than_a_sample_still_has_req_sec(testd):
    # -n 200 takes a few ms, less than Req/Sec's 100 ms sample interval: each
    # thread's one sample is its whole run, not an empty "-nan%" row.
    server = testd()
    run = volley("-t2", "-c6", "-n", "200", server.url + "/")
    assert run.returncode == 0 and run.report["requests"] == 200, run
    row = next(l for l in run.stdout.splitlines() if l.startswith("    Req/Sec"))
    assert "nan" not in row and run.report["rps_avg"] > 0, run
    # as many samples as threads: the mean lies within their spread
    assert run.report["rps_avg"] <= run.report["rps_max"], run


def test_requests_exact_with_pipelining_and_closes(testd, tmp_path):
    # Batches of 3 pipelined requests; the server closes after every 7th
    # response, dropping what was pipelined behind it: those are sent again.
    script = tmp_path / "pipe.lua"
    script.write_text('init = function(args)\n'
                      '  local r = {}\n'
                      '  for i = 1, 3 do r[i] = wrk.format(nil, "/p" .. i) end\n'
                      '  req = table.concat(r)\n'
                      'end\n'
                      'request = function() return req end\n')
    server = testd("--close-after", "7")
    run = volley("-t2", "-c4", "-n", "1000", "-s", script, server.url + "/")
    assert run.returncode == 0, run
    assert run.report["requests"] == 1000, run
    stats = server.stop()
    assert stats["responses"] == 1000, stats
    assert run.report["errors"] == {"connect": 0, "read": 0, "write": 0, "timeout": 0}, run


def test_requests_with_duration_whichever_first(testd):
    server = testd("--delay", "10")
    run = volley("-t1", "-c2", "-n", "100000", "-d", "500ms", server.url + "/")
    assert run.returncode == 0, run
    assert "Running 500ms test @" in run.stdout
    assert run.elapsed < 3
    assert 0 < run.report["requests"] < 200


def test_requests_with_rate(testd):
    server = testd()
    run = volley("-t2", "-c4", "-n", "300", "-R", "600", server.url + "/")
    assert run.returncode == 0, run
    assert run.report["requests"] == 300
    # 300 requests at 600/s take half a second.
    assert 0.45e6 <= run.report["runtime_us"] <= 0.8e6, run
    assert server.stop()["requests"] == 300


def test_no_keepalive_one_connection_per_request(testd):
    server = testd()
    run = volley("-t2", "-c4", "-d1s", "--no-keepalive", server.url + "/")
    assert run.returncode == 0, run
    assert not run.report["socket_errors_line"], run
    stats = server.stop()
    assert stats["requests"] >= 100
    # Each connection carried one request (the last ones, one per -c, may
    # have been opened and not used when the run ended; and the start-up
    # probe carried none).
    assert stats["requests"] <= stats["connections"] <= stats["requests"] + 4 + 1, stats
    log = server.log()
    assert all(["Connection", "close"] in entry["headers"] for entry in log)


def test_no_keepalive_against_a_server_that_keeps_alive(nginx):
    # nginx honours Connection: close; count its connections from the log.
    server = nginx(server='location / { return 200 "ok\\n"; }',
                   log_format="$connection $connection_requests")
    run = volley("-t1", "-c2", "-d1s", "--no-keepalive", server.url + "/")
    assert run.returncode == 0 and not run.report["socket_errors_line"], run
    entries = [line.split() for line in server.log()]
    assert len(entries) >= 50
    assert all(requests == "1" for _, requests in entries)
    assert len({conn for conn, _ in entries}) == len(entries)


def test_unix_socket_against_nginx(nginx, tmp_path):
    path = os.path.join(str(tmp_path), "n.sock")
    server = nginx(listen=False,
                   server=f'listen unix:{path}; location / {{ return 200 "$host $uri\\n"; }}',
                   log_format="$host $request_uri")
    deadline = time.monotonic() + 10
    while not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.02)
    run = volley("-t1", "-c2", "-d1s", "--unix-socket", path, "http://api.local/v1/x?y=1")
    assert run.returncode == 0, run
    assert run.report["requests"] > 100 and not run.report["socket_errors_line"], run
    log = server.log()
    assert len(log) >= run.report["requests"]
    assert set(log) == {"api.local /v1/x?y=1"}


@pytest.mark.parametrize("script", [None, "function init(args) print(wrk.host, wrk.path) end\n"])
def test_fragment_and_ipv6_zone_stay_out_of_the_request(testd, tmp_path, script):
    # The URL's fragment is not sent (RFC 9110 §4.2.4), and an IPv6 zone
    # (RFC 6874's %25) names an interface here, not part of Host; a Unix
    # socket lets the URL name any host. With and without a script (the
    # wrk module builds Host itself).
    srv = testd(listen=f"unix:{tmp_path / 't.sock'}")
    args = ["-t1", "-c1", "-d300ms", "--unix-socket", srv.path]
    if script:
        (tmp_path / "s.lua").write_text(script)
        args += ["-s", str(tmp_path / "s.lua")]
    run = volley(*args, "http://[fe80::1%25eth0]:8080/p?q=1#section")
    assert run.returncode == 0 and run.report["requests"] > 0, run
    if script:
        assert run.stdout.startswith("fe80::1%eth0\t/p?q=1\n"), run
    log = srv.log()
    assert {(r["target"], dict(r["headers"])["Host"]) for r in log} == \
        {("/p?q=1", "[fe80::1]:8080")}, log[:2]


def test_unix_socket_refused(tmp_path):
    run = volley("-d1s", "--unix-socket", str(tmp_path / "none.sock"), "http://localhost/")
    assert run.returncode == 1
    assert run.stderr.splitlines()[0].startswith(
        f"volley: unable to connect to {tmp_path / 'none.sock'}: ")
    assert not run.stdout


def test_millisecond_duration(testd):
    server = testd()
    run = volley("-t1", "-c2", "-d", "300ms", server.url + "/")
    assert run.returncode == 0, run
    assert run.stdout.startswith(f"Running 300ms test @ {server.url}/\n")
    assert run.elapsed < 1.0, run
    assert 0.29e6 <= run.report["runtime_us"] <= 0.5e6


def test_the_run_ends_before_its_connections_are_closed(nginx, tmp_path):
    """Closing 8,000 connections takes a second or more on a 2-core machine
    (each close is the server's too, over loopback): that is no part of the
    run, whose length (and with it Requests/sec) is the -d asked for."""
    srv = nginx(server='location / { return 200 "ok"; }')
    run, doc = run_json(tmp_path, "-t1", "-c8000", "-R100", "-d1s", srv.url + "/")
    assert doc["connects"] == 8000 and doc["requests"] == 100, doc["connects"]
    assert 1e6 <= doc["duration_us"] < 1.1e6, doc["duration_us"]
    assert 95 <= run.report["rps"] <= 100, run


@pytest.mark.parametrize("args,message", [
    (["-R", "0"], "volley: invalid rate: '0' (must be at least 1)"),
    (["-R", "fast"], "volley: invalid rate: 'fast'" + COUNT_FORM),
    (["-n", "0"], "volley: invalid number of requests: '0' (must be at least 1)"),
    (["-U"], "volley: -U/--u_latency needs -R/--rate"),
    (["--unix-socket", ""], "volley: invalid Unix socket path: empty"),
    (["--proxy", "ftp://p:1"],
     "volley: invalid --proxy 'ftp://p:1': unsupported proxy scheme (use http, socks5 or socks5h)"),
    (["--proxy", "http://p:1/x"], "volley: invalid --proxy 'http://p:1/x': a proxy's URL has no path"),
    (["--proxy", "socks5://p:70000"], "volley: invalid --proxy 'socks5://p:70000': invalid port"),
    (["--proxy", "http://:1"], "volley: invalid --proxy 'http://:1': missing host"),
    (["--proxy-env", "--proxy", "http://p:1"], "volley: --proxy and --proxy-env: give one of them"),
    (["--unix-socket", "/tmp/s", "--bind", "127.0.0.2"],
     "volley: --unix-socket does not combine with --proxy, --proxy-env, --bind or "
     "--bind-port-range"),
    (["--bind", ""], "volley: invalid --bind '': no address"),
    (["--bind", "127.0.0.2,localhost"],
     "volley: invalid --bind '127.0.0.2,localhost': 'localhost' is not an IP address"),
    (["--bind", "10.0.0.0/8"],
     "volley: invalid --bind '10.0.0.0/8': 10.0.0.0/8 has more than 65536 addresses"),
    (["--bind", "10.0.0.0/33"],
     "volley: invalid --bind '10.0.0.0/33': '10.0.0.0/33' is not an address range "
     "(ADDRESS/PREFIX)"),
    (["--bind-port-range", "5-4"],
     "volley: invalid --bind-port-range '5-4': expected LO-HI, ports 1 to 65535"),
    (["--bind-port-range", "0-10"],
     "volley: invalid --bind-port-range '0-10': expected LO-HI, ports 1 to 65535"),
    (["--bind-port-range", "8080"],
     "volley: invalid --bind-port-range '8080': expected LO-HI, ports 1 to 65535"),
])
def test_load_option_errors(args, message):
    run = volley(*args, "http://127.0.0.1:1/")
    assert run.returncode == 1
    assert run.stderr.splitlines()[0] == message
    assert not run.stdout
