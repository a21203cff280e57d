"""`ipu.config`: IPUConfig and configure_ipu_system, as Graphcore's TensorFlow 2 has them.

`configure_ipu_system` attaches each TensorFlow IPU device (`auto_select_ipus`,
`select_ipus`) to IPUs of the job's V-IPU partition, with TensorFlow's own errors:
no IPUs outside a job, none of the size asked for, a second different
configuration. The options Graphcore's IPUConfig knows can be set (and are kept),
unknown ones are refused; the emulation acts on the device selection, the IPU
Model and the connection type.
"""

from __future__ import annotations

import enum
import json
from typing import Any

import tensorflow as tf
from aitestbed.devices.base import DeviceError
from aitestbed.graphcore import gc_info
from aitestbed.graphcore import ipu as ipu_model

from ._log import log
from ._runtime import AttachedDevice, runtime, use_ipu_model

NO_HARDWARE = ("Target configuration failed: model disabled and no hardware IPU found. "
               "(Are you sure you enabled the Poplar driver ?)")
NONE_OF_SIZE = "Could not find any IPU devices with {ipus} IPUs for /device:IPU:{ordinal}"
ONLY_ONCE = "IPU system configuration can only be set once."
ATTACHED = ("TensorFlow device /device:IPU:{ordinal} attached to {ipus} IPU{s} with Poplar "
            "device ID: {id}")
_EXECUTOR = "tensorflow/compiler/plugin/poplar/driver/poplar_executor.cc:1619"


class DeviceConnectionType(enum.Enum):
    ALWAYS = 0
    ON_DEMAND = 1
    NEVER = 2
    PRE_COMPILE = 3


class SelectionOrder(enum.Enum):
    AUTO = 0
    ZIGZAG = 1
    SNAKE = 2
    HOOF = 3


class SchedulingAlgorithm(enum.Enum):
    CHOOSE_BEST = 0
    CLUSTERING = 1
    POST_ORDER = 2
    LOOK_AHEAD = 3
    SHORTEST_PATH = 4


class StochasticRoundingBehaviour(enum.Enum):
    OFF = 0
    ON = 1
    REPLICA_IDENTICAL_ONLY = 2


class _Category:
    """A category of options (`cfg.floating_point_behaviour`, `cfg.matmuls`, ...)."""

    def __init__(self, path: str, **defaults: Any) -> None:
        object.__setattr__(self, "_path", path)
        object.__setattr__(self, "_values", dict(defaults))

    def __getattr__(self, name: str) -> Any:
        values = object.__getattribute__(self, "_values")
        if name.startswith("_") or name not in values:
            raise AttributeError(f"'{self._path}' has no attribute '{name}'")
        return values[name]

    def __setattr__(self, name: str, value: Any) -> None:
        if name not in self._values:
            raise AttributeError(
                f"'{self._path}' has no attribute '{name}'. It may have been deprecated or "
                "not be known to this emulation of IPUConfig.")
        if isinstance(self._values[name], _Category):
            raise AttributeError(f"'{self._path}.{name}' is a category of options, not an option")
        self._values[name] = value

    def _as_dict(self) -> dict:
        return {k: v._as_dict() if isinstance(v, _Category) else _plain(v)
                for k, v in self._values.items()}


