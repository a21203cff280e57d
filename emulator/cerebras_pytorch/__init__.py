"""cerebras_pytorch 2.1.1 for the emulated Wafer-Scale Cluster (import as cstorch).

What is real: the numerics (PyTorch on the CPU: models really train), the API the
modelzoo uses, and the appliance workflow: a CSX run on a login node compiles and
executes as appliance jobs (cerebras_pytorch.appliance) whose workers train and
stream their logs and checkpoints back. What is modelled: the CS-2 systems' memory
(aitestbed.cerebras.cs2) and time (aitestbed.cerebras.timing); rates and durations
printed for CSX runs are device time, and AITESTBED_TIME_SCALE=1 makes wall time
follow it.
"""

from __future__ import annotations

from . import (
    amp,
    appliance,
    core,
    distributed,
    experimental,
    metrics,
    nn,
    optim,
    saver,
    sparse,
    utils,
)
from ._closures import checkpoint_closure, step_closure, trace
from ._summaries import name_scope, summarize_scalar, summarize_tensor
from ._tensors import add_debug_name, get_debug_name, make_constant, to_numpy
from ._version import __version__
from .backend import Backend, BackendError, backend, compile, current_backend, use_cs
from .saver import load, save

__all__ = [
    "Backend", "BackendError", "__version__", "add_debug_name", "amp", "appliance",
    "backend", "checkpoint_closure", "compile", "core", "current_backend", "distributed",
    "experimental", "get_debug_name", "load", "make_constant", "metrics", "name_scope", "nn",
    "optim", "save", "saver", "sparse", "step_closure", "summarize_scalar",
    "summarize_tensor", "to_numpy", "trace", "use_cs", "utils",
]
