"""Kubernetes without a cluster: the manifests decoded strictly into
Kubernetes' own Go types (tests/kube/manifest_test.go, with k8s.io/api from
the Go module proxy), and scripts/volley-kube run against a stand-in kubectl
(tests/kube/kubectl) that runs the rendered pods as local processes with the
environment Kubernetes would give them, against nginx, with what a real
cluster does to them: logs of two streams in any order, admission, a node of
so many CPUs, events. make check-kube does the same on a real cluster.
SPDX-License-Identifier: MIT
"""
import glob
import json
import os
import re
import subprocess
import sys
import time

from conftest import ROOT, VOLLEY, parse_report, read_timeline
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
                 "TestShippedManifestRunsWhatRenderRenders", "TestAMisspeltFieldFailsTheDecode"):
        assert f"--- PASS: {name}" in proc.stdout, proc.stdout


def standin_env(tmp_path, **cluster):
    """The environment of volley-kube with the stand-in kubectl (its state
    in tmp_path/cluster; cluster: KUBECTL_STANDIN_* settings) and this tree's
    volley as the image's (first on PATH) and as the local one that merges."""
    state = os.path.join(tmp_path, "cluster")
    os.makedirs(state, exist_ok=True)
    env = dict(os.environ, KUBECTL=os.path.join(KUBE_DIR, "kubectl"), VOLLEY=VOLLEY,
               KUBECTL_STANDIN_DIR=state,
               PATH=os.path.dirname(VOLLEY) + os.pathsep + os.environ["PATH"])
    for key in ("VOLLEY_SHARD", "VOLLEY_SHARDS", "JOB_COMPLETION_INDEX"):
        env.pop(key, None)
    env.update({f"KUBECTL_STANDIN_{k.upper()}": str(v) for k, v in cluster.items()})
    return env, state


def volley_kube(tmp_path, *args, cluster=None, stdin=None):
    env, state = standin_env(tmp_path, **(cluster or {}))
    return subprocess.run([sys.executable, VOLLEY_KUBE] + [str(a) for a in args], env=env,
                          input=stdin, capture_output=True, text=True, timeout=120,
                          cwd=tmp_path), state


def pod_logs(state, namespace="default"):
    """{pod: its log} of the stand-in's pods."""
    out = {}
    for path in sorted(glob.glob(os.path.join(state, namespace, "pods", "*", "log"))):
        with open(path) as f:
            out[os.path.basename(os.path.dirname(path))] = f.read()
    return out


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
    assert "volley-kube: job/load: 3 shards running, starting at " in proc.stderr
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
    assert [re.sub(r"-\w{5}$", "", p) for p in pods] == ["load-0", "load-1", "load-2"]

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
    _, intervals = read_timeline(timeline)
    assert len(intervals) >= 3 and all(r["length_us"] == 500000 for r in intervals[:-1])
    assert sum(r["requests"] for r in intervals) == doc["requests"]
    # A request each connection had in flight when the run ended reached the
    # server but is not counted (docs/json.md): at most one per connection.
    assert doc["requests"] <= len(srv.log()) <= doc["requests"] + 2
    for i in range(2):
        _, parts = read_timeline(os.path.join(tmp_path, "volley-kube-volley", f"shard-{i}.jsonl"))
        with open(os.path.join(tmp_path, "volley-kube-volley", f"shard-{i}.json")) as f:
            assert sum(r["requests"] for r in parts) == json.load(f)["requests"]
    with open(hdr_log) as f:
        assert f.readline().startswith("#")


def test_volley_kube_says_which_shard_failed(tmp_path):
    proc, _ = volley_kube(tmp_path, "run", "--shards", 2, "--start-in", 1, "--", "-c2", "-d1s",
                          "http://127.0.0.1:9/")
    assert proc.returncode == 1
    lines = proc.stderr.splitlines()
    assert any(re.fullmatch(r"volley-kube: shard 0 \(pod volley-0-\w{5}\) failed: volley: "
                            r"unable to connect to 127\.0\.0\.1:9: Connection refused", line)
               for line in lines), lines
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


