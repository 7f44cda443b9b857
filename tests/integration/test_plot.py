"""scripts/volley-plot: charts of --timeline files (JSON Lines and CSV) and of
--json results (the latency percentile spectrum, several runs in one chart) as
real PNGs; its HdrHistogram decoder against the PyPI package's and its
spectrum against volley's own (wrk2's detailed percentile spectrum); the .gp
scripts redraw from their folder; bad input is one clear line.
SPDX-License-Identifier: MIT
"""
import base64
import json
import os
import re
import resource
import shutil
import signal
import struct
import subprocess
import sys
import zlib

import pytest
from hdrh.histogram import HdrHistogram

from conftest import (EVIL, ROOT, chart_text, check_gnuplot_scripts, load_script, mutants,
                      one_line_or_done, pwned, read_timeline, volley, volley_signalled)
from conftest import Testd as Server  # not collected as a test class

PLOT = os.path.join(ROOT, "scripts", "volley-plot")


def plot(*args, cwd=None, memory=None):
    """volley-plot ARGS; memory: its address space limit in bytes."""
    limit = (lambda: resource.setrlimit(resource.RLIMIT_AS, (memory, memory))) if memory \
        else None
    return subprocess.run([sys.executable, PLOT] + [str(a) for a in args], capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL, cwd=cwd,
                          preexec_fn=limit)


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
    assert proc.returncode == 0, proc.stderr
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
    assert (f"title 'closed: {url}, 1s, 1 thread, 4 connections, closed model; intervals of "
            "200ms") in gp
    for label in ("requests/s", "errors/s", "latency (ms)", "time since the start (s)"):
        assert f"'{label}'" in gp
    with open(os.path.join(tmp_path, "rate_timeline.gp")) as f:
        assert "rate 500/s" in f.read()
    with open(os.path.join(tmp_path, "closed_rate_spectrum.gp")) as f:
        gp = f.read()
    # Shared parameters in the title, the differing ones in the legend.
    assert f"set title 'latency percentile spectrum: {url}, 1s, 1 thread, 4 connections'" in gp
    assert "title 'closed (closed model)'" in gp and "title 'rate (rate 500/s)'" in gp
    assert "title 'rate (rate 500/s) from the actual send'" in gp
    assert "set logscale x" in gp and "'99.9%%' 1000" in gp


def test_timeline_data_is_the_timeline(runs, tmp_path):
    data, _ = runs
    proc = plot("-o", tmp_path, os.path.join(data, "closed.jsonl"))
    assert proc.returncode == 0, proc.stderr
    _, records = read_timeline(os.path.join(data, "closed.jsonl"))
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
    module = load_script("volley-plot")
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
    ('{"type":"run","url":"x"}\n{"type":"interval"}\n', "{path}: line 1: threads: missing"),
    ('{"type":"run","url":"x","threads":1,"connections":1,"duration_us":1,"requests":null,'
     '"rate":null,"script":null,"interval_us":1}\n', "{path}: no intervals"),
    ('{"schema_version":1}', "{path}: options: missing"),
    ('{"a":1}', "{path}: not a volley --timeline or --json result"),
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



# --------------------------------------------------------------------------
# Hostile input: nothing runs, nothing grows without bound, one line each
# --------------------------------------------------------------------------

