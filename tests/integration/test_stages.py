"""Load over time: --stages (the open model with a moving target: the total a
ramp adds up to, interval by interval; stages at rate 0; shards keeping to
one profile), --ramp-up (connections opened in turn, shards in theirs) and
--warmup (left out of every figure, but the server sees it), each checked
against what the server counted; and the errors of those options.
SPDX-License-Identifier: MIT
"""
import json
import os
import subprocess
import time

import pytest

from conftest import TIME_FORM, VOLLEY, check_sanitizer, read_timeline, volley, volley_signalled
from test_multi import shards


def run_with_timeline(tmp_path, *args, interval="500ms"):
    """A run with --json and a JSON Lines --timeline: (run, document, intervals)."""
    out = os.path.join(tmp_path, "r.json")
    timeline = os.path.join(tmp_path, "t.jsonl")
    run = volley(*args, "--json", out, "--timeline", timeline, "--interval", interval)
    assert run.returncode == 0, run
    with open(out) as f:
        doc = json.load(f)
    return run, doc, read_timeline(timeline)[1]


def answered(seen, n, connections):
    """The server answered the n responses volley counted, and at most one
    more per connection (sent before the end, answered after it)."""
    return n <= seen["responses"] <= n + connections


def test_a_ramp_adds_up_to_its_area_rising_interval_by_interval(testd, tmp_path):
    # --stages 2s:2000: from 0 to 2000 requests/s over 2 s, 2000 in all,
    # 125, 375, 625 and 875 in the four half-seconds.
    srv = testd()
    run, doc, records = run_with_timeline(tmp_path, "-t2", "-c20", "--stages", "2s:2000",
                                          srv.url)
    seen = srv.stats()
    assert run.report["duration"] == "2s"
    assert 1900 <= doc["requests"] <= 2100
    assert answered(seen, doc["requests"], 20)
    sent = [r["sent_per_sec"] * r["length_us"] / 1e6 for r in records]
    assert len(records) == 4
    assert all(b > a + 100 for a, b in zip(sent, sent[1:])), sent
    for got, want in zip(sent, (125, 375, 625, 875)):
        assert abs(got - want) <= 60, sent
    assert sum(r["requests"] for r in records) == doc["requests"]
    assert doc["options"]["stages"] == [{"duration_us": 2000000, "rate": 2000}]
    assert doc["options"]["stages_from"] == 0
    assert doc["options"]["rate"] == 1000  # the mean target
    # the 2000 requests the ramp asked for, over the time the run took
    assert doc["rate"]["target"] == pytest.approx(2000e6 / doc["duration_us"])


@pytest.mark.parametrize("how", ["SIGINT", "abort"])
def test_a_ramp_cut_short_is_judged_on_what_it_asked(testd, tmp_path, how):
    # 10s:1000 asks for t^2 / 20 * 1000 requests in its first t seconds:
    # cut short, the run was asked their rate, not the whole ramp's mean of
    # 500/s, and sending them is no shortfall of the generator's.
    srv = testd()
    args = ["-t1", "-c10", "--stages", "10s:1000", "--json", "r.json", srv.url]
    if how == "SIGINT":
        run = volley_signalled(*args, after=2.0, cwd=tmp_path)
        assert run.returncode == 0, run
    else:
        run = volley("--abort-on-fail", "--threshold", "p99 < 1us", "--interval", "500ms",
                     *args, cwd=tmp_path)
        assert run.returncode == 2, run
    doc = json.loads((tmp_path / "r.json").read_text())
    t = doc["duration_us"] / 1e6
    assert doc["end"]["reason"] == ("interrupted" if how == "SIGINT" else "aborted")
    assert doc["rate"]["target"] == pytest.approx(t * t / 20 * 1000 / t, rel=0.01)
    assert doc["rate"]["target"] < 250
    # A busy machine may really fall short of it, in so short a run: then
    # the warning names what was asked, never the whole ramp's 500/s.
    assert "asked for" not in run.stderr or \
        f"short of the {doc['rate']['target']:.10g} asked for" in run.stderr, run
    assert answered(srv.stats(), doc["requests"], 10)


def test_stages_ramp_from_the_rate_before_them(testd, tmp_path):
    # 1s:1000,2s:1000: 500 up the ramp, then 2000 at 1000/s.
    srv = testd()
    run, doc, records = run_with_timeline(tmp_path, "-t2", "-c20", "--stages", "1s:1000,2s:1000",
                                          srv.url)
    assert run.report["duration"] == "3s"
    assert 2375 <= doc["requests"] <= 2625
    assert answered(srv.stats(), doc["requests"], 20)
    assert len(records) == 6
    flat = [r["requests"] for r in records[2:]]
    assert all(abs(n - 500) <= 50 for n in flat), flat
    assert records[0]["requests"] < records[1]["requests"] < min(flat)


