"""cstorch.save / cstorch.load: checkpoints, written by the client for appliance jobs."""

from __future__ import annotations

import io
import os
import time

import torch

from .._version import __version__
from ..appliance import session as _session


def _with_metadata(obj):
    if not isinstance(obj, dict):
        return obj
    metadata = {"version": __version__, "timestamp": time.strftime("%Y%m%d_%H%M%S")}
    return {**obj, "__metadata__": [metadata]}


def save(obj, checkpoint_file: str | os.PathLike) -> None:
    """Write a checkpoint (a dict of state dicts gets a __metadata__ entry)."""
    path = os.path.abspath(checkpoint_file)
    buffer = io.BytesIO()
    torch.save(_with_metadata(obj), buffer)
    session = _session.active()
    if session is not None:
        from aitestbed.cerebras import timing as cs2_timing

        session.clock.advance(cs2_timing.checkpoint_seconds(session.workload, session.system))
        session.write_file(path, buffer.getvalue())
        return
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as stream:
        stream.write(buffer.getvalue())


def load(checkpoint_file: str | os.PathLike, map_location=None):
    return torch.load(checkpoint_file, map_location=map_location or "cpu")


from .pt_h5_saver import CkptVersion, PyTorchH5Saver  # noqa: E402

__all__ = ["CkptVersion", "PyTorchH5Saver", "load", "save"]
