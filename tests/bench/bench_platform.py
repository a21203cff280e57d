"""Platform figures (printed, gating nothing): `make bench`.

For each profile: warm first `up` (images built, new cluster), `wait` on a
ready cluster, restart (`down` then `up`), idle memory of all containers and
image sizes. With BENCH_COLD=1 also a cold `up` per profile: every image rebuilt
from nothing (own image prefix, no build cache, debootstrap included), then
those images are removed again.
"""

from __future__ import annotations

import os
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import docker
from aitestbed.host.naming import LABEL_CLUSTER
from benchlib import cli, destroy

PROFILES = os.environ.get("BENCH_PROFILES", "mini,alcf").split(",")
IDLE_SECONDS = float(os.environ.get("BENCH_IDLE_SECONDS", "20"))
# kube-apiserver settles (its collector returns what start-up took) within a minute.
SETTLED_SECONDS = float(os.environ.get("BENCH_SETTLED_SECONDS", "60"))


def memory_mib(client: docker.DockerClient, name: str) -> float:
    """Sum over the cluster's containers of usage minus inactive file cache (as docker stats)."""
    containers = client.containers.list(filters={"label": f"{LABEL_CLUSTER}={name}"})

    def one(container) -> int:
        stats = container.stats(stream=False)["memory_stats"]
        return stats.get("usage", 0) - stats.get("stats", {}).get("inactive_file", 0)

    with ThreadPoolExecutor(8) as pool:
        return sum(pool.map(one, containers)) / 2**20


def image_sizes(client: docker.DockerClient, prefix: str = "aitestbed") -> list[tuple[str, int]]:
    sizes = []
    for image in client.images.list():
        for tag in image.tags:
            if tag.startswith(f"{prefix}/"):
                sizes.append((tag, image.attrs["Size"]))
    return sorted(sizes)


def bench_profile(client: docker.DockerClient, profile: str) -> dict[str, float]:
    name = f"bench-{profile}-{uuid.uuid4().hex[:4]}"
    figures = {}
    try:
        figures["warm first up (s)"] = cli(name, "up", "--profile", profile)
        figures["wait, cluster ready (s)"] = cli(name, "wait")
        time.sleep(IDLE_SECONDS)
        figures[f"idle memory after {IDLE_SECONDS:.0f} s (MiB)"] = memory_mib(client, name)
        time.sleep(max(0.0, SETTLED_SECONDS - IDLE_SECONDS))
        figures[f"idle memory after {SETTLED_SECONDS:.0f} s (MiB)"] = memory_mib(client, name)
        cli(name, "down")
        figures["restart: up after down (s)"] = cli(name, "up")
    finally:
        destroy(name)
    return figures


def bench_cold(client: docker.DockerClient, profile: str) -> float:
    prefix = f"aitestbed-cold-{uuid.uuid4().hex[:4]}"
    name = f"bench-cold-{uuid.uuid4().hex[:4]}"
    env = {"AITESTBED_IMAGE_PREFIX": prefix, "AITESTBED_NO_CACHE": "1"}
    try:
        return cli(name, "up", "--profile", profile, env=env)
    finally:
        destroy(name)
        for tag, _ in image_sizes(client, prefix):
            client.images.remove(tag, force=True)


def main() -> None:
    client = docker.from_env()
    print(f"aitestbed platform benchmark ({os.cpu_count()} cores)")
    for profile in PROFILES:
        print(f"\nprofile {profile}")
        for label, value in bench_profile(client, profile).items():
            print(f"  {label:<36} {value:8.1f}")
    if os.environ.get("BENCH_COLD") == "1":
        for profile in PROFILES:
            print(f"\ncold up of {profile}, nothing built (s)   {bench_cold(client, profile):8.1f}")
    print("\nimages")
    for tag, size in image_sizes(client):
        print(f"  {tag:<44} {size / 1e9:6.2f} GB")


if __name__ == "__main__":
    main()