def _plain(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


class IPUConfig(_Category):
    """The IPU system's configuration (Graphcore's attribute tree, SDK 3.x names)."""

    def __init__(self) -> None:
        c = _Category
        super().__init__(
            "IPUConfig",
            allow_recompute=False,
            auto_select_ipus=[],
            select_ipus=[],
            selection_order=SelectionOrder.AUTO,
            serialization_output_folder="",
            compilation_poplar_options={},
            gcl_poplar_options={},
            device_connection=c("IPUConfig.device_connection", type=DeviceConnectionType.ALWAYS,
                                version="", enable_remote_buffers=False),
            ipu_model=c("IPUConfig.ipu_model", compile_ipu_code=True, tiles_per_ipu=0,
                        version="ipu2"),
            floating_point_behaviour=c("IPUConfig.floating_point_behaviour", inv=False,
                                       div0=False, oflo=False, esr=StochasticRoundingBehaviour.OFF,
                                       nanoo=False),
            convolutions=c("IPUConfig.convolutions", poplar_options={}),
            matmuls=c("IPUConfig.matmuls", clear_pass_type=False, poplar_options={}),
            pooling=c("IPUConfig.pooling", poplar_options={}),
            slices=c("IPUConfig.slices", poplar_options={}),
            norms=c("IPUConfig.norms", use_stable_statistics=False,
                    experimental=c("IPUConfig.norms.experimental",
                                   distributed_batch_norm_replica_group_size=1)),
            io_tiles=c("IPUConfig.io_tiles", num_io_tiles=0, place_ops_on_io_tiles=False,
                       available_memory_proportion=0.9),
            scheduling=c("IPUConfig.scheduling", algorithm=SchedulingAlgorithm.CHOOSE_BEST,
                         maximum_scheduler_lookahead_depth=5,
                         maximum_scheduler_search_space_size=64),
            optimizations=c("IPUConfig.optimizations", prefetch_data_streams=True,
                            combine_embedding_lookups=False, combine_matmuls=False,
                            enable_graph_outlining=True, merge_infeed_io_copies=True,
                            maximum_cross_replica_sum_buffer_size=0,
                            maximum_reduce_scatter_buffer_size=0, maximum_all_gather_buffer_size=0,
                            maximum_inter_ipu_copies_buffer_size=0,
                            maximum_send_recv_cluster_size=0, minimum_remote_tensor_size=128,
                            enable_fast_math=False, enable_dynamic_slice_replacement=False,
                            math=c("IPUConfig.optimizations.math", fast=False,
                                   dot_strength=True)),
            experimental=c("IPUConfig.experimental", always_rearrange_copies_on_the_host=False,
                           enable_remote_buffer_embedding=False,
                           enable_prng_stability=False, multi_replica_distribution=None),
        )

    def configure_ipu_system(self, device: str = "cpu") -> None:
        configure_ipu_system(self, device)

    def __repr__(self) -> str:
        return f"IPUConfig({json.dumps(self._as_dict(), sort_keys=True)})"


def _counts(value: Any, name: str) -> list[int]:
    if isinstance(value, bool):
        raise TypeError(f"IPUConfig.{name} must be an int or a list of ints, not a bool")
    if isinstance(value, int):
        return [value]
    if isinstance(value, list | tuple) and all(isinstance(v, int) and not isinstance(v, bool)
                                               for v in value):
        return list(value)
    raise TypeError(f"IPUConfig.{name} must be an int or a list of ints, not {value!r}")


def _internal(message: str) -> tf.errors.OpError:
    return tf.errors.InternalError(None, None, message)


def plan_devices(auto: list[int], select: list[int], chip_ids: tuple[int, ...]
                 ) -> list[AttachedDevice]:
    """The Poplar device each TensorFlow IPU device attaches to (pure: the partition's
    IPUs in, the devices out); raises TensorFlow's error when there is none."""
    devices = gc_info.partition_devices(chip_ids)
    if select:
        attached = []
        for ordinal, device_id in enumerate(select):
            if not 0 <= device_id < len(devices):
                raise tf.errors.InvalidArgumentError(
                    None, None, f"Invalid device index {device_id} for /device:IPU:{ordinal}: "
                    f"this partition has devices 0 to {len(devices) - 1} (see `gc-info -l`)")
            attached.append(AttachedDevice(ordinal, len(devices[device_id].ipus), device_id))
        return attached
    used: set[int] = set()
    attached = []
    for ordinal, count in enumerate(auto):
        free = [d for d in gc_info.devices_of_size(devices, count)
                if not used.intersection(d.ipus)] if count > 0 else []
        if not free:
            raise tf.errors.FailedPreconditionError(
                None, None, NONE_OF_SIZE.format(ipus=count, ordinal=ordinal))
        used.update(free[0].ipus)
        attached.append(AttachedDevice(ordinal, count, free[0].id))
    return attached


def configure_ipu_system(config: IPUConfig, device: str = "cpu",
                         reset_configuration: bool = True) -> None:
    """Attach the TensorFlow IPU devices the configuration asks for."""
    if not isinstance(config, IPUConfig):
        raise TypeError("configure_ipu_system: config must be an IPUConfig, "
                        f"not {type(config).__name__}")
    auto = _counts(config.auto_select_ipus, "auto_select_ipus")
    select = _counts(config.select_ipus, "select_ipus")
    if auto and select:
        raise ValueError("Only one of `auto_select_ipus` and `select_ipus` can be set.")
    key = repr(config)
    state = runtime.system
    if state.config_key is not None:
        if state.config_key == key:
            return
        raise _internal(ONLY_ONCE)
    if not auto and not select:
        auto = [1]
    connection = config.device_connection.type
    if use_ipu_model() or connection in (DeviceConnectionType.NEVER,
                                         DeviceConnectionType.PRE_COMPILE):
        counts = auto or [1] * len(select)
        state.devices = [AttachedDevice(i, n, None) for i, n in enumerate(counts)]
        state.config_key = key
        return
    try:
        allocation = ipu_model.allocation_from_environment()
    except DeviceError as err:
        raise _internal(str(err)) from None
    if allocation is None or allocation.size == 0:
        raise tf.errors.InvalidArgumentError(None, None, NO_HARDWARE)
    devices = plan_devices(auto, select, allocation.chip_ids)
    state.devices = devices
    state.config_key = key
    for attached in devices:
        log("I", _EXECUTOR, ATTACHED.format(ordinal=attached.ordinal, ipus=attached.ipus,
                                            s="s" if attached.ipus > 1 else "",
                                            id=attached.poplar_id))


def configure_default() -> None:
    """What the first IPU program does when nothing was configured: one single-IPU device."""
    if runtime.system.config_key is None:
        log("I", "tensorflow/compiler/plugin/poplar/driver/poplar_executor.cc:2155",
            "No IPU device was configured for /device:IPU:0, creating a device with a single IPU.")
        configure_ipu_system(IPUConfig())


def reset_ipu_configuration() -> None:
    """Forget the configuration (detach), so that another can be set."""
    runtime.system.config_key = None
    runtime.system.devices = []

