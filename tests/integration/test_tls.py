"""HTTPS against Debian's nginx with certificates made here: protocol, ALPN and
SNI as nginx saw them, session resumption on reconnects, client certificates,
server verification, unusable certificate files, and targets that cannot do
TLS (a plain-HTTP port, a server that resets) costing a few counted connect
errors and no CPU.
SPDX-License-Identifier: MIT
"""
import json
import re
import resource
import socket
import ssl
import struct
import threading
import warnings

import pytest

from conftest import parse_report, volley

# What nginx logs for every request; "-" for an empty variable.
LOG = "$ssl_protocol $ssl_alpn_protocol $ssl_server_name $ssl_session_reused " \
      "$ssl_client_verify $connection"


def https_nginx(nginx, certs, extra="", protocols="TLSv1.2 TLSv1.3"):
    # nginx 1.22 enables only up to TLS 1.2 unless told otherwise.
    return nginx(tls=True, log_format=LOG, server=f"""
        ssl_certificate {certs["server.pem"]};
        ssl_certificate_key {certs["server.key"]};
        ssl_protocols {protocols};
        ssl_client_certificate {certs["ca.pem"]};
        ssl_verify_client optional;
        {extra}
        location / {{ return 200 "hello over tls\\n"; }}
    """)


def fields(log):
    """nginx's log lines split into LOG's fields."""
    keys = ("protocol", "alpn", "sni", "reused", "client", "conn")
    return [dict(zip(keys, line.split())) for line in log]


def assert_clean(run):
    assert run.returncode == 0, run
    assert not run.report["socket_errors_line"], run
    assert run.report["requests"] > 0, run
    assert run.report["non2xx"] == 0, run


def local_url(server, host="localhost"):
    return f"https://{host}:{server.port}/"


def test_keepalive_tls13_alpn_and_sni(nginx, certs):
    server = https_nginx(nginx, certs)
    run = volley("-t", 2, "-c", 4, "-d", 1, local_url(server))
    assert_clean(run)
    log = fields(server.log())
    # Responses still on the way when the run ends are logged but not counted.
    assert run.report["requests"] <= len(log) <= run.report["requests"] + 4
    assert {(f["protocol"], f["alpn"], f["sni"]) for f in log} == \
        {("TLSv1.3", "http/1.1", "localhost")}
    # Keep-alive: the four connections carried every request.
    assert len({f["conn"] for f in log}) == 4


@pytest.mark.parametrize("protocol", ["TLSv1.2", "TLSv1.3"])
def test_reconnects_resume_the_session(nginx, certs, protocol):
    # TLS 1.3 tickets come after the handshake; TLS 1.2 here uses the
    # server's session cache rather than tickets.
    extra = "ssl_session_tickets off; ssl_session_cache shared:volley:1m;"
    server = https_nginx(nginx, certs, extra=extra if protocol == "TLSv1.2" else "",
                         protocols=protocol)
    run = volley("-t", 2, "-c", 4, "-d", 1, "-H", "Connection: close", "--json", "-",
                 local_url(server))
    run.report = parse_report(run.stderr)
    assert_clean(run)
    log = fields(server.log())
    assert {f["protocol"] for f in log} == {protocol}
    # One connection per request.
    assert len({f["conn"] for f in log}) == len(log) >= run.report["requests"] > 20
    resumed = sum(f["reused"] == "r" for f in log)
    assert resumed >= 0.95 * len(log), f"{resumed} of {len(log)} resumed"
    # volley's own count of its handshakes agrees with nginx's log (give or
    # take the connections open when the run ended).
    tls = json.loads(run.stdout)["tls"]
    assert len(log) <= tls["handshakes"] <= len(log) + 4, (tls, len(log))
    assert tls["resumed"] >= 0.95 * tls["handshakes"] - 4, tls
    assert tls["handshake_mean_us"] > 0


