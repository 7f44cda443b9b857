"""Pass/fail thresholds: a matrix of expressions (each metric and operator,
counts and percentages, a percentile like p99.9) against a server answering
in 20 ms and one answering 503 to every 4th request, each verdict checked
against the figures of the run's own JSON document and what the server
counted, with exit status 0 or 2; malformed expressions; --abort-on-fail
against a server that stalls partway; volley merge --threshold.
SPDX-License-Identifier: MIT
"""
import json
import os
import re

import pytest
from hdrh.histogram import HdrHistogram

from conftest import Testd as Server  # not collected as a test class
from conftest import ROOT, volley
from test_json import field_names
from test_multi import shards


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("servers"))
    slow = Server(d, "--delay", 20)
    shedding = Server(d, "--status-every", "4:503")
    yield {"slow": slow, "503": shedding}
    slow.kill()
    shedding.kill()


def expected_value(expr, doc):
    """The figure a threshold measures, from the document's own fields."""
    metric = expr.split()[0]
    lat = doc["latency"]
    if metric in ("ttfb", "latency"):  # a distribution named first
        lat, metric = doc[metric], expr.split()[1]
    attempts = doc["success"]["attempts"]
    if re.fullmatch(r"p[\d.]+", metric):
        return lat["percentiles"][metric[1:]]
    if metric in ("mean", "max", "stdev"):
        return lat[metric]
    if metric == "connect":
        return doc["connect_time"]["percentiles"]["99"]
    if metric == "rps":
        return doc["throughput"]["requests_per_sec"]
    if metric == "requests":
        return doc["requests"]
    if metric == "errors":
        errors = attempts - doc["success"]["ok"]
        return 100 * errors / attempts if expr.endswith("%") else errors
    if metric == "success":
        return doc["success"]["percent"]
    code = metric.split(":")[1]
    codes = doc["status_codes"]
    n = sum(v for k, v in codes.items() if k.isdigit() and
            (k == code or (code.endswith("xx") and k[0] == code[0])))
    return 100 * n / doc["requests"] if expr.endswith("%") else n


def normalised(expr):
    """The expression as volley writes it back: one space around the
    operator, and between a distribution and its statistic."""
    m = re.fullmatch(r"\s*(\S+?(?:\s+\S+?)?)\s*(<=|>=|<|>)\s*(.*?)\s*", expr)
    return f"{' '.join(m.group(1).lower().split())} {m.group(2)} {m.group(3)}"


# (server, expression, passes): against 4 connections to a server answering
# in 20 ms (at most 200 responses a second, all 200), and a fast one that
# answers every 4th response 503 (a quarter of them, by its own count). The
# limits that pass leave room for a busy machine.
MATRIX = [
    ("slow", "p99 < 5s", True),
    ("slow", "p99<10ms", False),
    ("slow", "p50 >= 20ms", True),
    ("slow", "p99.9 <= 15ms", False),
    ("slow", "mean > 19ms", True),
    ("slow", "max < 10s", True),
    ("slow", "stdev < 5s", True),
    ("slow", "connect < 5s", True),
    ("slow", "ttfb p99 < 5s", True),
    ("slow", "TTFB  p50<10ms", False),
    ("slow", "ttfb mean > 19ms", True),
    ("slow", "latency max < 10s", True),
    ("slow", "rps > 1k", False),
    ("slow", "rps >= 5", True),
    ("slow", "requests < 10", False),
    ("slow", "errors <= 0", True),
    ("slow", "success >= 99.9%", True),
    ("503", "errors < 1%", False),
    ("503", "errors <= 30%", True),
    ("503", "errors > 100k", False),
    ("503", "status:503 > 20%", True),
    ("503", "status:5xx < 10%", False),
    ("503", "status:503 >= 1", True),
    ("503", "status:2xx > 70%", True),
    ("503", "success > 70%", True),
    ("503", "success >= 80%", False),
]


