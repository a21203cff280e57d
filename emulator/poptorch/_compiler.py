"""Compiling a model for the IPU: trace it, place it, check it fits, cache the executable.

The trace is a real forward pass on one micro-batch: it records which IPU each
layer runs on (BeginBlock/Block), the parameters and activations each IPU
holds, and the inputs' shapes. The "executable" is a PopEF-framed record of
that (`<cache dir>/<hash>.popef`); a later run with the same model, inputs and
options finds it and skips the compilation, as PopTorch does.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from aitestbed.devices.base import DeviceError
from aitestbed.graphcore import ipu as ipu_model
from aitestbed.graphcore import timing

from ._errors import Error
from ._logging import logger
from ._runtime import runtime
from .blocks import placement
from .options import Options

POPEF_MAGIC = b"POPEF\x00\x01"
NOMINAL_PARAMETERS_ATTR = "aitestbed_nominal_parameters"
BAR_FORMAT = "{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}]"
_ERROR_FRAMES = "Error raised in:\n  [0] Compiler::initSession\n  [1] LowerToPopart::compile\n" \
                "  [2] compileWithManualTracing"


@dataclass
class Executable:
    """What a compilation produces and a cache file keeps."""

    version: str
    training: bool
    parameters: int
    timing_parameters: int
    ipus_per_replica: int
    replicas: int
    ipus_reserved: int
    bytes_per_ipu: list[int]
    compile_seconds: float
    input_shapes: list[list[int]] = field(default_factory=list)
    key: str = ""


def _bytes(tensor: torch.Tensor) -> int:
    return tensor.numel() * tensor.element_size()


def _tensors(value: Any):
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, tuple | list):
        for item in value:
            yield from _tensors(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _tensors(item)


def trace(model: torch.nn.Module, micro_args: tuple, micro_kwargs: dict,
          training: bool, strategy: Any = None) -> tuple[int, list[int]]:
    """Run one micro-batch forward, following the blocks; (IPUs per replica, bytes per IPU)."""
    param_ipu: dict[int, int] = {}
    activation_bytes: dict[int, int] = {}

    def after_forward(module: torch.nn.Module, _inputs: Any, output: Any) -> None:
        for parameter in module.parameters(recurse=False):
            param_ipu.setdefault(id(parameter), placement.ipu)
        if not any(True for _ in module.children()):
            size = sum(_bytes(t) for t in _tensors(output))
            activation_bytes[placement.ipu] = activation_bytes.get(placement.ipu, 0) + size

    handles = [m.register_forward_hook(after_forward) for m in model.modules()]
    was_training = model.training
    # The trace must leave no mark: running statistics and the random stream are restored.
    buffers = {name: b.detach().clone() for name, b in model.named_buffers()}
    rng = torch.get_rng_state()
    model.train(training)
    try:
        half = HalfOnCpu(model, micro_args, micro_kwargs)
        with placement.trace(strategy), torch.no_grad(), half:
            model(*half.args, **half.kwargs)
        ipus = placement.highest_ipu + 1
    finally:
        model.train(was_training)
        for handle in handles:
            handle.remove()
        with torch.no_grad():
            for name, b in model.named_buffers():
                if name in buffers:
                    b.copy_(buffers[name])
        torch.set_rng_state(rng)
    per_ipu = [0] * ipus
    # Weights; in training also their gradients and two optimizer-state copies at most.
    weight_copies = 4 if training else 1
    for parameter in model.parameters():
        ipu = param_ipu.get(id(parameter), 0)
        per_ipu[ipu] += _bytes(parameter) * weight_copies
    for ipu, size in activation_bytes.items():
        per_ipu[ipu] += size * (2 if training else 1)  # kept for the backward pass
    return ipus, per_ipu


def _cast(value: Any, from_dtype: torch.dtype, to_dtype: torch.dtype) -> Any:
    if isinstance(value, torch.Tensor):
        return value.to(to_dtype) if value.dtype == from_dtype else value
    if isinstance(value, tuple | list):
        return type(value)(_cast(v, from_dtype, to_dtype) for v in value)
    if isinstance(value, dict):
        return {k: _cast(v, from_dtype, to_dtype) for k, v in value.items()}
    return value


class HalfOnCpu:
    """Runs a float16 model (model.half(), half inputs) with float32 arithmetic.

    The IPU computes in float16; the host CPU's PyTorch has no float16 kernels for
    convolutions, matmuls or norms. Inside the context the model's float16
    parameters and buffers (the same Parameter objects, so optimizers keep them) hold
    float32 copies and float16 inputs are widened; on leaving, the values (and
    gradients) are rounded back to float16, as the device stores them, and outputs
    that are float32 only because of the widening are returned as float16.
    """

    def __init__(self, model: torch.nn.Module, args: tuple, kwargs: dict):
        self.tensors = [t for t in list(model.parameters()) + list(model.buffers())
                        if t.dtype == torch.float16]
        self.active = bool(self.tensors) or any(
            t.dtype == torch.float16 for t in _tensors((args, kwargs)))
        self.args, self.kwargs = args, kwargs
        if self.active:
            self.args = _cast(args, torch.float16, torch.float32)
            self.kwargs = _cast(kwargs, torch.float16, torch.float32)

    def __enter__(self) -> HalfOnCpu:
        for tensor in self.tensors:
            tensor.data = tensor.data.float()
            if tensor.grad is not None:
                tensor.grad = tensor.grad.float()
        return self

    def output(self, value: Any) -> Any:
        return _cast(value, torch.float32, torch.float16) if self.active else value

    def __exit__(self, *exc: object) -> None:
        with torch.no_grad():
            for tensor in self.tensors:
                tensor.data = tensor.data.half()
                if tensor.grad is not None:
                    tensor.grad = tensor.grad.half()


# Options that say where or how the executable is made, not what it is: a cache
# filled offline, or by another user with another cache directory, serves any run.
NOT_IN_KEY = ("executable_cache_dir", "connection_type", "show_compilation_progress_bar",
              "log_dir", "ipu_version")
BOW_IPU_VERSION = 2  # the Bow IPU is an Mk2 (GC200) target: what useOfflineIpuTarget says


def cache_key(model: torch.nn.Module, inputs: Any, options: Options, training: bool,
              version: str, blocks: dict[str, int] | None = None) -> str:
    """The executable's name in the cache: the program (model, inputs, options), PopTorch's
    version and the IPU it is compiled for."""
    digest = hashlib.sha256()
    digest.update(f"{version}|{training}|{model!r}".encode())
    digest.update(json.dumps(sorted((blocks or {}).items())).encode())  # block -> IPU
    for name, parameter in model.named_parameters():
        digest.update(f"{name}:{tuple(parameter.shape)}:{parameter.dtype}".encode())
    for tensor in _tensors(inputs):
        digest.update(f"{tuple(tensor.shape)}:{tensor.dtype}".encode())
    program = {k: v for k, v in options.toDict().items() if k not in NOT_IN_KEY}
    digest.update(json.dumps(program, sort_keys=True, default=str).encode())
    target = options._values.get("ipu_version", BOW_IPU_VERSION)
    if target != BOW_IPU_VERSION:
        digest.update(f"ipu_version={target}".encode())
    return digest.hexdigest()[:20]


def read_cached(path: Path) -> Executable:
    data = path.read_bytes()
    try:
        if not data.startswith(POPEF_MAGIC):
            raise ValueError("no PopEF header")
        return Executable(**json.loads(data[len(POPEF_MAGIC):]))
    except (ValueError, TypeError) as err:
        raise Error(f"Failed to load the executable cached in {path}: it is not a valid PopEF "
                    f"file ({err}). Delete it, or point POPTORCH_CACHE_DIR elsewhere, and run "
                    "again.", "poptorch/source/popart_compiler/Compiler.cpp:612") from None


CACHE_LOCATION = "poptorch/source/popart_compiler/Compiler.cpp:588"


def _cache_error(cache_dir: Path, why: str) -> Error:
    source = "POPTORCH_CACHE_DIR" if os.environ.get("POPTORCH_CACHE_DIR") \
        else "enableExecutableCaching"
    return Error(f"Cannot use {cache_dir} as the executable cache ({source}): {why}. Point "
                 f"{source} at a directory you can write, or unset it.", CACHE_LOCATION)


def check_cache_dir(cache_dir: Path) -> None:
    """Before compiling: the cache directory exists (or is made) and can be written."""
    try:
        if cache_dir.exists() and not cache_dir.is_dir():
            raise _cache_error(cache_dir, "it is not a directory")
        cache_dir.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise _cache_error(cache_dir, err.strerror or str(err)) from None
    if not os.access(cache_dir, os.W_OK | os.X_OK):
        raise _cache_error(cache_dir, "Permission denied")


def write_cached(path: Path, executable: Executable) -> None:
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(POPEF_MAGIC + json.dumps(asdict(executable)).encode())
        tmp.replace(path)
    except OSError as err:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise _cache_error(path.parent, err.strerror or str(err)) from None


def device_error(err: Exception, location: str = "poptorch/popart_compiler/source/"
                 "CompilerImpl.cpp:725") -> Error:
    """A device failure as PopTorch reports it: a critical log line, then the exception."""
    error = Error(str(err), location)
    logger.critical(f"poptorch.poptorch_core.Error: {error}\n{_ERROR_FRAMES}")
    return error


def acquire(options: Options, ipus_per_replica: int) -> tuple[int, tuple[int, ...]]:
    """Reserve the program's IPUs in the job's partition, as PopTorch does at compile time."""
    replicas = options.replication_factor
    try:
        reserved = ipu_model.ipus_to_reserve(ipus_per_replica, replicas,
                                             options.auto_round_num_ipus)
    except ipu_model.InvalidDeviceCountError as err:
        raise device_error(err, "poptorch/source/SessionOptions.cpp:221") from None
    if options.ipu_model():
        if options.executable_cache_dir:
            logger.warning("enableExecutableCaching doesn't work with the IPU model")
        return reserved, ()
    if options.offline():  # compiled for the target, attached to nothing
        return reserved, ()
    wait = os.environ.get("POPTORCH_WAIT_FOR_IPU") == "1"
    while True:
        try:
            allocation = runtime.allocation()
            ids = ipu_model.acquire(reserved, allocation)
            ipu_id = options._values.get("ipu_id")
            if ipu_id is not None and (allocation is None or ipu_id >= allocation.size):
                raise ipu_model.NoDeviceError(f"Failed to acquire device Id {ipu_id}")
            return reserved, ids
        except DeviceError as err:
            if not wait:
                raise device_error(err) from None
            logger.info("POPTORCH_WAIT_FOR_IPU is set: waiting for the IPUs to be available")
            time.sleep(2)
            runtime.forget_allocation()


def compile_model(model: torch.nn.Module, args: tuple, kwargs: dict, micro_args: tuple,
                  micro_kwargs: dict, options: Options, training: bool,
                  version: str) -> Executable:
    cache_dir = options.executable_cache_dir
    if cache_dir and not options.ipu_model():
        check_cache_dir(Path(cache_dir).expanduser())  # before any work, as the compile fails
    ipus, bytes_per_ipu = trace(model, micro_args, micro_kwargs, training,
                                options.execution_strategy)
    inputs = (args, kwargs)  # keyword inputs count as much as positional ones
    replicas = options.replication_factor
    reserved, _ids = acquire(options, ipus)
    try:
        ipu_model.check_memory(bytes_per_ipu)
    except ipu_model.OutOfMemoryError as err:
        raise device_error(err, "poplar/graph_memory_allocation_error") from None
    parameters = sum(p.numel() for p in model.parameters())
    timing_parameters = int(getattr(model, NOMINAL_PARAMETERS_ATTR, parameters))
    for index, tensor in enumerate(_tensors(inputs)):
        if tensor.dtype == torch.int64:  # the IPU has no 64-bit integers
            logger.log("WARN", f"[DISPATCHER] Type coerced from Long to Int for tensor id "
                               f"{9 + index}", component="poptorch:cpp")
    key = cache_key(model, inputs, options, training, version, dict(placement.blocks))
    cache_file = Path(cache_dir).expanduser() / f"{key}.popef" if cache_dir else None
    if cache_file is not None and cache_file.exists() and not options.ipu_model():
        executable = read_cached(cache_file)
        _progress(timing.CACHE_LOAD_SECONDS, options)
        logger.info(f"Loaded the executable from the cache: {cache_file}")
        return executable
    seconds = timing.compile_seconds(timing_parameters, training)
    executable = Executable(version=version, training=training, parameters=parameters,
                            timing_parameters=timing_parameters, ipus_per_replica=ipus,
                            replicas=replicas, ipus_reserved=reserved,
                            bytes_per_ipu=bytes_per_ipu, compile_seconds=seconds,
                            input_shapes=[list(t.shape) for t in _tensors(inputs)], key=key)
    _progress(seconds, options)
    if cache_file is not None and not options.ipu_model():
        write_cached(cache_file, executable)
    return executable


def _progress(seconds: float, options: Options) -> None:
    """The "Graph compilation" bar, moving in device time."""
    from tqdm import tqdm

    show = options._values["show_compilation_progress_bar"]
    bar = tqdm(desc="Graph compilation", total=100, bar_format=BAR_FORMAT, file=sys.stderr,
               disable=not show)
    with bar:
        for _ in range(100):
            runtime.clock.advance(seconds / 100)
            bar.update(1)
