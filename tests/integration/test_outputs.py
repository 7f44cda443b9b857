"""Where the results go: two outputs never share a file (nor an output the
script, a file merged or the report's standard output), a FIFO without a
reader is waited for with a line saying so, a directory that refuses a new
file is named, and every output that could not be written is said.
SPDX-License-Identifier: MIT
"""
import json
import os
import select
import shutil
import subprocess
import threading

import pytest

from conftest import VOLLEY, check_sanitizer, volley

SAME = "are the same file: each output needs a file of its own"


def files_in(d):
    """Every file under d with its content (links as where they lead)."""
    out = {}
    for name in sorted(os.listdir(d)):
        path = os.path.join(d, name)
        if os.path.islink(path):
            out[name] = "-> " + os.readlink(path)
        elif os.path.isfile(path):
            with open(path) as f:
                out[name] = f.read()
    return out


@pytest.mark.parametrize("args,message", [
    (["--timeline", "same", "--hdr-log", "same"],
     f"--timeline same and --hdr-log same {SAME}"),
    (["--json", "same", "--timeline", "./same"], f"--json same and --timeline ./same {SAME}"),
    (["--json", "s.lua", "-s", "s.lua"], "--json s.lua is the script (-s s.lua): it would be "
                                         "overwritten"),
    (["--hdr-log", "./s.lua", "-s", "s.lua"], "--hdr-log ./s.lua is the script (-s s.lua): it "
                                              "would be overwritten"),
    # a symbolic link, a hard link, a link to the directory of a new file
    (["--json", "old.json", "--timeline", "link.json"],
     f"--json old.json and --timeline link.json {SAME}"),
    (["--timeline", "old.json", "--hdr-log", "hard.json"],
     f"--timeline old.json and --hdr-log hard.json {SAME}"),
    (["--json", "sub/new.json", "--timeline", "subdir/new.json"],
     f"--json sub/new.json and --timeline subdir/new.json {SAME}"),
    # a link to a file still to be created
    (["--json", "dangling", "--hdr-log", "subdir/later.json"],
     f"--json dangling and --hdr-log subdir/later.json {SAME}"),
    (["--json", "loop1"], "cannot open loop1: Too many levels of symbolic links"),
])
def test_two_outputs_on_one_file_are_refused_before_the_run(testd, tmp_path, args, message):
    srv = testd()
    (tmp_path / "s.lua").write_text("-- the script\n")
    (tmp_path / "old.json").write_text('{"earlier": "result"}\n')
    (tmp_path / "link.json").symlink_to("old.json")
    os.link(tmp_path / "old.json", tmp_path / "hard.json")
    (tmp_path / "subdir").mkdir()
    (tmp_path / "sub").symlink_to("subdir")
    (tmp_path / "dangling").symlink_to("subdir/later.json")
    (tmp_path / "loop1").symlink_to("loop2")
    (tmp_path / "loop2").symlink_to("loop1")
    before = files_in(tmp_path)
    run = volley("-t1", "-c1", "-d300ms", *args, srv.url, cwd=tmp_path)
    assert run.returncode == 1, run
    assert run.stderr == f"volley: {message}\n" and run.stdout == "", run
    assert files_in(tmp_path) == before and os.listdir(tmp_path / "subdir") == []
    assert srv.stats()["connections"] == 0


def test_json_through_a_link_to_a_file_not_there_yet_creates_that_file(testd, tmp_path):
    # as `echo > link` would, and as a link to a file that exists replaces
    # the file, not the link
    srv = testd()
    (tmp_path / "results").mkdir()
    link = tmp_path / "latest.json"
    link.symlink_to("results/run1.json")
    run = volley("-t1", "-c1", "-d300ms", "--json", link, srv.url)
    assert run.returncode == 0, run
    assert link.is_symlink() and os.readlink(link) == "results/run1.json"
    assert json.loads((tmp_path / "results" / "run1.json").read_text())["requests"] > 0
    assert os.listdir(tmp_path / "results") == ["run1.json"]


