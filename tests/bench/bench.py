#!/usr/bin/env python3
"""make bench: volley side by side with wrk (and h2load for HTTP/2), on this
machine, now.

Starts Debian's nginx and volley-testd on 127.0.0.1, runs volley and wrk
(h2load in rows G and H) alternately (which one goes first alternates too)
and prints, per row, the median of each tool's runs and their ratio, the CPU
time each tool and the server spent per request, and the exact commands, so
any row can be rerun by hand. A benchmark, not a test: it never fails on a
number.

On a core shared with other work, requests/s also depends on how the
scheduler splits the core, so throughput rows also print a cost ratio:
(wrk + server) / (volley + server) CPU time per request, which is the
requests/s ratio the same pinned run gives on an otherwise idle core.

Rows (throughput rows pin the client and the server to CPU 0, so that a
figure is the sum of both costs):
  A  plain GET, -t1 -c50, against nginx
  B  the same with a request() that changes the path and a header and a
     response() that looks at the status (tests/bench/dynamic.lua)
  B2 the same with a header set to a number and a path that never repeats
     (tests/bench/dynamic2.lua)
  C  peak RSS holding 5,000 and 10,000 connections (-t2, /usr/bin/time -f %M)
  D  16 requests pipelined per batch (tests/bench/pipeline16.lua) against
     volley-testd, which answers all the requests one read() brought in
     with one write()
  E  HTTPS keep-alive, -t1 -c50, against nginx
  F  busy fraction from row A's runs: mean latency x requests/s / connections
     (1.0: a request is in flight on every connection all the time)
  G  HTTP/2 cleartext (h2c, prior knowledge), -t1 -c8 -m32 (32 streams per
     connection), against nginx, volley --http2 beside h2load
  H  the same over TLS (ALPN h2)
  I  HTTP/3 (QUIC), -t1 -c8 -m16, against quic-go's server (tests/server/h3,
     built with Go), volley --http3 beside oha --http-version 3 (optional:
     cargo install oha --features http3; without it, volley alone and a note)
  I2 volley's client CPU per request over HTTP/3 against the same server's
     HTTP/2 over TLS (its TCP port), -t1 -c8 -m16: the ratio HTTP/3 / HTTP/2

Client-bound rows (the client alone on CPU 0, a volley-testd of their own
alone on CPU 1, so that the client's own cost decides; needs 2 CPUs): volley
on each of its engines (--engine epoll, --engine io_uring), wrk and
h2load --h1, each with requests/s, the client's CPU time per
request and its system calls per request (one more run of each tool, counted
by perf stat's raw_syscalls:sys_enter, or strace -c -f without perf):
  K1 plain GET, -t1 -c50
  K2 plain GET, -t1 -c500
  K3 16 requests pipelined per batch, -t1 -c50 (h2load: -m16)

Environment: BENCH_RUNS (runs of each tool per row, default 5), BENCH_DURATION
(seconds per run, default 3), BENCH_ROWS (e.g. "AF", "K", default all), BENCH_DIR
(working directory, default build/bench), VOLLEY, WRK, H2LOAD, OHA (the binaries),
BENCH_VOLLEY_ARGS (options added to volley's runs of rows A, B, D and E, to
measure what they cost: "--timeline build/bench/t.jsonl").
Standard library only.
SPDX-License-Identifier: MIT
"""
import json
import os
import re
import resource
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))
import gobuild  # noqa: E402
from nginx_conf import nginx_conf  # noqa: E402

VOLLEY = os.environ.get("VOLLEY", os.path.join(ROOT, "volley"))
WRK = os.environ.get("WRK") or shutil.which("wrk") or "/usr/bin/wrk"
H2LOAD = os.environ.get("H2LOAD") or shutil.which("h2load") or "/usr/bin/h2load"
PERF = shutil.which("perf") or "/usr/bin/perf"
STRACE = shutil.which("strace") or "/usr/bin/strace"
OHA = os.environ.get("OHA") or shutil.which("oha") or os.path.expanduser("~/.cargo/bin/oha")
GO_H3 = os.path.join(ROOT, "build", "tests", "volley-h3")
TESTD = os.path.join(ROOT, "build", "tests", "volley-testd")
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
TIME = "/usr/bin/time"
OPENSSL = shutil.which("openssl") or "/usr/bin/openssl"

CONNS = 50             # rows A, B, D, E
RSS_CONNS = (5000, 10000)
RSS_RUNS = 3           # peak RSS hardly varies
RSS_DURATION = 2
H2_CONNS, H2_STREAMS = 8, 32  # rows G and H
# Rows K: title, connections, requests pipelined per batch.
CLIENT_ROWS = (("K1", "plain GET, -t1 -c50", 50, 1), ("K2", "plain GET, -t1 -c500", 500, 1),
               ("K3", "pipelined depth 16, -t1 -c50", 50, 16))
H3_CONNS, H3_STREAMS = 8, 16  # rows I and I2
BODY = "Hello world\\n"  # nginx's return string, escaped for its config

TARGETS = {"A": ">= 1.05", "B": ">= 1.25", "B2": ">= 1.25", "C5000": "<= 0.35", "D": ">= 1.3",
           "E": ">= 1.0", "F": ">= 0.97", "G": ">= 1.1", "H": ">= 1.0", "I": ">= 1.5",
           "I2": "<= 2.0"}


