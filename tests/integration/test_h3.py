"""volley --http3 against real HTTP/3 servers on 127.0.0.1: quic-go's
(tests/server/h3, logging every request whole) and aioquic's
(tests/server/h3peer.py), each counting what it answered; wrk's example
scripts over HTTP/3; a UDP relay that loses and reorders datagrams; a
server killed mid-run; and the hostile QUIC peer's every mode, each ending in
time and counted under its cause.
SPDX-License-Identifier: MIT
"""
import json
import os
import re
import signal
import socket
import subprocess
import time

import pytest

from conftest import VOLLEY, check_auth_log, header, ok, run_json, volley
from test_h2 import (causes, check_report_script, check_setup_script, socket_errors,
                     wrk_script)


def test_n_requests_reach_quic_go_exactly(go_h3, tmp_path):
    srv = go_h3()
    run, doc = run_json(tmp_path, "--http3", "-t2", "-c4", "-m8", "-n", "20000", srv.url + "/n")
    assert run.report["requests"] == 20000, run
    assert run.stdout.startswith(f"Running 20000 requests test @ {srv.url}/n over HTTP/3\n")
    log = srv.log()
    stats = srv.stats()
    assert len(log) == 20000 == stats["requests"]
    assert {(r["method"], r["target"], r["version"]) for r in log} == {("GET", "/n", "HTTP/3.0")}
    # four connections kept for the whole run, and the start-up check's
    assert len({r["conn"] for r in log}) == 4 and doc["connects"] == 4
    assert stats["connections"] == 5
    assert socket_errors(doc) == 0 and doc["status_codes"] == {"200": 20000}
    assert doc["options"]["protocol"] == "HTTP/3" and doc["options"]["streams"] == 8
    # QUIC's datagrams stay on epoll, whatever engine plain TCP would have
    assert doc["options"]["engine"] == "epoll" and "  engine: epoll\n" in run.stdout
    h3 = doc["http3"]
    assert h3["streams"] == 8 and h3["connections_measured"] == 4
    assert h3["packets_sent"] > 0 and h3["packets_received"] > 0
    assert h3["rtt_min_us"] > 0 and h3["rtt_smoothed_mean_us"] > 0 and h3["cwnd_mean_bytes"] > 0
    assert doc["tls"]["handshakes"] == 4


def test_n_requests_reach_aioquic_exactly(h3peer, tmp_path):
    srv = h3peer()
    run, doc = run_json(tmp_path, "--http3", "-t2", "-c4", "-m8", "-n", "20000", srv.url + "/a",
                        timeout=120)
    assert run.report["requests"] == 20000, run
    stats = srv.stats()
    assert stats["requests"] == stats["answered"] == 20000, stats
    assert socket_errors(doc) == 0 and doc["status_codes"] == {"200": 20000}
    assert stats["connections"] == 5  # and the start-up check


def test_server_stream_limit_caps_m_and_is_reported(go_h3, tmp_path):
    srv = go_h3("--max-streams", 8, "--delay", 5)
    run, doc = run_json(tmp_path, "--http3", "-t1", "-c2", "-m64", "-n", "2000", srv.url)
    assert run.report["requests"] == 2000
    stats = srv.stats()
    assert stats["requests"] == 2000 and stats["max_concurrent"] <= 8, stats
    assert doc["http3"]["streams"] == 8
    assert "-m 64 ran as -m 8" in run.stderr, run


def test_rate_is_held_over_http3(go_h3, tmp_path):
    srv = go_h3()
    run, doc = run_json(tmp_path, "--http3", "-R", "2000", "-c4", "-m8", "-d3s", srv.url)
    assert abs(doc["rate"]["sent"] - 2000) <= 20, doc["rate"]
    assert abs(doc["throughput"]["requests_per_sec"] - 2000) <= 20, doc["throughput"]
    assert socket_errors(doc) == 0
    n = len(srv.log())
    assert doc["requests"] <= n <= doc["requests"] + 4 * 8


