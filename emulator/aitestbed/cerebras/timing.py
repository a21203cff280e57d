"""Compile, staging, step and checkpoint time on the emulated CS-2s, calibrated to the seeds.

Calibration points (seed 002, ALCF guide for Release 1.9.1; "GR" = GlobalRate):
- fc_mnist, batch 128, one CS-2: 10,000 steps at GR 26,905.42 (26,805.42 at step 9,950)
  while the last intervals ran at 157,300 and 125,599 samples/s. So the steady step is
  ~0.905 ms (141k samples/s, their mean) and the run had a fixed start-up cost of
  38.5 s (1,280,000 / 26,905.42 = 47.57 s of training); saving the checkpoint took
  the rest of the documented 53.12 s (5.55 s).
- BERT-large MSL128, batch 1024, one CS-2: GR 4,597.49 at step 100 and 6,493.27 at
  step 1,000, so a steady step of 0.1505 s after a 7.2 s warm-up; the checkpoint took
  71.96 s of the 229.66 s; interval rates alternate within ~9 % of the mean.
- GPT-J 6B, sequence 2048, global batch 130 (65,000 samples / 500 steps) on two CS-2:
  GR 33.83 at step 100 and 33.98 at step 500: 3.8216 s a step after a 2.1 s warm-up;
  the checkpoint took 641.3 s of the 2,554.18 s; interval rates within 0.3 %.

Ours, chosen to be plausible: the per-step overhead that does not scale with the
batch, data parallelism over N systems costing 5 % per doubling (all-reduce through
SwarmX), how rates jitter (one deterministic factor per block of 50 steps, spread per
model as in the seed), evaluation steps at a third of a training step, compile time
(log-log in parameters through 60 s, 7 min and 25 min), staging (weights sent at
10 GB/s, 45 s of device programming), and the "generic" kind for other models (the
arithmetic rate BERT implies, 1.75 PFLOP/s, 10 s of start-up).

Device time only: the caller advances its VirtualClock (aitestbed.devices.clock) by
what these functions return, and prints what it measures on that clock.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from aitestbed.cerebras.cs2 import CS2, Workload, batch_per_system
from aitestbed.devices.base import SystemSpec


@dataclass(frozen=True)
class Calibration:
    kind: str
    parameters: int
    seq_len: int
    batch_size: int  # global batch of the documented run
    num_csx: int
    step_seconds: float  # steady, at that batch and number of systems
    startup_seconds: float  # added to the first step
    checkpoint_seconds: float
    compile_seconds: float  # ours: the seeds do not show compile times
    spread: float  # +- fraction of the interval rates
    overhead_seconds: float  # per step, independent of the batch (ours)
    system_cores: int = 850_000  # the wafer of the documented run (CS-2; CS-3: 900,000)
    inference_ratio: float = 1 / 3  # an evaluation step against a training step
    eval_warmup: bool = True  # the first evaluation step pays the start-up too


WEIGHT_TRANSFER_BYTES_PER_SECOND = 10e9
PROGRAMMING_SECONDS = 45.0


def _staging(parameters: int) -> float:
    """An execute run's staging: the weights sent, the systems programmed."""
    return 4 * parameters / WEIGHT_TRANSFER_BYTES_PER_SECOND + PROGRAMMING_SECONDS


FC_MNIST = Calibration("fc_mnist", 62_710, 1, 128, 1,
                       step_seconds=128 / ((157_300.30 + 125_599.14) / 2),
                       startup_seconds=1_280_000 / 26_905.42 - 10_000 * 128 / (
                           (157_300.30 + 125_599.14) / 2),
                       checkpoint_seconds=53.11996841430664 - 1_280_000 / 26_905.42,
                       compile_seconds=60.0, spread=0.12, overhead_seconds=0.0005)


def _from_global_rates(kind: str, parameters: int, seq_len: int, batch_size: int, num_csx: int,
                       *, steps: int, rate_at_100: float, rate_at_end: float,
                       documented_seconds: float, compile_seconds: float, spread: float,
                       overhead_seconds: float) -> Calibration:
    """A run timed from its GlobalRate at step 100 and at its last step (of `steps`): the
    steady step from the steps between, the start-up what the first 100 took beyond
    them, the checkpoint what the documented total took beyond the training."""
    total = steps * batch_size / rate_at_end
    first = 100 * batch_size / rate_at_100
    return Calibration(kind, parameters, seq_len, batch_size, num_csx,
                       step_seconds=(total - first) / (steps - 100),
                       startup_seconds=first - 100 * (total - first) / (steps - 100),
                       checkpoint_seconds=documented_seconds - total,
                       compile_seconds=compile_seconds, spread=spread,
                       overhead_seconds=overhead_seconds)


