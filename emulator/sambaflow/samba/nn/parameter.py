"""samba.nn.parameter.SambaParameter: the parameter class (the same as samba.SambaParameter)."""

from .._tensor import SambaParameter

__all__ = ["SambaParameter"]
