"""--json: the document against the text report, against what the server
counted, and against an independent HdrHistogram decoder; success rate and
error causes; the generator's CPU load; the live progress line, which only a
terminal ever sees.
SPDX-License-Identifier: MIT
"""
import json
import os
import re
import shlex
import signal
import subprocess

from hdrh.histogram import HdrHistogram

from conftest import (VOLLEY, free_port, parse_metric, parse_report, parse_time_us,
                      read_timeline, run_json, sigint_default, volley)

PERCENTILES = ["50", "75", "90", "99", "99.9", "99.99", "99.999", "100"]
PROGRESS = re.compile(r"\r(\d+\.\d)s elapsed, (\d+\.\d)s left: (\d+) requests, (\S+) req/s, "
                      r"p99 (\S+), (\d+) errors?\x1b\[K")


def test_document_agrees_with_the_text_report_and_the_server(testd, tmp_path):
    srv = testd()
    run, doc = run_json(tmp_path, "-t", "2", "-c", "8", "-d", "1s", "-H", "X-Test: 1", srv.url)
    seen = srv.stats()
    rep = run.report
    assert doc["schema_version"] == 1
    assert doc["options"] == {
        "url": srv.url, "threads": 2, "connections": 8, "duration_us": 1000000,
        "timeout_us": 2000000, "rate": None, "requests": None, "stages": None,
        "stages_from": None, "ramp_up_us": None, "warmup_us": None, "pipeline": 1,
        "protocol": "HTTP/1.1", "alpn": None, "streams": 1, "keepalive": True,
        "unix_socket": None, "engine": rep["engine"], "proxy": None, "bind": None,
        "bind_port_range": None,
        "script": None, "script_args": [],
        "headers": [["X-Test", "1"]]}
    assert rep["engine"] in ("epoll", "io_uring")
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", doc["start_time"])
    assert doc["volley"]["build"] == volley("-v").stdout.strip()

    # The same run in both reports.
    n = doc["requests"]
    assert n > 100 and n == rep["requests"]
    assert abs(doc["duration_us"] - rep["runtime_us"]) <= 5000
    assert abs(doc["throughput"]["requests_per_sec"] - rep["rps"]) < 0.01
    assert abs(doc["bytes"] - rep["bytes"]) <= 0.01 * rep["bytes"]
    assert abs(doc["latency"]["max"] - rep["latency_max"]) <= 0.005 * rep["latency_max"] + 5
    assert abs(doc["requests_per_sec"]["max"] - rep["rps_max"]) <= 0.005 * rep["rps_max"] + 5

    # What the server saw: every response volley counted was written by it;
    # at most one per connection was still in flight when the run ended.
    assert n <= seen["responses"] <= n + 8
    assert doc["status_codes"] == {"200": n}
    assert doc["success"] == {"ok": n, "attempts": n, "percent": 100}
    assert doc["connects"] == 8
    assert seen["connections"] == 8 + 1  # and the start-up probe
    assert doc["reconnects"] == 0
    assert set(doc["errors"].values()) == {0}
    assert set(doc["error_causes"].values()) == {0}
    assert doc["latency"]["count"] == n
    assert doc["latency_uncorrected"] is None and doc["scheduling_lag"] is None
    assert doc["rate"] is None
    assert doc["proxy"] is None and doc["sources"] is None


