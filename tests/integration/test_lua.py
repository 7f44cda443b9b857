"""Lua scripting against real servers: the example scripts Debian's wrk
package ships (run in place, unmodified) and volley's own in scripts/, each
checked against what the server logged; then the API piece by piece (args,
the wrk table, wrk.format, lookup/connect, threads, done() statistics) and
script errors.
SPDX-License-Identifier: MIT
"""
import os
import re
import subprocess

import pytest

from conftest import OUR_SCRIPTS, check_auth_log, free_port, header, max_open_is, ok, volley

def write(tmp_path, text, name="t.lua"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def line_of(text, marker):
    """The line number of the first line of text containing marker."""
    return next(i for i, line in enumerate(text.splitlines(), 1) if marker in line)


def before_running(out):
    return out.split("Running ")[0].splitlines()


def after_report(out):
    """What the script printed after the report (volley's own warnings go to
    stderr, so that nothing comes between the two)."""
    return out.split("Transfer/sec:")[1].splitlines()[1:]


# --------------------------------------------------------------------------
# The example scripts
# --------------------------------------------------------------------------

def test_addr(example, testd):
    srv = testd()
    run = ok(volley("-t2", "-c4", "-d300ms", "-s", example("addr"), srv.url))
    assert before_running(run.stdout) == [f"thread addr: 127.0.0.1:{srv.port}"] * 2, run
    stats = srv.stop()
    assert run.report["requests"] <= stats["responses"] <= run.report["requests"] + 4
    # setup() probed the address once more: the run's probe + that one + 4
    assert stats["connections"] == 6, stats


def test_addr_ipv6(example, testd):
    srv = testd(listen="[::1]:0")
    run = ok(volley("-t1", "-c1", "-d300ms", "-s", example("addr"), srv.url))
    assert before_running(run.stdout) == [f"thread addr: ::1:{srv.port}"], run


def test_auth(example, testd):
    srv = testd()
    ok(volley("-t2", "-c6", "-d500ms", "-s", example("auth"), srv.url))
    # two threads, six connections
    check_auth_log(srv.log(), logins_at_most=6, resources_over=100)
    assert "401" not in srv.stats()["status"], srv.stats()


def test_counter(example, testd):
    srv = testd()
    run = ok(volley("-t1", "-c3", "-d300ms", "-s", example("counter"), srv.url))
    log = srv.log()
    numbers = sorted(int(r["target"][1:]) for r in log)
    # request() was called once before the run to check it (as in wrk): the
    # first one on the wire is /1, then one path per request, none twice
    assert numbers == list(range(1, len(log) + 1)), numbers[:10]
    for r in log:
        assert header(r, "X-Counter") == r["target"][1:], r
        assert header(r, "Host") == f"127.0.0.1:{srv.port}"
    assert len(log) - 3 <= run.report["requests"] <= len(log)


def test_counter_counts_per_thread(example, testd):
    srv = testd()
    ok(volley("-t2", "-c4", "-d300ms", "-s", example("counter"), srv.url))
    seen = {}
    for r in srv.log():
        seen[r["target"]] = seen.get(r["target"], 0) + 1
    # one counter per thread: /0 once (second thread only), the low paths twice
    assert seen["/0"] == 1
    assert seen["/1"] == seen["/2"] == 2
    assert max(seen.values()) == 2


def test_delay(example, testd):
    srv = testd()
    run = ok(volley("-t1", "-c4", "-d1s", "-s", example("delay"), srv.url))
    n = srv.stop()["requests"]
    # 10-50 ms before each request: about 30 ms apart on each connection
    assert 4 * 1000 / 55 <= n <= 4 * 1000 / 15, run
    # the pause (10 ms at least) is not latency
    assert run.report["latency_avg"] < 10000, run


def test_pipeline(example, testd):
    srv = testd()
    run = ok(volley("-t2", "-c4", "-d500ms", "-s", example("pipeline"), srv.url))
    stats = srv.stop()
    counts = {}
    for r in srv.log():
        assert r["target"].startswith("/?"), r
        counts[r["target"]] = counts.get(r["target"], 0) + 1
    # three paths in equal numbers (a batch in flight at the end may be cut)
    assert len(counts) == 3, counts
    assert max(counts.values()) - min(counts.values()) <= 4, counts
    # the three came in one read: written together
    assert stats["max_requests_per_read"] == 3
    n = run.report["requests"]
    assert n <= stats["responses"] <= n + 3 * 4
    # each response counts; one latency sample per batch of three
    assert n % 3 == 0


def test_pipeline_depth_from_args(testd):
    srv = testd()
    script = os.path.join(OUR_SCRIPTS, "pipeline.lua")
    ok(volley("-t1", "-c2", "-d300ms", "-s", script, srv.url, "8"))
    stats = srv.stop()
    assert stats["max_requests_per_read"] == 8
    assert len(stats["paths"]) == 1 and len({r["target"] for r in srv.log()}) == 8


POST_BODY = {"wrk": "foo=bar&baz=quux", "volley": "name=volley&kind=benchmark"}


def test_post(example, testd):
    srv = testd()
    ok(volley("-t2", "-c4", "-d300ms", "-s", example("post"), srv.url + "/form"))
    log = srv.log()
    body = POST_BODY[example.origin]
    assert log
    for r in log:
        assert (r["method"], r["target"], r["body"]) == ("POST", "/form", body), r
        assert header(r, "Content-Type") == "application/x-www-form-urlencoded"
        assert header(r, "Content-Length") == str(len(body))
        assert len(r["headers"]) == 3, r  # Host, Content-Type, Content-Length


def test_report(example, testd):
    srv = testd("--delay", 2)
    run = ok(volley("-t1", "-c4", "-d500ms", "--latency", "-s", example("report"), srv.url))
    lines = after_report(run.stdout)
    assert lines[0] == "-" * 30
    assert [l.split(",")[0] for l in lines[1:]] == ["50%", "90%", "99%", "99.999%"], lines
    values = [int(l.split(",")[1]) for l in lines[1:]]
    assert values == sorted(values) and values[0] >= 2000, lines
    # the same percentile as the report's distribution (which prints 2 decimals)
    p50 = run.report["percentiles"][50]
    assert abs(values[0] - p50) <= max(0.005 * p50, 1), (values[0], run)


def test_setup(example, testd):
    srv = testd()
    run = ok(volley("-t2", "-c5", "-d500ms", "-s", example("setup"), srv.url))
    assert before_running(run.stdout) == ["thread 1 created", "thread 2 created"]
    done = after_report(run.stdout)
    assert len(done) == 2, run
    made, got = 0, 0
    for i, line in enumerate(done, 1):
        m = re.fullmatch(r"thread (\d+) made (\d+) requests and got (\d+) responses", line)
        assert m and int(m.group(1)) == i, line
        requests, responses = int(m.group(2)), int(m.group(3))
        # requests still unanswered at the end: at most one per connection
        # (3 on the first thread, plus the check before the run)
        assert 0 <= requests - responses <= (4 if i == 1 else 2), line
        made, got = made + requests, got + responses
    assert got == run.report["requests"]
    # everything request() made was sent, except the check before the run
    assert srv.stop()["requests"] == made - 1


def test_stop(example, testd):
    srv = testd()
    run = ok(volley("-t2", "-c4", "-d20s", "-s", example("stop"), srv.url))
    # each thread stops after 100 responses; when both have, the run ends
    assert run.report["requests"] == 200, run
    assert run.elapsed < 5, run
    assert run.report["runtime_us"] < 4e6
    stats = srv.stop()
    assert 200 <= stats["responses"] <= 204


# --------------------------------------------------------------------------
# HEAD
# --------------------------------------------------------------------------

@pytest.mark.parametrize("options", [[], ["--chunked"], ["--body-size", "100k"]])
def test_head_requests(testd, options):
    srv = testd(*options)
    run = ok(volley("-t1", "-c2", "-d300ms", "-s", os.path.join(OUR_SCRIPTS, "head.lua"),
                    srv.url))
    stats = srv.stop()
    assert run.report["requests"] > 100, run
    assert stats["methods"] == {"HEAD": stats["requests"]}
    assert stats["connections"] == 3  # no reconnects


def test_head_against_nginx(nginx, tmp_path):
    with open(tmp_path / "file.txt", "w") as f:
        f.write("x" * 5000)
    srv = nginx(server=f"root {tmp_path}; location / {{ }}", log_format="$request $status")
    run = ok(volley("-t1", "-c2", "-d300ms", "-s", os.path.join(OUR_SCRIPTS, "head.lua"),
                    srv.url + "/file.txt"))
    log = srv.log()
    assert run.report["requests"] > 100
    assert set(log) == {"HEAD /file.txt HTTP/1.1 200"}


def test_head_and_get_pipelined(testd, tmp_path):
    script = write(tmp_path, """
        function init(args)
           batch = wrk.format("GET", "/a") .. wrk.format("HEAD", "/b") .. wrk.format("GET", "/c")
        end
        function request() return batch end
        function response(status, headers, body)
           n = (n or 0) + 1
           local want = (n % 3 == 2) and "" or "Hello world\\n"
           if body ~= want then error("response " .. n .. ": body " .. body) end
        end
    """)
    srv = testd("--chunked")
    # one connection per thread: response() sees the batches' responses in order
    run = ok(volley("-t2", "-c2", "-d300ms", "-s", script, srv.url))
    assert run.report["requests"] > 100 and run.report["requests"] % 3 == 0
    methods = srv.stop()["methods"]
    assert methods["HEAD"] * 2 == methods["GET"]


# --------------------------------------------------------------------------
# Script arguments and the wrk table
# --------------------------------------------------------------------------

ARGS_SCRIPT = """
function init(args)
   local out = {tostring(#args), args[0]}
   for i = 1, #args do out[#out + 1] = args[i] end
   print(table.concat(out, " "))
end
"""


@pytest.mark.parametrize("tail,expected", [
    ([], []),
    (["a", "b"], ["a", "b"]),
    (["--", "-x", "--y", "z"], ["-x", "--y", "z"]),
    (["a", "-d", "300ms", "b"], ["a", "b"]),
])
def test_script_arguments(testd, tmp_path, tail, expected):
    srv = testd()
    script = write(tmp_path, ARGS_SCRIPT)
    run = ok(volley("-t1", "-c1", "-d300ms", "-s", script, srv.url + "/x", *tail))
    assert before_running(run.stdout) == [" ".join([str(len(expected)), srv.url + "/x"] +
                                                   expected)]


def test_wrk_table(testd, tmp_path):
    srv = testd()
    script = write(tmp_path, """
        local function show(where)
           print(where, wrk.scheme, wrk.host, type(wrk.port), wrk.port, wrk.method,
                 wrk.path, tostring(wrk.body), tostring(wrk.headers["Host"]),
                 tostring(wrk.headers["X-A"]), type(wrk.thread),
                 tostring(require("wrk") == wrk))
        end
        show("top")
        function setup(thread) show("setup") end
        function init(args) show("init") end
    """)
    run = ok(volley("-t2", "-c2", "-d300ms", "-H", "X-A: 1", "-s", script,
                    srv.url + "/p?q#f"))
    # the fragment is not part of the path (nor sent)
    common = f"http\t127.0.0.1\tstring\t{srv.port}\tGET\t/p?q\tnil"
    host = f"127.0.0.1:{srv.port}"
    lines = before_running(run.stdout)
    # the top level runs in every state (main + one per thread); Host is added
    # before init(); wrk.thread exists in the thread states only
    assert lines == [f"top\t{common}\tnil\t1\tnil\ttrue",
                     f"top\t{common}\tnil\t1\tnil\ttrue",
                     f"setup\t{common}\tnil\t1\tnil\ttrue",
                     f"init\t{common}\t{host}\t1\tuserdata\ttrue",
                     f"top\t{common}\tnil\t1\tnil\ttrue",
                     f"setup\t{common}\tnil\t1\tnil\ttrue",
                     f"init\t{common}\t{host}\t1\tuserdata\ttrue"], run.stdout


def test_static_request_is_frozen_after_init(testd, tmp_path):
    script = write(tmp_path, """
        wrk.path = "/top"
        function init(args) wrk.path = "/init"; wrk.headers["X-Init"] = "yes" end
        function response(status) wrk.path = "/later"; wrk.headers["X-Later"] = "no" end
    """)
    srv = testd()
    ok(volley("-t2", "-c2", "-d300ms", "-s", script, srv.url))
    log = srv.log()
    assert log and all(r["target"] == "/init" for r in log)
    assert all(header(r, "X-Init") == "yes" and header(r, "X-Later") is None for r in log)


def test_wrk_format(testd, tmp_path):
    script = write(tmp_path, r"""
        local function show(s) print((s:gsub("\r\n", "|"))) end
        function init(args)
           show(wrk.format())
           local h = {["X-A"] = "1"}
           show(wrk.format("POST", "/p", h, "body"))
           -- the headers table given is completed in place
           print(h["Host"], h["Content-Length"])
           wrk.method, wrk.body = "PUT", "abc"
           show(wrk.format(nil, "/q"))
           wrk.method, wrk.body = "GET", nil
           -- no body: a Content-Length given is removed
           show(wrk.format("GET", "/r", {["Content-Length"] = "9"}))
           -- header names match whatever their case: no second Host or Content-Length
           show(wrk.format("GET", "/s", {host = "other", ["content-length"] = "1"}, "xy"))
           -- both spellings in one table: still one of each, the script's own kept
           show(wrk.format("GET", "/t", {Host = "a", host = "b", ["Content-Length"] = "9",
                                         ["content-length"] = "8"}, "xyz"))
           -- a host set after wrk.init added the default one
           wrk.headers["host"] = "mine"
           show(wrk.format(nil, "/u"))
        end
    """)
    srv = testd()
    run = ok(volley("-t1", "-c1", "-d300ms", "-s", script, srv.url))
    host = f"Host: 127.0.0.1:{srv.port}"
    lines = before_running(run.stdout)
    assert lines[0] == f"GET / HTTP/1.1|{host}||"
    assert lines[1].startswith("POST /p HTTP/1.1|") and lines[1].endswith("||body")
    assert sorted(lines[1][len("POST /p HTTP/1.1|"):-len("||body")].split("|")) == \
        sorted(["X-A: 1", host, "Content-Length: 4"])
    assert lines[2] == f"127.0.0.1:{srv.port}\t4"
    assert lines[3].startswith("PUT /q HTTP/1.1|") and lines[3].endswith("||abc")
    assert sorted(lines[3][len("PUT /q HTTP/1.1|"):-len("||abc")].split("|")) == \
        sorted([host, "Content-Length: 3"])
    assert lines[4] == f"GET /r HTTP/1.1|{host}||"
    assert lines[5] in ("GET /s HTTP/1.1|host: other|content-length: 2||xy",
                        "GET /s HTTP/1.1|content-length: 2|host: other||xy")
    assert lines[6] in ("GET /t HTTP/1.1|host: b|content-length: 3||xyz",
                        "GET /t HTTP/1.1|content-length: 3|host: b||xyz")
    assert lines[7] == "GET /u HTTP/1.1|host: mine||"
    # the static request is what wrk.format() gives after init()
    assert all(r["method"] == "GET" and r["body"] == "" for r in srv.log())


def test_lookup_and_connect(testd, tmp_path):
    srv = testd()
    closed = free_port()
    script = write(tmp_path, f"""
        function setup(thread)
           local v4 = wrk.lookup("127.0.0.1", "{srv.port}")
           local v6 = wrk.lookup("::1", "{closed}")
           print(#v4, tostring(v4[1]), wrk.connect(v4[1]))
           print(#v6, tostring(v6[1]), wrk.connect(v6[1]))
           print(pcall(wrk.connect, "127.0.0.1"))
        end
    """)
    run = ok(volley("-t1", "-c1", "-d300ms", "-s", script, srv.url))
    lines = before_running(run.stdout)
    assert lines[0] == f"1\t127.0.0.1:{srv.port}\ttrue"
    assert lines[1] == f"1\t::1:{closed}\tfalse"
    assert lines[2].startswith("false\t")


def test_lookup_failure_is_fatal(testd, tmp_path):
    srv = testd()
    write(tmp_path, 'function setup(t) wrk.lookup("nonexistent.invalid", "80") end\n')
    run = volley("-t1", "-c1", "-d300ms", "-s", "t.lua", srv.url, cwd=tmp_path)
    assert run.returncode == 1
    assert run.stderr.startswith("volley: t.lua:1: unable to resolve nonexistent.invalid:80: "), run
    assert srv.stop()["requests"] == 0


# --------------------------------------------------------------------------
# Threads
# --------------------------------------------------------------------------

def test_thread_addr_sends_a_thread_elsewhere(testd, tmp_path):
    a, b = testd(), testd()
    script = write(tmp_path, f"""
        local n = 0
        function setup(thread)
           n = n + 1
           print(n, tostring(thread.addr))
           if n == 2 then
              thread.addr = wrk.lookup("127.0.0.1", "{b.port}")[1]
              print(n, tostring(thread.addr))
           end
        end
    """)
    run = ok(volley("-t2", "-c4", "-d300ms", "-s", script, a.url))
    assert before_running(run.stdout) == [f"1\t127.0.0.1:{a.port}", f"2\t127.0.0.1:{a.port}",
                                          f"2\t127.0.0.1:{b.port}"]
    sa, sb = a.stop(), b.stop()
    # the start-up probe goes to the URL's server, a
    assert max_open_is(sa, 2) and sb["max_open_connections"] == 2, (sa, sb)
    assert sa["requests"] + sb["requests"] >= run.report["requests"]
    # the Host header still comes from the URL
    assert {header(r, "Host") for r in b.log()} == {f"127.0.0.1:{a.port}"}


def test_thread_get_and_set_copy_deeply(testd, tmp_path):
    text = """
        local threads = {}
        local function dump(v)
           if type(v) ~= "table" then return tostring(v) end
           local keys = {}
           for k in pairs(v) do keys[#keys + 1] = k end
           table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
           local out = {}
           for _, k in ipairs(keys) do out[#out + 1] = tostring(k) .. "=" .. dump(v[k]) end
           return "{" .. table.concat(out, ",") .. "}"
        end
        function setup(thread)
           local t = {a = {1, 2, {x = "y"}}, b = true, n = 1.5, s = "str"}
           thread:set("t", t)
           t.a[3].x = "changed in main"     -- the thread has its own copy
           thread:set("gone", nil)
           for _, bad in ipairs({function() end, {f = print}, coroutine.create(function() end)}) do
              print("set", pcall(function() thread:set("bad", bad) end))  -- set bad
           end
           local cycle = {}
           cycle.next = {back = cycle}
           print("cycle", pcall(function() thread:set("c", cycle) end))  -- set cycle
           local deep = {}
           for i = 1, 100 do deep = {deep} end
           print("deep", pcall(function() thread:set("d", deep) end))  -- set deep
           table.insert(threads, thread)
        end
        function init(args)
           print("init", dump(t), tostring(gone), tostring(bad))
           t.a[3].x = "changed in thread"
           t.added = {1}
        end
        function done()
           local t = threads[1]:get("t")
           print("done", dump(t))
           print("missing", tostring(threads[1]:get("nothing")))
           print("function", pcall(function() threads[1]:get("init") end))  -- get function
        end
    """
    write(tmp_path, text)
    srv = testd()
    run = ok(volley("-t1", "-c1", "-d300ms", "-s", "t.lua", srv.url, cwd=tmp_path))
    lines = before_running(run.stdout)

    def error(marker, what, direction="to"):
        return f"false\tt.lua:{line_of(text, marker)}: cannot copy {what} {direction} a thread"
    assert lines[0] == "set\t" + error("set bad", "a function")
    assert lines[1] == "set\t" + error("set bad", "a function")
    assert lines[2] == "set\t" + error("set bad", "a coroutine")
    assert lines[3] == "cycle\t" + error("set cycle", "a table that contains itself")
    assert lines[4] == "deep\t" + error("set deep", "a table nested too deeply")
    assert lines[5] == "init\t{a={1=1,2=2,3={x=y}},b=true,n=1.5,s=str}\tnil\tnil"
    done = after_report(run.stdout)
    assert done[0] == "done\t{a={1=1,2=2,3={x=changed in thread}},added={1=1},b=true,n=1.5,s=str}"
    assert done[1] == "missing\tnil"
    assert done[2] == "function\t" + error("get function", "a function", "from")


def test_thread_fields(testd, tmp_path):
    script = write(tmp_path, """
        function setup(thread)
           print(pcall(function() thread.addr = "127.0.0.1" end))
           print(pcall(function() thread.name = "x" end))
           print(type(thread.get), type(thread.set), type(thread.stop), thread.nothing)
        end
    """)
    srv = testd()
    run = ok(volley("-t1", "-c1", "-d300ms", "-s", script, srv.url))
    lines = before_running(run.stdout)
    assert lines[0].startswith("false\t") and "volley.addr expected" in lines[0], lines
    assert lines[1].startswith("false\t") and "cannot set 'name' on a thread" in lines[1]
    # As in wrk, any other field reads as its own name.
    assert lines[2] == "function\tfunction\tfunction\tnothing"


@pytest.mark.parametrize("hook", ["request", "response", "init", "setup"])
def test_every_thread_stopping_ends_the_run(testd, tmp_path, hook):
    body = {"request": "function request() n = (n or 0) + 1\n"
                       "  if n > 50 then wrk.thread:stop() end return wrk.format() end",
            "response": "function response(status) n = (n or 0) + 1\n"
                        "  if n == 50 then wrk.thread:stop() end end",
            "init": "function init(args) wrk.thread:stop() end",
            "setup": "function setup(thread) thread:stop() end"}[hook]
    script = write(tmp_path, body + "\n")
    srv = testd()
    run = ok(volley("-t3", "-c6", "-d20s", "-s", script, srv.url))
    assert run.elapsed < 5, run
    n = run.report["requests"]
    if hook == "response":
        assert n == 150, run
    elif hook == "request":
        assert 100 <= n <= 155, run
    else:
        assert n == 0, run
        assert srv.stop()["requests"] == 0
    assert n <= srv.stop()["requests"]


def test_one_thread_stopping_does_not_end_the_run(testd, tmp_path):
    script = write(tmp_path, """
        local id
        function setup(thread) ids = (ids or 0) + 1; thread:set("id", ids) end
        function response(status)
           n = (n or 0) + 1
           if id == 1 and n == 10 then wrk.thread:stop() end
        end
        function done() end
    """)
    srv = testd()
    run = ok(volley("-t2", "-c2", "-d1s", "-s", script, srv.url))
    assert run.elapsed >= 1.0, run
    assert run.report["requests"] > 100


# --------------------------------------------------------------------------
# done(): summary and statistics
# --------------------------------------------------------------------------

DONE_SCRIPT = """
function done(summary, latency, requests)
   local e = summary.errors
   print("summary", summary.duration, summary.requests, summary.bytes,
         e.connect, e.read, e.write, e.status, e.timeout)
   for name, s in pairs({latency = latency, requests = requests}) do
      local total, last = 0, -1
      for i = 1, #s do
         local v, c = s(i)
         assert(v > last and c > 0, "s(i) ascending")
         last, total = v, total + c
      end
      local v0, c0 = s(0)
      local vo, co = s(#s + 1)
      print(name, s.min, s.max, s.mean, s.stdev, s:percentile(50), s:percentile(90),
            s:percentile(99), s:percentile(100), #s, total, v0, c0, vo, co)
   end
end
"""


def test_done_statistics_agree_with_the_report(testd, tmp_path):
    srv = testd("--delay", 1, "--status-every", "7:500")
    run = volley("-t2", "-c4", "-d1s", "--latency", "-s", write(tmp_path, DONE_SCRIPT), srv.url)
    assert run.returncode == 0, run
    r = run.report
    lines = {l.split("\t")[0]: l.split("\t")[1:] for l in after_report(run.stdout)}

    def close(a, b):
        """a against the report's b: two decimals of a unit the value is at
        least 0.85 of (850us prints as 0.85ms), so off by up to 0.005 / 0.85."""
        return abs(a - b) <= max(0.0059 * b, 0.01)

    duration, requests, nbytes, connect, read, write_, status, timeout = \
        map(float, lines["summary"])
    assert requests == r["requests"] and status == r["non2xx"] > 0
    assert connect == read == write_ == timeout == 0
    assert close(duration, r["runtime_us"]) and close(nbytes, r["bytes"])
    assert srv.stop()["bytes_out"] >= nbytes

    lat = list(map(float, lines["latency"]))
    lmin, lmax, mean, stdev, p50, p90, p99, p100, distinct, total, v0, c0, vo, co = lat
    assert close(mean, r["latency_avg"]) and close(stdev, r["latency_stdev"])
    assert close(lmax, r["latency_max"]) and p100 == lmax
    assert close(p50, r["percentiles"][50]) and close(p90, r["percentiles"][90])
    assert close(p99, r["percentiles"][99])
    assert 1000 <= lmin <= p50 <= p90 <= p99 <= lmax
    # one sample per request; #s counts distinct values; out of range: 0 and #s
    assert total == requests and 1 < distinct <= total
    assert (v0, c0) == (0, distinct) and (vo, co) == (0, distinct)

    rps = list(map(float, lines["requests"]))
    assert close(rps[2], r["rps_avg"]) and close(rps[1], r["rps_max"])
    assert 16 <= rps[9] <= 22, rps  # ten samples per thread in 1 s, one every 100 ms


def test_done_on_an_empty_run(testd, tmp_path):
    srv = testd("--never")
    run = volley("-t1", "-c1", "-d300ms", "-s", write(tmp_path, DONE_SCRIPT), srv.url)
    assert run.returncode == 0, run
    lines = {l.split("\t")[0]: l.split("\t")[1:] for l in after_report(run.stdout)}
    assert lines["summary"][1:] == ["0", "0", "0", "0", "0", "0", "0"]
    lat = lines["latency"]
    # nothing recorded: no samples, percentiles 0, s(i) out of range
    assert lat[4:] == ["0", "0", "0", "0", "0", "0", "0", "0", "0", "0"], lat


def test_unknown_fields_read_as_in_wrk(testd, tmp_path):
    # wrk returns the key itself for any other field of a statistics or
    # thread object; real scripts depend on it ("n=" .. requests.total).
    script = write(tmp_path, """
        function setup(thread) t = thread end
        function done(summary, latency, requests)
           print(latency.total, requests.total, type(latency.count), latency[1],
                 type(latency[1]), "n=" .. requests.total, t.id, type(t[2]), t[2])
        end
    """)
    srv = testd()
    ours = ok(volley("-t1", "-c1", "-d1s", "-s", script, srv.url))
    theirs = subprocess.run(["wrk", "-t1", "-c1", "-d1s", "-s", script, srv.url],
                            capture_output=True, text=True, timeout=30)
    assert theirs.returncode == 0, theirs
    expected = "total\ttotal\tstring\t1\tstring\tn=total\tid\tstring\t2"
    assert theirs.stdout.splitlines()[-1] == expected, theirs.stdout
    assert after_report(ours.stdout) == [expected], ours


# --------------------------------------------------------------------------
# response() and what it is given
# --------------------------------------------------------------------------

RESPONSE_HOOKS = {
    # each hook is called for every response with what it declares
    "one": ("function(status) note(status) end", ["--status", "203"], "203"),
    "two": ("function(status, headers) note(status .. ' ' .. headers['Content-Length']) end",
            ["--body-size", "20"], "200 20"),
    "three": ("function(status, headers, body) note(status .. ' ' .. "
              "headers['Transfer-Encoding'] .. ' ' .. body) end",
              ["--chunked", "--body-size", "5"], "200 chunked Hello"),
    "var": ("function(...) note(select('#', ...) .. ' ' .. select(3, ...)) end",
            ["--body-size", "3"], "3 Hel"),
}


@pytest.mark.parametrize("name", sorted(RESPONSE_HOOKS))
def test_response_gets_what_it_declares(testd, tmp_path, name):
    hook, options, expected = RESPONSE_HOOKS[name]
    script = write(tmp_path, f"""
        local threads = {{}}
        function setup(thread) table.insert(threads, thread) end
        function init(args) calls = {{}} end
        function note(k) calls[k] = (calls[k] or 0) + 1 end
        response = {hook}
        function done(summary)
           for _, t in ipairs(threads) do
              for k, v in pairs(t:get("calls")) do print(k, v == summary.requests) end
           end
        end
    """)
    srv = testd(*options)
    run = ok(volley("-t1", "-c2", "-d300ms", "-s", script, srv.url))
    assert after_report(run.stdout) == [f"{expected}\ttrue"], run


def test_response_headers_and_body_of_chunked_responses(testd, tmp_path):
    # the header fields as received, the body without the chunked coding;
    # trailer fields are not part of headers (see SCRIPTING.md)
    script = write(tmp_path, """
        function response(status, headers, body)
           if headers["Trailer"] ~= "X-Trailer" or headers["Server"] ~= "volley-testd"
              or headers["X-Trailer"] ~= nil or body ~= "Hello" then
              error("unexpected response")
           end
        end
    """)
    srv = testd("--chunked", "--body-size", "5")
    run = ok(volley("-t1", "-c1", "-d300ms", "-s", script, srv.url))
    assert run.report["requests"] > 100


# --------------------------------------------------------------------------
# Hooks defined, replaced or removed during the run
# --------------------------------------------------------------------------

def test_request_switched_after_a_login(testd, tmp_path):
    # Log in first (the static request), then response() defines request():
    # every later request carries the token, as under wrk, which looks the
    # hooks up on every call.
    script = write(tmp_path, """
        wrk.path = "/authenticate"
        local function work()
           return wrk.format("GET", "/resource", {["X-Token"] = token})
        end
        function response(status, headers)
           if status == 200 and headers["X-Token"] then
              token = headers["X-Token"]
              request = work
              response = function(status) if status ~= 200 then error("refused") end end
           end
        end
    """)
    srv = testd()
    run = ok(volley("-t2", "-c4", "-d500ms", "-s", script, srv.url))
    stats = srv.stop()
    # one login per connection, in its first batch; then only the resource
    assert stats["paths"]["/authenticate"] == 4, stats
    assert stats["paths"]["/resource"] > 100 and stats["status"] == {"200": stats["responses"]}
    assert run.report["requests"] > 100


def test_request_removed_falls_back_to_the_static_request(testd, tmp_path):
    script = write(tmp_path, """
        n = 0
        function request()
           n = n + 1
           if n == 10 then request = nil end
           return wrk.format(nil, "/dynamic")
        end
    """)
    srv = testd()
    ok(volley("-t1", "-c1", "-d300ms", "-s", script, srv.url))
    paths = srv.stop()["paths"]
    assert paths["/dynamic"] == 9 and paths["/"] > 50, paths  # one call was verification's


def test_response_replaced_by_one_that_wants_more(testd, tmp_path):
    # The first response() takes the status only; the one it installs takes
    # headers and body, which the connection keeps from its next response on.
    script = write(tmp_path, """
        function response(status)
           response = function(status, headers, body)
              if headers["Content-Length"] == "7" and body == "Hello w" then
                 full = (full or 0) + 1
              end
           end
        end
        function setup(thread) t = thread end
        function done(summary) print(t:get("full") >= summary.requests - 2) end
    """)
    srv = testd("--body-size", "7")
    run = ok(volley("-t1", "-c1", "-d300ms", "-s", script, srv.url))
    assert after_report(run.stdout) == ["true"], run


def test_delay_defined_during_the_run(testd, tmp_path):
    script = write(tmp_path, """
        function response(status)
           n = (n or 0) + 1
           if n == 20 then delay = function() return 100 end end
        end
    """)
    srv = testd()
    run = ok(volley("-t1", "-c2", "-d1s", "-s", script, srv.url))
    # 20 at full speed, then a request per connection every 100 ms at most
    assert 20 <= run.report["requests"] <= 20 + 2 * 11, run
    assert srv.stop()["requests"] <= 20 + 2 * 12


# --------------------------------------------------------------------------
# Errors in scripts
# --------------------------------------------------------------------------

def test_load_errors_are_fatal(testd, tmp_path):
    srv = testd()
    write(tmp_path, "x = 1\nfunction f(\n")
    run = volley("-t1", "-c1", "-d300ms", "-s", "t.lua", srv.url, cwd=tmp_path)
    assert run.returncode == 1 and run.stdout == ""
    assert re.fullmatch(r"volley: t.lua:3: .*near '<eof>'\n", run.stderr), run
    run = volley("-t1", "-c1", "-d300ms", "-s", "missing.lua", srv.url, cwd=tmp_path)
    assert run.returncode == 1
    assert run.stderr == "volley: cannot open missing.lua: No such file or directory\n", run
    write(tmp_path, "local x = nil\nprint(x.y)\n", "top.lua")
    run = volley("-t1", "-c1", "-d300ms", "-s", "top.lua", srv.url, cwd=tmp_path)
    assert run.returncode == 1
    assert run.stderr.startswith("volley: top.lua:2: attempt to index local 'x'"), run
    stats = srv.stop()
    assert stats["connections"] == 0


@pytest.mark.parametrize("hook,line", [
    ("setup(thread)", 3), ("init(args)", 3), ("delay()", 3), ("request()", 3),
    ("response(status)", 3), ("done(summary, latency, requests)", 3)])
def test_error_in_a_hook_is_fatal(testd, tmp_path, hook, line):
    write(tmp_path, f"""
        function {hook}
           error("failed in {hook.split('(')[0]}")
        end
    """)
    srv = testd()
    run = volley("-t2", "-c2", "-d1s", "-s", "t.lua", srv.url, cwd=tmp_path)
    assert run.returncode == 1, run
    name = hook.split("(")[0]
    first = run.stderr.splitlines()[0]
    assert first == f"volley: t.lua:{line}: failed in {name}", run
    assert "stack traceback:" in run.stderr
    if name != "done":
        assert run.elapsed < 0.9, run  # at the first call, not at the end of the run
    if name == "done":
        assert "Transfer/sec:" in run.stdout  # after the report
    if name in ("setup", "init"):
        assert "Running" not in run.stdout
        assert srv.stop()["requests"] == 0


@pytest.mark.parametrize("returned,message", [
    ('"GET / HTTP/1.1\\r\\nHost: x\\r\\n"', "incomplete request at 3:1"),
    ('"GET / HTTP/1.1\\r\\nbad header\\r\\n\\r\\n"', r"[a-zA-Z ]+ at 2:\d+"),
    ('""', "an empty string"),
    # A number is turned into a string, as Lua does: here not a request.
    ("42", "incomplete request at 1:3"),
])
def test_requests_that_fail_verification(testd, tmp_path, returned, message):
    write(tmp_path, f"function request() return {returned} end\n")
    srv = testd()
    run = volley("-t1", "-c1", "-d1s", "-s", "t.lua", srv.url, cwd=tmp_path)
    assert run.returncode == 1, run
    assert re.fullmatch(f"volley: t.lua: request\\(\\) returned an invalid request: {message}\n",
                        run.stderr), run
    assert "Running" not in run.stdout
    assert srv.stop()["requests"] == 0


@pytest.mark.parametrize("returned,message", [
    ("nil", "request() returned nil instead of a request"),
    ("{}", "request() returned table instead of a string"),
])
def test_request_returning_no_string(testd, tmp_path, returned, message):
    write(tmp_path, f"function request() return {returned} end\n")
    srv = testd()
    run = volley("-t1", "-c1", "-d1s", "-s", "t.lua", srv.url, cwd=tmp_path)
    assert run.returncode == 1
    assert run.stderr == f"volley: t.lua: {message}\n", run
    assert srv.stop()["requests"] == 0
