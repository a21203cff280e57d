"""samba.directives: hints to the SambaFlow compiler about how to map a model.

`op_fusion(module, name)` asks the compiler to fuse the operators of `module` into
one kernel named `name` (model code marks each transformer layer so). A directive
changes how the graph is placed on the tiles, never what it computes, so here it is
recorded on the module (`module.sn_fusion_name`) and written to the MAC log at
compile time; the numerics are unchanged.
"""

from __future__ import annotations

import torch


def op_fusion(module: torch.nn.Module, name: str, **_options: object) -> torch.nn.Module:
    """Mark `module` for fusion into one kernel called `name`; returns the module."""
    if not isinstance(module, torch.nn.Module):
        raise TypeError(f"op_fusion takes a torch.nn.Module, not {type(module).__name__}")
    if not isinstance(name, str) or not name:
        raise TypeError("op_fusion: the fusion's name is a non-empty string")
    object.__setattr__(module, "sn_fusion_name", name)
    return module


def fusion_groups(model: torch.nn.Module) -> dict[str, int]:
    """How many modules of `model` carry each fusion name (for the MAC log)."""
    groups: dict[str, int] = {}
    for module in model.modules():
        name = getattr(module, "sn_fusion_name", None)
        if name:
            groups[name] = groups.get(name, 0) + 1
    return groups


__all__ = ["fusion_groups", "op_fusion"]
