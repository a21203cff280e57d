"""PopTorch's log: `[HH:MM:SS.mmm] [poptorch::python] [level] message`.

POPTORCH_LOG_LEVEL picks the level (default WARN) and POPTORCH_LOG_DEST the
destination (stderr, stdout or a file name), as in the real package.
"""

from __future__ import annotations

import datetime
import os
import sys
from typing import TextIO

LEVELS = ("TRACE_ALL", "TRACE", "DEBUG", "DEBUG_IR", "INFO", "WARN", "ERR", "OFF")
_RANK = {name: rank for rank, name in enumerate(LEVELS)}
_LABEL = {"TRACE_ALL": "trace", "TRACE": "trace", "DEBUG": "debug", "DEBUG_IR": "debug",
          "INFO": "info", "WARN": "warning", "ERR": "error", "CRITICAL": "critical"}


class LogLevelError(ValueError):
    pass


def level_from(value: str | None) -> str:
    level = (value or "WARN").strip() or "WARN"
    if level not in _RANK:
        raise LogLevelError(f"Unknown POPTORCH_LOG_LEVEL '{level}'. Valid values are "
                            f"{', '.join(LEVELS)}.")
    return level


class Logger:
    def __init__(self) -> None:
        self.level = level_from(os.environ.get("POPTORCH_LOG_LEVEL"))
        self._stream: TextIO | None = None

    @property
    def stream(self) -> TextIO:
        dest = os.environ.get("POPTORCH_LOG_DEST", "stderr")
        if dest == "stdout":
            return sys.stdout
        if dest == "stderr":
            return sys.stderr
        if self._stream is None:
            self._stream = open(dest, "a", buffering=1)  # noqa: SIM115 - lives with the process
        return self._stream

    def enabled(self, level: str) -> bool:
        return self.level != "OFF" and _RANK.get(level, _RANK["ERR"]) >= _RANK[self.level]

    def log(self, level: str, message: str, component: str = "poptorch::python") -> None:
        if level == "CRITICAL" or self.enabled(level):
            stamp = datetime.datetime.now().strftime("%H:%M:%S.%f")[:-3]
            self.stream.write(f"[{stamp}] [{component}] [{_LABEL[level]}] {message}\n")
            self.stream.flush()

    def info(self, message: str) -> None:
        self.log("INFO", message)

    def debug(self, message: str) -> None:
        self.log("DEBUG", message)

    def warning(self, message: str) -> None:
        self.log("WARN", message)

    def error(self, message: str) -> None:
        self.log("ERR", message)

    def critical(self, message: str) -> None:
        self.log("CRITICAL", message)


logger: Logger


def setLogLevel(level: str | int) -> None:  # noqa: N802 - PopTorch's name
    """poptorch.setLogLevel: a level name, or its index (0 = TRACE ... 6 = OFF)."""
    if isinstance(level, int):
        names = [name for name in LEVELS if name != "TRACE_ALL" and name != "DEBUG_IR"]
        if not 0 <= level < len(names):
            raise ValueError(f"Invalid log level {level}")
        level = names[level]
    logger.level = level_from(level)


def _init() -> None:
    global logger
    try:
        logger = Logger()
    except LogLevelError as err:
        # The real library fails while loading; say why and stop, without a traceback.
        sys.stderr.write(f"{err}\n")
        raise SystemExit(1) from None


_init()
