"""scripts/volley-report: the HTML page of each kind of volley output (a
result, a timeline in JSON Lines and in CSV, an interval log, a merged fleet
result, a sweep) and of several runs drawn over each other, loaded in
Debian's chromium (headless, driven through the DevTools protocol): no
console message, no request but the page's own, charts drawn, the figures
the same as the JSON's, readable on a phone and printed; text from a file
that is hostile HTML escaped; compare's verdicts and exit statuses.
SPDX-License-Identifier: MIT
"""
import json
import os
import re
import struct
import subprocess
import sys

import pytest

from chromium import Chromium
from conftest import ROOT, VOLLEY, load_script, mutants, one_line_or_done, read_timeline, volley
from conftest import Testd as Server  # not collected as a test class
from test_multi import shards

REPORT = os.path.join(ROOT, "scripts", "volley-report")
SWEEP = os.path.join(ROOT, "scripts", "volley-sweep")


def report(*args, cwd=None):
    return subprocess.run([sys.executable, REPORT] + [str(a) for a in args], capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL, cwd=cwd)


def ok(*args):
    run = volley(*[str(a) for a in args])
    assert run.returncode in (0, 2), run.stdout + run.stderr
    return run


def load(path):
    with open(path) as f:
        return json.load(f)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """volley's outputs of every kind, from runs against volley-testd: a
    closed run (result, JSON Lines timeline, interval log, --server-pid), a
    run at a constant rate (result, CSV timeline, thresholds, one failing), a
    ramp (--stages), a run in two shards merged, and a sweep."""
    out = str(tmp_path_factory.mktemp("report"))
    p = (lambda name: os.path.join(out, name))
    srv = Server(out, "--delay", "1", "--status-every", "10:503")
    try:
        ok("-t1", "-c4", "-d1s", "--interval", "200ms", "--json", p("closed.json"), "--timeline",
           p("closed.jsonl"), "--hdr-log", p("closed.hlog"), "--server-pid", srv.proc.pid,
           srv.url + "/")
        ok("-t1", "-c4", "-d1s", "-R", "500", "--interval", "200ms", "--json", p("rate.json"),
           "--timeline", p("rate.csv"), "--threshold", "p99 < 1us", "--threshold",
           "errors < 50%", srv.url + "/")
        ok("-t1", "-c8", "-R", "100", "--stages", "1s:600,500ms:0", "--interval", "100ms",
           "--json", p("ramp.json"), "--timeline", p("ramp.jsonl"), srv.url + "/")
        _, parts = shards(2, ["-t1", "-c4", "-d1s", "--interval", "200ms"], srv.url + "/", out,
                          extra=lambda i: ["--timeline", p(f"shard{i}.jsonl")])
        ok("merge", "--json", p("fleet.json"), "--timeline", p("fleet.jsonl"), *parts,
           p("shard0.jsonl"), p("shard1.jsonl"))
        proc = subprocess.run([sys.executable, SWEEP, "-d", "500ms", "-c", "1,2", "-n", "sw",
                               "-o", out, srv.url + "/", "--", "--server-pid",
                               str(srv.proc.pid)],
                              capture_output=True, text=True, timeout=120,
                              env=dict(os.environ, VOLLEY=VOLLEY))
        assert proc.returncode == 0, proc.stdout + proc.stderr
    finally:
        srv.stop()
    return out


@pytest.fixture(scope="module")
def browser():
    b = Chromium()
    yield b
    b.close()


def page(browser, path, **kw):
    """The page at path in a new tab, checked to have loaded without a
    console message and without a request but its own."""
    tab = browser.open(path, **kw)
    assert tab.problems() == []
    assert tab.requests() == ["file://" + os.path.abspath(path)]
    return tab


def png_size(data):
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def figure(tab, key, run=0):
    """The data-value of the summary cell of key for run."""
    return tab.eval(f"(() => {{ const c = document.querySelector('td[data-key=\"{key}\"]"
                    f"[data-run=\"{run}\"]'); return c && c.dataset.value; }})()")


