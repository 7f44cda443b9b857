"""Results over time: --timeline (JSON Lines and CSV) and --hdr-log against the
--json totals and an independent HdrHistogram implementation (the PyPI
hdrhistogram package, its decoder and its interval log reader); stalls of a
freezing server in the right intervals; --server-pid against /proc read here;
-d 0 until Ctrl-C; and the errors of the new options.
SPDX-License-Identifier: MIT
"""
import csv
import datetime
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.parse

import pytest
from hdrh.histogram import HdrHistogram
from hdrh.log import HistogramLogReader

from conftest import (ROOT, TESTD, TIME_FORM, VOLLEY, check_sanitizer, read_timeline, run_json,
                      sigint_default, volley, volley_signalled)

DAY_US = 24 * 3600 * 10**6


def new_hist():
    return HdrHistogram(1, DAY_US, 3)


def read_csv(path):
    """(the comment line's key=value pairs, header, rows as dicts of strings)."""
    with open(path) as f:
        comment = f.readline()
        header = f.readline().rstrip("\n").split(",")
        lines = f.readlines()
    rows = [dict(zip(header, line.rstrip("\n").split(","))) for line in lines[:-1]]
    # the end record, a comment line as the first
    end = re.fullmatch(r"# end: reason=completed signal= exit_status= duration_us=\d+ "
                       r"intervals=(\d+) requests=(\d+)\n", lines[-1])
    assert end and int(end.group(1)) == len(rows), lines[-1]
    assert int(end.group(2)) == sum(int(r["requests"]) for r in rows), lines[-1]
    # key=value pairs, the values percent-encoded
    m = re.fullmatch(r"# volley \S+ timeline: ([!-~ ]*)\n", comment)
    assert m, comment
    pairs = [kv.split("=", 1) for kv in m.group(1).split(" ")]
    assert all(re.fullmatch(r"[^%,\"]*(%[0-9A-F]{2}[^%,\"]*)*", v) for _, v in pairs), comment
    params = {k: urllib.parse.unquote(v, errors="strict") for k, v in pairs}
    assert list(params)[-1] == "url"
    return params, header, rows


def flatten(record, prefix=""):
    """A record's keys as CSV columns: nested objects joined with '_'."""
    keys = []
    for key, value in record.items():
        if isinstance(value, dict):
            keys += flatten(value, prefix + key + "_")
        elif key not in ("type", "hdr_histogram"):
            keys.append(prefix + key)
    return keys


def check_intervals(records, interval_us, duration_us):
    """Numbered from 0, each starting where the last ended, all of full length
    but the last, which ends with the run."""
    assert [r["interval"] for r in records] == list(range(len(records)))
    for r in records:
        assert r["start_us"] == r["interval"] * interval_us
    for r in records[:-1]:
        assert r["length_us"] == interval_us and r["short"] is False
    last = records[-1]
    assert last["start_us"] + last["length_us"] == duration_us
    assert last["short"] == (last["length_us"] < interval_us)


def percentile_fields(latency):
    h = HdrHistogram.decode(latency["hdr_histogram"])
    assert h.get_total_count() == latency["count"]
    if latency["count"]:
        for p in (50, 90, 99):
            assert latency[f"p{p}"] == h.get_value_at_percentile(p)
        assert abs(latency["max"] - h.get_max_value()) <= h.get_max_value() / 1000
    else:
        assert latency["p99"] is None and latency["max"] is None
    return h


# --------------------------------------------------------------------------
# The intervals add up to the run
# --------------------------------------------------------------------------

