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