def test_options_work_the_same_over_http3(go_h3, tmp_path):
    srv = go_h3()
    run, doc = run_json(tmp_path, "--http3", "-t1", "-c2", "-m4", "-d1s", "-R", "500", "-U",
                        "-H", "X-One: 1", "-H", "x-two: two words", srv.url + "/o")
    assert run.report["requests"] > 0 and socket_errors(doc) == 0
    assert "Latency Distribution (HdrHistogram - Recorded Latency)" in run.stdout
    assert doc["latency_uncorrected"]["count"] == doc["requests"]
    log = srv.log()
    assert all(header(r, "X-One") == "1" and header(r, "X-Two") == "two words" and
               header(r, "Connection") is None and r["target"] == "/o" for r in log)


def test_no_keepalive_over_http3(go_h3, tmp_path):
    srv = go_h3()
    run, doc = run_json(tmp_path, "--http3", "--no-keepalive", "-t1", "-c2", "-n", "50", srv.url)
    assert run.report["requests"] == 50 and socket_errors(doc) == 0
    log = srv.log()
    assert len(log) == 50 and len({r["conn"] for r in log}) == 50
    # every connection after a slot's first resumed its TLS session
    assert doc["tls"]["resumed"] >= 48 and srv.stats()["resumed"] >= 48


def test_0rtt_sends_requests_in_the_first_flight(go_h3, tmp_path):
    srv = go_h3()
    run, doc = run_json(tmp_path, "--http3", "--0rtt", "--no-keepalive", "-t1", "-c1", "-n",
                        "40", srv.url)
    assert run.report["requests"] == 40 and socket_errors(doc) == 0
    h3 = doc["http3"]
    stats = srv.stats()
    # the first connection has no ticket yet; the server takes 0-RTT after
    attempted, accepted = h3["early_data_attempted"], h3["early_data_accepted"]
    assert attempted >= 30 and accepted + h3["early_data_rejected"] == attempted, h3
    assert accepted == stats["used_0rtt"] > 0, (h3, stats)
    assert h3["early_data_requests"] >= accepted
    assert stats["requests"] == 40


def test_without_0rtt_no_early_data(go_h3, tmp_path):
    srv = go_h3()
    run, doc = run_json(tmp_path, "--http3", "--no-keepalive", "-t1", "-c1", "-n", "20", srv.url)
    assert doc["http3"]["early_data_attempted"] == 0 and srv.stats()["used_0rtt"] == 0


# --------------------------------------------------------------------------
# wrk's example scripts, unmodified, with quic-go's log of what it answered
# --------------------------------------------------------------------------

def test_wrk_post_over_http3(go_h3):
    srv = go_h3()
    # -n: no request is cut short by the end of the run, its body still on
    # the way (the server would log it without)
    ok(volley("--http3", "-t1", "-c2", "-m4", "-n200", "-s", wrk_script("post"),
              srv.url + "/form"))
    log = srv.log()
    assert len(log) == 200
    for r in log:
        assert (r["method"], r["target"], r["body"]) == ("POST", "/form", "foo=bar&baz=quux")
        assert header(r, "Content-Type") == "application/x-www-form-urlencoded"
        assert header(r, "Content-Length") == "16"
        assert r["version"] == "HTTP/3.0"


def test_wrk_auth_over_http3(go_h3):
    srv = go_h3()
    ok(volley("--http3", "-t2", "-c4", "-m2", "-d500ms", "-s", wrk_script("auth"), srv.url))
    check_auth_log(srv.log(), logins_at_most=8, resources_over=50)


def test_wrk_counter_over_http3(go_h3):
    srv = go_h3()
    run = ok(volley("--http3", "-t1", "-c1", "-m4", "-n200", "-s", wrk_script("counter"),
                    srv.url))
    log = srv.log()
    numbers = sorted(int(r["target"][1:]) for r in log)
    # /1 first (request() ran once before the run to check it), none twice,
    # none missing
    assert numbers == list(range(1, 201)), numbers[:10]
    assert all(header(r, "X-Counter") == r["target"][1:] for r in log)
    assert run.report["requests"] == len(log) == 200


