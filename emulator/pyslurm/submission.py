"""pyslurm.JobSubmitDescription: a batch job, submitted with sbatch."""

from __future__ import annotations

import os
import shlex

from . import _backend
from .error import ArgumentError

# attribute -> sbatch option, for values passed as they are.
_OPTIONS = {
    "name": "--job-name", "account": "--account", "qos": "--qos",
    "partitions": "--partition", "reservations": "--reservation",
    "required_nodes": "--nodelist", "excluded_nodes": "--exclude",
    "constraints": "--constraint", "ntasks": "--ntasks", "ntasks_per_node": "--ntasks-per-node",
    "cpus_per_task": "--cpus-per-task", "working_directory": "--chdir",
    "standard_in": "--input", "standard_output": "--output", "standard_error": "--error",
    "time_limit": "--time", "time_limit_min": "--time-min", "begin_time": "--begin",
    "nice": "--nice", "comment": "--comment", "memory_per_node": "--mem",
    "memory_per_cpu": "--mem-per-cpu", "mail_user": "--mail-user", "priority": "--priority",
    "distribution": "--distribution", "licenses": "--licenses", "array": "--array",
    "gpus": "--gpus", "signal": "--signal",
}
_FLAGS = {"requires_contiguous_nodes": "--contiguous", "overcommit": "--overcommit",
          "wait_all_nodes": "--wait-all-nodes=1"}


class JobSubmitDescription:
    """The description of a batch job; submit() returns its id.

    `script` is the script's text (starting with #!) or the path of a script
    file on the cluster. `environment` is "ALL" (default), "NONE", or a dict.
    """

    def __init__(self, **kwargs):
        self.script: str | None = None
        self.script_args: list[str] | str | None = None
        self.environment: dict | str | None = None
        self.nodes: int | str | dict | None = None
        self.gres_per_node: dict | str | None = None
        self.dependencies: dict | str | None = None
        self.is_requeueable: bool | None = None
        self.resource_sharing: str | None = None
        self.mail_types: list[str] | str | None = None
        for name, value in kwargs.items():
            if name not in _OPTIONS and name not in _FLAGS and not hasattr(self, name):
                raise ArgumentError(f"unknown JobSubmitDescription attribute {name!r}")
            setattr(self, name, value)

    def __getattr__(self, name: str):
        if name in _OPTIONS or name in _FLAGS:
            return None
        raise AttributeError(f"'JobSubmitDescription' object has no attribute {name!r}")

    def sbatch_arguments(self) -> list[str]:
        args = ["sbatch", "--parsable"]
        for name, option in _OPTIONS.items():
            value = getattr(self, name)
            if value is not None:
                if isinstance(value, list | tuple):
                    value = ",".join(map(str, value))
                args.append(f"{option}={value}")
        for name, flag in _FLAGS.items():
            if getattr(self, name):
                args.append(flag)
        if self.nodes is not None:
            nodes = self.nodes
            if isinstance(nodes, dict):
                nodes = f"{nodes.get('min', 1)}-{nodes['max']}" if "max" in nodes \
                    else nodes["min"]
            args.append(f"--nodes={nodes}")
        if self.gres_per_node:
            gres = self.gres_per_node
            if isinstance(gres, dict):
                gres = ",".join(f"{k}:{v}" for k, v in gres.items())
            args.append(f"--gres={gres}")
        if self.dependencies:
            deps = self.dependencies
            if isinstance(deps, dict):
                deps = ",".join(f"{k}:{':'.join(map(str, v if isinstance(v, list) else [v]))}"
                                for k, v in deps.items())
            args.append(f"--dependency={deps}")
        if self.is_requeueable is not None:
            args.append("--requeue" if self.is_requeueable else "--no-requeue")
        if self.resource_sharing in ("no", "exclusive"):
            args.append("--exclusive")
        if self.mail_types:
            types = self.mail_types
            args.append(f"--mail-type={types if isinstance(types, str) else ','.join(types)}")
        if self.environment is not None:
            env = self.environment
            if isinstance(env, dict):
                env = ",".join(["ALL", *(f"{k}={v}" for k, v in env.items())])
            args.append(f"--export={env}")
        return args

    def submit(self) -> int:
        if not self.script:
            raise ArgumentError("no script given: set JobSubmitDescription(script=...)")
        args = self.sbatch_arguments()
        if self.working_directory is None and _backend.is_local():
            args.append(f"--chdir={os.getcwd()}")  # from the host: the login home
        stdin = None
        if self.script.startswith("#!"):
            if self.script_args:
                raise ArgumentError("script_args can only be given with a script file")
            stdin = self.script
        else:
            extra = self.script_args or []
            args += [self.script, *(shlex.split(extra) if isinstance(extra, str) else extra)]
        output = _backend.run(*args, stdin=stdin).strip()
        return int(output.split(";")[0])
