"""Through proxies: Debian's tinyproxy (an HTTP proxy, sent an http URL's
requests in absolute-form and CONNECT for https) and microsocks (SOCKS5),
each started by the test on 127.0.0.1 with its configuration and log in the
test's directory, in front of nginx. Each proxy connects to nginx from an
address of its own (127.0.0.5, 127.0.0.6), so nginx's log tells what came
through it; the proxies' logs say what they were asked.
SPDX-License-Identifier: MIT
"""
import json
import re
import subprocess
import time

import pytest

from conftest import VOLLEY, Run, check_auth_log, clean_env, free_port, header, ok, run_json, \
    volley

N = 1000
# What nginx logs of each request: who sent it, in which protocol, what.
LOG = "$remote_addr $server_protocol $request"


def web(nginx, certs=None, http2=False):
    """nginx answering 200 to everything, over TLS with certs."""
    tls = ["ssl_certificate " + certs["server.pem"] + ";",
           "ssl_certificate_key " + certs["server.key"] + ";"] if certs else []
    return nginx(tls=bool(certs), http2=http2, log_format=LOG,
                 server=" ".join(tls + ['location / { return 200 "ok\\n"; }']))


def one_line(run, text):
    """volley stopped before the run with one line saying why."""
    assert run.returncode == 1, run
    assert run.stdout == "" and run.stderr == f"volley: {text}\n", run


# --------------------------------------------------------------------------
# An HTTP proxy
# --------------------------------------------------------------------------

def test_an_http_url_goes_to_an_http_proxy_in_absolute_form(nginx, tinyproxy, tmp_path):
    srv, proxy = web(nginx), tinyproxy()
    run, doc = run_json(tmp_path, "-t2", "-c4", "-n", N, "--proxy", proxy.url,
                        srv.url + "/x?y=1")
    ok(run)
    assert doc["requests"] == N and doc["options"]["proxy"] == proxy.url
    # No tunnel: the requests themselves went to the proxy.
    assert doc["proxy"] == {"tunnels": 0, "tunnel_mean_us": None, "connect_status": {}}
    # Exactly N reached nginx, each through the proxy...
    log = srv.log()
    assert len(log) == N, log[:5]
    assert all(re.fullmatch(rf"{proxy.bind} HTTP/1.1 GET (http://127.0.0.1:{srv.port})?/x\?y=1 "
                            r"HTTP/1.1", line) for line in log), log[:5]
    # ...which volley sent it in absolute-form; before the run, one CONNECT
    # checked the way to nginx (and the proxy's credentials, had there been
    # any). tinyproxy closes every connection after one response without
    # saying so: the requests sent behind a response on a connection it
    # closed went again on a new one, unanswered as they were.
    assert sorted(proxy.requests()) == [f"CONNECT 127.0.0.1:{srv.port} HTTP/1.1"] + \
        [f"GET http://127.0.0.1:{srv.port}/x?y=1 HTTP/1.1"] * N
    assert doc["reconnects"] >= N - 4


@pytest.mark.parametrize("protocol", ["HTTP/1.1", "HTTP/2"])
def test_an_https_url_goes_through_connect_tunnels(nginx, tinyproxy, certs, tmp_path, protocol):
    h2 = protocol == "HTTP/2"
    srv, proxy = web(nginx, certs, http2=h2), tinyproxy()
    run, doc = run_json(tmp_path, "-t2", "-c4", "-n", N, *(["--http2"] if h2 else []),
                        "--verify", "--cacert", certs["server.pem"], "--proxy", proxy.url,
                        srv.url + "/x")
    ok(run)
    assert doc["requests"] == N and doc["protocols"] == {protocol: 4}
    version = "HTTP/2.0" if h2 else "HTTP/1.1"
    assert srv.log() == [f"{proxy.bind} {version} GET /x {version}"] * N
    # One tunnel per connection, and one for each check before the run: the
    # way through the proxy, then the TLS handshake (--verify).
    assert doc["proxy"]["tunnels"] == doc["connects"] == 4
    assert proxy.connects() == [f"CONNECT 127.0.0.1:{srv.port} HTTP/1.1"] * (4 + 2)
    # The tunnel's set-up is connect time: each connection's is the TCP
    # connect, the tunnel and the TLS handshake.
    assert doc["connect_time"]["count"] == 4
    assert doc["connect_time"]["mean"] >= doc["proxy"]["tunnel_mean_us"] * 0.999


