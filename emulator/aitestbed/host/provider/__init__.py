"""Where a cluster's nodes run (kind's pattern): `base.Provider` is what every provider
does; `docker` runs them as containers on this host, `kubernetes` as pods on a cluster.
A cluster keeps the provider it was made with (its record's `provider` and
`provider_options`).
"""

from __future__ import annotations

from aitestbed.host.errors import AitestbedError
from aitestbed.host.provider.base import (
    ExecResult,
    NodeGone,
    NodeHandle,
    Provider,
    Provisioned,
)

PROVIDERS = ("docker", "kubernetes")

__all__ = ["PROVIDERS", "ExecResult", "NodeGone", "NodeHandle", "Provider", "Provisioned",
           "for_cluster", "get"]


def get(name: str = "docker", **options) -> Provider:
    """The provider called `name`."""
    if name == "docker":
        from aitestbed.host.provider.docker import DockerProvider
        return DockerProvider(**options)
    if name == "kubernetes":
        from aitestbed.host.provider.kubernetes import KubernetesProvider
        return KubernetesProvider(**options)
    raise AitestbedError(f"unknown provider {name!r} (providers: {', '.join(PROVIDERS)})")


def for_cluster(cluster: str) -> Provider:
    """The provider the cluster was made with (Docker for one not made yet)."""
    from aitestbed.host.state import ClusterState
    state = ClusterState(cluster)
    if not state.exists():
        return get("docker")
    record = state.load()
    return get(record.provider, **record.provider_options)
