"""A real one-node Kubernetes cluster on 127.0.0.1 for make check-kube, built
and started by the test itself, and torn down after it, even when it fails.

What it runs: Kubernetes (kube-apiserver, kube-controller-manager,
kube-scheduler, kubelet, kubectl) built from the k8s.io/kubernetes Go module
at KUBE_VERSION (tests/kube/build-kubernetes.sh), Debian's etcd, containerd
and runc, and two images made here and imported into containerd, as nothing
is pulled from a registry: the pods' sandbox (Kubernetes' pause program) and
volley's (a minimal Debian root made by debootstrap with the libraries the
Containerfile installs, and this tree's volley). The Kubernetes programs and
the Debian root are kept in CACHE between runs, keyed by the version and the
hash of what builds them, so a warm run makes only volley's image.

What the machine may lack, and what is done about it:
- a pod network: pods get a network namespace of their own on a bridge with
  no way out (link-local addresses, no routes, no NAT), enough for
  containerd; the pods that load a server share the host's network instead
  (hostNetwork, added by tests/kube/kubectl-hostnet), where the target
  listens on 127.0.0.1;
- cgroup v2: the kubelet is told it may run on cgroup v1 (failCgroupV1);
- a kernel that refuses a negative oom_score_adj (some sandboxes), which
  the kubelet asks for the pods' sandboxes and runc then fails on: checked at
  start, and runc is then wrapped to clamp it to 0 (tests/kube/runc-oom).

Everything the cluster makes lives under one run directory (its state file
in CACHE names it); teardown stops each process it started by its pid, the
containers through runc, unmounts what is mounted below the directory,
removes the kubelet's cgroups and the directory. A run killed before its
teardown is torn down by the next one.
SPDX-License-Identifier: MIT
"""
import base64
import hashlib
import io
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import tarfile
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
KUBE_VERSION = "v1.36.3"
CACHE = os.environ.get("VOLLEY_KUBE_CACHE", "/var/cache/volley-check-kube")
SUITE = "bookworm"
# The run-time libraries of volley, as the Containerfile installs them.
PACKAGES = "libluajit-5.1-2,libev4,libssl3,libnghttp2-14,ca-certificates"
IMAGE = "docker.io/library/volley:check-kube"
PAUSE_IMAGE = "registry.k8s.io/pause:3.10"
# The node's name, and the name by which the API server reaches its kubelet
# (--kubelet-preferred-address-types=Hostname): a kubelet refuses 127.0.0.1
# as its node IP, and no traffic is to go to another of the host's addresses.
NODE = "localhost"
STATE_FILE = os.path.join(CACHE, "running")
CNI_NETWORK = "volley-check-kube"
# What the kubelet, containerd and the CNI plugins make outside the run
# directory whatever they are told: removed after the run when it was not
# there before (else only the run's own entries are).
NETNS_DIR = "/var/run/netns"  # where containerd keeps the pods' network namespaces
HOST_PATHS = ("/var/lib/kubelet", "/var/lib/cni", "/run/containerd", NETNS_DIR)


class ClusterError(Exception):
    pass


def log(message):
    print(f"check-kube: {message}", flush=True)


def run(cmd, timeout, **kw):
    """A command that must succeed within timeout seconds."""
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    if proc.returncode != 0:
        raise ClusterError(f"{' '.join(cmd[:3])}: exit {proc.returncode}: "
                           f"{(proc.stderr or proc.stdout).strip()[-2000:]}")
    return proc.stdout


def digest(*parts):
    h = hashlib.sha256()
    for p in parts:
        h.update(p if isinstance(p, bytes) else p.encode())
    return h.hexdigest()[:12]


def go():
    for candidate in (shutil.which("go"), "/usr/local/go/bin/go"):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    raise ClusterError("no go command (deps/install.sh --test installs one)")


# --------------------------------------------------------------------------
# What is cached: the Kubernetes programs, the Debian root
# --------------------------------------------------------------------------

