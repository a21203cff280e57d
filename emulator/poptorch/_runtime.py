"""The emulated device this process talks to: its clock, its IPUs, its CPU threads.

The numerics run on the host CPU with PyTorch. Device time comes from the
timing model, and every progress bar in the process (tqdm's, the user's too)
counts it: on the real system wall time and device time are the same thing,
so that is what the documented bars and rates show.
"""

from __future__ import annotations

import os

from aitestbed.devices.base import Allocation
from aitestbed.devices.host import FacadeRuntime, start
from aitestbed.graphcore import ipu as ipu_model


class Runtime(FacadeRuntime):
    def __init__(self) -> None:
        super().__init__()
        self.first_pass = False  # a DataLoader is on its first pass over its dataset
        self._allocation: Allocation | None = None
        self._allocation_read = False

    def allocation(self) -> Allocation | None:
        if not self._allocation_read:
            self._allocation = ipu_model.allocation_from_environment()
            self._allocation_read = True
        return self._allocation

    def forget_allocation(self) -> None:
        self._allocation_read = False

    def torch_threads(self) -> int | None:
        """Every CPU the job was given, unless OMP_NUM_THREADS says (torch reads it)."""
        if "OMP_NUM_THREADS" in os.environ:
            return None
        return max(1, len(os.sched_getaffinity(0)))


runtime = start(Runtime)
# Before any thread of ours runs torch: a process whose first torch work is on another
# thread (the data loader's) and whose main thread then fails aborts at exit
# ("terminate called without an active exception").
runtime.tune_cpu()
