"""Names of everything a cluster owns in the Docker engine.

Every container, network and volume is prefixed with the cluster name, so
several clusters (a practice one, CI's) live side by side without colliding.
"""

import os
import pwd
import re

from aitestbed.host.errors import AitestbedError

LABEL_CLUSTER = "aitestbed.cluster"
LABEL_NODE = "aitestbed.node"
LABEL_CLASS = "aitestbed.class"
LABEL_SYSTEM = "aitestbed.system"
LABEL_BUILD = "aitestbed.build"
# Who made a cluster's containers, networks and volumes: one Docker engine serves every
# member of the `docker` group, each with their own state directory and clusters.
LABEL_OWNER = "aitestbed.owner"


def owner() -> str:
    """This user, as the owner label names them: `alice (uid 1001)` (the uid's own name,
    whatever $USER says)."""
    try:
        user = pwd.getpwuid(os.getuid()).pw_name
    except KeyError:  # a uid without a passwd entry (a container's)
        user = "?"
    return f"{user} (uid {os.getuid()})"

_CLUSTER_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,39}$")


def check_cluster_name(name: str) -> str:
    if not _CLUSTER_NAME.match(name):
        raise AitestbedError(
            f"invalid cluster name {name!r}: use 1-40 lower-case letters, digits and '-', "
            "starting with a letter or digit"
        )
    return name


def container_name(cluster: str, node: str) -> str:
    return f"{cluster}-{node}"


def network_name(cluster: str) -> str:
    """The cluster's own network: internal (Docker drops what would leave it)."""
    return f"{cluster}-net"


def front_network_name(cluster: str) -> str:
    """The gate's published network: the login nodes' ssh ports are published from it (the
    gate forwards each to its login node on the internal network)."""
    return f"{cluster}-front"


def gate_name(cluster: str) -> str:
    """The container that publishes the login nodes' ssh (aitestbed.node.gate)."""
    return f"{cluster}-gate"


def volume_name(cluster: str, mount_point: str) -> str:
    """`/home` of cluster `ci-1` is the volume `ci-1-home`."""
    return f"{cluster}-{mount_point.strip('/').replace('/', '-')}"


def node_volume_name(cluster: str, node: str, path: str) -> str:
    """/var/spool/slurmctld of gc-slurmctld in ci-1: ci-1-gc-slurmctld-var-spool-slurmctld."""
    return f"{cluster}-{node}-{path.strip('/').replace('/', '-')}"