def test_a_stage_at_rate_zero_sends_nothing(testd, tmp_path):
    # -R 400 to start from: 200 in the first half-second, then a step to 0
    # held for half a second, a step back up, and 200 more.
    srv = testd()
    _, doc, records = run_with_timeline(
        tmp_path, "-t1", "-c4", "-R", 400, "--stages", "500ms:400,0s:0,500ms:0,0s:400,500ms:400",
        srv.url, interval="250ms")
    assert 380 <= doc["requests"] <= 420
    assert answered(srv.stats(), doc["requests"], 4)
    sent = [round(r["sent_per_sec"] * r["length_us"] / 1e6) for r in records]
    assert len(sent) == 6
    assert sent[2] == sent[3] == 0, sent  # the pause
    assert min(sent[:2] + sent[4:]) >= 80, sent


def test_shards_keep_to_one_profile(testd, tmp_path):
    srv = testd()
    docs, _ = shards(2, ["-t1", "-c4", "--stages", "1s:1000"], srv.url, str(tmp_path),
                     start_in=0.5)
    seen = srv.stats()
    total = sum(d["requests"] for d in docs)
    assert 450 <= total <= 525 and answered(seen, total, 8)
    # each shard sends every other batch of four of the one profile
    assert all(abs(d["requests"] - total / 2) <= 0.1 * total / 2 for d in docs), \
        [d["requests"] for d in docs]


def test_warmup_is_left_out_but_the_server_sees_it(testd, tmp_path):
    srv = testd()
    run, doc, records = run_with_timeline(tmp_path, "-t2", "-c4", "-R", 200, "--warmup", "1s",
                                          "-d", "2s", srv.url, interval="1s")
    seen = srv.stats()
    warm = doc["warmup"]
    assert "  1s warm-up first, left out of the results" in run.stdout.splitlines()
    # The report covers the 2 s after it.
    assert run.report["duration"] == "2s"
    assert abs(run.report["runtime_us"] - 2e6) < 0.25e6
    assert abs(doc["duration_us"] - 2e6) < 0.25e6
    # 200/s: about 400 measured, 200 in the warm-up (a busy machine may miss a few)
    assert 340 <= doc["requests"] <= 420 and run.report["requests"] == doc["requests"]
    assert 170 <= warm["requests"] <= 210 and warm["duration_us"] == 1000000
    assert len(records) == 2 and sum(r["requests"] for r in records) == doc["requests"]
    assert doc["latency"]["count"] == doc["requests"]
    # The server answered both.
    assert answered(seen, warm["requests"] + doc["requests"], 4)
    assert warm["sent"] >= warm["requests"]
    assert warm["connects"] == 4 and doc["connects"] == 0


def test_warmup_in_the_closed_model(testd, tmp_path):
    srv = testd("--delay", 10)
    run, doc, _ = run_with_timeline(tmp_path, "-t1", "-c2", "--warmup", "500ms", "-d", "1s",
                                    srv.url)
    seen = srv.stats()
    warm = doc["warmup"]
    # 2 connections, 10 ms each: at most about 100 in the warm-up, 200 after
    assert 0 < warm["requests"] <= 102 and 0 < doc["requests"] <= 202
    assert answered(seen, warm["requests"] + doc["requests"], 2)
    assert doc["requests_per_sec"]["count"] > 0


def test_a_run_cut_short_in_its_warmup_writes_nothing(testd, tmp_path):
    # Nothing was measured: no report, no result, the files of an earlier
    # run left as they were; exit 1 (or the status os.exit() gave).
    srv = testd()
    out = tmp_path / "out"
    out.mkdir()
    (out / "exit.lua").write_text("n = 0\nfunction response() n = n + 1; "
                                  "if n == 50 then os.exit(7) end end\n")
    earlier = {"r.json": '{"earlier": "result"}\n', "t.jsonl": "an earlier timeline\n",
               "h.hlog": "an earlier log\n"}
    args = ["-t1", "-c2", "-d5s", "--warmup", "10s", "--json", "r.json", "--timeline",
            "t.jsonl", "--hdr-log", "h.hlog", srv.url]
    for how in ("SIGINT", "os.exit"):
        for name, text in earlier.items():
            (out / name).write_text(text)
        if how == "SIGINT":
            run = volley_signalled(*args, after=1.0, cwd=out)
            assert run.returncode == 1, run
            assert run.stderr == "volley: interrupted by SIGINT during the warm-up: nothing " \
                                 "was measured, no result written\n", run
        else:
            run = volley("-s", "exit.lua", *args, cwd=out)
            assert run.returncode == 7, run
            assert run.stderr == "volley: exit.lua:2: os.exit(7) in response(): the run was " \
                                 "stopped during the warm-up: nothing was measured\n", run
        assert "requests in" not in run.stdout, run
        assert all((out / n).read_text() == text for n, text in earlier.items())
        assert sorted(os.listdir(out)) == ["exit.lua", "h.hlog", "r.json", "t.jsonl"]
    assert srv.stats()["requests"] > 50


