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
import time
import urllib.parse

import pytest
from hdrh.histogram import HdrHistogram
from hdrh.log import HistogramLogReader

from conftest import ROOT, TESTD, VOLLEY, check_sanitizer, run_json, sigint_default, volley

DAY_US = 24 * 3600 * 10**6


def new_hist():
    return HdrHistogram(1, DAY_US, 3)


def read_jsonl(path):
    with open(path) as f:
        lines = [json.loads(line) for line in f]
    assert lines[0]["type"] == "run"
    assert all(r["type"] == "interval" for r in lines[1:])
    return lines[0], lines[1:]


def read_csv(path):
    """(the comment line's key=value pairs, header, rows as dicts of strings)."""
    with open(path) as f:
        comment = f.readline()
        header = f.readline().rstrip("\n").split(",")
        rows = [dict(zip(header, line.rstrip("\n").split(","))) for line in f]
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

def test_intervals_add_up_to_the_totals_and_the_final_histogram(testd, tmp_path):
    srv = testd("--status-every", "4:503")
    timeline, hlog = os.path.join(tmp_path, "t.jsonl"), os.path.join(tmp_path, "t.hlog")
    run, doc = run_json(tmp_path, "-t2", "-c4", "-d1500ms", "--interval", "250ms",
                        "--timeline", timeline, "--hdr-log", hlog, srv.url + "/")
    head, records = read_jsonl(timeline)
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
    _, records = read_jsonl(timeline)
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
    assert lines[0]["type"] == "run" and len(lines) >= 5
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
    _, records = read_jsonl(timeline)
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
    _, records = read_jsonl(timeline)
    assert doc["duration_us"] < 5000000
    check_intervals(records, 100000, doc["duration_us"])
    assert sum(r["requests"] for r in records) == doc["requests"] >= 600


def test_every_field_is_documented(testd, tmp_path):
    srv = testd()
    timeline = os.path.join(tmp_path, "t.jsonl")
    _, doc = run_json(tmp_path, "-t1", "-c1", "-d300ms", "-R", "100", "--interval", "100ms",
                      "--server-pid", srv.proc.pid, "--timeline", timeline, srv.url + "/")
    head, records = read_jsonl(timeline)
    with open(os.path.join(ROOT, "docs", "json.md")) as f:
        text = f.read()
    keys = set(doc) | set(doc["intervals"]) | set(doc["server"]) | set(head)
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
    head, records = read_jsonl(timeline)
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
    _, records = read_jsonl(os.path.join(tmp_path, "t.jsonl"))
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
    head, records = read_jsonl(timeline)
    assert head["duration_us"] is None
    check_intervals(records, 200000, doc["duration_us"])
    assert sum(r["requests"] for r in records) == doc["requests"] > 0
    assert f"{doc['requests']} requests in" in out


# --------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------

@pytest.mark.parametrize("args,message", [
    (["--interval", "0"], "volley: interval must be at least 10ms"),
    (["--interval", "9ms"], "volley: interval must be at least 10ms"),
    (["--interval", "1.5s"], "volley: invalid interval: '1.5s'"),
    (["-d", "infinity"], "volley: invalid duration: 'infinity'"),
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
    assert run.stderr == "volley: cannot write /dev/full: No space left on device\n"


def test_a_failed_start_leaves_an_earlier_timeline_alone(tmp_path):
    timeline = os.path.join(tmp_path, "t.jsonl")
    with open(timeline, "w") as f:
        f.write("earlier\n")
    run = volley("--timeline", timeline, "--hdr-log", timeline, "-c1", "-t1",
                 "http://127.0.0.1:1/")
    assert run.returncode == 1
    assert run.stderr.startswith("volley: unable to connect to 127.0.0.1:1")
    with open(timeline) as f:
        assert f.read() == "earlier\n"
