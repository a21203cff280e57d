#!/usr/bin/env python3
"""A real multi-node Kubernetes on this one machine, for the tests of a Kubernetes
provider (make kube-test-cluster / make kube-test-cluster-down).

Four containers on a network of their own, everything labelled
aitestbed.kube-test-cluster=<name>:

  <name>-control-plane  etcd, kube-apiserver, kube-controller-manager, kube-scheduler
                        (unprivileged); the API published on 127.0.0.1:<port>
  <name>-worker-1/-2    containerd 1.6 + runc + CNI plugins (Debian), kubelet, kube-proxy
  <name>-registry       Debian's docker-registry, no auth, on 127.0.0.1:<port>

Cluster DNS is CoreDNS (built from its Go module), the pod network a CNI bridge per
worker with routes between workers, and the default StorageClass `shared` gives
ReadWriteMany volumes seen by both workers. Kubernetes binaries are built once per
version (build-binaries.sh); images are tagged with a hash of what they are made of,
so a second run builds nothing. The facts behind every choice are in
reference/kubernetes-on-one-machine.md; the use in docs/kube-test-cluster.md.
"""

from __future__ import annotations

import argparse
import base64
import datetime
import fcntl
import hashlib
import http.client
import io
import ipaddress
import json
import os
import re
import shutil
import socket
import ssl
import string
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from pathlib import Path

import docker
from aitestbed.host import egress
from aitestbed.host.systems.cerebras_pki import ClusterCA, service_account_key_pems
from docker.errors import APIError, DockerException, NotFound

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
KUBE_VERSION = "v1.32.13"       # the version the project builds kube-apiserver at
COREDNS_VERSION = "v1.15.0"
LABEL = "aitestbed.kube-test-cluster"
ROLE = "aitestbed.kube-test-cluster.role"
IMAGE_PREFIX = os.environ.get("AITESTBED_IMAGE_PREFIX", "aitestbed")
BASE_IMAGE = os.environ.get("AITESTBED_BASE_IMAGE", f"{IMAGE_PREFIX}/base:bookworm")

# Addresses. The Docker network is a /24 of 10.213.0.0/16, outside Docker's default
# pools (172.17-31/16, 192.168/16), one per cluster; pods and Services live only
# inside the workers, so every cluster may use the same ranges.
NETWORK_POOL = ipaddress.ip_network("10.213.0.0/16")
HOSTS = {"control-plane": 10, "worker-1": 11, "worker-2": 12, "registry": 20}
WORKERS = ("worker-1", "worker-2")
CLUSTER_CIDR = "10.244.0.0/16"            # worker-N's pods: 10.244.N.0/24
SERVICE_CIDR = "10.96.0.0/16"
API_SERVICE_IP = "10.96.0.1"
DNS_IP = "10.96.0.10"
IN_CLUSTER_REGISTRY = "localhost:5000"    # what pods name; containerd maps it (hosts.toml)
ALCF_TARGET = "nodes.aitestbed.svc.cluster.local"
# The registry's storage outlives the cluster, as the binaries do: a later cluster's push
# of the same node images finds their layers there (CI pushes the class images to a
# new cluster each run). Shared by every test cluster (blobs are content-addressed);
# `down` keeps it; `docker volume rm aitestbed-kube-test-registry` frees it.
# KUBE_TEST_REGISTRY_CACHE names another volume, or "" for an empty registry.
REGISTRY_CACHE = os.environ.get("KUBE_TEST_REGISTRY_CACHE", "aitestbed-kube-test-registry")
# Each worker's containerd image store outlives the cluster the same way: a later
# cluster's worker N finds the images an earlier worker N pulled already unpacked (a
# pull then only reads manifests), and `down` has gigabytes less to remove. One volume
# per worker slot, <prefix>-1 and -2, used by one test cluster at a time: a cluster made
# while another holds them gets stores of its own. Only images outlive it: the workers
# remove the old cluster's containers before their CRI loads (worker.sh).
# `docker volume rm aitestbed-kube-test-images-1 aitestbed-kube-test-images-2` frees it;
# KUBE_TEST_IMAGE_CACHE names another prefix, or "" for empty stores of the cluster's own.
IMAGE_CACHE = os.environ.get("KUBE_TEST_IMAGE_CACHE", "aitestbed-kube-test-images")


class Fail(Exception):
    """A clear message for the user, and exit status 1."""


