"""Live metrics: /metrics (--metrics-listen) scraped by a real Prometheus
(Debian's) every second during the run, and remote write (--remote-write)
received by the same Prometheus; what its PromQL finds agrees with volley's
own --json (counts exactly, percentiles within a bucket) and with what the
server saw. The exposition format is parsed strictly (prometheus_client's
parser) and checked with promtool; hostile clients, a scrape storm, a port
in use and a remote-write receiver that is down, slow or refuses leave the
run's figures alone and fail, where they must, in one clear line. The
Grafana dashboard's queries are run against the same Prometheus.
SPDX-License-Identifier: MIT
"""
import http.server
import json
import math
import os
import re
import signal
import socket
import subprocess
import threading
import time
import uuid

import pytest

from conftest import (ROOT, VOLLEY, Run, check_sanitizer, free_port, ok, run_json, volley,
                      wait_port)

# The latency histograms' default bucket bounds (src/metrics.h), seconds.
BUCKETS = [100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3, 100e-3, 250e-3,
           500e-3, 1, 2.5, 5, 10, 30]
DASHBOARD = os.path.join(ROOT, "deploy", "grafana", "volley.json")


def start_volley(*args):
    """volley in the background: (Popen, start time)."""
    proc = subprocess.Popen([VOLLEY] + [str(a) for a in args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
                            errors="replace")
    return proc, time.monotonic()


def finish(started, timeout=90, head=""):
    """The Run of a volley started with start_volley; head is what of its
    standard output was read already."""
    proc, start = started
    out, err = proc.communicate(timeout=timeout)
    check_sanitizer("volley", err)
    return Run(subprocess.CompletedProcess(proc.args, proc.returncode, head + out, err),
               time.monotonic() - start)


def run_scraped(prom, args):
    """volley with --metrics-listen on a free port that prom scrapes: args
    (a function of the port) are its arguments. A port another process took
    between its choice and volley's start is given up for another."""
    for _ in range(5):
        port = free_port()
        prom.scrape(f"127.0.0.1:{port}")
        run = finish(start_volley(*args(port)))
        if "Address already in use" not in run.stderr:
            return run
    raise AssertionError(run)


def fetch(port, path="/metrics", host="127.0.0.1"):
    """GET path from volley's /metrics server: (status, headers, body)."""
    conn = socket.create_connection((host, port), timeout=10)
    with conn:
        conn.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while chunk := conn.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    assert int(headers["Content-Length"]) == len(body), headers
    return int(lines[0].split()[1]), headers, body.decode()


def families(text):
    """The exposition text, parsed strictly by prometheus_client's parser:
    {family name: (type, [(sample name, labels, value)])}."""
    from prometheus_client.parser import text_string_to_metric_families
    return {f.name: (f.type, [(s.name, s.labels, s.value) for s in f.samples])
            for f in text_string_to_metric_families(text)}


def promtool_check(text):
    """promtool check metrics: the format and Prometheus' naming conventions."""
    proc = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0 and not proc.stdout.strip() and not proc.stderr.strip(), proc


def within_a_bucket(estimate, exact):
    """histogram_quantile's estimate and an exact percentile (both seconds)
    are at most a bucket's width apart: the width of the bucket holding the
    exact value."""
    upper = next(i for i, b in enumerate(BUCKETS + [math.inf]) if exact <= b)
    lower = BUCKETS[upper - 1] if upper else 0
    width = (BUCKETS[upper] if upper < len(BUCKETS) else BUCKETS[-1]) - lower
    return abs(estimate - exact) <= width


def socket_errors(doc):
    return sum(doc["errors"][k] for k in ("connect", "read", "write", "timeout"))


def check_totals(last, doc, where):
    """The final values (last(promql) -> value) against the document."""
    seconds = doc["duration_us"] / 1e6
    assert last(f"sum(volley_responses_total{where})") == doc["requests"]
    for code, n in doc["status_codes"].items():
        assert last(f'sum(volley_responses_total{{status="{code}",{where[1:-1]}}})') == n, code
    assert last(f"sum(volley_errors_total{where})") == socket_errors(doc)
    for cls, n in doc["errors"].items():
        assert last(f'sum(volley_errors_by_class_total{{class="{cls}",{where[1:-1]}}})') == n
    for cause, n in doc["error_causes"].items():
        assert last(f'sum(volley_errors_total{{cause="{cause}",{where[1:-1]}}})') == n
    assert last(f"sum(volley_received_bytes_total{where})") == doc["bytes"]
    assert last(f"sum(volley_connections_opened_total{where})") == doc["connects"]
    assert last(f"sum(volley_reconnects_total{where})") == doc["reconnects"]
    if doc["rate"]:
        assert last(f"sum(volley_requests_sent_total{where})") == \
            pytest.approx(doc["rate"]["sent"] * seconds, abs=0.5)
    assert last(f"sum(volley_request_duration_seconds_count{where})") == \
        doc["latency"]["count"]
    assert last(f"sum(volley_request_duration_seconds_sum{where})") == \
        pytest.approx(doc["latency"]["mean"] * doc["latency"]["count"] / 1e6, rel=1e-9)


# --------------------------------------------------------------------------
# Prometheus scrapes /metrics
# --------------------------------------------------------------------------

def test_prometheus_scrapes_what_the_json_says(testd, prometheus, tmp_path):
    """A real Prometheus scrapes /metrics every second during a -R run and
    the --metrics-linger after it: counters only grow, it saw them grow
    while the run was on, and its last values are --json's exactly (the
    client's and the server's CPU time too), p99 within a bucket."""
    srv = testd("--delay", "1")
    prom = prometheus()
    path = tmp_path / "r.json"
    run = run_scraped(prom, lambda port: (
        "-t2", "-c8", "-d5s", "-R", "1500", "--metrics-listen", f"127.0.0.1:{port}",
        "--metrics-linger", "4s", "--json", path, "--server-pid", srv.proc.pid, srv.url + "/"))
    ok(run)
    doc = json.loads(path.read_text())
    last = lambda q: prom.value(re.sub(r"(volley_\w+)(\{[^}]*\})?", r"last_over_time(\1\2[10m])", q))  # noqa: E731,E501
    check_totals(last, doc, '{job="volley"}')
    # every sample Prometheus has came from a scrape volley answered
    scraped = prom.value('count_over_time(volley_duration_seconds{job="volley"}[10m])')
    assert doc["telemetry"]["scrapes"] >= scraped
    # the -R figures, the run's length and the CPU times, as --json has them
    assert last('volley_target_rate{job="volley"}') == 1500
    assert last('volley_duration_seconds{job="volley"}') == doc["duration_us"] / 1e6
    cpu = doc["cpu"]["user_s"] + doc["cpu"]["system_s"]
    assert last('volley_client_cpu_seconds_total{job="volley"}') == pytest.approx(cpu, abs=1e-6)
    assert last('volley_server_cpu_seconds_total{job="volley"}') == \
        pytest.approx(doc["server"]["cpu_s"], abs=1e-6)
    assert last('volley_request_duration_uncorrected_seconds_count{job="volley"}') == \
        doc["latency_uncorrected"]["count"]
    p99 = prom.value('histogram_quantile(0.99, last_over_time('
                     'volley_request_duration_seconds_bucket{job="volley"}[10m]))')
    assert within_a_bucket(p99, doc["latency"]["percentiles"]["99"] / 1e6), p99
    # scraped while the run was on, growing, never going back
    seen = prom.value('count_over_time(volley_duration_seconds{job="volley"}[10m])')
    assert seen >= 4, seen
    # (at least twice with the counts moving: a busy machine may delay a scrape)
    assert prom.value('changes(volley_request_duration_seconds_count{job="volley"}[10m])') >= 2
    assert prom.value('resets(volley_responses_total{job="volley",status="200"}[10m])') == 0
    assert srv.stats()["requests"] >= doc["requests"] > 0


def test_warmup_is_left_out_and_counters_never_go_back(testd, prometheus, tmp_path):
    """--warmup: what it sends is left out of /metrics as of every result;
    counters start at 0 when what is measured starts and end at --json's."""
    srv = testd()
    prom = prometheus()
    path = tmp_path / "r.json"
    run = run_scraped(prom, lambda port: (
        "-t1", "-c2", "--warmup", "2s", "-d2s", "--metrics-listen", f"127.0.0.1:{port}",
        "--metrics-linger", "3s", "--json", path, srv.url + "/"))
    ok(run)
    doc = json.loads(path.read_text())
    assert doc["warmup"]["requests"] > 0
    series = 'volley_responses_total{job="volley",status="200"}'
    assert prom.value(f"last_over_time({series}[10m])") == doc["requests"]
    assert prom.value(f"resets({series}[10m])") == 0
    assert prom.value(f"min_over_time({series}[10m])") < doc["requests"]
    assert srv.stats()["requests"] >= doc["requests"] + doc["warmup"]["requests"]


# --------------------------------------------------------------------------
# Remote write
# --------------------------------------------------------------------------

def test_remote_write_shards_add_up_in_promql(testd, prometheus, tmp_path):
    """Two shards push to Prometheus' remote-write receiver: every interval
    and a last push after the run, each shard by its shard label; the sums
    over shards are the sums of their --json, the p99 of the summed buckets
    is volley merge's within a bucket, and the targets add up to -R."""
    srv = testd("--delay", "1")
    prom = prometheus()
    run_id = uuid.uuid4().hex
    paths = [tmp_path / f"r{i}.json" for i in range(2)]
    procs = [start_volley("-t1", "-c4", "-d3s", "-R", "1000", "--shard", f"{i}/2",
                          "--remote-write", prom.remote_write, "--label", f"run={run_id}",
                          "--json", paths[i], srv.url + "/") for i in range(2)]
    for p in procs:
        ok(finish(p))
    docs = [json.loads(p.read_text()) for p in paths]
    for d in docs:
        rw = d["telemetry"]["remote_write"]
        assert rw["pushes"] == rw["delivered"] >= 4 and rw["failed_attempts"] == 0, rw
        assert rw["dropped"] == rw["rejected"] == 0 and rw["last_error"] is None, rw
        assert d["telemetry"]["labels"] == {"run": run_id}
    where = f'{{run="{run_id}"}}'
    last = lambda q: prom.value(re.sub(r"(volley_\w+)(\{[^}]*\})?", r"last_over_time(\1\2[10m])", q))  # noqa: E731,E501
    whole = {k: sum(d[k] for d in docs) for k in ("requests", "bytes", "connects", "reconnects",
                                                   "duration_us")}
    merged = tmp_path / "m.json"
    assert volley("merge", "--json", merged, *paths).returncode == 0
    m = json.loads(merged.read_text())
    assert m["requests"] == whole["requests"]
    assert last(f"sum(volley_responses_total{where})") == m["requests"]
    assert last(f"sum(volley_received_bytes_total{where})") == m["bytes"]
    assert last(f"sum(volley_errors_total{where})") == socket_errors(m)
    assert last(f"sum(volley_request_duration_seconds_count{where})") == m["latency"]["count"]
    assert last(f"sum(volley_target_rate{where})") == 1000
    shards = prom.query(f"count by (shard) (last_over_time(volley_responses_total{where}[10m]))")
    assert sorted(s["shard"] for s, _ in shards) == ["0", "1"]
    for i, d in enumerate(docs):
        one = f'{{run="{run_id}",shard="{i}"}}'
        check_totals(last, d, one)
        pushes = prom.value(f"count_over_time(volley_duration_seconds{one}[10m])")
        assert pushes == d["telemetry"]["remote_write"]["pushes"]
    p99 = prom.value(f"histogram_quantile(0.99, sum by (le) (last_over_time("
                     f"volley_request_duration_seconds_bucket{where}[10m])))")
    assert within_a_bucket(p99, m["latency"]["percentiles"]["99"] / 1e6), p99
    assert srv.stats()["requests"] >= m["requests"] > 0


class Receiver:
    """A remote-write receiver that misbehaves as asked: answers every push
    with status after delay seconds (or never, with delay None). Counts what
    it was sent and checks the protocol's headers."""

    def __init__(self, status=204, delay=0.0):
        pushes = self.pushes = []

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                pushes.append((dict(self.headers), body))
                if delay is None:
                    time.sleep(3600)
                time.sleep(delay)
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_port}/api/v1/write"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver():
    made = []

    def make(**kw):
        r = Receiver(**kw)
        made.append(r)
        return r
    yield make
    for r in made:
        r.close()


