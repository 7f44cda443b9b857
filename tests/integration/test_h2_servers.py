"""The HTTP/2 servers volley's HTTP/2 tests run against, proven with clients
that are not volley: Debian's h2load and curl against nginx (h2c and TLS),
nghttpd and the Go h2c server, each counting exactly what was sent; and the
hostile peer's every mode sending the frames it claims, read with the tests'
own frame reader (tests/h2frames.py) and, where a real client shows it
better, with curl.
SPDX-License-Identifier: MIT
"""
import os
import re
import shutil
import socket
import subprocess

import pytest

import h2frames as h2
import hpack

H2LOAD = shutil.which("h2load") or "/usr/bin/h2load"


def h2load(url, n=1000, clients=4, streams=8):
    """Runs h2load; returns its count of succeeded requests, after checking
    it spoke HTTP/2 and every request completed with 2xx."""
    p = subprocess.run([H2LOAD, "-n", str(n), "-c", str(clients), "-m", str(streams), url],
                       capture_output=True, text=True, timeout=60)
    out = p.stdout + p.stderr
    assert p.returncode == 0, out
    assert re.search(r"^Application protocol: h2c?$", out, re.M), out
    m = re.search(r"^requests: (\d+) total, \d+ started, (\d+) done, (\d+) succeeded, "
                  r"(\d+) failed", out, re.M)
    assert m, out
    assert re.search(rf"^status codes: {n} 2xx,", out, re.M), out
    return int(m.group(3))


def curl(url, *args):
    """curl's exit status, the HTTP version it used ("2", "1.1"; "0" when it
    got no response) and the body."""
    p = subprocess.run(["curl", "-sk", "--max-time", "5", "-w", "\\n%{http_version}", *args, url],
                       capture_output=True, text=True, timeout=30)
    body, _, version = p.stdout.rpartition("\n")
    return p.returncode, version, body


def settings_of(port):
    """The server's first SETTINGS frame, as {parameter: value}."""
    frames, _ = h2.client_exchange(port, requests=0, duration=1.0, until=lambda f: True)
    assert frames and frames[0].type == h2.SETTINGS and not frames[0].flags & h2.ACK, frames
    return frames[0].settings()


def port_of(url):
    return int(url.rsplit(":", 1)[1].split("/")[0])


# --------------------------------------------------------------------------
# nginx
# --------------------------------------------------------------------------

@pytest.mark.parametrize("tls", [False, True], ids=["h2c", "tls"])
def test_nginx_serves_http2_and_logs_the_protocol(nginx_h2, tls):
    server = nginx_h2(tls=tls)
    assert h2load(server.url + "/load") == 1000
    flag = "--http2" if tls else "--http2-prior-knowledge"
    assert curl(server.url + "/curl", flag) == (0, "2", "Hello world\n")
    log = [line.split() for line in server.log()]
    assert len(log) == 1001
    assert all(f[0] == "HTTP/2.0" and f[1] == "GET" for f in log), log[:3]
    assert sum(f[2] == "/load" for f in log) == 1000
    assert len({f[3] for f in log}) == 5  # h2load's 4 connections and curl's


def test_nginx_h2c_refuses_http11(nginx_h2):
    server = nginx_h2()
    status, version, _ = curl(server.url + "/", "--http1.1")
    assert status != 0 or version != "1.1"
    assert server.log() == []


def test_nginx_max_concurrent_streams_knob(nginx_h2):
    assert settings_of(port_of(nginx_h2(max_streams=8).url))[h2.MAX_CONCURRENT_STREAMS] == 8
    assert settings_of(port_of(nginx_h2().url))[h2.MAX_CONCURRENT_STREAMS] == 128


# --------------------------------------------------------------------------
# nghttpd
# --------------------------------------------------------------------------

@pytest.mark.parametrize("tls", [False, True], ids=["h2c", "tls"])
def test_nghttpd_serves_http2_and_records_requests(nghttpd, tls):
    server = nghttpd(tls=tls)
    assert h2load(server.url + "/index.html", n=500, clients=2) == 500
    flag = "--http2" if tls else "--http2-prior-knowledge"
    assert curl(server.url + "/index.html?curl", flag) == (0, "2", "Hello world\n")
    reqs = server.requests()
    assert len(reqs) == 501
    assert sum(r["path"] == "/index.html" for r in reqs) == 500
    assert all(r["method"] == "GET" for r in reqs)
    assert len({r["conn"] for r in reqs}) == 3


