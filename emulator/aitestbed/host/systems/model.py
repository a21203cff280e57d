"""What a registry entry is made of (host/systems/__init__.py says what each field is for):
the system, its artifacts and its `aitestbed run` targets. The entries import these from
here, so no entry imports the registry that lists it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from aitestbed.host.inventory import Topology
    from aitestbed.host.state import ClusterState


class NodeLike(Protocol):
    """What a run target reads of a node (host.jobrun.plan.NodeInfo, inventory.Node)."""

    name: str
    system: str
    node_class: str
    slurm_cluster: str


@dataclass(frozen=True)
class BuildContext:
    """What an artifact's build is given: the checkout, and the OS layer's tag (made when
    first asked: OpenPBS is compiled against it)."""

    root: Path
    node_os: Callable[[], str]


@dataclass(frozen=True)
class Artifact:
    """Something the roles copy from build/ that the host makes before an image build."""

    name: str  # as the progress line says it
    build: Callable[[BuildContext], object]
    note: str = ""  # its size and cost, where it has one worth saying
    # Files of the checkout it is made from besides emulator/ and roles/ (an image's tag
    # is a hash of them too).
    inputs: tuple[str, ...] = ()


@dataclass(frozen=True)
class RunTarget:
    """`aitestbed run --system NAME`: the node that takes the scripts and how they run."""

    name: str
    system: str
    scheduler: str  # slurm (sbatch on `host`), wsjob (bash in a login shell on `host`),
    # pbs (qsub on `host`)
    help: str
    # The nodes that may take the scripts, best first, from the system's own nodes.
    hosts: Callable[[Sequence[NodeLike]], list[NodeLike]]


@dataclass(frozen=True)
class System:
    name: str
    title: str  # what the CLI's help calls it
    node_classes: tuple[str, ...]
    scheduler: str
    artifacts: tuple[Artifact, ...] = ()
    run_targets: tuple[RunTarget, ...] = ()
    # At every `up`, after the node files are written: its records and credentials.
    prepare: Callable[[ClusterState, Topology], None] | None = None
    # After the accounts are published (the users' credentials): the resolved accounts.
    publish: Callable[[ClusterState, Topology, dict], None] | None = None
    guide: ModuleType | None = None
    # `aitestbed <group>` commands of its own (click commands: Metis's `metis`).
    commands: tuple = ()
    # A module of pytest fixtures for projects' tests (loaded by host/pytest_plugin).
    pytest_plugin: str = ""