def test_script_error_mid_run_exits_1_while_other_threads_use_openssl(nginx, certs, tmp_path):
    # A hook error on one worker while the others are inside OpenSSL: the
    # run stops in order (no exit() from a worker, whose atexit clean-up of
    # OpenSSL crashed the others now and then). Every run: status 1 and the
    # message, never a crash.
    (tmp_path / "err.lua").write_text(
        'local n = 0\nfunction response(s) n = n + 1; if n > 20 then error("stop " .. n) end end\n')
    server = https_nginx(nginx, certs)
    for i in range(40):
        threads = 2 if i % 4 == 0 else 4
        run = volley(f"-t{threads}", f"-c{4 * threads}", "-d2s", "-s", "err.lua",
                     local_url(server), cwd=tmp_path)
        assert run.returncode == 1, (i, run)
        assert run.stderr.startswith("volley: err.lua:2: stop 21\nstack traceback:"), (i, run)
        assert "requests in" not in run.stdout, run  # no report


def test_no_sni_for_ip_literals_and_sni_override(nginx, certs):
    server = https_nginx(nginx, certs)
    run = volley("-t", 1, "-c", 1, "-d", "300ms", local_url(server, "127.0.0.1"))
    assert_clean(run)
    run = volley("-t", 1, "-c", 1, "-d", "300ms", "--sni", "volley.test", local_url(server))
    assert_clean(run)
    by_conn = {}
    for f in fields(server.log()):
        by_conn.setdefault(f["conn"], set()).add(f["sni"])
    assert sorted(by_conn.values(), key=sorted) == [{"-"}, {"volley.test"}]


@pytest.mark.parametrize("files", [("client.pem", "client.key"), ("client-both.pem",)])
def test_client_certificate_verified_by_nginx(nginx, certs, files):
    server = https_nginx(nginx, certs)
    args = ["--cert", certs[files[0]]] + (["--key", certs[files[1]]] if len(files) > 1 else [])
    run = volley("-t", 1, "-c", 2, "-d", "500ms", *args, local_url(server))
    assert_clean(run)
    log = fields(server.log())
    assert log and {f["client"] for f in log} == {"SUCCESS"}


def test_without_client_certificate_nginx_sees_none(nginx, certs):
    # nginx asks for a certificate (optional): the check before the run has
    # its verdict with the session tickets, not at the end of --timeout
    server = https_nginx(nginx, certs)
    run = volley("-t", 1, "-c", 1, "-d", "300ms", "-T", "30s", local_url(server))
    assert_clean(run)
    assert run.elapsed < 15, run
    assert {f["client"] for f in fields(server.log())} == {"NONE"}


def test_verify_refuses_a_self_signed_server(nginx, certs):
    server = https_nginx(nginx, certs)
    run = volley("-d", 1, "--verify", local_url(server))
    assert run.returncode == 1, run
    assert run.stdout == "", run
    assert run.stderr == f"volley: certificate verification failed for localhost:{server.port}: " \
                         "self-signed certificate\n", run
    assert server.log() == []


def test_verify_with_its_certificate_as_cacert_accepts_it(nginx, certs):
    server = https_nginx(nginx, certs)
    for host in ("localhost", "127.0.0.1"):
        run = volley("-t", 1, "-c", 1, "-d", "300ms", "--verify", "--cacert", certs["server.pem"],
                     local_url(server, host))
        assert_clean(run)
    assert len(server.log()) >= 2


def test_verify_checks_the_name_asked_for(nginx, certs):
    server = https_nginx(nginx, certs)
    run = volley("-d", 1, "--cacert", certs["server.pem"], "--sni", "other.test",
                 local_url(server))
    assert run.returncode == 1, run
    assert run.stderr == f"volley: certificate verification failed for localhost:{server.port}: " \
                         "hostname mismatch\n", run


