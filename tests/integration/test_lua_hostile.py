"""Scripts that misbehave, beyond the hook errors and verification failures
test_lua.py covers: an error object that is not a string, request()
returning what is not a request during the run, endless recursion, huge
requests, absurd delays, endless loops. Each ends in one clear
"volley: file:LINE: message" and exit 1, or in the documented behaviour;
never in a crash (conftest's volley() also fails any sanitizer report).
SPDX-License-Identifier: MIT
"""
import signal
import subprocess
import time

import pytest

from conftest import VOLLEY, check_sanitizer, sigint_default, volley

ARGS = ("-t2", "-c4", "-d1s")


def script(tmp_path, text, name="s.lua"):
    """Writes the script; returns its name, relative to tmp_path, where the
    tests run volley (Lua shortens long file names in its messages)."""
    (tmp_path / name).write_text(text)
    return name


@pytest.mark.parametrize("hook", ["init", "response"])
@pytest.mark.parametrize("raise_,message", [
    ("error({code = 1})", "s.lua:1: (error object is a table value)"),
    ("error(nil)", "s.lua:1: (error object is a nil value)"),
    ("error(setmetatable({}, {__tostring = function() return 'custom msg' end}))",
     "s.lua:1: custom msg"),
    ("error(setmetatable({}, {__tostring = function() error('inner') end}))",
     "s.lua:1: (error object is a table value; its __tostring failed)"),
    ('error("before \\0 after")', "s.lua:1: before \\0 after"),
])
def test_error_objects_keep_where_they_were_raised(testd, tmp_path, hook, raise_, message):
    # On the main thread (init) and on a worker (response): the message as
    # Lua's interpreter would print it, after the file and line error()
    # adds only to strings; a NUL does not cut the message short.
    args = "args" if hook == "init" else "s"
    path = script(tmp_path, f"function {hook}({args}) {raise_} end\n")
    run = volley(*ARGS, "-s", path, testd().url, cwd=tmp_path)
    assert run.returncode == 1, run
    lines = run.stderr.splitlines()
    assert lines[0] == f"volley: {message}" and lines[1] == "stack traceback:", run
    assert f"{path}:1: in function" in run.stderr, run


def test_request_returning_nil_during_the_run_stops_that_connection(testd, tmp_path):
    # As in wrk: the connection sends no more, the others go on, and the run
    # ends with its report; volley says so once.
    path = script(tmp_path, "n = 0\nfunction request()\n  n = n + 1\n"
                            "  if n == 20 then return nil end\n  return wrk.format()\nend\n")
    srv = testd()
    run = volley(*ARGS, "-s", path, srv.url, cwd=tmp_path)
    assert run.returncode == 0, run
    assert run.report["requests"] > 100 and not run.report["socket_errors_line"], run
    lines = [l for l in run.stderr.splitlines() if not l.startswith("Warning: ")]
    # Each thread's request() returned nil once: one connection of each stopped.
    assert lines == [f"volley: {path}: request() returned nil on 2 connections, which then "
                     "sent no more requests"], run
    stats = srv.stop()
    # the four connections (and the start-up probe, which may still be open)
    assert stats["max_open_connections"] <= 5 and stats["requests"] >= run.report["requests"]


def test_request_returning_nil_everywhere_ends_the_run(testd, tmp_path):
    # No connection can send: the run ends at once, with -d and with -n
    # (which has no time limit), and the unsent requests are not waited for.
    path = script(tmp_path, "n = 0\nfunction request()\n  n = n + 1\n"
                            "  if n > 6 then return nil end\n  return wrk.format()\nend\n")
    for limit in (("-d", "20s"), ("-n", "1000")):
        srv = testd()
        run = volley("-t2", "-c4", *limit, "-s", path, srv.url, cwd=tmp_path, timeout=30)
        assert run.returncode == 0 and run.elapsed < 5, run
        # 6 per thread, less the one the first thread's verification used.
        assert run.report["requests"] == 11, run
        assert "request() returned nil on 4 connections" in run.stderr, run
        assert srv.stop()["requests"] == 11


def test_request_returning_nil_gives_its_share_of_n_to_the_others(testd, tmp_path):
    # The first thread's connections stop at once; the second thread's send
    # the whole of -n, exactly.
    path = script(tmp_path, "function setup(t) k = (k or 0) + 1; t:set('k', k) end\n"
                            "n = 0\nfunction request()\n  n = n + 1\n"
                            "  if k == 1 and n > 1 then return nil end\n"
                            "  return wrk.format()\nend\n")
    srv = testd()
    run = volley("-t2", "-c4", "-n", "500", "-s", path, srv.url, cwd=tmp_path, timeout=30)
    assert run.returncode == 0 and run.report["requests"] == 500, run
    assert "request() returned nil on 2 connections" in run.stderr, run
    assert srv.stop()["requests"] == 500