def closed_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_receiver_costs_the_run_nothing(testd, tmp_path):
    """Nothing listens where remote write pushes: the run goes on unchanged,
    failures are counted and retried with back-off (a handful, not a storm),
    and one warning line says what was lost; exit 0."""
    srv = testd()
    url = f"http://127.0.0.1:{closed_port()}/api/v1/write"
    run, doc = run_json(tmp_path, "-t1", "-c2", "-d2s", "--remote-write", url, srv.url + "/")
    assert run.report["requests"] == doc["requests"] > 0
    assert srv.stats()["requests"] >= doc["requests"]
    rw = doc["telemetry"]["remote_write"]
    assert rw["delivered"] == 0 and rw["pushes"] >= 3 and rw["dropped"] == rw["pushes"], rw
    assert 3 <= rw["failed_attempts"] <= 40, rw  # 100 ms doubling: not a hot loop
    assert rw["last_error"].startswith("connect: Connection refused"), rw
    lines = run.stderr.splitlines()
    assert lines == [f"Warning: remote write to {url}: {rw['pushes']} of {rw['pushes']} pushes "
                     f"not delivered ({rw['pushes']} dropped, 0 rejected); last error: "
                     f"{rw['last_error']}"], run
    # the end waited out the flush (5 s), no more
    assert run.elapsed < 2 + 5 + 5, run