BERT = _from_global_rates("bert", 335_000_000, 128, 1024, 1, steps=1000,
                          rate_at_100=4_597.49, rate_at_end=6_493.27,
                          documented_seconds=229.65675950050354, compile_seconds=420.0,
                          spread=0.09, overhead_seconds=0.005)
GPTJ = _from_global_rates("gptj", 6_053_381_344, 2048, 130, 2, steps=500,
                          rate_at_100=33.83, rate_at_end=33.98,
                          documented_seconds=2554.1804394721985, compile_seconds=1500.0,
                          spread=0.003, overhead_seconds=0.05)
# GPT-3 111M (Cerebras-GPT), the current docs' sample on one CS-3 (ALCF user guide,
# cerebras/running-a-model-or-program.md, Release 2.10): 400 steps of batch 120 at
# sequence 2048, "Processed 48000 training sample(s) in 820.575766695 seconds"; its
# evaluation ran at 1,163-1,173 samples/s (batch 120: 0.1026 s a step); the compile
# job ran 72 s before the execute job started; "A checkpoint save takes about 60 s
# per billion parameters". The release's total also counts the final checkpoint and
# the validation (its staging and 100 batches). The warm-up (10 s) is ours.
_GPT3_STARTUP, _GPT3_CHECKPOINT = 10.0, 60.0 * 0.111
_GPT3_EVAL = _staging(111_000_000) + 100 * 120 / 1170.0
_GPT3_STEP = (820.575766695 - _GPT3_STARTUP - _GPT3_CHECKPOINT - _GPT3_EVAL) / 400
GPT3 = Calibration("gpt3", 111_000_000, 2048, 120, 1, step_seconds=_GPT3_STEP,
                   startup_seconds=_GPT3_STARTUP, checkpoint_seconds=_GPT3_CHECKPOINT,
                   compile_seconds=72.0, spread=0.005, overhead_seconds=0.005,
                   system_cores=900_000, inference_ratio=(120 / 1170.0) / _GPT3_STEP,
                   eval_warmup=False)
CALIBRATIONS = {c.kind: c for c in (FC_MNIST, BERT, GPTJ, GPT3)}

# The current docs' example programs on one CS-3 (ALCF user guide,
# cerebras/example-programs.md, Release 2.10.0, 2025-10). Steps from the printed
# rates (batch / rate), checkpoints from the "Saving checkpoint" to "Saved checkpoint"
# times; batches from "Processed N training sample(s)" over the steps:
# - BERT-large MSL128: 1,000 steps, 3,720,000 samples (batch 3,720) in 1,017.47 s,
#   which also counts the checkpoint (ours: 60 s per billion parameters) and the
#   validation (its staging, 220 batches of 256 at ~6,665 samples/s); so 0.92 s a step.
# - GPT-J 6B: batch 120 at 44.75 samples/s (2.682 s a step), checkpoint 497.1 s.
# - Llama-2 7B (MSL 4096): 204,800 samples in 200 steps (batch 1,024) at 31.98
#   samples/s (32.02 s a step), checkpoint 464.5 s.
# - ESM-2 35M: 819,200 samples in 400 steps (batch 2,048) at ~980 samples/s
#   (2.09 s a step), checkpoints 9.1 s and 8.6 s.
# - ViT-Base/16: 570,000 samples in 200 steps (batch 2,850); its first 100 steps took
#   365.8 s (GlobalRate 779.18 samples/s: 3.658 s a step), checkpoint 9.5 s.
# - DiT 2B, patch 2: 467,200 samples in 400 steps (batch 1,168) at ~870 samples/s
#   (1.3425 s a step), checkpoints 181.2 s and 178.6 s.
# The docs' totals also count the staging before the run (device programming and,
# for ViT and DiT, 43 to 62 minutes of input workers priming): ours do not.
# Warm-ups, overheads and spreads are ours.
_BERT3_CHECKPOINT = 60.0 * 0.336
_BERT3_EVAL = _staging(336_226_108) + 220 * 256 / 6_665.64
_BERT3_STEP = (1_017.47348681 - 5.0 - _BERT3_CHECKPOINT - _BERT3_EVAL) / 1000


