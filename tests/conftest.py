"""Shared fixtures for volley's integration tests: real servers on 127.0.0.1
(the in-tree volley-testd and Debian's nginx), running volley, and reading
its report.
SPDX-License-Identifier: MIT
"""
import glob
import html
import importlib.machinery
import importlib.util
import json
import os
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request

import pytest

import gobuild
from nginx_conf import nginx_conf

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The build under test: build/ (volley at the top of the tree), or with
# VOLLEY_BUILD=build/asan the sanitizer build (`make check-asan`).
BUILD = os.path.join(ROOT, os.environ.get("VOLLEY_BUILD", "build"))
SANITIZED = os.environ.get("VOLLEY_SANITIZED") == "1"
VOLLEY = os.environ.get("VOLLEY", os.path.join(BUILD if SANITIZED else ROOT, "volley"))
TESTD = os.path.join(BUILD, "tests", "volley-testd")
WRK_SCRIPTS = "/usr/share/doc/wrk/examples/scripts"

# Sanitizer builds stop at the first report and exit non-zero; leak checking
# is on. Every program the tests start inherits these (the normal build
# ignores them), and check_sanitizer() fails a test whose program printed a
# report, so that no report can pass unnoticed whatever the exit status.
os.environ.setdefault("ASAN_OPTIONS", "detect_leaks=1:halt_on_error=1:exitcode=86:"
                      "detect_stack_use_after_return=1:strict_string_checks=1")
os.environ.setdefault("LSAN_OPTIONS", "exitcode=87")
os.environ.setdefault("UBSAN_OPTIONS", "halt_on_error=1:print_stacktrace=1:exitcode=88")
SANITIZER_REPORT = re.compile(r"(AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer|"
                              r"ThreadSanitizer)|runtime error: ")


def check_sanitizer(what, stderr):
    """Fail the test if stderr holds a sanitizer report."""
    m = SANITIZER_REPORT.search(stderr or "")
    if m:
        pytest.fail(f"sanitizer report from {what}:\n{stderr[max(0, m.start() - 200):]}",
                    pytrace=False)


