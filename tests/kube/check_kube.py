"""make check-kube: volley-kube and the shipped manifest on a real one-node
Kubernetes cluster (tests/kube/cluster.py builds and starts it on 127.0.0.1,
and tears it down after). Ten runs of three shards against nginx, with and
without --timeline, each merged result checked against nginx's own count;
the Job in a namespace that enforces the Pod Security Standard "restricted";
shards that cannot all be scheduled; the shipped manifest applied twice by
the steps its header gives, with and without volley-kube. Needs root.
SPDX-License-Identifier: MIT
"""
import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

import cluster as kube
from conftest import ROOT, VOLLEY, parse_report

VOLLEY_KUBE = os.path.join(ROOT, "scripts", "volley-kube")
HOSTNET = os.path.join(kube.HERE, "kubectl-hostnet")
RUNS_LOG = os.path.join(ROOT, "build", "tests", "check-kube-runs.txt")


def iptables():
    return {tool: kube.iptables_rules(tool) for tool in kube.IPTABLES}


@pytest.fixture(scope="module")
def cluster():
    """The cluster, torn down after the module's tests whatever happened,
    then checked to have left nothing behind."""
    c = kube.Cluster()

    def terminated(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, terminated)
    rules = iptables()
    paths = [p for p in kube.HOST_PATHS if os.path.exists(p)]
    try:
        c.start()
        yield c
    finally:
        d = c.dir
        c.stop()
        signal.signal(signal.SIGTERM, previous)
    if d:
        assert not os.path.exists(d)
        assert kube.own_processes(d) == []
        with open("/proc/self/mountinfo") as f:
            assert d not in f.read()
    assert iptables() == rules
    assert [p for p in kube.HOST_PATHS if os.path.exists(p)] == paths


def namespace(c, name, **labels):
    """A namespace of its own for a test, once its default service account
    (which the pods need) is there."""
    c.kubectl("create", "namespace", name)
    if labels:
        c.kubectl("label", "namespace", name, *[f"{k}={v}" for k, v in labels.items()])
    c.wait_for(f"the service account of {name}", lambda: c.kubectl(
        "--namespace", name, "get", "serviceaccount", "default", check=False,
        timeout=20).returncode == 0, 60)
    return name


def volley_kube(c, tmp_path, *args, hostnet=True, timeout=600):
    """volley-kube against the cluster, with this tree's volley to merge and
    the image made from it; its pods on the host's network unless not
    hostnet."""
    kubectl = os.path.join(c.bin, "kubectl")
    env = dict(c.env(), VOLLEY=VOLLEY, REAL_KUBECTL=kubectl,
               KUBECTL=HOSTNET if hostnet else kubectl)
    args = [str(a) for a in args]
    cut = args.index("--") if "--" in args else len(args)
    args[cut:cut] = ["--image", kube.IMAGE]
    return subprocess.run([sys.executable, VOLLEY_KUBE] + args, env=env, capture_output=True,
                          text=True, timeout=timeout, cwd=tmp_path)


def note(line):
    """A line of what the runs measured, for whoever reads the run."""
    os.makedirs(os.path.dirname(RUNS_LOG), exist_ok=True)
    with open(RUNS_LOG, "a") as f:
        f.write(line + "\n")


@pytest.fixture(scope="module")
def runs_namespace(cluster):
    if os.path.exists(RUNS_LOG):
        os.unlink(RUNS_LOG)
    return namespace(cluster, "runs")