@pytest.mark.parametrize("rate", [None, "2000"])
def test_pipelined_responses_read_at_once_are_each_in_their_interval(testd, tmp_path, rate):
    """-m 16 over HTTP/1.1: a batch's responses come in one read, with one
    time, and are recorded together; each is still a sample of latency and
    of ttfb (with -R of their uncorrected figures too) in the interval it
    ended in, and the intervals add up to the run's, slot for slot."""
    srv = testd()
    timeline = os.path.join(tmp_path, "t.jsonl")
    run, doc = run_json(tmp_path, "-t1", "-c4", "-m", "16", "-d1s", "--interval", "200ms",
                        *(["-R", rate] if rate else []), "--timeline", timeline, srv.url + "/")
    _, records = read_timeline(timeline)
    stats = srv.stop()
    assert doc["options"]["pipeline"] == 16 and 16 < doc["requests"] <= stats["requests"], doc
    keys = ["latency", "ttfb"] + (["latency_uncorrected", "ttfb_uncorrected"] if rate else [])
    for key in keys:
        added = new_hist()
        for r in records:
            assert r[key]["count"] == r["requests"], (key, r)
            added.add(percentile_fields(r[key]))
        final = HdrHistogram.decode(doc[key]["hdr_histogram"])
        assert list(added.counts) == list(final.counts), key
        assert doc[key]["count"] == doc["requests"], key


def test_intervals_add_up_to_the_totals_and_the_final_histogram(testd, tmp_path):
    srv = testd("--status-every", "4:503")
    timeline, hlog = os.path.join(tmp_path, "t.jsonl"), os.path.join(tmp_path, "t.hlog")
    run, doc = run_json(tmp_path, "-t2", "-c4", "-d1500ms", "--interval", "250ms",
                        "--timeline", timeline, "--hdr-log", hlog, srv.url + "/")
    head, records = read_timeline(timeline)
    assert head == {"type": "run", "volley": doc["volley"]["version"],
                    "start_time": doc["start_time"], "start_time_us": doc["start_time_us"],
                    "shard": None, "url": srv.url + "/", "threads": 2,
                    "connections": 4, "duration_us": 1500000, "requests": None, "rate": None,
                    "script": None, "interval_us": 250000,
                    "intervals_start_us": head["intervals_start_us"]}
    # counted from the run's start, but for the microseconds between two clocks
    assert abs(head["intervals_start_us"] - doc["start_time_us"]) < 1000
    check_intervals(records, 250000, doc["duration_us"])
    assert 6 <= len(records) <= 7

    # Every count adds up exactly to the run's.
    total = lambda key: sum(r[key] for r in records)  # noqa: E731
    assert total("requests") == doc["requests"] == run.report["requests"]
    assert total("bytes") == doc["bytes"]
    assert total("connects") == doc["connects"] and total("reconnects") == doc["reconnects"]
    for cls in doc["errors"]:
        assert sum(r["errors"][cls] for r in records) == doc["errors"][cls]
    by_class = {}
    for code, n in doc["status_codes"].items():
        by_class[code[0] + "xx"] = by_class.get(code[0] + "xx", 0) + n
    for cls in ("1xx", "2xx", "3xx", "4xx", "5xx", "other"):
        assert sum(r["status"][cls] for r in records) == by_class.get(cls, 0)
    assert by_class["5xx"] > 0

    # The interval histograms, decoded and added by another implementation,
    # are the final histogram, slot for slot.
    added = new_hist()
    for r in records:
        assert r["requests_per_sec"] == pytest.approx(r["requests"] * 1e6 / r["length_us"])
        added.add(percentile_fields(r["latency"]))
        assert r["sent_per_sec"] is None and r["latency_uncorrected"] is None
        assert r["server_cpu_s"] is None
    final = HdrHistogram.decode(doc["latency"]["hdr_histogram"])
    assert list(added.counts) == list(final.counts)
    assert added.get_total_count() == doc["latency"]["count"] == doc["requests"]

    # The HdrHistogram interval log: the same intervals, read by its reader.
    reader = HistogramLogReader(hlog, new_hist())
    logged = []
    while (h := reader.get_next_interval_histogram()) is not None:
        logged.append(h)
    assert len(logged) == len(records)
    assert sum(h.get_total_count() for h in logged) == doc["latency"]["count"]
    for h, r in zip(logged, records):
        assert h.get_total_count() == r["latency"]["count"]
        assert h.get_start_time_stamp() / 1000 == pytest.approx(
            reader.get_start_time_sec() + r["start_us"] / 1e6, abs=0.002)
        assert (h.get_end_time_stamp() - h.get_start_time_stamp()) / 1000 == pytest.approx(
            r["length_us"] / 1e6, abs=0.002)
    with open(hlog) as f:
        text = f.read()
    assert text.startswith("#[Histogram log format version 1.3]\n#[StartTime: ")

    # --json's summary of the intervals.
    full = [r["requests_per_sec"] for r in records if not r["short"]]
    summary = doc["intervals"]
    assert summary["interval_us"] == 250000 and summary["count"] == len(records)
    assert summary["timeline"] == timeline and summary["hdr_log"] == hlog
    assert summary["requests_per_sec"]["count"] == len(full)
    assert summary["requests_per_sec"]["min"] == pytest.approx(min(full))
    assert summary["requests_per_sec"]["max"] == pytest.approx(max(full))
    assert summary["requests_per_sec"]["mean"] == pytest.approx(sum(full) / len(full))
    p99s = [r["latency"]["p99"] for r in records if r["latency"]["count"]]
    assert summary["latency_p99"] == {"min": min(p99s), "max": max(p99s)}
    assert doc["server"] is None
    assert srv.stats()["responses"] >= doc["requests"]


