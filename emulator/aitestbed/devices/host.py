"""What every vendor facade does to the host process it runs in: CPU threads and bars.

The numerics run on the host CPU with PyTorch; device time comes from the timing
model. On the real systems wall time and device time are the same thing, so every
progress bar in the process (tqdm's, the user's too) is made to count device time.
"""

from __future__ import annotations

import ctypes
import os

from aitestbed.devices.clock import VirtualClock


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
