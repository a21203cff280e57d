"""Tensor listeners: not available in the emulated cluster (see the package doc)."""

from __future__ import annotations


def create_listener(listener_type: str | None = None, **kwargs):
    raise ValueError(
        f"Tensor listeners are not available in the emulated Wafer-Scale Cluster "
        f"(asked for listener {listener_type!r}): remove runconfig.experimental.listeners.")


__all__ = ["create_listener"]