def env_int(name, default, low):
    try:
        v = int(os.environ.get(name, default))
    except ValueError:
        sys.exit(f"bench: {name} must be a whole number")
    if v < low:
        sys.exit(f"bench: {name} must be at least {low}")
    return v


def rel(path):
    """path as typed from ROOT (where make runs), for the commands shown."""
    r = os.path.relpath(path, ROOT)
    return path if r.startswith("..") else ("./" + r if os.sep not in r else r)


def note(msg):
    print(f"bench: {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------
# Running a client
# --------------------------------------------------------------------------

class Run:
    """One finished client run: exit status, output, CPU seconds (user + sys)
    and peak RSS in KiB from the kernel's accounting of that process."""

    def __init__(self, argv, timeout, out_path, server=None):
        start = time.monotonic()
        server_before = server.cpu() if server else 0.0
        with open(out_path, "w+") as out:
            proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT,
                                    stdin=subprocess.DEVNULL)
            status, usage = self.wait(proc, timeout)
            out.seek(0)
            self.output = out.read()
        self.elapsed = time.monotonic() - start
        self.server_cpu = server.cpu() - server_before if server else 0.0
        self.returncode = os.waitstatus_to_exitcode(status) if status is not None else None
        self.cpu = usage.ru_utime + usage.ru_stime if usage else 0.0
        self.maxrss_kb = usage.ru_maxrss if usage else 0

    @staticmethod
    def wait(proc, timeout):
        """wait4() the client itself: its rusage is its own, not the servers'.
        A client past its timeout is killed: (None, None)."""
        timer = threading.Timer(timeout, proc.kill)
        timer.start()
        _, status, usage = os.wait4(proc.pid, 0)
        timed_out = not timer.is_alive()
        timer.cancel()
        proc.returncode = status
        return (None, None) if timed_out else (status, usage)


SUMMARY = re.compile(r"^bench: requests (\d+) duration_us (\d+) latency_mean_us ([\d.]+) "
                     r"socket_errors (\d+) status_errors (\d+)$", re.M)
# h2load's report: its duration, request counts, status classes and mean time per request.
H2LOAD_FINISHED = re.compile(r"^finished in ([\d.]+)(us|ms|s),", re.M)
H2LOAD_REQUESTS = re.compile(r"^requests: \d+ total, \d+ started, \d+ done, (\d+) succeeded, "
                             r"(\d+) failed, (\d+) errored, (\d+) timeout$", re.M)
H2LOAD_STATUS = re.compile(r"^status codes: \d+ 2xx, \d+ 3xx, (\d+) 4xx, (\d+) 5xx$", re.M)
H2LOAD_MEAN = re.compile(r"^time for request:\s+\S+\s+\S+\s+([\d.]+)(us|ms|s)\s", re.M)
SECONDS = {"us": 1e-6, "ms": 1e-3, "s": 1.0}


class Sample:
    """What one run of a tool measured, or why it has nothing (error)."""

    def __init__(self, run):
        self.run = run
        self.error = None
        self.requests = self.rps = self.mean_us = 0.0
        self.socket_errors = self.status_errors = 0
        m = SUMMARY.search(run.output)
        if run.returncode is None:
            self.error = "timed out"
        elif run.returncode != 0:
            self.error = f"exit {run.returncode}: " + last_line(run.output)
        elif H2LOAD_FINISHED.search(run.output):
            self.from_h2load(run.output)
        elif run.output.lstrip().startswith("{"):
            self.from_oha(run.output)
        elif not m:
            m2 = re.search(r"^\s*(\d+) requests in ([\d.]+)(us|ms|s|m)", run.output, re.M)
            if m2:  # no summary script (row C): the text report's count
                self.requests = int(m2.group(1))
            else:
                self.error = "no report: " + last_line(run.output)
        else:
            self.requests = int(m.group(1))
            duration_s = int(m.group(2)) / 1e6
            self.rps = self.requests / duration_s if duration_s > 0 else 0.0
            self.mean_us = float(m.group(3))
            self.socket_errors, self.status_errors = int(m.group(4)), int(m.group(5))
            if self.requests == 0:
                self.error = "no request completed"

    def from_h2load(self, out):
        """h2load counts a stream reset or a lost connection as failed, and
        every request without a 2xx or 3xx status in 4xx and 5xx."""
        finished, requests = H2LOAD_FINISHED.search(out), H2LOAD_REQUESTS.search(out)
        status, mean = H2LOAD_STATUS.search(out), H2LOAD_MEAN.search(out)
        if not (requests and status and mean):
            self.error = "no h2load report: " + last_line(out)
            return
        self.requests = int(requests.group(1))
        duration_s = float(finished.group(1)) * SECONDS[finished.group(2)]
        self.rps = self.requests / duration_s if duration_s > 0 else 0.0
        self.mean_us = float(mean.group(1)) * SECONDS[mean.group(2)] * 1e6
        self.socket_errors = int(requests.group(2))
        self.status_errors = int(status.group(1)) + int(status.group(2))
        if self.requests == 0:
            self.error = "no request completed"

    def from_oha(self, out):
        """oha's --output-format json: its summary, and what failed."""
        try:
            doc = json.loads(out)
            summary = doc["summary"]
            codes = doc.get("statusCodeDistribution", {})
            ok = sum(n for code, n in codes.items() if int(code) < 400)
            self.requests = ok
            self.rps = ok / summary["total"] if summary["total"] else 0.0
            self.mean_us = (summary.get("average") or 0) * 1e6
            self.socket_errors = sum(doc.get("errorDistribution", {}).values())
            self.status_errors = sum(codes.values()) - ok
        except (ValueError, KeyError, TypeError) as e:
            self.error = f"no oha report ({e}): " + last_line(out)
            return
        if self.requests == 0:
            self.error = "no request completed"

    def cpu_per_million(self):
        return self.run.cpu / self.requests * 1e6 if self.requests else None

    def server_per_million(self):
        return self.run.server_cpu / self.requests * 1e6 if self.requests else None