@pytest.mark.parametrize("run", range(10))
def test_three_shards_add_up_to_what_nginx_counted(cluster, runs_namespace, nginx, tmp_path,
                                                    run):
    """volley-kube run of three shards, each a pod of the real kubelet
    whose log takes stdout and stderr through two pipes: the merged result
    is what nginx logged (-n exactly; -d up to the request each connection
    had in flight at the end), with and without the shards' timelines."""
    srv = nginx(server='location / { return 200 "ok"; }', log_format="$request_uri")
    timeline = run % 2 == 1
    merged = os.path.join(tmp_path, "merged.json")
    if timeline:
        load = ["-t1", "-c6", "-R", 3000, "-d2s", "--latency", "--timeline",
                os.path.join(tmp_path, "all.jsonl")]
    else:
        load = ["-t1", "-c6", "-n", 3000, "--latency"]
    proc = volley_kube(cluster, tmp_path, "run", "--namespace", runs_namespace, "--shards", 3,
                       "--cpu", "100m", "--start-in", 5, "--json", merged, "--", *load,
                       srv.url + "/")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with open(merged) as f:
        doc = json.load(f)
    served = len(srv.log())
    spread = re.search(r"merged 3 of 3 shards, started within (\S+)", proc.stdout).group(1)
    note(f"run {run} ({'-R 3000 -d2s --timeline' if timeline else '-n 3000'}): merged "
         f"{doc['requests']}, nginx {served}, started within {spread}")
    assert [i["shard"] for i in doc["inputs"]] == [0, 1, 2]
    assert parse_report(proc.stdout)["requests"] == doc["requests"]
    if timeline:
        assert doc["requests"] <= served <= doc["requests"] + 6
        with open(os.path.join(tmp_path, "all.jsonl")) as f:
            intervals = [r for r in map(json.loads, f) if r["type"] == "interval"]
        assert sum(i["requests"] for i in intervals) == doc["requests"]
    else:
        assert doc["requests"] == served == 3000