def clean_env(**extra):
    """The environment without the outer make's jobserver and command-line
    variables (the trees built here are built with their own flags) and
    without VOLLEY (nor the sanitizer build's VOLLEY_BUILD and
    VOLLEY_SANITIZED), so that a build or a test run in a copy of the tree
    uses that copy's own."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES", "VOLLEY",
                        "VOLLEY_BUILD", "VOLLEY_SANITIZED")}
    env.update(extra)
    return env


# --------------------------------------------------------------------------
# Running volley
# --------------------------------------------------------------------------

class Run:
    """A finished volley run: exit status, output, wall time, CPU time (user +
    system, seconds) and the report."""

    def __init__(self, proc, elapsed, cpu=None):
        self.returncode = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr
        self.elapsed = elapsed
        self.cpu = cpu
        self.report = parse_report(self.stdout)

    def __repr__(self):
        cpu = "" if self.cpu is None else f" cpu={self.cpu:.2f}s"
        return (f"<Run rc={self.returncode} elapsed={self.elapsed:.2f}s{cpu}\n"
                f"stdout:\n{self.stdout}\nstderr:\n{self.stderr}>")


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_json(tmp_path, *args, **kw):
    """volley with --json into a file in tmp_path, which must exit 0;
    returns (Run, document)."""
    path = os.path.join(tmp_path, "result.json")
    run = volley("--json", path, *args, **kw)
    assert run.returncode == 0, run
    with open(path) as f:
        return run, json.load(f)


def read_timeline(path, reason="completed"):
    """A JSON Lines timeline: (its run line, its intervals), after checking
    its last line, the end record: how the run ended (reason), and the
    intervals and responses before it."""
    with open(path) as f:
        lines = [json.loads(line) for line in f]
    run, intervals, end = lines[0], lines[1:-1], lines[-1]
    assert run["type"] == "run" and all(r["type"] == "interval" for r in intervals), lines
    assert end["type"] == "end" and end["reason"] == reason, end
    assert end["intervals"] == len(intervals), end
    assert end["requests"] == sum(r["requests"] for r in intervals), end
    return run, intervals


def ok(run):
    """A clean run: exit 0, no errors, nothing on stderr but volley's own
    warnings and notes (a CPU-bound generator on a busy machine, say, or
    an HTTP/2 server's GOAWAY after its thousandth request)."""
    assert run.returncode == 0, run
    assert not run.report["socket_errors_line"], run
    assert run.report["non2xx"] == 0, run
    assert [l for l in run.stderr.splitlines() if not l.startswith(("Warning: ", "Note: "))] == [], run
    return run


def header(req, name):
    """The value of a request's header in a server's log (any spelling of
    its name), or None; never more than one."""
    values = [v for n, v in req["headers"] if n.lower() == name.lower()]
    assert len(values) <= 1, req
    return values[0] if values else None


def check_auth_log(log, logins_at_most, resources_over):
    """What wrk's auth.lua made a server see: a login (without the token)
    per thread, and from each connection or stream in flight at most, then
    requests for /resource that carry the token it got."""
    auth = [r for r in log if r["target"] == "/authenticate"]
    resource = [r for r in log if r["target"] == "/resource"]
    assert len(auth) + len(resource) == len(log)
    assert 2 <= len(auth) <= logins_at_most, len(auth)
    assert all(header(r, "X-Token") is None for r in auth)
    assert len(resource) > resources_over
    assert all(header(r, "X-Token") == "volley-token-1" for r in resource)


OUR_SCRIPTS = os.path.join(ROOT, "scripts")
EXAMPLES = {"wrk": WRK_SCRIPTS, "volley": OUR_SCRIPTS}


@pytest.fixture(params=sorted(EXAMPLES))
def example(request):
    """Path of an example script, from Debian's wrk package or from scripts/."""
    directory = EXAMPLES[request.param]
    assert os.path.isdir(directory), f"{directory} is missing (install Debian's wrk package)"

    def path(name):
        return os.path.join(directory, name + ".lua")
    path.origin = request.param
    return path


def volley(*args, timeout=60, env=None, stdin=None, cwd=None):
    """Run volley with args (strings), in directory cwd if given; returns a
    Run. Fails the test if a sanitizer build reported anything."""
    start, cpu = time.monotonic(), children_cpu()
    proc = subprocess.run([VOLLEY] + [str(a) for a in args], capture_output=True, text=True,
                          timeout=timeout, env=env, stdin=stdin or subprocess.DEVNULL,
                          errors="replace", cwd=cwd)
    # Servers are still running, so the only child reaped meanwhile is volley.
    run = Run(proc, time.monotonic() - start, children_cpu() - cpu)
    check_sanitizer("volley", run.stderr)
    return run


def uring_refused():
    """Why this machine refuses io_uring (volley's one line), or None when it
    allows it; asked without VOLLEY_ENGINE, whose choice is not the kernel's."""
    env = {k: v for k, v in os.environ.items() if k != "VOLLEY_ENGINE"}
    run = volley("--engine", "io_uring", "-t1", "-c1", "-n1", "http://127.0.0.1:1/", env=env)
    if "--engine io_uring" in run.stderr:
        assert run.returncode == 1, run
        return run.stderr.strip()
    return None


# make check ENGINE=epoll|io_uring (VOLLEY_TEST_ENGINE): every run of the
# suite on that engine. epoll through VOLLEY_ENGINE; io_uring is volley's own
# choice for http URLs (https runs on epoll), so the suite checks first that
# this machine allows it and stops if not, rather than run on epoll unseen.
SUITE_ENGINE = os.environ.get("VOLLEY_TEST_ENGINE", "")


def pytest_configure(config):
    if SUITE_ENGINE == "epoll":
        os.environ["VOLLEY_ENGINE"] = "epoll"
    elif SUITE_ENGINE == "io_uring":
        os.environ.pop("VOLLEY_ENGINE", None)
        refused = uring_refused()
        if refused:
            pytest.exit(f"ENGINE=io_uring, but io_uring is refused here: {refused}", returncode=1)
    elif SUITE_ENGINE:
        pytest.exit(f"ENGINE must be epoll or io_uring, not {SUITE_ENGINE!r}", returncode=1)


def pytest_report_header(config):
    return f"engine: {SUITE_ENGINE or 'as volley picks'} (VOLLEY_ENGINE=" \
           f"{os.environ.get('VOLLEY_ENGINE', '')})"


def volley_signalled(*args, sig=signal.SIGINT, after=1.0, cwd=None, timeout=30):
    """Run volley and send it sig after `after` seconds (as a terminal's
    Ctrl-C finds it); returns a Run."""
    start, cpu = time.monotonic(), children_cpu()
    proc = subprocess.Popen([VOLLEY] + [str(a) for a in args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
                            errors="replace", cwd=cwd, preexec_fn=sigint_default)
    time.sleep(after)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=timeout)
    run = Run(subprocess.CompletedProcess(proc.args, proc.returncode, out, err),
              time.monotonic() - start, children_cpu() - cpu)
    check_sanitizer("volley", run.stderr)
    return run


# What a usage error adds to a count or a duration it cannot read.
COUNT_FORM = " (a whole number, optionally with k, M, G, T or P)"
TIME_FORM = " (a duration such as 500ms, 1.5s, 2m or 1h)"

UNITS_US = {"us": 1, "ms": 1e3, "s": 1e6, "m": 60e6, "h": 3600e6}
UNITS_METRIC = {"": 1, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
UNITS_BINARY = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}


def sigint_default():
    """Popen's preexec_fn for Ctrl-C tests: SIGINT as a terminal's Ctrl-C
    finds it, even when the suite was started in the background by a shell
    without job control, which leaves it ignored for every child."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def max_open_is(stats, conns):
    """The most connections the server had open at once is volley's own: the
    start-up probe may still count when the server notices its close only after
    the load connections opened."""
    return conns <= stats["max_open_connections"] <= conns + 1


def parse_time_us(text):
    m = re.fullmatch(r"(-?[\d.]+|-?nan)(us|ms|s|m|h)", text)
    assert m, f"not a time: {text!r}"
    return float(m.group(1)) * UNITS_US[m.group(2)]


def parse_metric(text):
    m = re.fullmatch(r"([\d.]+|-?nan)([kMGT]?)", text)
    assert m, f"not a number: {text!r}"
    return float(m.group(1)) * UNITS_METRIC[m.group(2)]


def printed(out):
    """The lines a script printed during the run: between the header (its
    first line and the indented ones after it) and the table of the report."""
    lines = out.split("  Thread Stats")[0].splitlines()[1:]
    while lines and lines[0].startswith("  "):
        lines.pop(0)
    return lines


def parse_report(out):
    """The figures of wrk's text report as a dict (missing lines are absent)."""
    r = {}
    m = re.search(r"^Running (\S+) test @ (\S+)$", out, re.M)
    if m:
        r["duration"], r["url"] = m.group(1), m.group(2)
    m = re.search(r"^  (\d+) threads and (\d+) connections$", out, re.M)
    if m:
        r["threads"], r["connections"] = int(m.group(1)), int(m.group(2))
    m = re.search(r"^  engine: (\S+)$", out, re.M)
    if m:
        r["engine"] = m.group(1)
    m = re.search(r"^    Latency\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)%$", out, re.M)
    if m:
        r["latency_avg"] = parse_time_us(m.group(1))
        r["latency_stdev"] = parse_time_us(m.group(2))
        r["latency_max"] = parse_time_us(m.group(3))
        r["latency_within"] = float(m.group(4))
    m = re.search(r"^    Req/Sec\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)%$", out, re.M)
    if m:
        r["rps_avg"] = parse_metric(m.group(1))
        r["rps_max"] = parse_metric(m.group(3))
    dist = dict((float(p), parse_time_us(v)) for p, v in
                re.findall(r"^\s+(\d+)%\s+(\S+)\s*$", out, re.M))
    if dist:
        r["percentiles"] = dist
    m = re.search(r"^  (\d+) requests in (\S+), (\S+)B read$", out, re.M)
    if m:
        r["requests"] = int(m.group(1))
        r["runtime_us"] = parse_time_us(m.group(2))
        b = re.fullmatch(r"([\d.]+)([KMGT]?)", m.group(3))
        r["bytes"] = float(b.group(1)) * UNITS_BINARY[b.group(2)]
    m = re.search(r"^  Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)$",
                  out, re.M)
    r["errors"] = dict(zip(("connect", "read", "write", "timeout"),
                           map(int, m.groups()) if m else (0, 0, 0, 0)))
    r["socket_errors_line"] = bool(m)
    m = re.search(r"^  Non-2xx or 3xx responses: (\d+)$", out, re.M)
    r["non2xx"] = int(m.group(1)) if m else 0
    m = re.search(r"^Requests/sec:\s+([\d.]+)$", out, re.M)
    if m:
        r["rps"] = float(m.group(1))
    m = re.search(r"^Transfer/sec:\s+(\S+)B$", out, re.M)
    if m:
        r["transfer"] = m.group(1)
    return r


# --------------------------------------------------------------------------
# The in-tree test server
# --------------------------------------------------------------------------

def stop_process(proc, timeout=10):
    """SIGTERM, then SIGKILL if it has not ended within timeout seconds."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class StatsServer:
    """A test server process that prints "port N" (or "unix PATH") once
    listening and writes its stats JSON to stats_file when sent SIGTERM."""

    name = "server"

    def __init__(self, cmd, stats_file, listen="127.0.0.1:0"):
        self.stats_file = stats_file
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True)
        line = self.proc.stdout.readline().split()
        if not line:
            raise RuntimeError(f"{self.name} did not start: " + self.proc.stderr.read())
        if line[0] == "port":
            self.port = int(line[1])
            host = "[::1]" if listen.startswith("[") else "127.0.0.1"
            self.url = f"http://{host}:{self.port}"
        else:
            self.path = line[1]
            self.url = "http://localhost"
        self._stats = None

    def stop(self):
        """Stop the server; returns its stats (what it saw)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            # A Python peer whose threads still flood a closed connection
            # takes a while on a loaded machine to write its stats.
            self.proc.wait(timeout=30)
        if self._stats is None:
            check_sanitizer(self.name, self.proc.stderr.read())
            with open(self.stats_file) as f:
                self._stats = json.load(f)
        return self._stats

    def stats(self):
        return self.stop()

    def alive(self):
        return self.proc.poll() is None

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


class Testd(StatsServer):
    """volley-testd started with the given options; see tests/server/testd.c."""

    name = "volley-testd"

    def __init__(self, tmp_path, *options, listen="127.0.0.1:0"):
        self.dir = tmp_path
        self.log_file = os.path.join(tmp_path, f"testd-{id(self)}.log")
        stats_file = os.path.join(tmp_path, f"testd-{id(self)}.stats.json")
        cmd = [TESTD, "--listen", listen, "--stats", stats_file, "--log", self.log_file,
               "--max-time", "300"] + [str(o) for o in options]
        super().__init__(cmd, stats_file, listen)

    def log(self):
        """Every request the server parsed, as dicts (after stop())."""
        self.stop()
        with open(self.log_file) as f:
            return [json.loads(line) for line in f if line.strip()]


def started(make, end="kill"):
    """The body of a server fixture: yields start(...), which starts a
    server with make(...) and returns it; at the end each is ended (its
    kill() or stop())."""
    servers = []

    def start(*args, **kw):
        server = make(*args, **kw)
        servers.append(server)
        return server

    yield start
    for server in servers:
        getattr(server, end)()


@pytest.fixture
def testd(tmp_path):
    """Factory: testd("--delay", 20) starts a server; all are stopped at the end."""
    yield from started(lambda *options, listen="127.0.0.1:0":
                       Testd(str(tmp_path), *options, listen=listen))


# --------------------------------------------------------------------------
# nginx from Debian
# --------------------------------------------------------------------------

# Ports for servers that cannot pick their own (nginx, nghttpd): below the
# kernel's ephemeral range, where no bind to port 0 lands, and a block of
# its own for each process of a parallel run (pytest-xdist's gw0, gw1...),
# so two servers never race for one port between its choice and its bind.
# VOLLEY_TEST_PORT_BASE moves the blocks, for two suites run side by side.
PORT_BASE, PORT_BLOCK = int(os.environ.get("VOLLEY_TEST_PORT_BASE", 20000)), 2000
_next_port = [0]


def free_port():
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    base = PORT_BASE + PORT_BLOCK * (int(worker[2:]) if worker[2:].isdigit() else 0)
    for _ in range(PORT_BLOCK):
        port = base + _next_port[0] % PORT_BLOCK
        _next_port[0] += 1
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {base}..{base + PORT_BLOCK - 1}")


class Nginx:
    """An nginx master process with a generated configuration.

    server: the body of the server block (listen lines are added unless
    listen=False); http: extra http-level directives. The access log uses
    the format given by log_format (nginx variables), one line per request.
    tls=True makes the listener HTTPS (server then names the certificate);
    http2=True makes it speak HTTP/2: over TLS (ALPN h2), or cleartext with
    prior knowledge (h2c) without tls.
    """

    def __init__(self, tmp_path, server="", http="", log_format="$request", listen=True,
                 workers=1, tls=False, http2=False, stream=""):
        self.prefix = os.path.join(tmp_path, f"nginx-{id(self)}")
        os.makedirs(os.path.join(self.prefix, "logs"))
        self.port = free_port()
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}"
        self.access_log = os.path.join(self.prefix, "logs", "access.log")
        options = (" ssl" if tls else "") + (" http2" if http2 else "")
        conf = nginx_conf(self.prefix, f"127.0.0.1:{self.port}{options}" if listen else None,
                          server=server, http=http, log_format=log_format, workers=workers,
                          stream=stream)
        self.conf = os.path.join(self.prefix, "nginx.conf")
        with open(self.conf, "w") as f:
            f.write(conf)
        nginx = shutil.which("nginx") or "/usr/sbin/nginx"
        self.proc = subprocess.Popen([nginx, "-p", self.prefix, "-c", self.conf],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     text=True)
        if listen:
            wait_port(self.port, self.proc)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGQUIT)  # graceful: flushes the access log
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def log(self):
        """The access log lines (after stop())."""
        self.stop()
        with open(self.access_log) as f:
            return [line.rstrip("\n") for line in f]