def test_strict_remote_write_fails_before_the_run(testd):
    srv = testd()
    port = closed_port()
    run = volley("-t1", "-c1", "-d2s", "--remote-write", f"http://127.0.0.1:{port}/w",
                 "--remote-write-strict", srv.url + "/")
    assert run.returncode == 1 and not run.stdout, run
    assert run.stderr == (f"volley: --remote-write http://127.0.0.1:{port}/w: unable to connect "
                          f"to 127.0.0.1:{port}: Connection refused\n"), run
    assert srv.stats()["requests"] == 0


@pytest.mark.parametrize("status,strict,rc", [(204, True, 0), (400, False, 0), (400, True, 1),
                                              (503, False, 0)])
def test_receiver_answers(testd, receiver, tmp_path, status, strict, rc):
    """What the receiver answers decides what happens to a push: 2xx
    delivered; 4xx rejected, never tried again (and with
    --remote-write-strict exit 1 after the run, with its report and
    document); 5xx tried again after a back-off. The protocol's headers are
    there every time and the body is a snappy block."""
    srv = testd()
    rcv = receiver(status=status)
    path = tmp_path / "r.json"
    args = ["-t1", "-c1", "-d2s", "--remote-write", rcv.url, "--json", path]
    run = volley(*args, *(["--remote-write-strict"] if strict else []), srv.url + "/")
    assert run.returncode == rc, run
    doc = json.loads(path.read_text())
    assert run.report["requests"] == doc["requests"] > 0
    rw = doc["telemetry"]["remote_write"]
    pushes = rw["pushes"]
    with open(os.path.join(ROOT, "docs", "json.md")) as f:
        described = f.read()
    assert all(f"`{k}`" in described for k in list(doc["telemetry"]) + list(rw)), doc["telemetry"]
    assert pushes >= 3, rw
    for headers, body in rcv.pushes:
        assert headers["Content-Type"] == "application/x-protobuf"
        assert headers["Content-Encoding"] == "snappy"
        assert headers["X-Prometheus-Remote-Write-Version"] == "0.1.0"
        assert headers["Host"] == rcv.url.split("/")[2]
        # a snappy block starts with the uncompressed length, as a varint
        assert body and body[0] != 0
    if status == 204:
        assert rw["delivered"] == pushes == len(rcv.pushes) and not run.stderr, run
    elif status == 400:
        assert rw["rejected"] == pushes == len(rcv.pushes) and rw["failed_attempts"] == 0, rw
        assert rw["last_error"] == "HTTP 400"
        assert run.stderr.splitlines()[-1] == (
            f"{'volley' if strict else 'Warning'}: remote write to {rcv.url}: {pushes} of "
            f"{pushes} pushes not delivered (0 dropped, {pushes} rejected); last error: "
            "HTTP 400"), run
    else:
        assert rw["delivered"] == 0 and rw["failed_attempts"] >= 3, rw
        assert rw["failed_attempts"] + 1 >= len(rcv.pushes) >= rw["failed_attempts"], rw
        assert rw["last_error"] == "HTTP 503"
    assert srv.stats()["requests"] >= doc["requests"]


