"""Profiles for the PopVision tools, as POPLAR_ENGINE_OPTIONS and PVTI_OPTIONS ask.

`POPLAR_ENGINE_OPTIONS='{"autoReport.all":"true", "autoReport.directory":"./graph_profile"}'`
writes `<directory>/<training|inference>/profile.pop`; `PVTI_OPTIONS='{"enable":"true",
"directory":"./system_profile"}'` writes `<directory>/<process>_<pid>.pvti`. The files
hold the emulator's own JSON (memory per IPU, compile and step times in device
time), not Graphcore's binary formats: PopVision cannot open them.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from ._errors import Error


def _options(variable: str) -> dict[str, Any]:
    raw = os.environ.get(variable, "").strip()
    if not raw:
        return {}
    try:
        value = json.loads(raw)
        if not isinstance(value, dict):
            raise ValueError("not a JSON object")
    except ValueError as err:
        raise Error(f"{variable} is not valid JSON ({err}): {raw}",
                    "poplar/OptionFlags.cpp:118", "poplar_invalid_option") from None
    return value


def _true(value: Any) -> bool:
    return str(value).lower() in ("true", "1", "yes")


def graph_report(kind: str, summary: dict[str, Any]) -> Path | None:
    options = _options("POPLAR_ENGINE_OPTIONS")
    wanted = any(_true(options.get(k)) for k in
                 ("autoReport.all", "autoReport.outputGraphProfile",
                  "autoReport.outputExecutionProfile"))
    if not wanted:
        return None
    directory = Path(options.get("autoReport.directory", ".")).expanduser() / kind
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "profile.pop"
    report = {"format": "aitestbed emulated profile (JSON), not a PopVision .pop file",
              "engine_options": options, **summary}
    if _true(options.get("profiler.includeFlopEstimates")):
        report["flop_estimate"] = summary.get("flop_estimate", 0)
    path.write_text(json.dumps(report, indent=2, default=str) + "\n")
    return path


class SystemTrace:
    """Appends one JSON line per event when PVTI_OPTIONS enables it."""

    def __init__(self) -> None:
        options = _options("PVTI_OPTIONS")
        self.path: Path | None = None
        if _true(options.get("enable")):
            directory = Path(options.get("directory", ".")).expanduser()
            directory.mkdir(parents=True, exist_ok=True)
            name = Path(sys.argv[0] or "python").stem or "python"
            self.path = directory / f"{name}_{os.getpid()}.pvti"

    def event(self, channel: str, name: str, start: float, end: float, **extra: Any) -> None:
        if self.path is None:
            return
        with self.path.open("a") as handle:
            handle.write(json.dumps({"channel": channel, "name": name, "start": start,
                                     "end": end, **extra}) + "\n")