def test_nghttpd_max_concurrent_streams_knob(nghttpd):
    assert settings_of(port_of(nghttpd(max_streams=4).url))[h2.MAX_CONCURRENT_STREAMS] == 4


# --------------------------------------------------------------------------
# Go's net/http (h2c with prior knowledge only)
# --------------------------------------------------------------------------

def test_go_h2c_serves_and_counts(go_h2c):
    server = go_h2c()
    assert h2load(server.url + "/load") == 1000
    assert curl(server.url + "/curl?x", "--http2-prior-knowledge", "-d", "hello") == \
        (0, "2", "Hello world\n")
    status, version, _ = curl(server.url + "/h1", "--http1.1")
    assert status != 0 or version != "1.1"  # HTTP/2 only
    stats = server.stats()
    assert stats["requests"] == 1001
    assert stats["protocols"] == {"HTTP/2.0": 1001}
    assert stats["paths"] == {"/load": 1000, "/curl": 1}
    assert stats["methods"] == {"GET": 1000, "POST": 1}
    assert stats["body_bytes_in"] == 5
    # h2load's 4 connections share its 1000 requests; curl's has one.
    per_conn = [n for n in stats["streams_per_connection"] if n]
    assert sorted(per_conn) == [1, 250, 250, 250, 250], stats
    assert 1 < stats["max_concurrent"] <= 8


def test_go_h2c_max_concurrent_streams_knob(go_h2c):
    server = go_h2c(max_streams=8)
    assert settings_of(server.port)[h2.MAX_CONCURRENT_STREAMS] == 8
    assert h2load(server.url + "/", n=200, clients=1, streams=8) == 200
    assert server.stats()["max_concurrent"] <= 8


# --------------------------------------------------------------------------
# The hostile peer
# --------------------------------------------------------------------------

def responses(frames):
    """Stream ids whose response ended (END_STREAM on HEADERS or DATA)."""
    return [f.stream_id for f in frames
            if f.type in (h2.HEADERS, h2.DATA) and f.flags & h2.END_STREAM]


def ends_stream(f):
    """Whether frame f ends its stream: the end of a response, or a reset."""
    return (f.type in (h2.HEADERS, h2.DATA) and bool(f.flags & h2.END_STREAM)) or \
        f.type == h2.RST_STREAM


def after(n, pred):
    """client_exchange's until: true at the nth frame pred is true of."""
    seen = [0]

    def until(f):
        seen[0] += bool(pred(f))
        return seen[0] >= n
    return until


def test_peer_normal_mode_is_a_working_server(h2peer):
    server = h2peer()
    assert h2load(server.url + "/load") == 1000
    assert curl(server.url + "/curl", "--http2-prior-knowledge") == (0, "2", "Hello world\n")
    stats = server.stats()
    assert stats["requests"] == stats["answered"] == 1001
    assert stats["paths"] == {"/load": 1000, "/curl": 1}
    assert sorted(stats["streams_per_connection"]) == [1, 250, 250, 250, 250]
    # h2load's four ACKs came before their requests; curl's may come after its answer.
    assert stats["settings_acks_received"] >= 4
    assert stats["rst_sent"] == {} and stats["goaway_sent"] == 0


def test_peer_goaway_after_n_requests(h2peer):
    server = h2peer("goaway", "--after", 3)
    frames, closed = h2.client_exchange(server.port, requests=5, duration=2)
    goaways = [f.goaway() for f in frames if f.type == h2.GOAWAY]
    assert goaways == [(5, 0)]  # last stream id 5 (the third request), NO_ERROR
    assert responses(frames) == [1, 3, 5]
    assert closed
    stats = server.stats()
    assert stats["requests"] == 5 and stats["answered"] == 3
    assert stats["requests_after_goaway"] == 2 and stats["goaway_sent"] == 1


@pytest.mark.parametrize("code", ["REFUSED_STREAM", "CANCEL", "INTERNAL_ERROR"])
def test_peer_rst_storm_by_error_code(h2peer, code):
    server = h2peer("rst", "--code", code)
    frames, _ = h2.client_exchange(server.port, requests=20, until=after(20, ends_stream))
    rsts = [(f.stream_id, h2.error_name(f.error_code())) for f in frames
            if f.type == h2.RST_STREAM]
    assert rsts == [(1 + 2 * i, code) for i in range(20)]
    assert responses(frames) == []
    assert server.stats()["rst_sent"] == {code: 20}