@pytest.mark.parametrize("args,message", [
    (["--cert", "missing.pem"], "--cert {missing.pem}: No such file or directory"),
    (["--cert", "not-pem.txt"], "--cert {not-pem.txt}: no PEM certificate in it"),
    (["--cert", "client.key"], "--cert {client.key}: no PEM certificate in it"),
    (["--cert", "client.pem"],
     "--cert {client.pem}: no unencrypted PEM private key in it (give the key with --key)"),
    (["--cert", "client.pem", "--key", "missing.key"],
     "--key {missing.key}: No such file or directory"),
    (["--cert", "client.pem", "--key", "not-pem.txt"],
     "--key {not-pem.txt}: no unencrypted PEM private key in it"),
    (["--cert", "client.pem", "--key", "server.key"],
     "--key {server.key}: the private key does not match the certificate in {client.pem}"),
    (["--cacert", "missing.pem"], "--cacert {missing.pem}: No such file or directory"),
    (["--cacert", "not-pem.txt"], "--cacert {not-pem.txt}: no PEM certificate in it"),
    (["--sni", ""], "--sni '': a server name has 1 to 255 characters"),
])
def test_unusable_tls_options_stop_the_run(certs, tmp_path, args, message):
    paths = dict(certs, **{"missing.pem": str(tmp_path / "missing.pem"),
                           "missing.key": str(tmp_path / "missing.key")})
    args = [paths.get(a, a) for a in args]
    # Checked before the target: nothing listens on port 1.
    run = volley("-d", 1, *args, "https://127.0.0.1:1/")
    assert run.returncode == 1, run
    assert run.stdout == ""
    for name, path in paths.items():
        message = message.replace("{" + name + "}", path)
    assert run.stderr == "volley: " + message + "\n"


def run_with_cpu(*args):
    """volley's run and the CPU seconds it used."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    run = volley(*args)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return run, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def test_https_to_a_plain_http_port_stops_at_the_start_with_the_reason(nginx):
    # The check before the run makes a TLS handshake: nginx answers the
    # ClientHello in plain HTTP, and that is said in one line.
    server = nginx(log_format="$status", server='location / { return 200 "plain\\n"; }')
    run = volley("-t", 1, "-c", 4, "-d", 2, server.url.replace("http:", "https:"))
    assert run.returncode == 1 and run.stdout == "", run
    assert re.fullmatch(rf"volley: TLS handshake with 127\.0\.0\.1:{server.port} failed: "
                        r"(wrong version number|packet length too long) \(the server did not "
                        r"answer in TLS: is the port an HTTPS one\?\)\n", run.stderr), run
    assert server.log() == ["400"]  # the check's ClientHello, and nothing else


class OneAtATimeServer:
    """A listening socket on 127.0.0.1 whose thread takes connections one at a
    time and hands each to handle(); a connection that fails is dropped.
    With certs, the first connection that sends anything (volley's TLS check
    before the run) gets a good handshake and is closed."""

    def __init__(self, certs=None):
        self.ctx = None
        if certs:
            self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            self.ctx.load_cert_chain(certs["server.pem"], certs["server.key"])
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        checked = self.ctx is None
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(5)
                try:
                    if not checked and conn.recv(1, socket.MSG_PEEK):
                        checked = True
                        self.ctx.wrap_socket(conn, server_side=True).close()
                    else:
                        self.handle(conn)
                except (OSError, ssl.SSLError):
                    pass

    def close(self):
        self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        self.thread.join(timeout=5)


class ResettingServer(OneAtATimeServer):
    """Resets every connection (SO_LINGER 0) as soon as its first bytes (the
    ClientHello) arrive, but the check's before the run; counts those."""

    def __init__(self, certs):
        self.resets = 0
        super().__init__(certs)

    def handle(self, conn):
        if not conn.recv(1):
            return
        self.resets += 1
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