def charts(tab):
    """[(title, number of paths or bars drawn, rows of its data table)] for
    every chart of the page."""
    return tab.eval("""[...document.querySelectorAll('figure')].map(f => [
        f.querySelector('svg title').textContent,
        f.querySelectorAll('svg.chart path.series, svg.chart circle, svg.chart rect:not(.frame)')
         .length,
        f.querySelectorAll('table tbody tr').length])""")


def check_result_figures(tab, doc, run=0):
    assert int(figure(tab, "requests", run)) == doc["requests"]
    assert float(figure(tab, "rps", run)) == doc["throughput"]["requests_per_sec"]
    assert int(figure(tab, "duration_us", run)) == doc["duration_us"]
    assert float(figure(tab, "success", run)) == doc["success"]["percent"]
    assert int(figure(tab, "attempts", run)) == doc["success"]["attempts"]
    for p in ("50", "99", "99.9", "100"):
        assert int(figure(tab, f"latency.{p}", run)) == doc["latency"]["percentiles"][p]
    for cls, n in doc["errors"].items():
        assert int(figure(tab, f"errors.{cls}", run)) == n
    for code, n in doc["status_codes"].items():
        assert int(figure(tab, f"status_codes.{code}", run)) == n


def test_a_result_with_its_timeline_and_interval_log(data, browser, tmp_path):
    out = tmp_path / "r.html"
    files = [os.path.join(data, f) for f in ("closed.json", "closed.jsonl", "closed.hlog")]
    proc = report("-o", out, *files)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"{out}\n"
    doc = load(files[0])
    tab = page(browser, out)
    check_result_figures(tab, doc)
    assert doc["status_codes"]["503"] > 0
    # one run: the three files went together
    assert tab.eval("document.querySelectorAll('#runs h3').length") == 1
    assert tab.eval("document.querySelector('#runs .cmd').textContent") == (
        f"volley -t 1 -c 4 -d 1s --server-pid {doc['server']['pids'][0]} {doc['options']['url']}")
    drawn = {title: (n, rows) for title, n, rows in charts(tab)}
    assert drawn["Latency by percentile"][0] == 1 and drawn["Latency by percentile"][1] > 20
    intervals = len(read_timeline(files[1])[1])
    assert drawn["Requests per second (closed)"][1] == intervals + 1  # and the run's end
    assert drawn["Requests per second (closed)"][0] == 3  # responses, status < 400, server CPU
    assert drawn["Errors per second (closed)"][0] == 2
    assert drawn["CPU time per request"] == (2, 1)
    server = float(figure(tab, "server.cpu_us_per_request"))
    assert server == doc["server"]["cpu_us_per_request"]
    assert float(figure(tab, "qps_per_core")) == pytest.approx(1e6 / server)
    width, height = png_size(tab.screenshot())
    assert width == 1000 and height > 3000


def test_a_timeline_alone_in_json_lines_and_in_csv(data, browser, tmp_path):
    for name in ("closed.jsonl", "rate.csv"):
        out = tmp_path / f"{name}.html"
        proc = report("-o", out, os.path.join(data, name))
        assert proc.returncode == 0, proc.stderr
        tab = page(browser, out)
        doc = load(os.path.join(data, name.split(".")[0] + ".json"))
        # the intervals add up to the run
        assert int(figure(tab, "requests")) == doc["requests"]
        assert int(figure(tab, "errors.status")) == doc["errors"]["status"]
        titles = [t for t, n, _ in charts(tab) if n]
        assert titles[:2] == [f"Requests per second ({name.split('.')[0]})",
                              f"Latency per interval ({name.split('.')[0]})"]
    # the rate run's timeline has its rate sent and asked for
    assert tab.eval("[...document.querySelectorAll('figure')[0].querySelectorAll('thead th')]"
                    ".map(t => t.textContent)") == [
        "time since the start (s)", "responses/s", "responses with status < 400/s",
        "requests sent/s", "rate asked for/s"]