def test_standard_output_is_one_file_however_it_is_named(testd, tmp_path):
    srv = testd()
    # "-" and /dev/stdout (a pipe here) are one file
    run = volley("-t1", "-c1", "-d300ms", "--json", "/dev/stdout", "--timeline", "-", srv.url)
    assert run.returncode == 1 and run.stdout == "", run
    assert run.stderr == "volley: --json /dev/stdout and --timeline - are the same file " \
                         "(standard output): each output needs a file of its own\n", run
    # a file that stdout goes to, under another name, would lose the report
    out = tmp_path / "out.txt"
    with open(out, "w") as f:
        proc = subprocess.run([VOLLEY, "-t1", "-c1", "-d300ms", "--timeline", str(out), srv.url],
                              stdout=f, stderr=subprocess.PIPE, text=True, timeout=30)
    check_sanitizer("volley", proc.stderr)
    assert proc.returncode == 1, proc
    assert proc.stderr == f"volley: --timeline {out} is standard output, where the report goes: " \
                          "--timeline - writes there instead, and the report to stderr\n", proc
    assert out.read_text() == ""
    assert srv.stats()["connections"] == 0


def test_outputs_that_may_share_a_device_run(testd, tmp_path):
    # /dev/null takes any number of writers; /dev/stdout into a pipe after
    # the report is still written in place (test_json covers its content).
    srv = testd()
    run = volley("-t1", "-c1", "-d300ms", "--json", "/dev/null", "--timeline", "/dev/null",
                 "--hdr-log", "/dev/null", srv.url)
    assert run.returncode == 0 and run.report["requests"] > 0, run
    # One pipe for stdout and stderr, as a pod's log: volley-kube has the
    # result on stdout and the timeline on stderr, and tells them apart.
    proc = subprocess.run([VOLLEY, "-t1", "-c1", "-d300ms", "--json", "-", "--timeline",
                           "/dev/stderr", srv.url], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=30)
    check_sanitizer("volley", proc.stdout)
    assert proc.returncode == 0, proc.stdout
    records = [json.loads(l) for l in proc.stdout.splitlines() if l.startswith('{"type":')]
    doc = json.loads(proc.stdout[proc.stdout.index("\n{\n") + 1:])
    assert sum(r["requests"] for r in records if r["type"] == "interval") == doc["requests"] > 0
    assert srv.stats()["responses"] >= run.report["requests"] + doc["requests"]


def test_merge_refuses_to_write_over_a_file_it_merges(testd, tmp_path):
    srv = testd()
    part = tmp_path / "r.json"
    run = volley("-t1", "-c1", "-d300ms", "--json", part, srv.url)
    assert run.returncode == 0, run
    before = part.read_text()
    for option in ("--json", "--timeline", "--hdr-log"):
        run = volley("merge", part, option, part)
        assert run.returncode == 1, run
        assert run.stderr == f"volley: {option} {part} is a file to merge: it would be " \
                             "overwritten\n", run
        assert part.read_text() == before


class Reader(threading.Thread):
    """Reads a FIFO to its end once started, as `cat fifo` would."""

    def __init__(self, path):
        super().__init__(daemon=True)
        self.path, self.data = path, None

    def run(self):
        with open(self.path) as f:
            self.data = f.read()


