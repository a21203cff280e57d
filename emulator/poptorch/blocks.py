"""Placing a model on IPUs (BeginBlock, Block, stages) and the in-model helpers.

While PopTorch traces a model (the first call of a trainingModel or
inferenceModel), the active block decides which IPU each layer's parameters
and activations belong to; the number of IPUs a replica needs is the highest
IPU used plus one, and counts towards the IPUs the program must reserve.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch

_BLOCK_ATTR = "_poptorch_block"


class _Placement:
    """The IPU of the code running now, during a trace (None outside one)."""

    def __init__(self) -> None:
        self.tracing = False
        self.ipu = 0
        self.highest_ipu = 0

    def enter_block(self, ipu_id: int | None) -> None:
        if not self.tracing:
            return
        self.ipu = self.ipu + 1 if ipu_id is None else int(ipu_id)
        self.highest_ipu = max(self.highest_ipu, self.ipu)

    @contextmanager
    def trace(self) -> Iterator[_Placement]:
        self.tracing, self.ipu, self.highest_ipu = True, 0, 0
        try:
            yield self
        finally:
            self.tracing = False


placement = _Placement()


def _enter_hook(module: torch.nn.Module, _inputs: Any) -> None:
    user_id, ipu_id = getattr(module, _BLOCK_ATTR)
    placement.enter_block(ipu_id)


def BeginBlock(layer_to_call: torch.nn.Module, user_id: Any = None,  # noqa: N802
               ipu_id: int | None = None) -> torch.nn.Module:
    """From this layer on (in execution order), run on `ipu_id` (default: the next IPU)."""
    if not isinstance(layer_to_call, torch.nn.Module):
        raise ValueError("BeginBlock takes a torch.nn.Module: wrap a layer, or use "
                         "`with poptorch.Block(...)` around code")
    if ipu_id is not None and (not isinstance(ipu_id, int) or ipu_id < 0):
        raise ValueError(f"ipu_id must be a non-negative integer, not {ipu_id!r}")
    if not hasattr(layer_to_call, _BLOCK_ATTR):
        layer_to_call.register_forward_pre_hook(_enter_hook)
    setattr(layer_to_call, _BLOCK_ATTR, (user_id, ipu_id))
    return layer_to_call


class Block:
    """`with poptorch.Block(ipu_id=1): ...` runs the enclosed code on that IPU."""

    _auto_id = 0

    def __init__(self, user_id: Any = None, ipu_id: int | None = None):
        self.user_id = user_id
        self.ipu_id = ipu_id

    def __enter__(self) -> Block:
        placement.enter_block(self.ipu_id)
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    @staticmethod
    def useAutoId() -> None:  # noqa: N802
        Block._auto_id = 0

    @staticmethod
    def start(user_id: Any = None, ipu_id: int | None = None) -> None:
        placement.enter_block(ipu_id)


class BlockFunction:
    """poptorch.BlockFunction(ipu_id=N) as a decorator: the function runs on that IPU."""

    def __init__(self, user_id: Any = None, ipu_id: int | None = None):
        self.block = Block(user_id, ipu_id)

    def __call__(self, function):
        def wrapped(*args, **kwargs):
            with self.block:
                return function(*args, **kwargs)
        return wrapped


class Stage:
    def __init__(self, *block_ids: Any):
        self.blocks = list(block_ids)
        self._ipu: int | None = None

    def ipu(self, ipu: int) -> Stage:
        self._ipu = ipu
        return self


class AutoStage:
    SameAsIpu = 0
    AutoIncrement = 1


class Phase:
    def __init__(self, *stages: Any):
        self.stages = list(stages)


class _ExecutionStrategy:
    def __init__(self, *stages: Any):
        self.stages = list(stages)

    def stage(self, block_id: Any) -> Stage:
        for stage in self.stages:
            if isinstance(stage, Stage) and block_id in stage.blocks:
                return stage
        return Stage(block_id)


class PipelinedExecution(_ExecutionStrategy):
    pass


class ShardedExecution(_ExecutionStrategy):
    pass


class ParallelPhasedExecution(_ExecutionStrategy):
    pass


class SerialPhasedExecution(_ExecutionStrategy):
    pass


def identity_loss(x: torch.Tensor, reduction: str) -> torch.Tensor:
    """Mark `x` as the loss to minimise, reduced with "sum", "mean" or "none"."""
    if reduction == "sum":
        loss = x.sum()
    elif reduction == "mean":
        loss = x.mean()
    elif reduction == "none":
        loss = x
    else:
        raise ValueError(f'identity_loss: reduction must be "sum", "mean" or "none", '
                         f"not {reduction!r}")
    loss._poptorch_loss = True  # type: ignore[attr-defined]
    return loss


def ipu_print_tensor(tensor: torch.Tensor, title: str = "", print_gradient: bool = True,
                     summarise_threshold: int = 1000, edge_items: int = 3,
                     max_line_width: int = 80, digits: int = 4, float_format: str = "auto",
                     separator: str = " ", open_bracket: str = "(", close_bracket: str = ")"):
    """Print the tensor's values as the device computes them; returns the tensor."""
    if placement.tracing:  # compiling, not running: nothing is printed yet
        return tensor
    with torch.no_grad():
        text = torch._tensor_str._tensor_str(tensor.detach(), 0) if tensor.dim() else \
            str(tensor.item())
    print(f"{title}: {text}" if title else text, flush=True)
    return tensor


def set_available_memory(tensor: torch.Tensor, available_memory_proportion: float):
    if not 0 < available_memory_proportion <= 1:
        raise ValueError("available_memory_proportion must be in (0, 1]")
    return tensor


def recomputationCheckpoint(*tensors: torch.Tensor):  # noqa: N802
    return tensors[0] if len(tensors) == 1 else tensors


def serializedMatMul(lhs: torch.Tensor, rhs: torch.Tensor, mode: Any,  # noqa: N802
                     factor: int = 0, keep_precision: bool = False) -> torch.Tensor:
    return torch.matmul(lhs, rhs)


def nop(tensor: torch.Tensor) -> torch.Tensor:
    return tensor


class MatMulSerializationMode:
    InputChannels = "input_channels"
    ReducingDim = "reducing_dim"
    OutputChannels = "output_channels"
    Disabled = "none"
