"""What a provider must do to run a cluster's nodes (kind's pattern: one interface, one
implementation per engine).

Everything above it is the same for every provider: the inventory and topology, the
state directory (records, secrets, the per-node and per-cluster files), readiness, the
ssh config, the playbooks and the CLI. A provider only knows how to provision a cluster
(what it takes of the host: ports, file systems; its network and volumes), create,
start, stop and remove a node from its class image, run a command in a node, and say
where a login node's ssh is reached. It is handed the cluster (host/cluster.py: state,
record, topology) and changes the record in place; its caller saves it.

Node names are the inventory's (`gc-poplar-01`); how a provider names what it makes
(a container `<cluster>-<node>`, a pod) is its own business.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from aitestbed.host import storage
from aitestbed.host.errors import AitestbedError
from aitestbed.host.inventory import Node, Topology
from aitestbed.host.naming import node_volume_name, volume_name

if TYPE_CHECKING:
    from aitestbed.host.cluster import Cluster

# The warning when /home and /projects are volumes (their quotas reported only); why follows.
NOT_ENFORCED = "/home and /projects quotas are reported, not enforced: "


@dataclass(frozen=True)
class NodeHandle:
    """A node as the provider has it."""
    node: str
    status: str  # running, exited, created, restarting, dead, ...
    image: str  # the image reference it was made from
    listen: str | None = None  # the address its ssh is published on (None: not published)
    # Why it cannot start, when its provider knows (an image the cluster cannot pull, no
    # machine with the CPU or memory it asks for); `wait` stops on it once it lasts.
    problem: str | None = None
    # The provider cannot keep it as it was made (Docker: a login node that publishes its
    # own ssh, made before the gate): `up` removes it and makes it again.
    remake: bool = False

    @property
    def running(self) -> bool:
        return self.status == "running"


@dataclass(frozen=True)
class ExecResult:
    exit_code: int
    stdout: bytes
    stderr: bytes  # empty unless asked for apart (then stdout holds both, in order)

    @property
    def output(self) -> str:
        return (self.stdout + self.stderr).decode(errors="replace")


# Seconds a node's problem (Unschedulable, ErrImagePull, claims not bound) may last before
# `up`/`wait` stop on it: it may pass (a volume still being bound).
PROBLEM_LASTS = 15.0


class Lasting:
    """Since when each node's problem has been seen without a break."""

    def __init__(self, clock=time.monotonic):
        self._since: dict[str, float] = {}
        self._clock = clock

    def lasted(self, node: str, problem: str | None) -> bool:
        """True once `problem` has been seen for PROBLEM_LASTS; no problem starts over."""
        if not problem:
            self._since.pop(node, None)
            return False
        since = self._since.setdefault(node, self._clock())
        return self._clock() - since >= PROBLEM_LASTS


@dataclass
class Provisioned:
    """What provisioning a cluster had to say."""
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # worth a line, not a warning


class NodeGone(Exception):
    """The node has no container or pod, or it stopped while a command ran."""


