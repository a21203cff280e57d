"""cstorch.utils: the cluster configuration and the data pipeline."""

from __future__ import annotations

from .._csconfig import CSConfig
from . import data, nest, tensorboard

CSConfig.__module__ = __name__  # the vendor's name for it: cerebras_pytorch.utils.CSConfig


__all__ = ["CSConfig", "data", "nest", "tensorboard"]
