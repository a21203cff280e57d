"""cstorch.nn: layers and functions with the wafer's conventions."""

from . import functional

__all__ = ["functional"]