def test_wrk_pipeline_over_http3_is_concurrent_streams(go_h3):
    srv = go_h3()
    ok(volley("--http3", "-t1", "-c2", "-m6", "-d300ms", "-s", wrk_script("pipeline"), srv.url))
    log = srv.log()
    counts = {}
    for r in log:
        counts[r["target"]] = counts.get(r["target"], 0) + 1
    assert set(counts) == {"/?foo", "/?bar", "/?baz"}, counts
    assert max(counts.values()) - min(counts.values()) <= 2 * 6, counts
    assert len({r["conn"] for r in log}) == 2


def test_wrk_report_over_http3(go_h3):
    srv = go_h3("--delay", 2)
    run = ok(volley("--http3", "-t1", "-c2", "-m2", "-d500ms", "--latency", "-s",
                    wrk_script("report"), srv.url))
    check_report_script(run)


def test_wrk_setup_over_http3(go_h3):
    srv = go_h3()
    run = ok(volley("--http3", "-t2", "-c3", "-m3", "-d500ms", "-s", wrk_script("setup"),
                    srv.url))
    made = check_setup_script(run)
    # everything request() made was sent, but the check before the run;
    # what was in flight when volley closed may not have been answered
    assert made - 1 - 9 <= srv.stats()["requests"] <= made - 1


def test_wrk_stop_over_http3(go_h3):
    srv = go_h3()
    run = ok(volley("--http3", "-t2", "-c4", "-m4", "-d20s", "-s", wrk_script("stop"), srv.url))
    assert run.report["requests"] == 200, run
    assert run.elapsed < 5, run
    assert 200 <= srv.stats()["requests"] <= 200 + 4 * 4


# --------------------------------------------------------------------------
# Loss, reordering, garbage, and a server that dies
# --------------------------------------------------------------------------

@pytest.mark.parametrize("path", [["--drop", "0.03", "--reorder", "0.05"],
                                  ["--drop", "0.03", "--reorder", "0.05", "--garbage", "0.05"]],
                         ids=["loss", "loss-and-garbage"])
def test_n_is_exact_through_a_lossy_path(go_h3, udp_relay, tmp_path, path):
    srv = go_h3()
    relay = udp_relay(srv.port, *path)
    # --timeout: a handshake whose packets are lost again and again is
    # still a handshake
    run, doc = run_json(tmp_path, "--http3", "-t2", "-c4", "-m8", "-n", "5000", "--timeout", "10s",
                        relay.url, timeout=120)
    assert run.report["requests"] == 5000, (run, causes(doc))
    assert socket_errors(doc) == 0, doc["errors"]
    lost = relay.stats()
    assert srv.stats()["requests"] == 5000
    assert lost["to_server"]["dropped"] > 0 and lost["to_client"]["dropped"] > 0, lost
    # volley sent again what it lost: packets of request streams declared
    # lost (counted once for each stream they carried; a packet held back
    # long enough is declared lost too)
    assert doc["http3"]["packets_lost"] > 0, doc["http3"]
    assert f"Note: QUIC declared {doc['http3']['packets_lost']} packets of requests lost and " \
           "sent them again\n" in run.stderr, run


def test_a_server_killed_mid_run_ends_the_run_with_every_request_counted_once(go_h3, tmp_path):
    srv = go_h3()
    path = os.path.join(tmp_path, "result.json")
    proc = subprocess.Popen([VOLLEY, "--http3", "-t2", "-c4", "-m8", "-R", "4000", "-n", "20000",
                             "--timeout", "1s", "--json", path, srv.url],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1.5)
    srv.proc.send_signal(signal.SIGKILL)
    srv.proc.wait()
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    with open(path) as f:
        doc = json.load(f)
    answered = len(srv.log(stop=False))
    # every request ended once: as a response or as one error (and a
    # connection the server's end found idle, one error of its own)
    assert 20000 <= doc["requests"] + socket_errors(doc) <= 20000 + 4, doc["errors"]
    assert 0 < doc["requests"] <= answered
    assert doc["errors"]["connect"] > 0 and doc["error_causes"]["refused"] > 0, doc["errors"]


