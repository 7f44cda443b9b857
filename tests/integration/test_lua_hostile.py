"""Scripts that misbehave, beyond the hook errors and verification failures
test_lua.py covers: an error object that is not a string, request()
returning what is not a request during the run, endless recursion, huge
requests, absurd delays, endless loops. Each ends in one clear
"volley: file:LINE: message" and exit 1, or in the documented behaviour;
never in a crash (conftest's volley() also fails any sanitizer report).
SPDX-License-Identifier: MIT
"""
import json
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


# --------------------------------------------------------------------------
# os.exit()
# --------------------------------------------------------------------------

@pytest.mark.parametrize("where,text", [
    ("at the top level", "os.exit({code})\n"),
    ("in setup()", "function setup(t) os.exit({code}) end\n"),
    ("in init()", "function init(args) os.exit({code}) end\n"),
    ("in request()", "function request() os.exit({code}) end\n"),  # the start-up call
])
@pytest.mark.parametrize("code,status", [("9", 9), ("0", 0), ("", 0), ("true", 0),
                                         ("false", 1), ("'5', true", 5)])
def test_os_exit_before_the_run(testd, tmp_path, where, text, code, status):
    # Nothing ran: no report, the script's status, and a line that says
    # what happened (os.exit(0) is not mistaken for a run that passed);
    # an earlier result is left as it was.
    path = script(tmp_path, text.format(code=code))
    (tmp_path / "r.json").write_text('{"earlier": "result"}\n')
    srv = testd()
    run = volley(*ARGS, "-s", path, "--json", "r.json", srv.url, cwd=tmp_path)
    assert run.returncode == status and run.stdout == "", run
    assert run.stderr == f"volley: {path}:1: os.exit({status}) {where}: the run did not start\n"
    assert (tmp_path / "r.json").read_text() == '{"earlier": "result"}\n'
    assert srv.stop()["requests"] == 0


def test_os_exit_in_done(testd, tmp_path):
    path = script(tmp_path, "function done(summary, latency, requests)\n"
                            "  print('requests', summary.requests)\n  os.exit(7)\nend\n")
    srv = testd()
    run = volley(*ARGS, "-s", path, "--json", "r.json", srv.url, cwd=tmp_path)
    assert run.returncode == 7, run
    assert run.stdout.splitlines()[-1] == f"requests\t{run.report['requests']}", run
    assert run.stderr.splitlines()[-1] == f"volley: {path}:3: os.exit(7) in done()", run
    # The result was written before done() ran.
    assert json.loads((tmp_path / "r.json").read_text())["requests"] == run.report["requests"]
    assert srv.stop()["requests"] >= run.report["requests"] > 0


EXIT_HOOKS = {
    "request": ("function request()", "  return wrk.format()\n", 4),
    "response": ("function response(status)", "", 3),
    "delay": ("function delay()", "  return 0\n", 6),
}


def exit_script(tmp_path, hook):
    """A script whose hook calls os.exit on every thread after 20 calls."""
    head, tail, code = EXIT_HOOKS[hook]
    return script(tmp_path, f"n = 0\n{head}\n  n = n + 1\n  if n > 20 then os.exit({code}) end\n"
                            f"{tail}end\n"), code


@pytest.fixture
def exit_server(nginx, nginx_h2, server_cert):
    """Factory: nginx over HTTP/1.1, HTTPS, h2c or HTTP/2 over TLS; returns
    it and the options volley needs for it."""
    def start(kind):
        if kind in ("h2c", "h2-tls"):
            return nginx_h2(tls=kind == "h2-tls"), ["--http2"]
        tls = kind == "https"
        certs = f"ssl_certificate {server_cert['cert']};\n" \
                f"ssl_certificate_key {server_cert['key']};\n" if tls else ""
        return nginx(tls=tls, server=certs + 'location / { return 200 "hello\\n"; }'), []
    return start


def check_exit_run(run, path, hook, code, tmp_path):
    """A run os.exit() stopped in a hook: the script's status, never a
    signal, and what an interrupted run writes: the report, then the line."""
    assert run.returncode == code, run
    assert run.report["requests"] > 0 and run.stdout.count("requests in") == 1, run
    assert run.stderr.splitlines()[-1] == \
        f"volley: {path}:4: os.exit({code}) in {hook}(): the run was stopped", run
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["requests"] == run.report["requests"], run
    assert doc["end"] == {"reason": "script_exit", "signal": None, "exit_status": code}, doc
    return run.report["requests"]


@pytest.mark.parametrize("threads", [1, 4])
@pytest.mark.parametrize("kind", ["http", "https", "h2c", "h2-tls"])
@pytest.mark.parametrize("hook", list(EXIT_HOOKS))
def test_os_exit_during_the_run_ends_it_in_order(exit_server, tmp_path, hook, kind, threads):
    # os.exit() on worker threads while others may be inside OpenSSL: the
    # run stops as a Ctrl-C stops it, never with a crash from a worker's
    # exit() (the process exits once every worker is joined).
    path, code = exit_script(tmp_path, hook)
    srv, extra = exit_server(kind)
    conns, runs, responses = 4 * threads, 3, 0
    for _ in range(runs):
        run = volley(*extra, f"-t{threads}", f"-c{conns}", "-d5s", "-s", path, "--json",
                     "r.json", srv.url + "/", cwd=tmp_path)
        responses += check_exit_run(run, path, hook, code, tmp_path)
    # What was in flight when a run stopped may have been answered too.
    assert responses <= len(srv.log()) <= responses + runs * conns


@pytest.mark.parametrize("kind", ["https", "h2-tls"])
def test_os_exit_while_other_threads_handshake(exit_server, tmp_path, kind):
    # The case that crashed one run in eight: a new TLS handshake per
    # request on every other thread while one calls os.exit().
    path, code = exit_script(tmp_path, "response")
    srv, extra = exit_server(kind)
    for _ in range(30):
        run = volley(*extra, "--no-keepalive", "-t4", "-c16", "-d5s", "-s", path, "--json",
                     "r.json", srv.url + "/", cwd=tmp_path)
        check_exit_run(run, path, "response", code, tmp_path)


def test_os_exit_caught_by_pcall_still_ends_the_run(testd, tmp_path):
    # os.exit() cannot be caught: the hook goes no further on that thread.
    path = script(tmp_path, "n = 0\nfunction response(s)\n  n = n + 1\n"
                            "  if n > 20 then pcall(os.exit, 3); error('went on') end\nend\n")
    srv = testd()
    run = volley(*ARGS, "-s", path, "--json", "r.json", srv.url, cwd=tmp_path)
    assert run.returncode == 3, run
    assert "went on" not in run.stderr, run
    assert run.stderr.splitlines()[-1] == \
        f"volley: {path}:4: os.exit(3) in response(): the run was stopped", run
    assert srv.stop()["requests"] >= run.report["requests"] > 20
