"""The systems registry: what each system of the testbed adds to the host's work.

A system is one room (emulator/aitestbed/<name>/: its device model, service, tools,
scheduler hooks and guide workflows), its roles and inventory group, and one entry
here (host/systems/<name>.py) that declares:

  node_classes    the node classes its playbook configures (playbooks/<name>.yml); a class
                  several systems configure (login) is built with the plays of the
                  systems a topology has (Topology.class_systems)
  artifacts       what its roles copy that is built on the host (build/<name>/...)
  scheduler       how its jobs are scheduled: slurm, wsjob (the appliance's API), pbs;
                  service: none (an API users call, Metis)
  run_targets     `aitestbed run --system NAME`: which node submits or runs the scripts
  prepare         the typed records its nodes read from the state directory, written at
                  every `up` (the PBS complex, the Cerebras cluster and its credentials)
  guide           its guide workflows (the room's guide module)

Host code asks the registry (`names()`, `get()`, `needed()`, ...) and names no system;
adding a system is one room and one entry in SYSTEMS below
(tests/unit/test_systems_registry.py holds host/ to that).
"""

from __future__ import annotations

from collections.abc import Iterable

from aitestbed.host.systems.model import (
    Artifact,
    BuildContext,
    NodeLike,
    RunTarget,
    System,
)

__all__ = ["Artifact", "BuildContext", "NodeLike", "RunTarget", "System", "artifact_inputs",
           "artifacts", "common_artifacts", "configuring", "describe", "every", "get",
           "names", "of", "pytest_plugins", "registry", "run_targets"]


def _entries() -> tuple[System, ...]:
    from aitestbed.host.systems import cerebras, graphcore, groq, metis, sambanova
    return (cerebras.SYSTEM, graphcore.SYSTEM, sambanova.SYSTEM, groq.SYSTEM, metis.SYSTEM)


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


def commands() -> list:
    """The systems' own `aitestbed` commands (click), in the registry's order."""
    return [c for s in every() for c in s.commands]


def pytest_plugins() -> list[str]:
    """The systems' pytest fixture modules (host/pytest_plugin loads them)."""
    return [s.pytest_plugin for s in every() if s.pytest_plugin]


def run_targets() -> dict[str, RunTarget]:
    """`aitestbed run --system` choices, in the registry's order."""
    return {t.name: t for s in every() for t in s.run_targets}


def configuring(node_class: str, system_names: Iterable[str]) -> tuple[str, ...]:
    """Those of these systems whose playbook configures this node class."""
    return tuple(s.name for s in of(system_names) if node_class in s.node_classes)


def describe(system_names: Iterable[str] | None = None) -> str:
    """'cerebras, graphcore, ...' for help texts and messages."""
    return ", ".join(system_names if system_names is not None else names())
