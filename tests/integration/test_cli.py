"""The command line: wrk's options and parsing, help and version, and one
clear error line (exit 1, nothing sent) for every kind of bad input.
SPDX-License-Identifier: MIT
"""
import json
import os
import re
import resource
import subprocess

import pytest

from conftest import COUNT_FORM, TIME_FORM, VOLLEY, free_port, read_timeline, volley


def first_error_line(run):
    assert run.returncode == 1, run
    assert run.stdout == "", run
    return run.stderr.splitlines()[0]


def test_help_exits_0_on_stdout():
    for flag in ("-h", "--help", "--hel"):
        run = volley(flag)
        assert run.returncode == 0, run
        assert run.stdout.startswith("Usage: volley <options> <url>"), run
        for opt in ("--connections", "--duration", "--threads", "--script", "--header",
                    "--latency", "--timeout", "--version"):
            assert opt in run.stdout
        assert run.stderr == ""


def test_version_names_libraries_and_exits_0():
    for flag in ("-v", "--version"):
        run = volley(flag)
        assert run.returncode == 0, run
        assert re.fullmatch(r"volley \d+\.\d+\.\d+ \[(epoll|kqueue|evport|poll|select)\] "
                            r"\((LuaJIT|Lua) [^,]+, OpenSSL [^,]+, nghttp2 \d+\.\d+\.\d+"
                            r"(, ngtcp2 \d+\.\d+\.\d+, nghttp3 \d+\.\d+\.\d+, GnuTLS [\d.]+)?\)\n",
                            run.stdout), run


