"""trainingModel / inferenceModel: the PoplarExecutor that runs a model on the IPUs.

One call takes the combined batch (micro-batch x device iterations x replicas
x gradient accumulation) and runs `deviceIterations` steps. In training each
step is one optimizer step over micro-batch x replicas x gradient accumulation
samples: the CPU computes them as one batch, which gives the gradient PopTorch's
mean accumulation and replica reduction give (batch-norm statistics are then
taken over the step's samples rather than each micro-batch's). Across poprun
instances the gradients are averaged with torch.distributed.
"""

from __future__ import annotations

import copy
import os
from typing import Any

import torch
from aitestbed.graphcore import timing

from . import _compiler
from ._errors import Error
from ._logging import logger
from ._profiling import SystemTrace, graph_report
from ._runtime import runtime
from ._version import __version__
from .enums import OutputMode
from .options import Options

_system_trace: SystemTrace | None = None
_GRADIENT, _UPDATED = "Gradient___", "UpdatedVar___"  # PopART's prefixes of tensor names


def _trace() -> SystemTrace:
    global _system_trace
    if _system_trace is None:
        _system_trace = SystemTrace()
    return _system_trace


def _find_loss(output: Any) -> torch.Tensor:
    """The loss: the identity_loss output, else the only (or last) scalar output."""
    if isinstance(output, torch.Tensor):
        candidates = [output]
    elif isinstance(output, tuple | list):
        candidates = [t for t in output if isinstance(t, torch.Tensor)]
    else:
        candidates = []
    marked = [t for t in candidates if getattr(t, "_poptorch_loss", False)]
    scalars = [t for t in candidates if t.dim() == 0 or t.numel() == 1]
    loss = marked[-1] if marked else scalars[-1] if scalars else None
    if loss is None or not loss.requires_grad:
        raise Error("The model must return a loss (a scalar that depends on the parameters), "
                    "or a tuple whose loss is marked with poptorch.identity_loss",
                    "poptorch/python/_poplar_executor.py")
    return loss.sum() if loss.dim() else loss


def _slice(value: Any, start: int, stop: int) -> Any:
    if isinstance(value, torch.Tensor) and value.dim() > 0:
        return value[start:stop]
    if isinstance(value, tuple | list):
        return type(value)(_slice(v, start, stop) for v in value)
    if isinstance(value, dict):
        return {k: _slice(v, start, stop) for k, v in value.items()}
    return value


def _batch_dims(args: tuple, kwargs: dict) -> set[int]:
    return {t.shape[0] for t in _compiler._tensors((args, kwargs)) if t.dim() > 0}


def _detach(value: Any, replicas: int) -> Any:
    if isinstance(value, torch.Tensor):
        value = value.detach()
        if value.dim() == 0 and replicas > 1:
            value = value.expand(replicas).clone()
        return value
    if isinstance(value, tuple | list):
        return type(value)(_detach(v, replicas) for v in value)
    if isinstance(value, dict):
        return {k: _detach(v, replicas) for k, v in value.items()}
    return value


def _combine(outputs: list[Any], mode: OutputMode, period: int) -> Any:
    if mode == OutputMode.Final:
        return outputs[-1]
    if mode == OutputMode.EveryN:
        outputs = outputs[period - 1::period] or outputs[-1:]
    first = outputs[0]
    if isinstance(first, torch.Tensor):
        if mode == OutputMode.Sum:
            return torch.stack(outputs).sum(0)
        return torch.stack(outputs) if first.dim() == 0 else torch.cat(outputs)
    if isinstance(first, tuple | list):
        return type(first)(_combine([o[i] for o in outputs], mode, 1)
                           for i in range(len(first)))
    if isinstance(first, dict):
        return {k: _combine([o[k] for o in outputs], mode, 1) for k in first}
    return first