@pytest.mark.parametrize("option", ["--json", "--timeline", "--hdr-log"])
def test_a_fifo_without_a_reader_is_waited_for_and_said(testd, tmp_path, option):
    srv = testd()
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    proc = subprocess.Popen([VOLLEY, "-t1", "-c1", "-d300ms", option, str(fifo), srv.url],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # the line comes while volley waits, before any connection is made
        ready, _, _ = select.select([proc.stderr], [], [], 20)
        assert ready, "nothing said while waiting for a reader"
        assert proc.stderr.readline() == f"volley: waiting for a reader on {fifo} ({option})\n"
        assert proc.poll() is None
        reader = Reader(fifo)
        reader.start()
        out, err = proc.communicate(timeout=30)
        reader.join(timeout=10)
    finally:
        proc.kill()
        proc.wait()
    check_sanitizer("volley", err)
    assert proc.returncode == 0 and err == "", err
    requests = int(out.split(" requests in ")[0].split()[-1])
    if option == "--json":
        assert json.loads(reader.data)["requests"] == requests > 0
    elif option == "--timeline":
        lines = [json.loads(line) for line in reader.data.splitlines()]
        assert lines[-1]["type"] == "end" and lines[-1]["reason"] == "completed", lines[-1]
        assert sum(r["requests"] for r in lines[1:-1]) == requests > 0
    else:
        assert reader.data.startswith("#[Histogram log format version 1.3]")
    assert srv.stats()["responses"] >= requests


def as_another_user():
    """How to run volley so that a directory another user owns refuses it a
    new file: as it is, or as root without the capabilities that override
    file permissions (the directory is then given to nobody)."""
    if os.geteuid() != 0:
        return []
    return [shutil.which("setpriv"), "--bounding-set", "-dac_override,-dac_read_search,-fowner"]


def test_a_directory_that_refuses_a_new_file_is_named(testd, tmp_path):
    # --json writes a new file beside the one it replaces: the file may be
    # writable when its directory is not.
    srv = testd()
    d = tmp_path / "results"
    d.mkdir()
    (d / "mine.json").write_text("earlier\n")
    (d / "mine.json").chmod(0o666)
    if os.geteuid() == 0:
        os.chown(d, 65534, 65534)
    d.chmod(0o555)
    try:
        cases = [
            (["--json", "results/mine.json"], "cannot create a file in the directory results "
                                              "(for --json results/mine.json): Permission denied"),
            (["--timeline", "results/t.jsonl"], "cannot create a file in the directory results "
                                                "(for --timeline results/t.jsonl): Permission "
                                                "denied"),
        ]
        for args, message in cases:
            proc = subprocess.run(as_another_user() + [VOLLEY, "-t1", "-c1", "-d300ms", *args,
                                                       srv.url],
                                  capture_output=True, text=True, timeout=30, cwd=tmp_path)
            check_sanitizer("volley", proc.stderr)
            assert proc.returncode == 1, proc
            assert proc.stderr == f"volley: {message}\n", proc
        proc = subprocess.run(as_another_user() + [VOLLEY, "-t1", "-c1", "-d300ms", "--json",
                                                   "mine.json", srv.url],
                              capture_output=True, text=True, timeout=30, cwd=d)
        assert proc.stderr == "volley: cannot create a file in the current directory (for " \
                              "--json mine.json): Permission denied\n", proc
    finally:
        d.chmod(0o755)
    assert os.listdir(d) == ["mine.json"] and (d / "mine.json").read_text() == "earlier\n"
    # (a timeline is opened once the start-up probe found the target)
    assert srv.stats()["requests"] == 0


def test_every_output_that_could_not_be_written_is_said(testd, tmp_path):
    # A full disk for all three: one line each, after the report, exit 1.
    srv = testd()
    full = tmp_path / "full"
    full.symlink_to("/dev/full")
    run = volley("-t1", "-c1", "-d300ms", "--json", "/dev/full", "--timeline", full,
                 "--hdr-log", "/dev/full", srv.url)
    assert run.returncode == 1, run
    assert run.report["requests"] > 0, run
    assert run.stderr.splitlines() == [
        "volley: cannot write /dev/full (--json): No space left on device",
        f"volley: cannot write {full} (--timeline): No space left on device",
        "volley: cannot write /dev/full (--hdr-log): No space left on device"], run
    # one that failed does not stop the others from being written
    out = tmp_path / "r.json"
    run = volley("-t1", "-c1", "-d300ms", "--json", out, "--hdr-log", "/dev/full", srv.url)
    assert run.returncode == 1, run
    assert run.stderr == "volley: cannot write /dev/full (--hdr-log): No space left on device\n"
    assert json.loads(out.read_text())["requests"] == run.report["requests"] > 0