def test_ttfb_is_each_responses_first_byte_and_latency_its_last(testd, tmp_path):
    """A server that writes each response one byte every 2 ms: the last byte
    of a response of L bytes comes at least (L - 1) x 2 ms after its first,
    so for every response the latency exceeds the time to first byte by
    that much. Both have one sample per response, in --json (the same
    shape) and in --latency's TTFB row, the thread-stats table's last."""
    srv = testd("--hostile", "trickle", "--trickle-ms", "2")
    # -n: every response read whole, so the bytes are whole responses
    run, doc = run_json(tmp_path, "-t1", "-c2", "-n6", "--latency", srv.url)
    lat, ttfb = doc["latency"], doc["ttfb"]
    assert doc["requests"] == 6 == lat["count"] == ttfb["count"]
    assert set(ttfb) == set(lat) and set(ttfb["percentiles"]) == set(PERCENTILES)
    assert doc["bytes"] % 6 == 0
    body_us = (doc["bytes"] // 6 - 1) * 2000
    assert lat["min"] >= 0.9 * body_us
    assert lat["mean"] - ttfb["mean"] >= 0.9 * body_us
    assert ttfb["min"] <= lat["min"] and ttfb["max"] <= lat["max"]
    assert doc["ttfb_uncorrected"] is None
    assert HdrHistogram.decode(ttfb["hdr_histogram"]).get_total_count() == 6
    table = run.stdout[run.stdout.index("  Thread Stats"):run.stdout.index("  Latency Distribution")]
    rows = [line.split()[0] for line in table.splitlines()[1:]]
    assert rows == ["Latency", "Req/Sec", "TTFB"], run.stdout
    m = re.search(r"^    TTFB\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)%$", run.stdout, re.M)
    assert abs(parse_time_us(m.group(1)) - ttfb["mean"]) <= 0.01 * ttfb["mean"] + 10
    assert abs(parse_time_us(m.group(3)) - ttfb["max"]) <= 0.01 * ttfb["max"] + 10
    # without --latency, wrk's table as it is
    assert "TTFB" not in volley("-t1", "-c1", "-n1", srv.url).stdout


def test_ttfb_with_R_has_an_uncorrected_twin(testd, tmp_path):
    srv = testd()
    run, doc = run_json(tmp_path, "-t1", "-c2", "-d500ms", "-R", "200", srv.url)
    n = doc["requests"]
    assert n > 0 and doc["ttfb"]["count"] == doc["ttfb_uncorrected"]["count"] == n
    # from the intended send time, never after the actual one
    assert doc["ttfb"]["mean"] >= doc["ttfb_uncorrected"]["mean"]


def test_json_on_stdout_moves_the_text_report_and_script_output_to_stderr(testd, tmp_path):
    script = tmp_path / "done.lua"
    script.write_text('print("loaded")\n'
                      'function done(summary, latency, requests)\n'
                      '  io.write("done ", summary.requests, "\\n")\n'
                      'end\n')
    srv = testd()
    run = volley("--json", "-", "-t", "1", "-c", "2", "-d", "500ms", "-s", script, srv.url)
    assert run.returncode == 0, run
    doc = json.loads(run.stdout)  # nothing else on stdout
    rep = parse_report(run.stderr)
    assert rep["requests"] == doc["requests"] > 0
    assert f"done {doc['requests']}\n" in run.stderr
    assert "loaded\n" in run.stderr
    assert doc["options"]["script"] == str(script)


def test_hdr_histogram_decodes_to_the_same_count_and_percentiles(testd, tmp_path):
    # A 3 ms delay puts every sample above 2048 us, where HdrHistogram's
    # buckets are wider than 1 us and the percentile definition matters.
    srv = testd("--delay", "3")
    run, doc = run_json(tmp_path, "-t", "2", "-c", "4", "-d", "1s", srv.url)
    lat = doc["latency"]
    hist = HdrHistogram.decode(lat["hdr_histogram"])
    assert hist.get_total_count() == lat["count"] == doc["requests"] > 100
    assert lat["min"] >= 3000
    for p in PERCENTILES:
        assert hist.get_value_at_percentile(float(p)) == lat["percentiles"][p], p
    assert hist.values_are_equivalent(hist.get_min_value(), lat["min"])
    assert hist.values_are_equivalent(hist.get_max_value(), lat["max"])
    assert abs(hist.get_mean_value() - lat["mean"]) <= 0.001 * lat["mean"]
    values = [lat["percentiles"][p] for p in PERCENTILES]
    assert values == sorted(values)


def test_every_fourth_503_is_a_quarter_of_the_codes_and_75_percent_success(testd, tmp_path):
    c = 4
    srv = testd("--status-every", "4:503")
    run, doc = run_json(tmp_path, "-t", "1", "-c", c, "-d", "1s", srv.url)
    seen = srv.stats()
    codes, n = doc["status_codes"], doc["requests"]
    assert set(codes) == {"200", "503"} and codes["200"] + codes["503"] == n > 400
    # The server's own counts, less what was in flight at the end.
    assert seen["status"]["503"] == seen["responses"] // 4
    for code in ("200", "503"):
        assert codes[code] <= seen["status"][code] <= codes[code] + c
    assert doc["errors"]["status"] == codes["503"] == run.report["non2xx"]
    assert doc["success"]["ok"] == codes["200"]
    assert doc["success"]["attempts"] == n
    assert abs(doc["success"]["percent"] - 75) <= 100 * c / n + 0.01


def class_sums(doc):
    """Each socket-error class as the sum of its causes (docs/json.md)."""
    classes = {"connect": ["refused", "unreachable", "connect_timeout", "fd_limit",
                           "connect_other", "tls_handshake"],
               "timeout": ["response_timeout"]}
    causes = doc["error_causes"]
    sums = {k: sum(causes[c] for c in v) for k, v in classes.items()}
    assert sum(causes.values()) == sum(doc["errors"][k] for k in
                                       ("connect", "read", "write", "timeout"))
    return sums


def test_reset_connections_are_failed_attempts_with_their_cause(testd, tmp_path):
    srv = testd("--hostile", "reset")
    run, doc = run_json(tmp_path, "-t", "1", "-c", "2", "-d", "500ms", srv.url)
    assert doc["requests"] == 0 and doc["status_codes"] == {}
    assert doc["error_causes"]["reset"] > 0
    assert doc["error_causes"]["reset"] == doc["errors"]["read"] + doc["errors"]["write"] \
        - sum(doc["error_causes"][c] for c in ("closed", "truncated", "broken_pipe"))
    class_sums(doc)
    assert doc["success"]["ok"] == 0
    assert doc["success"]["attempts"] == doc["errors"]["read"] + doc["errors"]["write"] > 0
    assert doc["success"]["percent"] == 0
    assert doc["latency"]["count"] == 0 and doc["latency"]["min"] is None
    assert doc["latency"]["percentiles"]["99"] is None
    assert HdrHistogram.decode(doc["latency"]["hdr_histogram"]).get_total_count() == 0


def test_a_server_that_went_away_shows_refused_connections(testd, tmp_path):
    srv = testd("--hostile", "die-after:600")
    run, doc = run_json(tmp_path, "-t", "1", "-c", "2", "-d", "1500ms", srv.url)
    seen = srv.stats()
    # Usually some responses before the server died (none if volley took
    # longer than 600 ms to start on a busy machine).
    assert doc["requests"] <= seen["responses"] <= doc["requests"] + 2
    assert doc["error_causes"]["refused"] > 0
    assert class_sums(doc)["connect"] == doc["errors"]["connect"]
    ok, attempts = doc["success"]["ok"], doc["success"]["attempts"]
    assert attempts == doc["requests"] + sum(doc["errors"][k] for k in
                                             ("connect", "read", "write", "timeout"))
    assert ok == doc["requests"]
    assert doc["success"]["percent"] == 100 * ok / attempts < 100


def test_unwritable_json_path_fails_before_the_run(testd, tmp_path):
    srv = testd()
    path = os.path.join(tmp_path, "missing", "out.json")
    run = volley("--json", path, "-d", "1s", srv.url)
    assert run.returncode == 1, run
    assert run.stderr == f"volley: cannot open {path}: No such file or directory\n"
    assert run.stdout == ""
    assert srv.stats()["connections"] == 0


def test_a_failed_start_keeps_an_earlier_result(tmp_path):
    # The file is replaced only by a finished run's document.
    path = tmp_path / "keep.json"
    path.write_text('{"old": "results"}\n')
    run = volley("--json", path, "-d", "1s", f"http://127.0.0.1:{free_port()}/")
    assert run.returncode == 1 and "unable to connect" in run.stderr, run
    assert path.read_text() == '{"old": "results"}\n'
    assert os.listdir(tmp_path) == ["keep.json"]


def test_done_failing_keeps_the_result_of_the_run(testd, tmp_path):
    # The document and the timeline are written before done() runs: an error
    # in it, or a Ctrl-C while it runs, cannot lose a run that completed.
    (tmp_path / "err.lua").write_text('function done(s) error("boom in done") end\n')
    (tmp_path / "slow.lua").write_text("function done(s)\n  print('in done'); io.stdout:flush()\n"
                                       "  local t = os.clock()\n"
                                       "  while os.clock() - t < 20 do end\nend\n")
    srv = testd()
    args = ["-t1", "-c2", "-d500ms", "--json", "r.json", "--timeline", "t.jsonl", srv.url]
    run = volley("-s", "err.lua", *args, cwd=tmp_path)
    assert run.returncode == 1 and "boom in done" in run.stderr, run
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["requests"] == run.report["requests"] > 0
    timeline = [json.loads(line) for line in open(tmp_path / "t.jsonl")]
    assert sum(r["requests"] for r in timeline if r["type"] == "interval") == doc["requests"]
    (tmp_path / "r.json").write_text('{"earlier": "result"}\n')
    proc = subprocess.Popen([VOLLEY, "-s", "slow.lua", *args], cwd=tmp_path, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=sigint_default)
    for line in proc.stdout:  # the report, then done() spins
        if line == "in done\n":
            break
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=10)
    assert proc.returncode == -signal.SIGINT, (out, err)
    assert json.loads((tmp_path / "r.json").read_text())["requests"] > 0


