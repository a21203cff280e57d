"""The Wafer-Scale Cluster's loggers and the appliance's two extra log levels.

wsc_logger ("wsc") is the parent of the loggers of the cluster's tasks (children
such as wsc.compile or wsc.execute); a run sets their levels through the params'
runconfig.wsc_log_level. TRACE sits below DEBUG, VERBOSE between DEBUG and INFO.
"""

from __future__ import annotations

import logging

TRACE = logging.DEBUG - 5
VERBOSE = logging.INFO - 5
logging.addLevelName(TRACE, "TRACE")
logging.addLevelName(VERBOSE, "VERBOSE")

wsc_logger = logging.getLogger("wsc")


def get_level_name(level: str | int) -> int:
    """The numeric level of a name ("info", "TRACE", "15"...); ValueError if unknown."""
    if isinstance(level, bool) or not isinstance(level, str | int):
        raise ValueError(f"Invalid logging level: `{level}`. Expected a string or int level.")
    if isinstance(level, int):
        return level
    text = level.strip()
    if text.lstrip("-").isdigit():
        return int(text)
    value = logging.getLevelName(text.upper())
    if not isinstance(value, int):
        names = [name for name in logging.getLevelNamesMapping() if name != "NOTSET"]
        raise ValueError(f"Invalid logging level: `{level}`. Expected one of {names}.")
    return value


def collect_wsc_log_settings() -> dict[str, int]:
    """The levels set on wsc_logger and its children, by logger name ("" for wsc).

    Checks them on the way: a level that is not an int was set by mistake."""
    settings = {}
    prefix = wsc_logger.name + "."
    loggers = {"": wsc_logger}
    for name, logger in logging.root.manager.loggerDict.items():
        if name.startswith(prefix) and isinstance(logger, logging.Logger):
            loggers[name[len(prefix):]] = logger
    for task, logger in loggers.items():
        if logger.level != logging.NOTSET:
            if not isinstance(logger.level, int):
                raise ValueError(f"Invalid log level {logger.level!r} for task {task!r}")
            settings[task] = logger.level
    return settings


__all__ = ["TRACE", "VERBOSE", "collect_wsc_log_settings", "get_level_name", "wsc_logger"]
