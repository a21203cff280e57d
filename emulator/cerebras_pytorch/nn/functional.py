"""cstorch.nn.functional."""

from __future__ import annotations

import torch


def one_hot(tensor: torch.Tensor, num_classes: int = -1) -> torch.Tensor:
    """torch's one_hot, for index tensors of any integer type (the wafer uses int32)."""
    if tensor.dtype.is_floating_point or tensor.dtype == torch.bool:
        raise TypeError(f"one_hot expects an integer tensor, got {tensor.dtype}")
    return torch.nn.functional.one_hot(tensor.long(), num_classes)


__all__ = ["one_hot"]