def keep_bridge_offline(name: str) -> str | None:
    """The DOCKER-USER rule (host/egress.rule) that drops what this cluster's bridge
    forwards to any other interface, inserted unless it is there; a warning when it cannot
    be. The testbed's clusters need no such rule since the gate (their nodes are on an
    internal network); this test cluster's network cannot be internal (the pod addresses
    routed between the workers), and the script runs as root."""
    iptables = shutil.which("iptables")
    if iptables is None:
        return "iptables is not installed here: this cluster's machines can reach outside"
    rule = egress.rule(name)
    if subprocess.run([iptables, "-C", egress.CHAIN, *rule], capture_output=True).returncode:
        made = subprocess.run([iptables, "-I", egress.CHAIN, "1", *rule], capture_output=True,
                              text=True)
        if made.returncode:
            return (f"could not add the firewall rule that keeps this cluster offline "
                    f"({made.stderr.strip() or 'iptables failed'})")
    return None

def say(message: str) -> None:
    print(f"kube-test-cluster: {message}", file=sys.stderr, flush=True)


def wait_for(what: str, check, timeout: float, interval: float = 0.25):
    """Poll check() until it returns something true (readiness, never a fixed sleep)."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise Fail(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


def state_dir(name: str) -> Path:
    base = os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state"
    return Path(base) / "aitestbed" / "kube-test-cluster" / name


# --- binaries and images ------------------------------------------------------------

def binaries() -> Path:
    """Build (once per version) or find the cached binaries; their directory."""
    out = subprocess.run(["bash", str(HERE / "build-binaries.sh"), KUBE_VERSION, COREDNS_VERSION],
                         stdout=subprocess.PIPE, text=True, check=False)
    if out.returncode:
        raise Fail("building the Kubernetes binaries failed (see above)")
    return Path(out.stdout.strip().splitlines()[-1])


def ensure_image(client, repo: str, files: dict[str, Path], base_id: str = "") -> str:
    """Build repo:<hash of files and base> from a context of `files` unless it exists."""
    digest = hashlib.sha256(base_id.encode())
    for dest in sorted(files):
        digest.update(dest.encode() + b"\0")
        with open(files[dest], "rb") as src:
            while chunk := src.read(1 << 20):
                digest.update(chunk)
    tag = f"{repo}:{digest.hexdigest()[:12]}"
    try:
        client.images.get(tag)
        return tag
    except NotFound:
        pass
    say(f"building {tag}")
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="kube-test-image.") as context:
        for dest, src in files.items():
            target = Path(context, dest)
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(src, target)
            except OSError:
                shutil.copy2(src, target)
        for chunk in client.api.build(path=context, tag=tag, rm=True, forcerm=True, decode=True,
                                      buildargs={"BASE_IMAGE": BASE_IMAGE}):
            if "error" in chunk:
                raise Fail(f"building {tag} failed: {chunk['error'].strip()}")
            line = chunk.get("stream", "").strip()
            if line.startswith("Step "):
                say(f"  {line[:100]}")
    say(f"built {tag} in {time.monotonic() - started:.0f} s")
    # A multi-stage build leaves its compiler stage behind, untagged (ours are labelled).
    client.images.prune(filters={"dangling": True, "label": f"{LABEL}.build-stage"})
    # Older builds of this repository are of no further use (not when a container uses them).
    used = {c.image.id for c in client.containers.list(all=True, filters={"label": LABEL})}
    for image in client.images.list(name=repo):
        if image.id not in used and tag not in image.tags:
            for old in image.tags:
                try:
                    client.images.remove(old)
                except APIError:
                    pass
    return tag


def ensure_images(client, bin_dir: Path) -> dict[str, str]:
    if subprocess.run(["bash", str(ROOT / "scripts" / "ensure-base-image.sh")],
                      env={**os.environ, "AITESTBED_BASE_IMAGE": BASE_IMAGE}).returncode:
        raise Fail(f"could not provide the base image {BASE_IMAGE} (see above)")
    base_id = client.images.get(BASE_IMAGE).id
    node_files = {p.name: p for p in (HERE / "image").iterdir() if p.is_file()}
    for cmd in ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl",
                "kubelet", "kube-proxy"):
        node_files[f"bin/{cmd}"] = bin_dir / cmd
    return {
        "node": ensure_image(client, f"{IMAGE_PREFIX}/kube-test-node", node_files, base_id),
        "pause": ensure_image(client, f"{IMAGE_PREFIX}/kube-test-pause",
                              {p.name: p for p in (HERE / "pause").iterdir()}, base_id),
        "coredns": ensure_image(client, f"{IMAGE_PREFIX}/kube-test-coredns", {
            "Dockerfile": HERE / "coredns" / "Dockerfile",
            "coredns": bin_dir / f"coredns-{COREDNS_VERSION}"}),
    }


# --- certificates and configuration files ---------------------------------------------

# The CA is the testbed's own (host/systems/cerebras_pki): one per test cluster, in memory
# (its key goes to the control plane only), P-256 keys, certificates valid for a year.
CA_NAME = "kube-test-cluster-ca"
CA_VALIDITY = datetime.timedelta(days=365)


def new_ca() -> ClusterCA:
    return ClusterCA.in_memory(CA_NAME, CA_VALIDITY)


def kubeconfig(server: str, ca: bytes, cert: bytes, key: bytes, user: str) -> bytes:
    b64 = lambda data: base64.b64encode(data).decode()  # noqa: E731
    return json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "kube-test",
        "clusters": [{"name": "kube-test", "cluster": {
            "server": server, "certificate-authority-data": b64(ca)}}],
        "users": [{"name": user, "user": {"client-certificate-data": b64(cert),
                                          "client-key-data": b64(key)}}],
        "contexts": [{"name": "kube-test", "context": {"cluster": "kube-test", "user": user}}],
    }, indent=2).encode()


def control_plane_files(pki: ClusterCA, cp_name: str, cp_ip: str) -> dict[str, bytes]:
    ca = pki.cert_pem
    server = f"https://{cp_ip}:6443"
    files = {"/etc/kubernetes/pki/ca.crt": ca, "/etc/kubernetes/pki/ca.key": pki.key_pem}
    crt, key = pki.issue("kube-apiserver", dns=(
        "kubernetes", "kubernetes.default", "kubernetes.default.svc",
        "kubernetes.default.svc.cluster.local", cp_name, "localhost"),
        ips=("127.0.0.1", API_SERVICE_IP, cp_ip))
    files |= {"/etc/kubernetes/pki/apiserver.crt": crt, "/etc/kubernetes/pki/apiserver.key": key}
    crt, key = pki.issue("kube-apiserver-kubelet-client", "system:masters")
    files |= {"/etc/kubernetes/pki/apiserver-kubelet-client.crt": crt,
              "/etc/kubernetes/pki/apiserver-kubelet-client.key": key}
    files["/etc/kubernetes/pki/sa.key"], files["/etc/kubernetes/pki/sa.pub"] = (
        service_account_key_pems())
    for component in ("controller-manager", "scheduler"):
        user = f"system:kube-{component}"
        crt, key = pki.issue(user)
        files[f"/etc/kubernetes/{component}.kubeconfig"] = kubeconfig(server, ca, crt, key, user)
    return files


def worker_files(pki: ClusterCA, node: str, index: int, cp_ip: str, registry_ip: str,
                 registry_port: int, pause_image: str) -> dict[str, bytes]:
    ca = pki.cert_pem
    server = f"https://{cp_ip}:6443"
    crt, key = pki.issue(f"system:node:{node}", "system:nodes")
    proxy_crt, proxy_key = pki.issue("system:kube-proxy")
    kubelet = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
        "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": True},
                           "x509": {"clientCAFile": "/etc/kubernetes/pki/ca.crt"}},
        "authorization": {"mode": "Webhook"},
        "containerRuntimeEndpoint": "unix:///run/containerd/containerd.sock",
        "cgroupDriver": "cgroupfs", "cgroupRoot": "/kubelet", "failSwapOn": False,
        "clusterDNS": [DNS_IP], "clusterDomain": "cluster.local",
        # Docker's 127.0.0.11 is unreachable from a pod: pods with dnsPolicy Default get none.
        "resolvConf": "/etc/kubernetes/resolv.conf",
        # kind's settings: no image garbage collection, no eviction on a full disk.
        "imageGCHighThresholdPercent": 100,
        # Pull a pod's images side by side: a testbed's first `up` pulls several at once.
        "serializeImagePulls": False,
        "evictionHard": {"nodefs.available": "0%", "nodefs.inodesFree": "0%",
                         "imagefs.available": "0%"},
    }
    proxy = {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1", "kind": "KubeProxyConfiguration",
        "clientConnection": {"kubeconfig": "/etc/kubernetes/kube-proxy.kubeconfig"},
        "mode": "iptables", "clusterCIDR": CLUSTER_CIDR,
        # The conntrack sysctls are the host's, not the worker's: leave them (as kind does).
        "conntrack": {"maxPerCore": 0, "tcpEstablishedTimeout": "0s",
                      "tcpCloseWaitTimeout": "0s"},
    }
    cni = {"cniVersion": "0.4.0", "name": "kube-test", "plugins": [
        {"type": "bridge", "bridge": "cni0", "isGateway": True, "hairpinMode": True,
         "ipMasq": False, "ipam": {"type": "host-local", "routes": [{"dst": "0.0.0.0/0"}],
                                   "ranges": [[{"subnet": f"10.244.{index}.0/24"}]]}},
        {"type": "portmap", "capabilities": {"portMappings": True}}]}
    containerd = f"""version = 2
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{pause_image}"
  # Lowering oom_score_adj needs CAP_SYS_RESOURCE, which workers lack (the CRI asks -998).
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
      SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "/etc/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "/etc/containerd/certs.d"