@pytest.mark.parametrize("args,message", [
    ([], "volley: missing URL"),
    (["-t", "0", "http://127.0.0.1:1/"],
     "volley: invalid number of threads: '0' (must be at least 1)"),
    (["--timeout", "0", "http://127.0.0.1:1/"],
     "volley: invalid timeout: '0' (must be more than 0)"),
    (["-c", "0", "http://127.0.0.1:1/"],
     "volley: invalid number of connections: '0' (must be at least 1)"),
    (["-t", "4", "-c", "2", "http://127.0.0.1:1/"],
     "volley: number of connections must be >= threads"),
    (["-c", "abc", "http://h/"], "volley: invalid number of connections: 'abc'" + COUNT_FORM),
    (["-c", "-1", "http://h/"], "volley: invalid number of connections: '-1'" + COUNT_FORM),
    (["-c", "1.5k", "http://h/"], "volley: invalid number of connections: '1.5k'" + COUNT_FORM),
    (["-t", "1kb", "http://h/"], "volley: invalid number of threads: '1kb'" + COUNT_FORM),
    (["-c", "99999999999999999999", "http://h/"],
     "volley: invalid number of connections: '99999999999999999999'" + COUNT_FORM),
    (["-d", "10sec", "http://h/"], "volley: invalid duration: '10sec'" + TIME_FORM),
    (["-d", "-5", "http://h/"], "volley: invalid duration: '-5'" + TIME_FORM),
    (["-d", "1.s", "http://h/"], "volley: invalid duration: '1.s'" + TIME_FORM),
    (["-d", ".5s", "http://h/"], "volley: invalid duration: '.5s'" + TIME_FORM),
    (["-d", "1e3", "http://h/"], "volley: invalid duration: '1e3'" + TIME_FORM),
    # the same form for a value out of range as for one that is not a number
    (["-m", "1e9", "http://h/"],
     "volley: invalid number of streams: '1e9'" + COUNT_FORM),
    (["-m", "1G", "http://h/"], "volley: invalid number of streams: '1G' (must be 1 to 1000000)"),
    (["-m", "0", "http://h/"], "volley: invalid number of streams: '0' (must be 1 to 1000000)"),
    (["-k", "http://h/"], "volley: invalid option -- 'k': keep-alive is the default; "
                          "--no-keepalive opens a new connection for every request"),
    (["--timeout", "x", "http://h/"], "volley: invalid timeout: 'x'" + TIME_FORM),
    (["-H", "NoColon", "http://h/"],
     "volley: invalid header 'NoColon': expected \"Name: value\""),
    (["-H", ": value", "http://h/"], "volley: invalid header ': value': expected \"Name: value\""),
    (["-H", "Bad Name: x", "http://h/"],
     "volley: invalid header 'Bad Name: x': the name may not contain spaces"),
    (["--foo", "http://h/"], "volley: unrecognized option '--foo'"),
    (["-x", "http://h/"], "volley: invalid option -- 'x'"),
    (["--t", "1", "http://h/"], "volley: option '--t' is ambiguous; possibilities: "
                                "'--threads' '--timeout' '--timeline' '--threshold'"),
    (["http://h/", "-t"], "volley: option requires an argument -- 't'"),
    (["--latency=1", "http://h/"], "volley: option '--latency' doesn't allow an argument"),
    (["127.0.0.1:8080/"], "volley: invalid URL '127.0.0.1:8080/': "
                          "expected scheme://host[:port][/path]"),
    (["http:///"], "volley: invalid URL 'http:///': missing host"),
    (["http://h:/"], "volley: invalid URL 'http://h:/': invalid port"),
    (["http://h:99999/"], "volley: invalid URL 'http://h:99999/': invalid port"),
    (["http://[::1/"], "volley: invalid URL 'http://[::1/': invalid IPv6 address"),
    (["ftp://h/"], "volley: invalid URL 'ftp://h/': unsupported scheme (use http or https)"),
    (["http://h/", "extra"], "volley: unexpected argument 'extra' after the URL "
                             "(script arguments need -s)"),
    # Empty, negative, fractional and overflowing numbers and durations.
    (["-c", "", "http://h/"], "volley: invalid number of connections: ''" + COUNT_FORM),
    (["-t", "-1", "http://h/"], "volley: invalid number of threads: '-1'" + COUNT_FORM),
    (["-d", "", "http://h/"], "volley: invalid duration: ''" + TIME_FORM),
    (["-d", "99999999999999999h", "http://h/"],
     "volley: invalid duration: '99999999999999999h'" + TIME_FORM),
    (["--timeout", "-1", "http://h/"], "volley: invalid timeout: '-1'" + TIME_FORM),
    (["--timeout", "0ms", "http://h/"], "volley: invalid timeout: '0ms' (must be more than 0)"),
    (["--timeout", "0.0000004s", "http://h/"],
     "volley: invalid timeout: '0.0000004s' (must be more than 0)"),
    (["-R", "-5", "http://h/"], "volley: invalid rate: '-5'" + COUNT_FORM),
    (["-R", "1.5", "http://h/"], "volley: invalid rate: '1.5'" + COUNT_FORM),
    (["-R", "abc", "http://h/"], "volley: invalid rate: 'abc'" + COUNT_FORM),
    (["-R", "99999999999999999999", "http://h/"],
     "volley: invalid rate: '99999999999999999999'" + COUNT_FORM),
    (["-n", "-1", "http://h/"], "volley: invalid number of requests: '-1'" + COUNT_FORM),
    (["-H", "", "http://h/"], "volley: invalid header '': expected \"Name: value\""),
    # Malformed URLs and ports.
    (["http://h:0/"], "volley: invalid URL 'http://h:0/': invalid port"),
    (["http://h:-1/"], "volley: invalid URL 'http://h:-1/': invalid port"),
    (["http://h:http/"], "volley: invalid URL 'http://h:http/': invalid port"),
    (["http://h:80:90/"], "volley: invalid URL 'http://h:80:90/': invalid port"),
    (["http://:80/"], "volley: invalid URL 'http://:80/': missing host"),
    (["http://"], "volley: invalid URL 'http://': missing host"),
    (["http:/h"], "volley: invalid URL 'http:/h': expected scheme://host[:port][/path]"),
    (["http://[zz]/"], "volley: invalid URL 'http://[zz]/': invalid IPv6 address"),
    (["http://[::1]x/"], "volley: invalid URL 'http://[::1]x/': invalid host"),
    (["http://h /x"], "volley: invalid URL 'http://h /x': spaces or control characters in URL"),
])
def test_bad_input_is_one_clear_line(args, message):
    run = volley(*args)
    assert first_error_line(run) == message
    # then where to look, not the whole usage, which would push the line
    # that matters off the screen
    assert run.stderr.splitlines()[1:] == ["Try 'volley --help' for more information."], run