@pytest.mark.parametrize("server,expr,passes", MATRIX)
def test_verdict_and_exit_status(servers, tmp_path, server, expr, passes):
    srv = servers[server]
    out = os.path.join(tmp_path, "r.json")
    run = volley("-t1", "-c4", "-d700ms", "--threshold", expr, "--json", out, srv.url)
    assert run.returncode == (0 if passes else 2), run
    with open(out) as f:
        doc = json.load(f)
    [t] = doc["thresholds"]
    text = normalised(expr)
    assert t["expression"] == text
    assert t["passed"] is passes and t["timed_out"] is False
    want = expected_value(text, doc)
    assert t["value"] == pytest.approx(want, rel=1e-9), (t, want)
    verdict = "passed" if passes else "FAILED"
    lines = [line for line in run.stdout.splitlines() if line.startswith("Threshold ")]
    assert lines and lines[0].startswith(f"Threshold {text}: {verdict} (")
    assert doc["aborted"] is None and doc["requests"] > 20


def test_the_server_counted_what_the_status_thresholds_measured(tmp_path, testd):
    srv = testd("--status-every", "4:503")
    out = os.path.join(tmp_path, "r.json")
    run = volley("-t1", "-c1", "-n", 400, "--threshold", "status:503 <= 100",
                 "--threshold", "status:503 < 25%", "--json", out, srv.url)
    seen = srv.stats()
    with open(out) as f:
        doc = json.load(f)
    # Exactly every 4th of 400 answers: 100 of them, 25%.
    assert seen["status"] == {"200": 300, "503": 100}
    assert [t["value"] for t in doc["thresholds"]] == [100, 25]
    assert [t["passed"] for t in doc["thresholds"]] == [True, False]
    assert run.returncode == 2


def test_every_threshold_is_reported_and_one_failure_is_exit_2(servers, tmp_path):
    out = os.path.join(tmp_path, "r.json")
    run = volley("-t1", "-c4", "-d500ms", "--threshold", "p99 < 5s", "--threshold",
                 "requests < 1", "--threshold", "success > 50%", "--json", out,
                 servers["slow"].url)
    assert run.returncode == 2
    with open(out) as f:
        doc = json.load(f)
    assert [t["passed"] for t in doc["thresholds"]] == [True, False, True]
    lines = run.stdout.splitlines()
    # after the report, one line each, in the order given
    rps = next(i for i, line in enumerate(lines) if line.startswith("Requests/sec:"))
    assert [line.split(":")[0] for line in lines[rps + 2:]] == [
        "Threshold p99 < 5s", "Threshold requests < 1", "Threshold success > 50%"]


def test_without_thresholds_nothing_changes(servers, tmp_path):
    out = os.path.join(tmp_path, "r.json")
    run = volley("-t1", "-c2", "-d300ms", "--json", out, servers["503"].url)
    assert run.returncode == 0 and "Threshold" not in run.stdout
    with open(out) as f:
        doc = json.load(f)
    assert doc["thresholds"] is None and doc["aborted"] is None


@pytest.mark.parametrize("expr,why", [
    ("p99 <", "missing the value after 'p99 <'"),
    ("p99 < 200", "a latency needs a unit: '200ms' or '200s'"),
    ("latency < 5ms", "unknown metric 'latency' (p50, p99.9, mean, max, stdev, connect, rps, "
                      "requests, errors, success, status:5xx, status:503)"),
    ("p99 = 5ms", "expected <, <=, > or >= after 'p99'"),
    ("errors < 101%", "invalid percentage '101%': at most 100%"),
    ("success > 99", "success is a percentage: '99%'"),
    ("status:6x < 1", "invalid status '6x': a code (status:503) or a class (status:5xx)"),
])
def test_malformed_expression_is_one_line_and_exit_1(testd, expr, why):
    srv = testd()
    run = volley("-d300ms", "--threshold", expr, srv.url)
    assert run.returncode == 1
    assert run.stderr.splitlines()[0] == f"volley: invalid threshold '{expr}': {why}"
    assert run.stdout == ""
    assert srv.stats()["connections"] == 0


