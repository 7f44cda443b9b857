"""scripts/volley-sweep: sweeps against volley-testd (the .dat table against
each run's JSON and what the server counted), the charts as real PNGs, diff,
and a clear message for a missing gnuplot, a failing run and bad arguments.
SPDX-License-Identifier: MIT
"""
import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time

import pytest

from conftest import ROOT, VOLLEY, sigint_default
from conftest import Testd as Server  # not collected as a test class

SWEEP = os.path.join(ROOT, "scripts", "volley-sweep")
LEVELS = [1, 2, 4]
CHART_SIZE = (900, 560)


def sweep(*args, env=None, timeout=60):
    environ = dict(os.environ, VOLLEY=VOLLEY) if env is None else env
    return subprocess.run([sys.executable, SWEEP] + [str(a) for a in args], capture_output=True,
                          text=True, timeout=timeout, env=environ, stdin=subprocess.DEVNULL)


def read_dat(path):
    """(comment lines, rows as lists of numbers)."""
    comments, rows = [], []
    with open(path) as f:
        for line in f:
            if line.startswith("#"):
                comments.append(line.rstrip("\n"))
            elif line.strip():
                fields = line.split()
                rows.append([int(fields[0])] + [float(x) for x in fields[1:]])
    return comments, rows


def check_png(path):
    with open(path, "rb") as f:
        data = f.read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", path
    length, kind = struct.unpack(">I4s", data[8:16])
    assert kind == b"IHDR" and length == 13
    width, height = struct.unpack(">II", data[16:24])
    assert (width, height) == CHART_SIZE
    assert data[-8:-4] == b"IEND"
    assert len(data) > 5000  # something was drawn


class Sweep:
    def __init__(self, out, name, *testd_options):
        self.out, self.name = out, name
        server = Server(out, *testd_options)
        try:
            self.proc = sweep("-d", "1s", "-c", ",".join(map(str, LEVELS)), "-n", name,
                              "-o", out, "--slo-p99", "10000", server.url)
        finally:
            self.seen = server.stop()
        self.url = server.url
        self.dat = os.path.join(out, name + ".dat")

    def doc(self, level):
        with open(os.path.join(self.out, f"{self.name}_c{level}.json")) as f:
            return json.load(f)


@pytest.fixture(scope="module")
def sweeps(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("sweep"))
    return {"ok": Sweep(out, "ok"), "bad": Sweep(out, "bad", "--status-every", "4:503")}


def check_sweep(s):
    assert s.proc.returncode == 0, s.proc.stdout + s.proc.stderr
    comments, rows = read_dat(s.dat)
    assert comments[0] == f"# volley-sweep {s.name}"
    assert f"# url: {s.url}" in comments
    assert comments[-1].split() == ["#", "connections", "qps", "mean_ms", "p99_ms",
                                    "success_pct"]
    assert [r[0] for r in rows] == LEVELS
    total = 0
    cpus = len(os.sched_getaffinity(0))
    for level, qps, mean_ms, p99_ms, success in rows:
        doc = s.doc(level)
        assert doc["options"]["connections"] == level
        assert doc["options"]["threads"] == min(level, cpus)
        assert doc["options"]["duration_us"] == 1000000
        assert qps == round(doc["throughput"]["requests_per_sec"], 2) > 0
        assert mean_ms == round(doc["latency"]["mean"] / 1000, 3)
        assert p99_ms == round(doc["latency"]["percentiles"]["99"] / 1000, 3)
        assert success == round(doc["success"]["percent"], 2)
        with open(os.path.join(s.out, f"{s.name}_c{level}.txt")) as f:
            assert f"{doc['requests']} requests in" in f.read()
        total += doc["requests"]
    # The server answered every response counted, and at most one per
    # connection more (in flight when a run ended).
    assert total <= s.seen["responses"] <= total + sum(LEVELS)
    # Each level's connections, and volley's start-up probe per run.
    assert s.seen["connections"] == sum(LEVELS) + len(LEVELS)
    best = max(rows, key=lambda r: r[1])
    assert f"peak: {best[1]:.2f} req/s at {best[0]} connection" in s.proc.stdout
    assert f"slo: p99 <= 10000 ms up to {LEVELS[-1]} connections" in s.proc.stdout
    for chart in ("qps_ttlb", "success"):
        check_png(os.path.join(s.out, f"{s.name}_{chart}.png"))
    return rows


def test_all_200_is_100_percent_success(sweeps):
    rows = check_sweep(sweeps["ok"])
    assert [r[4] for r in rows] == [100.0] * len(LEVELS)


