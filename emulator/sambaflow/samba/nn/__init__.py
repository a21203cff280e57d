"""samba.nn: SambaFlow's module-level pieces (samba.nn.parameter.SambaParameter)."""

from .parameter import SambaParameter

__all__ = ["SambaParameter"]