def test_every_new_connection_sets_up_its_tunnel_again(nginx, tinyproxy, certs, tmp_path):
    srv, proxy = web(nginx, certs), tinyproxy()
    run, doc = run_json(tmp_path, "-t1", "-c2", "-n", 200, "--no-keepalive", "--proxy", proxy.url,
                        srv.url + "/")
    ok(run)
    assert doc["requests"] == doc["connects"] == doc["proxy"]["tunnels"] == 200
    assert doc["reopened"] == 198
    assert len(srv.log()) == 200
    # and the two checks before the run: the way through, the TLS handshake
    assert len(proxy.connects()) == 200 + 2


def test_the_proxy_credentials(nginx, tinyproxy, certs, tmp_path):
    """BasicAuth: the user name and password from the URL, percent-decoded,
    in each CONNECT and each absolute-form request; never written out."""
    plain, https = web(nginx), web(nginx, certs)
    proxy = tinyproxy(auth=("alice", "s3cret"))
    url = proxy.url.replace("//", "//alice:s3c%72et@")
    for srv in (plain, https):
        run, doc = run_json(tmp_path, "-t1", "-c2", "-n", 100, "--proxy", url, srv.url + "/")
        ok(run)
        assert doc["requests"] == 100 and doc["options"]["proxy"] == proxy.url
        assert "s3c" not in run.stdout + run.stderr + json.dumps(doc)
        assert len(srv.log()) == 100
    tunnel = f"unable to connect to 127.0.0.1:{https.port} through {proxy.url}: the proxy " \
             "answered CONNECT with status"
    one_line(volley("-n1", "--proxy", url.replace("%72et", "x"), https.url),
             f"{tunnel} 401 (it refused the user name and password)")
    one_line(volley("-n1", "--proxy", proxy.url, https.url),
             f"{tunnel} 407 (it wants a user name and password in the proxy's URL)")
    # for an http URL, a CONNECT checks them too
    one_line(volley("-n1", "--proxy", url.replace("%72et", "x"), plain.url),
             f"unable to connect to 127.0.0.1:{plain.port} through {proxy.url}: the proxy "
             "answered CONNECT with status 401 (it refused the user name and password)")


def test_a_proxy_that_refuses_stops_the_run_before_it_starts(nginx, tinyproxy, certs):
    srv = web(nginx, certs)
    # tunnels to port 443 only, as a proxy often allows
    proxy = tinyproxy(extra="ConnectPort 443")
    one_line(volley("-n1", "--proxy", proxy.url, srv.url),
             f"unable to connect to 127.0.0.1:{srv.port} through {proxy.url}: the proxy answered "
             "CONNECT with status 403")
    # nothing to connect to behind it
    closed, other = free_port(), tinyproxy()
    one_line(volley("-n1", "--proxy", other.url, f"https://127.0.0.1:{closed}/"),
             f"unable to connect to 127.0.0.1:{closed} through {other.url}: the proxy answered "
             "CONNECT with status 500")
    # a web server is no proxy: nginx answers CONNECT with 400
    one_line(volley("-n1", "--proxy", f"http://127.0.0.1:{srv.port}", srv.url),
             f"unable to connect to 127.0.0.1:{srv.port} through http://127.0.0.1:{srv.port}: "
             "the proxy answered CONNECT with status 400")