def wait_port(port, proc, host="127.0.0.1", timeout=10):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("server exited: " + (proc.stderr.read() if proc.stderr else ""))
        try:
            with socket.create_connection((host, port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.02)
    raise RuntimeError(f"nothing listens on {host}:{port}")


def openssl(*args):
    subprocess.run(["openssl"] + list(args), check=True, capture_output=True, timeout=30)


@pytest.fixture(scope="session")
def certs(tmp_path_factory):
    """A self-signed server certificate for localhost and 127.0.0.1, and a
    client certificate issued by a CA nginx trusts for client certificates."""
    d = tmp_path_factory.mktemp("certs")
    p = {name: str(d / name) for name in (
        "server.pem", "server.key", "ca.pem", "ca.key", "client.csr", "client.pem",
        "client.key", "client-both.pem", "not-pem.txt")}
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    openssl("req", "-x509", *ec, "-keyout", p["server.key"], "-out", p["server.pem"],
            "-days", "2", "-subj", "/CN=localhost",
            "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1")
    openssl("req", "-x509", *ec, "-keyout", p["ca.key"], "-out", p["ca.pem"], "-days", "2",
            "-subj", "/CN=volley test client CA")
    openssl("req", *ec, "-keyout", p["client.key"], "-out", p["client.csr"],
            "-subj", "/CN=volley client")
    openssl("x509", "-req", "-in", p["client.csr"], "-CA", p["ca.pem"], "-CAkey", p["ca.key"],
            "-CAcreateserial", "-out", p["client.pem"], "-days", "2")
    with open(p["client-both.pem"], "w") as out:
        for name in ("client.pem", "client.key"):
            with open(p[name]) as f:
                out.write(f.read())
    with open(p["not-pem.txt"], "w") as f:
        f.write("not a certificate\n")
    return p


def tls_front(nginx, certs, upstream_port):
    """nginx terminating TLS in front of a plain server on upstream_port
    (its stream module: bytes pass through unchanged); returns the nginx with
    .url set to the https URL."""
    port = free_port()
    n = nginx(listen=False, stream=f"""
        server {{
            listen 127.0.0.1:{port} ssl;
            ssl_certificate {certs["server.pem"]};
            ssl_certificate_key {certs["server.key"]};
            ssl_protocols TLSv1.2 TLSv1.3;
            proxy_pass 127.0.0.1:{upstream_port};
        }}""")
    wait_port(port, n.proc)
    n.url = f"https://127.0.0.1:{port}"
    return n


@pytest.fixture
def nginx(tmp_path):
    """Factory: nginx(server='location / { return 200 "x"; }') starts one."""
    yield from started(lambda **kw: Nginx(str(tmp_path), **kw), end="stop")


# --------------------------------------------------------------------------
# HTTP/2 servers: nginx, nghttpd, Go's net/http and a hostile peer
# --------------------------------------------------------------------------

@pytest.fixture(scope="session")
def server_cert(certs):
    """certs' self-signed P-256 certificate for localhost and 127.0.0.1:
    {"cert": path, "key": path}."""
    return {"cert": certs["server.pem"], "key": certs["server.key"]}


# What the HTTP/2 nginx logs per request: the protocol first ("HTTP/2.0").
H2_LOG = "$server_protocol $request_method $request_uri $connection $connection_requests"
BODY = "Hello world\n"


@pytest.fixture
def nginx_h2(nginx, server_cert):
    """Factory: nginx_h2(tls=False, max_streams=None) starts nginx speaking
    HTTP/2 only: h2c with prior knowledge, or over TLS (ALPN h2, TLS 1.2 and
    1.3) with tls=True. Every request gets 200 "Hello world\n"; the access log
    has H2_LOG's fields. max_streams: http2_max_concurrent_streams (nginx's
    default is 128). server: further directives for the server block."""
    def start(tls=False, max_streams=None, server="", log_format=H2_LOG):
        directives = [f'location / {{ return 200 "{BODY}"; }}', server]
        if tls:
            directives += [f"ssl_certificate {server_cert['cert']};",
                           f"ssl_certificate_key {server_cert['key']};",
                           "ssl_protocols TLSv1.2 TLSv1.3;"]
        if max_streams is not None:
            directives.append(f"http2_max_concurrent_streams {max_streams};")
        return nginx(tls=tls, http2=True, log_format=log_format,
                     server="\n        ".join(directives))
    return start


class Nghttpd:
    """nghttp2's own server (Debian's nghttp2-server), serving index.html
    ("Hello world\n") from a directory of its own, h2c with prior knowledge
    or TLS (ALPN h2). It logs every frame (-v); requests() reads them."""

    def __init__(self, tmp_path, tls=False, cert=None, max_streams=None):
        self.dir = os.path.join(tmp_path, f"nghttpd-{id(self)}")
        docroot = os.path.join(self.dir, "htdocs")
        os.makedirs(docroot)
        with open(os.path.join(docroot, "index.html"), "w") as f:
            f.write(BODY)
        self.port = free_port()
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}"
        self.log_file = os.path.join(self.dir, "frames.log")
        cmd = [shutil.which("nghttpd") or "/usr/sbin/nghttpd", "-v", "-a", "127.0.0.1",
               "-d", docroot]
        if max_streams is not None:
            cmd += ["-m", str(max_streams)]
        cmd += [str(self.port), cert["key"], cert["cert"]] if tls else ["--no-tls",
                                                                      str(self.port)]
        with open(self.log_file, "w") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        wait_port(self.port, self.proc)

    def stop(self):
        stop_process(self.proc)

    def requests(self):
        """Every request nghttpd received (after stop()), as dicts with its
        connection ("conn", nghttpd's id), stream, method and path."""
        self.stop()
        reqs = {}
        pattern = re.compile(r"^\[id=(\d+)\] \[\s*[\d.]+\] recv \(stream_id=(\d+)\) "
                             r"(:method|:path): (.*)$")
        with open(self.log_file, errors="replace") as f:
            for line in f:
                m = pattern.match(line)
                if m:
                    key = (int(m.group(1)), int(m.group(2)))
                    req = reqs.setdefault(key, {"conn": key[0], "stream": key[1]})
                    req[m.group(3)[1:]] = m.group(4)
        return list(reqs.values())


