"""PopTorch for the emulated Bow-Pod64: the real package's Python API, run on CPU PyTorch.

What is real: the numerics (PyTorch on the CPU; models really train), the
options and their checks, the combined-batch rule, the IPUs a program must
reserve (blocks x replicas, rounded to a power of two) and their acquisition
from the job's V-IPU partition (so running without `srun --ipus=N` fails as it
does at ALCF), the memory check against 900 MB per IPU, executable caching
(`POPTORCH_CACHE_DIR` / enableExecutableCaching, `.popef` files) and the logs.
What is modelled: time. Compilation and steps take the device time of the
timing model (aitestbed.graphcore.timing), and progress bars in this process show
that device time; AITESTBED_TIME_SCALE=1 also makes wall time wait for it.

A script that trains a reduced-scale stand-in for a bigger model can set
`model.aitestbed_nominal_parameters = N` so the timing model uses the full size.
"""

from __future__ import annotations

from types import SimpleNamespace

from . import _logging, enums, optim
from ._errors import Error, RecoverableError, UnrecoverableError
from ._executor import PoplarExecutor, inferenceModel, load, trainingModel
from ._logging import setLogLevel
from ._runtime import runtime as _runtime
from ._version import __version__
from .blocks import (
    AutoStage,
    BeginBlock,
    Block,
    BlockFunction,
    MatMulSerializationMode,
    ParallelPhasedExecution,
    Phase,
    PipelinedExecution,
    SerialPhasedExecution,
    ShardedExecution,
    Stage,
    identity_loss,
    ipu_print_tensor,
    nop,
    recomputationCheckpoint,
    serializedMatMul,
    set_available_memory,
)
from .data import AsynchronousDataAccessor, DataLoader
from .enums import (
    AnchorMode,
    CommGroupType,
    ConnectionType,
    DataLoaderMode,
    Liveness,
    MeanReductionStrategy,
    OutputMode,
    OverlapMode,
    ReductionType,
    SyncPattern,
    VariableRetrievalMode,
)
from .options import Options, TensorLocationSettings

# `poptorch.poptorch_core.Error` is how tracebacks name PopTorch's errors.
poptorch_core = SimpleNamespace(Error=Error, RecoverableError=RecoverableError,
                                UnrecoverableError=UnrecoverableError)


def ipuHardwareIsAvailable(num_ipus: int = 1) -> bool:  # noqa: N802
    """True when this job's V-IPU partition holds at least `num_ipus` IPUs."""
    try:
        allocation = _runtime.allocation()
    except Exception:  # noqa: BLE001 - any failure to reach the devices means "no"
        return False
    return allocation is not None and allocation.size >= num_ipus


def ipuHardwareVersion() -> int:  # noqa: N802
    """2 for the Bow/Mk2 IPUs of the POD (0 when none is available)."""
    return 2 if ipuHardwareIsAvailable() else 0


def logger():
    return _logging.logger


__all__ = [
    "AnchorMode", "AsynchronousDataAccessor", "AutoStage", "BeginBlock", "Block",
    "BlockFunction", "CommGroupType", "ConnectionType", "DataLoader", "DataLoaderMode", "Error",
    "Liveness", "MatMulSerializationMode", "MeanReductionStrategy", "Options", "OutputMode",
    "OverlapMode", "ParallelPhasedExecution", "Phase", "PipelinedExecution", "PoplarExecutor",
    "RecoverableError", "ReductionType", "SerialPhasedExecution", "ShardedExecution", "Stage",
    "SyncPattern", "TensorLocationSettings", "UnrecoverableError", "VariableRetrievalMode",
    "__version__", "enums", "identity_loss", "inferenceModel", "ipuHardwareIsAvailable",
    "ipuHardwareVersion", "ipu_print_tensor", "load", "nop", "optim", "poptorch_core",
    "recomputationCheckpoint", "serializedMatMul", "setLogLevel", "set_available_memory",
    "trainingModel",
]
