"""DebugArgs: per-job settings for the appliance beyond the run's params.

A run carries one DebugArgs to its jobs: resource limits for the job's tasks
(debug_usr.<task>_resource.memory_bytes, which the modelzoo sets from runconfig
keys such as wrk_memory_gi) and "ini" overrides (debug_ini). The real library keeps
them as a protobuf message; here they are dataclasses, and their file (the
runconfig's debug_args_path) is JSON, written by write_debug_args.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field

TASK_RESOURCES = ("compile_coord_resource", "execute_coord_resource", "worker_resource",
                  "activation_resource", "command_resource", "weight_resource")


@dataclass
class ResourceInfo:
    memory_bytes: int = 0
    cpu_millicore: int = 0


def _resources() -> dict:
    return {name: field(default_factory=ResourceInfo) for name in TASK_RESOURCES}


DebugUsr = dataclasses.make_dataclass(
    "DebugUsr", [(name, ResourceInfo, spec) for name, spec in _resources().items()])
DebugUsr.__doc__ = "Resource limits of a job's tasks (0: the cluster's default)."
DebugUsr.__module__ = __name__


@dataclass
class DebugIni:
    frozen_content: dict = field(default_factory=dict)


@dataclass
class DebugArgs:
    debug_usr: DebugUsr = field(default_factory=DebugUsr)
    debug_ini: DebugIni = field(default_factory=DebugIni)

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> DebugArgs:
        if not isinstance(data, dict):
            raise ValueError("debug args must be a mapping")
        usr = data.get("debug_usr") or {}
        unknown = set(usr) - set(TASK_RESOURCES)
        if unknown:
            raise ValueError(f"Unknown debug_usr fields: {', '.join(sorted(unknown))}")
        resources = {name: ResourceInfo(**(usr.get(name) or {})) for name in TASK_RESOURCES}
        ini = DebugIni(dict((data.get("debug_ini") or {}).get("frozen_content") or {}))
        return cls(DebugUsr(**resources), ini)


def get_debug_args(path: str | os.PathLike | None) -> DebugArgs:
    """The DebugArgs in the file at path, or a fresh one when path is None/empty."""
    if not path:
        return DebugArgs()
    try:
        with open(path) as stream:
            return DebugArgs.from_dict(json.load(stream))
    except json.JSONDecodeError as err:
        raise ValueError(f"Invalid debug args file {os.fspath(path)!r}: {err}") from err
    except (TypeError, ValueError) as err:
        raise ValueError(f"Invalid debug args file {os.fspath(path)!r}: {err}") from err


def write_debug_args(debug_args: DebugArgs, path: str | os.PathLike) -> None:
    directory = os.path.dirname(os.fspath(path))
    if directory:
        os.makedirs(directory, exist_ok=True)
    with open(path, "w") as stream:
        json.dump(debug_args.as_dict(), stream, indent=2, sort_keys=True)
        stream.write("\n")


def set_default_ini(debug_args: DebugArgs, **values) -> None:
    """Set ini values that the debug args do not set already."""
    for key, value in values.items():
        debug_args.debug_ini.frozen_content.setdefault(key, value)


def set_ini(debug_args: DebugArgs, **values) -> None:
    """Set ini values, replacing any already there."""
    debug_args.debug_ini.frozen_content.update(values)


__all__ = ["DebugArgs", "ResourceInfo", "get_debug_args", "set_default_ini", "set_ini",
           "write_debug_args"]
