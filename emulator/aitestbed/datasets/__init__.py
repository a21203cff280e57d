"""Datasets the emulated testbed keeps offline under /software/<vendor>/dataset."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

MARKER = ".aitestbed-complete"


def build_once(root: str | Path, stamp: str, write: Callable[[Path], None]) -> Path:
    """Have `write` fill a dataset directory, unless `root` already holds a complete build
    with this stamp. Built in a temporary sibling and moved into place, so an
    interrupted build never looks complete."""
    root = Path(root)
    marker = root / MARKER
    if marker.is_file() and marker.read_text() == stamp:
        return root
    tmp = root.with_name(f".{root.name}.tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    write(tmp)
    (tmp / MARKER).write_text(stamp)
    if root.exists():
        shutil.rmtree(root)
    root.parent.mkdir(parents=True, exist_ok=True)
    tmp.rename(root)
    return root