@pytest.fixture
def nghttpd(tmp_path, server_cert):
    """Factory: nghttpd(tls=False, max_streams=None) starts one (-m sets its
    SETTINGS_MAX_CONCURRENT_STREAMS, 100 by default)."""
    yield from started(lambda tls=False, max_streams=None:
                       Nghttpd(str(tmp_path), tls=tls, cert=server_cert, max_streams=max_streams),
                       end="stop")


GO_H2C_SRC = os.path.join(ROOT, "tests", "server", "h2c")
GO_H2C = os.path.join(ROOT, "build", "tests", "volley-h2c")


def go_build(src, out):
    """gobuild.go_build, failing the test when Go or the build fails."""
    try:
        return gobuild.go_build(src, out)
    except RuntimeError as e:
        pytest.fail(str(e), pytrace=False)


@pytest.fixture(scope="session")
def go_h2c_binary():
    """build/tests/volley-h2c, built from tests/server/h2c."""
    return go_build(GO_H2C_SRC, GO_H2C)


class GoH2c(StatsServer):
    """tests/server/h2c: Go's net/http serving h2c with prior knowledge only."""

    name = "volley-h2c"

    def __init__(self, binary, tmp_path, max_streams=None, tls=None):
        stats_file = os.path.join(tmp_path, f"h2c-{id(self)}.stats.json")
        cmd = [binary, "--stats", stats_file, "--max-time", "300"]
        if max_streams is not None:
            cmd += ["--max-streams", str(max_streams)]
        cmd += tls or []
        super().__init__(cmd, stats_file)
        if tls:
            self.url = self.url.replace("http://", "https://", 1)


