"""Compile time and throughput on the emulated hardware, calibrated to documented runs.

Each calibration point is a run the ALCF guide shows (seed 002): its model's
parameter count, the IPUs it used, its compile time and its training rate.
Other models are interpolated log-log on parameters between the points (and
held at the ends), with throughput per IPU scaling with the IPUs used.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Calibration:
    name: str
    parameters: int
    ipus: int
    compile_seconds: float
    samples_per_second: float  # steady state, all IPUs
    micro_batch: int = 1  # the micro-batch of the documented run
    first_epoch_ratio: float = 1.0  # the first pass is slower (host-side warm-up)

    @property
    def samples_per_second_per_ipu(self) -> float:
        return self.samples_per_second / self.ipus


# MNIST (the tutorial's ConvNet, 225,034 parameters): "Graph compilation ... [00:20<00:00]",
# then 10 epochs of 60,000 images at batch 8 in ~1:35 with the compilation, so 75 s of
# training (8,000 samples/s); at batch 4 ~1:26 (cached), which the per-step overhead gives.
# ResNet50 pod4 (25,557,032 parameters, 4 IPUs): compile 6:26, 1886 then 4477 samples/s.
# GPT-2 small (124,439,808 parameters, 16 IPUs): compile ~28 min, ~1064 samples/s.
CALIBRATIONS = (
    Calibration("mnist", 225_034, 1, 20.0, 60_000 * 10 / 75.0, micro_batch=8),
    Calibration("resnet50-pod4", 25_557_032, 4, 386.0, 4477.0, micro_batch=16,
                first_epoch_ratio=1886 / 4477),
    Calibration("gpt2-16ipu", 124_439_808, 16, 28 * 60.0, 1064.0, micro_batch=1),
)
# Every step of a micro-batch costs this much on top of its samples (host sync, loop).
STEP_OVERHEAD_SECONDS = 50e-6
# An inference graph compiles in about 0.65 of the training graph's time (13 s vs 20 s
# for MNIST in the guide) and runs forward only (about 3x the training rate).
INFERENCE_COMPILE_RATIO = 0.65
INFERENCE_SPEEDUP = 3.0
# Loading a cached executable: the bar jumps to 100/100 [00:00<00:00].
CACHE_LOAD_SECONDS = 0.3


# TensorFlow 2 on the IPU (the guide's Keras MNIST: Flatten, Dense 128, Dense 10, 101,770
# parameters, batch 32, steps_per_execution 100): "Epoch 1/4 2000/2000 - 13s 7ms/step", then
# "0s 222us/step". The first epoch holds the compilation: 13.05 - 2000 x 222 us = 12.6 s.
# Keras programs are timed on their own points: the same size of model runs much faster
# under Keras' steps_per_execution loop than a PopTorch step of the tutorial's ConvNet.
TF_CALIBRATIONS = (
    Calibration("tf2-mnist", 101_770, 1, 12.6, 32 / 222e-6, micro_batch=32),
)


def _interpolate(parameters: int, value, calibrations=CALIBRATIONS) -> float:
    """log-log between the calibration points around `parameters`, flat beyond them."""
    points = sorted(calibrations, key=lambda c: c.parameters)
    if parameters <= points[0].parameters:
        return value(points[0])
    if parameters >= points[-1].parameters:
        return value(points[-1])
    for low, high in zip(points, points[1:], strict=False):
        if low.parameters <= parameters <= high.parameters:
            span = math.log(high.parameters) - math.log(low.parameters)
            t = (math.log(parameters) - math.log(low.parameters)) / span
            return math.exp(math.log(value(low)) * (1 - t) + math.log(value(high)) * t)
    raise AssertionError("unreachable")


def compile_seconds(parameters: int, training: bool = True) -> float:
    """Device seconds to compile a model of this size (the Graph compilation bar)."""
    seconds = _interpolate(parameters, lambda c: c.compile_seconds)
    return seconds if training else seconds * INFERENCE_COMPILE_RATIO


def samples_per_second(parameters: int, ipus: int) -> float:
    """Steady training rate on `ipus` IPUs (data or model parallel alike)."""
    return _interpolate(parameters, lambda c: c.samples_per_second_per_ipu) * max(1, ipus)


def _peak_per_ipu(point: Calibration) -> float:
    """Samples/s per IPU without the per-step overhead, so the documented run's rate holds."""
    per_sample = 1.0 / point.samples_per_second_per_ipu
    return 1.0 / (per_sample - STEP_OVERHEAD_SECONDS / point.micro_batch)


def step_seconds(parameters: int, ipus: int, micro_batch: int, micro_batches: int = 1,
                 training: bool = True) -> float:
    """Device seconds for `micro_batches` steps of `micro_batch` samples on `ipus` IPUs."""
    peak = _interpolate(parameters, _peak_per_ipu) * max(1, ipus)
    if not training:
        peak *= INFERENCE_SPEEDUP
    return micro_batches * (STEP_OVERHEAD_SECONDS + micro_batch / peak)


def first_pass_ratio(parameters: int) -> float:
    """How much slower the first pass over a dataset runs (host-side warm-up)."""
    return _interpolate(parameters, lambda c: c.first_epoch_ratio)


def calibration(name: str) -> Calibration:
    for point in CALIBRATIONS:
        if point.name == name:
            return point
    raise KeyError(f"no calibration named {name!r}")


def keras_compile_seconds(parameters: int, training: bool = True) -> float:
    """Device seconds to compile a Keras program (train, or evaluate/predict) for the IPU."""
    seconds = _interpolate(parameters, lambda c: c.compile_seconds, TF_CALIBRATIONS)
    return seconds if training else seconds * INFERENCE_COMPILE_RATIO


def keras_step_seconds(parameters: int, ipus: int, batch: int, steps: int = 1,
                       training: bool = True) -> float:
    """Device seconds for `steps` Keras steps of `batch` samples on `ipus` IPUs."""
    rate = _interpolate(parameters, lambda c: c.samples_per_second_per_ipu,
                        TF_CALIBRATIONS) * max(1, ipus)
    if not training:
        rate *= INFERENCE_SPEEDUP
    return steps * batch / rate
