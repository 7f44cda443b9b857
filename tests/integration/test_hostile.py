"""volley against servers that misbehave (volley-testd's hostile modes), run
with -d2s --timeout 1s as the sanitizer build when the suite runs on it: it
must keep measuring, count the trouble in the right error class (and, in
--json, under the right cause), print the whole report, exit 0 on time, and
not burn CPU while the target is dead or silent. conftest's volley() fails
any run with a sanitizer report.
SPDX-License-Identifier: MIT
"""
import json
import os
import subprocess
import time

import pytest

from conftest import VOLLEY, Run, check_sanitizer, volley

DURATION, TIMEOUT = 2.0, 1.0
# Start-up, the last timer and the sanitizer's exit checks, on a busy machine.
MARGIN = 1.5
ARGS = ("-t2", "-c10", "-d2s", "--timeout", "1s")
CLASSES = ("connect", "read", "write", "timeout")

# id: (testd options, the error class it must cause or None, the cause it
# is counted under in --json, whether responses complete, whether volley
# waits on a silent server)
MODES = {
    # Not HTTP: every answer is a parse error, the connection is dropped.
    "garbage": (["--hostile", "garbage"], "read", "parse_error", False, False),
    # Content-Length: 100, 10 bytes, close: a truncated response.
    "short-body": (["--hostile", "short-body"], "read", "truncated", False, False),
    # RST after the request.
    "reset": (["--hostile", "reset"], "read", "reset", False, False),
    # Requests read, never answered: each one times out.
    "never-answer": (["--never"], "timeout", "response_timeout", False, True),
    # One byte every 2 ms: a response of ~100 bytes takes ~0.2 s < --timeout.
    "trickle": (["--hostile", "trickle", "--trickle-ms", "2"], None, None, True, True),
    # A 1 MiB header field: past the 80 KiB head limit.
    "huge-header": (["--hostile", "huge-header"], "read", "header_too_large", False, False),
    # Transfer-Encoding: chunked with the chunk size "zz".
    "bad-chunk": (["--hostile", "bad-chunk"], "read", "parse_error", False, False),
    # 16 MiB bodies, larger than any buffer (socket buffers included):
    # skipped, not stored.
    "huge-body": (["--hostile", "huge-body", "--body-size", "16m"], None, None, True, False),
    # The requests are never read: each one times out.
    "no-read": (["--hostile", "no-read"], "timeout", "response_timeout", False, True),
    # 100 Continue forever: the interim heads share the final head's 80 KiB,
    # so each connection fails within that (not gigabytes later, timed out).
    "interim-flood": (["--hostile", "interim-flood"], "read", "header_too_large", False, False),
    # A 204 with a body: each response counts; the bytes after it fail the
    # connection with no request in flight, an error that ended no request.
    "body-204": (["--hostile", "body-204"], None, None, True, False),
}


def check_report(run):
    """Exit 0 and every line of wrk's report."""
    assert run.returncode == 0, run
    r = run.report
    assert r.get("duration") == "2s" and r.get("threads") == 2 and r.get("connections") == 10, run
    for key in ("latency_avg", "rps_avg", "requests", "rps", "transfer"):
        assert key in r, (key, run)
    assert "  Thread Stats   Avg      Stdev     Max   +/- Stdev\n" in run.stdout, run
    assert run.elapsed < DURATION + TIMEOUT + MARGIN, run


def causes(path):
    with open(path) as f:
        return {k: v for k, v in json.load(f)["error_causes"].items() if v}