def test_results_come_back_whole_through_a_log_of_two_streams(nginx, tmp_path):
    """The kubelet writes a pod's stdout and stderr into its log line by line
    from two pipes, in no kept order (the stand-in puts what the container
    wrote on stderr after the next read of stdout, as a kubelet was seen to:
    a JSON result of more than 4096 bytes cut out of the log from a line "{"
    to a line "}" then held the text report). Each shard's result and
    timeline travel framed and checksummed, so the other stream's lines that
    land among them do no harm. The timeline's 100 intervals make each
    pod's frames far longer than the 4096 bytes the noise waits for, so the
    noise lands among them however the two pipes are read."""
    srv = nginx(server='location / { return 200 "ok"; }', log_format="$request_uri")
    script = tmp_path / "noisy.lua"
    script.write_text('function done() for i = 1, 300 do io.stderr:write("noise ", i, "\\n") end '
                      'end\n')
    merged = os.path.join(tmp_path, "merged.json")
    proc, state = volley_kube(tmp_path, "run", "--shards", 3, "--start-in", 1, "--json", merged,
                              "--", "-t1", "-c3", "-R", 900, "-d1s", "-s", script,
                              "--interval", "10ms",
                              "--timeline", os.path.join(tmp_path, "all.jsonl"), srv.url + "/")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with open(merged) as f:
        requests = json.load(f)["requests"]
    assert requests <= len(srv.log()) <= requests + 3  # in flight at the end: one a connection
    for i in range(3):
        with open(os.path.join(tmp_path, "volley-kube-volley", f"shard-{i}.json"), "rb") as f:
            assert len(f.read()) > 4096
    # The other stream's lines did land among the frames.
    for log in pod_logs(state).values():
        lines = log.splitlines()
        framed = [i for i, line in enumerate(lines) if line.startswith("@volley ")]
        noise = [i for i, line in enumerate(lines) if line.startswith("noise ")]
        assert len(noise) == 300 and framed[0] < noise[0] < framed[-1], log[:2000]


def test_a_result_cut_short_is_refused_and_named_with_its_pod(nginx, tmp_path):
    """A log the kubelet rotated (containerLogMaxSize) keeps only its end:
    the result's first lines are lost, its checksum says so, and the shard
    is named with its pod instead of merged."""
    srv = nginx(server='location / { return 200 "ok"; }')
    proc, state = volley_kube(tmp_path, "run", "--shards", 2, "--start-in", 1, "--", "-t1",
                              "-c2", "-n", 200, "--latency", srv.url + "/",
                              cluster={"log_max_bytes": 1500})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = proc.stderr.splitlines()
    for i in range(2):
        assert any(re.fullmatch(rf"volley-kube: shard {i} \(pod volley-{i}-\w{{5}}\): its result "
                                r"did not come back whole: result\.json: .+", line)
                   for line in lines), lines
    assert lines[-1] == "volley-kube: 0 of 2 shards succeeded"


def test_no_shard_starts_until_every_pod_runs(nginx, tmp_path):
    """Three shards of one CPU on a node of two: the third cannot be
    scheduled, volley-kube says so in one line with the scheduler's reason
    as soon as it sees it, deletes the Job, and the two pods that ran never
    started the load."""
    srv = nginx(server='location / { return 200 "ok"; }')
    began = time.monotonic()
    proc, state = volley_kube(tmp_path, "run", "--shards", 3, "--cpu", 1, "--timeout", 100,
                              "--", "-c3", "-d2s", srv.url + "/", cluster={"cpus": 2})
    assert proc.returncode == 1
    assert re.fullmatch(r"volley-kube: shard 2 \(pod volley-2-\w{5}\) cannot run: Unschedulable: "
                        r"0/1 nodes are available: 1 Insufficient cpu\. .*; job/volley "
                        r"deleted\n", proc.stderr), proc.stderr
    assert time.monotonic() - began < 60  # not the --timeout
    assert srv.log() == []
    assert os.listdir(os.path.join(state, "default", "pods")) == []