def last_line(text):
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else "(no output)"


# --------------------------------------------------------------------------
# Servers
# --------------------------------------------------------------------------

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc, timeout=10):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with status {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.02)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port}")


class Server:
    """A server's processes (nginx: the master and its workers), to read the
    CPU time they used from /proc (schedstat: nanoseconds on a CPU)."""

    def __init__(self, proc):
        self.proc = proc

    def pids(self):
        pids = [self.proc.pid]
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    with open(f"/proc/{entry}/stat") as f:
                        ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                except (OSError, ValueError, IndexError):
                    continue
                if ppid == self.proc.pid:
                    pids.append(int(entry))
        return pids

    def cpu(self):
        """Every thread's (Go's server runs on many)."""
        total = 0
        for pid in self.pids():
            try:
                tasks = os.listdir(f"/proc/{pid}/task")
            except OSError:
                continue
            for task in tasks:
                try:
                    with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                        total += int(f.read().split()[0])
                except (OSError, ValueError, IndexError):
                    pass
        return total / 1e9


class Servers:
    """nginx (plain and TLS) and volley-testd, all pinned to CPU 0."""

    def __init__(self, workdir):
        self.procs = []
        self.commands = []
        prefix = os.path.join(workdir, "nginx")
        os.makedirs(os.path.join(prefix, "logs"), exist_ok=True)
        self.cert, self.key = os.path.join(prefix, "cert.pem"), os.path.join(prefix, "key.pem")
        self.tls = self.make_cert()
        self.http_port, self.https_port = free_port(), free_port()
        self.h2c_port, self.h2_port = free_port(), free_port()
        location = f'location / {{ return 200 "{BODY}"; }}'
        # HTTP/2 with prior knowledge (h2c) on a port of its own.
        servers = f"server {{ listen 127.0.0.1:{self.h2c_port} http2; {location} }}"
        if self.tls:
            # nginx 1.22 leaves TLS 1.3 out by default; clients today use it.
            tls = (f"ssl_protocols TLSv1.2 TLSv1.3; "
                   f"ssl_certificate {self.cert}; ssl_certificate_key {self.key}; {location}")
            servers += (f"\n    server {{ listen 127.0.0.1:{self.https_port} ssl; {tls} }}"
                        f"\n    server {{ listen 127.0.0.1:{self.h2_port} ssl http2; {tls} }}")
        conf = os.path.join(prefix, "nginx.conf")
        # Row C opens 10,000 connections at once: a short accept queue would
        # drop SYNs and turn them into connect timeouts.
        with open(conf, "w") as f:
            f.write(nginx_conf(prefix, f"127.0.0.1:{self.http_port} backlog=4096", server=location,
                               http="access_log off;\n    " + servers))
        argv = ["taskset", "-c", "0", NGINX, "-p", rel(prefix), "-c", "nginx.conf"]
        self.nginx = Server(self.start(argv, self.http_port))
        self.http = f"http://127.0.0.1:{self.http_port}/"
        self.https = f"https://127.0.0.1:{self.https_port}/" if self.tls else None
        self.h2c = f"http://127.0.0.1:{self.h2c_port}/"
        self.h2 = f"https://127.0.0.1:{self.h2_port}/" if self.tls else None

        self.testd_server, self.testd_port = self.start_testd(0)
        self.testd = f"http://127.0.0.1:{self.testd_port}/" if self.testd_port else None
        self.apart = None  # rows K's, on CPU 1: apart_testd()
        self.h3 = self.h3_server = None
        self.h3_why = "not started"

    def start_testd(self, cpu):
        """A volley-testd pinned to cpu: (Server, port), or (None, None)."""
        if not os.access(TESTD, os.X_OK):
            return None, None
        argv = ["taskset", "-c", str(cpu), rel(TESTD), "--listen", "127.0.0.1:0",
                "--max-time", "3600"]
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                text=True, cwd=ROOT)
        self.procs.append(proc)
        line = proc.stdout.readline().split()
        if len(line) != 2 or line[0] != "port":
            return None, None
        argv[5] = f"127.0.0.1:{line[1]}"
        self.commands.append(" ".join(argv))
        return Server(proc), int(line[1])

    def apart_testd(self):
        """The volley-testd of rows K, alone on CPU 1: (Server, URL)."""
        if self.apart is None:
            server, port = self.start_testd(1)
            self.apart = (server, f"http://127.0.0.1:{port}/" if port else None)
        return self.apart

    def start_h3(self):
        """tests/server/h3 (quic-go), built with Go if need be, over QUIC and,
        at the same port, over TLS on TCP (--tcp), pinned to CPU 0."""
        if not self.tls:
            self.h3_why = f"no certificate ({OPENSSL} failed)"
            return
        try:
            gobuild.go_build(os.path.join(ROOT, "tests", "server", "h3"), GO_H3)
        except RuntimeError as e:
            self.h3_why = str(e).splitlines()[0]
            return
        argv = ["taskset", "-c", "0", rel(GO_H3), "--cert", rel(self.cert), "--key",
                rel(self.key), "--tcp", "--max-time", "3600"]
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                text=True, cwd=ROOT)
        self.procs.append(proc)
        line = proc.stdout.readline().split()
        if len(line) != 2 or line[0] != "port":
            self.h3_why = "volley-h3 did not start"
            return
        self.h3_server = Server(proc)
        self.h3 = f"https://127.0.0.1:{line[1]}/"
        self.commands.append(" ".join(argv))

    def make_cert(self):
        """A throw-away self-signed P-256 certificate for the HTTPS row."""
        if os.path.exists(self.cert) and os.path.exists(self.key):
            return True
        try:
            subprocess.run([OPENSSL, "req", "-x509", "-newkey", "ec", "-pkeyopt",
                            "ec_paramgen_curve:prime256v1", "-nodes", "-days", "30",
                            "-subj", "/CN=localhost", "-keyout", self.key, "-out", self.cert],
                           check=True, capture_output=True, timeout=30)
            return True
        except (OSError, subprocess.SubprocessError):
            return False

    def start(self, argv, port):
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                cwd=ROOT)
        self.procs.append(proc)
        wait_port(port, proc)
        self.commands.append(" ".join(argv))
        return proc

    def stop(self):
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGQUIT if NGINX in proc.args else signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


