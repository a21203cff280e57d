"""`ipu.ipu_strategy`: IPUStrategy, the tf.distribute strategy for one IPU device.

Variables made in its scope live on the host's CPU here (on the IPU on the real
system); Keras models made in its scope are compiled for and run on the IPU
device (`/device:IPU:0` by default), which takes device time and must fit.
"""

from __future__ import annotations

import tensorflow as tf


class IPUStrategyV1(tf.distribute.OneDeviceStrategy):
    """Graphcore's IPUStrategy: run on one TensorFlow IPU device."""

    def __init__(self, ipu_device: str = "/device:IPU:0", cpu_device: str = "/device:CPU:0",
                 enable_dataset_iterators: bool = True,
                 enable_keras_extensions: bool = True) -> None:
        ordinal = _ordinal(ipu_device)
        super().__init__(cpu_device)
        self._ipu_device = ipu_device
        self._ipu_ordinal = ordinal
        self._enable_keras_extensions = enable_keras_extensions

    @property
    def ipu_ordinal(self) -> int:
        return self._ipu_ordinal


def _ordinal(device: str) -> int:
    name = device.strip()
    prefix = "/device:IPU:"
    if not name.startswith(prefix) or not name[len(prefix):].isdigit():
        raise ValueError(f"IPUStrategy: {device!r} is not an IPU device (use '/device:IPU:N')")
    return int(name[len(prefix):])


IPUStrategy = IPUStrategyV1