def test_request_returning_a_number_sends_it_as_a_string(testd, tmp_path):
    path = script(tmp_path, "n = 0\nfunction request()\n  n = n + 1\n"
                            "  if n > 3 then return 42 end\n  return wrk.format()\nend\n")
    srv = testd()
    run = volley("-t2", "-c4", "-d1s", "--timeout", "200ms", "-s", path, srv.url, cwd=tmp_path)
    assert run.returncode == 0, run
    # 3 requests per thread, less the one verification used; then "42",
    # which the server takes for the start of a request line and waits.
    assert run.report["requests"] == 5 and run.report["errors"]["timeout"] > 0, run
    stats = srv.stop()
    request = f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{srv.port}\r\n\r\n"
    extra = stats["bytes_in"] - 5 * len(request)
    assert extra % 2 == 0 and extra >= 2 * run.report["errors"]["timeout"], (stats, run)


def test_request_returning_a_table_during_the_run(testd, tmp_path):
    path = script(tmp_path, "n = 0\nfunction request()\n  n = n + 1\n"
                            "  if n > 5 then return {} end\n  return wrk.format()\nend\n")
    run = volley(*ARGS, "-s", path, testd().url, cwd=tmp_path)
    assert run.returncode == 1, run
    assert run.stderr == f"volley: {path}: request() returned table instead of a string\n", run


def test_malformed_request_after_verification_is_sent_as_is(testd, tmp_path):
    # As in wrk, only the first request() is verified: later ones go out as
    # they are, and the server's answers count as they come.
    path = script(tmp_path, "n = 0\nfunction request()\n  n = n + 1\n"
                            '  if n > 3 then return "NOT HTTP\\r\\n\\r\\n" end\n'
                            "  return wrk.format()\nend\n")
    srv = testd()
    run = volley(*ARGS, "-s", path, srv.url, cwd=tmp_path)
    assert run.returncode == 0, run
    stats = srv.stop()
    assert stats["bad_requests"] > 0 and run.report["non2xx"] > 0, (run, stats)


@pytest.mark.parametrize("where", ["init", "request"])
def test_endless_recursion(testd, tmp_path, where):
    text = "local function f(n) return f(n + 1) + 1 end\n"
    if where == "init":
        text += "function init(args) f(1) end\n"
    else:
        text += "n = 0\nfunction request()\n  n = n + 1\n  if n > 2 then f(1) end\n" \
                "  return wrk.format()\nend\n"
    path = script(tmp_path, text)
    run = volley(*ARGS, "-s", path, testd().url, cwd=tmp_path)
    assert run.returncode == 1, run
    # LuaJIT names the line when the overflow happens in compiled code, not
    # when it happens in the interpreter (and has no stack left for a
    # traceback then, at times).
    lines = run.stderr.splitlines()
    assert lines[0] in (f"volley: {path}:1: stack overflow", "volley: stack overflow"), run
    assert lines[1:2] in ([], ["stack traceback:"]), run


def test_huge_request_from_request_hook(testd, tmp_path):
    size = 16 << 20
    path = script(tmp_path, f'local body = string.rep("x", {size})\n'
                            "function request()\n"
                            '  return wrk.format("POST", "/big", nil, body)\nend\n')
    srv = testd()
    run = volley("-t1", "-c2", "-d1s", "--timeout", "5s", "-s", path, srv.url, cwd=tmp_path)
    assert run.returncode == 0, run
    stats = srv.stop()
    assert run.report["requests"] > 0 and not run.report["socket_errors_line"], run
    assert stats["body_bytes_in"] >= run.report["requests"] * size, stats


def test_huge_static_request(testd, tmp_path):
    # A 1 MiB path: the server refuses it (its head limit is 64 KiB), volley
    # counts the answers.
    path = script(tmp_path, 'wrk.path = "/" .. string.rep("a", 1024 * 1024)\n')
    srv = testd()
    run = volley(*ARGS, "-s", path, srv.url, cwd=tmp_path)
    assert run.returncode == 0, run
    stats = srv.stop()
    assert stats["bad_requests"] > 0 and run.report["non2xx"] > 0, (run, stats)


@pytest.mark.parametrize("value,waits", [("math.huge", True), ("1e300", True), ("-5", False),
                                         ("0/0", False), ('"abc"', False)])
