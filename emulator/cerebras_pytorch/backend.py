"""Backends: where a cstorch program runs.

"CPU" runs here. "CSX" is the Wafer-Scale Cluster: inside an appliance job (see
cerebras_pytorch.appliance) it trains on this worker's CPU in the systems' device
time; on a login node the program must be submitted with
cerebras_pytorch.appliance.run_program, which does not train locally. There is no
"GPU" on these machines.
"""

from __future__ import annotations

import time

import torch

from .appliance import session as _session
from .appliance.errors import ApplianceClientError

BACKEND_TYPES = ("CSX", "CPU", "GPU")


class BackendError(RuntimeError):
    """A backend that cannot be used here."""


class Backend:
    def __init__(self, backend_type: str, artifact_dir: str | None = None,
                 compile_dir: str | None = None, compile_only: bool = False,
                 validate_only: bool = False):
        self.backend_type = backend_type
        self.artifact_dir = artifact_dir
        self.compile_dir = compile_dir
        self.compile_only = compile_only
        self.validate_only = validate_only
        self.session = _session.active() if backend_type == "CSX" else None

    @property
    def is_csx(self) -> bool:
        return self.backend_type == "CSX"

    @property
    def device(self) -> str:
        return self.backend_type

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
            self.session.execute_step(step, samples)

    def __repr__(self) -> str:
        return f"Backend({self.backend_type!r})"


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
    _current = Backend(kind, artifact_dir, compile_dir, compile_only, validate_only)
    return _current


def current_backend(raise_exception: bool = True) -> Backend | None:
    if _current is None and raise_exception:
        raise BackendError("No backend has been initialized: call cerebras_pytorch.backend().")
    return _current


def use_cs() -> bool:
    return _current is not None and _current.is_csx


def compile(model: torch.nn.Module, backend: Backend | None = None) -> torch.nn.Module:  # noqa: A001
    """The model as the backend runs it: the same module, on the CPU's numerics."""
    if backend is None:
        current_backend()  # raises when none was selected
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"compile() expects a torch.nn.Module, got {type(model).__name__}")
    return model
