"""get_pefmeta: what the app records about itself in the PEF it compiles."""

from __future__ import annotations

import argparse
import sys
from typing import Any

import torch

from ..._version import __version__


def get_pefmeta(args: argparse.Namespace, model: torch.nn.Module) -> dict[str, Any]:
    """The model's name and the command line that compiled it (stored in the PEF).

    Apps may add `"aitestbed_timing": {...}` (aitestbed.sambanova.timing.Workload's
    fields: kind "unet2d"/"gpt2", image_size, seq_len, batch_size, ...; or
    "compile_seconds"/"step_seconds" directly) to time the PEF as the model the app
    stands for rather than as the graph it traced.
    """
    return {
        "model_name": type(model).__name__,
        "app": sys.argv[0] if sys.argv else None,
        "command_line": " ".join(sys.argv),
        "sambaflow_version": __version__,
        "batch_size": getattr(args, "batch_size", None),
    }
