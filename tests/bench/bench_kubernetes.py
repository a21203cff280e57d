"""Figures of the Kubernetes provider (printed, gating nothing): `make bench`.

On a Kubernetes test cluster of its own (make kube-test-cluster: two workers, a
registry, a ReadWriteMany class), side by side with the Docker provider in one run:
  - the Docker provider's warm `up` of the full profile (images built, a new cluster);
  - the Kubernetes provider's first `up` of the full profile (the class images pushed to
    the registry and pulled by the workers) and, after `destroy`, its second (the
    workers hold the images): all nodes ready; target 2x Docker's warm up. Where the
    pods ran (none may be left Pending);
  - the mini Graphcore subset from nothing (a new testbed; the workers hold its images):
    target 60 s;
  - a stopped worker: every node of the Graphcore subset ready again on the other
    worker; target 90 s.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

from benchlib import cli, destroy

SCRIPT = Path(__file__).resolve().parents[2] / "scripts/kube-test-cluster/kube_test_cluster.py"


def script(*args: str) -> subprocess.CompletedProcess:
    result = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True,
                            text=True, timeout=3600, check=False)
    if result.returncode:
        sys.exit(f"bench: kube_test_cluster.py {' '.join(args)} failed:\n{result.stderr}")
    return result


def kubectl(info: dict, *args: str) -> str:
    return subprocess.run([info["kubectl"], "--kubeconfig", info["kubeconfig"], *args],
                          capture_output=True, text=True, timeout=300, check=True).stdout


def placement(info: dict, cluster: str) -> Counter:
    pods = json.loads(kubectl(info, "-n", "aitestbed", "get", "pods", "-l",
                              f"aitestbed.cluster={cluster}", "-o", "json"))["items"]
    return Counter(p["spec"].get("nodeName") or "Pending" for p in pods
                   if not p["metadata"].get("deletionTimestamp"))


def idle_memory(info: dict, cluster: str) -> dict[str, float]:
    """node class -> mean memory (MiB) of its idle pods (their cgroup's memory.current)."""
    pods = json.loads(kubectl(info, "-n", "aitestbed", "get", "pods", "-l",
                              f"aitestbed.cluster={cluster}", "-o", "json"))["items"]
    sizes: dict[str, list[float]] = {}
    for pod in pods:
        result = subprocess.run(
            [info["kubectl"], "--kubeconfig", info["kubeconfig"], "-n", "aitestbed", "exec",
             pod["metadata"]["name"], "-c", "node", "--", "sh", "-c",
             "cat /sys/fs/cgroup/memory.current 2>/dev/null || "
             "cat /sys/fs/cgroup/memory/memory.usage_in_bytes"],
            capture_output=True, text=True, timeout=60, check=False)
        if result.returncode or not result.stdout.strip().isdigit():
            print(f"  (no memory figure from {pod['metadata']['name']}: "
                  f"{result.stderr.strip()[:120]})", flush=True)
            continue
        sizes.setdefault(pod["metadata"]["labels"]["aitestbed.class"], []).append(
            int(result.stdout) / 2**20)
    return {c: sum(v) / len(v) for c, v in sorted(sizes.items())}


def main() -> None:
    tag = uuid.uuid4().hex[:4]
    kube_name, docker_name, k8s_name = f"bk-{tag}", f"bench-d-{tag}", f"bench-k-{tag}"
    figures: dict[str, float] = {}
    # Workers with empty image stores (not the tests' shared cache): the first `up`
    # measures the pulls.
    os.environ["KUBE_TEST_IMAGE_CACHE"] = ""
    started = time.monotonic()
    script("--name", kube_name, "up")
    figures["kube_up"] = time.monotonic() - started
    info = json.loads(script("--name", kube_name, "info", "--json").stdout)
    env = {"KUBECONFIG": info["kubeconfig"], "AITESTBED_USER": "learner"}
    k8s = ["--provider", "kubernetes", "--registry", f"{info['registry']}/aitestbed",
           "--timeout", "1800"]
    os.environ.update(env)

    def said(key: str, value: float) -> None:
        figures[key] = value
        print(f"  {key}: {value:.1f} s", flush=True)

    try:
        said("docker", cli(docker_name, "up", "--profile", "alcf", "--timeout", "900"))
        destroy(docker_name)
        said("k8s_first", cli(k8s_name, "up", "--profile", "alcf", *k8s))
        destroy(k8s_name)
        said("k8s_second", cli(k8s_name, "up", "--profile", "alcf", *k8s))
        spread = placement(info, k8s_name)
        print(f"  pods per worker: {dict(spread)}", flush=True)
        time.sleep(60)  # idle: what each node class holds with nothing running
        idle = idle_memory(info, k8s_name)
        destroy(k8s_name)
        said("mini_gc", cli(k8s_name, "up", "--profile", "mini", "--systems",
                            "graphcore", *k8s))
        where = placement(info, k8s_name)
        worker = max((w for w in where if w != "Pending"), key=lambda w: where[w])
        lost = time.monotonic()
        subprocess.run(["docker", "stop", "-t", "1", worker], check=True, capture_output=True)
        time.sleep(2)
        cli(k8s_name, "wait", "--timeout", "300")
        said("worker_lost", time.monotonic() - lost)
        subprocess.run(["docker", "start", worker], check=True, capture_output=True)
    finally:
        destroy(docker_name)
        destroy(k8s_name)
        script("--name", kube_name, "down")
    ratio = figures["k8s_second"] / figures["docker"]
    print("The Kubernetes provider (a two-worker test cluster on this machine)")
    print(f"  make kube-test-cluster (binaries cached): {figures['kube_up']:.1f} s")
    print(f"  full profile, Docker provider, warm up: {figures['docker']:.1f} s")
    print(f"  full profile, Kubernetes, first up (pushes of what the registry lacks, the "
          f"workers' pulls): {figures['k8s_first']:.1f} s")
    print(f"  full profile, Kubernetes, second up (workers hold the images): "
          f"{figures['k8s_second']:.1f} s = {ratio:.2f}x Docker's (target 2x)")
    print(f"  pods per worker: {dict(spread)} (none may be Pending)")
    print("  idle memory per node (MiB, mean by class): "
          + ", ".join(f"{c} {m:.0f}" for c, m in idle.items()))
    print(f"  mini Graphcore subset from nothing: {figures['mini_gc']:.1f} s (target 60 s)")
    print(f"  {worker} stopped ({where[worker]} of its nodes): every node ready again after "
          f"{figures['worker_lost']:.1f} s (target 90 s)")


if __name__ == "__main__":
    main()