# --------------------------------------------------------------------------
# Start-up
# --------------------------------------------------------------------------

def one_line(run, message):
    assert run.returncode == 1 and run.stdout == "", run
    assert run.stderr.splitlines()[0] == message, run


def test_nothing_listening_is_a_start_up_error(tmp_path):
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    run = volley("--http3", "-d1s", f"https://127.0.0.1:{port}/")
    one_line(run, f"volley: unable to connect to 127.0.0.1:{port} over HTTP/3: "
                  "Connection refused")


def test_a_server_without_alpn_h3_is_a_start_up_error(h3peer):
    srv = h3peer("no-alpn")
    run = volley("--http3", "-d1s", srv.url)
    one_line(run, f"volley: unable to connect to 127.0.0.1:{srv.port} over HTTP/3: TLS alert "
                  "120 (No supported application protocol could be negotiated): the server "
                  "does not speak HTTP/3 (ALPN h3)")


def test_verify_over_http3(go_h3, certs):
    srv = go_h3()
    run = volley("--http3", "--verify", "-d1s", srv.url)
    assert run.returncode == 1 and "certificate verification failed" in run.stderr, run
    assert "over HTTP/3" in run.stderr
    run = ok(volley("--http3", "--cacert", certs["server.pem"], "-c1", "-n", "10", srv.url))
    assert run.report["requests"] == 10
    run = volley("--http3", "--cacert", certs["server.pem"], "--sni", "other.test", "-d1s",
                 srv.url)
    assert run.returncode == 1 and "certificate verification failed" in run.stderr, run


@pytest.mark.parametrize("args,message", [
    (["--http3", "http://127.0.0.1:1/"], "--http3 needs an https URL: QUIC is always encrypted"),
    (["--http3", "--http2", "https://127.0.0.1:1/"], "--http2 and --http3 exclude each other"),
    (["--http2", "--http3", "https://127.0.0.1:1/"], "--http2 and --http3 exclude each other"),
    (["--http3", "--alpn", "h2", "https://127.0.0.1:1/"],
     "--alpn and --http3 exclude each other"),
    (["--alpn", "h3,h2", "https://127.0.0.1:1/"],
     "invalid --alpn 'h3,h2': h3 runs over QUIC, not TLS over TCP: give --http3"),
    (["--0rtt", "https://127.0.0.1:1/"], "--0rtt needs --http3"),
    (["--ecn", "https://127.0.0.1:1/"], "--ecn needs --http3"),
    (["--http3", "--unix-socket", "/tmp/x", "https://localhost/"],
     "--http3 runs over UDP: it does not combine with --unix-socket"),
    (["--http3", "--engine", "io_uring", "https://127.0.0.1:1/"],
     "--engine io_uring: HTTP/3 runs on epoll (QUIC's datagrams are read and written in "
     "batches of their own)"),
])
def test_http3_option_errors(args, message):
    run = volley(*args)
    assert run.returncode == 1 and run.stderr.splitlines()[0] == f"volley: {message}", run


# --------------------------------------------------------------------------
# The hostile peer: every case ends in time, counted under its cause
# --------------------------------------------------------------------------

HOSTILE = [
    # mode, peer options, volley options, the causes that may be counted
    ("stateless-reset", ["--after", "25"], ["-d1s"], {"stateless_reset"}),
    ("stateless-reset", ["--after", "25"], ["-n", "300"], {"stateless_reset"}),
    ("close", ["--after", "5"], ["-d1s"], {"connection_close"}),
    ("close", ["--after", "5", "--transport", "--code", "0xa"], ["-d1s"], {"connection_close"}),
    ("tiny-window", [], ["-d1s", "-s", "BIG_POST"], {"flow_control"}),
    ("max-streams-0", [], ["-d1s"], {"stream_limit"}),
    ("garbage", [], ["-d1s"], {"connect_timeout"}),
    ("version-negotiation", [], ["-d1s"], {"version_negotiation"}),
    ("no-alpn", ["--after", "1"], ["-d1s"], {"tls_handshake"}),
    ("reject", [], ["-n", "300"], {"refused_stream"}),
]