# --------------------------------------------------------------------------
# Rows
# --------------------------------------------------------------------------

class Row:
    """One line of the table: the median of each tool's runs and their ratio
    to the rival's (wrk, or h2load for HTTP/2)."""

    def __init__(self, key, title, unit, commands, rival="wrk"):
        self.key, self.title, self.unit, self.rival = key, title, unit, rival
        self.label = key  # in the table; rows C leave out the count their title gives
        # An argv template with {tool} for both, or {tool: argv} when they differ.
        self.commands = commands
        self.samples = {}      # tool -> [Sample], throughput rows
        self.value = {}        # tool -> median of what the row measures
        self.cpu = {}          # tool -> median CPU seconds per million requests
        self.server = {}       # tool -> the server's, during that tool's runs
        self.na = None         # why the row has no figures
        self.notes = []

    def ratio(self):
        v, w = self.value.get("volley"), self.value.get(self.rival)
        return v / w if v is not None and w else None

    def cost_ratio(self):
        """The rival's client + server CPU per request over volley's: the
        ratio of requests/s on a core nothing else uses."""
        if len(self.cpu) < 2 or len(self.server) < 2:
            return None
        return ((self.cpu[self.rival] + self.server[self.rival]) /
                (self.cpu["volley"] + self.server["volley"]))


