"""What every vendor facade does to the host process it runs in: CPU threads and bars.

The numerics run on the host CPU with PyTorch; device time comes from the timing
model. On the real systems wall time and device time are the same thing, so every
progress bar in the process (tqdm's, the user's too) is made to count device time.

A facade's runtime derives from `FacadeRuntime` (its device clock, its CPU tuning)
and is made once, at import, by `start(Runtime)`.
"""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Callable
from typing import TypeVar

from aitestbed.devices.clock import TimeScaleError, VirtualClock


def keep_openblas_single_threaded() -> None:
    """OpenBLAS's own thread pool on the cores torch's threads use slows small steps
    down; OPENBLAS_NUM_THREADS, when set, is the user's choice."""
    if "OPENBLAS_NUM_THREADS" in os.environ:
        return
    for name in ("libopenblas.so.0", "libblas.so.3"):
        try:
            ctypes.CDLL(name).openblas_set_num_threads(1)
            return
        except (OSError, AttributeError):
            continue


def show_device_time_in_progress_bars(clock: VirtualClock) -> None:
    try:
        import tqdm.std
    except ImportError:
        return
    tqdm.std.time = clock.now


class FacadeRuntime:
    """The device clock of this process, and its CPUs tuned for torch (once)."""

    def __init__(self) -> None:
        self.clock = VirtualClock()  # raises TimeScaleError on a bad AITESTBED_TIME_SCALE
        self._cpu_tuned = False

    def torch_threads(self) -> int | None:
        """How many threads torch should use; None leaves torch's own choice."""
        return max(1, len(os.sched_getaffinity(0)))

    def tune_cpu(self) -> None:
        """Set torch's threads (torch_threads), and keep OpenBLAS single-threaded inside
        them (two thread pools on the same cores slow small steps down)."""
        if self._cpu_tuned:
            return
        self._cpu_tuned = True
        import torch

        threads = self.torch_threads()
        if threads is not None:
            torch.set_num_threads(threads)
        keep_openblas_single_threaded()


R = TypeVar("R", bound=FacadeRuntime)


def start(make_runtime: Callable[[], R]) -> R:
    """A facade's runtime, made at import: a bad AITESTBED_TIME_SCALE ends the process
    with its message and status 1 (no traceback), then progress bars count device time."""
    try:
        runtime = make_runtime()
    except TimeScaleError as err:
        sys.stderr.write(f"{err}\n")
        raise SystemExit(1) from None
    show_device_time_in_progress_bars(runtime.clock)
    return runtime
