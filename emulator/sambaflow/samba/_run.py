"""samba.session.load / run: a PEF on the (emulated) RDUs, with the RDU's copy of the weights.

load      (utils.trace_graph) reads the PEF, checks it is this model's and the batch size
          it was compiled for, asks snd for its tiles, and makes the RDU's copy of the
          weights ("Two copies of the model are maintained").
run       one step: forward, and for a training PEF backward and the optimizer, on the
          RDU copy; outputs come back as SambaTensors. Device time advances by the PEF's
          step time. Across data-parallel instances the gradients are averaged.

The RDU copy: each parameter p has a twin q (`p._sn_rdu`). A run puts the twins into
the modules for the step and the parameters back after it, so the CPU model never
sees the RDU's updates unless copied (`session.to_cpu(model)`, `p.cpu()`), and a
CPU forward taken before a run can still be back-propagated after it (the `test`
flow). The optimizer given to trace_graph is re-created over the twins (same class,
same hyper-parameters; `hyperparam_dict` updates them per run). Buffers (e.g.
batch-norm statistics) are shared by both copies.

Numerics: fp32 on the CPU. `test` runs the RDU side in bfloat16 mixed precision
(torch.autocast), which is what makes its CPU/RDU comparison meaningful; `run` stays
fp32, because this host has no bf16 arithmetic and autocast costs 1.7x per LeNet
step at batch 1 and ~12x for convolutions. AITESTBED_SN_PRECISION=bf16|fp32
chooses for every subcommand.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

import torch
from aitestbed.devices.base import DeviceError
from aitestbed.sambanova import rdu
from aitestbed.sambanova import timing as rdu_timing

from .. import _graph, _pef
from .._distributed import Layout, Reducer, layout
from .._errors import PefError, SambaError
from .._runtime import runtime
from .._tiles import TileSession
from ._compile import CROSS_ENTROPY_WARNING, _optimizers, last_args, set_output_tensors
from ._tensor import SambaTensor

PRECISION_ENV = "AITESTBED_SN_PRECISION"
PEF_LOAD_SECONDS = 2.5  # ours: device time to load a PEF onto its tiles (%pload)
# A step this small (forward FLOPs of the batch) runs fastest on one host thread: the
# operators are too small to split, and a second thread only adds synchronisation,
# which turns into long stalls when another process is busy on the same cores
# (LeNet at batch 1 is ~0.8 MFLOP; measured 1 ms/step alone, 200 ms/step stalls with
# two threads next to another busy process on 2 cores).
SMALL_STEP_FLOPS = 50e6
SECTION_ALIASES = {"fwd": "fwd", "forward": "fwd", "bckwd": "bckwd", "bwd": "bckwd",
                   "backward": "bckwd", "opt": "opt", "optim": "opt", "optimizer": "opt",
                   "gradnorm": "gradnorm", "grad_norm": "gradnorm"}
# hyperparam_dict keys that are not the optimizers': the dropout probability.
DROPOUT_KEYS = ("p", "dropout")


class _Loaded:
    """A PEF loaded for a model: its RDU copy, its optimizer there, its step time."""

    def __init__(self, pef: dict[str, Any], path: str, model: torch.nn.Module,
                 optimizer: torch.optim.Optimizer | None, inputs: tuple[Any, ...],
                 bf16: bool) -> None:
        self.pef = pef
        self.path = path
        self.model = model
        self.user_optimizer = optimizer
        self.bf16 = bf16
        self.trains = bool(pef.get("backward")) and not pef.get("inference")
        self.loss_index = pef.get("loss_output")
        self.init_output_grads = bool(pef.get("init_output_grads"))
        self.widen = False  # set by load from its trace (narrow int ids and targets)
        self.first_shape = inputs[0].shape if inputs and isinstance(inputs[0], torch.Tensor) \
            else None
        # The graph's inputs are the traced arguments that are tensors; the others (None
        # for an optional argument of forward) are fixed in the graph. session.run takes
        # either all the traced arguments or just the tensors, in order or by name.
        self.arity = len(inputs)
        self.tensor_slots = [i for i, value in enumerate(inputs) if isinstance(value, torch.Tensor)]
        self.slot_names = [getattr(inputs[i], "sn_name", None) for i in self.tensor_slots]
        self.fixed = tuple(None if isinstance(value, torch.Tensor) else value for value in inputs)
        self.started = False
        self.reducer: Reducer | None = None
        self.layout = Layout(0, 1, 0)
        self.step_seconds = float(pef.get("step_seconds", 0.0))
        self.forward_seconds = float(pef.get("forward_seconds", 0.0))
        self.last_hyperparams: Any = None
        # The RDU copy of the weights: a twin for every parameter (shared ones once).
        self.slots: list[tuple[torch.nn.Module, str, torch.nn.Parameter, torch.nn.Parameter]] = []
        twins: dict[int, torch.nn.Parameter] = {}
        for module in model.modules():
            for name, parameter in module._parameters.items():
                if parameter is None:
                    continue
                twin = twins.get(id(parameter))
                if twin is None:
                    twin = torch.nn.Parameter(parameter.detach().clone(),
                                              requires_grad=parameter.requires_grad)
                    twins[id(parameter)] = twin
                    parameter.__dict__["_sn_rdu"] = twin
                self.slots.append((module, name, parameter, twin))
        self.twins = twins
        self.rdu_parameters = list(twins.values())
        self.optimizers = [self._rdu_optimizer(o) for o in _optimizers(optimizer)] \
            if self.trains else []
        self.dropouts = [m for m in model.modules() if isinstance(m, torch.nn.modules.dropout
                                                                   ._DropoutNd)]

    @property
    def optimizer(self) -> torch.optim.Optimizer | None:
        """The (first) optimizer on the RDU copy; `optimizers` has them all."""
        return self.optimizers[0] if self.optimizers else None

    def _rdu_optimizer(self, optimizer: torch.optim.Optimizer) -> torch.optim.Optimizer:
        groups = []
        for group in optimizer.param_groups:
            twin_group = {key: value for key, value in group.items() if key != "params"}
            twin_group["params"] = [self.twins.get(id(p), p) for p in group["params"]]
            groups.append(twin_group)
        twin_optimizer = type(optimizer).__new__(type(optimizer))
        torch.optim.Optimizer.__init__(twin_optimizer, groups, dict(optimizer.defaults))
        twin_optimizer.samba_options = dict(getattr(optimizer, "samba_options", {}) or {})
        return twin_optimizer

    def apply_hyperparams(self, hyperparams: dict[str, Any]) -> None:
        self.last_hyperparams = dict(hyperparams)
        values = dict(hyperparams)
        for key in DROPOUT_KEYS:
            if key in values:
                probability = float(values.pop(key))
                if not 0.0 <= probability <= 1.0:
                    raise SambaError(f"session.run: hyperparam_dict[{key!r}] is a dropout "
                                     f"probability, between 0 and 1, not {probability}")
                for module in self.dropouts:
                    module.p = probability
        if "beta1" in values or "beta2" in values:
            values["betas"] = (values.pop("beta1", None), values.pop("beta2", None))
        groups = [group for optimizer in self.optimizers for group in optimizer.param_groups]
        for group in groups:
            for key, value in values.items():
                if key == "betas" and "betas" in group:
                    old = group["betas"]
                    group["betas"] = (old[0] if value[0] is None else value[0],
                                      old[1] if value[1] is None else value[1])
                elif key in group:
                    group[key] = value


def _forward(model: torch.nn.Module, inputs, bf16: bool) -> tuple | list:
    """The model's outputs on inputs (under bfloat16 autocast for a bf16 PEF), a sequence."""
    with torch.autocast("cpu", dtype=torch.bfloat16) if bf16 else contextlib.nullcontext():
        outputs = model(*inputs)
    return outputs if isinstance(outputs, tuple | list) else (outputs,)


