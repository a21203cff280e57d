"""poptorch.Options and its sub-objects: chainable setters over one dictionary.

Values the emulator acts on: device iterations, replication, gradient
accumulation, output mode, random seed, executable caching, automatic IPU
rounding, the IPU Model, useIpuId, the execution strategy and the connection
type. The others are validated and kept (toDict shows them) as the real
options are, but do not change what the CPU computes.
"""

from __future__ import annotations

import copy
import json
import os
from typing import Any

import torch

from ._errors import Error
from ._logging import logger
from .enums import (
    CommGroupType,
    ConnectionType,
    MeanReductionStrategy,
    OutputMode,
    ReductionType,
    SyncPattern,
)


def _positive(name: str, value: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be a positive integer, not {value!r}")
    return value


class _Section:
    """A group of options (Training, Precision, ...) sharing the parent's dictionary."""

    def __init__(self, values: dict[str, Any]):
        self._values = values

    def toDict(self) -> dict[str, Any]:  # noqa: N802 - PopTorch's name
        return dict(self._values)


class _TrainingOptions(_Section):
    def gradientAccumulation(self, gradient_accumulation: int) -> _TrainingOptions:  # noqa: N802
        self._values["gradient_accumulation"] = _positive("gradientAccumulation",
                                                          gradient_accumulation)
        return self

    def accumulationAndReplicationReductionType(self, reduction_type: ReductionType):  # noqa: N802
        if reduction_type not in (ReductionType.Sum, ReductionType.Mean):
            raise ValueError("accumulationAndReplicationReductionType must be "
                             "ReductionType.Sum or ReductionType.Mean")
        self._values["accumulation_and_replication_reduction_type"] = reduction_type
        return self

    def setMeanAccumulationAndReplicationReductionStrategy(  # noqa: N802
            self, strategy: MeanReductionStrategy) -> _TrainingOptions:
        self._values["mean_reduction_strategy"] = MeanReductionStrategy(strategy)
        return self

    def setAutomaticLossScaling(self, enabled: bool) -> _TrainingOptions:  # noqa: N802
        self._values["automatic_loss_scaling"] = bool(enabled)
        return self

    def setConvolutionDithering(self, enabled: bool) -> _TrainingOptions:  # noqa: N802
        self._values["convolution_dithering"] = bool(enabled)
        return self


class _PrecisionOptions(_Section):
    def setPartialsType(self, dtype: torch.dtype) -> _PrecisionOptions:  # noqa: N802
        if dtype not in (torch.float, torch.float32, torch.half, torch.float16):
            raise ValueError("setPartialsType only accepts torch.float and torch.half")
        self._values["partials_type"] = str(dtype)
        return self

    def enableStochasticRounding(self, enabled: bool) -> _PrecisionOptions:  # noqa: N802
        self._values["stochastic_rounding"] = bool(enabled)
        return self

    def enableFloatingPointExceptions(self, enabled: bool) -> _PrecisionOptions:  # noqa: N802
        self._values["floating_point_exceptions"] = bool(enabled)
        return self

    def runningStatisticsAlwaysFloat(self, enabled: bool) -> _PrecisionOptions:  # noqa: N802
        self._values["running_statistics_always_float"] = bool(enabled)
        return self

    def halfFloatCasting(self, casting: Any) -> _PrecisionOptions:  # noqa: N802
        self._values["half_float_casting"] = str(casting)
        return self


class TensorLocationSettings:
    """Where a class of tensors lives (on chip, streaming memory, sharded)."""

    def __init__(self) -> None:
        self._values: dict[str, Any] = {}

    def _set(self, key: str, value: Any) -> TensorLocationSettings:
        self._values[key] = value
        return self

    def useOnChipStorage(self, use: bool = True) -> TensorLocationSettings:  # noqa: N802
        return self._set("onChip", bool(use))

    def useReplicatedTensorSharding(self, use: bool = True):  # noqa: N802
        return self._set("useReplicatedTensorSharding", bool(use))

    def useIOTilesToLoad(self, use: bool = True) -> TensorLocationSettings:  # noqa: N802
        return self._set("useIOTilesToLoad", bool(use))

    def useIOTilesToStore(self, use: bool = True) -> TensorLocationSettings:  # noqa: N802
        return self._set("useIOTilesToStore", bool(use))

    def minElementsForOffChip(self, min_elements: int) -> TensorLocationSettings:  # noqa: N802
        return self._set("minElementsForOffChip", int(min_elements))

    def minElementsForReplicatedTensorSharding(self, min_elements: int):  # noqa: N802
        return self._set("minElementsForReplicatedTensorSharding", int(min_elements))

    def toDict(self) -> dict[str, Any]:  # noqa: N802
        return dict(self._values)


class _TensorLocationOptions(_Section):
    def _set(self, kind: str, settings: TensorLocationSettings) -> _TensorLocationOptions:
        if not isinstance(settings, TensorLocationSettings):
            raise ValueError(f"{kind} takes a poptorch.TensorLocationSettings")
        self._values[kind] = settings.toDict()
        return self

    def setActivationLocation(self, settings: TensorLocationSettings):  # noqa: N802
        return self._set("location_activation", settings)

    def setWeightLocation(self, settings: TensorLocationSettings):  # noqa: N802
        return self._set("location_weight", settings)

    def setOptimizerLocation(self, settings: TensorLocationSettings):  # noqa: N802
        return self._set("location_optimizer", settings)

    def setAccumulatorLocation(self, settings: TensorLocationSettings):  # noqa: N802
        return self._set("location_accumulator", settings)

    def numIOTiles(self, count: int) -> _TensorLocationOptions:  # noqa: N802
        self._values["num_io_tiles"] = int(count)
        return self


class _DistributedOptions(_Section):
    def configureProcessId(self, process_id: int, num_processes: int):  # noqa: N802
        if not 0 <= process_id < num_processes:
            raise ValueError(f"process id {process_id} is not within 0..{num_processes - 1}")
        self._values["process_id"], self._values["num_processes"] = process_id, num_processes
        return self

    def disableProcessGroup(self) -> _DistributedOptions:  # noqa: N802
        self._values["process_group"] = False
        return self

    @property
    def processId(self) -> int:  # noqa: N802
        return self._values.get("process_id", 0)

    @property
    def numProcesses(self) -> int:  # noqa: N802
        return self._values.get("num_processes", 1)


class _JitOptions(_Section):
    def traceModel(self, trace_model: bool) -> _JitOptions:  # noqa: N802
        self._values["trace_model"] = bool(trace_model)
        return self


class _PopartOptions(_Section):
    def set(self, key: str, value: Any) -> _PopartOptions:
        self._values[key] = value
        return self

    def setPatterns(self, patterns: dict[str, bool], level: int = 2):  # noqa: N802
        self._values["patterns"] = dict(patterns)
        self._values["patterns_level"] = level
        return self


class Options:
    """Chainable options of a trainingModel/inferenceModel and of its DataLoader."""

    def __init__(self) -> None:
        self._values: dict[str, Any] = {
            "device_iterations": 1,
            "replication_factor": 1,
            "input_group_size": 1,
            "output_mode": OutputMode.Default,
            "output_return_period": 1,
            "auto_round_num_ipus": False,
            "use_ipu_model": False,
            "connection_type": ConnectionType.Always,
            "sync_pattern": SyncPattern.Full,
            "show_compilation_progress_bar": True,
            "executable_cache_dir": "",
            "model_name": "",
            "available_memory_proportion": {},
        }
        self._training: dict[str, Any] = {"gradient_accumulation": 1}
        self.Training = _TrainingOptions(self._training)
        self.Precision = _PrecisionOptions({})
        self.TensorLocations = _TensorLocationOptions({})
        self.Distributed = _DistributedOptions({})
        self.Jit = _JitOptions({})
        self._Popart = _PopartOptions({})
        self._execution_strategy: Any = None
        self._apply_default_options()
        cache = os.environ.get("POPTORCH_CACHE_DIR")
        if cache:
            logger.info(f"POPTORCH_CACHE_DIR is set: setting cache path to {cache}")
            self._values["executable_cache_dir"] = cache

    def _apply_default_options(self) -> None:
        raw = os.environ.get("POPTORCH_DEFAULT_OPTIONS")
        if not raw:
            return
        try:
            defaults = json.loads(raw)
            if not isinstance(defaults, dict):
                raise ValueError
        except ValueError:
            raise Error(f"POPTORCH_DEFAULT_OPTIONS is not a JSON object: {raw}") from None
        for name, value in defaults.items():
            self._call_path(name, value)

    def _call_path(self, name: str, value: Any) -> None:
        target: Any = self
        *parents, method = name.split(".")
        for parent in parents:
            target = getattr(target, parent, None)
        setter = getattr(target, method, None)
        if setter is None or not callable(setter):
            raise Error(f"Unknown option '{name}' in POPTORCH_DEFAULT_OPTIONS")
        setter(*value) if isinstance(value, list) else setter(value)

    # -- the options the emulator acts on --------------------------------------------
    def deviceIterations(self, device_iterations: int) -> Options:  # noqa: N802
        self._values["device_iterations"] = _positive("deviceIterations", device_iterations)
        return self

    def replicationFactor(self, replication_factor: int) -> Options:  # noqa: N802
        self._values["replication_factor"] = _positive("replicationFactor", replication_factor)
        return self

    def inputReplicaGrouping(self, input_group_size: int,  # noqa: N802
                             input_group_type: CommGroupType = CommGroupType.Consecutive):
        self._values["input_group_size"] = _positive("inputReplicaGrouping", input_group_size)
        self._values["input_group_type"] = CommGroupType(input_group_type)
        return self

    def outputMode(self, output_mode: OutputMode, output_return_period: int | None = None):  # noqa: N802
        mode = OutputMode(output_mode)
        if mode == OutputMode.EveryN:
            if output_return_period is None:
                raise ValueError("OutputMode.EveryN needs output_return_period")
            self._values["output_return_period"] = _positive("output_return_period",
                                                             output_return_period)
        elif output_return_period is not None:
            raise ValueError("output_return_period is only valid with OutputMode.EveryN")
        self._values["output_mode"] = mode
        return self

    anchorMode = outputMode  # noqa: N815 - the name before SDK 2.6

    def randomSeed(self, random_seed: int) -> Options:  # noqa: N802
        self._values["random_seed"] = int(random_seed)
        torch.manual_seed(int(random_seed))
        return self

    def enableExecutableCaching(self, path: str) -> Options:  # noqa: N802
        self._values["executable_cache_dir"] = os.fspath(path) if path else ""
        return self

    def autoRoundNumIPUs(self, auto_round_num_ipus: bool) -> Options:  # noqa: N802
        self._values["auto_round_num_ipus"] = bool(auto_round_num_ipus)
        return self

    def useIpuModel(self, use_model: bool) -> Options:  # noqa: N802
        self._values["use_ipu_model"] = bool(use_model)
        return self

    def useIpuId(self, ipu_id: int) -> Options:  # noqa: N802
        if not isinstance(ipu_id, int) or ipu_id < 0:
            raise ValueError(f"useIpuId takes a device id, not {ipu_id!r}")
        self._values["ipu_id"] = ipu_id
        return self

    def connectionType(self, connection_type: ConnectionType) -> Options:  # noqa: N802
        self._values["connection_type"] = ConnectionType(connection_type)
        return self

    def useOfflineIpuTarget(self, ipu_version: int = 2) -> Options:  # noqa: N802
        """Compile for an IPU without attaching to one (ConnectionType.Never): the
        executable goes to the cache, and running the model is refused."""
        self.connectionType(ConnectionType.Never)
        self._values["ipu_version"] = int(ipu_version)
        return self

    def setExecutionStrategy(self, strategy: Any) -> Options:  # noqa: N802
        from .blocks import _ExecutionStrategy  # a strategy object, as PopTorch takes

        if not isinstance(strategy, _ExecutionStrategy):
            raise ValueError("setExecutionStrategy takes poptorch.PipelinedExecution, "
                             "ShardedExecution or ParallelPhasedExecution")
        self._execution_strategy = strategy
        return self

    # -- kept and shown, not acted upon ------------------------------------------------
    def setAvailableMemoryProportion(self, available_memory_proportion: dict[str, float]):  # noqa: N802
        for key, value in available_memory_proportion.items():
            if not key.startswith("IPU") or not 0 < float(value) <= 1:
                raise ValueError(f"setAvailableMemoryProportion: bad entry {key}: {value}")
        self._values["available_memory_proportion"] = dict(available_memory_proportion)
        return self

    def enableSyntheticData(self, enabled: bool) -> Options:  # noqa: N802
        self._values["enable_synthetic_data"] = bool(enabled)
        return self

    def logDir(self, log_dir: str) -> Options:  # noqa: N802
        self._values["log_dir"] = os.fspath(log_dir)
        return self

    def modelName(self, name: str) -> Options:  # noqa: N802
        self._values["model_name"] = str(name)
        return self

    def logCycleCount(self, log_cycle_count: bool) -> Options:  # noqa: N802
        self._values["log_cycle_count"] = bool(log_cycle_count)
        return self

    def enableProfiling(self, profile_dir: str | None = None) -> Options:  # noqa: N802
        self._values["profile_dir"] = profile_dir or "profile"
        return self

    def enableStableNorm(self, enabled: bool) -> Options:  # noqa: N802
        self._values["stable_norm"] = bool(enabled)
        return self

    def showCompilationProgressBar(self, show: bool) -> Options:  # noqa: N802
        self._values["show_compilation_progress_bar"] = bool(show)
        return self

    def syncPattern(self, sync_pattern: SyncPattern) -> Options:  # noqa: N802
        self._values["sync_pattern"] = SyncPattern(sync_pattern)
        return self

    def maxRepeatLogs(self, count: int) -> Options:  # noqa: N802
        self._values["max_repeat_logs"] = int(count)
        return self

    def anchorTensor(self, short_name: str, long_name: str,  # noqa: N802
                     output_mode: OutputMode | None = None, output_return_period: int = 1):
        """Keep tensor `long_name` (a getTensorNames() name) for getAnchoredTensor(short_name).

        `output_mode` None means the model outputs' mode; the period counts with EveryN.
        """
        if not isinstance(short_name, str) or not isinstance(long_name, str):
            raise ValueError("anchorTensor takes a short name and a tensor name (strings)")
        mode = None if output_mode is None else OutputMode(output_mode)
        period = _positive("output_return_period", output_return_period) \
            if mode == OutputMode.EveryN else 1
        self._values.setdefault("anchored_tensors", {})[short_name] = \
            [long_name, None if mode is None else mode.name, period]
        return self

    @property
    def anchored_tensors(self) -> dict[str, tuple[str, OutputMode | None, int]]:
        """short name -> (tensor name, output mode or None, return period)."""
        return {short: (long, None if mode is None else OutputMode[mode], period)
                for short, (long, mode, period) in
                self._values.get("anchored_tensors", {}).items()}

    def loadFromFile(self, filepath: str) -> Options:  # noqa: N802
        """One option per line: `deviceIterations(4)`, `Training.gradientAccumulation(2)`."""
        with open(filepath) as handle:
            for number, line in enumerate(handle, 1):
                line = line.strip()
                if not line or line.startswith("#"):
                    continue
                name, _, rest = line.partition("(")
                try:
                    value = json.loads("[" + rest.rstrip(")") + "]")
                    self._call_path(name.strip(), value)
                except (ValueError, Error) as err:
                    raise Error(f"{filepath}:{number}: cannot apply '{line}': {err}") from None
        return self

    # -- reading ---------------------------------------------------------------------------
    @property
    def device_iterations(self) -> int:
        return self._values["device_iterations"]

    @property
    def replication_factor(self) -> int:
        return self._values["replication_factor"]

    @property
    def input_group_size(self) -> int:
        return self._values["input_group_size"]

    @property
    def gradient_accumulation(self) -> int:
        return self._training["gradient_accumulation"]

    @property
    def output_mode(self) -> OutputMode:
        return self._values["output_mode"]

    @property
    def output_return_period(self) -> int:
        return self._values["output_return_period"]

    @property
    def random_seed(self) -> int | None:
        return self._values.get("random_seed")

    @property
    def executable_cache_dir(self) -> str:
        return self._values["executable_cache_dir"]

    @property
    def auto_round_num_ipus(self) -> bool:
        return self._values["auto_round_num_ipus"]

    @property
    def connection_type(self) -> ConnectionType:
        return self._values["connection_type"]

    @property
    def execution_strategy(self) -> Any:
        return self._execution_strategy

    def defaultOutputMode(self) -> bool:  # noqa: N802
        return self._values["output_mode"] == OutputMode.Default

    def offline(self) -> bool:
        """Compile only, never attach (useOfflineIpuTarget, ConnectionType.Never)."""
        return self._values["connection_type"] == ConnectionType.Never

    def ipu_model(self) -> bool:
        if self.offline():  # the offline target overrides the IPU Model, as in PopTorch
            return False
        return self._values["use_ipu_model"] or os.environ.get("POPTORCH_IPU_MODEL") == "1" \
            or os.environ.get("POPTORCH_SMALL_IPU_MODEL") == "1"

    def clone(self) -> Options:
        return copy.deepcopy(self)

    def toDict(self) -> dict[str, Any]:  # noqa: N802
        out: dict[str, Any] = {}
        for key, value in self._values.items():
            out[key] = value.name if hasattr(value, "name") else value
        out["Training"] = self.Training.toDict()
        out["Precision"] = self.Precision.toDict()
        out["TensorLocations"] = self.TensorLocations.toDict()
        out["Distributed"] = self.Distributed.toDict()
        out["Jit"] = self.Jit.toDict()
        return out

    def __repr__(self) -> str:
        return f"Options({self.toDict()})"