def _cs3(kind: str, parameters: int, seq_len: int, batch_size: int, samples_per_second: float,
         checkpoint_seconds: float, compile_seconds: float, spread: float,
         overhead_seconds: float) -> Calibration:
    """A one-CS-3 run timed from its printed rate, with a second's start-up."""
    return Calibration(kind, parameters, seq_len, batch_size, 1,
                       step_seconds=batch_size / samples_per_second, startup_seconds=1.0,
                       checkpoint_seconds=checkpoint_seconds, compile_seconds=compile_seconds,
                       spread=spread, overhead_seconds=overhead_seconds, system_cores=900_000)


CS3_CALIBRATIONS = {c.kind: c for c in (
    Calibration("bert", 336_226_108, 128, 3720, 1, step_seconds=_BERT3_STEP,
                startup_seconds=5.0, checkpoint_seconds=_BERT3_CHECKPOINT,
                compile_seconds=420.0, spread=0.02, overhead_seconds=0.005,
                system_cores=900_000, eval_warmup=False,
                inference_ratio=(256 / 6_665.64) / (0.005 + 256 * (_BERT3_STEP - 0.005) / 3720)),
    # kind, parameters, seq_len, batch, samples/s, checkpoint, compile, spread, overhead
    _cs3("gptj", 6_050_882_784, 2048, 120, 44.75, 497.141, 1500.0, 0.004, 0.05),
    _cs3("llama", 6_738_415_616, 4096, 1024, 31.98, 464.466, 1500.0, 0.001, 0.05),
    _cs3("esm2", 33_501_153, 1026, 2048, 980.0, 8.8, 120.0, 0.012, 0.005),
    _cs3("vit", 86_567_656, 197, 2850, 779.18, 9.452, 180.0, 0.03, 0.005),
    _cs3("dit", 2_130_055_168, 256, 1168, 870.0, 179.9, 900.0, 0.01, 0.05),
)}

DP_COST_PER_DOUBLING = 0.05
JITTER_BLOCK_STEPS = 50
INFERENCE_STEP_RATIO = 1 / 3
VALIDATE_COMPILE_RATIO = 0.2  # --validate_only stops after the first stages
GENERIC_FLOPS = 1.75e15  # training FLOPs/s per CS-2 that the BERT calibration implies
GENERIC_OVERHEAD_SECONDS = 0.0005
GENERIC_STARTUP_SECONDS = 10.0
GENERIC_SPREAD = 0.05


def data_parallel_factor(num_csx: int) -> float:
    """How much longer a step takes on num_csx systems than its batch share on one."""
    return 1.0 + DP_COST_PER_DOUBLING * math.log2(max(1, num_csx))


def _log_log(x: float, points: list[tuple[float, float]]) -> float:
    """Through consecutive (x, y) points on log-log axes, flat beyond the ends."""
    points = sorted(points)
    if x <= points[0][0]:
        return points[0][1]
    for (x0, y0), (x1, y1) in zip(points, points[1:], strict=False):
        if x <= x1:
            t = math.log(x / x0) / math.log(x1 / x0)
            return math.exp(math.log(y0) + t * (math.log(y1) - math.log(y0)))
    return points[-1][1]


def calibration(kind: str, system: SystemSpec = CS2) -> Calibration | None:
    """The kind's calibration measured on this wafer if there is one, else its other one."""
    measured_here = CS3_CALIBRATIONS.get(kind) if system.chip.cores == 900_000 else None
    return measured_here or CALIBRATIONS.get(kind) or CS3_CALIBRATIONS.get(kind)


