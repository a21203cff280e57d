"""Run a command on a node of a running cluster, as root or as a user (through the
cluster's provider: docker exec, or a pod's exec).

Checks only read the cluster through a probe, so unit tests pass a fake one.
"""

from __future__ import annotations

from typing import Protocol

from aitestbed.host import provider as providers
from aitestbed.host.errors import AitestbedError
from aitestbed.host.provider import NodeGone, Provider


class Probe(Protocol):
    def run(self, node: str, command: str, user: str | None = None) -> tuple[int, str]:
        """(exit code, stdout and stderr) of `bash -c command` on node."""


class NodeProbe:
    """The real cluster's nodes, through its provider."""

    def __init__(self, cluster: str, provider: Provider | None = None):
        self.cluster = cluster
        self.provider = provider or providers.for_cluster(cluster)

    def run(self, node: str, command: str, user: str | None = None) -> tuple[int, str]:
        try:
            result = self.provider.exec(self.cluster, node, ["bash", "-c", command], user=user,
                                        workdir=f"/home/{user}" if user else None)
        except NodeGone as err:
            raise AitestbedError(f"cannot run a check on {node} of cluster {self.cluster!r} "
                                 f"({err}): bring the cluster up with `aitestbed --name "
                                 f"{self.cluster} up`") from None
        return result.exit_code, result.output
