"""Image cache figures (printed, gating nothing): `python tests/bench/bench_images.py`.

The issue's targets: the cache file of a profile's images <= 1.2 GB, `load` <= 90 s.
  1. save: base + OS layer + every class image of BENCH_PROFILE (built first if missing)
     to one file: its size and the time;
  2. load into a cold engine: a second dockerd of our own (own data root and socket, no
     network set-up, removed after), as a fresh CI runner has, so no layer is there
     already; then what `up` would build there (must be nothing);
  3. with Debian's docker-registry: push to a registry we run on 127.0.0.1 and pull into
     another cold engine.
The machine's own engine only gains and loses the registry's names for a moment.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import docker
from aitestbed.host import imagecache
from aitestbed.host.inventory import load as load_inventory

PROFILE = os.environ.get("BENCH_PROFILE", "alcf")
REGISTRY = "/usr/bin/docker-registry"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def local_registry(work: Path) -> Iterator[str]:
    """Debian's docker-registry on 127.0.0.1 (storage under `work`) while `with` lasts,
    answering when it is given: its HOST:PORT/bench."""
    port = free_port()
    config = work / "registry.yml"
    config.write_text(f"version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n"
                      f"    rootdirectory: {work / 'registry'}\n"
                      f"http:\n  addr: 127.0.0.1:{port}\n")
    registry = subprocess.Popen([REGISTRY, "serve", str(config)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/", timeout=1).close()
                break
            except OSError:
                if registry.poll() is not None:
                    sys.exit(f"bench: docker-registry exited ({registry.returncode})")
                time.sleep(0.1)
        yield f"127.0.0.1:{port}/bench"
    finally:
        registry.terminate()
        registry.wait(timeout=30)


class ColdEngine:
    """A dockerd with an empty data root, on its own socket, for as long as `with` lasts.

    Its default bridge is one of its own, with no container on it: `--bridge none` would
    make dockerd delete the host's docker0 at start (daemon_unix.go,
    removeDefaultBridgeInterface), cutting the machine's main engine off its network."""

    BRIDGE = "aitbcold0"

    def __init__(self, root: Path) -> None:
        self.root = root
        self.socket = f"unix://{root / 'docker.sock'}"

    def __enter__(self) -> docker.DockerClient:
        tag = self.root.name
        self.root.mkdir(parents=True)
        subprocess.run(["ip", "link", "del", self.BRIDGE], stderr=subprocess.DEVNULL,
                       check=False)
        subprocess.run(["ip", "link", "add", self.BRIDGE, "type", "bridge"], check=True)
        self.process = subprocess.Popen(
            ["dockerd", "--data-root", str(self.root / "data"), "--exec-root",
             str(self.root / "exec"), "--pidfile", str(self.root / "docker.pid"),
             "--host", self.socket, "--bridge", self.BRIDGE, "--iptables=false",
             "--ip-forward=false",
             "--ip-masq=false", "--containerd-namespace", tag,
             "--containerd-plugins-namespace", f"{tag}-plugins",
             "--insecure-registry", "127.0.0.1/8"],
            stdout=subprocess.DEVNULL, stderr=open(self.root / "dockerd.log", "wb"))
        for _ in range(120):
            try:
                client = docker.DockerClient(base_url=self.socket, timeout=600)
                client.ping()
                return client
            except Exception:  # noqa: BLE001 - not up yet
                if self.process.poll() is not None:
                    sys.exit(f"bench: the cold dockerd did not start: see {self.root}/dockerd.log")
                time.sleep(0.5)
        sys.exit("bench: the cold dockerd did not answer in 60 s")

    def __exit__(self, *exc) -> None:
        self.process.terminate()
        self.process.wait(timeout=60)
        # dockerd bind-mounts its data root on itself; a daemon that died leaves it.
        subprocess.run(["umount", str(self.root / "data")], stderr=subprocess.DEVNULL,
                       check=False)
        shutil.rmtree(self.root, ignore_errors=True)
        subprocess.run(["ip", "link", "del", self.BRIDGE], stderr=subprocess.DEVNULL,
                       check=False)


def main() -> None:
    classes = load_inventory(PROFILE).class_systems
    client = docker.from_env(timeout=600)
    work = Path(tempfile.mkdtemp(prefix="bench-images-", dir=os.environ.get("BENCH_DIR")))
    figures: dict[str, str] = {}
    try:
        path = work / "images.aic"
        saved = imagecache.save(client, path, classes, imagecache.cache_key(classes), PROFILE)
        figures["images"] = f"{len(saved.tags)} ({', '.join(saved.tags)})"
        figures["images, uncompressed (GB)"] = f"{saved.uncompressed / 1e9:.2f}"
        figures["cache file (GB)"] = f"{saved.size / 1e9:.2f}   (target <= 1.2)"
        figures["save (s)"] = f"{saved.seconds:.0f}"
        print(*(f"  {k}: {v}" for k, v in figures.items()), sep="\n", flush=True)

        with ColdEngine(work / "cold-load") as cold:
            started = time.monotonic()
            loaded = imagecache.load(cold, path)
            figures["load into a cold engine (s)"] = (
                f"{time.monotonic() - started:.0f}   (target <= 90; verify "
                f"{loaded.verify_seconds:.0f}, docker load {loaded.seconds:.0f})")
            figures["`up` would build after the load"] = (
                ", ".join(imagecache.missing(cold, classes)) or "nothing")

        if Path(REGISTRY).exists():
            with local_registry(work) as where:
                started = time.monotonic()
                imagecache.push(client, where, classes)
                figures["push (s)"] = f"{time.monotonic() - started:.0f}"
                with ColdEngine(work / "cold-pull") as cold:
                    started = time.monotonic()
                    imagecache.pull(cold, where, classes)
                    figures["pull into a cold engine (s)"] = f"{time.monotonic() - started:.0f}"
                    figures["`up` would build after the pull"] = (
                        ", ".join(imagecache.missing(cold, classes)) or "nothing")
        else:
            figures["push / pull"] = "skipped: Debian's docker-registry is not installed"
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"\naitestbed image cache benchmark, profile {PROFILE} ({os.cpu_count()} cores)")
    for label, value in figures.items():
        print(f"  {label:<36} {value}")


if __name__ == "__main__":
    main()
