"""cstorch.core: the run modes."""

from . import modes

__all__ = ["modes"]