def kubernetes():
    """The directory of the Kubernetes programs, built once per version and
    build script and Go."""
    script = os.path.join(HERE, "build-kubernetes.sh")
    with open(script, "rb") as f:
        key = digest(f.read(), run([go(), "env", "GOVERSION"], 60).strip())
    bin_dir = os.path.join(CACHE, f"kubernetes-{KUBE_VERSION}-{key}")
    if os.path.isfile(os.path.join(bin_dir, "kubelet")):
        return bin_dir
    log(f"building Kubernetes {KUBE_VERSION} (cached in {bin_dir}; about 15 minutes on 2 cores)")
    os.makedirs(os.path.join(CACHE, "logs"), exist_ok=True)
    env = dict(os.environ, GOMODCACHE=os.path.join(CACHE, "go", "mod"),
               GOCACHE=os.path.join(CACHE, "go", "build"),
               PATH=os.path.dirname(go()) + os.pathsep + os.environ["PATH"])
    started = time.monotonic()
    with open(os.path.join(CACHE, "logs", "build-kubernetes.log"), "w") as out:
        # In a session of its own, so that a build past its time is stopped
        # whole, go's compilers with it.
        proc = subprocess.Popen([script, KUBE_VERSION, bin_dir], stdout=out, stderr=out, env=env,
                                start_new_session=True)
        try:
            proc.wait(timeout=3600)
        except subprocess.TimeoutExpired:
            stop_pid(proc.pid)
            raise ClusterError(f"building Kubernetes took over an hour: see {out.name}")
    if proc.returncode != 0:
        raise ClusterError(f"building Kubernetes failed: see {out.name}")
    # The programs are kept; Go's build cache (4 GB) only served an
    # interrupted build, the module cache stays for the next version.
    shutil.rmtree(env["GOCACHE"], ignore_errors=True)
    log(f"built Kubernetes in {time.monotonic() - started:.0f} s")
    return bin_dir


def debian_mirror():
    """The Debian mirror apt uses here."""
    for path in ("/etc/apt/sources.list.d/debian.sources", "/etc/apt/sources.list"):
        if os.path.exists(path):
            with open(path) as f:
                m = re.search(r"^(?:URIs:\s*|deb\s+(?:\[[^]]*\]\s+)?)(\S+/debian)/?\s",
                              f.read(), re.M)
            if m:
                return m.group(1)
    return "http://deb.debian.org/debian"


