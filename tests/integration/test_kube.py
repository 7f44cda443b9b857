"""Kubernetes without a cluster: the manifests decoded strictly into
Kubernetes' own Go types (tests/kube/manifest_test.go, with k8s.io/api from
the Go module proxy), and scripts/volley-kube run against a stand-in kubectl
(tests/kube/kubectl) that runs the rendered pods as local processes with the
environment Kubernetes would give them, against nginx.
SPDX-License-Identifier: MIT
"""
import json
import os
import re
import subprocess
import sys

from conftest import ROOT, VOLLEY, parse_report
from gobuild import find_go

KUBE_DIR = os.path.join(ROOT, "tests", "kube")
VOLLEY_KUBE = os.path.join(ROOT, "scripts", "volley-kube")


def test_manifests_decode_strictly_into_kubernetes_job_types():
    go, why = find_go()
    assert go, why
    env = dict(os.environ, GOTOOLCHAIN="local", GOFLAGS="-mod=readonly")
    proc = subprocess.run([go, "test", "-count=1", "-v", "./..."], cwd=KUBE_DIR, env=env,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for name in ("TestShippedManifestDecodesStrictly", "TestRenderedManifestDecodesStrictly",
                 "TestAMisspeltFieldFailsTheDecode"):
        assert f"--- PASS: {name}" in proc.stdout, proc.stdout


def volley_kube(tmp_path, *args):
    """volley-kube with the stand-in kubectl and this tree's volley as the
    image's (first on PATH) and as the local one that merges."""
    state = os.path.join(tmp_path, "cluster")
    os.makedirs(state, exist_ok=True)
    env = dict(os.environ, KUBECTL=os.path.join(KUBE_DIR, "kubectl"), VOLLEY=VOLLEY,
               KUBECTL_STANDIN_DIR=state,
               PATH=os.path.dirname(VOLLEY) + os.pathsep + os.environ["PATH"])
    for key in ("VOLLEY_SHARD", "VOLLEY_SHARDS", "JOB_COMPLETION_INDEX"):
        env.pop(key, None)
    return subprocess.run([sys.executable, VOLLEY_KUBE] + [str(a) for a in args], env=env,
                          capture_output=True, text=True, timeout=120, cwd=tmp_path), state


def test_volley_kube_runs_the_shards_and_prints_the_merged_report(nginx, tmp_path):
    srv = nginx(server='location / { return 200 "ok"; }', log_format="$request_uri")
    script = tmp_path / "path.lua"
    script.write_text('wrk.path = "/from-the-configmap"\n')
    merged = os.path.join(tmp_path, "merged.json")
    proc, state = volley_kube(tmp_path, "run", "--shards", 3, "--start-in", 2, "--name", "load",
                              "--namespace", "bench", "--json", merged, "--", "-t1", "-c6",
                              "-n", 3000, "-s", script, srv.url + "/")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # The report of the whole, from volley merge.
    rep = parse_report(proc.stdout)
    assert rep["requests"] == 3000 and rep["connections"] == 6 and rep["threads"] == 3
    assert "  merged 3 of 3 shards, started within " in proc.stdout
    assert "volley-kube: job/load: 3 shards starting at " in proc.stderr
    # Every shard ran its share, with the index the Job controller gave it,
    # and the script from the ConfigMap.
    with open(merged) as f:
        doc = json.load(f)
    assert doc["requests"] == 3000
    assert [i["shard"] for i in doc["inputs"]] == [0, 1, 2]
    assert [i["requests"] for i in doc["inputs"]] == [1000] * 3
    assert sorted(os.listdir(os.path.join(tmp_path, "volley-kube-load"))) == \
        ["shard-0.json", "shard-1.json", "shard-2.json"]
    assert srv.log() == ["/from-the-configmap"] * 3000
    # The pods got the environment Kubernetes gives them, and nothing of ours.
    pods = sorted(os.listdir(os.path.join(state, "bench", "pods")))
    assert pods == ["load-0-standin", "load-1-standin", "load-2-standin"]

    proc, _ = volley_kube(tmp_path, "delete", "--name", "load", "--namespace", "bench")
    assert proc.returncode == 0, proc.stderr
    assert os.listdir(os.path.join(state, "bench", "pods")) == []
    assert os.listdir(os.path.join(state, "bench", "job")) == []
    assert os.listdir(os.path.join(state, "bench", "configmap")) == []


def test_volley_kube_checks_thresholds_on_the_merged_result(nginx, tmp_path):
    """A threshold is the whole run's: no shard fails on its share, volley
    merge gives the verdicts, and volley-kube exits 2 when one failed."""
    srv = nginx(server='location / { return 200 "ok"; }', log_format="$request_uri")
    merged = os.path.join(tmp_path, "merged.json")
    proc, _ = volley_kube(tmp_path, "run", "--shards", 2, "--start-in", 2, "--json", merged,
                          "--", "-t1", "-c2", "-n", 600, "--threshold", "requests >= 600",
                          "--threshold=p99 < 1us", srv.url + "/")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert parse_report(proc.stdout)["requests"] == 600
    assert "Threshold requests >= 600: passed (requests = 600)" in proc.stdout
    assert re.search(r"^Threshold p99 < 1us: FAILED \(p99 = [\d.]+(us|ms)\)$", proc.stdout,
                     re.M), proc.stdout
    with open(merged) as f:
        doc = json.load(f)
    assert [t["passed"] for t in doc["thresholds"]] == [True, False]
    # Each shard ran its share without them.
    for i in range(2):
        with open(os.path.join(tmp_path, "volley-kube-volley", f"shard-{i}.json")) as f:
            assert not json.load(f)["thresholds"]
    assert len(srv.log()) == 600


def test_volley_kube_merges_the_shards_timelines(nginx, tmp_path):
    """--timeline and --hdr-log among the volley options: each shard's
    timeline comes back through its log, and volley merge writes the whole
    run's, interval by interval."""
    srv = nginx(server='location / { return 200 "ok"; }', log_format="$request_uri")
    timeline, hdr_log = os.path.join(tmp_path, "all.jsonl"), os.path.join(tmp_path, "all.hlog")
    merged = os.path.join(tmp_path, "merged.json")
    proc, _ = volley_kube(tmp_path, "run", "--shards", 2, "--start-in", 2, "--json", merged,
                          "--", "-t1", "-c2", "-R", 400, "-d", "1500ms", "--interval", "500ms",
                          "--timeline", timeline, "--hdr-log=" + hdr_log, srv.url + "/")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert sorted(os.listdir(os.path.join(tmp_path, "volley-kube-volley"))) == \
        ["shard-0.json", "shard-0.jsonl", "shard-1.json", "shard-1.jsonl"]
    with open(merged) as f:
        doc = json.load(f)
    with open(timeline) as f:
        records = [json.loads(line) for line in f]
    assert records[0]["type"] == "run"
    intervals = records[1:]
    assert len(intervals) >= 3 and all(r["length_us"] == 500000 for r in intervals[:-1])
    assert sum(r["requests"] for r in intervals) == doc["requests"]
    # A request each connection had in flight when the run ended reached the
    # server but is not counted (docs/json.md): at most one per connection.
    assert doc["requests"] <= len(srv.log()) <= doc["requests"] + 2
    for i in range(2):
        with open(os.path.join(tmp_path, "volley-kube-volley", f"shard-{i}.jsonl")) as f:
            parts = [json.loads(line) for line in f][1:]
        with open(os.path.join(tmp_path, "volley-kube-volley", f"shard-{i}.json")) as f:
            assert sum(r["requests"] for r in parts) == json.load(f)["requests"]
    with open(hdr_log) as f:
        assert f.readline().startswith("#")


def test_volley_kube_says_which_shard_failed(tmp_path):
    proc, _ = volley_kube(tmp_path, "run", "--shards", 2, "--start-in", 1, "--", "-c2", "-d1s",
                          "http://127.0.0.1:9/")
    assert proc.returncode == 1
    lines = proc.stderr.splitlines()
    assert "volley-kube: shard 0 (pod volley-0-standin) failed: volley: unable to connect to " \
        "127.0.0.1:9: Connection refused" in lines
    assert lines[-1] == "volley-kube: 0 of 2 shards succeeded"


def test_volley_kube_refuses_options_it_sets_itself(tmp_path):
    proc, _ = volley_kube(tmp_path, "render", "--shards", 2, "--", "--json", "x.json",
                          "http://127.0.0.1/")
    assert proc.returncode == 1
    assert proc.stderr == "volley-kube: --json: volley-kube sets --json for every shard\n"
    for option in ("--abort-on-fail", "--abort-after=3"):
        proc, _ = volley_kube(tmp_path, "render", "--shards", 2, "--", "--threshold",
                              "p99<1s", option, "http://127.0.0.1/")
        assert proc.returncode == 1
        assert proc.stderr == f"volley-kube: {option}: each shard would stop on its own " \
            "share; volley-kube checks --threshold on the merged result\n"
    proc, _ = volley_kube(tmp_path, "run", "--", "http://127.0.0.1/")
    assert proc.returncode == 1 and "--shards N" in proc.stderr


def test_volley_kube_refuses_a_run_without_an_end(tmp_path):
    """-d 0 runs until Ctrl-C, which no pod gets: refused before anything is
    applied; with -n the run ends after its requests, as volley's does."""
    for duration in ("-d0", "--duration=inf"):
        proc, _ = volley_kube(tmp_path, "render", "--shards", 2, "--", duration,
                              "http://127.0.0.1/")
        assert proc.returncode == 1
        assert proc.stderr == "volley-kube: -d 0 runs until Ctrl-C, which no pod gets: give " \
            "the run a duration or -n\n"
    proc, _ = volley_kube(tmp_path, "render", "--shards", 2, "--", "-d0", "-n", 100,
                          "http://127.0.0.1/")
    assert proc.returncode == 0, proc.stderr