def test_slow_receiver_never_slows_the_run(testd, receiver, tmp_path):
    """A receiver that answers after 3 s, and one that never answers: the
    run takes as long as asked, the pushes wait their turn or are given up,
    and the end waits at most the flush."""
    srv = testd()
    for delay in (3.0, None):
        rcv = receiver(delay=delay)
        path = tmp_path / f"r{delay}.json"
        run = volley("-t1", "-c2", "-d3s", "--remote-write", rcv.url, "--json", path,
                     srv.url + "/")
        assert run.returncode == 0, run
        doc = json.loads(path.read_text())
        assert 2.9e6 <= doc["duration_us"] <= 3.6e6, doc["duration_us"]
        rw = doc["telemetry"]["remote_write"]
        assert rw["pushes"] == rw["delivered"] + rw["dropped"], rw
        if delay is None:
            assert rw["delivered"] == 0, rw
            assert rw["last_error"] == "no answer yet when volley stopped waiting", rw
        else:
            assert rw["delivered"] >= 1, rw
        assert run.elapsed < 3 + 5 + 4, run
    assert srv.stats()["requests"] > 0


# --------------------------------------------------------------------------
# The exposition format
# --------------------------------------------------------------------------

def test_exposition_is_strict_text_format(nginx_h2, tmp_path):
    """/metrics of an HTTP/2 run over TLS with -R and --label (a value with
    a quote, a backslash, a line break and UTF-8): prometheus_client's
    parser reads every scrape, promtool finds nothing to say, counters only
    grow from one scrape to the next, every family of the table is there,
    and the label reads back as given."""
    srv = nginx_h2(tls=True)
    port = free_port()
    value = 'a "b" \\c\u00e9'
    started = start_volley("-t1", "-c2", "-m4", "--http2", "-d3s", "-R", "400",
                           "--metrics-listen", f"127.0.0.1:{port}", "--metrics-linger", "1s",
                           "--label", f"team={value}", "--metrics-buckets", "1ms,10ms,1s",
                           "--server-pid", srv.proc.pid, srv.url + "/")
    wait_port(port, started[0], timeout=20)
    texts = []
    while started[0].poll() is None:
        try:
            status, headers, body = fetch(port)
        except OSError:
            break
        assert status == 200
        assert headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
        texts.append(body)
        time.sleep(0.3)
    ok(finish(started))
    assert len(texts) >= 5
    previous = {}
    for text in texts:
        promtool_check(text)
        parsed = families(text)
        for name, (kind, samples) in parsed.items():
            for sample, labels, v in samples:
                assert labels["url"] == srv.url + "/" and labels["team"] == value, labels
                key = (sample, tuple(sorted(labels.items())))
                if kind in ("counter", "histogram") and key in previous:
                    assert v >= previous[key], key
                previous[key] = v
    assert {n: k for n, (k, _) in parsed.items()} == {
        "volley_build_info": "gauge", "volley_duration_seconds": "gauge",
        "volley_received_bytes": "counter", "volley_connections_opened": "counter",
        "volley_connections_reopened": "counter", "volley_reconnects": "counter",
        "volley_tls_handshakes": "counter", "volley_tls_resumed": "counter",
        "volley_tls_handshake_seconds": "counter", "volley_http2_streams": "gauge",
        "volley_http2_goaway_received": "counter", "volley_http2_refused": "counter",
        "volley_requests_sent": "counter", "volley_errors_by_class": "counter",
        "volley_responses": "counter", "volley_errors": "counter",
        "volley_protocol_connections": "counter",
        "volley_http2_rst_stream_received": "counter",
        "volley_connect_duration_seconds": "histogram",
        "volley_request_duration_seconds": "histogram",
        "volley_request_duration_uncorrected_seconds": "histogram",
        "volley_scheduling_lag_seconds": "histogram", "volley_ttfb_seconds": "histogram",
        "volley_ttfb_uncorrected_seconds": "histogram", "volley_connections": "gauge",
        "volley_target_rate": "gauge", "volley_client_cpu_seconds": "counter",
        "volley_server_cpu_seconds": "counter"}
    les = [labels["le"] for s, labels, _ in parsed["volley_request_duration_seconds"][1]
           if s.endswith("_bucket")]
    assert les == ["0.001", "0.01", "1", "+Inf"]
    assert parsed["volley_tls_handshakes"][1][0][2] >= 2
    assert parsed["volley_http2_streams"][1][0][2] == 4
    # every metric is named where users look: the README and the man page
    with open(os.path.join(ROOT, "README.md")) as f:
        readme = f.read()
    with open(os.path.join(ROOT, "docs", "volley.1")) as f:
        man = f.read().replace("\\-", "-").replace("\\fB", "").replace("\\fR", "")
    for name in re.findall(r"^# TYPE (\S+) ", texts[-1], re.M):
        assert f"`{name}" in readme, name
        assert name in man, name