def test_every_fourth_503_is_75_percent_success(sweeps):
    s = sweeps["bad"]
    rows = check_sweep(s)
    for level, *_, success in rows:
        doc = s.doc(level)
        assert doc["status_codes"]["503"] > 0
        assert abs(success - 75) <= 100 * (level + 1) / doc["requests"] + 0.01


def test_diff_overlays_two_sweeps_and_prints_changes(sweeps, tmp_path):
    a, b = sweeps["ok"], sweeps["bad"]
    proc = sweep("diff", a.dat, b.dat, "-o", tmp_path)
    assert proc.returncode == 0, proc.stderr
    _, rows_a = read_dat(a.dat)
    _, rows_b = read_dat(b.dat)
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("bad against ok: change per level")
    for ra, rb in zip(rows_a, rows_b):
        m = re.search(rf"^\s+{ra[0]}\s+(\S+)%\s+(\S+)%\s+(\S+)%\s+(\S+)$", proc.stdout, re.M)
        assert m, proc.stdout
        assert float(m.group(1)) == pytest.approx(100 * (rb[1] - ra[1]) / ra[1], abs=0.051)
        assert float(m.group(2)) == pytest.approx(100 * (rb[2] - ra[2]) / ra[2], abs=0.051)
        assert float(m.group(4)) == pytest.approx(rb[4] - ra[4], abs=0.006)
        assert float(m.group(4)) < -20  # 75% against 100%
    for chart in ("qps_ttlb", "success"):
        check_png(os.path.join(tmp_path, f"ok_bad_{chart}.png"))
    with open(os.path.join(tmp_path, "ok_bad.gp")) as f:
        gp = f.read()
    assert a.dat in gp and b.dat in gp