def test_csv_has_the_same_columns_and_the_rate_figures(testd, tmp_path):
    srv = testd()
    csv, timeline = os.path.join(tmp_path, "t.CSV"), os.path.join(tmp_path, "t.jsonl")
    run, doc = run_json(tmp_path, "-t1", "-c4", "-d1s", "-R", "400", "--interval", "200ms",
                        "--timeline", csv, srv.url + "/")
    params, header, rows = read_csv(csv)
    assert params == {"start_time": doc["start_time"],
                      "start_time_us": str(doc["start_time_us"]), "shard": "",
                      "threads": "1", "connections": "4",
                      "duration_us": "1000000", "requests": "", "rate": "400",
                      "interval_us": "200000",
                      "intervals_start_us": params["intervals_start_us"], "script": "",
                      "url": srv.url + "/"}
    assert abs(int(params["intervals_start_us"]) - doc["start_time_us"]) < 1000
    assert sum(int(r["requests"]) for r in rows) == doc["requests"]
    assert sum(int(r["latency_count"]) for r in rows) == doc["latency"]["count"]
    assert [int(r["interval"]) for r in rows] == list(range(len(rows)))
    for r in rows[:-1]:
        assert r["short"] == "0" and int(r["length_us"]) == 200000
        # 400/s over 200 ms: 80 requests sent in each interval; a worker's
        # cut runs late on a busy machine and moves a few to the next.
        assert abs(float(r["sent_per_sec"]) - 400) <= 40
        assert int(r["latency_uncorrected_count"]) == int(r["requests"])
        assert int(r["latency_p99"]) >= int(r["latency_uncorrected_p50"])
    assert all(r["server_cpu_s"] == "" for r in rows)
    assert len(rows) == doc["intervals"]["count"]

    # The same columns as the JSON Lines records, in the same order.
    run2, _ = run_json(tmp_path, "-t1", "-c1", "-d300ms", "-R", "100", "--interval", "100ms",
                       "--timeline", timeline, srv.url + "/")
    _, records = read_timeline(timeline)
    assert header == flatten(records[0])


def test_csv_comment_line_holds_any_script_path_and_url(testd, tmp_path):
    """Spaces, commas, quotes, ' url=', '%' and bytes outside ASCII in the
    script's path and in the URL come back from the comment line as they
    were, and a CSV reader sees it as one field."""
    srv = testd()
    script = os.path.join(tmp_path, 'my "script", a=b url=c%41 \u00e9.lua')
    with open(script, "w") as f:
        f.write("-- nothing\n")
    url = srv.url + "/p%41th,x=\"y\""
    timeline = os.path.join(tmp_path, "t.csv")
    run = volley("-t1", "-c1", "-d200ms", "-s", script, "--timeline", timeline, url)
    assert run.returncode == 0, run.stderr
    params, header, rows = read_csv(timeline)
    assert (params["script"], params["url"]) == (script, url)
    assert params["threads"] == "1" and params["interval_us"] == "1000000"
    with open(timeline, newline="") as f:
        assert len(next(csv.reader(f))) == 1
    assert len(rows) == 1 and len(rows[0]) == len(header)


