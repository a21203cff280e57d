"""Lines in TensorFlow's own log format (`2023-04-26 14:42:32.179566: I file:line] text`)."""

from __future__ import annotations

import datetime
import os
import sys

_LEVELS = {"I": 0, "W": 1, "E": 2}


def log(level: str, source: str, message: str) -> None:
    """Print as TensorFlow's C++ logging does, honouring TF_CPP_MIN_LOG_LEVEL."""
    try:
        minimum = int(os.environ.get("TF_CPP_MIN_LOG_LEVEL", "0") or 0)
    except ValueError:
        minimum = 0
    if _LEVELS[level] < minimum:
        return
    stamp = datetime.datetime.now().strftime("%Y-%m-%d %H:%M:%S.%f")
    sys.stderr.write(f"{stamp}: {level} {source}] {message}\n")
    sys.stderr.flush()
