"""Keras models under IPUStrategy: each program (train, evaluate, predict) is compiled for
the IPU device on its first execution, must fit its memory, and takes device time.

Keras calls `train_function(iterator)` once per execution of `steps_per_execution`
steps; the wrapper runs it on the CPU, then advances the device clock by what the
IPU would have taken (the compilation first). Keras' progress bars count device
time, so they show the documented rates whatever the CPU does.
"""

from __future__ import annotations

import math
import time as _time
from typing import Any

import tensorflow as tf
from aitestbed.devices.base import DeviceError
from aitestbed.graphcore import ipu as ipu_model
from aitestbed.graphcore import timing

from . import config as ipu_config
from ._log import log
from ._runtime import runtime
from .ipu_strategy import IPUStrategyV1

DEFAULT_BATCH = 32  # Keras' own default batch size, when the data does not say
_installed = False
_xla_logged = False


class _DeviceTime:
    """The `time` module as Keras' progress bar sees it: time() is the device clock."""

    def __getattr__(self, name: str) -> Any:
        return getattr(_time, name)

    @staticmethod
    def time() -> float:
        return runtime.clock.now()


def _batch_of(iterator: Any) -> int:
    try:
        spec = iterator.element_spec
    except (AttributeError, TypeError):
        return DEFAULT_BATCH
    for leaf in tf.nest.flatten(spec):
        shape = getattr(leaf, "shape", None)
        if shape is not None and shape.rank and shape[0] is not None:
            return int(shape[0])
    return DEFAULT_BATCH


def _bytes_needed(model: Any, batch: int, training: bool) -> int:
    """Weights, gradients and optimizer state, and one batch's activations (forward,
    kept for the backward pass when training), in float32."""
    weights = sum(math.prod(w.shape) * w.dtype.size for w in model.weights)
    total = weights
    if training:
        total += sum(math.prod(w.shape) * w.dtype.size for w in model.trainable_weights)
        total += _optimizer_state_bytes(getattr(model, "optimizer", None))
    activations = 0
    for layer in getattr(model, "layers", []):
        try:
            shapes = [t.shape for t in tf.nest.flatten(layer.output)]
        except (AttributeError, ValueError, RuntimeError):
            continue
        for shape in shapes:
            if shape.rank:
                activations += math.prod(d or 1 for d in shape[1:])
    total += activations * batch * 4 * (2 if training else 1)
    return int(total)


def _optimizer_state_bytes(optimizer: Any) -> int:
    """The optimizer's state (Adam's moments, momentum). Keras' SGD keeps a momentum
    slot even at momentum 0, where the IPU's SGD has none."""
    if optimizer is None:
        return 0
    momentum = getattr(optimizer, "momentum", None)
    if type(optimizer).__name__ == "SGD" and not momentum:
        return 0
    total = 0
    for variable in getattr(optimizer, "variables", []) or []:
        try:
            total += math.prod(variable.shape) * variable.dtype.size
        except (TypeError, AttributeError):
            continue
    return total


class _Program:
    """One Keras program (train, test or predict function) run on an IPU device."""

    def __init__(self, model: Any, function: Any, kind: str) -> None:
        self.model, self.function, self.kind = model, function, kind
        self.training = kind == "train"
        self.compiled = False
        self.aitestbed_ipu_program = True

    def __call__(self, iterator: Any) -> Any:
        ipu_config.configure_default()
        strategy = self.model.distribute_strategy
        device = runtime.device(getattr(strategy, "ipu_ordinal", 0))
        if device is None:
            raise tf.errors.InvalidArgumentError(
                None, None, f"/device:IPU:{strategy.ipu_ordinal} is not configured: "
                f"the IPU configuration has {len(runtime.system.devices)} device(s)")
        batch = _batch_of(iterator)
        steps = 1
        variable = getattr(self.model, "_steps_per_execution", None)
        if variable is not None:
            steps = max(1, int(variable.numpy()))
        # Compiled before the first execution when the model is built (its weights known),
        # else (a model built by its first batch) right after it.
        if not self.compiled and self.model.built:
            self._compile(max(1, int(self.model.count_params())), batch)
        result = self.function(iterator)
        parameters = max(1, int(self.model.count_params()))
        if not self.compiled:
            self._compile(parameters, batch)
        runtime.clock.advance(timing.keras_step_seconds(
            parameters, device.ipus, batch, steps, training=self.training))
        return result

    def _compile(self, parameters: int, batch: int) -> None:
        global _xla_logged
        try:
            ipu_model.check_memory([_bytes_needed(self.model, batch, self.training)])
        except DeviceError as err:
            raise tf.errors.ResourceExhaustedError(None, None, str(err)) from None
        runtime.clock.advance(timing.keras_compile_seconds(parameters, self.training))
        self.compiled = True
        if not _xla_logged:
            _xla_logged = True
            log("I", "tensorflow/compiler/jit/xla_compilation_cache.cc:376",
                "Compiled cluster using XLA!  This line is logged at most once for the "
                "lifetime of the process.")


def _wrap(original, kind: str, attribute: str):
    def make_function(self, force: bool = False):
        function = original(self, force)
        if (isinstance(self.distribute_strategy, IPUStrategyV1)
                and not getattr(function, "aitestbed_ipu_program", False)):
            function = _Program(self, function, kind)
            setattr(self, attribute, function)
        return function
    make_function.__name__ = original.__name__
    make_function.__doc__ = original.__doc__
    return make_function


def install() -> None:
    """Hook Keras (once): IPU programs for models made under IPUStrategy, device-time bars."""
    global _installed
    if _installed:
        return
    _installed = True
    try:
        import keras
        from keras.src.utils import generic_utils
    except ImportError:  # the SDK's keras wheel is not installed: tf.keras is not there either
        return
    model = keras.Model
    model.make_train_function = _wrap(model.make_train_function, "train", "train_function")
    model.make_test_function = _wrap(model.make_test_function, "test", "test_function")
    model.make_predict_function = _wrap(model.make_predict_function, "predict",
                                        "predict_function")
    generic_utils.time = _DeviceTime()