@pytest.mark.parametrize("scheme", ["http", "socks5", "socks5h"])
def test_a_dead_proxy_is_one_line(scheme):
    port = free_port()
    one_line(volley("-n1", "--proxy", f"{scheme}://127.0.0.1:{port}", "http://127.0.0.1:1/"),
             f"unable to connect to the proxy {scheme}://127.0.0.1:{port}: Connection refused")
    one_line(volley("-n1", "--proxy", f"{scheme}://proxy.invalid", "http://127.0.0.1:1/"),
             f"unable to resolve the proxy {scheme}://proxy.invalid:1080: "
             "Name or service not known")


def test_cleartext_http2_through_an_http_proxy_is_refused(tinyproxy):
    run = volley("--http2", "--proxy", tinyproxy().url, "http://127.0.0.1:1/")
    assert run.returncode == 1, run
    assert run.stderr.splitlines()[0] == (
        "volley: --http2: cleartext HTTP/2 (h2c) cannot go through an HTTP proxy: use an https "
        "URL, or a socks5 proxy"), run


@pytest.mark.parametrize("scheme", ["http", "socks5", "socks5h"])
def test_http3_through_a_proxy_is_refused(scheme):
    """QUIC is UDP: neither kind of proxy carries it. Refused before the
    proxy is looked for, whether named or taken from the environment."""
    message = (f"volley: --http3 cannot go through a proxy ({scheme}://127.0.0.1:1): QUIC runs "
               "over UDP, and HTTP and SOCKS5 CONNECT tunnels carry TCP")
    run = volley("--http3", "--proxy", f"{scheme}://127.0.0.1:1", "https://127.0.0.1:2/")
    assert run.returncode == 1 and run.stdout == "", run
    assert run.stderr.splitlines()[0] == message, run
    run = volley("--http3", "--proxy-env", "https://127.0.0.1:2/",
                 env=clean_env(HTTPS_PROXY=f"{scheme}://127.0.0.1:1", https_proxy="",
                               NO_PROXY="", no_proxy=""))
    assert run.returncode == 1 and run.stderr.splitlines()[1] == message, run


# --------------------------------------------------------------------------
# SOCKS5
# --------------------------------------------------------------------------

@pytest.mark.parametrize("scheme", ["socks5", "socks5h"])
@pytest.mark.parametrize("kind", ["http", "https", "h2", "h2c"])
def test_socks5(nginx, microsocks, certs, tmp_path, scheme, kind):
    tls, h2 = kind in ("https", "h2"), kind in ("h2", "h2c")
    srv, proxy = web(nginx, certs if tls else None, http2=h2), microsocks()
    args = (["--http2"] if h2 else []) + (["--verify", "--cacert", certs["server.pem"]]
                                          if tls else [])
    # by name: socks5h sends it to the proxy, socks5 resolves it here
    url = srv.url.replace("127.0.0.1", "localhost") + "/x"
    run, doc = run_json(tmp_path, "-t2", "-c4", "-n", N, *args, "--proxy",
                        proxy.url.replace("socks5", scheme), url)
    ok(run)
    assert doc["requests"] == N and doc["proxy"]["tunnels"] == doc["connects"] == 4
    version = "HTTP/2.0" if h2 else "HTTP/1.1"
    assert srv.log() == [f"{proxy.bind} {version} GET /x {version}"] * N
    # the checks before the run: the way through, and the TLS handshake or
    # the cleartext HTTP/2 probe
    target = f"{'localhost' if scheme == 'socks5h' else '127.0.0.1'}:{srv.port}"
    assert proxy.connected() == [target] * (4 + 1 + (tls or h2))


