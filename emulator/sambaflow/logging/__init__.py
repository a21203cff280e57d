"""sambaflow.logging: `samba_logger`, the logger SambaFlow and model code write warnings to.

    from sambaflow.logging import samba_logger
    samba_logger.warning("Patched forward used", log_limit=1)

Lines look like the framework's own (`[Warning][SAMBA]# ...` on SN30) and go to
stdout; below the app's --log-level (default warning) they are dropped. `log_limit=N`
prints a message at most N times in the process (for warnings issued on every step).
"""

from __future__ import annotations

from typing import Any

from .._runtime import runtime

LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40, "critical": 50}
LABELS = {"debug": "Debug", "info": "Info", "warning": "Warning", "error": "Error",
          "critical": "Critical"}


def _threshold() -> int:
    from ..samba.utils import argparser

    args = argparser.last_args
    level = str(getattr(args, "log_level", None) or "warning").lower()
    return LEVELS.get(level, LEVELS["warning"])


class SambaLogger:
    """What `samba_logger` is: debug/info/warning/error/critical with an optional log_limit."""

    def __init__(self, component: str = "SAMBA") -> None:
        self.component = component
        self._counts: dict[tuple[str, str], int] = {}

    def _log(self, level: str, message: Any, *args: Any, log_limit: int | None = None,
             **_ignored: Any) -> None:
        text = str(message) % args if args else str(message)
        if log_limit is not None:
            key = (level, text)
            seen = self._counts.get(key, 0)
            if seen >= log_limit:
                return
            self._counts[key] = seen + 1
        if LEVELS[level] < _threshold():
            return
        print(runtime.samba_line(LABELS[level], self.component, text), flush=True)

    def debug(self, message: Any, *args: Any, **kwargs: Any) -> None:
        self._log("debug", message, *args, **kwargs)

    def info(self, message: Any, *args: Any, **kwargs: Any) -> None:
        self._log("info", message, *args, **kwargs)

    def warning(self, message: Any, *args: Any, **kwargs: Any) -> None:
        self._log("warning", message, *args, **kwargs)

    warn = warning

    def error(self, message: Any, *args: Any, **kwargs: Any) -> None:
        self._log("error", message, *args, **kwargs)

    def critical(self, message: Any, *args: Any, **kwargs: Any) -> None:
        self._log("critical", message, *args, **kwargs)


samba_logger = SambaLogger()

__all__ = ["SambaLogger", "samba_logger"]