@pytest.fixture
def go_h2c(go_h2c_binary, tmp_path):
    """Factory: go_h2c(max_streams=None) starts the Go h2c server, or with
    tls=[options] (--cert F --key F [--alternate]) its TLS server; .stats()
    stops it and returns what it saw (see tests/server/h2c/main.go)."""
    yield from started(lambda max_streams=None, tls=None:
                       GoH2c(go_h2c_binary, str(tmp_path), max_streams=max_streams, tls=tls))


H2PEER = os.path.join(ROOT, "tests", "server", "h2peer.py")


class H2Peer(StatsServer):
    """tests/server/h2peer.py: an h2c server that misbehaves as its mode says."""

    name = "volley-h2peer"

    def __init__(self, tmp_path, mode, *options):
        stats_file = os.path.join(tmp_path, f"h2peer-{id(self)}.stats.json")
        cmd = [sys.executable, H2PEER, "--stats", stats_file, "--max-time", "300",
               "--mode", mode] + [str(o) for o in options]
        super().__init__(cmd, stats_file)


@pytest.fixture
def h2peer(tmp_path):
    """Factory: h2peer("goaway", "--after", 5) starts the hostile HTTP/2 peer
    in that mode; .stats() stops it and returns what it saw."""
    yield from started(lambda mode="normal", *options: H2Peer(str(tmp_path), mode, *options))