def test_a_finished_run_replaces_the_file_and_what_a_link_points_to(testd, tmp_path):
    srv = testd()
    out = tmp_path / "out"
    out.mkdir()
    target = out / "target.json"
    target.write_text("old")
    target.chmod(0o640)
    link = out / "link.json"
    link.symlink_to(target.name)
    run = volley("--json", link, "-t1", "-c1", "-d300ms", srv.url)
    assert run.returncode == 0, run
    assert link.is_symlink() and json.loads(target.read_text())["requests"] > 0
    assert target.stat().st_mode & 0o777 == 0o640
    assert sorted(os.listdir(out)) == ["link.json", "target.json"]


def test_json_to_a_device_or_a_pipe_is_written_in_place(testd, tmp_path):
    srv = testd()
    proc = subprocess.run([VOLLEY, "--json", "/dev/stdout", "-t1", "-c1", "-d300ms", srv.url],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc
    assert '"requests": ' in proc.stdout and "Requests/sec:" in proc.stdout
    run = volley("--json", "/dev/full", "-t1", "-c1", "-d300ms", srv.url)
    assert run.returncode == 1, run
    assert run.stderr == "volley: cannot write /dev/full (--json): No space left on device\n", run


# --------------------------------------------------------------------------
# The generator's CPU load
# --------------------------------------------------------------------------

def check_cpu(doc, run):
    cpu = doc["cpu"]
    seconds = doc["duration_us"] / 1e6
    threads = doc["options"]["threads"]
    assert cpu["cpus"] == len(os.sched_getaffinity(0))
    assert abs(cpu["utilisation"] - (cpu["user_s"] + cpu["system_s"]) / seconds / threads) < 1e-9
    assert cpu["run_queue_wait_s"] >= 0  # Linux reports it
    assert 0 <= cpu["busiest_thread"] <= 1.05
    assert cpu["saturated"] == (cpu["busiest_thread"] > 0.9 and seconds >= 0.25)
    # The warning goes to stderr: what follows Transfer/sec on stdout (a
    # done() hook's output) stays the script's.
    warned = re.search(r"^Warning: volley was CPU-bound \(a thread was busy (\d+)% of the time\): "
                       r"these figures measure the load generator, not only the server$",
                       run.stderr, re.M)
    assert bool(warned) == cpu["saturated"], run
    if warned:
        assert abs(int(warned.group(1)) - 100 * cpu["busiest_thread"]) <= 0.5
    assert "Warning" not in run.stdout, run
    return cpu


def test_an_idle_generator_is_not_saturated(testd, tmp_path):
    srv = testd("--delay", "50")
    run, doc = run_json(tmp_path, "-t", "1", "-c", "1", "-d", "1s", srv.url)
    cpu = check_cpu(doc, run)
    assert cpu["busiest_thread"] < 0.5 and not cpu["saturated"]
    assert "Warning" not in run.stdout


def test_a_run_too_short_to_judge_is_not_saturated(testd, tmp_path):
    # A quick -n run is mostly start-up and tear-down, when a thread is busy
    # whatever the load: no verdict on so little.
    srv = testd()
    for _ in range(3):
        run, doc = run_json(tmp_path, "-t", "2", "-c", "4", "-n", "100", srv.url)
        assert doc["duration_us"] < 250000, doc
        check_cpu(doc, run)
        assert not doc["cpu"]["saturated"] and "Warning" not in run.stderr, run


def test_a_busy_script_makes_the_generator_the_bottleneck(testd, tmp_path):
    # The request() hook spins: the worker thread is always running, or
    # waiting for a CPU when the machine is busy, and both count as busy.
    script = tmp_path / "busy.lua"
    script.write_text("function request()\n"
                      "  local x = 0\n"
                      "  for i = 1, 3000000 do x = x + i % 7 end\n"
                      "  return wrk.format(nil, '/' .. (x % 2))\n"
                      "end\n")
    srv = testd()
    run, doc = run_json(tmp_path, "-t", "1", "-c", "1", "-d", "1s", "-s", script, srv.url)
    cpu = check_cpu(doc, run)
    assert cpu["saturated"], cpu
    assert doc["requests"] > 0


# --------------------------------------------------------------------------
# Live progress
# --------------------------------------------------------------------------

def on_terminal(*args, timeout=30):
    """volley under a pseudo-terminal (stdout and stderr both on it)."""
    cmd = shlex.join([VOLLEY] + [str(a) for a in args])
    proc = subprocess.run(["script", "-qec", cmd, "/dev/null"], capture_output=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc
    return proc.stdout.decode(errors="replace")


def test_progress_is_redrawn_on_a_terminal_and_erased_before_the_report(testd):
    srv = testd("--status-every", "4:503")
    out = on_terminal("-t", "1", "-c", "2", "-d", "1500ms", srv.url)
    lines = PROGRESS.findall(out)
    assert len(lines) >= 3, out
    elapsed = [float(e) for e, *_ in lines]
    requests = [int(r) for _, _, r, *_ in lines]
    errors = [int(e) for *_, e in lines]
    assert elapsed == sorted(elapsed) and elapsed[-1] <= 1.6
    assert all(abs(float(e) + float(left) - 1.5) <= 0.11 for e, left, *_ in lines)
    assert requests == sorted(requests) and requests[-1] > 0
    assert errors[-1] > 0  # the 503s
    # Erased, then the report starts where the line was; nothing after it.
    assert out.count("\r\x1b[K  Thread Stats") == 1, out
    assert "\x1b" not in out[out.index("  Thread Stats"):]
    report = parse_report(out.replace("\r", ""))
    assert report["requests"] >= requests[-1]
    assert srv.stats()["responses"] >= report["requests"]


def test_progress_shows_the_last_intervals_rate_and_p99(testd, tmp_path):
    srv = testd("--delay", "1")
    timeline = os.path.join(tmp_path, "t.jsonl")
    out = on_terminal("-t", "1", "-c", "4", "-d", "1500ms", "--interval", "400ms",
                      "--timeline", timeline, srv.url)
    lines = PROGRESS.findall(out)
    records = read_timeline(timeline)[1]
    figures = [(rate, p99) for *_, rate, p99, _ in lines]
    # Until the first interval ends there is no p99; then each line shows the
    # rate and p99 of an interval (as the report rounds them).
    known = [f for f in figures if f[1] != "-"]
    assert known and figures[len(figures) - len(known):] == known, out
    for rate, p99 in known:
        assert any(abs(parse_metric(rate) - r["requests_per_sec"]) <= 0.006 * r["requests_per_sec"]
                   and abs(parse_time_us(p99) - r["latency"]["p99"]) <= 0.006 * r["latency"]["p99"]
                   for r in records), (rate, p99, records)


def test_progress_with_requests_counts_them_instead_of_time(testd):
    srv = testd("--delay", "5")
    out = on_terminal("-t", "1", "-c", "2", "-n", "300", srv.url)
    lines = re.findall(r"\r(\d+\.\d)s elapsed: (\d+)/300 requests, (\S+) req/s, p99 (\S+), "
                       r"(\d+) errors?\x1b\[K", out)
    assert len(lines) >= 2, out
    assert "left" not in out
    assert [int(n) for _, n, *_ in lines] == sorted(int(n) for _, n, *_ in lines)
    assert parse_report(out.replace("\r", ""))["requests"] == 300


def test_no_progress_turns_it_off_on_a_terminal(testd):
    srv = testd()
    out = on_terminal("--no-progress", "-t", "1", "-c", "1", "-d", "700ms", srv.url)
    assert "elapsed" not in out and "\x1b" not in out
    assert parse_report(out.replace("\r", ""))["requests"] > 0


def test_progress_never_goes_to_pipes_or_files(testd, tmp_path):
    srv = testd()
    run = volley("-t", "1", "-c", "1", "-d", "700ms", srv.url)  # stdout, stderr: pipes
    assert run.returncode == 0, run
    assert all(line.startswith("Warning: ") for line in run.stderr.splitlines()), run
    assert "\r" not in run.stdout and "\x1b" not in run.stdout
    err = os.path.join(tmp_path, "stderr")
    with open(err, "w") as f:
        proc = subprocess.run([VOLLEY, "--json", "-", "-t", "1", "-c", "1", "-d", "700ms",
                               srv.url], stdout=subprocess.PIPE, stderr=f, timeout=30,
                              stdin=subprocess.DEVNULL, text=True)
    assert proc.returncode == 0
    json.loads(proc.stdout)
    with open(err) as f:
        text = f.read()
    assert parse_report(text)["requests"] > 0
    assert "elapsed" not in text and "\r" not in text and "\x1b" not in text


def field_names(value, skip=("status_codes",)):
    """Every object key in a document, recursively, but the keys of objects
    whose keys are data (status codes)."""
    names = set()
    if isinstance(value, dict):
        for k, v in value.items():
            names.add(k)
            if k not in skip:
                names |= field_names(v, skip)
    elif isinstance(value, list):
        for v in value:
            names |= field_names(v, skip)
    return names


def test_docs_json_names_every_field_volley_writes(testd, certs, nginx, tinyproxy, tmp_path):
    # The closed model over HTTP, -R over HTTPS, and through a proxy from a
    # source address, where every optional object is filled in: each key
    # volley writes is in docs/json.md.
    with open(os.path.join(os.path.dirname(__file__), "..", "..", "docs", "json.md")) as f:
        doc_text = f.read()
    srv = testd()
    https = nginx(tls=True, server=f"""
        ssl_certificate {certs["server.pem"]};
        ssl_certificate_key {certs["server.key"]};
        location / {{ return 200 "ok"; }}""")
    names = set()
    for args in (("-t1", "-c2", "-d300ms", srv.url),
                 ("-t1", "-c2", "-d300ms", "-R", 100, "-U", "-n", 20, https.url),
                 ("-t1", "-c2", "-n", 20, "--proxy", tinyproxy().url, "--bind", "127.0.0.2",
                  https.url)):
        _, doc = run_json(tmp_path, *args)
        names |= field_names(doc)
    missing = sorted(n for n in names if f"`{n}`" not in doc_text and f'"{n}"' not in doc_text)
    assert not missing, f"fields docs/json.md does not name: {missing}"
