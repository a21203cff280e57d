"""The Cerebras CS-3 and ALCF's CS-3 cluster (the current docs), beside the CS-2 (cs2.py).

The WSE-3 has "900K cores with 48KB SRAM each, 44GB on-chip in total"; the cluster
"contains four CS-3 wafer scale engines (compute nodes), supported by 4 worker
nodes, 4 activation servers, 2 sets of 12 MemoryX, and 8 SwarmX nodes", the MemoryX
in two node groups (12 x 1128Gi for large models, 12 x 183Gi for smaller ones), and
"each memX node group can only be associated to a given job, hence we can have a
maximum of 2 training jobs" (ALCF user guide, cerebras/index.md and
example-programs.md, 2026).

The fit check is the CS-2's (cs2.check_fit) with this wafer. The timing is the
CS-2's calibration scaled by the cores (timing.relative_speed): the docs' CS-3
figures are for Release 2.10 models (GPT3-111m, Llama2-7B, ...) that the emulated
modelzoo does not train yet, so they do not calibrate it yet.
"""

from __future__ import annotations

from dataclasses import dataclass

from aitestbed.cerebras.cs2 import CS2, SRAM_PER_CORE
from aitestbed.devices.base import ChipSpec, SystemSpec

CORES = 900_000
WSE3 = ChipSpec(vendor="Cerebras", name="WSE-3", cores=CORES, core_name="cores",
                memory_bytes=CORES * SRAM_PER_CORE, memory_name="SRAM")
CS3 = SystemSpec(name="CS-3", chip=WSE3, chips=1)
ALCF_CLUSTER = SystemSpec(name="Cerebras CS-3 Wafer-Scale Cluster", chip=WSE3, chips=4)
MODELS = {spec.name: spec for spec in (CS2, CS3)}


@dataclass(frozen=True)
class SupportNodes:
    """The appliance's servers around the systems, as `csctl get cluster` shows them."""

    workers: int
    activation: int
    memoryx_groups: tuple[tuple[int, str], ...]  # (nodes, memory per node) per group
    swarmx: int

    @property
    def max_execute(self) -> int:
        """A MemoryX group serves one training job at a time."""
        return max(1, len(self.memoryx_groups))


ALCF_SUPPORT = SupportNodes(workers=4, activation=4,
                            memoryx_groups=((12, "1128Gi"), (12, "183Gi")), swarmx=8)


def system_spec(model: str) -> SystemSpec:
    """CS-2 or CS-3, by the name the inventory gives (cerebras_system_model)."""
    try:
        return MODELS[model]
    except KeyError:
        raise ValueError(f"unknown Cerebras system model {model!r}: one of "
                         f"{', '.join(MODELS)}") from None


def inventory_settings(hostvars: dict) -> dict:
    """What the inventory says of the cluster (the management node's variables):
    cerebras_release (the cluster server's release, which csctl follows),
    cerebras_system_model, and cerebras_support (the servers around the systems; their
    MemoryX groups bound the execute jobs that run at once). ValueError if malformed."""
    model = str(hostvars.get("cerebras_system_model", CS2.name))
    system_spec(model)
    support = hostvars.get("cerebras_support") or {}
    try:
        nodes = SupportNodes(
            workers=int(support.get("workers", 0)), activation=int(support.get("activation", 0)),
            memoryx_groups=tuple((int(n), str(m)) for n, m in support.get("memoryx_groups", ())),
            swarmx=int(support.get("swarmx", 0)))
    except (TypeError, ValueError, AttributeError):
        raise ValueError(f"cerebras_support is malformed: {support!r} (workers, activation, "
                         "swarmx: counts; memoryx_groups: [[nodes, memory], ...])") from None
    return {"release": str(hostvars.get("cerebras_release", "2.1.1")), "system_model": model,
            "support": {"workers": nodes.workers, "activation": nodes.activation,
                        "memoryx_groups": [list(g) for g in nodes.memoryx_groups],
                        "swarmx": nodes.swarmx},
            "max_execute": nodes.max_execute}
