"""Node images in a container registry (Docker Registry HTTP API v2).

A local image <prefix>/<name>:<tag> lives in the registry HOST:PORT/PREFIX as
HOST:PORT/PREFIX/<name>:<tag>. The engine pushes and pulls schema2 manifests, whose
config blob is the image's config, so an image keeps its ID across a push and a pull
(the tags in images.py are hashes of image IDs: a pulled image set is the built one).
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Callable, Iterable

import docker
from docker.errors import APIError, DockerException, ImageNotFound

from aitestbed.host.errors import AitestbedError

_REGISTRY = re.compile(
    r"^(?P<host>[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?|\[[0-9A-Fa-f:]+\])"
    r"(?::(?P<port>[0-9]{1,5}))?(?P<path>(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*)/?$")
_MISSING = ("manifest unknown", "not found", "does not exist")


def check_registry(text: str) -> str:
    """HOST[:PORT][/PREFIX] with a host the engine cannot mistake for a Docker Hub user."""
    match = _REGISTRY.match(text.strip())
    host = match and match["host"]
    if not match or not ("." in host or match["port"] or host in ("localhost", "[::1]")
                         or host.startswith("[")):
        raise AitestbedError(
            f"bad registry {text!r}: give HOST:PORT/PREFIX (e.g. 127.0.0.1:5000/aitestbed); "
            "the host needs a port or a dot")
    return text.strip().rstrip("/")


def remote_name(registry: str, local: str) -> str:
    """127.0.0.1:5000/ci + aitestbed/login:abc -> 127.0.0.1:5000/ci/login:abc."""
    return f"{registry}/{local.rsplit('/', 1)[-1]}"


class _Layers:
    """Progress of a push or pull from the engine's per-layer messages: a line now and then."""

    def __init__(self, verb: str, name: str, every: float = 15.0) -> None:
        self.verb, self.name, self.every = verb, name, every
        self.bytes: dict[str, int] = {}
        self.started = self.shown = time.monotonic()

    def __call__(self, chunk: dict) -> None:
        detail = chunk.get("progressDetail") or {}
        if "id" in chunk and detail.get("current"):
            self.bytes[chunk["id"]] = detail["current"]
        now = time.monotonic()
        if now - self.shown >= self.every:
            self.shown = now
            print(f"aitestbed:   {self.verb} {self.name}: {sum(self.bytes.values()) / 1e6:.0f} MB"
                  f" in {now - self.started:.0f} s", file=sys.stderr, flush=True)


def _stream(registry: str, action: str, name: str, start: Callable[[], Iterable[dict]],
            progress: _Layers) -> None:
    """Run the engine's push or pull; any refusal becomes one AitestbedError."""
    try:
        for chunk in start():
            if "error" in chunk:
                raise AitestbedError(_refusal(registry, action, name, chunk["error"]))
            progress(chunk)
    except APIError as err:
        reason = err.explanation or str(err)
        raise AitestbedError(_refusal(registry, action, name, reason)) from None
    except DockerException as err:
        raise AitestbedError(_refusal(registry, action, name, str(err))) from None


def _refusal(registry: str, action: str, name: str, reason: str) -> str:
    reason = " ".join(str(reason).split())
    if any(m in reason for m in ("no basic auth", "unauthorized", "authentication required")):
        why = "it asks for credentials (log in with `docker login` first)"
    elif any(m in reason for m in ("connection refused", "no such host", "i/o timeout",
                                   "dial tcp", "server gave HTTP response")):
        why = "it is unreachable"
    else:
        why = "it refused"
    return f"registry {registry}: cannot {action} {name}: {why}: {reason}"


def push(client: docker.DockerClient, registry: str, local: str) -> str:
    """Push the local image as its registry name; the extra local tag is removed again."""
    remote = remote_name(registry, local)
    repository, tag = remote.rsplit(":", 1)
    client.images.get(local).tag(repository, tag)
    try:
        _stream(registry, "push", remote,
                lambda: client.api.push(repository, tag, stream=True, decode=True),
                _Layers("pushing", remote))
    finally:
        client.images.remove(remote, noprune=True)
    return remote


def pull_as(client: docker.DockerClient, registry: str, local: str) -> bool:
    """Pull the registry's copy of `local` and give it the local name. False when the
    registry has no such image; AitestbedError when it refuses or cannot be reached."""
    remote = remote_name(registry, local)
    repository, tag = remote.rsplit(":", 1)
    try:
        _stream(registry, "pull", remote,
                lambda: client.api.pull(repository, tag, stream=True, decode=True),
                _Layers("pulling", remote))
    except AitestbedError as err:
        if any(m in str(err) for m in _MISSING):
            return False
        raise
    try:
        image = client.images.get(remote)
    except ImageNotFound:
        return False
    local_repository, local_tag = local.rsplit(":", 1)
    image.tag(local_repository, local_tag)
    client.images.remove(remote, noprune=True)
    return True