@pytest.mark.parametrize("args,message", [
    (["-H", "Transfer-Encoding: chunked", "http://h/"],
     "volley: -H 'Transfer-Encoding: ...' needs a script that sends a body in that coding"),
])
def test_headers_a_request_without_a_script_cannot_have(args, message):
    run = volley(*args)
    assert first_error_line(run) == message


def test_threads_default_to_no_more_than_connections(testd):
    # ab's habit: -c1 -n N works without -t; an explicit -t still has to fit.
    srv = testd()
    run = volley("-c1", "-n", "100", srv.url)
    assert run.returncode == 0, run
    assert run.report["threads"] == 1 and run.report["connections"] == 1
    assert run.report["requests"] == 100
    stats = srv.stop()
    assert stats["requests"] == 100 and stats["connections"] == 2  # the probe and one
    run = volley("-t2", "-c1", "-n", "100", srv.url)
    assert first_error_line(run) == "volley: number of connections must be >= threads"


def test_a_report_that_cannot_be_written_is_an_error(testd):
    # A full disk, or stdout closed (the first socket must not become
    # descriptor 1 and swallow the report): exit 1 with the reason, before
    # a run whose report would be lost.
    srv = testd()
    with open("/dev/full", "w") as full:
        proc = subprocess.run([VOLLEY, "-t1", "-c1", "-d300ms", srv.url], stdout=full,
                              stderr=subprocess.PIPE, text=True, timeout=30)
    assert proc.returncode == 1, proc
    assert proc.stderr == "volley: cannot write the report to standard output: " \
                          "No space left on device\n", proc
    proc = subprocess.run([VOLLEY, "-t1", "-c1", "-d300ms", srv.url], stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True, timeout=30,
                          preexec_fn=lambda: os.close(1))
    assert proc.returncode == 1, proc
    assert proc.stderr == "volley: cannot write the report to standard output: " \
                          "Bad file descriptor\n", proc
    assert srv.stop()["requests"] == 0


def test_unresolvable_host():
    run = volley("-d1s", "http://nonexistent.invalid/")
    line = first_error_line(run)
    assert line.startswith("volley: unable to resolve nonexistent.invalid:80: "), line
    assert len(run.stderr.splitlines()) == 1


def test_refused_port():
    port = free_port()
    run = volley("-d1s", f"http://127.0.0.1:{port}/")
    assert first_error_line(run) == f"volley: unable to connect to 127.0.0.1:{port}: " \
                                    "Connection refused"
    assert len(run.stderr.splitlines()) == 1


def test_options_after_url_and_prefixes_and_equals(testd):
    srv = testd()
    run = volley(srv.url + "/x", "--thr=1", "--conn", "3", "-d", "300ms", "--lat")
    assert run.returncode == 0, run
    assert run.report["threads"] == 1 and run.report["connections"] == 3
    assert run.report["duration"] == "300ms"
    assert "Latency Distribution" in run.stdout


def test_wrk_prefixes_name_wrk_options_beside_newer_ones(testd, tmp_path):
    # --thr and --time name wrk's --threads and --timeout, as they do in wrk,
    # though --threshold and --timeline begin the same way.
    srv = testd()
    out = os.path.join(tmp_path, "r.json")
    run = volley("--thre=1", "--time", "1500ms", "-c2", "-d300ms", "--json", out, srv.url)
    assert run.returncode == 0, run
    with open(out) as f:
        options = json.load(f)["options"]
    assert options["threads"] == 1 and options["timeout_us"] == 1500000
    run = volley("--t", "1", srv.url)
    assert run.returncode == 1 and "'--t' is ambiguous" in run.stderr


def test_double_dash_ends_options(testd):
    srv = testd()
    # after "--" a dash-prefixed word is an argument, not an option
    run = volley("-t1", "-c1", "-d300ms", "--", srv.url)
    assert run.returncode == 0, run