def test_delay_out_of_range(testd, tmp_path, value, waits):
    # A delay past any run waits out the run (it used to overflow into no
    # delay at all); a negative, NaN or non-number delay is no delay.
    path = script(tmp_path, f"function delay()\n  return {value}\nend\n")
    srv = testd()
    run = volley(*ARGS, "-s", path, srv.url, cwd=tmp_path)
    assert run.returncode == 0 and run.elapsed < 4, run
    stats = srv.stop()
    if waits:
        assert run.report["requests"] == 0 and stats["requests"] == 0, (run, stats)
        assert run.cpu < 0.5, run
    else:
        assert run.report["requests"] > 0, run


def interrupt_when_stuck(args, after, cwd):
    """Start volley, SIGINT it `after` seconds in; returns (still running
    just before the signal, return code, stdout, stderr)."""
    proc = subprocess.Popen([VOLLEY, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, errors="replace", cwd=cwd,
                            preexec_fn=sigint_default)
    time.sleep(after)
    running = proc.poll() is None
    proc.send_signal(signal.SIGINT)
    try:
        out, err = proc.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"volley did not end on SIGINT\n{out}\n{err}")
    check_sanitizer("volley", err)
    return running, proc.returncode, out, err


def test_endless_loop_in_init_waits_for_ctrl_c(testd, tmp_path):
    # No guard (documented): volley waits for init() to return; Ctrl-C ends
    # it, before the run started, so without a report.
    path = script(tmp_path, "function init(args)\n  while true do end\nend\n")
    srv = testd()
    running, rc, out, _ = interrupt_when_stuck([*ARGS, "-s", path, srv.url], 2.0, tmp_path)
    assert running and rc == -signal.SIGINT and out == ""
    assert srv.stop()["requests"] == 0


def test_endless_loop_in_request_ends_on_ctrl_c(testd, tmp_path):
    # A thread stuck in request() cannot be joined at the end of the run:
    # volley waits, and Ctrl-C ends it at once.
    path = script(tmp_path, "n = 0\nfunction request()\n  n = n + 1\n"
                            "  if n > 3 then while true do end end\n"
                            "  return wrk.format()\nend\n")
    running, rc, out, _ = interrupt_when_stuck([*ARGS, "-s", path, testd().url], 2.5, tmp_path)
    assert running and rc == -signal.SIGINT
    assert out.startswith("Running 1s test @") and "requests in" not in out


STRICT = """setmetatable(_G, {
  __index = function(_, name) error("variable '" .. name .. "' is not declared", 2) end,
  __newindex = function(t, name, value) rawset(t, name, value) end,
})
"""


def test_strict_globals_run_as_any_script(testd, tmp_path):
    # Hooks are looked up without metamethods: an __index that raises for
    # undeclared names (a strict mode) is never asked about the hooks the
    # script does not define, neither in C nor in the wrk module.
    path = script(tmp_path, STRICT + "function setup(t) t:set('x', 1) end\n"
                                     "n = 0\nfunction response(s) n = n + 1 end\n"
                                     "function done(s) print('done', s.requests > 0) end\n")
    run = volley(*ARGS, "-s", path, testd().url, cwd=tmp_path)
    assert run.returncode == 0 and run.report["requests"] > 0, run
    assert run.stdout.splitlines()[-1] == "done\ttrue", run
    assert "PANIC" not in run.stderr


def test_strict_global_error_in_a_hook_is_reported(testd, tmp_path):
    path = script(tmp_path, STRICT + "function response(s)\n  undeclared_x = undeclared_y\nend\n")
    run = volley(*ARGS, "-s", path, testd().url, cwd=tmp_path)
    assert run.returncode == 1, run
    assert run.stderr.startswith(f"volley: {path}:6: variable 'undeclared_y' is not declared\n")


@pytest.mark.parametrize("text,what", [
    ("wrk = nil\n", "nil"),
    ('wrk = {method = "POST", body = "x"}\n', "another table"),
    ('function init(args) wrk = {method = "POST"} end\n', "another table"),
])
def test_replacing_the_wrk_table_is_a_clear_error(testd, tmp_path, text, what):
    path = script(tmp_path, text)
    srv = testd()
    run = volley(*ARGS, "-s", path, srv.url, cwd=tmp_path)
    assert run.returncode == 1, run
    assert run.stderr == f"volley: {path}: the script replaced the global wrk (with {what}): " \
                         'set its fields instead, as in wrk.method = "POST"\n', run
    assert srv.stop()["requests"] == 0