def test_abort_on_fail_stops_within_an_interval_and_the_timeout_of_a_stall(testd, tmp_path):
    # The server stops answering 2 s after the first request; the requests
    # then outstanding time out after 1 s, which p99 counts as slower than
    # any limit: the 500 ms interval they fall in fails, and the run ends.
    srv = testd("--stall-after", 2000)
    out = os.path.join(tmp_path, "r.json")
    run = volley("-t2", "-c4", "-d10s", "-T1s", "--abort-on-fail", "--interval", "500ms",
                 "--threshold", "p99<50ms", "--json", out, srv.url)
    assert run.returncode == 2, run
    with open(out) as f:
        doc = json.load(f)
    stall, interval, timeout = 2.0, 0.5, 1.0
    ran = doc["duration_us"] / 1e6
    assert stall < ran <= stall + interval + timeout + 0.5, ran
    aborted = doc["aborted"]
    assert aborted["expression"] == "p99 < 50ms"
    assert aborted["first_interval"] == aborted["last_interval"]
    assert aborted["to_us"] == (aborted["last_interval"] + 1) * 500000
    assert stall <= aborted["to_us"] / 1e6 <= stall + interval + timeout
    assert doc["end"] == {"reason": "aborted", "signal": None, "exit_status": None}
    # the requests caught in the stall time out, those of the interval that
    # ended the run at least (the others may fall in the next)
    assert 1 <= doc["errors"]["timeout"] <= 4
    assert doc["thresholds"][0]["passed"] is False
    # the full report of what ran, then why it stopped
    assert run.report["requests"] == doc["requests"] > 0
    assert re.search(r"^Threshold p99 < 50ms: FAILED \(p99 = .*; failed in 1 interval in a row, "
                     r".* the run was stopped\)$", run.stdout, re.M)
    seen = srv.stats()
    assert seen["responses"] == doc["requests"]
    # the stalled ones, and those the reopened connections sent since
    assert doc["requests"] + 4 <= seen["requests"] <= doc["requests"] + 8


def test_abort_after_n_failing_intervals_in_a_row(servers, tmp_path):
    out = os.path.join(tmp_path, "r.json")
    run = volley("-t1", "-c4", "-d10s", "--abort-on-fail", "--abort-after", 3, "--interval",
                 "200ms", "--threshold", "p99 < 10ms", "--threshold", "errors < 1",
                 "--json", out, servers["slow"].url)
    assert run.returncode == 2, run
    with open(out) as f:
        doc = json.load(f)
    assert doc["aborted"] == {"expression": "p99 < 10ms", "first_interval": 0,
                              "last_interval": 2, "from_us": 0, "to_us": 600000}
    assert 0.6 <= doc["duration_us"] / 1e6 < 2.5
    assert [t["passed"] for t in doc["thresholds"]] == [False, True]


def test_abort_on_a_count_once_the_total_passes_its_limit(servers, tmp_path):
    # errors < 50: the 503s add up over intervals until the 50th.
    out = os.path.join(tmp_path, "r.json")
    run = volley("-t1", "-c1", "-R", 400, "-d10s", "--abort-on-fail", "--interval", "100ms",
                 "--threshold", "errors < 50", "--json", out, servers["503"].url)
    assert run.returncode == 2, run
    with open(out) as f:
        doc = json.load(f)
    # 100 errors a second: the total passes 50 in the sixth interval or so
    assert 3 <= doc["aborted"]["last_interval"] <= 12
    assert doc["errors"]["status"] >= 50
    assert doc["duration_us"] < 3e6


def test_abort_options_need_their_counterparts(testd):
    srv = testd()
    for args, message in (
            (["--abort-on-fail"], "volley: --abort-on-fail needs --threshold"),
            (["--abort-after", "2", "--threshold", "p99<1s"],
             "volley: --abort-after needs --abort-on-fail"),
            (["--abort-on-fail", "--abort-after", "0", "--threshold", "p99<1s"],
             "volley: invalid --abort-after: '0' (must be at least 1)")):
        run = volley("-d300ms", *args, srv.url)
        assert run.returncode == 1 and run.stderr.splitlines()[0] == message, run
    assert srv.stats()["connections"] == 0