def test_peer_rst_every_other_request(h2peer):
    server = h2peer("rst", "--every", 2, "--code", "REFUSED_STREAM")
    frames, _ = h2.client_exchange(server.port, requests=4, until=after(4, ends_stream))
    assert [f.stream_id for f in frames if f.type == h2.RST_STREAM] == [3, 7]
    assert responses(frames) == [1, 5]


def test_peer_zero_window_blocks_request_bodies(h2peer, tmp_path):
    server = h2peer("zero-window")
    assert settings_of(server.port)[h2.INITIAL_WINDOW_SIZE] == 0
    assert curl(server.url + "/get", "--http2-prior-knowledge") == (0, "2", "Hello world\n")
    # Before the SETTINGS arrive a client may send 65,535 bytes of body; the
    # rest never gets a window.
    upload = tmp_path / "body"
    upload.write_bytes(b"x" * 200000)
    status, _, _ = curl(server.url + "/post", "--http2-prior-knowledge", "--max-time", "1",
                        "--data-binary", f"@{upload}")
    assert status == 28  # curl's time-out
    stats = server.stats()
    assert stats["paths"] == {"/get": 1, "/post": 1}
    assert stats["data_bytes_in"] <= 65535 and stats["answered"] == 1
    assert "WINDOW_UPDATE" not in stats["frames_sent"]


def test_peer_max_concurrent_streams_zero(h2peer):
    server = h2peer("max-streams-0")
    frames, _ = h2.client_exchange(server.port, requests=2, until=after(2, ends_stream))
    assert frames[0].settings() == {h2.MAX_CONCURRENT_STREAMS: 0}
    assert [(f.stream_id, f.error_code()) for f in frames if f.type == h2.RST_STREAM] == \
        [(1, 7), (3, 7)]  # REFUSED_STREAM
    assert responses(frames) == []


def test_peer_never_acknowledges_settings(h2peer):
    server = h2peer("no-settings-ack")
    frames, _ = h2.client_exchange(server.port, requests=3, duration=0.5)
    # Waited for: an ACK would come before the answers, or a moment after.
    assert [f for f in frames if f.type == h2.SETTINGS and f.flags & h2.ACK] == []
    assert responses(frames) == [1, 3, 5]
    stats = server.stats()
    assert stats["frames_received"]["SETTINGS"] == 2  # the client's, and its ACK of ours
    assert stats["frames_sent"]["SETTINGS"] == 1


def test_peer_ping_flood(h2peer):
    server = h2peer("ping-flood", "--count", 5000)
    frames, _ = h2.client_exchange(server.port, requests=1, duration=2,
                                   until=after(5001, lambda f: f.type == h2.PING or
                                               ends_stream(f)))
    pings = [f for f in frames if f.type == h2.PING]
    assert len(pings) == 5000
    assert all(not f.flags & h2.ACK and f.payload == b"flooding" for f in pings)
    assert responses(frames) == [1]
    assert server.stats()["frames_sent"]["PING"] == 5000


def test_peer_continuation_flood(h2peer):
    server = h2peer("continuation-flood", "--count", 3000)
    frames, _ = h2.client_exchange(server.port, requests=1, duration=2,
                                   until=after(3000, lambda f: f.type == h2.CONTINUATION))
    assert frames[0].type == h2.SETTINGS
    headers = [f for f in frames if f.type == h2.HEADERS]
    conts = [f for f in frames if f.type == h2.CONTINUATION]
    assert len(headers) == 1 and not headers[0].flags & h2.END_HEADERS
    assert len(conts) == 3000
    assert all(f.stream_id == 1 and not f.flags & h2.END_HEADERS for f in conts)
    # nghttp2 (in curl) gives up on a header block that never ends.
    status, version, _ = curl(server.url + "/", "--http2-prior-knowledge", "--max-time", "2")
    assert status != 0 and version == "0"


