"""Run a command on a node of a running cluster, as root or as a user (docker exec).

Checks only read the cluster through a probe, so unit tests pass a fake one.
"""

from __future__ import annotations

from typing import Protocol

import docker
from docker.errors import DockerException, NotFound

from aitestbed.host.engine import connect
from aitestbed.host.errors import AitestbedError
from aitestbed.host.naming import container_name


class Probe(Protocol):
    def run(self, node: str, command: str, user: str | None = None) -> tuple[int, str]:
        """(exit code, stdout and stderr) of `bash -c command` on node."""


class DockerProbe:
    """The real cluster's nodes, through the Docker engine."""

    def __init__(self, cluster: str, client: docker.DockerClient | None = None):
        self.cluster = cluster
        self.client = client or connect()

    def run(self, node: str, command: str, user: str | None = None) -> tuple[int, str]:
        name = container_name(self.cluster, node)
        try:
            container = self.client.containers.get(name)
            options = {"user": user, "workdir": f"/home/{user}"} if user else {}
            rc, out = container.exec_run(["bash", "-c", command], **options)
        except NotFound:
            raise AitestbedError(f"node {node} of cluster {self.cluster!r} has no container: "
                                 f"bring the cluster up with `aitestbed --name {self.cluster} up`"
                                 ) from None
        except DockerException as err:
            raise AitestbedError(f"cannot run a check on {node}: {err}") from None
        return rc, out.decode(errors="replace")
