"""PyTorchH5Saver: what the modelzoo asks of a checkpoint file's format.

The real release writes .mdl checkpoints as HDF5; this cerebras_pytorch writes
them with torch.save (cstorch.save) and reads only those. What the modelzoo
needs from the saver is the checkpoint's format version (extract_version), which
decides whether an old (pre-2.0) LR scheduler state needs fixing; checkpoints of
this package are of the current format, 0.4.
"""

from __future__ import annotations

import os
import zipfile
from dataclasses import dataclass

CURRENT_CKPT_VERSION = 0.4


@dataclass(frozen=True)
class CkptVersion:
    ckpt_version: float
    cstorch_version: str | None = None


class PyTorchH5Saver:
    @staticmethod
    def is_valid_checkpoint(checkpoint_file: str | os.PathLike) -> bool:
        """True for a checkpoint this package can load (a torch.save file)."""
        path = os.fspath(checkpoint_file)
        return os.path.isfile(path) and zipfile.is_zipfile(path)

    @classmethod
    def extract_version(cls, checkpoint_file: str | os.PathLike) -> CkptVersion | None:
        """The checkpoint's format version, or None for a file of another format."""
        if not cls.is_valid_checkpoint(checkpoint_file):
            return None
        from .._version import __version__

        return CkptVersion(CURRENT_CKPT_VERSION, __version__)


__all__ = ["CURRENT_CKPT_VERSION", "CkptVersion", "PyTorchH5Saver"]