# --------------------------------------------------------------------------
# Proxies from Debian: tinyproxy (HTTP) and microsocks (SOCKS5)
# --------------------------------------------------------------------------

class Tinyproxy:
    """Debian's tinyproxy on 127.0.0.1, its configuration and log in a
    directory of its own. It connects to servers from the address bind
    (so that a server's log tells its requests from volley's own); auth is
    ("user", "password") for its BasicAuth; extra, more configuration
    lines. Its log (LogLevel Connect) has a line per request it read:
    "CONNECT host:port" for a tunnel, an absolute-form request line
    otherwise."""

    def __init__(self, tmp_path, auth=None, bind="127.0.0.5", extra=""):
        self.dir = os.path.join(tmp_path, f"tinyproxy-{id(self)}")
        os.makedirs(self.dir)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_file = os.path.join(self.dir, "tinyproxy.log")
        self.bind = bind
        lines = [f"Port {self.port}", "Listen 127.0.0.1", f"Bind {bind}", "Timeout 60",
                 "MaxClients 400", f'LogFile "{self.log_file}"', "LogLevel Connect",
                 "DisableViaHeader Yes", "Allow 127.0.0.0/8"]
        if auth:
            lines.append(f"BasicAuth {auth[0]} {auth[1]}")
        conf = os.path.join(self.dir, "tinyproxy.conf")
        with open(conf, "w") as f:
            f.write("\n".join(lines) + "\n" + extra + "\n")
        self.proc = subprocess.Popen([shutil.which("tinyproxy") or "/usr/bin/tinyproxy", "-d",
                                      "-c", conf], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True)
        wait_port(self.port, self.proc)

    def stop(self):
        stop_process(self.proc)

    def requests(self):
        """The request lines it read (after stop()): "CONNECT 127.0.0.1:443
        HTTP/1.1", "GET http://127.0.0.1:8080/ HTTP/1.1"."""
        self.stop()
        with open(self.log_file, errors="replace") as f:
            return [m.group(1) for m in re.finditer(r"Request \(file descriptor \d+\): (.*)",
                                                     f.read())]

    def connects(self):
        """Its CONNECT requests (after stop())."""
        return [r for r in self.requests() if r.startswith("CONNECT ")]


@pytest.fixture
def tinyproxy(tmp_path):
    """Factory: tinyproxy(auth=("alice", "secret")) starts one."""
    yield from started(lambda **kw: Tinyproxy(str(tmp_path), **kw), end="stop")


class Microsocks:
    """Debian's microsocks, a SOCKS5 proxy, on 127.0.0.1, connecting to
    servers from the address bind; auth is ("user", "password"). It prints a
    line per connection it made for a client: "client[N] 127.0.0.1:
    connected to HOST:PORT", HOST as the client named it."""

    def __init__(self, tmp_path, auth=None, bind="127.0.0.6"):
        self.dir = os.path.join(tmp_path, f"microsocks-{id(self)}")
        os.makedirs(self.dir)
        self.port = free_port()
        self.bind = bind
        self.log_file = os.path.join(self.dir, "microsocks.log")
        cmd = [shutil.which("microsocks") or "/usr/bin/microsocks", "-i", "127.0.0.1", "-p",
               str(self.port), "-b", bind]
        if auth:
            cmd += ["-u", auth[0], "-P", auth[1]]
        self.url = f"socks5://127.0.0.1:{self.port}"
        with open(self.log_file, "w") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        wait_port(self.port, self.proc)

    def stop(self):
        stop_process(self.proc)

    def connected(self):
        """The HOST:PORT of each connection it made (after stop())."""
        self.stop()
        with open(self.log_file, errors="replace") as f:
            return re.findall(r"connected to (\S+)", f.read())


@pytest.fixture
def microsocks(tmp_path):
    """Factory: microsocks(auth=("alice", "secret")) starts one."""
    yield from started(lambda **kw: Microsocks(str(tmp_path), **kw), end="stop")


# --------------------------------------------------------------------------
# HTTP/3 servers: quic-go, aioquic (and its hostile modes), a lossy relay
# --------------------------------------------------------------------------

GO_H3_SRC = os.path.join(ROOT, "tests", "server", "h3")
GO_H3 = os.path.join(ROOT, "build", "tests", "volley-h3")
H3PEER = os.path.join(ROOT, "tests", "server", "h3peer.py")
UDPRELAY = os.path.join(ROOT, "tests", "server", "udprelay.py")


@pytest.fixture(scope="session")
def go_h3_binary():
    """build/tests/volley-h3, built from tests/server/h3 (quic-go, from the Go
    module proxy the first time)."""
    return go_build(GO_H3_SRC, GO_H3)


class GoH3(StatsServer):
    """tests/server/h3: quic-go's HTTP/3 server, logging every request."""

    name = "volley-h3"

    def __init__(self, binary, tmp_path, cert, *options):
        stats_file = os.path.join(tmp_path, f"h3-{id(self)}.stats.json")
        self.log_file = os.path.join(tmp_path, f"h3-{id(self)}.log")
        cmd = [binary, "--cert", cert["cert"], "--key", cert["key"], "--stats", stats_file,
               "--log", self.log_file, "--max-time", "300"] + [str(o) for o in options]
        super().__init__(cmd, stats_file)
        self.url = f"https://127.0.0.1:{self.port}"

    def log(self, stop=True):
        """Every request the server answered, as dicts (volley-testd's log
        format); stop=False reads it as it is (a server killed mid-run)."""
        if stop:
            self.stop()
        with open(self.log_file) as f:
            return [json.loads(line) for line in f if line.strip()]


