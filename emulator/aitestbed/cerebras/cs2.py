"""The Cerebras CS-2 and its Wafer-Scale Cluster: what a compiled program must fit.

The WSE-2 has 850,000 cores with 48 KB of SRAM each, 40 GB on the wafer (seed 002,
"System Overview"). ALCF's cluster holds two CS-2 systems that run one job data
parallel.

The fit check is ours, a simple model of weight streaming: MemoryX holds the whole
model and streams it through the wafer one layer at a time, so the wafer must hold
at once
- the largest layer's weights in fp16 and their gradients in fp32 (6 bytes per
  parameter, mixed precision), and
- the live activations of the batch share of one CS-2: per sample, per token,
  ACTIVATION_BYTES_PER_UNIT bytes per hidden unit (about eight fp16 tensors of one
  layer: inputs, attention or MLP intermediates and their gradients);
within the USABLE_FRACTION of the SRAM that the program's code and routing leave.
So GPT-J 6B at sequence 2048 (batch 65 per CS-2 on two systems) needs ~10 GB and
BERT-large at MSL 128 and batch 1024 ~2.3 GB, while a 200,000-wide hidden layer
needs 240 GB for its weights alone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from aitestbed.devices.base import ChipSpec, OutOfMemoryError, SystemSpec

CORES = 850_000
SRAM_PER_CORE = 48 * 1024
WSE2 = ChipSpec(vendor="Cerebras", name="WSE-2", cores=CORES, core_name="cores",
                memory_bytes=CORES * SRAM_PER_CORE, memory_name="SRAM")
CS2 = SystemSpec(name="CS-2", chip=WSE2, chips=1)
ALCF_CLUSTER = SystemSpec(name="Cerebras Wafer-Scale Cluster", chip=WSE2, chips=2)

WEIGHT_BYTES_PER_PARAMETER = 2 + 4  # fp16 weight + fp32 gradient
ACTIVATION_BYTES_PER_UNIT = 16  # ~8 live fp16 values per hidden unit, token and sample
USABLE_FRACTION = 0.9

KINDS = ("fc_mnist", "bert", "gptj", "gpt3", "llama", "esm2", "vit", "dit", "generic")


class WaferOutOfMemoryError(OutOfMemoryError):
    """The compiled program does not fit the wafer's SRAM."""


@dataclass(frozen=True)
class Workload:
    """What a job runs, at its nominal (full) size, for the fit check and the timing.

    kind picks the timing calibration ("generic" for anything else); parameters is
    the whole model, largest_layer_parameters the biggest single layer (weights and
    bias); hidden_size and seq_len size the activations; batch_size is the global
    batch of one step (split over the CS-2 systems).
    """

    kind: str = "generic"
    parameters: int = 1
    largest_layer_parameters: int = 1
    hidden_size: int = 1
    seq_len: int = 1
    batch_size: int = 1
    training: bool = True
    micro_batch_size: int = 0  # samples a system holds at once (0: its whole batch share)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown workload kind {self.kind!r}: one of {', '.join(KINDS)}")
        if min(self.parameters, self.largest_layer_parameters, self.hidden_size,
               self.seq_len, self.batch_size) < 1:
            raise ValueError("a workload's sizes must all be at least 1")

    def with_(self, **changes) -> Workload:
        return replace(self, **changes)

    def as_dict(self) -> dict:
        return {"kind": self.kind, "parameters": self.parameters,
                "largest_layer_parameters": self.largest_layer_parameters,
                "hidden_size": self.hidden_size, "seq_len": self.seq_len,
                "batch_size": self.batch_size, "training": self.training,
                **({"micro_batch_size": self.micro_batch_size} if self.micro_batch_size else {})}


def batch_per_system(workload: Workload, num_csx: int) -> int:
    return math.ceil(workload.batch_size / max(1, num_csx))


def weight_bytes(workload: Workload) -> int:
    return WEIGHT_BYTES_PER_PARAMETER * workload.largest_layer_parameters


def resident_samples(workload: Workload, num_csx: int = 1) -> int:
    """The samples whose activations a wafer holds at once: its share of the batch, or
    the micro-batch it runs that share in."""
    share = batch_per_system(workload, num_csx)
    return min(share, workload.micro_batch_size) if workload.micro_batch_size > 0 else share


def activation_bytes(workload: Workload, num_csx: int = 1) -> int:
    return (ACTIVATION_BYTES_PER_UNIT * resident_samples(workload, num_csx)
            * workload.seq_len * workload.hidden_size)


def usable_bytes(system: SystemSpec = CS2) -> int:
    return int(system.chip.memory_bytes * USABLE_FRACTION)


def wafer_bytes(workload: Workload, num_csx: int = 1) -> int:
    """SRAM one system's wafer needs for this workload under weight streaming."""
    return weight_bytes(workload) + activation_bytes(workload, num_csx)


def _gb(size: int) -> str:
    return f"{size / 1e9:.1f} GB"


def check_fit(workload: Workload, num_csx: int = 1, system: SystemSpec = CS2) -> int:
    """The bytes the program needs on each wafer of `system` (CS2, or cs3.CS3), or
    WaferOutOfMemoryError."""
    needed = wafer_bytes(workload, num_csx)
    chip = system.chip
    if needed > usable_bytes(system):
        raise WaferOutOfMemoryError(
            f"The model does not fit on the {system.name} wafer: it needs {_gb(needed)} of "
            f"SRAM per system ({_gb(weight_bytes(workload))} for the largest layer's "
            f"{workload.largest_layer_parameters:,} weights and their gradients, "
            f"{_gb(activation_bytes(workload, num_csx))} for the activations of "
            f"{resident_samples(workload, num_csx)} sample(s) per system), but only "
            f"{_gb(usable_bytes(system))} of the {_gb(chip.memory_bytes)} on the wafer "
            f"({chip.cores:,} cores x {chip.memory_per_core // 1024} KB) are available to it. "
            "Reduce the layer sizes, the batch size or micro_batch_size, or spread the "
            "batch over more systems with --num_csx.")
    return needed
