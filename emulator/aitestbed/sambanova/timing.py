"""Compile time and step time on the emulated RDUs, calibrated to the documented runs.

Calibration points (seed 002, the ALCF SambaNova guides, SN10 and SN30):
- UNet compile: 358 s with 32x32 images and 1,844 s with 256x256 ("Compile times can
  be significant"): a power law in the image's pixels through both points.
- UNet2d, one instance on 4 tiles, batch 256, 256x256: "inner train loop time :
  374.68 for 10 epochs, number of global steps: 130, e2e samples_per_sec: 88.82",
  so 2.882 s a step.
- UNet2d, 8 data-parallel instances of 4 tiles, batch 256 each, 256x256: each prints
  e2e samples_per_sec between 564 and 808 (mean 660) over 10 global steps of
  8 x 256 samples, so 2.53 to 3.63 s a step: slower than alone on average (the
  instances share the node's host CPUs, PCIe and the gradient reduction) and with a
  large spread between them.
- GPT-2 1.5B, 4 tiles, batch 16, sequence 1024, 32 instances on 2 nodes: 800 steps in
  2,179 s, i.e. 2.724 s a step ("training_sequences_per_second: 192467.3" counts
  tokens: 32 x 800 x 16 x 1024 / 2179.2).

Everything else is ours, chosen to be plausible and said so where it is set: the
starters' figures (the guide documents no LeNet/logreg/FFN timing), GPT's compile
time, how contention grows with the number of instances and how much instances
differ.

Device time only: the caller advances its VirtualClock (aitestbed.devices.clock) by
what these functions return, and prints what it measures on that clock.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

# -- UNet2d ---------------------------------------------------------------------------
UNET_COMPILE_POINTS = ((32, 358.0), (256, 1844.0))  # (image side, seconds)
UNET_REFERENCE_SIDE = 256
UNET_REFERENCE_BATCH = 256
UNET_REFERENCE_TILES = 4
UNET_REFERENCE_STEP_SECONDS = 374.6789753437042 / 130  # 2.882 s
UNET_STEP_OVERHEAD_SECONDS = 0.02  # ours: host loop, DMA set-up per step
UNET_SPREAD = 0.16  # per-instance +-16 % (the guide's 8 instances span 564..808)

# -- GPT-2 ----------------------------------------------------------------------------
GPT_REFERENCE_PARAMETERS = 1_557_616_000  # GPT-2 XL, vocabulary 50,260, tied head
GPT_REFERENCE_BATCH = 16
GPT_REFERENCE_SEQ = 1024
GPT_REFERENCE_TILES = 4
GPT_REFERENCE_WORLD = 32
GPT_REFERENCE_STEP_SECONDS = 2179.2292835712433 / 800  # 2.724 s, per instance of 32
GPT_STEP_OVERHEAD_SECONDS = 0.05  # ours
GPT_SPREAD = 0.03  # ours: sntilestat shows the 32 instances evenly busy (90-92 % exec)
GPT_COMPILE_SECONDS = 2880.0  # ours: not documented; longer than UNet at 256x256

# -- Contention between data-parallel instances (ours, fitted to the UNet runs) ---------
# An instance among `world` runs contention(world) x slower than alone on average:
# 1.075 at 8 instances puts the mean UNet rate at ~660 samples/s as documented.
CONTENTION_PER_DOUBLING = 0.025

# -- Anything else: a graph traced from the model (ours) -------------------------------
# A session.run costs a host<->RDU round trip on top of the arithmetic; small models
# (the starters at batch 1) are all round trip. The arithmetic runs at what the UNet
# calibration implies per tile (its training FLOPs over its step time, ~2.1 TFLOP/s).
GENERIC_STEP_OVERHEAD_SECONDS = 0.0005
FLOPS_PER_TILE = 2.1e12
GENERIC_SPREAD = 0.05
# Compile time on parameters, log-log between these points and flat beyond them:
# a 10k-parameter graph compiles in 30 s, UNet (7.76 M parameters) at 32x32 in 358 s,
# a 1.5 B-parameter graph in GPT's time.
GENERIC_COMPILE_POINTS = ((10_000, 30.0), (7_760_097, 358.0),
                          (GPT_REFERENCE_PARAMETERS, GPT_COMPILE_SECONDS))
# A forward-only (inference) graph compiles in 0.6 of the training graph's time and
# runs in a third of a training step (no backward, no optimizer).
INFERENCE_COMPILE_RATIO = 0.6
INFERENCE_STEP_RATIO = 1 / 3
TRAINING_FLOPS_RATIO = 3.0  # forward + backward ~ 3x the forward's FLOPs

KINDS = ("unet2d", "gpt2", "generic")


@dataclass(frozen=True)
class Workload:
    """What one instance of a PEF runs: enough to time its compile and its steps.

    kind: "unet2d" (image_size = the square side), "gpt2" (seq_len; parameters default
    to GPT-2 1.5B), or "generic" (parameters and forward FLOPs of one sample, as traced).
    """

    kind: str = "generic"
    batch_size: int = 1
    tiles: int = 4
    image_size: int = 0
    seq_len: int = 0
    parameters: int = 0
    flops_per_sample: float = 0.0  # forward FLOPs of one sample (generic)
    inference: bool = False

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown workload kind {self.kind!r}: one of {', '.join(KINDS)}")
        if self.batch_size < 1 or self.tiles < 1:
            raise ValueError("a workload needs a batch size and tiles of at least 1")
        if self.kind == "unet2d" and self.image_size < 1:
            raise ValueError("a unet2d workload needs its image_size")
        if self.kind == "gpt2" and self.seq_len < 1:
            raise ValueError("a gpt2 workload needs its seq_len")

    def with_(self, **changes) -> Workload:
        return replace(self, **changes)


def _power_law(x: float, points: tuple[tuple[float, float], ...]) -> float:
    """log-log through consecutive points, extrapolated with the nearest segment."""
    (x0, y0), (x1, y1) = points[0], points[1]
    for low, high in zip(points, points[1:], strict=False):
        (x0, y0), (x1, y1) = low, high
        if x <= high[0]:
            break
    slope = math.log(y1 / y0) / math.log(x1 / x0)
    return y0 * (x / x0) ** slope


def _interpolate_flat(x: float, points: tuple[tuple[float, float], ...]) -> float:
    """log-log between the points, held flat beyond the first and last."""
    if x <= points[0][0]:
        return points[0][1]
    if x >= points[-1][0]:
        return points[-1][1]
    return _power_law(x, points)


def compile_seconds(workload: Workload) -> float:
    """Device seconds `compile` takes (on the host: no RDU is involved)."""
    if workload.kind == "unet2d":
        seconds = _power_law(workload.image_size, UNET_COMPILE_POINTS)
    elif workload.kind == "gpt2":
        parameters = workload.parameters or GPT_REFERENCE_PARAMETERS
        seconds = GPT_COMPILE_SECONDS * (parameters / GPT_REFERENCE_PARAMETERS) ** 0.3
    else:
        seconds = _interpolate_flat(max(1, workload.parameters), GENERIC_COMPILE_POINTS)
    return seconds * (INFERENCE_COMPILE_RATIO if workload.inference else 1.0)


def contention(world_size: int) -> float:
    """How much slower, on average, an instance runs among `world_size` data-parallel ones."""
    if world_size <= 1:
        return 1.0
    return 1.0 + CONTENTION_PER_DOUBLING * math.log2(world_size)


def _gpt_alone_step_seconds() -> float:
    return GPT_REFERENCE_STEP_SECONDS / contention(GPT_REFERENCE_WORLD)


def step_seconds(workload: Workload) -> float:
    """Device seconds for one step (one session.run) of one instance alone on its tiles."""
    w = workload
    if w.kind == "unet2d":
        per_sample = ((UNET_REFERENCE_STEP_SECONDS - UNET_STEP_OVERHEAD_SECONDS)
                      / UNET_REFERENCE_BATCH)
        per_sample *= (w.image_size / UNET_REFERENCE_SIDE) ** 2 * UNET_REFERENCE_TILES / w.tiles
        seconds = UNET_STEP_OVERHEAD_SECONDS + w.batch_size * per_sample * (
            INFERENCE_STEP_RATIO if w.inference else 1.0)
    elif w.kind == "gpt2":
        per_token = ((_gpt_alone_step_seconds() - GPT_STEP_OVERHEAD_SECONDS)
                     / (GPT_REFERENCE_BATCH * GPT_REFERENCE_SEQ))
        parameters = w.parameters or GPT_REFERENCE_PARAMETERS
        per_token *= parameters / GPT_REFERENCE_PARAMETERS * GPT_REFERENCE_TILES / w.tiles
        seconds = GPT_STEP_OVERHEAD_SECONDS + w.batch_size * w.seq_len * per_token * (
            INFERENCE_STEP_RATIO if w.inference else 1.0)
    else:
        ratio = 1.0 if w.inference else TRAINING_FLOPS_RATIO
        seconds = GENERIC_STEP_OVERHEAD_SECONDS + (
            w.batch_size * w.flops_per_sample * ratio / (w.tiles * FLOPS_PER_TILE))
    return seconds


def _spread(kind: str) -> float:
    return {"unet2d": UNET_SPREAD, "gpt2": GPT_SPREAD}.get(kind, GENERIC_SPREAD)


def instance_factor(kind: str, world_size: int, rank: int, seed: int = 0) -> float:
    """The step-time multiplier of instance `rank` among `world_size` (1 when alone).

    Contention on average, and a per-instance deviation that is fixed for a job (the
    seed, e.g. the Slurm job id) and spread evenly over the instances (a golden-ratio
    sequence), so that any 8 instances span most of the documented range.
    """
    if world_size <= 1:
        return 1.0
    offset = (seed * 0.7548776662466927) % 1.0
    u = 2.0 * ((offset + rank * 0.6180339887498949) % 1.0) - 1.0
    return contention(world_size) * (1.0 + _spread(kind) * u)


def instance_step_seconds(workload: Workload, world_size: int = 1, rank: int = 0,
                          seed: int = 0) -> float:
    """Device seconds for one step of instance `rank` among `world_size`."""
    return step_seconds(workload) * instance_factor(workload.kind, world_size, rank, seed)


def e2e_samples_per_second(workload: Workload, world_size: int = 1, rank: int = 0,
                           seed: int = 0) -> float:
    """The rate an instance prints: global samples (all instances') per second of its loop."""
    seconds = instance_step_seconds(workload, world_size, rank, seed)
    return workload.batch_size * max(1, world_size) / seconds