def test_volley_beside_the_script_and_no_gnuplot(testd, tmp_path):
    # An installed layout: volley-sweep and volley in one directory, and a
    # PATH with neither gnuplot nor volley in it.
    bindir = os.path.join(tmp_path, "bin")
    os.makedirs(bindir)
    shutil.copy(SWEEP, bindir)
    os.symlink(VOLLEY, os.path.join(bindir, "volley"))
    env = {"PATH": "/nonexistent", "HOME": str(tmp_path)}
    srv = testd()
    out = os.path.join(tmp_path, "out")
    proc = subprocess.run([sys.executable, os.path.join(bindir, "volley-sweep"), "-d", "500ms",
                           "-c", "1", "-n", "plain", "-o", out, srv.url], capture_output=True,
                          text=True, timeout=60, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.startswith("volley-sweep: gnuplot not found: the sweep writes its data, "
                                  "but no charts\n")
    assert (f"volley-sweep: gnuplot not found: charts not drawn (install gnuplot, then draw "
            f"them with: gnuplot {out}/plain.gp)") in proc.stderr
    assert sorted(os.listdir(out)) == ["plain.dat", "plain.gp", "plain_c1.json", "plain_c1.txt"]
    _, rows = read_dat(os.path.join(out, "plain.dat"))
    assert [r[0] for r in rows] == [1] and rows[0][4] == 100.0
    assert srv.stats()["responses"] > 0
    # The script written instead draws the charts later.
    subprocess.run(["gnuplot", os.path.join(out, "plain.gp")], check=True, timeout=60)
    check_png(os.path.join(out, "plain_qps_ttlb.png"))


def test_a_failing_run_stops_the_sweep_with_volleys_error(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: refused
        proc = sweep("-d", "1s", "-c", "1,2", "-n", "dead", "-o", tmp_path,
                     f"http://127.0.0.1:{port}/")
    assert proc.returncode == 1
    assert f"volley: unable to connect to 127.0.0.1:{port}: Connection refused\n" in proc.stderr
    assert "volley-sweep: volley failed at 1 connection (exit 1): " in proc.stderr
    assert not os.path.exists(os.path.join(tmp_path, "dead.dat"))


def test_ctrl_c_ends_the_current_level_and_keeps_what_was_measured(testd, tmp_path):
    srv = testd()
    # Ctrl-C on a terminal: SIGINT to the whole process group (the sweep
    # and volley).
    proc = subprocess.Popen([sys.executable, SWEEP, "-d", "3s", "-c", "1,2,3", "-n", "cut", "-o",
                             tmp_path, srv.url], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=dict(os.environ, VOLLEY=VOLLEY),
                            start_new_session=True,
                            preexec_fn=sigint_default)
    dat = os.path.join(tmp_path, "cut.dat")
    deadline = time.monotonic() + 30
    while not os.path.exists(dat) and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.8)  # into the second level
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert "volley-sweep: interrupted at level 2 of 3\n" in err
    _, rows = read_dat(dat)
    assert [r[0] for r in rows] == [1, 2]
    with open(os.path.join(tmp_path, "cut_c2.json")) as f:
        assert json.load(f)["duration_us"] < 2500000
    assert not os.path.exists(os.path.join(tmp_path, "cut_c3.json"))
    check_png(os.path.join(tmp_path, "cut_qps_ttlb.png"))


@pytest.mark.parametrize("args,message", [
    ([], "missing URL"),
    (["-c", "1", "--", "-H"], "missing URL"),
    (["-c", "1", "--", "-H", "X: y"],
     "invalid URL: 'X: y' (expected http://host[:port]/path or https://...)"),
    (["-c", "abc", "http://h/"], "invalid connection level: 'abc' (expected a positive whole "
                                 "number)"),
    (["-c", "0", "http://h/"], "invalid connection level: '0' (must be at least 1)"),
    (["-c", "1,,2", "http://h/"], "invalid connection level: '' (expected a positive whole "
                                  "number)"),
    (["-c", "", "http://h/"], "empty list of connection levels (-c 100,200,500)"),
    (["-c", "5,2,5", "http://h/"], "connection level 5 given twice in -c 5,2,5"),
    (["-t", "0", "http://h/"], "invalid number of threads: '0' (must be at least 1)"),
    (["-t", "two", "http://h/"], "invalid number of threads: 'two' (expected a positive whole "
                                 "number)"),
    (["-d", "10sec", "http://h/"], "invalid duration: '10sec' (for example 500ms, 10s, 2m)"),
    (["-d", "0", "http://h/"], "invalid duration: '0' (for example 500ms, 10s, 2m)"),
    (["--slo-p99", "-1", "http://h/"], "invalid --slo-p99: '-1' (expected milliseconds > 0)"),
    (["--slo-p99", "fast", "http://h/"], "invalid --slo-p99: 'fast' (expected milliseconds > 0)"),
    (["-n", "a/b", "http://h/"], "invalid name: 'a/b' (a file name without '/')"),
    (["ftp://h/"], "invalid URL: 'ftp://h/' (expected http://host[:port]/path or https://...)"),
    (["--bogus", "http://h/"], "unrecognized arguments: --bogus"),
    (["http://h/", "--", "-c", "5"],
     "-c/--connections is set by volley-sweep: remove '-c' from the volley options"),
    (["--", "--conn=5", "http://h/"],
     "--connections is set by volley-sweep: remove '--conn=5' from the volley options"),
    (["--", "--json", "x.json", "http://h/"],
     "--json is set by volley-sweep: remove '--json' from the volley options"),
    (["--", "-Ld1s", "http://h/"],
     "-d/--duration is set by volley-sweep: remove '-Ld1s' from the volley options"),
    (["diff"], "the following arguments are required: A.dat, B.dat"),
    (["diff", "a.dat", "b.dat", "c.dat"], "unrecognized arguments: c.dat"),
    (["diff", "/nonexistent/a.dat", "b.dat"],
     "cannot read /nonexistent/a.dat: No such file or directory"),
])
def test_bad_arguments_are_one_clear_line(args, message, tmp_path):
    proc = sweep("-o", tmp_path / "out", *args) if args[:1] != ["diff"] else sweep(*args)
    assert proc.returncode == 1, proc
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert lines[0] == f"volley-sweep: {message}"
    assert lines[1].startswith("usage: volley-sweep ")
    assert not os.path.exists(tmp_path / "out")


def test_bad_data_file_and_unusable_volley(tmp_path):
    bad = tmp_path / "bad.dat"
    bad.write_text("# a comment\n10 1.0 2.0\n")
    proc = sweep("diff", bad, bad)
    assert proc.returncode == 1
    assert proc.stderr.splitlines()[0] == (
        f"volley-sweep: {bad}:2: not a volley-sweep data row (5 columns: connections, qps, "
        "mean_ms, p99_ms, success_pct)")
    proc = sweep("-c", "1", "http://h/", env=dict(os.environ, VOLLEY="/nonexistent/volley"))
    assert proc.returncode == 1
    assert proc.stderr.splitlines()[0] == \
        "volley-sweep: VOLLEY=/nonexistent/volley is not an executable file"


def test_installed_mode_bits():
    assert os.access(SWEEP, os.X_OK)
    with open(SWEEP) as f:
        assert f.readline() == "#!/usr/bin/env python3\n"