# --------------------------------------------------------------------------
# The server: addresses, errors, hostile clients
# --------------------------------------------------------------------------

@pytest.mark.parametrize("form,hosts", [("127.0.0.1:{}", ["127.0.0.1"]), ("[::1]:{}", ["::1"]),
                                        (":{}", ["127.0.0.1", "::1"])])
def test_listen_address_forms(testd, form, hosts):
    srv = testd()
    port = free_port()
    started = start_volley("-t1", "-c1", "-d2s", "--metrics-listen", form.format(port),
                           srv.url + "/")
    for host in hosts:
        wait_port(port, started[0], host=host, timeout=20)
        assert fetch(port, host=host)[0] == 200
    ok(finish(started))


def test_ctrl_c_in_the_linger_ends_it_and_loses_nothing(testd, tmp_path):
    """Ctrl-C while /metrics lingers after the run ends the wait, not volley:
    --json is written after it, with the scrapes it answered, and the
    script's done() is called with the same figures; exit 0."""
    srv = testd()
    port = free_port()
    path = tmp_path / "r.json"
    script = tmp_path / "done.lua"
    script.write_text('done = function(summary) io.write("done ", summary.requests, "\\n") end\n')
    started = start_volley("-t1", "-c2", "-d1s", "--metrics-listen", f"127.0.0.1:{port}",
                           "--metrics-linger", "10m", "--json", path, "-s", script,
                           srv.url + "/")
    proc = started[0]
    report = []
    while not report or not report[-1].startswith("Transfer/sec"):
        line = proc.stdout.readline()
        assert line, (report, proc.stderr.read())
        report.append(line)
    status, _, body = fetch(port)  # lingering, with the final figures
    assert status == 200 and "volley_duration_seconds" in body
    assert not path.exists()
    proc.send_signal(signal.SIGINT)
    head = "".join(report)
    run = ok(finish(started, timeout=30, head=head))
    doc = json.loads(path.read_text())
    assert doc["telemetry"]["scrapes"] == 1, doc["telemetry"]
    assert run.report["requests"] == doc["requests"] > 0
    assert run.stdout[len(head):].splitlines() == [f"done {doc['requests']}"], run
    assert srv.stats()["requests"] >= doc["requests"]