"""
    hosts = (f'server = "http://{registry_ip}:5000"\n\n[host."http://{registry_ip}:5000"]\n'
             '  capabilities = ["pull", "resolve"]\n').encode()
    return {
        "/etc/kubernetes/pki/ca.crt": ca,
        "/etc/kubernetes/kubelet.kubeconfig": kubeconfig(server, ca, crt, key,
                                                         f"system:node:{node}"),
        "/etc/kubernetes/kube-proxy.kubeconfig": kubeconfig(server, ca, proxy_crt, proxy_key,
                                                            "system:kube-proxy"),
        "/etc/kubernetes/kubelet.yaml": json.dumps(kubelet, indent=2).encode(),
        "/etc/kubernetes/kube-proxy.yaml": json.dumps(proxy, indent=2).encode(),
        "/etc/kubernetes/resolv.conf": b"",
        "/etc/cni/net.d/10-kube-test.conflist": json.dumps(cni, indent=2).encode(),
        "/etc/containerd/config.toml": containerd.encode(),
        # Pods name localhost:5000/...; the host's name for the registry works too.
        f"/etc/containerd/certs.d/{IN_CLUSTER_REGISTRY}/hosts.toml": hosts,
        f"/etc/containerd/certs.d/127.0.0.1:{registry_port}/hosts.toml": hosts,
    }


def tar_of(files: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for path, data in sorted(files.items()):
            info = tarfile.TarInfo(path.lstrip("/"))
            info.size, info.mode = len(data), 0o600 if path.endswith(".key") else 0o644
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


# --- the cluster ----------------------------------------------------------------------

class ImageStores(dict):
    """Worker index -> volume name, chosen under a lock so that two clusters made at once
    do not both take the shared image cache (released once the workers hold it)."""

    def __init__(self, lock: Path):
        super().__init__()
        lock.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._lock = open(lock, "a")  # noqa: SIM115 (held until release)
        fcntl.flock(self._lock, fcntl.LOCK_EX)

    def release(self) -> None:
        if not self._lock.closed:
            self._lock.close()      # closing drops the flock


class TestCluster:
    def __init__(self, name: str):
        if not re.fullmatch(r"[a-z0-9][a-z0-9-]{0,39}", name):
            raise Fail(f"invalid cluster name {name!r}: use 1-40 lower-case letters, "
                       "digits and '-'")
        self.name = name
        self.client = docker.from_env()
        self.state = state_dir(name)
        self.record_path = self.state / "cluster.json"

    def container(self, host: str) -> str:
        return f"{self.name}-{host}"

    def ours(self) -> dict:
        mine = {"label": f"{LABEL}={self.name}"}
        return {"containers": self.client.containers.list(all=True, filters=mine),
                "networks": self.client.networks.list(filters=mine),
                "volumes": self.client.volumes.list(filters=mine)}

    @property
    def record(self) -> dict:
        return json.loads(self.record_path.read_text())

    # up ------------------------------------------------------------------------
    @property
    def egress_name(self) -> str:
        """The name host/egress keys this cluster's bridge and DROP rule by."""
        return f"kube-test-{self.name}"

    def keep_offline(self) -> None:
        """Nothing the machines or their pods send leaves the machine: the network has no
        NAT, and (as for the testbed's login networks, host/egress) DOCKER-USER drops
        whatever its bridge would forward to another interface. Between the machines
        (pod to pod across workers) is bridge to bridge, and the host's connections to the
        published ports are its own traffic. Made again by every `up` (a host restart
        empties the chain)."""
        if warning := keep_bridge_offline(self.egress_name):
            say(f"warning: {warning}")

    def up(self, timeout: float) -> None:
        self.keep_offline()
        containers = self.ours()["containers"]
        if len(containers) == len(HOSTS) and self.record_path.is_file():
            if all(c.status == "running" for c in containers):
                say(f"{self.name} is already running")
                self.wait_api(timeout)
                self.apply_addons(self.record, timeout)     # unchanged ones stay as they are
                self.wait_ready(timeout, started=None)
                self.print_info()
                return
            say(f"{self.name} exists but is stopped: starting it")
            started, since = time.monotonic(), datetime.datetime.now(datetime.UTC)
            for host in HOSTS:                      # the registry and API before the workers
                self.client.containers.get(self.container(host)).start()
            self.wait_api(timeout)
            self.apply_addons(self.record, timeout)
            # The nodes' Ready from before the stop counts only once their kubelets report again.
            self.wait_ready(timeout, started, since=since.replace(microsecond=0))
            self.print_info()
            return
        if any(self.ours().values()):
            say(f"{self.name} is incomplete: removing what is left of it first")
            self.down()
        self.create(timeout)

    def create(self, timeout: float) -> None:
        bin_dir = binaries()
        images = ensure_images(self.client, bin_dir)
        labels = {LABEL: self.name}
        subnet = self.free_subnet()
        ip = {host: str(subnet[n]) for host, n in HOSTS.items()}
        say(f"creating {self.name} on {subnet}")
        network = self.client.networks.create(
            f"{self.name}-net", driver="bridge", labels=labels,
            ipam=docker.types.IPAMConfig(pool_configs=[docker.types.IPAMPool(
                subnet=str(subnet), gateway=str(subnet[1]))]),
            # No NAT to the outside, and a DROP rule on its bridge (keep_offline): the
            # machines talk to each other and to the host only. (Not an internal network:
            # Docker's would drop the pod addresses routed between the workers.)
            options={"com.docker.network.bridge.enable_ip_masquerade": "false",
                     "com.docker.network.bridge.name": egress.front_bridge(self.egress_name)})
        shared = self.client.volumes.create(f"{self.name}-shared", labels=labels)
        api_port, registry_port = free_port(), free_port()
        pause_image = f"{IN_CLUSTER_REGISTRY}/kube-test/pause:{images['pause'].split(':')[1]}"
        coredns_image = f"{IN_CLUSTER_REGISTRY}/kube-test/coredns:{images['coredns'].split(':')[1]}"

        self.state.mkdir(parents=True, exist_ok=True, mode=0o700)
        pki = new_ca()
        admin_crt, admin_key = pki.issue("kube-test-admin", "system:masters")
        for stem, data in (("ca.crt", pki.cert_pem), ("admin.crt", admin_crt),
                           ("admin.key", admin_key)):
            write_private(self.state / stem, data)
        write_private(self.state / "kubeconfig", kubeconfig(
            f"https://127.0.0.1:{api_port}", pki.cert_pem, admin_crt, admin_key,
            "kube-test-admin"))
        record = {"name": self.name, "kubeconfig": str(self.state / "kubeconfig"),
                  "kubectl": str(bin_dir / "kubectl"), "api": f"https://127.0.0.1:{api_port}",
                  "registry": f"127.0.0.1:{registry_port}",
                  "in_cluster_registry": IN_CLUSTER_REGISTRY, "subnet": str(subnet),
                  "nodes": [self.container(w) for w in WORKERS], "images": images,
                  "pause_image": pause_image, "coredns_image": coredns_image,
                  "alcf_target": ALCF_TARGET, "dns_ip": DNS_IP}
        write_private(self.record_path, json.dumps(record, indent=2).encode())

        def run(host, files=None, command=None, environment=None, ports=None, volumes=None,
                systempaths_unconfined=False, **options):
            host_config = self.client.api.create_host_config(
                network_mode=network.name, port_bindings=ports, binds=volumes, **options)
            if systempaths_unconfined:      # what `--security-opt systempaths=unconfined` sends
                host_config["MaskedPaths"] = host_config["ReadonlyPaths"] = []
            created = self.client.api.create_container(
                images["node"], command=command, name=self.container(host),
                hostname=self.container(host), labels={**labels, ROLE: host},
                environment=environment, ports=list(ports or ()), host_config=host_config,
                networking_config=self.client.api.create_networking_config({
                    network.name: self.client.api.create_endpoint_config(ipv4_address=ip[host])}))
            if files:
                self.client.api.put_archive(created["Id"], "/", tar_of(files))
            self.client.api.start(created["Id"])

        started = time.monotonic()
        cache = None
        if REGISTRY_CACHE:
            self.cache_volume(REGISTRY_CACHE, "kube-test-registry")
            cache = {REGISTRY_CACHE: {"bind": "/var/lib/docker-registry", "mode": "rw"}}
        run("registry", command=["docker-registry", "serve", "/etc/docker/registry/kube-test.yml"],
            ports={5000: ("127.0.0.1", registry_port)}, volumes=cache)
        pushes = threading.Thread(target=self.push_system_images, daemon=True, args=(
            images, registry_port, {"pause": pause_image, "coredns": coredns_image}))
        pushes.start()
        stores = None
        try:
            run("control-plane", control_plane_files(pki, self.container("control-plane"),
                                                     ip["control-plane"]),
                command=["/usr/local/sbin/control-plane.sh"],
                environment={"NODE_IP": ip["control-plane"], "SERVICE_CIDR": SERVICE_CIDR,
                             "CLUSTER_CIDR": CLUSTER_CIDR},
                volumes={shared.name: {"bind": "/tmp/hostpath_pv", "mode": "rw"}},
                ports={6443: ("127.0.0.1", api_port)})
            stores = self.image_stores(labels)
            for index, worker in enumerate(WORKERS, start=1):
                var = self.client.volumes.create(f"{self.container(worker)}-var", labels=labels)
                routes = " ".join(f"10.244.{other}.0/24@{ip[w]}"
                                  for other, w in enumerate(WORKERS, start=1) if w != worker)
                # The workers are this test cluster's machines (containerd, kubelet), not the
                # testbed's nodes, which stay unprivileged. `--privileged` fails on this VM (no
                # process has CAP_SYS_RESOURCE, Docker 20.10 asks for it), so: every other
                # capability; no seccomp/AppArmor confinement and a writable /proc/sys (sysctls);
                # all devices and /dev/kmsg (kubelet's OOM watcher); a private cgroup namespace
                # (Docker 20.10 on cgroup v1 shares the host's); /tmp, /run on tmpfs, /var and
                # the image store in it on volumes (containerd's overlayfs must not sit on
                # overlay; the image store may be the shared cache, image_stores).
                run(worker, worker_files(pki, self.container(worker), index, ip["control-plane"],
                                         ip["registry"], registry_port, pause_image),
                    command=["/usr/local/sbin/worker.sh"],
                    environment={"NODE_NAME": self.container(worker), "NODE_IP": ip[worker],
                                 "CLUSTER_CIDR": CLUSTER_CIDR, "POD_ROUTES": routes},
                    cap_add=["ALL"], cap_drop=["SYS_RESOURCE"],
                    security_opt=["seccomp=unconfined", "apparmor=unconfined"],
                    systempaths_unconfined=True,
                    device_cgroup_rules=["a *:* rwm"], devices=["/dev/kmsg:/dev/kmsg:rwm"],
                    cgroupns="private", tmpfs={"/tmp": "", "/run": ""},
                    volumes={var.name: {"bind": "/var", "mode": "rw"},
                             stores[index]: {"bind": "/var/lib/containerd", "mode": "rw"},
                             shared.name: {"bind": "/tmp/hostpath_pv", "mode": "rw"}})
            stores.release()
            say("started the control plane, two workers and the registry")
            self.wait_api(timeout)
        finally:
            if stores is not None:
                stores.release()
            pushes.join(timeout)   # a push left half-done would leave its tag behind
        if getattr(self, "push_error", None):
            raise Fail(self.push_error)
        self.apply_addons(record, timeout)
        self.wait_ready(timeout, started)
        self.print_info()

    def cache_volume(self, name: str, kind: str) -> None:
        """A volume that outlives every test cluster (no cluster label: `down` keeps it)."""
        try:
            self.client.volumes.get(name)
        except NotFound:
            self.client.volumes.create(name, labels={"aitestbed.cache": kind})

    def image_stores(self, labels: dict) -> ImageStores:
        """The volume of each worker's /var/lib/containerd: the shared image cache where
        no other test cluster holds it (the caller releases the lock once the workers
        exist, which is what holding means), else volumes of this cluster's own."""
        stores = ImageStores(state_dir(self.name).parent / ".image-cache.lock")
        for index, worker in enumerate(WORKERS, start=1):
            name = f"{IMAGE_CACHE}-{index}" if IMAGE_CACHE else ""
            holders = [c.name for c in self.client.containers.list(
                all=True, filters={"volume": name})] if name else []
            if name and not holders:
                self.cache_volume(name, "kube-test-images")
            else:
                if holders:
                    say(f"the workers' image cache {name} is held by {holders[0]}: "
                        f"{worker} starts with an empty image store")
                name = self.client.volumes.create(f"{self.container(worker)}-images",
                                                  labels=labels).name
            stores[index] = name
        return stores

    def free_subnet(self) -> ipaddress.IPv4Network:
        """A /24 of NETWORK_POOL no Docker network or host route uses, by the name's hash."""
        used = []
        for net in self.client.networks.list():
            for config in (net.attrs.get("IPAM") or {}).get("Config") or []:
                if config.get("Subnet"):
                    used.append(ipaddress.ip_network(config["Subnet"], strict=False))
        routes = subprocess.run(["ip", "-4", "route"], capture_output=True, text=True).stdout
        used += [ipaddress.ip_network(r.split()[0], strict=False)
                 for r in routes.splitlines() if r and r.split()[0][0].isdigit()]
        subnets = list(NETWORK_POOL.subnets(new_prefix=24))
        start = int(hashlib.sha256(self.name.encode()).hexdigest(), 16) % len(subnets)
        for subnet in subnets[start:] + subnets[:start]:
            if not any(subnet.overlaps(u) for u in used):
                return subnet
        raise Fail(f"no free /24 left in {NETWORK_POOL}")

    def push_system_images(self, images: dict, port: int, names: dict) -> None:
        """pause and CoreDNS into the cluster's registry, while the machines start."""
        try:
            wait_for("the registry", lambda: http_ok(f"127.0.0.1:{port}", "/v2/"), 60, 0.1)
            for what, in_cluster in names.items():
                push(self.client, images[what], f"127.0.0.1:{port}/{in_cluster.split('/', 1)[1]}")
        except Exception as err:  # reported by the main thread
            self.push_error = f"pushing the system images failed: {err}"

    def kubectl(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
        record = self.record
        argv = [record["kubectl"], "--kubeconfig", record["kubeconfig"], *args]
        try:
            return subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=120)
        except subprocess.TimeoutExpired:
            return subprocess.CompletedProcess(argv, 1, "", "kubectl took over 120 s")

    def api(self, path: str) -> tuple[int, dict | str]:
        """GET path on the API server as the admin (status, JSON or text)."""
        record = self.record
        context = ssl.create_default_context(cafile=str(self.state / "ca.crt"))
        context.load_cert_chain(self.state / "admin.crt", self.state / "admin.key")
        host, port = record["api"].removeprefix("https://").split(":")
        conn = http.client.HTTPSConnection(host, int(port), context=context, timeout=5)
        try:
            conn.request("GET", path)
            response = conn.getresponse()
            body = response.read().decode()
        except (OSError, http.client.HTTPException):
            return 0, ""
        finally:
            conn.close()
        try:
            return response.status, json.loads(body)
        except ValueError:
            return response.status, body

    def wait_api(self, timeout: float) -> None:
        wait_for("the API server", lambda: self.api("/readyz")[0] == 200, timeout)

    def apply_addons(self, record: dict, timeout: float) -> None:
        manifest = string.Template((HERE / "addons.yaml").read_text()).substitute(
            coredns_image=record["coredns_image"], dns_ip=DNS_IP, alcf_target=record["alcf_target"])

        def applied():
            result = self.kubectl("apply", "-f", "-", stdin=manifest)
            self.last_error = result.stderr
            return result.returncode == 0
        try:
            wait_for("CoreDNS and the storage class to be applied", applied, timeout, 1)
        except Fail as err:
            raise Fail(f"{err}: {self.last_error.strip()}") from None

    def nodes_ready(self, since: datetime.datetime | None = None) -> bool:
        status, body = self.api("/api/v1/nodes")
        if status != 200:
            return False
        ready = {n["metadata"]["name"] for n in body["items"]
                 if any(c["type"] == "Ready" and c["status"] == "True" and (
                     since is None or datetime.datetime.fromisoformat(c["lastHeartbeatTime"])
                     >= since) for c in n["status"].get("conditions", []))}
        return ready >= set(self.record["nodes"])

    def dns_answers(self) -> bool:
        worker = self.client.containers.get(self.record["nodes"][0])
        result = worker.exec_run(["dig", "+short", "+time=1", "+tries=1", f"@{DNS_IP}",
                                  "kubernetes.default.svc.cluster.local"])
        return result.exit_code == 0 and result.output.decode().strip() == API_SERVICE_IP

    def wait_ready(self, timeout: float, started: float | None,
                   since: datetime.datetime | None = None) -> None:
        self.wait_api(timeout)
        wait_for("both workers to be Ready", lambda: self.nodes_ready(since), timeout)
        if started is not None:
            say(f"both workers Ready {time.monotonic() - started:.1f} s after the first container "
                "started")
        wait_for("CoreDNS to answer", self.dns_answers, timeout, 0.5)
        if started is not None:
            say(f"CoreDNS answering {time.monotonic() - started:.1f} s after the first container "
                "started")

    def print_info(self) -> None:
        record = self.record
        print(f"kube test cluster {self.name} is ready: nodes {', '.join(record['nodes'])}\n"
              f"  kubeconfig: {record['kubeconfig']}\n"
              f"  kubectl:    {record['kubectl']}\n"
              f"  registry:   {record['registry']}   (push there; pods pull it as "
              f"{IN_CLUSTER_REGISTRY}/<name>:<tag>)\n"
              f"  export KUBECONFIG={record['kubeconfig']}")

    # down ----------------------------------------------------------------------
    def down(self) -> None:
        found = self.ours()
        for container in found["containers"]:
            container.remove(force=True, v=True)
        for network in found["networks"]:
            network.remove()
        egress.remove(self.egress_name)
        for volume in found["volumes"]:
            volume.remove(force=True)
        if self.state.is_dir():
            shutil.rmtree(self.state)
        what = [f"{len(found[k])} {k}" for k in ("containers", "networks", "volumes")]
        say(f"removed {self.name}: {', '.join(what)}")


