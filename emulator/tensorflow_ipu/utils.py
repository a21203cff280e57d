"""`ipu.utils`: the helpers the examples call."""

from __future__ import annotations

import tensorflow as tf

from ._runtime import use_ipu_model


def reset_ipu_seed(seed: int, device: str = "/device:IPU:0", cpu_device: str = "cpu",
                   experimental_identical_replicas: bool = False) -> None:
    """Seed the IPU's random number generators (here: TensorFlow's global seed)."""
    tf.random.set_seed(seed)


def running_on_ipu_model() -> bool:
    """True when TF_POPLAR_FLAGS has --use_ipu_model."""
    return use_ipu_model()
