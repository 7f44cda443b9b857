"""scripts/volley-plot: charts of --timeline files (JSON Lines and CSV) and of
--json results (the latency percentile spectrum, several runs in one chart) as
real PNGs; its HdrHistogram decoder against the PyPI package's and its
spectrum against volley's own (wrk2's detailed percentile spectrum); the .gp
scripts redraw from their folder; bad input is one clear line.
SPDX-License-Identifier: MIT
"""
import importlib.machinery
import importlib.util
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import sys

import pytest
from hdrh.histogram import HdrHistogram

from conftest import ROOT, read_timeline, volley, volley_signalled
from conftest import Testd as Server  # not collected as a test class

PLOT = os.path.join(ROOT, "scripts", "volley-plot")


def load_plot():
    loader = importlib.machinery.SourceFileLoader("volley_plot", PLOT)
    spec = importlib.util.spec_from_loader("volley_plot", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def plot(*args):
    return subprocess.run([sys.executable, PLOT] + [str(a) for a in args], capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL)


def png_size(path):
    with open(path, "rb") as f:
        data = f.read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", path
    assert data[12:16] == b"IHDR" and data[-8:-4] == b"IEND"
    assert len(data) > 5000  # something was drawn
    return struct.unpack(">II", data[16:24])


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two runs against volley-testd, one closed and one at a constant rate,
    each with a timeline (one JSON Lines, one CSV) and a --json result."""
    out = str(tmp_path_factory.mktemp("plot"))
    srv = Server(out, "--delay", "1", "--status-every", "10:503")
    try:
        files = {}
        for name, args in (("closed", ["-t1", "-c4", "-d1s", "--timeline",
                                       os.path.join(out, "closed.jsonl")]),
                           ("rate", ["-t1", "-c4", "-d1s", "-R", "500", "--latency",
                                     "--timeline", os.path.join(out, "rate.csv")])):
            result = os.path.join(out, name + ".json")
            run = volley(*args, "--interval", "200ms", "--json", result, srv.url + "/")
            assert run.returncode == 0, run
            files[name] = run
    finally:
        srv.stop()
    return out, files


def test_timelines_and_spectra_are_drawn(runs, tmp_path):
    data, _ = runs
    files = [os.path.join(data, f) for f in ("closed.jsonl", "rate.csv", "closed.json",
                                             "rate.json")]
    proc = plot("-o", tmp_path, *files)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    made = proc.stdout.split()
    assert made == [os.path.join(tmp_path, n) for n in
                    ("closed_timeline.png", "rate_timeline.png", "closed_rate_spectrum.png")]
    assert png_size(made[0]) == png_size(made[1]) == (900, 860)
    assert png_size(made[2]) == (900, 560)
    with open(os.path.join(tmp_path, "closed_timeline.gp")) as f:
        gp = f.read()
    # The title names the run; the axes carry units.
    with open(os.path.join(data, "closed.json")) as f:
        url = json.load(f)["options"]["url"]
    assert (f'title "closed: {url}, 1s, 1 threads, 4 connections, closed model; intervals of '
            '200ms"') in gp
    for label in ("requests/s", "errors/s", "latency (ms)", "time since the start (s)"):
        assert f"'{label}'" in gp
    with open(os.path.join(tmp_path, "rate_timeline.gp")) as f:
        assert "rate 500/s" in f.read()
    with open(os.path.join(tmp_path, "closed_rate_spectrum.gp")) as f:
        gp = f.read()
    # Shared parameters in the title, the differing ones in the legend.
    assert f'set title "latency percentile spectrum: {url}, 1s, 1 threads, 4 connections"' in gp
    assert 'title "closed (closed model)"' in gp and 'title "rate (rate 500/s)"' in gp
    assert 'title "rate (rate 500/s) from the actual send"' in gp
    assert "set logscale x" in gp and "'99.9%%' 1000" in gp


def test_timeline_data_is_the_timeline(runs, tmp_path):
    data, _ = runs
    proc = plot("-o", tmp_path, os.path.join(data, "closed.jsonl"))
    assert proc.returncode == 0, proc.stderr
    records = read_timeline(os.path.join(data, "closed.jsonl"))[1]
    with open(os.path.join(tmp_path, "closed_timeline.dat")) as f:
        rows = [line.split() for line in f if not line.startswith("#")]
    # One row per interval, and one closing the last at the run's end.
    assert len(rows) == len(records) + 1
    for row, r in zip(rows, records):
        secs = r["length_us"] / 1e6
        assert float(row[0]) == pytest.approx(r["start_us"] / 1e6, abs=0.001)
        assert float(row[1]) == pytest.approx(r["requests"] / secs, abs=0.01)
        assert float(row[4]) == pytest.approx(r["errors"]["status"] / secs, abs=0.01)
        assert float(row[7]) == pytest.approx(r["latency"]["p99"] / 1000, abs=0.001)
    assert float(rows[-1][0]) == pytest.approx(
        (records[-1]["start_us"] + records[-1]["length_us"]) / 1e6, abs=0.001)


def test_decoder_and_spectrum_agree_with_hdrhistogram_and_volley(runs):
    data, files = runs
    module = load_plot()
    with open(os.path.join(data, "rate.json")) as f:
        doc = json.load(f)
    encoded = doc["latency"]["hdr_histogram"]
    mine, reference = module.Histogram(encoded), HdrHistogram.decode(encoded)
    assert mine.total == reference.get_total_count() == doc["latency"]["count"]
    counts = list(reference.counts)
    assert mine.counts == counts[:len(mine.counts)] and not any(counts[len(mine.counts):])
    # volley's text report with -R --latency prints HdrHistogram's detailed
    # percentile spectrum (5 ticks per half distance); the plot's is the same.
    text = files["rate"].stdout
    block = text[text.index("Detailed Percentile spectrum:"):text.index("#[Mean")]
    printed = [(float(v), float(p)) for v, p in
               re.findall(r"^\s+([\d.]+)\s+([\d.]+)\s+\d+\s+\S+$", block, re.M)]
    spectrum = mine.spectrum()
    assert len(spectrum) == len(printed) - 1  # all but the final 100% row
    for (value, percentile), (v, p) in zip(spectrum, printed):
        assert round(value / 1000, 3) == v
        assert percentile / 100 == pytest.approx(p, abs=1e-6)


def test_gp_scripts_redraw_from_their_folder(runs, tmp_path):
    data, _ = runs
    out = os.path.join(tmp_path, "charts")
    proc = plot("-o", out, "-n", "both", os.path.join(data, "closed.json"),
                os.path.join(data, "rate.json"), os.path.join(data, "rate.csv"))
    assert proc.returncode == 0, proc.stderr
    moved = os.path.join(tmp_path, "moved")
    shutil.copytree(out, moved)
    for name in ("both_spectrum.png", "rate_timeline.png"):
        os.unlink(os.path.join(moved, name))
    for gp in ("both_spectrum.gp", "rate_timeline.gp"):
        subprocess.run(["gnuplot", gp], cwd=moved, check=True, timeout=60, capture_output=True)
    assert png_size(os.path.join(moved, "both_spectrum.png")) == (900, 560)
    assert png_size(os.path.join(moved, "rate_timeline.png")) == (900, 860)


def test_default_folder_and_one_result(runs, tmp_path):
    data, _ = runs
    copy = os.path.join(tmp_path, "closed.json")
    shutil.copy(os.path.join(data, "closed.json"), copy)
    proc = plot(copy)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == os.path.join(tmp_path, "closed_spectrum.png") + "\n"


def test_files_of_runs_cut_short_are_drawn_with_a_warning(tmp_path):
    srv = Server(str(tmp_path), "--delay", "1")
    try:
        args = ["-t1", "-c2", "--interval", "200ms", srv.url + "/"]
        volley_signalled("-d10s", "--json", "int.json", "--timeline", "int.csv", *args,
                         after=1.0, cwd=tmp_path)
        volley_signalled("-d10s", "--timeline", "killed.jsonl", *args, sig=signal.SIGKILL,
                         after=1.0, cwd=tmp_path)
        # -d 0 ends only with Ctrl-C: nothing to warn about
        volley_signalled("-d0", "--json", "unlimited.json", "--timeline", "unlimited.jsonl",
                         *args, after=1.0, cwd=tmp_path)
    finally:
        srv.stop()
    proc = plot("-o", tmp_path / "charts", *(tmp_path / f for f in (
        "int.csv", "killed.jsonl", "unlimited.jsonl", "int.json", "unlimited.json")))
    assert proc.returncode == 0, proc.stderr
    assert len(proc.stdout.split()) == 4  # three timelines and the spectra
    assert proc.stderr.splitlines() == [
        f"volley-plot: warning: {tmp_path}/int.csv: the run ended early (SIGINT interrupted "
        "it): the chart covers less than it asked for",
        f"volley-plot: warning: {tmp_path}/killed.jsonl: no end record: the run was cut short "
        "(killed?) or is still running",
        f"volley-plot: warning: {tmp_path}/int.json: the run ended early (SIGINT interrupted "
        "it): the chart covers less than it asked for"]


@pytest.mark.parametrize("content,message", [
    ("hello\n", "{path}: not a volley --timeline or --json result"),
    ('{"type":"run","url":"x"}\n{"type":"interval"}\n', "{path}: a damaged volley timeline"),
    ('{"type":"run","url":"x","threads":1,"connections":1}\n', "{path}: no intervals"),
])
def test_bad_input_is_one_clear_line(tmp_path, content, message):
    path = os.path.join(tmp_path, "in.txt")
    with open(path, "w") as f:
        f.write(content)
    proc = plot("-o", tmp_path, path)
    assert proc.returncode == 1
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert lines[0] == "volley-plot: " + message.format(path=path)
    assert lines[1].startswith("usage: volley-plot ")
    proc = plot(os.path.join(tmp_path, "missing.json"))
    assert proc.stderr.splitlines()[0] == \
        f"volley-plot: cannot read {tmp_path}/missing.json: No such file or directory"
    proc = plot()
    assert proc.returncode == 1
    assert proc.stderr.splitlines()[0] == "volley-plot: the following arguments are required: FILE"

