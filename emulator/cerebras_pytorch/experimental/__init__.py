"""cstorch.experimental: the 2.1 release's experimental APIs, as far as they exist here.

Tensor listeners (experimental.listener) and the implicit autoregressive loop
(run_implicit_autoregressive_loop, used for GPT inference on the wafer) are not
available in this emulation: asking for them raises an error that says so.
"""

from __future__ import annotations

from . import listener


def run_implicit_autoregressive_loop(*args, **kwargs):
    raise NotImplementedError(
        "run_implicit_autoregressive_loop (autoregressive inference on the wafer) is not "
        "available in the emulated Wafer-Scale Cluster.")


__all__ = ["listener", "run_implicit_autoregressive_loop"]