def write_private(path: Path, data: bytes) -> None:
    with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as out:
        out.write(data)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def http_ok(hostport: str, path: str) -> bool:
    conn = http.client.HTTPConnection(hostport, timeout=2)
    try:
        conn.request("GET", path)
        return conn.getresponse().status == 200
    except (OSError, http.client.HTTPException):
        return False
    finally:
        conn.close()


def push(client, local: str, remote: str) -> None:
    """Push a local image under the registry name `remote` (the extra tag is removed again)."""
    repo, tag = remote.rsplit(":", 1)
    client.images.get(local).tag(repo, tag)
    try:
        for chunk in client.images.push(repo, tag, stream=True, decode=True):
            if "error" in chunk:
                raise Fail(f"{remote}: {chunk['error']}")
    finally:
        client.images.remove(remote)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="kube_test_cluster.py", description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="The cluster's name comes from --name or KUBE_TEST_CLUSTER (default "
               "aitestbed-kube). See docs/kube-test-cluster.md.")
    parser.add_argument("--name", default=os.environ.get("KUBE_TEST_CLUSTER") or "aitestbed-kube",
                        help="the test cluster's name (default: $KUBE_TEST_CLUSTER or "
                             "aitestbed-kube)")
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="bring it up (or say it is running); returns when both "
                                   "workers are Ready and CoreDNS answers")
    up.add_argument("--timeout", type=float, default=300, help="seconds per wait (default 300)")
    sub.add_parser("down", help="remove its containers, network, volumes and state")
    info = sub.add_parser("info", help="kubeconfig, kubectl and registry of a running one")
    info.add_argument("--json", action="store_true", help="as JSON")
    args = parser.parse_args(argv)
    try:
        cluster = TestCluster(args.name)
        if args.command == "up":
            cluster.up(args.timeout)
        elif args.command == "down":
            cluster.down()
        elif not cluster.record_path.is_file():
            raise Fail(f"{args.name} is not up (make kube-test-cluster)")
        elif args.json:
            print(json.dumps(cluster.record, indent=2))
        else:
            cluster.print_info()
    except Fail as err:
        say(f"error: {err}")
        return 1
    except DockerException as err:
        say(f"error: Docker: {err}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