@pytest.mark.parametrize("mode,peer_options,options,allowed", HOSTILE,
                         ids=[f"{h[0]}{'-transport' if '--transport' in h[1] else ''}"
                              f"{'-n' if '-n' in h[2] else ''}" for h in HOSTILE])
def test_hostile_quic_peer(h3peer, tmp_path, mode, peer_options, options, allowed):
    srv = h3peer(mode, *peer_options)
    script = tmp_path / "big.lua"
    script.write_text('wrk.method = "POST"\nwrk.body = string.rep("x", 100000)\n')
    options = [str(script) if o == "BIG_POST" else o for o in options]
    # -R bounds the work of the peer (Python), whatever it answers.
    run, doc = run_json(tmp_path, "--http3", "-t1", "-c2", "-m4", "-R", "2000",
                        "--timeout", "500ms", *options, srv.url + "/h", timeout=30)
    stats = srv.stats()
    assert run.elapsed < 4, run
    found = causes(doc)
    # The peer is Python: on a loaded machine it can fall behind in
    # answering, or in completing a handshake, which is counted as such.
    late = {"response_timeout", "connect_timeout"} - allowed if "-d1s" in options else set()
    assert set(found) <= allowed | late, (found, run)
    assert set(found) - late == allowed, (found, run)
    n = doc["requests"]
    assert n <= stats["answered"], (n, stats)
    # the report's note has the causes too
    note = re.search(r"^Note: HTTP/3 errors by cause: (.*)$", run.stderr, re.M)
    assert note and note.group(1) == ", ".join(f"{c} {k}" for c, k in causes(doc).items()), run
    h3 = doc["http3"]
    if "-n" in options:
        # Every request ended, as a response or an error (a connection reset
        # while idle counts one error of its own).
        assert n < 300 <= n + socket_errors(doc), doc
    if mode == "stateless-reset":
        assert 0 < h3["stateless_resets"] <= stats["stateless_resets"], (h3, stats)
    if mode == "close":
        code = "PROTOCOL_VIOLATION" if "--transport" in peer_options else "H3_INTERNAL_ERROR"
        kind = "transport" if "--transport" in peer_options else "application"
        got = h3[f"connection_close_{kind}"]
        assert set(got) == {code} and 0 < got[code] <= stats["closes"], (h3, stats)
    if mode == "version-negotiation":
        assert 0 < h3["version_negotiations"] <= stats["version_negotiations"], (h3, stats)
    if mode == "no-alpn":
        assert set(h3["handshake_alerts"]) == {"120"}, h3
        # why, as over HTTPS
        failures = doc["tls"]["handshake_failures"]
        assert failures["no_application_protocol"] == found["tls_handshake"], failures
    if mode == "reject":
        # Sent again after a back-off, as over HTTP/2, then refused too often:
        # every request the server saw was refused, and the note says so.
        assert 0 < h3["refused"] <= stats["rejected"] == stats["requests"], (h3, stats)
        assert h3["refused"] - found["refused_stream"] > 0, (h3, found)
        assert re.search(r"^Note: HTTP/3: \d+ requests were refused unprocessed: \d+ sent again, "
                         r"\d+ refused too often \(read errors\)$", run.stderr, re.M), run
    if mode in ("tiny-window", "max-streams-0", "garbage", "version-negotiation", "no-alpn",
                "reject"):
        assert n == 0