@pytest.fixture
def go_h3(go_h3_binary, tmp_path, server_cert):
    """Factory: go_h3("--max-streams", 8) starts quic-go's HTTP/3 server;
    .stats() stops it and returns what it saw, .log() what it answered."""
    yield from started(lambda *options: GoH3(go_h3_binary, str(tmp_path), server_cert, *options))


class H3Peer(StatsServer):
    """tests/server/h3peer.py: aioquic's HTTP/3, misbehaving as its mode says."""

    name = "volley-h3peer"

    def __init__(self, tmp_path, cert, mode, *options):
        stats_file = os.path.join(tmp_path, f"h3peer-{id(self)}.stats.json")
        cmd = [sys.executable, H3PEER, "--cert", cert["cert"], "--key", cert["key"],
               "--stats", stats_file, "--max-time", "300", "--mode", mode] + \
            [str(o) for o in options]
        super().__init__(cmd, stats_file)
        self.url = f"https://127.0.0.1:{self.port}"


@pytest.fixture
def h3peer(tmp_path, server_cert):
    """Factory: h3peer("close", "--after", 5) starts the aioquic server in
    that mode ("normal": a working one); .stats() stops it and returns what
    it saw."""
    yield from started(lambda mode="normal", *options:
                       H3Peer(str(tmp_path), server_cert, mode, *options))


class UdpRelay(StatsServer):
    """tests/server/udprelay.py in front of a UDP port: https URL to it."""

    name = "volley-udprelay"

    def __init__(self, tmp_path, port, *options):
        stats_file = os.path.join(tmp_path, f"relay-{id(self)}.stats.json")
        cmd = [sys.executable, UDPRELAY, "--to", str(port), "--stats", stats_file,
               "--max-time", "300"] + [str(o) for o in options]
        super().__init__(cmd, stats_file)
        self.url = f"https://127.0.0.1:{self.port}"


@pytest.fixture
def udp_relay(tmp_path):
    """Factory: udp_relay(server.port, "--drop", 0.03) relays to a server's
    port, losing and reordering as told; .stats() stops it and returns the
    datagrams it relayed and dropped each way."""
    yield from started(lambda port, *options: UdpRelay(str(tmp_path), port, *options))


# --------------------------------------------------------------------------
# Prometheus from Debian
# --------------------------------------------------------------------------

