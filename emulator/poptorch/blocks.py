"""Placing a model on IPUs (BeginBlock, Block, stages) and the in-model helpers.

While PopTorch traces a model (the first call of a trainingModel or
inferenceModel), the active block decides which IPU each layer's parameters
and activations belong to; the number of IPUs a replica needs is the highest
IPU used plus one, and counts towards the IPUs the program must reserve.

A block's IPU follows PopTorch's rules. Every block has an id: its `user_id`,
or "0", "1", ... in the order unnamed blocks are entered. The execution
strategy (Options.setExecutionStrategy; PipelinedExecution() by default) maps
block ids to stages: given stages (`Stage("A", "B").ipu(1)`, or plain block
ids, one stage each) are numbered in order, and a block whose id no stage
names is an error. Without given stages, `AutoStage.SameAsIpu` (the default)
makes the block's `ipu_id` its stage, so every block needs one, and
`AutoStage.AutoIncrement` numbers new blocks 1, 2, ... The IPU is then the
stage's `.ipu(n)` if set, else the block's `ipu_id`, else the stage number.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch

from ._errors import Error

_BLOCK_ATTR = "_poptorch_block"


class AutoStage(enum.IntEnum):
    """How blocks become stages when the strategy names no stages."""

    SameAsIpu = 0
    AutoIncrement = 1


class Stage:
    """One or more blocks (by id) that run together on one IPU."""

    def __init__(self, *block_ids: str):
        if not all(isinstance(b, str) for b in block_ids):
            raise ValueError(f"Block IDs are supposed to be strings but got {block_ids}")
        self._blocks = tuple(block_ids)
        self._stage_id = -1
        self._phase_id = -1
        self._ipu: int | None = None

    @property
    def blocks(self) -> tuple[str, ...]:
        return self._blocks

    def ipu(self, ipu: int) -> Stage:
        """Run this stage on IPU `ipu`."""
        if not isinstance(ipu, int) or isinstance(ipu, bool) or ipu < 0:
            raise ValueError(f"Stage.ipu takes a non-negative integer, not {ipu!r}")
        self._ipu = ipu
        return self

    def __repr__(self) -> str:
        where = f".ipu({self._ipu})" if self._ipu is not None else ""
        return f"Stage({', '.join(map(repr, self._blocks))}){where}"


class Phase:
    """The stages of one execution phase (they run in parallel)."""

    def __init__(self, *args: str | Stage):
        if all(isinstance(a, Stage) for a in args):
            self.stages = list(args)
        elif all(isinstance(a, str) for a in args):
            self.stages = [Stage(*args)]
        else:
            raise ValueError("All arguments must either be block IDs (strings) or Stages: "
                             f"{[type(a) for a in args]}")

    def stage(self, index: int) -> Stage:
        return self.stages[index]

    def ipus(self, *ipus: int) -> None:
        """One IPU for each stage of the phase."""
        if len(ipus) != len(self.stages):
            raise ValueError(f"Phase contains {len(self.stages)} stages but you provided "
                             f"{len(ipus)} ipus")
        for stage, ipu in zip(self.stages, ipus, strict=True):
            stage.ipu(ipu)


class _ExecutionStrategy:
    """Maps block ids to stages (see the module's docstring for the rules)."""

    def __init__(self, *args: Any):
        self._auto_stage = AutoStage.SameAsIpu
        self._block_map: dict[str, Stage] = {}
        if len(args) == 1 and isinstance(args[0], AutoStage):
            self._auto_stage = args[0]
            return
        for stage_id, arg in enumerate(args):
            if isinstance(arg, Stage):
                stage = arg
            elif isinstance(arg, str):
                stage = Stage(arg)
            elif isinstance(arg, list | tuple):
                stage = Stage(*arg)
            else:
                raise ValueError(f"{type(self).__name__} takes Stages, block IDs or an "
                                 f"AutoStage, not {arg!r}")
            stage._stage_id = stage_id
            self._add(stage)

    def _add(self, stage: Stage) -> None:
        for block in stage.blocks:
            if block in self._block_map:
                raise ValueError(f"{block} associated with more than one stage")
            self._block_map[block] = stage

    def stage(self, block_id: str) -> Stage:
        """The Stage a block id belongs to."""
        if block_id not in self._block_map:
            raise ValueError(f"Unknown block {block_id}")
        return self._block_map[block_id]

    def _stage_for(self, block_id: str, ipu_id: int | None, auto: dict[str, Stage]) -> Stage:
        if self._block_map:
            if block_id not in self._block_map:
                raise Error(f"Unknown Block '{block_id}' list of expected Blocks: "
                            f"{list(self._block_map)}")
            return self._block_map[block_id]
        if block_id not in auto:
            stage = Stage(block_id)
            if self._auto_stage == AutoStage.SameAsIpu:
                if ipu_id is None:
                    raise Error("poptorch.AutoStage.SameAsIpu was selected but no IPU was "
                                f"specified for block {block_id}")
                stage._stage_id = ipu_id
            else:
                stage._stage_id = len(auto) + 1
            auto[block_id] = stage
        return auto[block_id]


class PipelinedExecution(_ExecutionStrategy):
    pass


class ShardedExecution(PipelinedExecution):
    pass


class _PhasedExecution(_ExecutionStrategy):
    def __init__(self, *phases: Any):
        if not phases:
            raise ValueError("There is currently no AutoStage for PhasedExecution, please "
                             "explicitly specify the phases")
        super().__init__()
        self._phases: list[Phase] = []
        for phase_id, arg in enumerate(phases):
            phase = arg if isinstance(arg, Phase) else \
                Phase(*(arg if isinstance(arg, list | tuple) else [arg]))
            self._phases.append(phase)
            for stage in phase.stages:
                stage._phase_id = phase_id
                self._add(stage)

    def phase(self, phase: int) -> Phase:
        return self._phases[phase]

    def useSeparateBackwardPhase(self, use: bool = True) -> _PhasedExecution:  # noqa: N802
        self._separate_backward_phase = bool(use)
        return self


class ParallelPhasedExecution(_PhasedExecution):
    def sendTensorsOffChipAfterFwd(self, off_chip: bool = True):  # noqa: N802
        self._off_chip_after_fwd = bool(off_chip)
        return self


class SerialPhasedExecution(_PhasedExecution):
    def setTensorsLiveness(self, liveness: Any):  # noqa: N802
        self._liveness = liveness
        return self


class _Placement:
    """The IPU of the code running now, during a trace (None outside one)."""

    def __init__(self) -> None:
        self.tracing = False
        self.ipu = 0
        self.highest_ipu = 0
        self.strategy: _ExecutionStrategy = PipelinedExecution()
        self._next_auto_id = 0
        self._auto_stages: dict[str, Stage] = {}
        self.blocks: dict[str, int] = {}  # block id -> IPU, for the trace's log

    def enter_block(self, user_id: Any, ipu_id: int | None) -> None:
        if not self.tracing:
            return
        if not user_id:
            user_id = str(self._next_auto_id)
            self._next_auto_id += 1
        stage = self.strategy._stage_for(str(user_id), ipu_id, self._auto_stages)
        if stage._ipu is not None:
            ipu = stage._ipu
        elif ipu_id is not None:
            ipu = ipu_id
        else:
            ipu = max(stage._stage_id, 0)
        self.ipu = ipu
        self.highest_ipu = max(self.highest_ipu, ipu)
        self.blocks[str(user_id)] = ipu

    def reset_auto_id(self) -> None:
        self._next_auto_id = 0

    @contextmanager
    def trace(self, strategy: _ExecutionStrategy | None = None) -> Iterator[_Placement]:
        self.tracing, self.ipu, self.highest_ipu = True, 0, 0
        self.strategy = strategy if strategy is not None else PipelinedExecution()
        self._next_auto_id, self._auto_stages, self.blocks = 0, {}, {}
        try:
            yield self
        finally:
            self.tracing = False


placement = _Placement()


def _enter_hook(module: torch.nn.Module, _inputs: Any) -> None:
    user_id, ipu_id = getattr(module, _BLOCK_ATTR)
    placement.enter_block(user_id, ipu_id)


def _check_ipu_id(ipu_id: Any) -> None:
    if ipu_id is not None and (not isinstance(ipu_id, int) or isinstance(ipu_id, bool)
                               or ipu_id < 0):
        raise ValueError(f"ipu_id must be a non-negative integer, not {ipu_id!r}")


def BeginBlock(layer_to_call: torch.nn.Module, user_id: Any = None,  # noqa: N802
               ipu_id: int | None = None) -> torch.nn.Module:
    """From this layer on (in execution order), run in block `user_id` / on IPU `ipu_id`."""
    if not isinstance(layer_to_call, torch.nn.Module):
        raise ValueError("BeginBlock takes a torch.nn.Module: wrap a layer, or use "
                         "`with poptorch.Block(...)` around code")
    _check_ipu_id(ipu_id)
    if not hasattr(layer_to_call, _BLOCK_ATTR):
        layer_to_call.register_forward_pre_hook(_enter_hook)
    setattr(layer_to_call, _BLOCK_ATTR, (user_id, ipu_id))
    return layer_to_call


class Block:
    """`with poptorch.Block("name", ipu_id=1): ...` runs the enclosed code in that block."""

    def __init__(self, user_id: Any = None, ipu_id: int | None = None):
        _check_ipu_id(ipu_id)
        self.user_id = user_id
        self.ipu_id = ipu_id

    def __enter__(self) -> Block:
        placement.enter_block(self.user_id, self.ipu_id)
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    @staticmethod
    def useAutoId() -> None:  # noqa: N802
        """Number the unnamed blocks from "0" again."""
        placement.reset_auto_id()

    @staticmethod
    def start(user_id: Any = None, ipu_id: int | None = None) -> None:
        _check_ipu_id(ipu_id)
        placement.enter_block(user_id, ipu_id)


class BlockFunction:
    """poptorch.BlockFunction(user_id, ipu_id) as a decorator: the function runs in that block."""

    def __init__(self, user_id: Any = None, ipu_id: int | None = None):
        self.block = Block(user_id, ipu_id)

    def __call__(self, function):
        def wrapped(*args, **kwargs):
            with self.block:
                return function(*args, **kwargs)
        return wrapped


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
