"""The connection to the Docker engine (Engine API >= 1.41)."""

from __future__ import annotations

import docker
from docker.errors import DockerException

from aitestbed.host.errors import AitestbedError

MIN_API = (1, 41)


def connect() -> docker.DockerClient:
    try:
        client = docker.from_env(timeout=120)
        version = client.version()
    except DockerException as err:
        reason = str(err).split("(")[0].strip() or "no answer"
        raise AitestbedError(
            f"no Docker engine is reachable ({reason}): run `make engine` as root to install "
            "and start Debian's docker.io, or start Docker and set DOCKER_HOST"
        ) from None
    api = tuple(int(p) for p in version.get("ApiVersion", "0.0").split(".")[:2])
    if api < MIN_API:
        raise AitestbedError(
            f"the Docker engine speaks API {version.get('ApiVersion')}; "
            "aitestbed needs 1.41 or newer"
        )
    return client


PODMAN = "Podman Engine"  # the name in its version's Components


def notes(info: dict, version: dict, podman_rootless: bool | None = None) -> list[str]:
    """What this engine does not give a cluster that root's Docker does, one line each
    (docs/install.md: rootless Docker and Podman, as tried). `info` and `version` as the
    Engine API answers them; `podman_rootless` from Podman's own /libpod/info."""
    said = []
    podman = any(c.get("Name") == PODMAN for c in version.get("Components") or [])
    rootless = "name=rootless" in (info.get("SecurityOptions") or []) or bool(podman_rootless)
    no_limits = info.get("MemoryLimit") is False or info.get("PidsLimit") is False or (
        rootless and str(info.get("CgroupVersion")) == "1")
    if no_limits:
        said.append("this engine enforces no memory or process limits (rootless on cgroup v1):"
                    " the gate's 128 MB and 64 processes are not held")
    if podman:
        said.append("Podman's DNS (aardvark-dns) forwards the nodes' lookups of outside names "
                    "to this machine's resolver; nothing else they send leaves the internal "
                    "network")
    return said


def describe(client: docker.DockerClient) -> list[str]:
    """notes() for the engine the client talks to."""
    try:
        info, version = client.info(), client.version()
    except DockerException:
        return []
    rootless = None
    if any(c.get("Name") == PODMAN for c in version.get("Components") or []):
        try:
            answer = client.api.get(client.api._url("/libpod/info"), timeout=10)
            rootless = bool(answer.json().get("host", {}).get("security", {}).get("rootless"))
        except (DockerException, ValueError, OSError):
            rootless = None
    return notes(info, version, rootless)