def test_an_interval_log_alone(data, browser, tmp_path):
    out = tmp_path / "h.html"
    proc = report("-o", out, os.path.join(data, "closed.hlog"))
    assert proc.returncode == 0, proc.stderr
    tab = page(browser, out)
    doc = load(os.path.join(data, "closed.json"))
    # its intervals hold every latency sample: the run's histogram again
    assert int(figure(tab, "requests")) == doc["latency"]["count"]
    for p in ("50", "99", "100"):
        assert int(figure(tab, f"latency.{p}")) == doc["latency"]["percentiles"][p]
    assert [t for t, n, _ in charts(tab) if n][0] == "Latency by percentile"


def test_a_ramp_and_a_merged_fleet(data, browser, tmp_path):
    out = tmp_path / "f.html"
    proc = report("-o", out, *[os.path.join(data, f) for f in ("ramp.json", "ramp.jsonl",
                                                              "fleet.json", "fleet.jsonl")])
    assert proc.returncode == 0, proc.stderr
    tab = page(browser, out)
    ramp, fleet = load(os.path.join(data, "ramp.json")), load(os.path.join(data, "fleet.json"))
    check_result_figures(tab, ramp, 0)
    check_result_figures(tab, fleet, 1)
    assert "--stages 1s:600,0.5s:0" in tab.eval("document.querySelector('#runs .cmd')"
                                                 ".textContent")
    drawn = {title: n for title, n, _ in charts(tab)}
    assert drawn["Against the rate asked for (ramp)"] > 10
    # the parts of the fleet, each with its shard and its requests
    parts = tab.eval("[...document.querySelectorAll('#runs table')].pop().querySelectorAll("
                     "'tbody tr').length")
    assert parts == 2 and sum(p["requests"] for p in fleet["inputs"]) == fleet["requests"]
    # the rate asked for along the ramp: 100/s, up to 600/s at 1 s, down to 0
    table = tab.eval("[...document.querySelectorAll('figure')].find(f => f.querySelector("
                     "'svg title').textContent == 'Requests per second (ramp)').querySelector("
                     "'table').innerText")
    rows = {r.split("\t")[0]: r.split("\t")[-1] for r in table.splitlines()[2:]}
    assert rows["0"] == "100" and rows["1"] == "600" and rows["0.5"] == "350"


def test_several_runs_are_drawn_over_each_other(data, browser, tmp_path):
    out = tmp_path / "o.html"
    files = [os.path.join(data, f) for f in ("closed.json", "closed.jsonl", "rate.json",
                                             "rate.csv")]
    proc = report("-o", out, "-t", "before and after", *files)
    assert proc.returncode == 0, proc.stderr
    tab = page(browser, out)
    assert tab.eval("document.title") == "before and after"
    check_result_figures(tab, load(files[0]), 0)
    check_result_figures(tab, load(files[2]), 1)
    drawn = {title: n for title, n, _ in charts(tab)}
    assert drawn["Latency by percentile"] == 3  # both, and the rate run's uncorrected
    assert drawn["Responses per second, every run"] == 2
    assert drawn["p99 latency per interval, every run"] == 2
    # the thresholds and their verdicts, as volley gave them
    verdicts = tab.eval("[...document.querySelectorAll('td[data-key=threshold]')]"
                        ".map(t => t.dataset.value)")
    assert verdicts == [str(t["passed"]).lower() for t in load(files[2])["thresholds"]]
    assert tab.eval("document.querySelector('.warnings').textContent").count("threshold") == 1


def test_a_sweep(data, browser, tmp_path):
    out = tmp_path / "s.html"
    proc = report("-o", out, os.path.join(data, "sw.dat"))
    assert proc.returncode == 0, proc.stderr
    tab = page(browser, out)
    drawn = {title: (n, rows) for title, n, rows in charts(tab)}
    assert drawn["Throughput"] == (3, 2)  # a line and two points, two levels
    assert "Server CPU per request, and requests/s per server core" in drawn
    with open(os.path.join(data, "sw.dat")) as f:
        rows = [line.split() for line in f if not line.startswith("#")]
    table = tab.eval("[...document.querySelectorAll('#sweeps table')].pop().innerText")
    assert [r.split("\t")[0] for r in table.splitlines()[2:]] == [r[0] for r in rows]