def test_socks5_credentials(nginx, microsocks, tmp_path):
    srv, proxy = web(nginx), microsocks(auth=("alice", "secret"))
    url = proxy.url.replace("//", "//alice:secret@")
    run, doc = run_json(tmp_path, "-t1", "-c2", "-n", 100, "--proxy", url, srv.url + "/")
    ok(run)
    assert doc["requests"] == 100 and len(srv.log()) == 100
    refused = f"unable to connect to 127.0.0.1:{srv.port} through {proxy.url}: the SOCKS5 proxy"
    one_line(volley("-n1", "--proxy", url.replace("secret", "wrong"), srv.url),
             f"{refused} refused the user name and password")
    one_line(volley("-n1", "--proxy", proxy.url, srv.url),
             f"{refused} wants a user name and password in the proxy's URL")


def test_what_a_socks5_proxy_cannot_reach_is_its_reply(microsocks, nginx):
    proxy, port = microsocks(), free_port()
    one_line(volley("-n1", "--proxy", proxy.url, f"http://127.0.0.1:{port}/"),
             f"unable to connect to 127.0.0.1:{port} through {proxy.url}: the SOCKS5 proxy "
             "answered 'connection refused' (reply code 5)")
    # a web server is no SOCKS5 proxy
    srv = web(nginx)
    one_line(volley("-n1", "--proxy", f"socks5://127.0.0.1:{srv.port}", srv.url),
             f"unable to connect to 127.0.0.1:{srv.port} through socks5://127.0.0.1:{srv.port}: "
             "the proxy's answer is not SOCKS5")


# --------------------------------------------------------------------------
# Failures during the run
# --------------------------------------------------------------------------

