"""Where a cluster's nodes run (kind's pattern): `base.Provider` is what every provider
does; `docker` is today's. A cluster keeps the provider it was made with (its record's
`provider`).
"""

from __future__ import annotations

from aitestbed.host.errors import AitestbedError
from aitestbed.host.provider.base import ExecResult, NodeGone, NodeHandle, Provider

PROVIDERS = ("docker",)

__all__ = ["PROVIDERS", "ExecResult", "NodeGone", "NodeHandle", "Provider", "for_cluster",
           "get"]


def get(name: str = "docker", **options) -> Provider:
    """The provider called `name`."""
    if name == "docker":
        from aitestbed.host.provider.docker import DockerProvider
        return DockerProvider(**options)
    raise AitestbedError(f"unknown provider {name!r} (providers: {', '.join(PROVIDERS)})")


def for_cluster(cluster: str) -> Provider:
    """The provider the cluster was made with (Docker for one not made yet)."""
    from aitestbed.host.state import ClusterState
    state = ClusterState(cluster)
    return get(state.load().provider if state.exists() else "docker")