class PoplarExecutor:
    """A model compiled for (and attached to) the IPUs."""

    def __init__(self, model: torch.nn.Module, options: Options | None, training: bool,
                 optimizer: torch.optim.Optimizer | None = None):
        if not isinstance(model, torch.nn.Module):
            raise TypeError("trainingModel/inferenceModel take a torch.nn.Module")
        # The device and the host share the weights: training updates the host model,
        # and an inferenceModel of it made later sees the trained weights.
        self._model = model
        self._options = (options or Options()).clone()
        self._training = training
        self._optimizer = (optimizer or torch.optim.SGD(model.parameters(), lr=0.01)) \
            if training else None
        mode = self._options.output_mode
        if mode == OutputMode.Default:
            mode = OutputMode.Final if training else OutputMode.All
        self._output_mode = mode
        self._executable: _compiler.Executable | None = None
        self._attached = False
        self._destroyed = False
        self._perf: dict[str, list[list[float]]] = {}
        self._distributed = None
        self._anchor_memory: dict[str, torch.Tensor] = {}
        self._step_anchors: list[dict[str, torch.Tensor]] = []

    # -- PopTorch's methods --------------------------------------------------------------
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        # PopTorch's own check, an assert in _poplar_executor.py.
        if self._options.offline():
            raise AssertionError("Trying to run a model on an offline device "
                                 "(ConnectionType.Never): use model.compile(inputs) instead of "
                                 "model(inputs)")
        self._check_usable()
        options = self._options
        steps = options.device_iterations
        per_step = options.replication_factor * options.gradient_accumulation
        sizes = _batch_dims(args, kwargs)
        if not sizes:
            raise Error("The model's inputs must include at least one tensor with a batch "
                        "dimension", "poptorch/python/_poplar_executor.py")
        combined = max(sizes)
        if any(size != combined for size in sizes) or combined % (steps * per_step):
            raise Error(
                f"Invalid batch dimension: In the input, the batch dimension ({combined}) must "
                f"be a multiple of Options.deviceIterations({steps}) * "
                f"Options.replicationFactor({options.replication_factor}) * "
                f"Options.Training.gradientAccumulation({options.gradient_accumulation}) = "
                f"{steps * per_step}", "poptorch/python/_poplar_executor.py")
        micro = combined // (steps * per_step)
        chunk = micro * per_step
        if self._executable is None:
            self._compile(args, kwargs, micro)
        elif not self._attached:
            self.attachToDevice()
        start = runtime.clock.now()
        outputs = []
        self._step_anchors = []
        self._model.train(self._training)
        for step in range(steps):
            step_args = _slice(args, step * chunk, (step + 1) * chunk)
            step_kwargs = _slice(kwargs, step * chunk, (step + 1) * chunk)
            outputs.append(self._step(step_args, step_kwargs))
        self._keep_anchors()
        self._account(start, steps, micro)
        return _combine(outputs, self._output_mode, options.output_return_period)

    def compile(self, *args: Any, **kwargs: Any) -> None:
        """Compile (or load from the cache) without running."""
        self._check_usable()
        options = self._options
        per_call = options.device_iterations * options.replication_factor * \
            options.gradient_accumulation
        sizes = _batch_dims(args, kwargs)
        self._compile(args, kwargs, max(1, (max(sizes) if sizes else per_call) // per_call))

    def detachFromDevice(self) -> None:  # noqa: N802
        if not self._attached:
            raise Error("Device is not attached", "poptorch/source/LowerToPopart.cpp:1431")
        self._attached = False

    def attachToDevice(self) -> None:  # noqa: N802
        if self._executable is None:
            raise Error("The model must be compiled before it can be attached")
        if self._attached:
            raise Error("Device is already attached")
        if not self._options.ipu_model():
            runtime.forget_allocation()
            _compiler.acquire(self._options, self._executable.ipus_per_replica)
        self._attached = True

    def isAttachedToDevice(self) -> bool:  # noqa: N802
        return self._attached

    def isCompiled(self) -> bool:  # noqa: N802
        return self._executable is not None

    def compilationTime(self) -> float:  # noqa: N802
        """Device seconds the last compilation took (0 when loaded from the cache)."""
        if self._executable is None:
            raise Error("The model has not been compiled yet")
        return self._compile_seconds

    def copyWeightsToHost(self) -> None:  # noqa: N802
        """The host model and the device share their weights: nothing to copy."""

    def copyWeightsToDevice(self) -> None:  # noqa: N802
        """The host model and the device share their weights: nothing to copy."""

    def setOptimizer(self, optimizer: torch.optim.Optimizer) -> None:  # noqa: N802
        if not self._training:
            raise Error("setOptimizer is only valid for a trainingModel")
        self._optimizer = optimizer

    def getTensorNames(self) -> list[str]:  # noqa: N802
        """The names of the graph's tensors that anchorTensor can keep.

        Each parameter `p` (as named_parameters names it); in training also its
        gradient `Gradient___p` and its value after the optimizer step `UpdatedVar___p`.
        """
        if self._executable is None:
            raise Error("Model must be compiled before calling getTensorNames")
        return self._tensor_names()

    def getAnchoredTensor(self, short_name: str) -> torch.Tensor:  # noqa: N802
        """The tensor anchored as `short_name` (Options.anchorTensor), from the last call."""
        if short_name not in self._anchor_memory:
            raise Error(f"No tensor with name {short_name} found.")
        return self._anchor_memory[short_name]

    def getPerfCounters(self) -> dict[str, list[list[float]]]:  # noqa: N802
        """Device-time stamps (seconds) of the last call: [replica][device iteration]."""
        return copy.deepcopy(self._perf)

    def getLatency(self) -> tuple[float, float, float]:  # noqa: N802
        if not self._perf:
            return (0.0, 0.0, 0.0)
        spans = [end - begin for begins, ends in zip(self._perf["input"],
                 self._perf["output_complete"], strict=True)
                 for begin, end in zip(begins, ends, strict=True)]
        return (min(spans), max(spans), sum(spans) / len(spans))

    def destroy(self) -> None:
        self._attached = False
        self._destroyed = True

    def save(self, filename: str, export_model: bool = True, save_rng_state: bool = True):
        torch.save({"poptorch_version": __version__, "training": self._training,
                    "model": self._model, "options": self._options,
                    "optimizer": self._optimizer,
                    "executable": self._executable}, filename)

    @property
    def options(self) -> Options:
        return self._options

    @property
    def model(self) -> torch.nn.Module:
        return self._model

    def __getattr__(self, name: str) -> Any:
        # Attributes of the wrapped model (e.g. a custom method) are reachable, as in PopTorch.
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.__dict__["_model"], name)

    def __repr__(self) -> str:
        return repr(self._model)

    # -- the work ------------------------------------------------------------------------
    def _check_usable(self) -> None:
        if self._destroyed:
            raise Error("This executor has been destroyed")

    def _tensor_names(self) -> list[str]:
        names = []
        for name, _ in self._model.named_parameters():
            names.append(name)
            if self._training:
                names += [f"{_GRADIENT}{name}", f"{_UPDATED}{name}"]
        return names

    def _check_anchors(self) -> None:
        known = set(self._tensor_names())
        for short, (long_name, _mode, _period) in self._options.anchored_tensors.items():
            if long_name not in known:
                raise Error(f"anchorTensor('{short}', '{long_name}'): there is no tensor "
                            f"'{long_name}' in the {'training' if self._training else 'inference'}"
                            " graph; getTensorNames() lists the names",
                            "poptorch/source/popart_compiler/Compiler.cpp")

    def _anchor_values(self, kind: str) -> dict[str, torch.Tensor]:
        """This step's values of the anchored tensors of one kind (parameter, gradient, update)."""
        wanted = {short: long_name for short, (long_name, _m, _p) in
                  self._options.anchored_tensors.items()}
        if not wanted:
            return {}
        parameters = dict(self._model.named_parameters())
        values = {}
        for short, long_name in wanted.items():
            if kind == "gradient" and long_name.startswith(_GRADIENT):
                grad = parameters[long_name[len(_GRADIENT):]].grad
                values[short] = torch.zeros_like(parameters[long_name[len(_GRADIENT):]]) \
                    if grad is None else grad.detach().clone()
            elif kind == "updated" and long_name.startswith(_UPDATED):
                values[short] = parameters[long_name[len(_UPDATED):]].detach().clone()
            elif kind == "parameter" and long_name in parameters:
                values[short] = parameters[long_name].detach().clone()
        return values

    def _keep_anchors(self) -> None:
        if not self._step_anchors:
            return
        for short, (_long, mode, period) in self._options.anchored_tensors.items():
            steps = [values[short] for values in self._step_anchors if short in values]
            if not steps:
                continue
            mode = self._output_mode if mode is None else mode
            if mode == OutputMode.Final:
                kept = steps[-1]
            elif mode == OutputMode.Sum:
                kept = torch.stack(steps).sum(0)
            else:
                if mode == OutputMode.EveryN:
                    steps = steps[period - 1::period] or steps[-1:]
                kept = steps[0] if len(steps) == 1 else torch.stack(steps)
            self._anchor_memory[short] = kept

    def _compile(self, args: tuple, kwargs: dict, micro: int) -> None:
        self._check_anchors()
        self._setup_distributed()
        micro_args = _slice(args, 0, micro)
        micro_kwargs = _slice(kwargs, 0, micro)
        before = runtime.clock.now()
        self._executable = _compiler.compile_model(
            self._model, args, kwargs, micro_args, micro_kwargs, self._options,
            self._training, __version__)
        self._compile_seconds = runtime.clock.now() - before
        self._attached = not self._options.offline()
        kind = "training" if self._training else "inference"
        graph_report(kind, {"executable": self._executable.__dict__,
                            "options": self._options.toDict()})
        _trace().event("compile", kind, before, runtime.clock.now())

    def _setup_distributed(self) -> None:
        instances = int(os.environ.get("POPDIST_NUM_INSTANCES", "1") or 1)
        if instances < 2 or not self._training:
            return
        import torch.distributed as dist

        if not dist.is_available():
            raise Error("poprun started several instances but this torch has no "
                        "torch.distributed to reduce their gradients")
        if not dist.is_initialized():
            dist.init_process_group("gloo", rank=int(os.environ["POPDIST_INSTANCE_INDEX"]),
                                    world_size=instances)
        self._distributed = dist

    def _step(self, args: tuple, kwargs: dict) -> Any:
        half = _compiler.HalfOnCpu(self._model, args, kwargs)
        with half:
            output = self._run(half.args, half.kwargs)
        return half.output(output)

    def _run(self, args: tuple, kwargs: dict) -> Any:
        anchors = self._anchor_values("parameter")
        self._step_anchors.append(anchors)
        if not self._training:
            with torch.no_grad():
                return _detach(self._model(*args, **kwargs), self._options.replication_factor)
        output = self._model(*args, **kwargs)
        loss = _find_loss(output)
        self._optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if self._distributed is not None:
            world = self._distributed.get_world_size()
            for parameter in self._model.parameters():
                if parameter.grad is not None:
                    self._distributed.all_reduce(parameter.grad)
                    parameter.grad /= world
        anchors.update(self._anchor_values("gradient"))
        self._optimizer.step()
        anchors.update(self._anchor_values("updated"))
        return _detach(output, self._options.replication_factor)

    def _account(self, start: float, steps: int, micro: int) -> None:
        executable = self._executable
        assert executable is not None
        options = self._options
        replicas = options.replication_factor
        seconds = timing.step_seconds(
            executable.timing_parameters, executable.ipus_per_replica * replicas,
            micro * replicas, steps * options.gradient_accumulation, self._training)
        if runtime.first_pass:
            seconds /= timing.first_pass_ratio(executable.timing_parameters)
        runtime.clock.advance(seconds)
        per_step = seconds / steps
        io = min(per_step * 0.05, 1e-4)
        inputs = [start + i * per_step for i in range(steps)]
        self._perf = {
            "input": [list(inputs) for _ in range(replicas)],
            "input_complete": [[t + io for t in inputs] for _ in range(replicas)],
            "output": [[t + per_step - io for t in inputs] for _ in range(replicas)],
            "output_complete": [[t + per_step for t in inputs] for _ in range(replicas)],
        }
        _trace().event("run", "training" if self._training else "inference", start,
                       start + seconds, samples=micro * replicas * steps *
                       options.gradient_accumulation)
        if logger.enabled("DEBUG"):
            logger.debug(f"{steps} device iterations of {micro} x {replicas} replicas in "
                         f"{seconds:.4f} device seconds")


def trainingModel(model: torch.nn.Module, options: Options | None = None,  # noqa: N802
                  optimizer: torch.optim.Optimizer | None = None) -> PoplarExecutor:
    """Wrap `model` (which returns its loss) for training on the IPUs."""
    return PoplarExecutor(model, options, training=True, optimizer=optimizer)


def inferenceModel(model: torch.nn.Module, options: Options | None = None) -> PoplarExecutor:  # noqa: N802
    """Wrap `model` for inference on the IPUs."""
    return PoplarExecutor(model, options, training=False)


def load(filename: str, edit_opts_fn=None) -> PoplarExecutor:
    """An executor saved with PoplarExecutor.save."""
    try:
        saved = torch.load(filename)
        options = saved["options"]
    except (OSError, KeyError, TypeError, RuntimeError) as err:
        raise Error(f"{filename} is not a file saved by PoplarExecutor.save: {err}") from None
    if edit_opts_fn is not None:
        edit_opts_fn(options)
    executor = PoplarExecutor(saved["model"], options, saved["training"], saved["optimizer"])
    return executor