class Provider(ABC):
    """Where a cluster's nodes run."""

    name: str

    @abstractmethod
    def check(self) -> None:
        """An AitestbedError saying what to do when the provider cannot be reached (asked
        before anything of a cluster is made)."""

    def holder(self, cluster: str) -> str | None:
        """Who made what this provider already holds of a cluster of that name (the owner
        label's `user (uid N)`, or "" when it does not say), None when it holds nothing:
        asked before a cluster this user has no record of is made."""
        return None

    # the cluster's resources -----------------------------------------------------------
    @abstractmethod
    def provision(self, cluster: Cluster) -> Provisioned:
        """Before the cluster's state directory is prepared: what the cluster takes of
        this provider (the record's ssh ports, where /home and /projects live), its
        network and its volumes. Decisions go into `cluster.record`; the caller saves it."""

    def ensure_volumes(self, cluster: Cluster) -> None:
        """The shared file systems that are not the cluster's own, and each node's own
        volumes."""
        name, topology = cluster.name, cluster.topology
        for mount in sorted({m for n in topology.nodes for m in n.mounts}):
            if not storage.on_image(cluster.record, mount):
                self.ensure_volume(name, volume_name(name, mount), mount)
        for node in topology.nodes:
            for path in node.volumes:
                self.ensure_volume(name, node_volume_name(name, node.name, path), path)

    def before_start(self, cluster: Cluster, existing: dict[str, NodeHandle]) -> list[str]:
        """After the state directory is prepared, before nodes are made or started
        (`existing`: the nodes the provider has): the host's part; warnings."""
        return []

    def after_start(self, cluster: Cluster) -> bool:
        """After the nodes started: what the provider learns only then (where the login
        nodes' ssh is reached) goes into the record; True when it changed."""
        return False

    def publish(self, cluster: Cluster, address: str) -> list[str]:
        """Publish the login nodes' ssh on `address` (made again where they must be); the
        nodes made again."""
        raise AitestbedError(
            f"cluster {cluster.name!r} runs on the {cluster.record.provider} provider: its login "
            "nodes are reached through their Services (docs/kubernetes.md), not a host address")

    @abstractmethod
    def ensure_images(self, node_classes: list[str]) -> dict[str, str]:
        """class -> the image reference nodes of that class are made from (built or
        checked here; an unusable image is an AitestbedError naming it)."""

    @abstractmethod
    def ensure_network(self, cluster: str, topology: Topology) -> list[str]:
        """The cluster's internal network (and, for login nodes, the way in); warnings."""

    @abstractmethod
    def ensure_volume(self, cluster: str, volume: str, mount: str) -> None:
        """A named volume of the cluster (kept by `down`, removed by `destroy`)."""

    # nodes -----------------------------------------------------------------------------
    @abstractmethod
    def nodes(self, cluster: str) -> dict[str, NodeHandle]:
        """Every node the provider has for this cluster, by node name."""

    @abstractmethod
    def create_node(self, cluster: Cluster, node: Node, image: str) -> None:
        """Make the node (not started) from `image`, with the state directory's files for
        it, its volumes and the shared file systems."""

    @abstractmethod
    def start_node(self, cluster: Cluster, node: Node) -> None:
        """Start a made node (an AitestbedError that says why when it cannot)."""

    @abstractmethod
    def stop_nodes(self, cluster: str, nodes: list[str]) -> None:
        """Stop these nodes, their volumes kept."""

    @abstractmethod
    def remove_nodes(self, cluster: str, nodes: list[str]) -> None:
        """Remove these nodes (stopped first), their volumes kept."""

    @abstractmethod
    def exec(self, cluster: str, node: str, argv: list[str], user: str | None = None,
             workdir: str | None = None, separate: bool = False) -> ExecResult:
        """Run argv on the node (as root, or as `user`); NodeGone if it cannot. The output
        is all in stdout, in the order written, unless `separate`."""

    @abstractmethod
    def logs(self, cluster: str, node: str, tail: int = 5) -> str:
        """The last lines the node's init wrote ('' when there are none)."""

    @abstractmethod
    def terminal_argv(self, cluster: str, node: str, argv: list[str], tty: bool,
                      user: str | None = None) -> list[str]:
        """The command line that runs argv on the node attached to this terminal."""

    @abstractmethod
    def ansible_vars(self, cluster: str, node: str) -> dict:
        """How Ansible reaches the node (its connection plugin and host)."""

    def sync_files(self, cluster: Cluster, nodes: list[str] | None = None) -> None:
        """Bring the nodes' copy of the state directory's files up to date (after the
        state directory changed while they run); nothing to do where they are bound."""
        return None

    @abstractmethod
    def destroy(self, cluster: str) -> list[str]:
        """Remove everything the provider made for the cluster; what was removed."""