def test_readable_on_a_phone_and_printed(data, browser, tmp_path):
    out = tmp_path / "p.html"
    proc = report("-o", out, *[os.path.join(data, f) for f in ("closed.json", "closed.jsonl",
                                                              "sw.dat")])
    assert proc.returncode == 0, proc.stderr
    tab = page(browser, out, width=390, height=800, mobile=True)
    # nothing wider than the screen but the charts and tables, which scroll
    assert tab.eval("document.documentElement.scrollWidth") <= 390
    assert tab.eval("Math.min(...[...document.querySelectorAll('svg.chart text')]"
                    ".map(t => t.getBoundingClientRect().height))") >= 9
    tab = page(browser, out, media="print")
    pdf = tab.pdf()
    assert pdf[:5] == b"%PDF-" and pdf.count(b"/Type /Page") >= 3


def test_text_from_a_file_is_escaped(data, browser, tmp_path):
    """A result whose URL, script and headers hold HTML and script, in a
    file whose name does too: the page shows them as text, runs nothing,
    fetches nothing."""
    doc = load(os.path.join(data, "rate.json"))
    evil = "http://x/</script><script>alert(1)</script>\"'<img src=x onerror=alert(2)>&amp;"
    doc["options"]["url"] = evil
    doc["options"]["script"] = "<style>body{display:none}</style>.lua"
    doc["options"]["headers"] = [["X-<b>", "</table><iframe src=//x>"]]
    doc["thresholds"][0]["expression"] = "<svg onload=alert(3)>"
    name = tmp_path / "<i>x<b>'\".json"
    name.write_text(json.dumps(doc))
    out = tmp_path / "e.html"
    proc = report("-o", out, name)
    assert proc.returncode == 0, proc.stderr
    with open(out) as f:
        html = f.read()
    assert "<script" not in html and "<img" not in html and "<iframe" not in html
    tab = page(browser, out)
    assert tab.eval("document.querySelectorAll('script, img, iframe, b, i').length") == 0
    assert tab.eval("document.querySelector('#runs td code').textContent") == evil
    command = tab.eval("document.querySelector('#runs .cmd').textContent")
    assert "-H 'X-<b>: </table><iframe src=//x>'" in command
    assert "-s '<style>body{display:none}</style>.lua'" in command
    assert tab.eval("document.querySelector('#runs h3').textContent") == "<i>x<b>'\""
    assert tab.eval("getComputedStyle(document.body).display") == "block"


@pytest.mark.parametrize("change,message", [
    (lambda d: d["latency"].update(hdr_histogram="HISTFAAA!!!!"),
     "latency.hdr_histogram: not base64"),
    (lambda d: d["success"].pop("attempts"), "success.attempts: missing"),
    (lambda d: d["latency"]["percentiles"].update({"99.9": "x"}),
     "latency.percentiles.99.9: not a count or null"),
    (lambda d: d.update(server={"cpu_s": 1, "cpu_us_per_request": 1, "pids": ["x"]}),
     "server.pids: not a list of process ids"),
])
def test_a_damaged_input_is_one_line(data, tmp_path, change, message):
    doc = load(os.path.join(data, "closed.json"))
    change(doc)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    proc = report("-o", tmp_path / "x.html", path)
    assert proc.returncode == 1
    assert proc.stderr.splitlines()[0] == f"volley-report: {path}: {message}"
    assert len(proc.stderr.splitlines()) == 4  # and the usage
    assert not os.path.exists(tmp_path / "x.html")


# --------------------------------------------------------------------------
# compare
# --------------------------------------------------------------------------