def test_server_resetting_handshakes_is_counted_once_per_attempt(certs, tmp_path):
    server = ResettingServer(certs)
    out = tmp_path / "r.json"
    try:
        run, cpu = run_with_cpu("-t", 2, "-c", 4, "-d", 2, "--json", out,
                                f"https://127.0.0.1:{server.port}/")
    finally:
        server.close()
    assert run.returncode == 0, run
    assert run.elapsed < 4, run
    errors = run.report["errors"]
    # Back-off from 1 ms doubling to 1 s: about 11 attempts per connection in 2 s.
    assert 4 <= errors["connect"] <= 4 * 15, run
    assert cpu < 0.5, f"{cpu:.2f}s of CPU"
    # One counted error per attempt (one per connection may have been cut
    # short by the end of the run), each a reset without an alert.
    assert errors["connect"] <= server.resets <= errors["connect"] + 4
    doc = json.loads(out.read_text())
    assert doc["error_causes"]["tls_handshake"] == errors["connect"]
    assert {k: v for k, v in doc["tls"]["handshake_failures"].items() if v} == \
        {"closed": errors["connect"]}


class FlakyTlsServer(OneAtATimeServer):
    """Serves one request per connection over TLS ("Connection: close"), but
    answers every other ClientHello in plain HTTP, as a server on the wrong
    port would: the client's handshake fails with a protocol error."""

    def __init__(self, certs):
        self.attempts = self.refused = self.served = 0
        super().__init__(certs)

    def handle(self, conn):
        if not conn.recv(1, socket.MSG_PEEK):
            return  # the start-up probe of the port
        self.attempts += 1
        if self.attempts % 2:
            self.refused += 1
            conn.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")
            return
        with self.ctx.wrap_socket(conn, server_side=True) as tls:
            request = b""
            while b"\r\n\r\n" not in request:
                chunk = tls.recv(4096)
                if not chunk:
                    break
                request += chunk
            tls.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n"
                        b"Connection: close\r\n\r\nok\n")
            self.served += 1


def test_failed_handshakes_between_good_ones_are_counted_exactly(certs, tmp_path):
    # One connection alternates: a failed handshake (one connect error, then
    # the back-off), a good one (one response), and so on; nothing of a
    # failure (OpenSSL's per-thread error queue included) spills over.
    server = FlakyTlsServer(certs)
    out = tmp_path / "r.json"
    try:
        run = volley("-t", 1, "-c", 1, "-d", 1, "--json", out,
                     f"https://127.0.0.1:{server.port}/")
    finally:
        server.close()
    assert run.returncode == 0, run
    errors = run.report["errors"]
    assert errors["read"] == errors["write"] == errors["timeout"] == 0, run
    assert run.report["requests"] >= 3, run
    assert run.report["requests"] <= server.served <= run.report["requests"] + 1
    assert errors["connect"] <= server.refused <= errors["connect"] + 1
    # each failure, in --json, as what it was: an answer that is not TLS
    failures = json.loads(out.read_text())["tls"]["handshake_failures"]
    assert failures["not_tls"] == errors["connect"] == sum(failures.values())