def h2load_failures(url, n):
    """h2load's counts of (succeeded, failed, errored) requests out of n."""
    p = subprocess.run([H2LOAD, "-n", str(n), "-c", "1", url], capture_output=True, text=True,
                       timeout=60)
    m = re.search(rf"^requests: {n} total, \d+ started, \d+ done, (\d+) succeeded, (\d+) "
                  r"failed, (\d+) errored", p.stdout, re.M)
    assert m, p.stdout + p.stderr
    return tuple(int(x) for x in m.groups())


def test_peer_goaway_at_start(h2peer):
    server = h2peer("goaway-at-start")
    frames, closed = h2.client_exchange(server.port, requests=2, duration=2)
    assert [f.type for f in frames][:2] == [h2.SETTINGS, h2.GOAWAY], frames
    assert frames[1].goaway() == (0, 0)  # no stream processed, NO_ERROR
    assert responses(frames) == [] and closed
    # h2load: every request fails, and the run ends
    assert h2load_failures(server.url + "/", 20) == (0, 20, 20)
    stats = server.stats()
    assert stats["answered"] == 0 and stats["goaway_sent"] == stats["connections"]


def test_peer_hpack_bomb(h2peer):
    server = h2peer("hpack-bomb", "--count", 1000, "--hold", 2)
    frames, _ = h2.client_exchange(server.port, requests=2, until=after(2, ends_stream))
    blocks = {}
    for f in frames:
        if f.type in (h2.HEADERS, h2.CONTINUATION):
            blocks[f.stream_id] = blocks.get(f.stream_id, b"") + f.header_block()
    decoder = hpack.Decoder()
    decoder.max_header_list_size = 1 << 30
    for stream_id in (1, 3):
        fields = decoder.decode(blocks[stream_id])
        # 4 KB on the wire, 4 MB decoded
        assert len(blocks[stream_id]) < 6000 and len(fields) == 1002
        assert fields[0] == (":status", "200")
        assert set(fields[1:]) == {("x-bomb", "a" * 4000)}
    # each stream's DATA waited for the second header block
    kinds = [(f.type, f.stream_id) for f in frames if f.type in (h2.HEADERS, h2.DATA)]
    assert kinds == [(h2.HEADERS, 1), (h2.HEADERS, 3), (h2.DATA, 1), (h2.DATA, 3)], kinds
    assert server.stats()["answered"] == 2


def test_peer_big_body(h2peer):
    server = h2peer("big-body", "--body-size", 100000)
    frames, _ = h2.client_exchange(server.port, requests=1, until=ends_stream)
    data = [f for f in frames if f.type == h2.DATA]
    assert sum(len(f.payload) for f in data) == 100000
    assert data[-1].flags & h2.END_STREAM and max(len(f.payload) for f in data) == 16384
    assert curl(server.url + "/", "--http2-prior-knowledge")[:2] == (0, "2")


@pytest.mark.parametrize("kind", ["cl-more", "cl-less", "body-204", "pseudo-after-regular",
                                  "uppercase-name", "connection-field", "te", "status-101",
                                  "trailers-pseudo", "interim-data"])
def test_peer_malformed_responses_fail_in_curl_and_h2load(h2peer, kind):
    # nghttp2's HTTP messaging checks, which curl and h2load keep on, reject
    # every one (curl's 92: an HTTP/2 stream error).
    server = h2peer("malformed", "--kind", kind)
    assert curl(server.url + "/", "--http2-prior-knowledge")[0] == 92
    assert h2load_failures(server.url + "/", 5) == (0, 5, 5)
    stats = server.stats()
    assert stats["requests"] == stats["answered"] == 6


def test_peer_garbage_after_the_preface(h2peer):
    server = h2peer("garbage")
    with socket.create_connection(("127.0.0.1", server.port), timeout=2) as s:
        s.sendall(h2.PREFACE + h2.settings())
        data = b""
        while len(data) < 64:
            data += s.recv(4096)
    assert data.startswith(bytes(range(64)))
    status, version, _ = curl(server.url + "/", "--http2-prior-knowledge")
    assert status != 0 and version == "0"
    assert server.stats()["connections"] == 2


def test_peer_refuses_a_client_without_the_preface(h2peer):
    server = h2peer()
    status, _, _ = curl(server.url + "/", "--http1.1")
    assert status != 0
    assert server.stats()["bad_prefaces"] == 1
    assert os.path.exists(server.stats_file)