def test_impossible_connection_count_refused_before_the_run(testd):
    srv = testd()
    run = volley("-t1", "-c", "100M", "-d1s", srv.url)
    line = first_error_line(run)
    assert re.fullmatch(r"volley: cannot open 100000000 connections: the open file limit "
                        r"is \d+ \(raise it with ulimit -n\)", line), line
    stats = srv.stop()
    assert stats["requests"] == 0


def test_connection_count_near_2_to_the_64_refused(testd):
    # The file-limit check must not wrap round and let the run try to
    # allocate 2^64 connections.
    srv = testd()
    run = volley("-t1", "-c", "18446744073709551615", "-d1s", srv.url)
    assert re.fullmatch(r"volley: cannot open 18446744073709551615 connections: the open file "
                        r"limit is \d+ \(raise it with ulimit -n\)", first_error_line(run)), run
    assert len(run.stderr.splitlines()) == 1


def test_threads_beyond_the_file_limit_refused(testd):
    # Each thread's event loop needs descriptors too: -t as large as -c
    # passes the per-connection count but not the total.
    srv = testd()
    limit = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    n = min(limit - 1, limit // 4 + 10)
    run = volley("-t", n, "-c", n, "-d1s", srv.url)
    assert re.fullmatch(rf"volley: cannot open {n} connections: the open file limit is "
                        rf"{limit} and volley needs \d+ more for -t {n} "
                        r"\(raise it with ulimit -n\)", first_error_line(run)), run
    assert srv.stop()["requests"] == 0


def test_script_that_is_a_directory(tmp_path):
    run = volley("-s", str(tmp_path), "-d1s", "http://127.0.0.1:1/")
    assert first_error_line(run) == f"volley: cannot read {tmp_path}: Is a directory"
    assert len(run.stderr.splitlines()) == 1


def test_bad_input_sends_nothing(testd):
    srv = testd()
    volley("-H", "NoColon", srv.url)
    volley("-t", "0", srv.url)
    stats = srv.stop()
    assert stats["connections"] == 0 and stats["requests"] == 0


def test_fractional_durations_everywhere_to_the_microsecond(testd, tmp_path):
    # Every option that takes a duration reads a fraction, exactly: 0.1s is
    # 100000 us (as a double, 0.1 * 1e6 is 100000.00000000001).
    srv = testd()
    out, timeline = os.path.join(tmp_path, "r.json"), os.path.join(tmp_path, "t.jsonl")
    run = volley("-t1", "-c2", "-d", "1.5s", "-T", "0.5", "--interval", "0.25s", "--warmup",
                 "0.1", "--ramp-up", "0.05s", "--json", out, "--timeline", timeline, srv.url)
    assert run.returncode == 0 and run.report["requests"] > 0, run
    assert run.stdout.startswith(f"Running 1500ms test @ {srv.url}\n"), run
    assert "  100ms warm-up first, left out of the results\n" in run.stdout, run
    with open(out) as f:
        doc = json.load(f)
    o = doc["options"]
    assert (o["duration_us"], o["timeout_us"], o["warmup_us"], o["ramp_up_us"]) == \
        (1500000, 500000, 100000, 50000)
    assert doc["intervals"]["interval_us"] == 250000
    head, intervals = read_timeline(timeline)
    assert head["interval_us"] == 250000
    assert [r["start_us"] for r in intervals] == [250000 * k for k in range(len(intervals))]
    seen = doc["requests"] + doc["warmup"]["requests"]
    run = volley("-t1", "-c2", "-R", "200", "--stages", "0.5:100,0.25s:0", "--json", out,
                 srv.url)
    assert run.returncode == 0, run
    assert run.stdout.startswith(f"Running 750ms test @ {srv.url}\n"), run
    with open(out) as f:
        doc = json.load(f)
    assert doc["options"]["stages"] == [{"duration_us": 500000, "rate": 100},
                                        {"duration_us": 250000, "rate": 0}]
    assert doc["options"]["duration_us"] == 750000
    # the server saw the first run's warm-up and run, and the second run
    assert srv.stats()["responses"] >= seen + doc["requests"] > seen