def test_timeline_on_stdout_sends_the_report_to_stderr(testd):
    srv = testd()
    run = volley("-t1", "-c1", "-d500ms", "--interval", "100ms", "--timeline", "-",
                 srv.url + "/")
    assert run.returncode == 0, run
    lines = [json.loads(line) for line in run.stdout.splitlines()]
    assert lines[0]["type"] == "run" and len(lines) >= 6 and lines.pop()["type"] == "end"
    assert re.search(r"^  (\d+) requests in ", run.stderr, re.M)
    requests = int(re.search(r"^  (\d+) requests in ", run.stderr, re.M).group(1))
    assert sum(r["requests"] for r in lines[1:]) == requests > 0


def test_a_worker_held_up_by_a_hook_delivers_its_intervals_late(testd, tmp_path):
    # Thread 2 spends 700 ms in one response() call: its boundaries pass
    # meanwhile. Every interval is still written, in order, and adds up.
    script = os.path.join(tmp_path, "hold.lua")
    with open(script, "w") as f:
        f.write("""
local n = 0
function setup(thread) t = (t or 0) + 1; thread:set("id", t) end
function response()
  n = n + 1
  if id == 2 and n == 50 then
    local start = os.clock()
    while os.clock() - start < 0.7 do end
    io.write("held\\n")
  end
end
""")
    srv = testd()
    timeline = os.path.join(tmp_path, "t.jsonl")
    run, doc = run_json(tmp_path, "-t2", "-c4", "-d1500ms", "--interval", "200ms",
                        "-s", script, "--timeline", timeline, srv.url + "/")
    _, records = read_timeline(timeline)
    check_intervals(records, 200000, doc["duration_us"])
    assert sum(r["requests"] for r in records) == doc["requests"]
    added = new_hist()
    for r in records:
        added.add(HdrHistogram.decode(r["latency"]["hdr_histogram"]))
    assert list(added.counts) == list(HdrHistogram.decode(doc["latency"]["hdr_histogram"]).counts)
    assert "held\n" in run.stdout


def test_a_run_ended_by_its_threads_ends_its_last_interval_there(testd, tmp_path):
    script = os.path.join(tmp_path, "stop.lua")
    with open(script, "w") as f:
        f.write("local n = 0\n"
                "function response() n = n + 1 if n == 300 then wrk.thread:stop() end end\n")
    srv = testd("--delay", "1")
    timeline = os.path.join(tmp_path, "t.jsonl")
    run, doc = run_json(tmp_path, "-t2", "-c2", "-d10s", "--interval", "100ms", "-s", script,
                        "--timeline", timeline, srv.url + "/")
    _, records = read_timeline(timeline, reason="stopped")
    assert doc["duration_us"] < 5000000 and doc["end"]["reason"] == "stopped"
    check_intervals(records, 100000, doc["duration_us"])
    assert sum(r["requests"] for r in records) == doc["requests"] >= 600


def test_every_field_is_documented(testd, tmp_path):
    srv = testd()
    timeline = os.path.join(tmp_path, "t.jsonl")
    _, doc = run_json(tmp_path, "-t1", "-c1", "-d300ms", "-R", "100", "--interval", "100ms",
                      "--server-pid", srv.proc.pid, "--timeline", timeline, srv.url + "/")
    head, records = read_timeline(timeline)
    with open(timeline) as f:
        end = json.loads(f.readlines()[-1])
    with open(os.path.join(ROOT, "docs", "json.md")) as f:
        text = f.read()
    keys = set(doc) | set(doc["intervals"]) | set(doc["server"]) | set(doc["end"]) | set(head)
    keys |= set(end)
    for r in records:
        keys |= set(r) | set(r["status"]) | set(r["latency"])
    missing = sorted(k for k in keys if f"`{k}`" not in text)
    assert not missing, missing


# --------------------------------------------------------------------------
# A server that freezes: the stalls land in their intervals
# --------------------------------------------------------------------------