def test_the_job_passes_pod_security_restricted(nginx, tmp_path):
    """In a namespace that enforces the "restricted" Pod Security Standard
    the pods are admitted and the run completes; a pod spec that breaks it is
    refused, and volley-kube gives the admission's reason at once."""
    srv = nginx(server='location / { return 200 "ok"; }')
    proc, _ = volley_kube(tmp_path, "run", "--shards", 2, "--start-in", 1, "--", "-t1", "-c2",
                          "-n", 400, srv.url + "/", cluster={"pod_security": "restricted"})
    assert proc.returncode == 0, proc.stderr
    assert parse_report(proc.stdout)["requests"] == 400

    proc, _ = volley_kube(tmp_path, "render", "--shards", 2, "--name", "host", "--", "-c2", "-n",
                          10, srv.url + "/")
    doc = json.loads(proc.stdout)
    job = doc["items"][-1]
    job["spec"]["template"]["spec"]["hostNetwork"] = True
    env, _ = standin_env(tmp_path, pod_security="restricted")
    applied = subprocess.run([os.path.join(KUBE_DIR, "kubectl"), "apply", "-f", "-"], env=env,
                             input=json.dumps(doc), capture_output=True, text=True, timeout=60)
    assert applied.returncode == 0, applied.stderr
    proc, _ = volley_kube(tmp_path, "collect", "--shards", 2, "--name", "host", "--", "-c2", "-n",
                          10, srv.url + "/", cluster={"pod_security": "restricted"})
    assert proc.returncode == 1
    assert re.fullmatch(r'volley-kube: job/host cannot create its pods: Error creating: pods '
                        r'"host-\d-\w{5}" is forbidden: violates PodSecurity '
                        r'"restricted:latest": host namespaces \(hostNetwork=true\)\n',
                        proc.stderr), proc.stderr


def test_render_leaves_the_start_to_collect(nginx, tmp_path):
    """render's manifest bakes in no start: applied by other means (GitOps),
    its pods wait; collect, given the same options, waits until they all
    run, gives them the start, and collects and merges as run does. With
    --start-at the manifest has its start."""
    srv = nginx(server='location / { return 200 "ok"; }', log_format="$request_uri")
    options = ["--shards", 2, "--start-in", 1, "--", "-t1", "-c2", "-n", 600, srv.url + "/"]
    proc, _ = volley_kube(tmp_path, "render", *options)
    assert proc.returncode == 0, proc.stderr
    env, state = standin_env(tmp_path)
    subprocess.run([os.path.join(KUBE_DIR, "kubectl"), "apply", "-f", "-"], env=env, check=True,
                   input=proc.stdout, capture_output=True, text=True, timeout=60)
    time.sleep(1.5)
    assert os.path.getsize(srv.access_log) == 0  # the pods wait for their start
    proc, _ = volley_kube(tmp_path, "collect", *options)
    assert proc.returncode == 0, proc.stderr
    assert parse_report(proc.stdout)["requests"] == 600
    assert "volley-kube: job/volley: 2 shards running, starting at " in proc.stderr

    at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 3600))
    proc, _ = volley_kube(tmp_path, "render", "--start-at", at, *options)
    container = json.loads(proc.stdout)["items"][-1]["spec"]["template"]["spec"]["containers"][0]
    assert {"name": "VOLLEY_START_AT", "value": at} in container["env"]


def test_run_replaces_an_earlier_job_and_says_so(nginx, tmp_path):
    srv = nginx(server='location / { return 200 "ok"; }')
    for expected in ("", "volley-kube: deleted the earlier job.batch \"volley\"\n"):
        proc, _ = volley_kube(tmp_path, "run", "--shards", 2, "--start-in", 1, "--", "-t1",
                              "-c2", "-n", 100, srv.url + "/")
        assert proc.returncode == 0, proc.stderr
        assert proc.stderr.startswith(expected) and \
            proc.stderr.count("deleted the earlier") == len(expected) // 40, proc.stderr


