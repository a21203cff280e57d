"""The systems registry: what each system of the testbed adds to the host's work.

A system is one room (emulator/aitestbed/<name>/: its device model, service, tools,
scheduler hooks and guide workflows), its roles and inventory group, and one entry
here (host/systems/<name>.py) that declares:

  node_classes    the node classes its playbook configures (playbooks/<name>.yml); a class
                  several systems configure (login) is built with the plays of the
                  systems a topology has (Topology.class_systems)
  artifacts       what its roles copy that is built on the host (build/<name>/...)
  scheduler       how its jobs are scheduled: slurm, wsjob (the appliance's API), pbs
  run_targets     `aitestbed run --system NAME`: which node submits or runs the scripts
  prepare         the typed records its nodes read from the state directory, written at
                  every `up` (the PBS complex, the Cerebras cluster and its credentials)
  guide           its guide workflows (the room's guide module)

Host code asks the registry (`names()`, `get()`, `needed()`, ...) and names no system;
adding a system is one room and one entry in SYSTEMS below
(tests/unit/test_systems_registry.py holds host/ to that).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
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
    scheduler: str  # slurm (sbatch on `host`), wsjob (bash in a login shell on `host`)
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


def _entries() -> tuple[System, ...]:
    from aitestbed.host.systems import cerebras, graphcore, groq, sambanova
    return (cerebras.SYSTEM, graphcore.SYSTEM, sambanova.SYSTEM, groq.SYSTEM)


_REGISTRY: dict[str, System] | None = None


def registry() -> dict[str, System]:
    """name -> System, in the order the testbed lists them."""
    global _REGISTRY
    if _REGISTRY is None:
        _REGISTRY = {s.name: s for s in _entries()}
    return _REGISTRY


def names() -> tuple[str, ...]:
    return tuple(registry())


def get(name: str) -> System:
    """The system called `name` (KeyError for one the registry does not have)."""
    return registry()[name]


def every() -> list[System]:
    return list(registry().values())


def of(system_names: Iterable[str]) -> list[System]:
    """These systems, in the registry's order (unknown names are left out)."""
    wanted = set(system_names)
    return [s for s in every() if s.name in wanted]


# Built for every image, whatever its systems (the common role copies them).
def common_artifacts() -> tuple[Artifact, ...]:
    from aitestbed.host.systems import common
    return common.ARTIFACTS


def artifacts(system_names: Iterable[str]) -> list[Artifact]:
    """What an image build for these systems needs from the host: the common artifacts,
    then each system's own."""
    return [*common_artifacts(), *(a for s in of(system_names) for a in s.artifacts)]


def artifact_inputs() -> list[str]:
    """The files every artifact is made from (beside emulator/ and roles/)."""
    every_artifact = [*common_artifacts(), *(a for s in every() for a in s.artifacts)]
    return sorted({path for a in every_artifact for path in a.inputs})


def run_targets() -> dict[str, RunTarget]:
    """`aitestbed run --system` choices, in the registry's order."""
    return {t.name: t for s in every() for t in s.run_targets}


def configuring(node_class: str, system_names: Iterable[str]) -> tuple[str, ...]:
    """Those of these systems whose playbook configures this node class."""
    return tuple(s.name for s in of(system_names) if node_class in s.node_classes)


def describe(system_names: Iterable[str] | None = None) -> str:
    """'cerebras, graphcore, ...' for help texts and messages."""
    return ", ".join(system_names if system_names is not None else names())