def run_while(stop, *args, after=0.8):
    """volley with --json, and stop() called `after` seconds into its run."""
    proc = subprocess.Popen([VOLLEY, *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    time.sleep(after)
    stop()
    out, err = proc.communicate(timeout=60)
    return Run(subprocess.CompletedProcess(proc.args, proc.returncode, out, err), 0)


def test_proxy_failures_during_the_run_are_counted_by_cause(nginx, tinyproxy, microsocks, certs,
                                                            tmp_path):
    """Each connection sets up a tunnel (--no-keepalive): once nginx is
    gone, tinyproxy answers CONNECT with 500 and microsocks replies
    'connection refused'; once the proxy is gone, it refuses connections."""
    out = str(tmp_path / "r.json")
    for proxy, cause in ((tinyproxy, "proxy_connect_status"),
                         (microsocks, "socks_connection_refused")):
        srv = web(nginx, certs)
        p = proxy()
        run = run_while(srv.stop, "-t1", "-c2", "-d2s", "--no-keepalive", "--json", out,
                        "--proxy", p.url, srv.url + "/")
        assert run.returncode == 0, run
        with open(out) as f:
            doc = json.load(f)
        causes = {k: v for k, v in doc["error_causes"].items() if v}
        # nginx's graceful stop may also close a connection in its TLS
        # handshake, one on each connection at most
        assert set(causes) - {"tls_handshake"} == {cause}, run
        assert causes.get("tls_handshake", 0) <= 2, run
        assert sum(causes.values()) >= doc["errors"]["connect"] > 0, run
        assert doc["requests"] > 0 and doc["proxy"]["tunnels"] == doc["connects"]
        if cause == "proxy_connect_status":
            assert doc["proxy"]["connect_status"] == {"500": causes[cause]}
            # and the two checks before the run: the way through, the TLS handshake
            assert len(p.connects()) == doc["proxy"]["tunnels"] + causes[cause] + 2
            note = f"(status 500: {causes[cause]})"
            # volley merge adds the proxy's figures up (here, a result twice)
            merged = str(tmp_path / "m.json")
            assert volley("merge", "--json", merged, out, out).returncode == 0
            with open(merged) as f:
                whole = json.load(f)
            assert whole["proxy"] == {"tunnels": 2 * doc["proxy"]["tunnels"],
                                      "tunnel_mean_us": doc["proxy"]["tunnel_mean_us"],
                                      "connect_status": {"500": 2 * causes[cause]}}
            assert whole["options"]["proxy"] == p.url
        else:
            assert doc["proxy"]["connect_status"] == {}
            note = ""
        assert f"Note: through the proxy, connection attempts failed: {cause} {causes[cause]}" \
            f"{' ' + note if note else ''}\n" in run.stderr, run
    srv, p = web(nginx, certs), tinyproxy()
    run = run_while(p.stop, "-t1", "-c2", "-d2s", "--no-keepalive", "--json", out,
                    "--proxy", p.url, srv.url + "/")
    with open(out) as f:
        doc = json.load(f)
    # (tunnels and requests under way when it went fail in their own ways)
    assert doc["error_causes"]["proxy_refused"] > 0, run


# --------------------------------------------------------------------------
# Scripts and the environment
# --------------------------------------------------------------------------

def test_wrk_scripts_through_an_http_proxy(example, testd, tinyproxy):
    """wrk's scripts build origin-form requests (wrk.format): through an HTTP
    proxy volley sends each in absolute-form, the script unchanged."""
    srv, proxy = testd(), tinyproxy()
    ok(volley("-t1", "-c3", "-n", 200, "-s", example("counter"), "--proxy", proxy.url, srv.url))
    # A request sent behind a response on a connection the proxy closed
    # (tinyproxy keeps none) goes again as request() builds the next one:
    # the server saw 200 paths, none twice, each as the script made it.
    log = srv.log()
    paths = [r["target"] for r in log]
    assert len(paths) == len(set(paths)) == 200
    assert all(header(r, "X-Counter") == r["target"][1:] for r in log)
    assert sorted(r for r in proxy.requests() if r.startswith("GET")) == sorted(
        f"GET http://127.0.0.1:{srv.port}{p} HTTP/1.1" for p in paths)
    srv, proxy = testd(), tinyproxy()
    ok(volley("-t2", "-c4", "-d500ms", "-s", example("auth"), "--proxy", proxy.url, srv.url))
    check_auth_log(srv.log(), logins_at_most=4, resources_over=20)
    assert all(" http://127.0.0.1:" in r for r in proxy.requests() if not r.startswith("CONNECT"))


def test_proxy_env(nginx, tinyproxy, certs, tmp_path):
    """--proxy-env takes the proxy from the environment as curl does, and
    says so; without it the environment is not read."""
    srv, proxy = web(nginx, certs), tinyproxy()
    env = clean_env(HTTPS_PROXY=proxy.url, https_proxy="", NO_PROXY="", no_proxy="")
    run = volley("-t1", "-c2", "-n", 10, "--proxy-env", srv.url, env=env)
    ok(run)
    assert f"Note: --proxy-env: through {proxy.url} (HTTPS_PROXY)\n" in run.stderr
    run = volley("-t1", "-c2", "-n", 10, "--proxy-env", srv.url,
                 env=dict(env, NO_PROXY="example.com, 127.0.0.0/8"))
    ok(run)
    assert "Note: --proxy-env: not through a proxy (NO_PROXY lists 127.0.0.1)\n" in run.stderr
    ok(volley("-t1", "-c2", "-n", 10, srv.url, env=env))
    run = volley("-t1", "-c2", "-n", 10, "--proxy-env", srv.url,
                 env=dict(env, HTTPS_PROXY=""))
    assert "Note: --proxy-env: not through a proxy (HTTPS_PROXY is not set)\n" in run.stderr
    log = srv.log()
    assert [line.split()[0] for line in log] == [proxy.bind] * 10 + ["127.0.0.1"] * 30
    # 2 connections, and the two checks before the run: the way through, TLS
    assert len(proxy.connects()) == 2 + 2
    run = volley("--proxy-env", "http://127.0.0.1:1/",
                 env=clean_env(http_proxy="ftp://x", HTTP_PROXY=""))
    assert run.stderr.startswith("volley: invalid http_proxy 'ftp://x': unsupported proxy "
                                 "scheme (use http, socks5 or socks5h)\n"), run