def test_volley_options_reach_volley_as_given(nginx, tmp_path):
    """Kubernetes expands $(VAR) in a container's args: every $ is written
    $$, so that the pods run what was typed."""
    srv = nginx(server='location / { return 200 "ok"; }', log_format="$request_uri $http_x_probe")
    proc, _ = volley_kube(tmp_path, "run", "--shards", 2, "--start-in", 1, "--", "-t1", "-c2",
                          "-n", 100, "-H", "X-Probe: $(HOSTNAME) $$", srv.url +
                          "/p$(VOLLEY_SHARDS)")
    assert proc.returncode == 0, proc.stderr
    assert srv.log() == ["/p$(VOLLEY_SHARDS) $(HOSTNAME) $$"] * 100


def test_resources_and_security_of_the_rendered_job(tmp_path):
    def job(*args):
        proc, _ = volley_kube(tmp_path, "render", "--shards", 2, *args, "--", "-t3", "-c4",
                              "-d30s", "http://app:8080/")
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)["items"][-1]

    spec = job()["spec"]
    container = spec["template"]["spec"]["containers"][0]
    assert container["resources"] == {"requests": {"cpu": "3", "memory": "256Mi"},
                                      "limits": {"memory": "1Gi"}}
    # 2 x --timeout (300) + --start-in (10) + -d
    assert spec["activeDeadlineSeconds"] == 640
    assert container["securityContext"] == {"allowPrivilegeEscalation": False,
                                            "readOnlyRootFilesystem": True,
                                            "capabilities": {"drop": ["ALL"]}}
    assert spec["template"]["spec"]["securityContext"] == {
        "runAsNonRoot": True, "runAsUser": 65534, "runAsGroup": 65534,
        "seccompProfile": {"type": "RuntimeDefault"}}
    container = job("--memory", "2Gi", "--cpu", "500m")["spec"]["template"]["spec"][
        "containers"][0]
    assert container["resources"] == {"requests": {"cpu": "500m", "memory": "2Gi"},
                                      "limits": {"memory": "2Gi"}}


def test_volley_kube_refuses_bad_values_in_one_line(tmp_path):
    url = "http://127.0.0.1/"
    for args, message in [
            (["--start-in", "nan"], "argument --start-in: invalid number of seconds: 'nan'"),
            (["--start-in", "inf"], "argument --start-in: invalid number of seconds: 'inf'"),
            (["--start-in", "-100"], "argument --start-in: invalid number of seconds: '-100'"),
            (["--timeout", "nan"], "argument --timeout: invalid number of seconds: 'nan'"),
            (["--memory", "2GB"], "argument --memory: invalid memory: '2GB' (a Kubernetes "
             "quantity above 0, as in 512Mi or 2Gi)"),
            (["--cpu", "0"], "argument --cpu: invalid CPU: '0' (a Kubernetes quantity above 0, "
             "as in 500m, 2 or 1.5)"),
            (["--start-at", "2000-01-01T00:00:00Z"],
             "argument --start-at: start time 2000-01-01T00:00:00Z is in the past"),
            (["--", "-d", "1.5s"], "invalid duration: '1.5s' (a whole number with a unit: "
             "1500ms, 2s, 1m)"),
            (["--", "--warmup=1.5s"], "invalid warmup: '1.5s' (a whole number with a unit: "
             "1500ms, 2s, 1m)")]:
        argv = ["render", "--shards", 2] + args + ([] if "--" in args else ["--"]) + ["-c2", url]
        proc, _ = volley_kube(tmp_path, *argv)
        assert (proc.returncode, proc.stderr) == (1, f"volley-kube: {message}\n"), argv
    proc, _ = volley_kube(tmp_path, "run", "--shards", 2, "--start-at", "1999999999", "--",
                          "-c2", url)
    assert proc.stderr == "volley-kube: --start-at is for render: run and collect start the " \
        "pods once they all run\n"