def test_freezes_show_in_their_intervals_only(testd, tmp_path):
    # The server holds every response for the last 500 ms of each 2 s. With
    # -R, latency counts from the intended send, so the responses released
    # when a freeze ends carry up to 500 ms; they are recorded when they
    # complete, in the interval where the freeze ends.
    srv = testd("--freeze", "500:2000")
    started = time.time()
    # Start volley 1.25 s into the server's period: the freezes then end
    # 0.75 s and 2.75 s into the run, half-way through an interval.
    time.sleep(max(0.0, started + 1.23 - time.time()))
    timeline = os.path.join(tmp_path, "t.jsonl")
    # Enough connections for every request due in a stall to go out on time:
    # when it ends, nothing is left to catch up on.
    run, doc = run_json(tmp_path, "-t2", "-c600", "-d3s", "-R1000", "--interval", "500ms",
                        "--timeline", timeline, srv.url + "/")
    head, records = read_timeline(timeline)
    t0 = datetime.datetime.strptime(head["start_time"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(
        tzinfo=datetime.timezone.utc).timestamp()
    # In the run's time, seconds: the run starts after its 600 connections
    # are open, which on a loaded machine takes a while, so count the thaws
    # that fell inside it.
    runtime = doc["duration_us"] / 1e6
    thaws = [t for t in (started + 2 * k - t0 for k in (1, 2, 3)) if 0.1 <= t <= runtime - 0.1]
    frozen, calm = [], []
    for r in records:
        begin, end = r["start_us"] / 1e6, (r["start_us"] + r["length_us"]) / 1e6
        if any(begin + 0.05 <= t <= end - 0.05 for t in thaws):
            frozen.append(r)
        elif not any(begin - 0.05 <= t <= end + 0.05 for t in thaws):
            calm.append(r)
    assert thaws and len(frozen) == len(thaws) and len(calm) >= 3, (thaws, records)
    for r in frozen:
        assert r["latency"]["p99"] >= 300000, r
    # Between stalls p99 is a few ms. A machine busy with other work can hold
    # volley or the server off a CPU for tens of ms now and then: every calm
    # interval stays far below the stalls, and most below 50 ms.
    calm_p99 = sorted(r["latency"]["p99"] for r in calm)
    assert calm_p99[-1] < 150000, calm
    assert calm_p99[len(calm_p99) // 2] < 50000, calm


# --------------------------------------------------------------------------
# --server-pid
# --------------------------------------------------------------------------

def proc_cpu(pid):
    """utime + stime of pid in seconds, from /proc/PID/stat, and its parent."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"), int(fields[1])


def children(pid):
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if proc_cpu(int(entry))[1] == pid:
                    found.append(int(entry))
            except (OSError, IndexError, ValueError):
                pass
    return found


def test_server_cpu_of_nginx_agrees_with_proc(nginx, tmp_path):
    server = nginx(server='location / { return 200 "ok\\n"; }', http="access_log off;")
    master = server.proc.pid
    # The master listens before it starts its worker.
    deadline = time.monotonic() + 10
    while not children(master) and time.monotonic() < deadline:
        time.sleep(0.01)
    pids = sorted([master] + children(master))
    assert len(pids) == 2  # the master and its worker
    before = sum(proc_cpu(p)[0] for p in pids)
    run, doc = run_json(tmp_path, "-t1", "-c10", "-d1500ms", "--server-pid", master,
                        "--timeline", os.path.join(tmp_path, "t.jsonl"), server.url + "/")
    after = sum(proc_cpu(p)[0] for p in pids)
    by_hand = after - before
    cpu = doc["server"]
    assert cpu["pids"] == pids
    assert by_hand > 0.1
    assert abs(cpu["cpu_s"] - by_hand) <= 0.1 * by_hand + 0.02, (cpu, by_hand)
    assert cpu["cpu_s"] == pytest.approx(cpu["user_s"] + cpu["system_s"])
    per_request = cpu["cpu_s"] * 1e6 / doc["requests"]
    assert cpu["cpu_us_per_request"] == pytest.approx(per_request)
    assert abs(per_request - by_hand * 1e6 / doc["requests"]) <= 0.1 * per_request + 1
    m = re.search(r"^Server CPU: ([\d.]+)s, ([\d.]+)us/request$", run.stdout, re.M)
    assert m, run.stdout
    assert float(m.group(1)) == pytest.approx(cpu["cpu_s"], abs=0.006)
    assert float(m.group(2)) == pytest.approx(per_request, abs=0.06)
    assert run.stdout.index("Transfer/sec") < m.start()
    # The timeline splits the same CPU time over the intervals.
    _, records = read_timeline(os.path.join(tmp_path, "t.jsonl"))
    assert sum(r["server_cpu_s"] for r in records) == pytest.approx(cpu["cpu_s"], abs=1e-6)


def test_server_pid_by_name_and_lists(tmp_path):
    # A process of a name nobody else uses: volley-testd under another name.
    name = f"vtl{os.getpid() % 100000}"
    link = os.path.join(tmp_path, name)
    os.symlink(TESTD, link)
    procs = [subprocess.Popen([link, "--listen", "127.0.0.1:0", "--max-time", "60"],
                              stdout=subprocess.PIPE, text=True) for _ in range(2)]
    try:
        port = int(procs[0].stdout.readline().split()[1])
        procs[1].stdout.readline()
        pids = sorted(p.pid for p in procs)
        url = f"http://127.0.0.1:{port}/"
        run, doc = run_json(tmp_path, "-t1", "-c1", "-d300ms", "--server-pid", name, url)
        assert doc["server"]["pids"] == pids
        # a name that matches several processes says which, at the start
        assert run.stderr == "Note: --server-pid measures 2 processes and the children they " \
                             f"start: {pids[0]} ({name}), {pids[1]} ({name})\n", run
        run, doc = run_json(tmp_path, "-t1", "-c1", "-d300ms", "--server-pid",
                            f"{pids[1]},{pids[0]}", "--server-pid", pids[0], url)
        assert doc["server"]["pids"] == pids
        assert "Server CPU: " in run.stdout
        run = volley("-t1", "-c1", "-d300ms", url)
        assert "Server CPU" not in run.stdout
    finally:
        for p in procs:
            p.terminate()
            p.wait()


# A server whose workers come and go, as pre-fork servers recycle theirs:
# every worker burns a fixed amount of CPU time and exits, and the parent
# waits for it; the last one outlives no sampling (the parent lingers).
FORKER = """
import os, sys, time
for _ in range(int(sys.argv[1])):
    pid = os.fork()
    if pid == 0:
        start = time.process_time()
        while time.process_time() - start < float(sys.argv[2]):
            pass
        os._exit(0)
    os.waitpid(pid, 0)
time.sleep(0.5)
"""
# A process that burns CPU time and exits, waited for by no process measured.
BUSY = """
import sys, time
start = time.process_time()
while time.process_time() - start < float(sys.argv[1]):
    pass
"""


def server_cpu_over_its_life(testd, tmp_path, script, *args):
    """Runs script (started a second late, under sh, so that all of its CPU
    time falls in the run) as the --server-pid of a run that lasts until the
    script ended; returns what the run's --json says of the server, the CPU
    time the script's process tree used by its own rusage, and the run."""
    srv = testd()
    path = tmp_path / "server.py"
    path.write_text(script)
    server = subprocess.Popen(["sh", "-c", 'sleep 1; exec "$0" "$@"', sys.executable, str(path),
                               *map(str, args)])
    result = tmp_path / "r.json"
    try:
        proc = subprocess.Popen([VOLLEY, "-t1", "-c1", "-d0", "--interval", "5s", "--server-pid",
                                 str(server.pid), "--json", str(result), srv.url + "/"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                preexec_fn=sigint_default)
        _, _, usage = os.wait4(server.pid, 0)
        server.returncode = 0
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        server.kill()
    check_sanitizer("volley", err)
    assert proc.returncode == 0, err
    with open(result) as f:
        doc = json.load(f)
    return doc["server"], usage.ru_utime + usage.ru_stime, (out, err)


def test_server_cpu_counts_workers_that_came_and_went(testd, tmp_path):
    # Five workers of 0.15 s each, none there when the run starts: reading
    # only the processes found at the start counted none of it.
    server, used, (out, err) = server_cpu_over_its_life(testd, tmp_path, FORKER, 5, 0.15)
    assert used >= 0.75
    assert abs(server["cpu_s"] - used) <= 0.05 + 0.05 * used, (server, used)
    assert f"Server CPU: {server['cpu_s']:.2f}s" in out
    # the processes found at the start (sh, and its sleep)
    assert re.fullmatch(r"Note: --server-pid measures \d process(es)? and the children they "
                        r"start: \d+ \(\w+\)(, \d+ \(\w+\))*\n", err), err


def test_server_cpu_counts_a_process_that_exits_up_to_its_end(testd, tmp_path):
    # The process exits during an interval (of 5 s): its CPU time counts up
    # to its last sampling, not to the start of the interval.
    server, used, _ = server_cpu_over_its_life(testd, tmp_path, BUSY, 0.5)
    assert used >= 0.5
    assert used - 0.15 <= server["cpu_s"] <= used + 0.01, (server, used)


# --------------------------------------------------------------------------
# -d 0: until Ctrl-C
# --------------------------------------------------------------------------

@pytest.mark.parametrize("duration", ["0", "inf"])
def test_duration_0_runs_until_ctrl_c(testd, tmp_path, duration):
    srv = testd()
    result = os.path.join(tmp_path, "r.json")
    timeline = os.path.join(tmp_path, "t.jsonl")
    proc = subprocess.Popen([VOLLEY, "-t1", "-c2", "-d", duration, "--interval", "200ms",
                             "--json", result, "--timeline", timeline, srv.url + "/"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=sigint_default)
    time.sleep(1.3)
    assert proc.poll() is None
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    check_sanitizer("volley", err)
    assert proc.returncode == 0, err
    assert out.startswith(f"Running unlimited test @ {srv.url}/\n")
    with open(result) as f:
        doc = json.load(f)
    assert doc["options"]["duration_us"] is None
    assert 1.2e6 <= doc["duration_us"] <= 10e6
    head, records = read_timeline(timeline, reason="interrupted")
    assert head["duration_us"] is None
    assert doc["end"] == {"reason": "interrupted", "signal": "SIGINT", "exit_status": None}
    check_intervals(records, 200000, doc["duration_us"])
    assert sum(r["requests"] for r in records) == doc["requests"] > 0
    assert f"{doc['requests']} requests in" in out


# --------------------------------------------------------------------------
# Runs cut short
# --------------------------------------------------------------------------

@pytest.mark.parametrize("timeline", ["t.jsonl", "t.csv"])
def test_an_interrupted_run_says_so_in_every_file(testd, tmp_path, timeline):
    # SIGTERM ends the run as Ctrl-C does, with its report; every file says
    # how it ended, in its last line.
    srv = testd()
    run = volley_signalled("-t1", "-c2", "-d10s", "--interval", "300ms", "--json", "r.json",
                           "--timeline", timeline, "--hdr-log", "h.hlog", srv.url,
                           sig=signal.SIGTERM, after=1.2, cwd=tmp_path)
    assert run.returncode == 0 and run.report["requests"] > 0, run
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["end"] == {"reason": "interrupted", "signal": "SIGTERM", "exit_status": None}
    assert doc["duration_us"] < 5e6
    count = doc["intervals"]["count"]
    if timeline.endswith(".jsonl"):
        _, records = read_timeline(tmp_path / timeline, reason="interrupted")
        with open(tmp_path / timeline) as f:
            end = json.loads(f.readlines()[-1])
        assert end == {"type": "end", "reason": "interrupted", "signal": "SIGTERM",
                       "exit_status": None, "duration_us": doc["duration_us"],
                       "intervals": count, "requests": doc["requests"]}
        assert len(records) == count
    else:
        with open(tmp_path / timeline) as f:
            last = f.readlines()[-1]
        assert last == f"# end: reason=interrupted signal=SIGTERM exit_status= " \
                       f"duration_us={doc['duration_us']} intervals={count} " \
                       f"requests={doc['requests']}\n"
    with open(tmp_path / "h.hlog") as f:
        lines = f.readlines()
    assert lines[-1] == "#[volley end: reason=interrupted signal=SIGTERM exit_status= " \
                        f"duration_us={doc['duration_us']} intervals={count}]\n"
    # HdrHistogram's own reader skips it: every interval, and nothing more.
    reader = HistogramLogReader(str(tmp_path / "h.hlog"), new_hist())
    n = 0
    while reader.get_next_interval_histogram() is not None:
        n += 1
    assert n == count


def test_a_killed_run_leaves_a_timeline_without_its_end(testd, tmp_path):
    srv = testd()
    run = volley_signalled("-t1", "-c2", "-d10s", "--interval", "300ms", "--timeline",
                           "t.jsonl", srv.url, sig=signal.SIGKILL, after=1.2, cwd=tmp_path)
    assert run.returncode == -signal.SIGKILL
    with open(tmp_path / "t.jsonl") as f:
        records = [json.loads(line) for line in f]
    assert records[0]["type"] == "run" and len(records) >= 3
    assert {r["type"] for r in records[1:]} == {"interval"}


# --------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------

@pytest.mark.parametrize("args,message", [
    (["--interval", "0"], "volley: invalid interval: '0' (must be at least 10ms)"),
    (["--interval", "9ms"], "volley: invalid interval: '9ms' (must be at least 10ms)"),
    (["--interval", "0.0095s"], "volley: invalid interval: '0.0095s' (must be at least 10ms)"),
    (["--interval", "1,5s"], "volley: invalid interval: '1,5s'" + TIME_FORM),
    (["-d", "infinity"], "volley: invalid duration: 'infinity'" + TIME_FORM),
    (["--timeline", "-", "--json", "-"],
     "volley: only one of --json, --timeline and --hdr-log can write to stdout (-)"),
    (["--hdr-log", "-", "--timeline", "-"],
     "volley: only one of --json, --timeline and --hdr-log can write to stdout (-)"),
    (["--timeline", "/nonexistent/t.jsonl"],
     "volley: cannot open /nonexistent/t.jsonl: No such file or directory"),
    (["--hdr-log", "/nonexistent/t.hlog"],
     "volley: cannot open /nonexistent/t.hlog: No such file or directory"),
    (["--server-pid", ""], "volley: invalid --server-pid: empty"),
    (["--server-pid", "2147483647"], "volley: --server-pid 2147483647: no such process"),
    (["--server-pid", "0"], "volley: --server-pid 0: no such process"),
    (["--server-pid", "no-such-server-x"],
     "volley: --server-pid no-such-server-x: no process of that name"),
])
def test_bad_options_are_one_line_before_anything_is_sent(testd, args, message):
    srv = testd()
    run = volley(*args, "-c1", "-t1", srv.url + "/")
    assert run.returncode == 1, run
    assert run.stdout == ""
    assert run.stderr.splitlines()[0] == message
    assert srv.stats()["requests"] == 0


@pytest.mark.parametrize("option", ["--timeline", "--hdr-log"])
def test_a_file_that_cannot_be_written_is_an_error_after_the_report(testd, option):
    srv = testd()
    run = volley("-t1", "-c1", "-d300ms", option, "/dev/full", srv.url + "/")
    assert run.returncode == 1, run
    assert run.report["requests"] > 0  # the report came first
    assert run.stderr == f"volley: cannot write /dev/full ({option}): No space left on device\n"


def test_a_failed_start_leaves_an_earlier_timeline_alone(tmp_path):
    files = [os.path.join(tmp_path, name) for name in ("t.jsonl", "t.hlog")]
    for name in files:
        with open(name, "w") as f:
            f.write("earlier\n")
    run = volley("--timeline", files[0], "--hdr-log", files[1], "-c1", "-t1",
                 "http://127.0.0.1:1/")
    assert run.returncode == 1
    assert run.stderr.startswith("volley: unable to connect to 127.0.0.1:1")
    for name in files:
        with open(name) as f:
            assert f.read() == "earlier\n"