def test_port_in_use_stops_volley_before_the_run(testd):
    srv = testd()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        run = volley("-t1", "-c1", "-d1s", "--metrics-listen", f"127.0.0.1:{port}", srv.url + "/")
    assert run.returncode == 1 and not run.stdout, run
    assert run.stderr == f"volley: --metrics-listen 127.0.0.1:{port}: Address already in use\n"
    assert srv.stats()["requests"] == 0


@pytest.mark.parametrize("args,message", [
    (["--metrics-listen", "9465"], "volley: invalid --metrics-listen '9465': expected HOST:PORT, "
     "[IPV6]:PORT or :PORT"),
    (["--metrics-listen", "::1:9465"], "volley: invalid --metrics-listen '::1:9465': an IPv6 "
     "address goes in brackets: [::1]:9465"),
    (["--metrics-listen", "localhost:0"], "volley: invalid --metrics-listen 'localhost:0': the "
     "port must be a number from 1 to 65535"),
    (["--metrics-listen", "no.such.host.invalid:9465"],
     "volley: --metrics-listen no.such.host.invalid:9465: "),
    (["--metrics-linger", "2s"], "volley: --metrics-linger needs --metrics-listen"),
    (["--remote-write-strict"], "volley: --remote-write-strict needs --remote-write"),
    (["--label", "a=b"], "volley: --label needs --metrics-listen or --remote-write"),
    (["--metrics-buckets", "1ms"], "volley: --metrics-buckets needs --metrics-listen or "
     "--remote-write"),
    (["--metrics-listen", ":9", "--label", "ab"], "volley: invalid --label 'ab': expected "
     "NAME=VALUE"),
    (["--metrics-listen", ":9", "--label", "a="], "volley: invalid --label 'a=': expected "
     "NAME=VALUE"),
    (["--metrics-listen", ":9", "--label", "1a=b"], "volley: invalid --label '1a=b': a name is "
     "letters, digits and _, not starting with a digit"),
    (["--metrics-listen", ":9", "--label", "a-b=c"], "volley: invalid --label 'a-b=c': a name is "
     "letters, digits and _, not starting with a digit"),
    (["--metrics-listen", ":9", "--label", "__x=y"], "volley: invalid --label '__x=y': names "
     "starting with __ are Prometheus' own"),
    (["--metrics-listen", ":9", "--label", "status=y"], "volley: invalid --label 'status=y': "
     "volley's metrics use the label status"),
    (["--metrics-listen", ":9", "--label", "a=1", "--label", "a=2"], "volley: invalid --label "
     "'a=2': label a is given twice"),
    (["--metrics-listen", ":9", "--label", "a=\x01"], "volley: invalid --label 'a=\x01': the "
     "value must be UTF-8 text without control characters"),
    (["--metrics-listen", ":9", "--label", "a=\udcff"], None),
    (["--metrics-listen", ":9", "--metrics-buckets", "1ms,1ms"], "volley: invalid "
     "--metrics-buckets '1ms,1ms': the bounds must go up"),
    (["--metrics-listen", ":9", "--metrics-buckets", "0"], "volley: invalid --metrics-buckets "
     "'0': '0' is not a time above 0"),
    (["--metrics-listen", ":9", "--metrics-buckets", ","], "volley: invalid --metrics-buckets "
     "',': no bounds"),
    (["--remote-write", "ftp://x/"], "volley: invalid --remote-write URL 'ftp://x/': "),
    (["--remote-write", "https://127.0.0.1/w"], "volley: --remote-write: https is not supported; "
     "push to http:// (a Prometheus agent or a TLS proxy beside volley)"),
    (["--remote-write", "http://no.such.host.invalid/w"], "volley: --remote-write "
     "http://no.such.host.invalid/w: unable to resolve no.such.host.invalid: "),
])
def test_metrics_option_errors(args, message):
    """Each bad value is one line before anything is sent (a message ending
    in ': ' is followed by the system's reason)."""
    if message is None:  # not UTF-8: the line names it, whatever its bytes
        proc = subprocess.run([VOLLEY.encode()] + [os.fsencode(a) for a in args] +
                              [b"http://127.0.0.1:1/"], capture_output=True, timeout=30)
        assert proc.returncode == 1 and b"must be UTF-8 text" in proc.stderr.splitlines()[0]
        return
    run = volley(*args, "http://127.0.0.1:1/")
    assert run.returncode == 1 and not run.stdout, run
    first = run.stderr.splitlines()[0]
    assert first == message or (message.endswith(": ") and first.startswith(message)), run