class Bench:
    def __init__(self):
        self.runs = env_int("BENCH_RUNS", 5, 1)
        self.duration = env_int("BENCH_DURATION", 3, 1)
        self.rows_wanted = os.environ.get("BENCH_ROWS", "ABCDEFGHIK").upper()
        self.dir = os.path.abspath(os.environ.get("BENCH_DIR", os.path.join(ROOT, "build",
                                                                              "bench")))
        os.makedirs(self.dir, exist_ok=True)
        for name in os.listdir(self.dir):  # the outputs of an earlier run
            if name.endswith(".out"):
                os.unlink(os.path.join(self.dir, name))
        self.tools = {"volley": rel(VOLLEY), "wrk": WRK}
        self.volley_args = shlex.split(os.environ.get("BENCH_VOLLEY_ARGS", ""))
        self.rows = []
        self.client_rows, self.client_notes = [], []
        self.nofile = raise_nofile()

    def client(self, key, tool, argv, i, timeout, server):
        note(f"{key} {tool} run {i + 1}/{self.runs}")
        name = tool.replace("/", "")  # "HTTP/2": a file name
        return Run(argv, timeout, os.path.join(self.dir, f"{key}-{name}-{i + 1}.out"), server)

    def alternate(self, key, runs, timeout, argv_of, server=None, tools=("volley", "wrk")):
        """runs runs of each tool, alternating which goes first: tool -> [Run]."""
        done = {tool: [] for tool in tools}
        for i in range(runs):
            for tool in tools if i % 2 == 0 else tools[::-1]:
                done[tool].append(self.client(key, tool, argv_of(tool), i, timeout, server))
        return done

    def throughput(self, key, title, url, script, server):
        d = self.duration
        template = ["taskset", "-c", "0", "{tool}", "-t1", f"-c{CONNS}", f"-d{d}s",
                    "-s", rel(os.path.join(HERE, script)), url]
        row = Row(key, title, "req/s", template)
        self.rows.append(row)
        runs = self.alternate(key, self.runs, d + 30, lambda t: self.argv(template, t), server)
        self.collect(row, runs)
        if len(row.value) < 2:
            row.na = "runs failed (see notes)"
        return row

    def argv(self, template, tool):
        """The command of a throughput run: BENCH_VOLLEY_ARGS go before volley's URL."""
        argv = fill(template, self.tools[tool])
        return argv[:-1] + self.volley_args + argv[-1:] if tool == "volley" else argv

    @staticmethod
    def collect(row, runs):
        """The medians of each tool's runs (tool -> [Run]), and notes on
        failed runs and errors."""
        row.samples = {t: [Sample(r) for r in rs] for t, rs in runs.items()}
        for tool, samples in row.samples.items():
            good = [s for s in samples if not s.error]
            bad = [s.error for s in samples if s.error]
            if bad:
                row.notes.append(f"{tool}: {len(bad)} failed run(s): {bad[0]}")
            errs = sum(s.socket_errors + s.status_errors for s in good)
            if errs:
                row.notes.append(f"{tool}: {errs} socket/status errors")
            if good:
                row.value[tool] = statistics.median(s.rps for s in good)
                row.cpu[tool] = statistics.median(s.cpu_per_million() for s in good)
                row.server[tool] = statistics.median(s.server_per_million() for s in good)

    def http2(self, key, title, url):
        """Rows G and H: volley --http2 beside h2load, the same connections
        and streams, pinned like the other throughput rows."""
        if not url:
            return self.na_row(key, title, f"no certificate ({OPENSSL} failed)")
        if not os.access(H2LOAD, os.X_OK):
            return self.na_row(key, title, f"{H2LOAD} not found (deps/install.sh --test)")
        d, conns = self.duration, [f"-c{H2_CONNS}", f"-m{H2_STREAMS}"]
        commands = {
            "volley": ["taskset", "-c", "0", self.tools["volley"], "--http2", "-t1", *conns,
                       f"-d{d}s", "-s", rel(os.path.join(HERE, "summary.lua")), url],
            "h2load": ["taskset", "-c", "0", H2LOAD, "-t1", *conns, "-D", str(d), url],
        }
        row = Row(key, title, "req/s", commands, rival="h2load")
        self.rows.append(row)
        runs = self.alternate(key, self.runs, d + 30, commands.get, self.servers.nginx,
                              ("volley", "h2load"))
        self.collect(row, runs)
        if len(row.value) < 2:
            row.na = "runs failed (see notes)"

    def client_bound(self):
        """Rows K: each client alone on CPU 0 against volley-testd alone on
        CPU 1, with its system calls per request from one more run."""
        server, url = self.servers.apart_testd()
        for key, title, conns, depth in CLIENT_ROWS:
            if (os.cpu_count() or 1) < 2:
                self.client_rows.append(self.na_row(key, title, "needs 2 CPUs"))
                continue
            if not url:
                self.client_rows.append(self.na_row(key, title, f"{rel(TESTD)} missing"))
                continue
            commands = self.client_commands(conns, depth, url)
            row = Row(key, title, "req/s", commands)
            self.client_rows.append(row)
            tools = tuple(commands)
            runs = self.alternate(key, self.runs, self.duration + 30, commands.get, server, tools)
            self.collect(row, runs)
            row.calls = {}
            for tool in tools:
                row.calls[tool] = self.syscalls(key, tool, commands[tool], row)
            if len(row.value) < 2:
                row.na = "runs failed (see notes)"
        self.rows = [r for r in self.rows if r not in self.client_rows]

    def client_commands(self, conns, depth, url):
        """tool -> argv of a client-bound row, pinned to CPU 0."""
        d = self.duration
        script = rel(os.path.join(HERE, "pipeline16.lua" if depth > 1 else "summary.lua"))
        pin = ["taskset", "-c", "0"]
        own = ["-t1", f"-c{conns}", f"-d{d}s", "-s", script]
        commands = {f"volley {e}": pin + [self.tools["volley"], "--engine", e] + own + [url]
                    for e in self.engines()}
        commands["wrk"] = pin + [WRK] + own + [url]
        if os.access(H2LOAD, os.X_OK):
            commands["h2load --h1"] = pin + [H2LOAD, "--h1", "-t1", f"-c{conns}", f"-m{depth}",
                                             "-D", str(d), url]
        return commands

    def engines(self):
        """volley's engines that run here: epoll, and io_uring unless the
        kernel or the build refuses it (then a note says why)."""
        if not hasattr(self, "_engines"):
            p = subprocess.run([VOLLEY, "--engine", "io_uring", "-n1", "http://127.0.0.1:1/"],
                               capture_output=True, text=True, timeout=30)
            refused = "--engine io_uring" in p.stderr
            self._engines = ("epoll",) if refused else ("epoll", "io_uring")
            if refused:
                self.client_notes.append(p.stderr.strip())
        return self._engines

    def syscalls(self, key, tool, argv, row):
        """System calls per request of one more run of argv: perf stat's
        count of raw_syscalls:sys_enter (every thread of the client), or
        strace -c -f's total without perf. None when neither works."""
        path = os.path.join(self.dir, f"{key}-{tool.replace(' ', '_')}-calls.txt")
        counters = []
        if os.access(PERF, os.X_OK):
            counters.append(([PERF, "stat", "-x,", "-e", "raw_syscalls:sys_enter", "-o", path,
                              "--"], r"^(\d+),[^,]*,raw_syscalls:sys_enter,"))
        if os.access(STRACE, os.X_OK):
            counters.append(([STRACE, "-c", "-f", "-o", path],
                             r"^-+.*\n\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?total$"))
        for counter, pattern in counters:
            note(f"{key} {tool} counting system calls ({os.path.basename(counter[0])})")
            run = Run(counter + argv, self.duration + 60,
                      os.path.join(self.dir, f"{key}-{tool.replace(' ', '_')}-calls.out"))
            sample = Sample(run)
            try:
                with open(path) as f:
                    m = re.search(pattern, f.read(), re.M)
            except OSError:
                m = None
            if sample.error or not m:
                continue
            row.counted_by = os.path.basename(counter[0])
            return int(m.group(1)) / sample.requests
        row.notes.append(f"{tool}: system calls not counted (perf and strace failed)")
        return None

    def http3(self):
        """Rows I and I2: volley --http3 beside oha --http-version 3 against
        quic-go, and volley's own CPU per request over HTTP/3 and over HTTP/2
        with TLS against the same server."""
        title = f"HTTP/3, -t1 -c{H3_CONNS} -m{H3_STREAMS}, one core, quic-go"
        title2 = "client CPU per request, HTTP/3 / HTTP/2+TLS"
        self.servers.start_h3()
        url = self.servers.h3
        if not url:
            self.na_row("I", title, self.servers.h3_why)
            return self.na_row("I2", title2, self.servers.h3_why)
        d = self.duration
        flags = ["-t1", f"-c{H3_CONNS}", f"-m{H3_STREAMS}", f"-d{d}s", "-s",
                 rel(os.path.join(HERE, "summary.lua"))]
        volley3 = ["taskset", "-c", "0", self.tools["volley"], "--http3", *flags, url]
        commands = {"volley": volley3}
        tools = ("volley",)
        if os.access(OHA, os.X_OK):
            commands["oha"] = ["taskset", "-c", "0", OHA, "--http-version", "3", "--insecure",
                               "--no-tui", "--output-format", "json", "-c", str(H3_CONNS), "-p",
                               str(H3_STREAMS), "-z", f"{d}s", url]
            tools = ("volley", "oha")
        row = Row("I", title, "req/s", commands, rival="oha")
        self.rows.append(row)
        if len(tools) == 1:
            row.notes.append(f"{OHA} not found (cargo install oha --features http3): volley alone")
        runs = self.alternate("I", self.runs, d + 30, commands.get, self.servers.h3_server, tools)
        self.collect(row, runs)
        if not row.value:
            row.na = "runs failed (see notes)"
        # I2: the same volley run over HTTP/2 with TLS, the server's TCP port.
        commands2 = {"volley": volley3,
                     "HTTP/2": ["taskset", "-c", "0", self.tools["volley"], "--http2", *flags, url]}
        row2 = Row("I2", title2, "us", commands2, rival="HTTP/2")
        self.rows.append(row2)
        runs = self.alternate("I2", self.runs, d + 30, commands2.get, self.servers.h3_server,
                              ("volley", "HTTP/2"))
        self.collect(row2, runs)
        row2.value = dict(row2.cpu)  # what the row compares: client CPU per request
        if len(row2.value) < 2:
            row2.na = "runs failed (see notes)"

    def rss(self, conns):
        key = f"C{conns}"
        template = [TIME, "-f", "%M", "{tool}", "-t2", f"-c{conns}", f"-d{RSS_DURATION}s",
                    self.servers.http]
        row = Row(key, f"peak RSS, {conns:,} connections", "MiB", template)
        row.label = "C"
        self.rows.append(row)
        if self.nofile < conns + 100:
            row.na = f"open file limit {self.nofile} (raise it with ulimit -n)"
            return
        if not os.access(TIME, os.X_OK):
            # wait4's ru_maxrss is the same figure /usr/bin/time prints.
            template = template[3:]
            row.commands = [TIME, "-f", "%M"] + template
            row.notes.append(f"{TIME} missing (deps/install.sh --test): RSS from wait4")
        runs = self.alternate(key, min(self.runs, RSS_RUNS), RSS_DURATION + 60,
                              lambda t: fill(template, self.tools[t]))
        for tool, runs in runs.items():
            kbs = []
            for r in runs:
                m = re.search(r"^(\d+)$", r.output, re.M) if template[0] == TIME else None
                kb = int(m.group(1)) if m else r.maxrss_kb
                if r.returncode != 0 or not kb:
                    row.notes.append(f"{tool}: run failed: {last_line(r.output)}")
                    continue
                errors = re.search(r"Socket errors: connect (\d+)", r.output)
                if errors and int(errors.group(1)):
                    row.notes.append(f"{tool}: {errors.group(1)} connect errors")
                kbs.append(kb)
            if kbs:
                row.value[tool] = statistics.median(kbs) / 1024
        if len(row.value) < 2:
            row.na = "runs failed (see notes)"

    def https(self):
        title = f"HTTPS keep-alive, -t1 -c{CONNS}, one core, nginx"
        if not self.servers.https:
            return self.na_row("E", title, f"no certificate ({OPENSSL} failed)")
        self.throughput("E", title, self.servers.https, "summary.lua", self.servers.nginx)

    def na_row(self, key, title, why):
        row = Row(key, title, "", None)
        row.na = why
        self.rows.append(row)
        return row

    def busy(self, a):
        """Row F: Little's law on row A's runs; 1.0 = never idle."""
        row = Row("F", "busy fraction (row A): latency x req/s / conns", "", None)
        self.rows.append(row)
        if a is None or a.na:
            row.na = "needs row A"
            return
        for tool, samples in a.samples.items():
            vals = [s.mean_us / 1e6 * s.rps / CONNS for s in samples if not s.error]
            if vals:
                row.value[tool] = statistics.median(vals)

    def run(self):
        for path, what in ((VOLLEY, "make"), (WRK, "deps/install.sh --test"),
                           (NGINX, "deps/install.sh --test")):
            if not os.access(path, os.X_OK):
                sys.exit(f"bench: {path} not found (run {what})")
        self.servers = Servers(self.dir)
        try:
            self.header()
            want = self.rows_wanted
            a = None
            if "A" in want or "F" in want:
                a = self.throughput("A", f"plain GET, -t1 -c{CONNS}, one core, nginx",
                                    self.servers.http, "summary.lua", self.servers.nginx)
            if "B" in want:
                self.throughput("B", "request() + response() in Lua, one core, nginx",
                                self.servers.http, "dynamic.lua", self.servers.nginx)
                self.throughput("B2", "new path, number header per call, nginx",
                                self.servers.http, "dynamic2.lua", self.servers.nginx)
            if "D" in want:
                title = "pipelined depth 16, one core, volley-testd"
                if self.servers.testd:
                    self.throughput("D", title, self.servers.testd, "pipeline16.lua",
                                    self.servers.testd_server)
                else:
                    self.na_row("D", title, f"{rel(TESTD)} missing (make tests)")
            if "E" in want:
                self.https()
            if "C" in want:
                for n in RSS_CONNS:
                    self.rss(n)
            if "F" in want:
                self.busy(a)
            if "G" in want:
                self.http2("G", f"HTTP/2 h2c, -t1 -c{H2_CONNS} -m{H2_STREAMS}, one core, nginx",
                           self.servers.h2c)
            if "H" in want:
                self.http2("H", f"HTTP/2 TLS, -t1 -c{H2_CONNS} -m{H2_STREAMS}, one core, nginx",
                           self.servers.h2)
            if "I" in want:
                self.http3()
            if "K" in want:
                self.client_bound()
            if "A" not in want:
                self.rows = [r for r in self.rows if r.key != "A"]
        finally:
            self.servers.stop()
        self.report()

    # ----------------------------------------------------------------------
    # Output
    # ----------------------------------------------------------------------

    def header(self):
        def version(argv, words):
            """The first words of what argv prints (nginx: on stderr)."""
            try:
                p = subprocess.run(argv, capture_output=True, text=True, timeout=10)
                return " ".join((p.stdout + p.stderr).split()[:words]) or "?"
            except (OSError, subprocess.SubprocessError):
                return "?"
        cpu = "?"
        try:
            with open("/proc/cpuinfo") as f:
                m = re.search(r"^model name\s*:\s*(.+)$", f.read(), re.M)
                cpu = m.group(1) if m else cpu
        except OSError:
            pass
        self.versions = [version([VOLLEY, "-v"], 3), version([WRK, "-v"], 2),
                         version([NGINX, "-v"], 3)[len("nginx version: "):]]
        if set("GH") & set(self.rows_wanted) and os.access(H2LOAD, os.X_OK):
            self.versions.insert(2, version([H2LOAD, "--version"], 2))
        if "I" in self.rows_wanted and os.access(OHA, os.X_OK):
            self.versions.insert(2, version([OHA, "--version"], 2))
        self.machine = f"{os.cpu_count()} CPUs ({cpu}), load {os.getloadavg()[0]:.2f} at start"

    def report(self):
        out = []
        out.append("volley vs wrk (and h2load for HTTP/2, oha for HTTP/3), side by side on "
                   "127.0.0.1")
        out.append("  " + "; ".join(self.versions))
        out.append(f"  {self.machine}")
        out.append(f"  medians of {self.runs} alternating runs of {self.duration}s per tool "
                   f"(row C: {min(self.runs, RSS_RUNS)} runs of {RSS_DURATION}s)")
        self.rows.sort(key=lambda r: (r.key[0], int(r.key[1:] or 0)))
        for rival in ("wrk", "h2load", "oha", "HTTP/2"):
            rows = [r for r in self.rows if r.rival == rival]
            if rows:
                out.append("")
                out += self.table(rows, rival)
        out.append("")
        out.append("Ratios are volley / wrk (or h2load): higher is better, except row C (peak "
                   "RSS in MiB). Row F's")
        out.append("target is on volley's own value. CPU: the client's user + system time per "
                   "request + the server's")
        out.append("in the same runs (/proc/PID/schedstat). Cost ratio: the other tool's sum / "
                   "volley's, the requests/s")
        out.append("ratio on a core nothing else uses; on a shared machine it is the steadier "
                   "figure.")
        if self.client_rows:
            out.append("")
            out += self.client_table()
        notes = [(r.key, n) for r in self.rows + self.client_rows for n in r.notes]
        spread = [(r.key, pair_spread(r)) for r in self.rows if not r.na and r.commands]
        spread += [(f"{r.key} {t}", pair_spread(r, t, "wrk")) for r in self.client_rows
                   if not r.na for t in r.samples if t.startswith("volley")]
        out.append("")
        out.append("Ratio of each alternation (volley run i / the other's run i), lowest to "
                   "highest:")
        for key, s in spread:
            if s:
                out.append(f"  {key:{max(6, len(key))}} {s}")
        if notes:
            out.append("")
            out.append("Notes:")
            for key, n in notes:
                out.append(f"  {key:6} {n}")
        out.append("")
        out.append(f"Commands (from {ROOT}; TOOL is {self.tools['volley']} or {self.tools['wrk']}):")
        for c in self.servers.commands:
            out.append(f"  server  {c}")
        for row in self.rows:
            if isinstance(row.commands, dict):
                for argv in row.commands.values():
                    out.append(f"  {row.key:6}  {' '.join(argv)}")
            elif row.commands:
                out.append(f"  {row.key:6}  {' '.join(fill(row.commands, 'TOOL'))}")
        for row in self.client_rows:
            for argv in (row.commands or {}).values():
                out.append(f"  {row.key:6}  {' '.join(argv)}")
        if self.volley_args:
            out.append(f"  volley's runs of rows A, B, D, E also had: {shlex.join(self.volley_args)}")
        if any(r.key == "F" for r in self.rows):
            out.append("  F       row A's runs: latency_mean_us / 1e6 x requests/s / "
                       f"{CONNS} (both from tests/bench/summary.lua's done())")
        print("\n".join(out))

    def client_table(self):
        """Rows K: a line per tool, then volley's ratios beside the targets."""
        counted = {getattr(r, "counted_by", None) for r in self.client_rows} - {None}
        out = ["Client-bound: the client alone on CPU 0, volley-testd alone on CPU 1; medians "
               "as above, system",
               f"calls per request from one more run of each tool "
               f"({', '.join(sorted(counted)) or 'not counted'}):",
               f"{'':36}{'req/s':>10}{'CPU us/req':>12}{'calls/req':>11}"]
        for row in self.client_rows:
            out.append(f"{row.key} {row.title}" + (f"  n/a: {row.na}" if row.na else ""))
            if row.na:
                continue
            for tool in row.commands:
                calls = row.calls.get(tool)
                out.append(f"    {tool:32}{fmt(row.value.get(tool), 'req/s'):>10}"
                           f"{fmt2(row.cpu.get(tool)):>12}{fmt2(calls):>11}")
            out += ["    " + t for t in client_ratios(row)]
        out += ["  " + n for n in self.client_notes]
        out.append("Targets: volley io_uring's CPU per request <= 0.6 x wrk's and <= 0.75 x "
                   "volley epoll's, its requests/s")
        out.append(">= 1.4 x wrk's, its system calls per request <= 0.3 at -c50.")
        return out

    @staticmethod
    def table(rows, rival):
        """The lines of the table of the rows that compare volley with rival."""
        w = 46  # row titles
        out = [f"{'':{w + 2}}{'volley':>10}{rival:>10}{'ratio':>7}{'target':>8}"
               f"   {'CPU us/request, client+server':^29}{'cost':>7}",
               f"{'':{w + 2}}{'':>10}{'':>10}{'':>7}{'':>8}"
               f"   {'volley':>13}{rival:>14}  {'ratio':>7}"]
        for row in rows:
            label = f"{row.label} {row.title}"
            if row.na:
                out.append(f"{label:{w + 2}}n/a: {row.na}")
                continue
            ratio = row.ratio()
            line = (f"{label:{w + 2}}{fmt(row.value.get('volley'), row.unit):>10}"
                    f"{fmt(row.value.get(rival), row.unit):>10}"
                    f"{f'{ratio:.3f}' if ratio else '-':>7}{TARGETS.get(row.key, ''):>8}")
            if row.cpu:
                cpu = "".join(f"{f'{row.cpu[t]:.2f}+{row.server[t]:.2f}':>14}"
                              if t in row.cpu else f"{'-':>14}" for t in ("volley", rival))
                cost = row.cost_ratio()
                line += f"  {cpu}  {f'{cost:.3f}' if cost else '-':>7}"
            out.append(line.rstrip())
        return out