def tls_context(certs, version=None, client_ca=False):
    """A server context with the test certificate; only TLS version (a
    ssl.TLSVersion) when given, the oldest ones allowed at any security
    level; requiring a client certificate from certs' CA with client_ca."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(certs["server.pem"], certs["server.key"])
    if version:
        ctx.set_ciphers("DEFAULT:@SECLEVEL=0")
        with warnings.catch_warnings():  # TLS 1.0 and 1.1 are deprecated: that is the point
            warnings.simplefilter("ignore", DeprecationWarning)
            ctx.minimum_version = ctx.maximum_version = version
    if client_ca:
        ctx.verify_mode = ssl.CERT_REQUIRED
        ctx.load_verify_locations(certs["ca.pem"])
    return ctx


class TlsServer(OneAtATimeServer):
    """Serves HTTP/1.1 keep-alive over TLS with contexts(n), the context for
    its n-th connection that sends anything (from 0: volley's check before
    the run); counts handshakes that failed and requests answered."""

    def __init__(self, contexts):
        self.contexts = contexts
        self.attempts = self.failed = self.requests = 0
        self.done = threading.Semaphore(0)
        super().__init__()

    def handled(self):
        """Waits until the server is through with the next connection."""
        assert self.done.acquire(timeout=10)

    def handle(self, conn):
        if not conn.recv(1, socket.MSG_PEEK):
            return  # the start-up probe of the port
        try:
            self.serve_tls(conn)
        finally:
            self.done.release()

    def serve_tls(self, conn):
        ctx = self.contexts(self.attempts)
        self.attempts += 1
        try:
            tls = ctx.wrap_socket(conn, server_side=True)
        except (ssl.SSLError, OSError):
            self.failed += 1
            return
        with tls:
            data = b""
            while True:
                while b"\r\n\r\n" not in data:
                    chunk = tls.recv(4096)
                    if not chunk:
                        return
                    data += chunk
                data = data.split(b"\r\n\r\n", 1)[1]
                self.requests += 1
                tls.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n")


@pytest.mark.parametrize("version", [ssl.TLSVersion.TLSv1_3, ssl.TLSVersion.TLSv1_2],
                         ids=["TLSv1.3", "TLSv1.2"])
def test_a_server_that_requires_a_client_certificate_says_so_before_the_run(certs, version):
    # Under TLS 1.3 the server's certificate_required alert comes after the
    # client's handshake is done: the check waits for the verdict.
    server = TlsServer(lambda n: tls_context(certs, version, client_ca=True))
    try:
        url = f"https://127.0.0.1:{server.port}/"
        run = volley("-t1", "-c1", "-n", 20, url)
        assert run.returncode == 1 and run.stdout == "", run
        alert = "tlsv13 alert certificate required" if version == ssl.TLSVersion.TLSv1_3 \
            else "sslv3 alert handshake failure"
        assert run.stderr == f"volley: TLS handshake with 127.0.0.1:{server.port} failed: " \
                             f"{alert} (the server wants a client certificate: --cert)\n", run
        server.handled()
        assert (server.failed, server.requests) == (1, 0)
        # with one, the same server answers
        run = volley("-t1", "-c1", "-n", 20, "--cert", certs["client.pem"], "--key",
                     certs["client.key"], url)
        assert_clean(run)
        assert run.report["requests"] == server.requests == 20
    finally:
        server.close()


@pytest.mark.parametrize("version", ["TLSv1", "TLSv1_1"])
def test_a_server_older_than_tls_1_2_says_so_before_the_run(certs, version):
    server = TlsServer(lambda n: tls_context(certs, getattr(ssl.TLSVersion, version)))
    try:
        run = volley("-t1", "-c1", "-n", 20, f"https://127.0.0.1:{server.port}/")
        server.handled()
    finally:
        server.close()
    assert run.returncode == 1 and run.stdout == "", run
    assert run.stderr == f"volley: TLS handshake with 127.0.0.1:{server.port} failed: tlsv1 " \
                         "alert protocol version (volley speaks TLS 1.2 and 1.3)\n", run
    assert (server.failed, server.requests) == (1, 0)


def test_handshakes_that_fail_during_the_run_are_counted_by_reason(certs, tmp_path):
    # After the check, every other connection finds a server that speaks
    # only TLS 1.1 (the protocol_version alert) or wants a client
    # certificate under TLS 1.2 (handshake_failure); --no-keepalive makes
    # one connection per request.
    def contexts(n):
        if n % 2 == 0:
            return tls_context(certs)
        return tls_context(certs, getattr(ssl.TLSVersion, "TLSv1_1" if n % 4 == 1 else "TLSv1_2"),
                           client_ca=n % 4 == 3)
    server = TlsServer(contexts)
    out = tmp_path / "r.json"
    try:
        run = volley("-t1", "-c1", "-n", 20, "--no-keepalive", "--json", out,
                     f"https://127.0.0.1:{server.port}/")
    finally:
        server.close()
    assert run.returncode == 0, run
    doc = json.loads(out.read_text())
    failures = {k: v for k, v in doc["tls"]["handshake_failures"].items() if v}
    assert doc["requests"] + doc["errors"]["connect"] == 20
    assert doc["error_causes"]["tls_handshake"] == doc["errors"]["connect"] == server.failed >= 2
    assert failures == {"protocol_version": (server.failed + 1) // 2,
                        "handshake_failure": server.failed // 2}, doc["tls"]

