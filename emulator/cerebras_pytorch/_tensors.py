"""Small tensor and module helpers of the cstorch namespace."""

from __future__ import annotations

import numpy
import torch

_DEBUG_NAME = "_cstorch_debug_name"


def make_constant(tensor: torch.Tensor) -> torch.Tensor:
    """A tensor the compiler may fold into the program: a detached copy here."""
    return torch.as_tensor(tensor).detach().clone()


def to_numpy(tensor: torch.Tensor) -> numpy.ndarray:
    return tensor.detach().cpu().numpy()


def add_debug_name(module: torch.nn.Module, root_name: str | None = None) -> None:
    """Name a module and its submodules (root_name.child.grandchild...) for logs."""
    for name, child in module.named_modules():
        full = ".".join(part for part in (root_name, name) if part)
        setattr(child, _DEBUG_NAME, full)


def get_debug_name(module: torch.nn.Module) -> str:
    return getattr(module, _DEBUG_NAME, "")