def raw(port, data):
    """Sends data on a new connection; returns what came back before the close."""
    with socket.create_connection(("127.0.0.1", port), timeout=15) as s:
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
        out = b""
        while chunk := s.recv(65536):
            out += chunk
        return out


def status_lines(data):
    return re.findall(rb"^HTTP/1\.1 (\d{3}) ", data, re.M)


def test_hostile_clients_are_bounded_and_answered(testd, tmp_path):
    """Against /metrics during a run: anything but GET /metrics gets 404 or
    405, garbage 400, a head past 4 KiB 431, pipelined requests each their
    answer, HTTP/1.0 a close; 100 connections that send nothing (slowloris)
    are held 16 at a time (the oldest silent one gives way to each new
    one), so Prometheus still gets in; the run's figures are the server's."""
    srv = testd()
    port = free_port()
    path = tmp_path / "r.json"
    started = start_volley("-t1", "-c2", "-d4s", "--metrics-listen", f"127.0.0.1:{port}",
                           "--json", path, srv.url + "/")
    wait_port(port, started[0], timeout=20)
    assert status_lines(raw(port, b"GET /other HTTP/1.1\r\nHost: x\r\n\r\n")) == [b"404"]
    assert status_lines(raw(port, b"POST /metrics HTTP/1.1\r\nHost: x\r\n\r\n")) == [b"405"]
    assert b"\r\nAllow: GET\r\n" in raw(port, b"PUT /metrics HTTP/1.1\r\n\r\n")
    assert status_lines(raw(port, b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n")) == \
        [b"400"]
    assert status_lines(raw(port, b"GET /metrics HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello")) \
        == [b"400"]
    assert status_lines(raw(port, b"GET /metrics HTTP/1.1\r\nX: " + b"a" * 5000)) == [b"431"]
    two = raw(port, b"GET /metrics HTTP/1.1\r\n\r\nGET /metrics?x=1 HTTP/1.1\r\n\r\n"
              b"GET /nope HTTP/1.1\r\n\r\n")
    assert status_lines(two) == [b"200", b"200", b"404"], two[:300]
    old = raw(port, b"GET /metrics HTTP/1.0\r\n\r\n")
    assert status_lines(old) == [b"200"] and b"Connection: close\r\n" in old
    # slowloris: 100 silent connections, then a real scrape
    silent = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(100)]
    for s in silent[:-1]:
        s.sendall(b"GET /metr")
    time.sleep(0.5)
    status, _, body = fetch(port)
    assert status == 200 and "volley_responses_total" in body
    closed = 0
    for s in silent:
        s.settimeout(5)
        try:
            closed += s.recv(1) == b""
        except (socket.timeout, ConnectionResetError):
            pass
        s.close()
    assert closed >= 100 - 16, closed
    run = finish(started)
    ok(run)
    doc = json.loads(path.read_text())
    assert run.report["requests"] == doc["requests"] > 0
    assert srv.stats()["requests"] >= doc["requests"]


def test_scrape_storm_leaves_the_run_alone(testd, tmp_path):
    """Eight clients scrape as fast as they can through a -n run: every
    scrape is whole and parses, and the run sends exactly -n requests, which
    the server sees."""
    srv = testd()
    port = free_port()
    path = tmp_path / "r.json"
    started = start_volley("-t2", "-c4", "-n", "40000", "--metrics-listen", f"127.0.0.1:{port}",
                           "--json", path, srv.url + "/")
    wait_port(port, started[0], timeout=20)
    counts, stop = [], threading.Event()

    def storm():
        n = 0
        while not stop.is_set():
            try:
                status, _, body = fetch(port)
            except OSError:
                break
            assert status == 200 and body.endswith("\n")
            n += 1
        counts.append(n)
    threads = [threading.Thread(target=storm) for _ in range(8)]
    for t in threads:
        t.start()
    run = finish(started)
    stop.set()
    for t in threads:
        t.join()
    ok(run)
    doc = json.loads(path.read_text())
    assert doc["requests"] == 40000 == srv.stats()["requests"]
    assert sum(counts) >= 8, counts


# --------------------------------------------------------------------------
# The Grafana dashboard
# --------------------------------------------------------------------------

def dashboard_queries():
    with open(DASHBOARD) as f:
        board = json.load(f)
    exprs = [t["expr"] for p in board["panels"] for t in p.get("targets", [])]
    variables = {v["name"]: v for v in board["templating"]["list"]}
    return board, exprs, variables


def test_dashboard_queries_return_data(testd, prometheus, tmp_path):
    """deploy/grafana/volley.json: valid JSON whose every query names only
    metrics volley exposes, and, run by a real Prometheus over what a -R run
    with --server-pid pushed, returns data."""
    board, exprs, variables = dashboard_queries()
    assert board["title"] and len(exprs) >= 8
    srv = testd("--delay", "1")
    prom = prometheus()
    port = free_port()
    run = volley("-t1", "-c4", "-d3s", "-R", "500", "--remote-write", prom.remote_write,
                 "--metrics-listen", f"127.0.0.1:{port}", "--server-pid", srv.proc.pid,
                 "--label", "run=dashboard", srv.url + "/", timeout=90)
    ok(run)
    # the names /metrics gives, with the suffixes a histogram's series have
    exposed = set()
    started = start_volley("-t1", "-c1", "-d2s", "-R", "10", "--metrics-listen",
                           f"127.0.0.1:{port}", "--server-pid", srv.proc.pid, srv.url + "/")
    wait_port(port, started[0], timeout=20)
    for name, kind in re.findall(r"^# TYPE (\S+) (\S+)$", fetch(port)[2], re.M):
        exposed |= {name + suffix for suffix in (
            ("_bucket", "_sum", "_count") if kind == "histogram" else ("",))}
    ok(finish(started))
    assert "dashboard" in {v for s, _ in prom.query("volley_build_info") for v in s.values()}
    for expr in exprs:
        names = set(re.findall(r"\bvolley_\w+", expr))
        assert names and names <= exposed, (expr, names - exposed)
        q = expr.replace("$__rate_interval", "10m").replace("$__interval", "10m")
        q = q.replace("$__range", "10m")
        for name in variables:
            q = q.replace(f'=~"${name}"', '=~".+"').replace(f'="${name}"', '=~".+"')
        assert "$" not in q, q
        assert prom.query(q), (expr, q)


def test_http3_figures_are_metrics_too(go_h3, tmp_path):
    """An HTTP/3 run's figures (as --json's http3 object, its counters and
    its breakdowns by code) are families of /metrics, whose last scrape, in
    the linger after the run, gives --json's values; the README and the man
    page name each family."""
    srv = go_h3()
    port = free_port()
    out = os.path.join(tmp_path, "r.json")
    started = start_volley("--http3", "-t1", "-c2", "-m4", "-n", 2000, "--json", out,
                           "--metrics-listen", f"127.0.0.1:{port}", "--metrics-linger", "2s",
                           srv.url + "/")
    wait_port(port, started[0], timeout=20)
    text = None
    while started[0].poll() is None:
        try:
            text = fetch(port)[2]
        except OSError:
            break
        time.sleep(0.2)
    ok(finish(started))
    with open(out) as f:
        h3 = json.load(f)["http3"]
    promtool_check(text)
    parsed = families(text)
    for key in ("goaway_received", "refused", "connections_measured", "packets_sent",
                "packets_received", "packets_lost", "stateless_resets", "idle_timeouts"):
        kind, samples = parsed[f"volley_http3_{key}"]
        assert kind == "counter" and samples[0][2] == h3[key], key
    assert parsed["volley_http3_streams"][1][0][2] == h3["streams"] == 4
    for key in ("stream_reset_received", "connection_close_transport",
                "connection_close_application", "handshake_alerts", "ecn_received"):
        kind, samples = parsed[f"volley_http3_{key}"]
        by_code = {labels["code"]: v for _, labels, v in samples}
        assert kind == "counter" and by_code, key
        assert {c: v for c, v in by_code.items() if v} == \
            {c: v for c, v in (h3[key] or {}).items() if v}, key
    with open(os.path.join(ROOT, "README.md")) as f:
        readme = f.read()
    with open(os.path.join(ROOT, "docs", "volley.1")) as f:
        man = f.read().replace("\\-", "-").replace("\\fB", "").replace("\\fR", "")
    for name in re.findall(r"^# TYPE (volley_http3\S+) ", text, re.M):
        assert f"`{name}" in readme and name in man, name