@pytest.mark.parametrize("mode", MODES)
def test_hostile_server(testd, tmp_path, mode):
    options, error_class, cause, completes, silent = MODES[mode]
    srv = testd(*options)
    # The text report on stdout, and the same results as JSON in a file.
    run = volley(*ARGS, "--json", tmp_path / "r.json", srv.url + "/")
    check_report(run)
    errors, r = run.report["errors"], run.report
    stats = srv.stop()
    assert stats["requests"] > 0 or mode == "no-read", stats
    if error_class:
        assert r["socket_errors_line"] and errors[error_class] > 0, run
        # Nothing is counted in a class it does not belong to, and within
        # the class all of it under the one cause.
        assert all(errors[c] == 0 for c in CLASSES if c != error_class), run
        assert causes(tmp_path / "r.json") == {cause: errors[error_class]}, run
    elif mode == "huge-body":
        # On a loaded machine a 16 MiB response can take longer than the
        # 1 s --timeout; nothing else may go wrong.
        assert errors["connect"] == errors["read"] == errors["write"] == 0, run
    else:
        assert not r["socket_errors_line"], run
    if completes:
        assert r["requests"] > 0, run
        assert r["requests"] <= stats["responses"], (run, stats)
    else:
        assert r["requests"] == 0, run
    if error_class == "read":
        # Each dropped connection was one the server saw: no read error was
        # counted twice, none without a connection behind it.
        assert errors["read"] <= stats["connections"], (run, stats)
    if error_class == "timeout":
        # One timeout per request outstanding for --timeout: with 10
        # connections over 2 s, one or two rounds.
        assert 10 <= errors["timeout"] <= 20, run
    if silent:
        # Waiting costs nothing: no busy loop while the server is silent.
        assert run.cpu < 0.25 * run.elapsed, run
    if mode == "interim-flood":
        # the head limit, and what the last reads brought beyond it
        assert r["bytes"] <= errors["read"] * (80 + 3 * 64) * 1024, run
    if mode == "huge-body":
        # the report rounds bytes to 3 significant digits
        assert r["bytes"] >= 0.99 * r["requests"] * (16 << 20), run


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_server_dies_mid_run(testd, tmp_path):
    """The server exits 300 ms in: every reconnect from then on is refused.
    They count as connect errors, with back-off, so the dead second costs
    (almost) no CPU, and the run still ends on time with its report."""
    srv = testd("--hostile", "die-after:300")
    start = time.monotonic()
    json_path = tmp_path / "r.json"
    proc = subprocess.Popen([VOLLEY, *ARGS, "--json", json_path, srv.url + "/"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            errors="replace")
    time.sleep(0.9)
    dead_from = cpu_seconds(proc.pid)
    time.sleep(1.0)
    dead_cpu = cpu_seconds(proc.pid) - dead_from
    out, err = proc.communicate(timeout=30)
    run = Run(subprocess.CompletedProcess(proc.args, proc.returncode, out, err),
              time.monotonic() - start)
    check_sanitizer("volley", err)
    check_report(run)
    stats = srv.stats()
    assert not srv.alive()
    errors = run.report["errors"]
    assert errors["connect"] > 0 and errors["write"] == 0 and errors["timeout"] == 0, run
    # Every failed connect was refused (none timed out, none hit a limit).
    assert causes(json_path)["refused"] == errors["connect"], run
    # Only the requests in flight when the server died fail as read errors.
    assert errors["read"] <= 10, run
    # Back-off: 1 ms doubling to 1 s, so about ten attempts per connection in
    # the 1.7 s the target is dead, not thousands.
    assert errors["connect"] <= 10 * 15, run
    # What was answered before the end was counted.
    assert 0 < run.report["requests"] <= stats["responses"], (run, stats)
    assert dead_cpu < 0.1, f"{dead_cpu:.2f}s of CPU in 1 s against a dead target\n{run}"


def test_an_error_that_ends_no_request_is_no_attempt(testd, tmp_path):
    """The stray body of each 204 drops its connection when nothing is in
    flight: counted under its cause, but no request's outcome, so -n's
    responses and errors add up to N and every request answered is a
    success."""
    srv = testd("--hostile", "body-204")
    json_path = tmp_path / "r.json"
    run = volley("-t1", "-c2", "-n", "100", "--threshold", "success >= 99%", "--json", json_path,
                 srv.url + "/")
    assert run.returncode == 0, run
    assert run.report["requests"] == 100 and not run.report["socket_errors_line"], run
    assert "Threshold success >= 99%: passed (success = 100%)" in run.stdout, run
    with open(json_path) as f:
        doc = json.load(f)
    assert doc["success"] == {"ok": 100, "attempts": 100, "percent": 100}, doc
    assert doc["errors"] == {"connect": 0, "read": 0, "write": 0, "timeout": 0, "status": 0}
    found = causes(json_path)
    assert list(found) == ["unexpected_data"] and 0 < found["unexpected_data"] <= 100, found
    assert f"Note: {found['unexpected_data']} connection errors ended no request (none was in " \
           f"flight): they are in --json's error_causes, not in Socket errors\n" in run.stderr, run
    stats = srv.stop()
    assert stats["requests"] == stats["responses"] == 100 and stats["status"] == {"204": 100}
