"""cstorch.optim: PyTorch's optimizers under the names the modelzoo configures."""

from __future__ import annotations

import torch


class SGD(torch.optim.SGD):
    pass


class Adam(torch.optim.Adam):
    pass


class AdamW(torch.optim.AdamW):
    pass


OPTIMIZERS = {cls.__name__.lower(): cls for cls in (SGD, Adam, AdamW)}


def configure_optimizer(optimizer_type: str, params, **kwargs) -> torch.optim.Optimizer:
    """The optimizer named optimizer_type (case-insensitive) over params."""
    cls = OPTIMIZERS.get(str(optimizer_type).lower())
    if cls is None:
        raise ValueError(f"Unsupported optimizer type {optimizer_type!r}: one of "
                         f"{', '.join(c.__name__ for c in OPTIMIZERS.values())}")
    return cls(params, **kwargs)