def test_docs_json_names_every_http3_field(go_h3, tmp_path):
    from test_json import field_names
    with open(os.path.join(os.path.dirname(__file__), "..", "..", "docs", "json.md")) as f:
        doc_text = f.read()
    _, doc = run_json(tmp_path, "--http3", "--0rtt", "--ecn", "--no-keepalive", "-t1", "-c1", "-n", "5",
                      go_h3().url)
    assert doc["http3"]["ecn_received"]
    names = field_names(doc["http3"], skip=("stream_reset_received", "handshake_alerts",
                                            "connection_close_transport",
                                            "connection_close_application", "ecn_received"))
    missing = sorted(n for n in names if f"`{n}`" not in doc_text)
    assert not missing, f"fields docs/json.md does not name: {missing}"


def test_ecn_is_off_unless_asked_for(go_h3, udp_relay, tmp_path):
    srv = go_h3()
    for ecn in ([], ["--ecn"]):
        relay = udp_relay(srv.port)
        _, doc = run_json(tmp_path, "--http3", *ecn, "-t1", "-c2", "-n", "500", relay.url)
        marked = relay.stats()["to_server"]["ecn_marked"]
        if ecn:
            # ngtcp2 marks its first packets ECT(0) to validate the path; the
            # relay sends on unmarked, so validation fails and marking stops
            assert marked > 0 and doc["http3"]["ecn_received"]["not_ect"] > 0, doc["http3"]
        else:
            assert marked == 0 and doc["http3"]["ecn_received"] == {}, doc["http3"]
    # straight to quic-go, which marks its packets ECT(0): volley reads the marks
    _, doc = run_json(tmp_path, "--http3", "--ecn", "-t1", "-c2", "-n", "500", srv.url)
    assert doc["http3"]["ecn_received"]["ect0"] > 0, doc["http3"]


def test_shards_of_an_http3_run_merge(go_h3, tmp_path):
    from test_multi import merge, one_line_error, shards
    srv = go_h3("--max-streams", 4)
    docs, files = shards(2, ["--http3", "-t1", "-c2", "-m8", "-n", "2000"], srv.url, tmp_path)
    out = tmp_path / "merged.json"
    run = merge("--json", out, *files)
    with open(out) as f:
        whole = json.load(f)
    assert whole["requests"] == 2000 == len(srv.log())
    assert run.stdout.startswith(f"Running 2000 requests test @ {srv.url} over HTTP/3\n"), run
    assert whole["options"]["protocol"] == "HTTP/3" and whole["options"]["streams"] == 8
    h3 = whole["http3"]
    assert h3["streams"] == 4 and "-m 8 ran as -m 4" in run.stdout + run.stderr
    for key in ("packets_sent", "packets_received", "connections_measured", "refused"):
        assert h3[key] == sum(d["http3"][key] for d in docs), key
    assert h3["rtt_min_us"] == min(d["http3"]["rtt_min_us"] for d in docs)
    mean = sum(d["http3"]["rtt_smoothed_mean_us"] * d["http3"]["connections_measured"]
               for d in docs) / h3["connections_measured"]
    assert h3["rtt_smoothed_mean_us"] == pytest.approx(mean, rel=1e-6)
    # the same shard over HTTP/2 is not a part of it
    h2 = dict(docs[1], http3=None,
              options=dict(docs[1]["options"], protocol="HTTP/2", alpn=["h2"]))
    other = tmp_path / "h2.json"
    other.write_text(json.dumps(h2))
    one_line_error(volley("merge", files[0], other),
                   f"{files[0]} over HTTP/3 and {other} over HTTP/2 cannot be one run")


def test_timeline_over_http3(go_h3, tmp_path):
    srv = go_h3()
    timeline = tmp_path / "t.jsonl"
    _, doc = run_json(tmp_path, "--http3", "-t1", "-c2", "-m4", "-R", "400", "-d1500ms",
                      "--interval", "500ms", "--timeline", timeline, srv.url)
    records = [json.loads(line) for line in timeline.read_text().splitlines()]
    intervals = [r for r in records if r.get("type") == "interval"]
    assert len(intervals) == 3, records
    assert sum(r["requests"] for r in intervals) == doc["requests"] > 0
    assert records[0]["type"] == "run" and records[0]["url"] == srv.url, records[0]
