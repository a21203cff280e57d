"""Backends: where a cstorch program runs.

"CPU" runs here. "CSX" is the Wafer-Scale Cluster: inside an appliance job (see
cerebras_pytorch.appliance) it trains on this worker's CPU in the systems' device
time; on a login node the program must be submitted with
cerebras_pytorch.appliance.run_program, which does not train locally. There is no
"GPU" on these machines.
"""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass

import torch

from .appliance import session as _session
from .appliance.errors import ApplianceClientError

BACKEND_TYPES = ("CSX", "CPU", "GPU")


class BackendType(enum.StrEnum):
    CSX = "CSX"
    CPU = "CPU"
    GPU = "GPU"


@dataclass
class DeviceConfig:
    """How the CSX device traces the model (kept for the API; CPU numerics are eager)."""

    lazy_initialization: bool = True
    drop_data: bool = False


class Device:
    """The backend's device: str() is its name; `with device:` builds modules for it.

    Modules and tensors built inside the context are ordinary CPU ones here (the
    wafer's weights are the CPU's); the context only marks where a model is built.
    """

    def __init__(self, backend_type: BackendType):
        self.type = backend_type
        self.config = DeviceConfig()
        self.torch_device = torch.device("cpu")
        self._depth = 0

    def __enter__(self) -> Device:
        self._depth += 1
        return self

    def __exit__(self, *exc) -> None:
        self._depth -= 1

    def __str__(self) -> str:
        return str(self.type)

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)

    def __eq__(self, other) -> bool:
        if isinstance(other, Device):
            return other.type == self.type
        return str(other) == str(self)

    def __hash__(self) -> int:
        return hash(str(self))

    def __repr__(self) -> str:
        return f"Device({str(self)!r})"


class BackendError(RuntimeError):
    """A backend that cannot be used here."""


class Backend:
    def __init__(self, backend_type: str, artifact_dir: str | None = None,
                 compile_dir: str | None = None, compile_only: bool = False,
                 validate_only: bool = False, **options):
        self.backend_type = BackendType(backend_type)
        self.artifact_dir = artifact_dir
        self.compile_dir = compile_dir
        self.compile_only = compile_only
        self.validate_only = validate_only
        self.options = options
        self.session = _session.active() if backend_type == "CSX" else None
        self.device = Device(self.backend_type)
        self.models: list[torch.nn.Module] = []

    @property
    def is_csx(self) -> bool:
        return self.backend_type == "CSX"

    @property
    def is_cpu(self) -> bool:
        return self.backend_type == "CPU"

    @property
    def is_gpu(self) -> bool:
        return self.backend_type == "GPU"

    @property
    def torch_device(self) -> torch.device:
        return self.device.torch_device

    def now(self) -> float:
        """Seconds on the clock rates are measured in: device time on the appliance."""
        if self.session is not None:
            return self.session.clock.device_seconds
        return time.monotonic()

    def start_run(self, start_input):
        """Stage the run (appliance) and start the input pipeline; returns start_input()."""
        if self.session is not None:
            return self.session.stage(start_input)
        if self.is_csx:
            raise ApplianceClientError(
                "A CSX program cannot run on the client: submit it to the Wafer-Scale "
                "Cluster with cerebras_pytorch.appliance.run_program().")
        return start_input()

    def execute_step(self, step: int, samples: int) -> None:
        if self.session is not None:
            # A model in eval mode runs evaluation steps (timed as such), as in fit's
            # validation within a training run.
            training = all(model.training for model in self.models) if self.models else True
            self.session.execute_step(step, samples, training)

    def __repr__(self) -> str:
        return f"Backend({str(self.backend_type)!r})"


_current: Backend | None = None


def backend(backend_type: str, artifact_dir: str | None = None, compile_dir: str | None = None,
            compile_only: bool = False, validate_only: bool = False, **_options) -> Backend:
    """Select the backend the following compile() and DataExecutor use."""
    global _current
    kind = str(backend_type).upper()
    if kind not in BACKEND_TYPES:
        raise BackendError(f"Invalid backend type {backend_type!r}: expected one of "
                           f"{', '.join(BACKEND_TYPES)}.")
    if kind == "GPU":
        raise BackendError("GPU backend requested, but this system has no GPU: run on "
                           "\"CPU\", or on the Wafer-Scale Cluster with \"CSX\".")
    if compile_only and validate_only:
        raise BackendError("compile_only and validate_only are mutually exclusive.")
    _current = Backend(kind, artifact_dir, compile_dir, compile_only, validate_only, **_options)
    return _current


def current_backend(raise_exception: bool = True) -> Backend | None:
    if _current is None and raise_exception:
        raise BackendError("No backend has been initialized: call cerebras_pytorch.backend().")
    return _current


def current_backend_impl(raise_exception: bool = True) -> Backend | None:
    """The backend object itself (the same object as current_backend() here)."""
    return current_backend(raise_exception)


def use_cs() -> bool:
    return _current is not None and _current.is_csx


def compile(model: torch.nn.Module, backend: Backend | None = None) -> torch.nn.Module:  # noqa: A001
    """The model as the backend runs it: the same module, on the CPU's numerics."""
    if backend is None:
        current_backend()  # raises when none was selected
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"compile() expects a torch.nn.Module, got {type(model).__name__}")
    target = backend or _current
    if target is not None:
        if model not in target.models:
            target.models.append(model)
        if target.is_csx and target.session is not None \
                and not getattr(model, "_cstorch_wafer_inputs", False):
            model.register_forward_pre_hook(_wafer_inputs_on_cpu)
            model._cstorch_wafer_inputs = True
    return model


def _as_cpu_kernels_need(tensor: torch.Tensor) -> torch.Tensor:
    if tensor.dtype in (torch.float16, torch.bfloat16):
        return tensor.float()
    if tensor.dtype == torch.int32:
        return tensor.long()
    return tensor


def _wafer_inputs_on_cpu(module: torch.nn.Module, args: tuple):
    """The wafer computes half-precision inputs in mixed precision and int32 labels and
    indices natively; the CPU that stands for it computes them as fp32 and int64."""
    from .utils.nest import map_torch_tensors

    return map_torch_tensors(args, _as_cpu_kernels_need)