def layer_of(root, out):
    """A layer tarball of the tree at root; returns its sha256 digest."""
    with tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as t:
        for name in sorted(os.listdir(root)):
            t.add(os.path.join(root, name), arcname=name)
    h = hashlib.sha256()
    with open(out, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def debian_layer():
    """(path, digest) of the layer of a minimal Debian root with volley's
    libraries, made by debootstrap once per suite and package list."""
    key = digest(SUITE, PACKAGES, "debootstrap --variant=minbase")
    d = os.path.join(CACHE, f"debian-{SUITE}-{key}")
    layer = os.path.join(d, "layer.tar")
    if os.path.exists(os.path.join(d, "digest")):
        with open(os.path.join(d, "digest")) as f:
            return layer, f.read().strip()
    if not shutil.which("debootstrap"):
        raise ClusterError("no debootstrap (deps/install.sh --test installs it)")
    log(f"making a Debian {SUITE} root with debootstrap (cached in {d}; about 3 minutes)")
    shutil.rmtree(d, ignore_errors=True)
    work = d + ".work"
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    started = time.monotonic()
    try:
        run(["nice", "-n", "10", "debootstrap", "--variant=minbase", f"--include={PACKAGES}",
             SUITE, os.path.join(work, "root"), debian_mirror()], 1800)
        root = os.path.join(work, "root")
        for junk in ("var/cache/apt/archives", "var/lib/apt/lists", "var/log"):
            for name in os.listdir(os.path.join(root, junk)):
                path = os.path.join(root, junk, name)
                if os.path.isfile(path):
                    os.unlink(path)
        sha = layer_of(root, os.path.join(work, "layer.tar"))
        os.makedirs(d)
        os.rename(os.path.join(work, "layer.tar"), layer)
        with open(os.path.join(d, "digest"), "w") as f:
            f.write(sha + "\n")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    log(f"made the Debian root in {time.monotonic() - started:.0f} s")
    return layer, sha


# --------------------------------------------------------------------------
# The images
# --------------------------------------------------------------------------

def image_archive(path, tag, layers, config):
    """A docker-archive tarball (what ctr images import reads) of the layers
    [(tarball, digest)] with the image config."""
    config = dict(config, architecture="amd64", os="linux",
                  rootfs={"type": "layers", "diff_ids": [f"sha256:{d}" for _, d in layers]})
    blob = json.dumps(config, sort_keys=True).encode()
    name = hashlib.sha256(blob).hexdigest() + ".json"
    manifest = [{"Config": name, "RepoTags": [tag], "Layers": [f"{d}/layer.tar" for _, d in layers]}]
    with tarfile.open(path, "w") as t:
        def add(member, data):
            info = tarfile.TarInfo(member)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
        add(name, blob)
        add("manifest.json", json.dumps(manifest).encode())
        for layer, d in layers:
            t.add(layer, arcname=f"{d}/layer.tar")


def volley_image(work):
    """volley's image: the Debian layer and a layer of this tree's make
    install, run as 65534 as the Containerfile's. Its volley is
    volley-static: HTTP/3's libraries come from bookworm-backports, which
    debootstrap does not take, and are linked in there (GnuTLS, which it
    loads, is in every Debian root: apt needs it)."""
    base = debian_layer()
    staging = os.path.join(work, "volley-root")
    run(["make", "-C", ROOT, "install", f"DESTDIR={staging}", "PREFIX=/usr/local"], 600)
    run(["make", "-C", ROOT, "static"], 600)
    shutil.copy(os.path.join(ROOT, "volley-static"), os.path.join(staging, "usr/local/bin/volley"))
    layer = os.path.join(work, "volley-layer.tar")
    top = (layer, layer_of(staging, layer))
    path = os.path.join(work, "volley-image.tar")
    image_archive(path, IMAGE, [base, top], {"config": {
        "User": "65534:65534", "Cmd": ["volley", "--help"],
        "Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]}})
    return path


def pause_image(work, bin_dir):
    root = os.path.join(work, "pause-root")
    os.makedirs(root)
    shutil.copy(os.path.join(bin_dir, "pause"), os.path.join(root, "pause"))
    layer = os.path.join(work, "pause-layer.tar")
    path = os.path.join(work, "pause-image.tar")
    image_archive(path, PAUSE_IMAGE, [(layer, layer_of(root, layer))],
                  {"config": {"Entrypoint": ["/pause"], "User": "65535:65535"}})
    return path


# --------------------------------------------------------------------------
# The cluster
# --------------------------------------------------------------------------

def ephemeral_port():
    """A port of 127.0.0.1 from the kernel's ephemeral range: the daemons
    bind theirs a while after they are chosen, and the tests' own ports
    (conftest's free_port) come from blocks that another run of the suite
    on the machine uses too."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def negative_oom_score_refused():
    """Whether this kernel refuses a negative oom_score_adj (as some
    sandboxes' do), which runc sets for the pods' sandboxes."""
    proc = subprocess.run(["sh", "-c", "echo -1 > /proc/self/oom_score_adj"],
                          capture_output=True, timeout=10)
    return proc.returncode != 0


def make_pki(pki):
    """A CA, the certificates of each component (ECDSA P-256, quick to make)
    and their kubeconfigs."""
    os.makedirs(pki)
    key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]

    def openssl(*args):
        run(["openssl", *args], 60, cwd=pki)

    openssl("req", "-x509", *key, "-keyout", "ca.key", "-out", "ca.crt", "-days", "2",
            "-subj", "/CN=volley-check-kube-ca")

    def cert(name, subject, usage, san=None):
        openssl("req", *key, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", subject)
        with open(os.path.join(pki, f"{name}.ext"), "w") as f:
            f.write(f"basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\n"
                    f"extendedKeyUsage={usage}\n" + (f"subjectAltName={san}\n" if san else ""))
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
                "-CAcreateserial", "-out", f"{name}.crt", "-days", "2", "-extfile", f"{name}.ext")

    cert("apiserver", "/CN=kube-apiserver", "serverAuth",
         "IP:127.0.0.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,"
         "DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local")
    cert("admin", "/O=system:masters/CN=admin", "clientAuth")
    cert("controller-manager", "/CN=system:kube-controller-manager", "clientAuth")
    cert("scheduler", "/CN=system:kube-scheduler", "clientAuth")
    cert("apiserver-kubelet-client", "/O=system:masters/CN=kube-apiserver-kubelet-client",
         "clientAuth")
    cert("kubelet", f"/O=system:nodes/CN=system:node:{NODE}", "clientAuth,serverAuth",
         f"IP:127.0.0.1,DNS:localhost,DNS:{NODE}")
    openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", "sa.key")
    openssl("ec", "-in", "sa.key", "-pubout", "-out", "sa.pub")


def kubeconfig(pki, user, port):
    def b64(name):
        with open(os.path.join(pki, name), "rb") as f:
            return base64.b64encode(f.read()).decode()
    path = os.path.join(pki, f"{user}.kubeconfig")
    with open(path, "w") as f:
        json.dump({"apiVersion": "v1", "kind": "Config", "current-context": "local",
                   "clusters": [{"name": "local", "cluster": {
                       "server": f"https://127.0.0.1:{port}",
                       "certificate-authority-data": b64("ca.crt")}}],
                   "users": [{"name": user, "user": {
                       "client-certificate-data": b64(f"{user}.crt"),
                       "client-key-data": b64(f"{user}.key")}}],
                   "contexts": [{"name": "local", "context": {"cluster": "local",
                                                              "user": user}}]}, f)
    return path


class Cluster:
    """The cluster: start() builds what is missing and starts it, stop()
    tears it down. kubectl(...) runs the admin's kubectl."""

    def __init__(self):
        self.dir = None
        self.procs = {}
        self.bin = None

    # ---- starting ----

    def start(self):
        os.makedirs(CACHE, exist_ok=True)
        teardown_leftover()
        self.bin = kubernetes()
        self.dir = tempfile.mkdtemp(prefix="volley-check-kube.", dir="/var/tmp")
        with open(STATE_FILE, "w") as f:
            f.write(self.dir + "\n")
        with open(os.path.join(self.dir, "netns-before"), "w") as f:
            f.write("\n".join(sorted(netns_now())) + "\n")
        save_iptables(self.dir)
        with open(os.path.join(self.dir, "paths-before"), "w") as f:
            f.write("".join(p + "\n" for p in HOST_PATHS if os.path.exists(p)))
        self.cgroup = "volley-check-kube-" + os.path.basename(self.dir).split(".")[-1]
        with open(os.path.join(self.dir, "cgroup"), "w") as f:
            f.write(self.cgroup + "\n")
        started = time.monotonic()
        images = os.path.join(self.dir, "images")
        os.makedirs(images)
        volley = volley_image(images)
        pause = pause_image(images, self.bin)
        self.pki = os.path.join(self.dir, "pki")
        self.ports = {name: ephemeral_port() for name in (
            "etcd", "etcd-peer", "apiserver", "controller-manager", "scheduler", "kubelet",
            "kubelet-healthz")}
        make_pki(self.pki)
        self.admin = kubeconfig(self.pki, "admin", self.ports["apiserver"])
        self.start_control_plane()
        self.start_node(volley, pause)
        log(f"cluster ready in {time.monotonic() - started:.0f} s ({self.dir})")

    def spawn(self, name, cmd, env=None):
        out = open(os.path.join(self.dir, f"{name}.log"), "w")
        self.procs[name] = subprocess.Popen(cmd, stdout=out, stderr=out, stdin=subprocess.DEVNULL,
                                            start_new_session=True, env=env)
        out.close()
        with open(os.path.join(self.dir, "pids"), "a") as f:
            f.write(f"{self.procs[name].pid} {name}\n")

    def wait_for(self, what, check, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for name, proc in self.procs.items():
                if proc.poll() is not None:
                    raise ClusterError(f"{name} exited ({proc.returncode}) while waiting for "
                                       f"{what}: {self.tail(name)}")
            if check():
                return
            time.sleep(0.5)
        raise ClusterError(f"no {what} after {timeout} s")

    def tail(self, name, lines=15):
        with open(os.path.join(self.dir, f"{name}.log"), errors="replace") as f:
            return "".join(f.readlines()[-lines:])

    def kubectl(self, *args, stdin=None, check=True, timeout=120):
        proc = subprocess.run([os.path.join(self.bin, "kubectl"), "--kubeconfig", self.admin] +
                              list(args), input=stdin, capture_output=True, text=True,
                              timeout=timeout)
        if check and proc.returncode != 0:
            raise ClusterError(f"kubectl {' '.join(args)}: {proc.stderr.strip()}")
        return proc

    def env(self):
        """The environment in which kubectl reaches this cluster."""
        return dict(os.environ, KUBECONFIG=self.admin,
                    PATH=self.bin + os.pathsep + os.environ["PATH"])

    def start_control_plane(self):
        p, pki, b = self.ports, self.pki, self.bin
        etcd = f"http://127.0.0.1:{p['etcd']}"
        peer = f"http://127.0.0.1:{p['etcd-peer']}"
        self.spawn("etcd", ["etcd", "--name", "check", "--data-dir",
                            os.path.join(self.dir, "etcd"), "--listen-client-urls", etcd,
                            "--advertise-client-urls", etcd, "--listen-peer-urls", peer,
                            "--initial-advertise-peer-urls", peer, "--initial-cluster",
                            f"check={peer}"])
        self.wait_for("etcd", lambda: http_ok(f"{etcd}/health"), 60)
        self.spawn("kube-apiserver", [
            f"{b}/kube-apiserver", f"--etcd-servers={etcd}", "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1", f"--secure-port={p['apiserver']}",
            f"--tls-cert-file={pki}/apiserver.crt", f"--tls-private-key-file={pki}/apiserver.key",
            f"--client-ca-file={pki}/ca.crt", f"--service-account-key-file={pki}/sa.pub",
            f"--service-account-signing-key-file={pki}/sa.key",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            "--authorization-mode=Node,RBAC", "--service-cluster-ip-range=10.0.0.0/24",
            "--endpoint-reconciler-type=none", "--enable-admission-plugins=NodeRestriction",
            f"--kubelet-client-certificate={pki}/apiserver-kubelet-client.crt",
            f"--kubelet-client-key={pki}/apiserver-kubelet-client.key",
            "--kubelet-preferred-address-types=Hostname", "--profiling=false"])
        self.wait_for("API server", lambda: self.kubectl(
            "get", "--raw", "/readyz", check=False, timeout=20).stdout == "ok", 180)
        common = ["--bind-address=127.0.0.1", "--leader-elect=false", "--profiling=false"]
        cm = kubeconfig(pki, "controller-manager", p["apiserver"])
        self.spawn("kube-controller-manager", [
            f"{b}/kube-controller-manager", f"--kubeconfig={cm}",
            f"--authentication-kubeconfig={cm}", f"--authorization-kubeconfig={cm}",
            f"--secure-port={p['controller-manager']}", f"--service-account-private-key-file="
            f"{pki}/sa.key", f"--root-ca-file={pki}/ca.crt",
            "--use-service-account-credentials=true", f"--cluster-signing-cert-file={pki}/ca.crt",
            f"--cluster-signing-key-file={pki}/ca.key", "--controllers=*",
            "--service-cluster-ip-range=10.0.0.0/24"] + common)
        sched = kubeconfig(pki, "scheduler", p["apiserver"])
        self.spawn("kube-scheduler", [
            f"{b}/kube-scheduler", f"--kubeconfig={sched}", f"--authentication-kubeconfig={sched}",
            f"--authorization-kubeconfig={sched}", f"--secure-port={p['scheduler']}"] + common)

    def start_node(self, volley, pause):
        d = self.dir
        sock = os.path.join(d, "containerd.sock")
        cni = os.path.join(d, "cni")
        os.makedirs(cni)
        # A bridge of its own with no way out: each pod gets an address in
        # its own network namespace, and no traffic leaves the host.
        with open(os.path.join(cni, "10-check.conflist"), "w") as f:
            json.dump({"cniVersion": "0.4.0", "name": CNI_NETWORK, "plugins": [
                {"type": "bridge", "bridge": "vck" + self.cgroup[-6:], "isGateway": False,
                 "ipMasq": False, "ipam": {"type": "host-local", "dataDir":
                                           os.path.join(d, "cni-ipam"),
                                           "ranges": [[{"subnet": "169.254.77.0/24"}]]}},
                {"type": "loopback"}]}, f)
        runc = "/usr/sbin/runc"
        if negative_oom_score_refused():
            runc = os.path.join(HERE, "runc-oom")
        with open(os.path.join(d, "containerd.toml"), "w") as f:
            f.write(f"""version = 2
root = "{d}/containerd-root"
state = "{d}/containerd-state"
[grpc]
  address = "{sock}"
[plugins."io.containerd.internal.v1.opt"]
  path = "{d}/containerd-opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{PAUSE_IMAGE}"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = "{runc}"
        Root = "{d}/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{cni}"
""")
        self.spawn("containerd", ["containerd", "--config", os.path.join(d, "containerd.toml")])
        ctr = ["ctr", "-a", sock, "-n", "k8s.io"]
        self.wait_for("containerd", lambda: subprocess.run(
            ctr + ["version"], capture_output=True, timeout=10).returncode == 0, 60)
        for image in (pause, volley):
            run(ctr + ["images", "import", image], 300)
        for hierarchy in cgroup_hierarchies():
            os.makedirs(os.path.join(hierarchy, self.cgroup), exist_ok=True)
        p = self.ports
        with open(os.path.join(d, "kubelet.json"), "w") as f:
            json.dump({
                "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
                "address": "127.0.0.1", "port": p["kubelet"], "readOnlyPort": 0,
                "healthzBindAddress": "127.0.0.1", "healthzPort": p["kubelet-healthz"],
                "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": True},
                                   "x509": {"clientCAFile": f"{self.pki}/ca.crt"}},
                "authorization": {"mode": "Webhook"},
                "tlsCertFile": f"{self.pki}/kubelet.crt",
                "tlsPrivateKeyFile": f"{self.pki}/kubelet.key",
                "cgroupDriver": "cgroupfs", "cgroupRoot": "/" + self.cgroup,
                "failSwapOn": False, "failCgroupV1": False,
                "containerRuntimeEndpoint": f"unix://{sock}",
                "podLogsDir": os.path.join(d, "pod-logs"),
                "resolvConf": "/etc/resolv.conf", "clusterDomain": "cluster.local",
                # The disk is shared: only a nearly full one evicts pods.
                "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%",
                                 "imagefs.available": "1%", "nodefs.inodesFree": "1%"},
                "imageGCHighThresholdPercent": 100, "imageGCLowThresholdPercent": 99,
                # A pod's downward API volume (volley-kube's start) is
                # refreshed on the update, or at the latest at this sync: a
                # loaded node was seen missing the update and a pod getting
                # its start a minute late (the default sync, 1m).
                "syncFrequency": "10s",
            }, f)
        self.spawn("kubelet", [
            f"{self.bin}/kubelet", f"--config={d}/kubelet.json",
            f"--kubeconfig={kubeconfig(self.pki, 'kubelet', p['apiserver'])}",
            f"--root-dir={d}/kubelet", f"--hostname-override={NODE}", "--v=1"])
        self.wait_for("a Ready node", lambda: self.kubectl(
            "get", "node", NODE, "-o", "jsonpath={.status.conditions[?(@.type==\"Ready\")]"
            ".status}", check=False, timeout=20).stdout == "True", 180)
        self.wait_for("the default service account", lambda: self.kubectl(
            "get", "serviceaccount", "default", check=False, timeout=20).returncode == 0, 120)

    # ---- stopping ----

    def stop(self):
        if self.dir:
            teardown(self.dir, self.kubectl if "kube-apiserver" in self.procs else None)
            self.dir = None
            os.unlink(STATE_FILE)


def http_ok(url):
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


def cgroup_hierarchies():
    """The cgroup v1 hierarchies that the kubelet makes its cgroups in (or
    the one v2 hierarchy)."""
    base = "/sys/fs/cgroup"
    if os.path.exists(os.path.join(base, "cgroup.controllers")):
        return [base]
    return [os.path.join(base, d) for d in sorted(os.listdir(base))
            if os.path.isdir(os.path.join(base, d)) and not os.path.islink(os.path.join(base, d))]


def teardown_leftover():
    """Tears down what a run killed before its teardown left behind."""
    if not os.path.exists(STATE_FILE):
        return
    with open(STATE_FILE) as f:
        left = f.read().strip()
    if left and os.path.isdir(left):
        log(f"tearing down what an earlier run left: {left}")
        teardown(left)
    os.unlink(STATE_FILE)


def own_processes(d):
    """The pids of processes whose command line names the run directory d
    (containerd's shims, which outlive it)."""
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if d.encode() + b"/" in f.read():
                    out.append(int(pid))
        except OSError:
            pass
    return out


def stop_pid(pid, grace=10):
    """SIGTERM, then SIGKILL after grace seconds, to the process group pid
    leads (each was started in a session of its own)."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5)):
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            return
        except PermissionError:
            os.kill(pid, sig)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
                if done:
                    return
            except ChildProcessError:
                if not os.path.exists(f"/proc/{pid}"):
                    return
                with open(f"/proc/{pid}/stat") as f:
                    if f.read().split(") ")[1][0] == "Z":
                        return
            time.sleep(0.1)


def teardown(d, kubectl=None):
    """Stops everything the cluster of run directory d started, by pid, and
    removes what it left: pods, containers, network namespaces, mounts,
    cgroups, the bridge, the directory. kubectl (a Cluster's, when it still
    answers) first deletes the pods, so that the kubelet stops them."""
    if kubectl:
        kubectl("delete", "pods", "--all", "--all-namespaces", "--grace-period=0", "--force",
                "--wait=false", check=False, timeout=60)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and running_tasks(d):
            time.sleep(1)
    pids = {}
    if os.path.exists(os.path.join(d, "pids")):
        with open(os.path.join(d, "pids")) as f:
            pids = {line.split()[1]: int(line.split()[0]) for line in f if line.strip()}
    live = set(own_processes(d))  # a pid of a run before a reboot may be another's now

    def stop(name):
        if pids.get(name) in live:
            stop_pid(pids[name])

    stop("kubelet")
    # The containers, through runc (their processes are the shims' children).
    runc_root = os.path.join(d, "runc")
    for ns in os.listdir(runc_root) if os.path.isdir(runc_root) else []:
        root = os.path.join(runc_root, ns)
        ids = subprocess.run(["runc", "--root", root, "list", "-q"], capture_output=True,
                             text=True, timeout=60).stdout.split()
        for cid in ids:
            subprocess.run(["runc", "--root", root, "kill", "--all", cid, "KILL"],
                           capture_output=True, timeout=60)
        for cid in ids:
            subprocess.run(["runc", "--root", root, "delete", "--force", cid],
                           capture_output=True, timeout=60)
    stop("containerd")
    for pid in own_processes(d):  # the shims, which outlive containerd
        stop_pid(pid, grace=2)
    for name in ("kube-scheduler", "kube-controller-manager", "kube-apiserver", "etcd"):
        stop(name)
    remove_netns(d)
    restore_iptables(d)
    unmount_below(d)
    cgroup_file = os.path.join(d, "cgroup")
    if os.path.exists(cgroup_file):
        with open(cgroup_file) as f:
            remove_cgroups(f.read().strip())
    remove_bridge(d)
    remove_host_paths(d)
    shutil.rmtree(d, ignore_errors=True)


def remove_host_paths(d):
    path = os.path.join(d, "paths-before")
    if not os.path.exists(path):
        return
    with open(path) as f:
        before = set(f.read().split())
    results = "/var/lib/cni/results"
    for name in os.listdir(results) if os.path.isdir(results) else []:
        if name.startswith(CNI_NETWORK + "-"):
            os.unlink(os.path.join(results, name))
    for p in HOST_PATHS:
        if p in before or not os.path.exists(p):
            continue
        if p == NETNS_DIR:
            try:
                os.rmdir(p)  # only when empty: the namespaces are not all ours
            except OSError:
                pass
        else:
            shutil.rmtree(p, ignore_errors=True)


def running_tasks(d):
    """The containers containerd still runs."""
    proc = subprocess.run(["ctr", "-a", os.path.join(d, "containerd.sock"), "-n", "k8s.io",
                           "tasks", "ls", "-q"], capture_output=True, text=True, timeout=30)
    return proc.returncode == 0 and proc.stdout.split()


def netns_now():
    return set(os.listdir(NETNS_DIR)) if os.path.isdir(NETNS_DIR) else set()


def remove_netns(d):
    """The pods' network namespaces that containerd made (under
    /var/run/netns) during the run and did not remove: those there now that
    were not there when it started."""
    before = os.path.join(d, "netns-before")
    if not os.path.exists(before):
        return
    with open(before) as f:
        known = set(f.read().split())
    for name in sorted(netns_now() - known):
        if name.startswith("cni-"):
            path = os.path.join(NETNS_DIR, name)
            subprocess.run(["umount", path], capture_output=True, timeout=30)
            try:
                os.unlink(path)
            except OSError:
                pass


IPTABLES = ("iptables", "ip6tables")


def iptables_rules(tool):
    """{table: (chains, rules)} of iptables or ip6tables now, or {} without it."""
    try:
        out = subprocess.run([f"{tool}-save"], capture_output=True, text=True,
                             timeout=60).stdout
    except FileNotFoundError:
        return {}
    tables, table = {}, None
    for line in out.splitlines():
        if line.startswith("*"):
            table = tables.setdefault(line[1:], ([], []))
        elif line.startswith(":") and table is not None:
            table[0].append(line[1:].split()[0])
        elif line.startswith("-A ") and table is not None:
            table[1].append(line[3:])
    return tables


def save_iptables(d):
    with open(os.path.join(d, "iptables-before.json"), "w") as f:
        json.dump({tool: iptables_rules(tool) for tool in IPTABLES}, f)


def restore_iptables(d):
    """Removes the chains and rules the kubelet added (KUBE-FIREWALL and its
    canaries: it always makes them where iptables is), those that were not
    there when the run started."""
    path = os.path.join(d, "iptables-before.json")
    if not os.path.exists(path):
        return
    with open(path) as f:
        before = json.load(f)
    for tool in IPTABLES:
        for table, (chains, rules) in iptables_rules(tool).items():
            old_chains, old_rules = before.get(tool, {}).get(table, ([], []))
            for rule in rules:
                if rule not in old_rules:
                    subprocess.run([tool, "-t", table, "-D"] + shlex.split(rule),
                                   capture_output=True, timeout=60)
            for chain in chains:
                if chain not in old_chains:
                    subprocess.run([tool, "-t", table, "-F", chain], capture_output=True,
                                   timeout=60)
                    subprocess.run([tool, "-t", table, "-X", chain], capture_output=True,
                                   timeout=60)


def unmount_below(d):
    """Unmounts every mount point at or below d, the deepest first."""
    for _ in range(5):
        with open("/proc/self/mountinfo") as f:
            points = [line.split()[4].encode().decode("unicode_escape") for line in f]
        mine = sorted({p for p in points if p == d or p.startswith(d + "/")}, key=len,
                      reverse=True)
        if not mine:
            return
        for p in mine:
            if subprocess.run(["umount", p], capture_output=True, timeout=60).returncode != 0:
                subprocess.run(["umount", "-l", p], capture_output=True, timeout=60)


def remove_cgroups(name):
    if not name.startswith("volley-check-kube-"):
        return
    for hierarchy in cgroup_hierarchies():
        top = os.path.join(hierarchy, name)
        for dirpath, _, _ in sorted(os.walk(top), key=lambda w: len(w[0]), reverse=True):
            try:
                os.rmdir(dirpath)
            except OSError:
                pass


def remove_bridge(d):
    """The CNI bridge of the run (named after its cgroup), if it is there."""
    cgroup_file = os.path.join(d, "cgroup")
    if os.path.exists(cgroup_file):
        with open(cgroup_file) as f:
            bridge = "vck" + f.read().strip()[-6:]
        if os.path.exists(f"/sys/class/net/{bridge}"):
            subprocess.run(["ip", "link", "delete", bridge], capture_output=True, timeout=30)