class Prometheus:
    """A Prometheus server with its own storage in tmp_path: it takes remote
    writes at .remote_write (--web.enable-remote-write-receiver), scrapes
    what scrape() names every second, and query() asks its HTTP API."""

    def __init__(self, tmp_path):
        self.dir = os.path.join(tmp_path, f"prometheus-{id(self)}")
        os.makedirs(self.dir)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.remote_write = self.url + "/api/v1/write"
        self.conf = os.path.join(self.dir, "prometheus.yml")
        self.write_conf()
        prometheus = shutil.which("prometheus") or "/usr/bin/prometheus"
        self.log = open(os.path.join(self.dir, "log"), "w")
        self.proc = subprocess.Popen(
            [prometheus, f"--config.file={self.conf}", f"--storage.tsdb.path={self.dir}/data",
             f"--web.listen-address=127.0.0.1:{self.port}", "--web.enable-remote-write-receiver",
             "--web.enable-lifecycle",
             # a series stays the same for 5 minutes after its last sample,
             # and queries look back that far
             "--query.lookback-delta=5m"],
            stdout=self.log, stderr=subprocess.STDOUT)
        self.wait_ready()

    def write_conf(self, target=None):
        with open(self.conf, "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n")
            if target:
                f.write("scrape_configs:\n  - job_name: volley\n    static_configs:\n"
                        f"      - targets: {json.dumps([target])}\n")

    def scrape(self, target):
        """Scrape target ("host:port" of volley's /metrics) from now on, once
        Prometheus has it among its targets (it hands new targets to its
        scrapers some seconds after it reads them), so that a run started
        then is scraped from its first second."""
        self.write_conf(target)
        urllib.request.urlopen(urllib.request.Request(self.url + "/-/reload", method="POST"),
                               timeout=30).close()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with urllib.request.urlopen(self.url + "/api/v1/targets", timeout=10) as r:
                active = json.load(r)["data"]["activeTargets"]
            if any(t["labels"].get("instance") == target for t in active):
                return
            time.sleep(0.2)
        raise RuntimeError(f"prometheus never took the target {target}")

    def wait_ready(self, timeout=60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("prometheus exited: " + open(self.log.name).read())
            try:
                with urllib.request.urlopen(self.url + "/-/ready", timeout=1) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError("prometheus did not get ready: " + open(self.log.name).read())

    def query(self, promql):
        """The instant vector (or scalar) promql evaluates to now: a list of
        (labels, value)."""
        url = self.url + "/api/v1/query?" + urllib.parse.urlencode({"query": promql})
        with urllib.request.urlopen(url, timeout=30) as r:
            body = json.load(r)
        assert body["status"] == "success", body
        data = body["data"]
        if data["resultType"] == "scalar":
            return [({}, float(data["result"][1]))]
        return [(s["metric"], float(s["value"][1])) for s in data["result"]]

    def value(self, promql):
        """The one value promql evaluates to, or None when it has none."""
        result = self.query(promql)
        assert len(result) <= 1, (promql, result)
        return result[0][1] if result else None

    def stop(self):
        stop_process(self.proc, timeout=20)
        self.log.close()


@pytest.fixture
def prometheus(tmp_path):
    """Factory: prometheus() starts one."""
    servers = []

    def start():
        p = Prometheus(str(tmp_path))
        servers.append(p)
        return p

    yield start
    for p in servers:
        p.stop()
# Hostile inputs, and what the chart helpers hand to gnuplot
# --------------------------------------------------------------------------

def mutants(doc):
    """doc with each of its members in turn removed or replaced by a value of
    the wrong kind: (where, the changed document)."""
    def paths(x, path):
        yield path
        items = x.items() if isinstance(x, dict) else enumerate(x) if isinstance(x, list) else ()
        for k, v in items:
            yield from paths(v, path + [k])
    for path in list(paths(doc, []))[1:]:
        for value in ("remove", None, "x", -1, 2**64):
            d = json.loads(json.dumps(doc))
            parent = d
            for k in path[:-1]:
                parent = parent[k]
            if value == "remove":
                parent.pop(path[-1])
            else:
                parent[path[-1]] = value
            yield f"{'.'.join(map(str, path))} = {value}", d


# Text that gnuplot would act on in a double-quoted string (the backticks
# run a command that writes the file pwned_WHERE in gnuplot's folder), and
# quotes and a macro besides.
EVIL = "q'uo\"te@GPVAL_PWD`id>pwned_{}`${{IFS}}"


def pwned(top):
    """The files the commands in EVIL would have written, under top."""
    return [os.path.join(d, f) for d, _, files in os.walk(top) for f in files
            if re.fullmatch(r"pwned_\w+", f)]


def load_script(name):
    """A Python program of scripts/ (volley-plot, volley-sweep,
    volley-report) as a module, to call its functions in this process."""
    loader = importlib.machinery.SourceFileLoader(name.replace("-", "_"),
                                                  os.path.join(ROOT, "scripts", name))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def one_line_or_done(main, prog, args, cases, tmp_path, capsys):
    """main (a helper's, run in this process) on each case (where, file name,
    text), with args(folder, path): it ends with 0, or 1 and a first line
    "PROG: ..." saying what is wrong (then at most its usage); never with a
    traceback."""
    failures = []
    for n, (where, name, text) in enumerate(cases):
        work = tmp_path / str(n)
        work.mkdir()
        (work / name).write_text(text)
        try:
            code = main([str(a) for a in args(work, work / name)])
        except Exception as e:  # the failure this looks for
            failures.append(f"{where}: {type(e).__name__}: {e}")
            continue
        lines = capsys.readouterr().err.splitlines()
        if code == 1 and lines and lines[0].startswith(prog + ": ") and \
                all(not line.startswith(prog + ": ") for line in lines[1:]):
            continue
        if code != 0 or any(line.startswith("Traceback") for line in lines):
            failures.append(f"{where}: exit {code}: {lines}")
    assert not failures, "\n".join(failures[:20])


def gnuplot_script_problems(script):
    """Where a gnuplot script could substitute text into itself (run a
    `command`, expand an @macro) from what the helpers wrote: the only
    double-quoted string allowed is "\\n" (gnuplot substitutes backticks in
    double quotes); every backtick and @ must be inside a single-quoted
    string, where gnuplot substitutes nothing, and no single-quoted string
    may cross a line. [] when there is none."""
    problems, i = [], 0
    while i < len(script):
        c = script[i]
        if c == "#":  # a comment, to the end of its line
            k = script.find("\n", i)
            i = len(script) if k < 0 else k
        elif c == "'":
            k = i
            while True:
                k = script.find("'", k + 1)
                if k < 0 or "\n" in script[i:k]:
                    return problems + [f"a single-quoted string not ended on its line: "
                                       f"{script[i:i + 80]!r}"]
                if script[k + 1:k + 2] != "'":
                    break
                k += 1
            i = k + 1
        elif c == '"':
            k = i + 1
            while k < len(script) and script[k] != '"':
                k += 2 if script[k] == "\\" else 1
            if script[i:k + 1] != '"\\n"':
                problems.append(f"a double-quoted string: {script[i:k + 1][:80]!r}")
            i = k + 1
        else:
            if c in "`@":
                problems.append(f"{c} outside a string: {script[max(0, i - 40):i + 40]!r}")
            i += 1
    return problems


def check_gnuplot_scripts(folder):
    """Every .gp script in folder holds no text gnuplot would substitute;
    returns how many there were."""
    scripts = glob.glob(os.path.join(folder, "*.gp"))
    for path in scripts:
        with open(path) as f:
            assert gnuplot_script_problems(f.read()) == [], path
    return len(scripts)


def chart_text(folder, gp, work):
    """Every text the script gp of folder draws (titles, labels, key
    entries): drawn again by gnuplot with its svg terminal, in work, a copy
    of folder."""
    shutil.copytree(folder, work)
    with open(os.path.join(work, gp)) as f:
        script = f.read()
    script = re.sub(r"^set terminal .*$", "set terminal svg size 900,860 noenhanced", script,
                    count=1, flags=re.M)
    with open(os.path.join(work, gp), "w") as f:
        f.write(script)
    subprocess.run(["gnuplot", gp], cwd=work, check=True, timeout=60, capture_output=True)
    texts = []
    for name in re.findall(r"^set output '((?:[^']|'')+)'$", script, re.M):
        with open(os.path.join(work, name.replace("''", "'"))) as f:
            svg = f.read()
        texts += [html.unescape(re.sub(r"<[^>]*>", "", t))
                  for t in re.findall(r"<text\b.*?</text>", svg, re.S)]
    return "\n".join(texts)
