"""The emulated device this process talks to: its clock, its IPUs, its CPU threads.

The numerics run on the host CPU with PyTorch. Device time comes from the
timing model, and every progress bar in the process (tqdm's, the user's too)
counts it: on the real system wall time and device time are the same thing,
so that is what the documented bars and rates show.
"""

from __future__ import annotations

import os
import sys

from aitestbed.devices.base import Allocation
from aitestbed.devices.clock import TimeScaleError, VirtualClock
from aitestbed.devices.host import keep_openblas_single_threaded, show_device_time_in_progress_bars
from aitestbed.graphcore import ipu as ipu_model


class Runtime:
    def __init__(self) -> None:
        self.clock = VirtualClock()
        self.first_pass = False  # a DataLoader is on its first pass over its dataset
        self._allocation: Allocation | None = None
        self._allocation_read = False
        self._cpu_tuned = False

    def allocation(self) -> Allocation | None:
        if not self._allocation_read:
            self._allocation = ipu_model.allocation_from_environment()
            self._allocation_read = True
        return self._allocation

    def forget_allocation(self) -> None:
        self._allocation_read = False

    def tune_cpu(self) -> None:
        """Use every CPU the job was given for torch, and keep OpenBLAS single-threaded
        inside them (two thread pools on the same cores slow small steps down)."""
        if self._cpu_tuned:
            return
        self._cpu_tuned = True
        import torch

        if "OMP_NUM_THREADS" not in os.environ:
            torch.set_num_threads(max(1, len(os.sched_getaffinity(0))))
        keep_openblas_single_threaded()


try:
    runtime = Runtime()
except TimeScaleError as err:
    sys.stderr.write(f"{err}\n")
    raise SystemExit(1) from None
show_device_time_in_progress_bars(runtime.clock)
# Before any thread of ours runs torch: a process whose first torch work is on another
# thread (the data loader's) and whose main thread then fails aborts at exit
# ("terminate called without an active exception").
runtime.tune_cpu()