def run_pair(tmp_path, name, delay_ms, srv=None):
    """A closed run of 3 s against volley-testd answering in delay_ms: its
    result and timeline."""
    srv = srv or Server(str(tmp_path), "--delay", delay_ms)
    try:
        ok("-t1", "-c8", "-d3s", "--interval", "250ms", "--json", tmp_path / f"{name}.json",
           "--timeline", tmp_path / f"{name}.jsonl", srv.url + "/")
    finally:
        srv.stop()
    return tmp_path / f"{name}.json"


def test_compare_identical_runs_is_no_regression(data, tmp_path):
    a = os.path.join(data, "closed.json")
    proc = report("compare", a, a, "--json", tmp_path / "v.json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.splitlines()[-1] == "verdict: no regression beyond the noise and the limits"
    verdicts = load(tmp_path / "v.json")
    assert verdicts["regressed"] is False
    assert [v["figure"] for v in verdicts["figures"]] == ["rps", "mean", "p50", "p90", "p99",
                                                         "p99.9", "errors"]
    assert all(v["change"] == 0 and v["verdict"] == "no change" for v in verdicts["figures"])
    # the timeline the result names is read for the noise
    assert verdicts["figures"][0]["noise_from"].endswith(" intervals")


def test_compare_finds_a_server_made_20_percent_slower(tmp_path):
    # Its answers take 24 ms instead of 20. Should the machine be much busier
    # during the second run, compare says so and gives no verdict: run both
    # again (three times at most).
    for _ in range(3):
        base = run_pair(tmp_path, "base", 20)
        slower = run_pair(tmp_path, "slower", 24)
        proc = report("compare", base, slower, "--json", "-")
        verdicts = json.loads(proc.stdout)
        if not verdicts["inconclusive"]:
            break
    assert proc.returncode == 2, proc.stdout + proc.stderr
    regressed = [v["figure"] for v in verdicts["figures"] if v["regressed"]]
    # the median at least; what the machine's noise leaves of the others
    assert "p50" in regressed and set(regressed) <= {"rps", "p50", "p90", "p99"}
    assert proc.stderr.splitlines()[-1] == f"verdict: REGRESSED ({', '.join(regressed)})"
    p50 = verdicts["figures"][2]
    assert 15 < p50["change"] < 25 and p50["beyond_noise"] and p50["limit"] == 10
    # and turned round, it is a speed-up
    proc = report("compare", slower, base)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(r"^p50 .* -\d+\.\d%.*: better$", proc.stdout, re.M), proc.stdout
    # a limit wider than the change: no regression
    proc = report("compare", "--max-regression", "rps=40%,p50=40%,p90=40%,p99=off", base, slower)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_compare_two_runs_of_one_server_is_no_regression(tmp_path):
    """Two runs of the same server (measured 20 times by hand on the shared
    machine, see docs/volley-report.1): each figure changes by less than its
    noise or its limit."""
    srv = Server(str(tmp_path), "--delay", 20)
    try:
        for i in range(3):
            a = run_pair(tmp_path, f"a{i}", 20, srv=Keep(srv))
            b = run_pair(tmp_path, f"b{i}", 20, srv=Keep(srv))
            proc = report("compare", a, b)
            assert proc.returncode == 0, proc.stdout + proc.stderr
    finally:
        srv.stop()


class Keep:
    """A server that run_pair() leaves running."""

    def __init__(self, srv):
        self.url = srv.url

    def stop(self):
        pass


def test_compare_sweeps_level_by_level(tmp_path):
    header = ("# volley-sweep {n}\n# url: http://h/\n# threads: 2 (at most one per connection), "
              "duration: 10s\n")
    rows = {"a": ["10 1000 1.0 2.0 100 1000 980 1020 1.9 2.1 NaN 5 3 -",
                  "20 2000 1.0 2.0 100 2000 1960 2040 1.9 2.1 NaN 5 3 -"],
            "b": ["10 1005 1.0 2.02 100 1005 985 1025 1.9 2.1 NaN 5 3 -",
                  "20 1500 1.3 3.0 99.5 1490 1480 1520 2.9 3.1 NaN 5 3 -"]}
    for n, lines in rows.items():
        (tmp_path / f"{n}.dat").write_text(header.format(n=n) + "\n".join(lines) + "\n")
    proc = report("compare", tmp_path / "a.dat", tmp_path / "b.dat")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stdout.splitlines()[-1] == \
        "verdict: REGRESSED (rps at 20, p99 at 20, errors at 20)"
    assert re.search(r"^rps at 10 .* \+0\.5%  \(noise ±[\d.]+%, limit 5%\): within the noise$",
                     proc.stdout, re.M), proc.stdout


@pytest.mark.parametrize("args,message", [
    ([], "the following arguments are required: -o/--output, FILE"),
    (["-o", "x.html"], "the following arguments are required: FILE"),
    (["compare", "a.json"], "the following arguments are required: NEW"),
    (["compare", "--max-regression", "rps=5", "{closed}", "{closed}"], None),
    (["compare", "--max-regression", "fast=5%", "{closed}", "{closed}"],
     "invalid --max-regression: 'fast=5%' (FIGURE=LIMIT, a figure of rps, mean, p50, p90, p99, "
     "p99.9, errors)"),
    (["compare", "--max-regression", "errors=1%", "{closed}", "{closed}"],
     "invalid --max-regression: 'errors=1%' (errors in percentage points, as errors=0.1)"),
    (["compare", "{closed}", "{sweep}"], "compare a result with a result, or a sweep with a sweep"),
    (["compare", "{timeline}", "{closed}"],
     "{timeline}: compare needs a --json result or a sweep's .dat"),
    (["-o", "x.html", "/nonexistent.json"], "cannot read /nonexistent.json: No such file or "
                                            "directory"),
])
def test_usage_errors_are_one_line(data, tmp_path, args, message):
    files = {"closed": os.path.join(data, "closed.json"), "sweep": os.path.join(data, "sw.dat"),
             "timeline": os.path.join(data, "closed.jsonl")}
    proc = report(*[a.format(**files) for a in args], cwd=tmp_path)
    if message is None:
        assert proc.returncode == 0, proc.stderr
        return
    assert proc.returncode == 1
    assert proc.stderr.splitlines()[0] == "volley-report: " + message.format(**files)
    assert proc.stderr.splitlines()[1].startswith("usage: volley-report ")


def test_every_member_of_a_result_and_a_timeline_broken_in_turn(data, tmp_path, capsys):
    """A page, or one line saying what is wrong with the file; never a
    traceback."""
    # (three of the five changes of each member: the page takes a while)
    doc = load(os.path.join(data, "fleet.json"))
    cases = [(f"result {where}", "r.json", json.dumps(d)) for where, d in mutants(doc)
             if where.endswith(("= remove", "= x", "= -1"))]
    with open(os.path.join(data, "ramp.jsonl")) as f:
        lines = [json.loads(line) for line in f]
    for where, d in mutants(lines[1]):
        cases.append((f"interval {where}", "t.jsonl",
                      "".join(json.dumps(r) + "\n" for r in [lines[0], d] + lines[2:])))
    with open(os.path.join(data, "closed.hlog")) as f:
        hlog = f.read().splitlines(keepends=True)
    for i, line in enumerate(hlog):
        for change in (lambda s: s[:len(s) // 2] + "\n", lambda s: s.replace(",", ",x", 1),
                       lambda s: ""):
            cases.append((f"interval log line {i + 1}", "h.hlog",
                          "".join(hlog[:i] + [change(line)] + hlog[i + 1:])))
    assert len(cases) > 500
    main = load_script("volley-report").main
    one_line_or_done(main, "volley-report", lambda work, path: ["-o", work / "r.html", path],
                     cases, tmp_path, capsys)
    (tmp_path / "compare").mkdir()
    one_line_or_done(main, "volley-report", lambda work, path: ["compare", path, path],
                     [c for c in cases if c[1] == "r.json"][::3], tmp_path / "compare", capsys)