def _per_sample_seconds(workload: Workload, system: SystemSpec = CS2) -> float:
    """Seconds one sample costs on the calibration's wafer, beyond the per-step overhead."""
    cal = calibration(workload.kind, system)
    if cal is None:
        flops = 6.0 * workload.parameters * workload.seq_len
        return flops / GENERIC_FLOPS
    share = batch_per_system(Workload(batch_size=cal.batch_size), cal.num_csx)
    reference = (cal.step_seconds / data_parallel_factor(cal.num_csx)
                 - cal.overhead_seconds) / share
    return reference * (workload.parameters * workload.seq_len) / (cal.parameters * cal.seq_len)


def relative_speed(system: SystemSpec = CS2, calibrated_on: int = CS2.chip.cores) -> float:
    """How much faster a step runs on `system` than on the wafer the calibration was
    measured on: by the cores (a CS-3 has 900,000, a CS-2 850,000). The seeds' models are
    calibrated on the CS-2, GPT-3 on the CS-3."""
    return system.chip.cores / calibrated_on


def steady_step_seconds(workload: Workload, num_csx: int = 1,
                        system: SystemSpec = CS2) -> float:
    """Device seconds of one step after the warm-up, without jitter."""
    cal = calibration(workload.kind, system)
    overhead = cal.overhead_seconds if cal else GENERIC_OVERHEAD_SECONDS
    speed = relative_speed(system, cal.system_cores if cal else CS2.chip.cores)
    seconds = (overhead + _per_sample_seconds(workload, system)
               * batch_per_system(workload, num_csx)
               ) * data_parallel_factor(num_csx) / speed
    if workload.training:
        return seconds
    return seconds * (cal.inference_ratio if cal else INFERENCE_STEP_RATIO)


def startup_seconds(workload: Workload, system: SystemSpec = CS2) -> float:
    cal = calibration(workload.kind, system)
    return cal.startup_seconds if cal else GENERIC_STARTUP_SECONDS


def jitter(workload: Workload, step: int, seed: int = 0, system: SystemSpec = CS2) -> float:
    """The deterministic rate factor of the block of steps holding `step` (1-based).

    A golden-ratio sequence over the blocks: evenly spread, so it averages out over
    a run and leaves the global rate where the calibration puts it.
    """
    cal = calibration(workload.kind, system)
    spread = cal.spread if cal else GENERIC_SPREAD
    block = (step - 1) // JITTER_BLOCK_STEPS
    u = 2.0 * ((0.5 + seed * 0.7548776662466927 + block * 0.6180339887498949) % 1.0) - 1.0
    return 1.0 + spread * u


def step_seconds(workload: Workload, step: int, num_csx: int = 1, seed: int = 0,
                 system: SystemSpec = CS2) -> float:
    """Device seconds of step `step` (1-based) of a run: warm-up on the first, jitter on all."""
    seconds = (steady_step_seconds(workload, num_csx, system)
               * jitter(workload, step, seed, system))
    cal = calibration(workload.kind, system)
    warmup = workload.training or cal is None or cal.eval_warmup
    return seconds + (startup_seconds(workload, system) if step == 1 and warmup else 0.0)


def samples_per_second(workload: Workload, num_csx: int = 1, system: SystemSpec = CS2) -> float:
    """The steady global rate, all systems together."""
    return workload.batch_size / steady_step_seconds(workload, num_csx, system)


def _parameter_points(field: str) -> list[tuple[float, float]]:
    return [(c.parameters, getattr(c, field)) for c in CALIBRATIONS.values()]


def checkpoint_seconds(workload: Workload, system: SystemSpec = CS2) -> float:
    """Device seconds to gather the weights from MemoryX and write a checkpoint: the
    docs' time for a model they ran on this wafer (in proportion to its parameters),
    else along the calibrations' points."""
    cal = CS3_CALIBRATIONS.get(workload.kind) if system.chip.cores == 900_000 else None
    if cal is not None:
        return cal.checkpoint_seconds * workload.parameters / cal.parameters
    return _log_log(workload.parameters, _parameter_points("checkpoint_seconds"))


def compile_seconds(workload: Workload, validate_only: bool = False) -> float:
    seconds = _log_log(workload.parameters, _parameter_points("compile_seconds"))
    return seconds * (VALIDATE_COMPILE_RATIO if validate_only else 1.0)


def weight_transfer_seconds(workload: Workload) -> float:
    """Sending the initial fp32 weights to MemoryX."""
    return 4 * workload.parameters / WEIGHT_TRANSFER_BYTES_PER_SECOND
