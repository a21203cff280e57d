"""Tracing a model once on the host: its outputs, its loss, its FLOPs, its identity.

`compile` and `trace_graph` run the model's forward once on the CPU (as SambaFlow
traces it) with a torch function mode that records the operators: matmul-like ones
are counted for the timing model, cross-entropy targets are checked for the int64
warning, and the operator list goes to the MAC log. The graph digest (model
structure, parameter shapes, input shapes without the batch dimension) lets `run`
tell a PEF compiled from this model from another's.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

MATMULS = {"matmul", "mm", "bmm", "__matmul__", "__rmatmul__", "einsum"}
CONVS = {"conv1d", "conv2d", "conv3d"}
TRANSPOSED_CONVS = {"conv_transpose1d", "conv_transpose2d", "conv_transpose3d"}
CROSS_ENTROPY = {"cross_entropy", "nll_loss"}
MAX_LOGGED_OPS = 500


# Integer types the RDU takes where CPU torch wants int64 (or int32): token ids and
# positions stored as int16, class targets as int16/int32. They are widened on the way in.
NARROW_INTS = (torch.int8, torch.uint8, torch.int16, torch.int32)


def _narrow(value: Any, allowed: tuple[torch.dtype, ...] = (torch.int64,)) -> bool:
    return isinstance(value, torch.Tensor) and value.dtype in NARROW_INTS and \
        value.dtype not in allowed


def _wide(value: torch.Tensor, ignore_index: int | None = None) -> torch.Tensor:
    """int64 of a narrow index tensor. int16 holds ids up to 65,535 (a GPT-2 token id,
    50,256 at most, stored with `.short()`): its negative values are those ids' 16 bits,
    except a loss's ignore_index (-100)."""
    wide = value.long()
    if value.dtype == torch.int16:
        wrapped = wide < 0
        if ignore_index is not None:
            wrapped &= wide != ignore_index
        wide = torch.where(wrapped, wide + 65536, wide)
    return wide


def widen_integer_args(func: Any, args: tuple, kwargs: dict) -> tuple[tuple, dict, bool]:
    """(args, kwargs, changed): narrow index/target tensors of `func` made int64."""
    functional = torch.nn.functional
    if func is functional.embedding:
        position, key = 0, "input"
    elif func is torch.embedding:
        position, key = 1, "indices"
    elif func in (functional.cross_entropy, functional.nll_loss):
        position, key = 1, "target"
    else:
        return args, kwargs, False
    ignore = None
    if key == "target":  # ignore_index is the fifth argument of both losses
        ignore = kwargs.get("ignore_index", args[4] if len(args) > 4 else -100)
        ignore = ignore if isinstance(ignore, int) else -100
    if len(args) > position and _narrow(args[position]):
        args = args[:position] + (_wide(args[position], ignore),) + args[position + 1:]
        return args, kwargs, True
    if _narrow(kwargs.get(key)):
        return args, {**kwargs, key: _wide(kwargs[key], ignore)}, True
    return args, kwargs, False