def _copy_weights(model: torch.nn.Module, *, to_rdu: bool) -> torch.nn.Module:
    """Copy each parameter's weights to its RDU twin (to_rdu) or back from it."""
    with torch.no_grad():
        for parameter in model.parameters():
            twin = parameter.__dict__.get("_sn_rdu")
            if twin is not None:
                source, target = (parameter, twin) if to_rdu else (twin, parameter)
                target.data.copy_(source.data)
    return model


class Runner:
    """The load-and-run half of SambaSession: the loaded PEF, its tiles, its steps."""

    def __init__(self) -> None:
        self._loaded: _Loaded | None = None
        self._tiles = TileSession()
        self.last_step_seconds = 0.0

    # -- load (utils.trace_graph) ---------------------------------------------------------------
    def load(self, model: torch.nn.Module, inputs: Any, optimizer: Any = None,
             pef: str | None = None, mapping: str | None = None, **kwargs: Any) -> tuple:
        if not isinstance(model, torch.nn.Module):
            raise SambaError("trace_graph takes a torch.nn.Module")
        inputs = _graph.as_tuple(inputs)
        args = last_args()
        pef_path = pef if pef is not None else args.get("pef")
        document = _pef.read(pef_path)
        given = _graph.batch_size(inputs)
        if given is not None:
            try:
                rdu.check_batch_size(int(document.get("batch_size", 1)), given)
            except DeviceError as err:
                raise PefError(f"{pef_path}: {err}") from None
        if document.get("graph_digest") != _graph.digest(model, inputs):
            ours = _graph.parameter_count(model)
            theirs = document.get("parameters")
            detail = (f"{theirs:,} parameters; this model has {ours:,}"
                      if isinstance(theirs, int) and theirs != ours else
                      "another graph or other input shapes")
            raise PefError(f"{pef_path} was compiled from another model (PEF "
                           f"{document.get('name')!r}: {detail}): compile this model first")
        if _optimizers(optimizer) and not document.get("backward") and not args.get("inference"):
            raise PefError(f"{pef_path} was compiled with --inference (forward only) but an "
                           "optimizer was given: run with --inference, or compile for training")
        where = layout()
        if args.get("data_parallel") and where.world_size > 1 and not document.get(
                "data_parallel"):
            raise PefError(f"{pef_path} was not compiled for data parallel: compile with "
                           "--data-parallel -ws <world size>")
        self._open_tiles(document, str(pef_path))
        traced = _graph.trace(model, inputs)
        if traced.cross_entropy_int64:
            print(runtime.samba_line("Warning", "SAMBA", CROSS_ENTROPY_WARNING))
        precision = os.environ.get(PRECISION_ENV, "").strip().lower()
        bf16 = precision == "bf16" or (precision != "fp32" and args.get("command") == "test")
        if self._loaded is not None:
            self._forget_loaded()
        self._loaded = _Loaded(document, str(pef_path), model, optimizer, inputs, bf16)
        self._loaded.widen = traced.widened
        if 0 < float(document.get("forward_flops") or 0) < SMALL_STEP_FLOPS:
            torch.set_num_threads(1)
        runtime.clock.advance(PEF_LOAD_SECONDS)
        set_output_tensors(model, traced.outputs, str(document.get("name", "pef")))
        return model.output_tensors

    def _open_tiles(self, document: dict[str, Any], path: str) -> None:
        tiles = self._tiles.open(int(document.get("tiles", 4)))
        self._tiles.set_state("pload")
        platform = runtime.platform()
        if platform.sn10:
            message = f"SambaConnector: PEF File: {path}"
            component = "SC"
        else:
            message = f"sn_create_session: PEF File: {path}"
            component = "LIB"
        runtime.log("INFO", component, message)
        runtime.log("INFO", component, f"session {self._tiles.id} on {len(tiles)} tiles: "
                                       f"{' '.join(tiles)}")
        runtime.c_stdout(runtime.lib_line("INFO", component, message))
        runtime.c_stdout(f"Log ID initialized to: [{runtime.user()}][python][{os.getpid()}] "
                         f"at {runtime.log_path()}")

    def _forget_loaded(self) -> None:
        loaded = self._loaded
        if loaded is None:
            return
        for _module, _name, parameter, _twin in loaded.slots:
            parameter.__dict__.pop("_sn_rdu", None)
        self._loaded = None

    # -- run ----------------------------------------------------------------------------------
    def _start(self, loaded: _Loaded, data_parallel: bool) -> None:
        loaded.started = True
        where = layout()
        if data_parallel and where.world_size > 1:
            if not loaded.pef.get("data_parallel"):
                raise PefError(f"{loaded.path} was not compiled for data parallel: compile "
                               "with --data-parallel -ws <world size>")
            loaded.layout = where
            loaded.reducer = Reducer(where)
            loaded.reducer.broadcast(loaded.rdu_parameters)
            seed = int("".join(c for c in os.environ.get("SLURM_JOB_ID", "0") if c.isdigit())
                       or 0)
            kind = str(loaded.pef.get("workload", {}).get("kind", "generic"))
            factor = rdu_timing.instance_factor(kind, where.world_size, where.rank, seed)
            loaded.step_seconds *= factor
            loaded.forward_seconds *= factor
        self._tiles.set_state("exec")

    def run(self, input_tensors: Any, output_tensors: Any = None,
            hyperparam_dict: dict[str, Any] | None = None, data_parallel: bool = False,
            reduce_on_rdu: bool = False, section_types: Any = None, **kwargs: Any) -> list:
        """One step of the loaded PEF on `input_tensors`; the outputs as SambaTensors."""
        loaded = self._loaded
        if loaded is None:
            raise SambaError("session.run needs a loaded PEF: call "
                             "utils.trace_graph(model, inputs, optimizer, pef=...) first")
        if not loaded.started:
            self._start(loaded, data_parallel)
        inputs = input_tensors if isinstance(input_tensors, tuple | list) else (input_tensors,)
        inputs = self._graph_arguments(loaded, tuple(inputs))
        first = inputs[0] if inputs else None
        if loaded.first_shape is not None and (not isinstance(first, torch.Tensor)
                                               or first.shape != loaded.first_shape):
            self._check_batch(loaded, inputs)
        train = loaded.trains and (section_types is None or self._backward_in(section_types))
        # Compared by value: apps change the learning rate in the same dict between steps.
        if hyperparam_dict is not None and hyperparam_dict != loaded.last_hyperparams:
            loaded.apply_hyperparams(hyperparam_dict)
        model = loaded.model
        slots = loaded.slots
        for module, name, _parameter, twin in slots:
            module._parameters[name] = twin
        widen = _graph.Widen() if loaded.widen else contextlib.nullcontext()
        try:
            if train:
                for twin in loaded.rdu_parameters:
                    twin.grad = None
                with widen:
                    outputs = _forward(model, inputs, loaded.bf16)
                differentiated = outputs[loaded.loss_index]
                differentiated.backward(self._output_gradient(loaded, differentiated,
                                                              output_tensors))
                if loaded.reducer is not None:
                    loaded.reducer.average_gradients(loaded.rdu_parameters)
                for optimizer in loaded.optimizers:
                    max_norm = optimizer.samba_options.get("max_grad_norm")
                    if max_norm:  # the GRADNORM section, after the all-reduce, as on the RDU
                        torch.nn.utils.clip_grad_norm_(
                            [p for group in optimizer.param_groups for p in group["params"]],
                            float(max_norm))
                    optimizer.step()
                seconds = loaded.step_seconds
            else:
                with torch.no_grad(), widen:
                    outputs = _forward(model, inputs, loaded.bf16)
                seconds = loaded.forward_seconds
        finally:
            for module, name, parameter, _twin in slots:
                module._parameters[name] = parameter
        runtime.clock.advance(seconds)
        self.last_step_seconds = seconds
        count = len(outputs) if output_tensors is None else min(len(outputs), len(output_tensors))
        results = []
        for value in outputs[:count]:
            if isinstance(value, torch.Tensor):
                value = value.detach()
                if loaded.bf16 and value.dtype == torch.bfloat16:
                    value = value.float()
                value = value.as_subclass(SambaTensor)
            results.append(value)
        return results

    @staticmethod
    def _graph_arguments(loaded: _Loaded, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        """The forward's arguments for the given input tensors (see _Loaded.tensor_slots)."""
        slots = loaded.tensor_slots
        if len(inputs) == loaded.arity or len(slots) == loaded.arity:
            return inputs
        given = [value for value in inputs if value is not None]
        if len(given) != len(slots):
            names = ", ".join(str(name) for name in loaded.slot_names)
            raise SambaError(f"session.run: the PEF takes {len(slots)} input tensors "
                             f"({names}), but {len(given)} were given")
        names = [getattr(value, "sn_name", None) for value in given]
        if all(names) and all(loaded.slot_names) and sorted(names) == sorted(loaded.slot_names) \
                and names != loaded.slot_names:
            by_name = dict(zip(names, given, strict=True))
            given = [by_name[name] for name in loaded.slot_names]
        arguments = list(loaded.fixed)
        for slot, value in zip(slots, given, strict=True):
            arguments[slot] = value
        return tuple(arguments)

    @staticmethod
    def _output_gradient(loaded: _Loaded, output: torch.Tensor,
                         output_tensors: Any) -> torch.Tensor | None:
        """The gradient backward starts from: none for a scalar loss; with init_output_grads
        the one the app set on the traced output (`outputs[i].sn_grad = ...`), else ones."""
        if not loaded.init_output_grads:
            return None
        given = None
        if isinstance(output_tensors, tuple | list) and len(output_tensors) > loaded.loss_index:
            traced = output_tensors[loaded.loss_index]
            given = getattr(traced, "__dict__", {}).get("sn_grad")
        if given is None:
            return torch.ones_like(output)
        given = torch.as_tensor(given).as_subclass(torch.Tensor)
        if given.numel() != output.numel():
            raise SambaError(f"session.run: the gradient set on output {loaded.loss_index} "
                             f"(sn_grad) has shape {list(given.shape)}, the output "
                             f"{list(output.shape)}")
        return given.reshape(output.shape).to(output.dtype)

    @staticmethod
    def _backward_in(section_types: Any) -> bool:
        if isinstance(section_types, str):
            section_types = [section_types]
        names = {SECTION_ALIASES.get(str(s).lower(), str(s).lower()) for s in section_types}
        return "bckwd" in names or "opt" in names

    @staticmethod
    def _check_batch(loaded: _Loaded, inputs: Any) -> None:
        if not inputs or not isinstance(inputs[0], torch.Tensor):
            raise SambaError("session.run: input_tensors must be the PEF's input tensors")
        given = _graph.batch_size(tuple(inputs))
        compiled = int(loaded.pef.get("batch_size", 1))
        if given is not None and given != compiled:
            try:
                rdu.check_batch_size(compiled, given)
            except DeviceError as err:
                raise SambaError(f"session.run: {err}") from None
        expected = loaded.first_shape
        raise SambaError(f"session.run: input 0 has shape {list(inputs[0].shape)}, but the PEF "
                         f"was compiled for {list(expected) if expected is not None else '?'}")

    # -- the two copies -------------------------------------------------------------------
    def to_cpu(self, model: torch.nn.Module) -> torch.nn.Module:
        """Copy the RDU's weights to the CPU model."""
        return _copy_weights(model, to_rdu=False)

    def to_rdu(self, model: torch.nn.Module) -> torch.nn.Module:
        """Copy the CPU model's weights to the RDU."""
        return _copy_weights(model, to_rdu=True)

    # -- ours: for apps that print device time ------------------------------------------------
    @property
    def world_size(self) -> int:
        return layout().world_size

    @property
    def rank(self) -> int:
        return layout().rank

    @staticmethod
    def device_time() -> float:
        """Seconds on the device clock (a time.time() that moves with the emulated RDU)."""
        return runtime.clock.now()

    def close(self) -> None:
        """End the session: the tiles go back to snd (also done at exit)."""
        self._forget_loaded()
        self._tiles.close()