def test_merge_checks_thresholds_on_the_whole(testd, tmp_path):
    srv = testd("--status-every", "4:503")
    _, files = shards(2, ["-t1", "-c2", "-n", 400], srv.url, str(tmp_path), start_in=0.5)
    out = os.path.join(tmp_path, "whole.json")
    run = volley("merge", "--threshold", "requests >= 400", "--threshold", "status:503 <= 99",
                 "--json", out, *files)
    assert run.returncode == 2, run
    with open(out) as f:
        doc = json.load(f)
    assert [(t["expression"], t["passed"], t["value"]) for t in doc["thresholds"]] == [
        ("requests >= 400", True, 400), ("status:503 <= 99", False, 100)]
    assert "Threshold status:503 <= 99: FAILED (status:503 = 100)" in run.stdout
    run = volley("merge", "--threshold", "success >= 75%", *files)
    assert run.returncode == 0, run
    run = volley("merge", "--threshold", "p99", *files)
    assert run.returncode == 1
    assert run.stderr.splitlines()[0] == \
        "volley merge: invalid threshold 'p99': expected <, <=, > or >= after 'p99'"


def test_connect_counts_the_connections_of_the_warmup(testd, tmp_path):
    # The keep-alive connections open in the warm-up and the measured part
    # goes on over them: connect is measured over both, in a run and in the
    # merge of its shards.
    srv, other = testd(), testd()
    run = volley("-t1", "-c2", "-d500ms", "--warmup", "500ms", "--threshold", "connect < 1s",
                 "--threshold", "connect > 1s", "--json", "r.json", srv.url, cwd=tmp_path)
    assert run.returncode == 2, run
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["connect_time"]["count"] == 0 and doc["warmup"]["connect_time"]["count"] == 2
    p99 = doc["warmup"]["connect_time"]["percentiles"]["99"]
    assert [(t["passed"], t["value"]) for t in doc["thresholds"]] == [(True, p99), (False, p99)]
    assert srv.stats()["connections"] == 3  # the probe, and the two
    _, files = shards(2, ["-t1", "-c2", "-d500ms", "--warmup", "500ms"], other.url,
                      str(tmp_path), start_in=0.5)
    run = volley("merge", "--threshold", "connect < 1s", "--json", "m.json", *files,
                 cwd=tmp_path)
    assert run.returncode == 0, run
    both = HdrHistogram(1, 24 * 3600 * 10**6, 3)
    for path in files:
        with open(path) as f:
            both.decode_and_add(json.load(f)["warmup"]["connect_time"]["hdr_histogram"])
    assert both.get_total_count() == 2
    assert json.loads((tmp_path / "m.json").read_text())["thresholds"][0]["value"] == \
        both.get_value_at_percentile(99)


def test_docs_json_names_the_new_fields(testd, tmp_path):
    # Every object these options fill in, and each key in it, is in docs/json.md.
    srv = testd()
    out = os.path.join(tmp_path, "r.json")
    run = volley("-t1", "-c1", "-R", 100, "--warmup", "200ms", "--stages", "1s:100",
                 "--abort-on-fail", "--interval", "100ms", "--threshold", "requests < 1",
                 "--json", out, srv.url)
    assert run.returncode == 2, run
    with open(out) as f:
        doc = json.load(f)
    assert doc["aborted"] and doc["warmup"] and doc["thresholds"] and doc["options"]["stages"]
    with open(os.path.join(ROOT, "docs", "json.md")) as f:
        text = f.read()
    names = field_names({k: doc[k] for k in ("warmup", "thresholds", "aborted")})
    names |= field_names(doc["options"])
    missing = sorted(n for n in names if f"`{n}`" not in text and f'"{n}"' not in text)
    assert not missing, missing