def test_ramp_up_opens_the_connections_in_turn(testd, tmp_path):
    # 8 connections over 800 ms: one every 100 ms, about two per 200 ms.
    srv = testd()
    _, doc, records = run_with_timeline(tmp_path, "-t2", "-c8", "--ramp-up", "800ms", "-d",
                                        "1200ms", srv.url, interval="200ms")
    seen = srv.stats()
    connects = [r["connects"] for r in records]
    assert sum(connects) == doc["connects"] == 8
    assert seen["connections"] in (8, 9)  # and the start-up probe
    assert connects[0] < 8 and connects[-1] == 0
    assert sum(1 for n in connects[:4] if n) >= 3, connects
    assert doc["options"]["ramp_up_us"] == 800000


def test_ramp_up_interleaves_shards(testd, tmp_path):
    # Over 1 s the run's 4 connections open at 0, 250, 500 and 750 ms, their
    # turns going round the shards: shard 0's at 0 and 500 ms, shard 1's at
    # 250 and 750 ms, so each opens one in its first 400 ms (numbered shard
    # after shard, shard 0 opened both of its there and shard 1 none).
    srv = testd()
    at = f"{time.time() + 0.5:.6f}"
    timelines = [os.path.join(tmp_path, f"t{i}.jsonl") for i in range(2)]
    procs = [subprocess.Popen([VOLLEY, "--shard", f"{i}/2", "--start-at", at, "-t1", "-c4",
                               "--ramp-up", "1s", "-d", "1200ms", "--interval", "200ms",
                               "--timeline", timelines[i], srv.url],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(2)]
    connects = []
    for p, path in zip(procs, timelines):
        _, err = p.communicate(timeout=30)
        check_sanitizer("volley shard", err)
        assert p.returncode == 0, err
        connects.append([r["connects"] for r in read_timeline(path)[1]])
    assert sum(connects[0]) == sum(connects[1]) == 2, connects
    assert connects[0][0] == 1 and sum(connects[0][:2]) == 1, connects
    assert connects[1][0] == 0 and sum(connects[1][:2]) == 1, connects
    assert srv.stats()["connections"] in (4, 5, 6)  # and each shard's start-up probe


@pytest.mark.parametrize("args,message", [
    (["--stages", "1s:100", "-d", "2s"],
     "--stages sets the duration (the sum of the stages): leave out -d"),
    (["--stages", "1s"], "invalid stages '1s': expected DURATION:RATE,..., as in 30s:1000,1m:1000"),
    (["--stages", "1s:100,x:5"],
     "invalid stages '1s:100,x:5': expected DURATION:RATE,..., as in 30s:1000,1m:1000"),
    (["--stages", "1s:100,"],
     "invalid stages '1s:100,': expected DURATION:RATE,..., as in 30s:1000,1m:1000"),
    (["--stages", "1s:100:5"],
     "invalid stages '1s:100:5': expected DURATION:RATE,..., as in 30s:1000,1m:1000"),
    (["--stages", "1s:0,2s:0"], "--stages: the stages send no request"),
    (["--stages", "0s:100"], "--stages: the stages last no time"),
    (["--ramp-up", "1s", "-R", "10"],
     "--ramp-up is the closed model's ramp: with -R, ramp the rate with --stages"),
    (["--warmup", "1s", "-n", "10"],
     "--warmup does not combine with -n (-n counts every request sent)"),
    (["--warmup", "1s", "--stages", "1s:10"],
     "--warmup with --stages needs -R: the rate to warm up at"),
    (["--warmup", "soon"], "invalid warm-up: 'soon'" + TIME_FORM),
    (["--ramp-up", "-1"], "invalid ramp-up: '-1'" + TIME_FORM),
    (["--ramp-up", "3s", "--warmup", "1s", "-d", "1s"],
     "--ramp-up is longer than the run: the last connections would never open"),
    (["--ramp-up", "11s"], "--ramp-up is longer than the run: the last connections would never open"),
])
def test_option_errors(testd, args, message):
    srv = testd()
    run = volley(*args, srv.url)
    assert run.returncode == 1
    assert run.stderr.splitlines()[0] == "volley: " + message
    assert srv.stats()["connections"] == 0