class Widen(TorchFunctionMode):
    """During a step on the emulated RDU: narrow token ids and targets made int64."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        args, kwargs, _ = widen_integer_args(func, tuple(args), kwargs or {})
        return func(*args, **kwargs)


@dataclass
class Trace:
    outputs: tuple[Any, ...]
    loss_index: int | None
    forward_flops: float  # the whole batch
    ops: list[tuple[str, tuple[int, ...]]] = field(default_factory=list)
    cross_entropy_int64: bool = False
    widened: bool = False  # the graph takes narrow ints CPU torch cannot (see Widen)


def _shape(value: Any) -> tuple[int, ...]:
    return tuple(value.shape) if isinstance(value, torch.Tensor) else ()


class _Recorder(TorchFunctionMode):
    def __init__(self) -> None:
        super().__init__()
        self.flops = 0.0
        self.ops: list[tuple[str, tuple[int, ...]]] = []
        self.cross_entropy_int64 = False
        self.widened = False

    def __torch_function__(self, func, types, args=(), kwargs=None):
        given, given_kwargs = tuple(args), kwargs or {}
        args, kwargs, changed = widen_integer_args(func, given, given_kwargs)
        self.widened = self.widened or changed
        out = func(*args, **kwargs)
        args, kwargs = given, given_kwargs  # what the model passed (the int64 warning)
        name = getattr(func, "__name__", "")
        if name.startswith("__get__") or name in ("__getattribute__",):
            return out
        try:
            self._count(name, args, kwargs, out)
        except Exception:  # noqa: BLE001 - counting never breaks the user's forward
            pass
        return out

    def _count(self, name: str, args: tuple, kwargs: dict, out: Any) -> None:
        if name == "linear":
            weight = args[1] if len(args) > 1 else kwargs.get("weight")
            self.flops += 2.0 * args[0].numel() * weight.shape[0]
        elif name in CONVS:
            weight = args[1] if len(args) > 1 else kwargs.get("weight")
            self.flops += 2.0 * out.numel() * (weight.numel() / weight.shape[0])
        elif name in TRANSPOSED_CONVS:
            weight = args[1] if len(args) > 1 else kwargs.get("weight")
            self.flops += 2.0 * args[0].numel() * (weight.numel() / weight.shape[0])
        elif name in MATMULS and isinstance(out, torch.Tensor) and name != "einsum":
            self.flops += 2.0 * out.numel() * args[0].shape[-1]
        elif name in ("addmm", "baddbmm"):
            self.flops += 2.0 * out.numel() * args[1].shape[-1]
        elif name in CROSS_ENTROPY:
            target = args[1] if len(args) > 1 else kwargs.get("target")
            if isinstance(target, torch.Tensor) and target.dtype == torch.int64:
                self.cross_entropy_int64 = True
        if len(self.ops) < MAX_LOGGED_OPS and isinstance(out, torch.Tensor):
            self.ops.append((name, _shape(out)))


def as_tuple(outputs: Any) -> tuple[Any, ...]:
    if isinstance(outputs, tuple | list):
        return tuple(outputs)
    return (outputs,)


def find_loss(outputs: tuple[Any, ...]) -> int | None:
    """The loss: the first scalar floating output that depends on the parameters."""
    for index, value in enumerate(outputs):
        if (isinstance(value, torch.Tensor) and value.numel() == 1
                and value.is_floating_point() and value.grad_fn is not None):
            return index
    return None


def find_output_to_differentiate(outputs: tuple[Any, ...]) -> int | None:
    """With init_output_grads: the first floating output that depends on the parameters
    (of any shape: the app gives its gradient, e.g. a per-token loss's weights)."""
    for index, value in enumerate(outputs):
        if isinstance(value, torch.Tensor) and value.is_floating_point() \
                and value.grad_fn is not None:
            return index
    return None


def trace(model: torch.nn.Module, inputs: tuple[Any, ...]) -> Trace:
    recorder = _Recorder()
    with recorder:
        outputs = as_tuple(model(*inputs))
    return Trace(outputs=outputs, loss_index=find_loss(outputs), forward_flops=recorder.flops,
                 ops=recorder.ops, cross_entropy_int64=recorder.cross_entropy_int64,
                 widened=recorder.widened)


def batch_dim(tensor: torch.Tensor) -> int | None:
    dim = getattr(tensor, "batch_dim", None)
    return dim if isinstance(dim, int) and tensor.dim() > dim else None


def batch_size(inputs: tuple[Any, ...]) -> int | None:
    """The batch size of the inputs: the size of their batch dimension (0 by default)."""
    for tensor in inputs:
        if isinstance(tensor, torch.Tensor):
            dim = batch_dim(tensor)
            if dim is not None:
                return int(tensor.shape[dim])
    for tensor in inputs:
        if isinstance(tensor, torch.Tensor) and tensor.dim() > 0:
            return int(tensor.shape[0])
    return None


def input_specs(inputs: tuple[Any, ...]) -> list[dict[str, Any]]:
    specs = []
    for index, tensor in enumerate(inputs):
        if not isinstance(tensor, torch.Tensor):
            specs.append({"index": index, "python": type(tensor).__name__})
            continue
        specs.append({"index": index, "name": getattr(tensor, "sn_name", None),
                      "shape": list(tensor.shape), "dtype": str(tensor.dtype).replace("torch.", ""),
                      "batch_dim": batch_dim(tensor)})
    return specs


def output_specs(outputs: tuple[Any, ...]) -> list[dict[str, Any]]:
    return [{"index": i, "shape": list(_shape(v)),
             "dtype": str(v.dtype).replace("torch.", "") if isinstance(v, torch.Tensor) else None}
            for i, v in enumerate(outputs)]


def parameter_count(model: torch.nn.Module) -> int:
    seen: set[int] = set()
    count = 0
    for parameter in model.parameters():
        if id(parameter) not in seen:
            seen.add(id(parameter))
            count += parameter.numel()
    return count


def digest(model: torch.nn.Module, inputs: tuple[Any, ...]) -> str:
    """The graph's identity: structure, parameters, and inputs apart from their batch size."""
    specs = []
    for spec in input_specs(inputs):
        spec = dict(spec)
        if spec.get("batch_dim") is not None:
            spec["shape"] = [s for i, s in enumerate(spec["shape"]) if i != spec["batch_dim"]]
        elif spec.get("shape"):
            spec["shape"] = spec["shape"][1:]
        specs.append(spec)
    description = {
        "model": type(model).__qualname__,  # not its module: compile.py and hook.py share PEFs
        "structure": repr(model),
        "parameters": [[name, list(p.shape), str(p.dtype), p.requires_grad]
                       for name, p in model.named_parameters()],
        "inputs": specs,
    }
    text = json.dumps(description, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()