def test_no_text_of_the_input_runs_in_gnuplot(testd, tmp_path):
    """The routes by which text of the input reaches a chart: the URL in a
    timeline and in a --json result, a file's name, -n. gnuplot runs
    nothing, then or when the .gp scripts are run again; they hold no
    double-quoted string but "\\n"; each chart shows the text as it was."""
    srv = testd()
    data = tmp_path / "data"
    data.mkdir()
    url = srv.url + "/" + EVIL.format("url")
    timeline, result = data / "run.jsonl", data / "run.json"
    run = volley("-t1", "-c1", "-d300ms", "--interval", "100ms", "--timeline", timeline,
                 "--json", result, url)
    assert run.returncode == 0, run.stderr
    stem = "x" + EVIL.format("stem")
    shutil.copy(timeline, data / (stem + ".jsonl"))
    name = "n" + EVIL.format("name")
    out = tmp_path / "out"
    proc = plot("-o", out, "-n", name, timeline, data / (stem + ".jsonl"), result, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [str(out / f) for f in (
        "run_timeline.png", stem + "_timeline.png", name + "_spectrum.png")]
    assert check_gnuplot_scripts(out) == 3
    text = chart_text(out, "run_timeline.gp", tmp_path / "again1")
    assert f"run: {url}, 300ms" in text
    assert f"{stem}: {url}, 300ms" in chart_text(out, stem + "_timeline.gp",
                                                 tmp_path / "again2")
    assert f"latency percentile spectrum: {url}, 300ms" in chart_text(
        out, name + "_spectrum.gp", tmp_path / "again3")
    assert pwned(tmp_path) == []


def test_csv_timeline_values_with_spaces_commas_and_url(testd, tmp_path):
    """A script path with a space, a comma and ' url=' in it, and a URL with
    a percent sign: volley-plot reads both back as they were."""
    srv = testd()
    script = tmp_path / "a=b url=c, d.lua"
    script.write_text("-- nothing\n")
    url = srv.url + "/x%41,y"
    timeline = tmp_path / "run.csv"
    run = volley("-t1", "-c1", "-d300ms", "--interval", "100ms", "-s", script, "--timeline",
                 timeline, url)
    assert run.returncode == 0, run.stderr
    proc = plot("-o", tmp_path, timeline)
    assert proc.returncode == 0, proc.stderr
    with open(tmp_path / "run_timeline.gp") as f:
        gp = f.read().replace("'.\"\\n\".'", " ")  # the title's lines, joined
    assert f"title 'run: {url}, 300ms, 1 thread, 1 connection, closed model, script " \
           "a=b url=c, d.lua; intervals of 100ms" in gp


def zigzag(v):
    """HdrHistogram's LEB128-64b9B ZigZag encoding of v."""
    v = (v << 1) ^ (v >> 63)
    out = b""
    for i in range(9):
        if i == 8:
            return out + bytes([v & 0xff])
        b, v = v & 0x7f, v >> 7
        if not v:
            return out + bytes([b])
        out += bytes([b | 0x80])


def histogram(header=(), counts=b"\x02", wrap=lambda z: z, compress=lambda p: zlib.compress(p)):
    """A V2 compressed histogram of volley's, but for the header fields
    given (index: value), its counts and what wrap does to its zlib stream."""
    fields = dict(enumerate([0x1c849313, 0, 0, 3, 1, 24 * 3600 * 10**6, 1.0]))
    fields.update(header)
    if 1 not in header:
        fields[1] = len(counts)
    payload = struct.pack(">IIIIqqd", *fields.values()) + counts
    z = wrap(compress(payload))
    return base64.b64encode(struct.pack(">II", 0x1c849314, len(z)) + z).decode()


@pytest.mark.parametrize("encoded,message", [
    # a zero run of 2^40 slots, then one count: 30 bytes
    (histogram(counts=zigzag(-(1 << 40)) + zigzag(1)), "broken counts"),
    (histogram(header={1: 0x7fffffff}), "not an HdrHistogram V2 payload"),
    ("HISTFAAA!!!!", "not base64"),
    # 64 MiB of counts in 64 KiB
    (histogram(counts=b"\x02" * (64 << 20)), "larger than any histogram of volley's"),
    (histogram(counts=b"\x80"), "broken counts"),
    (histogram(header={5: 2}, counts=zigzag(-3) + zigzag(1)),
     "a count above the highest trackable value"),
    (histogram(header={3: 2}), "histogram settings other than volley's (lowest 1, 3 "
                               "significant digits)"),
    (histogram(wrap=lambda z: z[:-3]), "a broken zlib stream"),
    (histogram(wrap=lambda z: z + b"x"), "a broken zlib stream"),
    (histogram(compress=lambda p: p), "a broken zlib stream"),
    (base64.b64encode(b"HIST").decode(), "not an HdrHistogram V2 compressed histogram"),
], ids=["bigzeros", "paylen", "b64bad", "bomb", "leb128-cut", "above-highest", "digits2",
        "zlib-cut", "zlib-trailing", "not-zlib", "short"])
def test_damaged_histograms_are_one_line_in_bounded_memory(runs, tmp_path, encoded, message):
    data, _ = runs
    with open(os.path.join(data, "closed.json")) as f:
        doc = json.load(f)
    doc["latency"]["hdr_histogram"] = encoded
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    # 512 MiB of address space, where the decoder once tried to build a list
    # of 2^40 numbers
    proc = plot("-o", tmp_path, path, memory=512 << 20)
    assert proc.returncode == 1
    assert proc.stderr.splitlines()[0] == f"volley-plot: {path}: latency.hdr_histogram: {message}"
    assert len(proc.stderr.splitlines()) == 2


def every_damage(tmp_path, monkeypatch, capsys, cases):
    """volley-plot on each case, gnuplot left out (so each ends saying it
    cannot run it, or what is wrong with the file)."""
    monkeypatch.setenv("GNUPLOT", str(tmp_path / "no-gnuplot"))
    one_line_or_done(load_script("volley-plot").main, "volley-plot", lambda work, path: ["-o", work, path],
                     cases, tmp_path, capsys)


def test_every_member_of_a_result_broken_in_turn(runs, tmp_path, monkeypatch, capsys):
    data, _ = runs
    with open(os.path.join(data, "rate.json")) as f:
        doc = json.load(f)
    cases = [(f"result {where}", "r.json", json.dumps(d)) for where, d in mutants(doc)]
    assert len(cases) > 500
    every_damage(tmp_path, monkeypatch, capsys, cases)


def test_every_member_of_a_timeline_broken_in_turn(runs, tmp_path, monkeypatch, capsys):
    data, _ = runs
    with open(os.path.join(data, "closed.jsonl")) as f:
        lines = [json.loads(line) for line in f]
    cases = []
    for i in (0, 1):
        for where, d in mutants(lines[i]):
            changed = lines[:i] + [d] + lines[i + 1:]
            cases.append((f"line {i + 1} {where}", "t.jsonl",
                          "".join(json.dumps(r) + "\n" for r in changed)))
    with open(os.path.join(data, "rate.csv")) as f:
        comment, header, row, *rest = f.read().splitlines(keepends=True)
    for k, pair in enumerate(comment.split(" ")[4:], 4):
        for value in ("", "x", "%zz", "%ff", "-1"):
            changed = comment.split(" ")
            changed[k] = pair.split("=")[0] + "=" + value if value else "x"
            cases.append((f"comment {pair} {value}", "t.csv",
                          " ".join(changed) + header + row + "".join(rest)))
    cells = row.rstrip("\n").split(",")
    for k in range(len(cells)):
        for value in ("", "x", "-1", "1e999", "nan", "1,2"):
            changed = cells[:k] + [value] + cells[k + 1:]
            cases.append((f"column {k} {value}", "t.csv",
                          comment + header + ",".join(changed) + "\n" + "".join(rest)))
    cases.append(("no header", "t.csv", comment))
    cases.append(("a header short of a column", "t.csv",
                  comment + header.split(",", 1)[1] + row))
    assert len(cases) > 400
    every_damage(tmp_path, monkeypatch, capsys, cases)
