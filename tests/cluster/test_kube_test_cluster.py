"""The Kubernetes test cluster (make kube-test-cluster, scripts/kube-test-cluster/):
both workers Ready, a pod on each worker from an image pushed to the cluster's
registry, pod to pod across workers, cluster DNS (a headless Service's names, a fast
NXDOMAIN for an absent name) and a ReadWriteMany claim written on one worker and
read on the other.

The session's test cluster (conftest's kube_test_cluster: uniquely named, removed at
the end; AITESTBED_TEST_KUBE_CLUSTER=<name> uses that running one instead).
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import uuid

import docker
import pytest

from .conftest import Kube

pytestmark = [pytest.mark.cluster,
              pytest.mark.slow("a Kubernetes test cluster of its own (its binaries built from Go "
                               "once per machine)")]

BASE_IMAGE = os.environ.get("AITESTBED_BASE_IMAGE", "aitestbed/base:bookworm")
# A small image with a shell, glibc's resolver (getent) and busybox (httpd, wget).
PROBE_DOCKERFILE = f"""FROM {BASE_IMAGE}
RUN apt-get update && apt-get install -y --no-install-recommends busybox \\
 && rm -rf /var/lib/apt/lists/*
"""


@pytest.fixture(scope="module")
def kube(kube_test_cluster):
    """The session's test cluster (test_kube_provider has used it before); the probes in a
    namespace of their own. On the cluster we made, it is `aitestbed`, where the CoreDNS
    rewrite of <host>.alcf.anl.gov points; on another, one removed at the end."""
    kube = Kube(kube_test_cluster.name, kube_test_cluster.info,
                "aitestbed" if kube_test_cluster.ours else f"ktc-{uuid.uuid4().hex[:6]}")
    yield kube
    if not kube_test_cluster.ours:  # ours goes as a whole right after
        kube.kubectl("delete", "namespace", kube.ns, "--ignore-not-found", "--timeout=120s",
                     check=False, timeout=150)


@pytest.fixture(scope="module")
def probe_image(kube):
    """The probe image, pushed by the host to the registry; the name pods pull it by. Its
    tag is the cluster's name: the workers' image stores outlive a cluster (the cache,
    image_stores), so only a tag they cannot hold yet proves the pull from the registry."""
    client = docker.from_env()
    tag = "aitestbed/kube-test-probe:1"
    try:
        client.images.get(tag)
    except docker.errors.ImageNotFound:
        client.images.build(fileobj=io.BytesIO(PROBE_DOCKERFILE.encode()), tag=tag, rm=True)
    remote, unique, digest = f"{kube.info['registry']}/kube-test/probe", kube.name, ""
    client.images.get(tag).tag(remote, unique)
    try:
        for chunk in client.images.push(remote, unique, stream=True, decode=True):
            assert "error" not in chunk, chunk
            digest = chunk.get("aux", {}).get("Digest", digest)
    finally:
        client.images.remove(f"{remote}:{unique}")
    assert digest.startswith("sha256:"), "the push named no manifest digest"
    return f"{kube.info['in_cluster_registry']}/kube-test/probe:{unique}", digest


def _pod(name: str, hostname: str, node: str, image: str) -> dict:
    serve = "mkdir -p /www && hostname > /www/index.html && exec busybox httpd -f -p 8080 -h /www"
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {"app": "probe"}},
            "spec": {"hostname": hostname, "subdomain": "nodes",
                     "nodeSelector": {"kubernetes.io/hostname": node},
                     "terminationGracePeriodSeconds": 1,
                     "containers": [{"name": "probe", "image": image,
                                     "command": ["bash", "-c", serve],
                                     "readinessProbe": {"tcpSocket": {"port": 8080},
                                                        "periodSeconds": 1},
                                     "volumeMounts": [{"name": "shared",
                                                       "mountPath": "/shared"}]}],
                     "volumes": [{"name": "shared",
                                  "persistentVolumeClaim": {"claimName": "shared"}}]}}


@pytest.fixture(scope="module")
def probes(kube, probe_image):
    """Pods h1 on worker-1 and h2 on worker-2 behind the headless Service `nodes`, both
    mounting the ReadWriteMany claim `shared`: {hostname: (pod name, pod IP)}."""
    workers, (probe_image, _) = kube.info["nodes"], probe_image
    objects = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": kube.ns}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "nodes"},
         "spec": {"clusterIP": "None", "selector": {"app": "probe"},
                  "publishNotReadyAddresses": True, "ports": [{"port": 8080}]}},
        {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "shared"},
         "spec": {"accessModes": ["ReadWriteMany"],
                  "resources": {"requests": {"storage": "10Mi"}}}},
        _pod("probe-1", "h1", workers[0], probe_image),
        _pod("probe-2", "h2", workers[1], probe_image),
    ]
    kube.kubectl("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List",
                                                       "items": objects[:1]}))
    kube.kubectl("-n", kube.ns, "apply", "-f", "-",
                 stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects[1:]}))
    kube.kubectl("-n", kube.ns, "wait", "--for=condition=Ready", "pod", "-l", "app=probe",
                 "--timeout=180s", timeout=200)
    pods = json.loads(kube.kubectl("-n", kube.ns, "get", "pods", "-l", "app=probe", "-o", "json"))
    return {p["spec"]["hostname"]: (p["metadata"]["name"], p["status"]["podIP"], p)
            for p in pods["items"]}


def test_both_workers_are_ready(kube):
    nodes = json.loads(kube.kubectl("get", "nodes", "-o", "json"))["items"]
    ready = {n["metadata"]["name"] for n in nodes
             if any(c["type"] == "Ready" and c["status"] == "True"
                    for c in n["status"]["conditions"])}
    assert set(kube.info["nodes"]) <= ready


def test_a_pod_runs_on_each_worker_from_the_registry(kube, probes, probe_image):
    placed = {hostname: pod["spec"]["nodeName"] for hostname, (_, _, pod) in probes.items()}
    assert placed == {"h1": kube.info["nodes"][0], "h2": kube.info["nodes"][1]}
    ref, digest = probe_image
    for _, _, pod in probes.values():
        # A tag no worker held before, so resolved in the registry, to what the host pushed.
        # (The status's `image` names any one tag of that image: the workers' image cache
        # holds the probe under each earlier cluster's tag too. Its `imageID` is the digest.)
        assert pod["spec"]["containers"][0]["image"] == ref
        status = pod["status"]["containerStatuses"][0]
        assert status["ready"] and status["imageID"].endswith(f"@{digest}"), (status, digest)


def test_only_images_outlive_an_earlier_cluster_in_the_image_store(kube):
    """Each worker's /var/lib/containerd is the shared image cache (or, when another test
    cluster held it, a store of its own): an earlier cluster's images are there, but none
    of its containers: every container in the store was made after the worker started."""
    client = docker.from_env()
    listing = ("for c in $(ctr -n k8s.io containers ls -q); do "
               "ctr -n k8s.io containers info $c | grep -m1 '\"CreatedAt\"' | cut -d'\"' -f4; "
               "done")
    for index, node in enumerate(kube.info["nodes"], start=1):
        worker = client.containers.get(node)
        store = next(m for m in worker.attrs["Mounts"] if m["Destination"] == "/var/lib/containerd")
        assert store["Name"] in (f"aitestbed-kube-test-images-{index}", f"{node}-images")
        started = worker.attrs["State"]["StartedAt"][:19]      # UTC, to the second
        rc, out = worker.exec_run(["bash", "-c", listing])
        assert rc == 0, out
        created = out.decode().split()
        assert created, f"no container in {node}'s store"
        assert all(c[:19] >= started for c in created), (started, sorted(created)[:3])


def test_pod_to_pod_across_workers(kube, probes):
    (pod1, ip1, _), (pod2, ip2, _) = probes["h1"], probes["h2"]
    assert ip1 != ip2 and ip1.split(".")[2] != ip2.split(".")[2]      # two workers' ranges
    assert kube.sh(pod2, f"busybox wget -qO- http://{ip1}:8080/").strip() == "h1"
    assert kube.sh(pod1, f"busybox wget -qO- http://{ip2}:8080/").strip() == "h2"


def test_dns_names_of_a_headless_service(kube, probes):
    (pod1, ip1, _), (pod2, ip2, _) = probes["h1"], probes["h2"]
    every = kube.sh(pod1, f"getent ahostsv4 nodes.{kube.ns}.svc.cluster.local")
    assert {line.split()[0] for line in every.splitlines()} == {ip1, ip2}
    # the pod's own name through the search list, as a node's short name is used
    assert kube.sh(pod1, "getent hosts h2.nodes").split()[0] == ip2
    assert kube.sh(pod2, "busybox wget -qO- http://h1.nodes:8080/").strip() == "h1"
    if kube.ns == "aitestbed":       # the CoreDNS rewrite of the guide's FQDNs
        assert kube.sh(pod2, "getent hosts h1.ai.alcf.anl.gov").split()[0] == ip1


def test_an_absent_name_is_nxdomain_at_once(kube, probes):
    pod1 = probes["h1"][0]
    for name in ("no-such-node", "no-such-node.alcf.anl.gov", "www.example.org"):
        out = kube.sh(pod1, f"s=$(date +%s%N); getent hosts {name}; rc=$?; "
                            "echo $rc $(( ($(date +%s%N) - s) / 1000000 ))")
        rc, ms = out.split()[-2:]
        assert rc == "2", f"{name}: {out}"        # getent: not found (NXDOMAIN, not a failure)
        assert int(ms) < 1000, f"{name} took {ms} ms to be refused"


def test_a_readwritemany_claim_is_shared_by_both_workers(kube, probes):
    claim = json.loads(kube.kubectl("-n", kube.ns, "get", "pvc", "shared", "-o", "json"))
    assert claim["status"]["phase"] == "Bound"
    assert claim["status"]["accessModes"] == ["ReadWriteMany"]
    assert claim["spec"]["storageClassName"] == "shared"
    (pod1, _, _), (pod2, _, _) = probes["h1"], probes["h2"]
    token = uuid.uuid4().hex
    kube.sh(pod1, f"echo {token} > /shared/from-h1")
    assert kube.sh(pod2, "cat /shared/from-h1").strip() == token
    kube.sh(pod2, f"echo {token} >> /shared/from-h1")
    assert kube.sh(pod1, "cat /shared/from-h1").split() == [token, token]


def test_nothing_leaves_the_machine_from_the_test_cluster(kube):
    """As for the testbed's own networks (test_egress): no packet is sent to prove it;
    the network has no NAT and the host drops what its bridge would forward elsewhere."""
    from aitestbed.host import egress

    network = docker.from_env().networks.get(f"{kube.name}-net")
    options = network.attrs["Options"]
    assert options["com.docker.network.bridge.enable_ip_masquerade"] == "false"
    bridge = options["com.docker.network.bridge.name"]
    assert bridge == egress.front_bridge(f"kube-test-{kube.name}")
    rules = subprocess.run(["iptables", "-S", "DOCKER-USER"], capture_output=True,
                           text=True).stdout
    assert f"-i {bridge} ! -o {bridge}" in rules and "-j DROP" in rules, rules
    for container in docker.from_env().containers.list(
            filters={"label": f"aitestbed.kube-test-cluster={kube.name}"}):
        for bindings in (container.attrs["HostConfig"]["PortBindings"] or {}).values():
            assert all(b["HostIp"] == "127.0.0.1" for b in bindings or []), container.name