def fill(template, tool):
    return [tool if a == "{tool}" else a for a in template]


def fmt(v, unit):
    if v is None:
        return "-"
    if unit == "req/s":
        return f"{v:,.0f}"
    if unit == "MiB":
        return f"{v:.1f} MiB"
    if unit == "us":
        return f"{v:.2f} us"
    return f"{v:.3f}"


def fmt2(v):
    return "-" if v is None else f"{v:.2f}"


def client_ratios(row):
    """volley io_uring's figures over wrk's and volley epoll's, where both
    have one: requests/s (higher is better) and CPU per request (lower)."""
    ours = "volley io_uring"
    lines = []
    for rival in ("wrk", "volley epoll"):
        if ours not in row.value or rival not in row.value:
            continue
        rps = row.value[ours] / row.value[rival] if row.value[rival] else None
        cpu = row.cpu[ours] / row.cpu[rival] if row.cpu.get(rival) else None
        lines.append(f"{ours} / {rival}: req/s {fmt2(rps)}, CPU per request {fmt2(cpu)}")
    return lines


def pair_spread(row, ours="volley", rival=None):
    """The per-alternation ratios, to judge the noise."""
    vs, ws = row.samples.get(ours, []), row.samples.get(rival or row.rival, [])
    ratios = []
    for v, w in zip(vs, ws):
        if not v.error and not w.error and w.rps:
            ratios.append(v.rps / w.rps)
    return " ".join(f"{r:.3f}" for r in sorted(ratios))


def raise_nofile():
    """As high as allowed: wrk does not raise the limit itself, and row C
    holds 10,000 connections. Children inherit it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):
            pass
    return soft if soft != resource.RLIM_INFINITY else 1 << 30


if __name__ == "__main__":
    Bench().run()