def test_the_job_passes_pod_security_restricted(cluster, tmp_path):
    """In a namespace that enforces "restricted", the rendered Job draws no
    warning and its pods are admitted and run volley (as user 65534, on a
    read-only root); a Job that breaks it (here with hostNetwork) is refused,
    and volley-kube says why at once."""
    ns = namespace(cluster, "strict", **{f"pod-security.kubernetes.io/{mode}": "restricted"
                                         for mode in ("enforce", "warn")})
    render = volley_kube(cluster, tmp_path, "render", "--shards", 2, "--cpu", "100m", "--",
                         "-c2", "-d1s", "http://127.0.0.1:9/")
    dry = cluster.kubectl("--namespace", ns, "apply", "--dry-run=server", "-f", "-",
                          stdin=render.stdout)
    assert "Warning" not in dry.stderr, dry.stderr
    # Nothing listens on port 9 of the pods' own network namespace: each
    # shard gets as far as connecting.
    proc = volley_kube(cluster, tmp_path, "run", "--namespace", ns, "--shards", 2, "--cpu",
                       "100m", "--start-in", 3, "--", "-c2", "-d1s", "http://127.0.0.1:9/",
                       hostnet=False)
    assert proc.returncode == 1
    for i in range(2):
        assert re.search(rf"^volley-kube: shard {i} \(pod volley-{i}-\w{{5}}\) failed: volley: "
                         r"unable to connect to 127\.0\.0\.1:9: Connection refused$",
                         proc.stderr, re.M), proc.stderr
    pods = json.loads(cluster.kubectl("--namespace", ns, "get", "pods", "-o", "json").stdout)
    assert len(pods["items"]) == 2
    for pod in pods["items"]:
        assert pod["spec"]["securityContext"]["runAsUser"] == 65534
        assert pod["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 1

    began = time.monotonic()
    proc = volley_kube(cluster, tmp_path, "run", "--namespace", ns, "--name", "host",
                       "--shards", 2, "--cpu", "100m", "--", "-c2", "-d1s", "http://127.0.0.1:9/")
    assert proc.returncode == 1
    assert re.fullmatch(r'volley-kube: job/host cannot create its pods: Error creating: pods '
                        r'"host-\d-\w{5}" is forbidden: violates PodSecurity "restricted:latest": '
                        r'host namespaces \(hostNetwork=true\); job/host deleted\n', proc.stderr), \
        proc.stderr
    assert time.monotonic() - began < 120  # at once, not after --timeout


def test_shards_that_cannot_all_run_never_start(cluster, nginx, tmp_path):
    """Three shards of one CPU each on a node of two: the scheduler leaves
    one Pending; volley-kube says so in one line with the scheduler's reason
    within seconds, deletes the Job, and no shard sent a request."""
    ns = namespace(cluster, "capacity")
    srv = nginx(server='location / { return 200 "ok"; }')
    began = time.monotonic()
    proc = volley_kube(cluster, tmp_path, "run", "--namespace", ns, "--shards", 3, "--cpu", 1,
                       "--timeout", 600, "--", "-t1", "-c3", "-d2s", srv.url + "/")
    elapsed = time.monotonic() - began
    assert proc.returncode == 1
    assert re.fullmatch(r"volley-kube: shard \d \(pod volley-\d-\w{5}\) cannot run: Unschedulable: "
                        r"0/1 nodes are available: 1 Insufficient cpu\..*; job/volley deleted\n",
                        proc.stderr), proc.stderr
    note(f"capacity refusal after {elapsed:.1f} s: {proc.stderr.strip()}")
    assert elapsed < 120  # not the --timeout
    assert srv.log() == []
    assert cluster.kubectl("--namespace", ns, "get", "job", "volley", check=False).returncode != 0
    # The pods that did run go (their shell passes the SIGTERM on), and
    # give their CPUs back to the tests after this one.
    cluster.kubectl("--namespace", ns, "wait", "--for=delete", "pods", "--all", "--timeout=120s",
                    timeout=180)


def shipped_manifest(tmp_path, url, options, start_at=""):
    """deploy/kubernetes/volley-job.yaml edited as its header says: the image,
    the volley options, the shard count (here the file's 4), the target, and
    what this cluster needs (a tenth of a CPU per pod, the host's network)."""
    with open(os.path.join(ROOT, "deploy", "kubernetes", "volley-job.yaml")) as f:
        text = f.read()
    args = "".join(f'            - "{a}"\n' for a in options + [url])
    text = re.sub(r'(          args:\n)(            - .*\n)+', lambda m: m.group(1) + args, text)
    text = text.replace("image: volley:0.2.0", f"image: {kube.IMAGE}")
    text = text.replace('cpu: "2"', "cpu: 100m")
    text = text.replace("      restartPolicy: Never\n",
                        "      restartPolicy: Never\n      hostNetwork: true\n")
    text = text.replace('VOLLEY_START_AT\n              value: ""',
                        f'VOLLEY_START_AT\n              value: "{start_at}"')
    path = os.path.join(tmp_path, "volley-job.yaml")
    with open(path, "w") as f:
        f.write(text)
    return path


def test_the_shipped_manifest_runs_again_and_again(cluster, nginx, tmp_path):
    """The header's steps, twice (a Job's pod template cannot change, and
    the earlier Job is kept a day): delete, apply, volley-kube collect; then
    once without volley-kube: a start in the file, kubectl wait, the results
    out of the logs with sed, base64 and gunzip, volley merge."""
    ns = namespace(cluster, "byhand")
    options = ["-s", "/run/volley/script.lua", "-t1", "-c4", "-n", "2000"]
    kubectl = ["kubectl", "--namespace", ns]
    for attempt in range(2):
        srv = nginx(server='location / { return 200 "ok"; }', log_format="$request_uri")
        path = shipped_manifest(tmp_path, srv.url + "/", options)
        for step in (["delete", "-f", path, "--ignore-not-found", "--cascade=foreground"],
                     ["apply", "-f", path]):
            proc = subprocess.run(kubectl + step, env=cluster.env(), capture_output=True,
                                  text=True, timeout=300)
            assert proc.returncode == 0, proc.stderr
        proc = volley_kube(cluster, tmp_path, "collect", "--namespace", ns, "--shards", 4,
                           "--start-in", 5, "--", *options, srv.url + "/", hostnet=False)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert parse_report(proc.stdout)["requests"] == 2000
        assert srv.log() == ["/"] * 2000

    srv = nginx(server='location / { return 200 "ok"; }', log_format="$request_uri")
    at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 40))
    path = shipped_manifest(tmp_path, srv.url + "/", options, start_at=at)
    k = f"kubectl --namespace {ns}"
    script = f"""set -e
{k} delete -f {path} --ignore-not-found --cascade=foreground
{k} apply -f {path}
{k} wait --for=condition=complete job/volley --timeout=10m
for p in $({k} get pods -l app.kubernetes.io/instance=volley -o name); do
    {k} logs "$p" | sed -n 's/^@volley result.json \\([^ ]*\\)$/\\1/p' |
        base64 -d | gunzip > "${{p#pod/}}.json"; done
{VOLLEY} merge volley-*.json
"""
    proc = subprocess.run(["bash", "-c", script], env=cluster.env(), capture_output=True,
                          text=True, timeout=900, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert parse_report(proc.stdout)["requests"] == 2000
    assert "merged 4 of 4 shards" in proc.stdout
    assert len(srv.log()) == 2000
