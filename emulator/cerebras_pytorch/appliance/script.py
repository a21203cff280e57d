"""A cstorch training script whose loop runs on the client, as the 2.x modelzoo's is.

On the real cluster the user's script drives the run from the login node: it builds
the model and the optimizer, and when its DataExecutor is first iterated the traced
step is compiled (a compile job) and run on the systems (an execute job), the loop
on the client receiving each step's outputs. Here the systems are the appliance
job's worker, which computes on its CPU; it cannot run a traced graph, so it runs
the script itself:

client  the script, up to its first DataExecutor iteration; then
        submit_running_script() sends {"script", "argv", "cwd", "workload"} (the
        workload measured from the models given to cstorch.compile) as a compile
        job and then an execute job (program.submit), relays what they print, and
        ends the process with the execute job's status (everything after the loop
        ran on the appliance, and its output was relayed).
worker  run_script() runs the same script with the same arguments, in the client's
        working directory, with the job's confinement (imports from python_paths,
        files under mount_dirs). What the script prints before its run is staged
        (the model set-up the client already printed) is not relayed; from staging
        on, its stdout and stderr go to the client.

The program is the script file named by sys.argv[0], so a run must be started as
`python script.py ...`; the DataExecutor must be given cs_config (the cluster it is
submitted to).
"""

from __future__ import annotations

import builtins
import io
import os
import runpy
import sys

from .errors import ApplianceClientError


def _script_path() -> str:
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None) or (sys.argv[0] if sys.argv else "")
    if not path or not path.endswith(".py") or not os.path.isfile(path):
        raise ApplianceClientError(
            "A CSX run that iterates its DataExecutor on the client must be a Python script "
            f"started as `python <script>.py ...` (this process runs {path or 'no script'!r}); "
            "or submit the program with cerebras_pytorch.appliance.run_program().")
    return os.path.abspath(path)


def _workload(executor):
    from . import program as programs

    backend = executor.backend
    if not backend.models:
        raise ApplianceClientError("Nothing to compile: pass the model to cstorch.compile() "
                                   "before iterating the DataExecutor.")
    model = backend.models[-1]
    args = executor.dataloader.args
    params = args[0] if args and isinstance(args[0], dict) else {}
    return programs.describe_model(model, programs.batch_size_of(params, model.training),
                                   model.training)


def submit_running_script(executor) -> None:
    """Compile and execute this script's run on the cluster; exit with its status."""
    from cerebras_appliance.environment import appliance_environ

    from . import program as programs

    if executor.cs_config is None:
        raise ApplianceClientError(
            "A CSX program cannot run on the client: give the DataExecutor the cluster's "
            "cs_config (the run is then submitted to the Wafer-Scale Cluster), or submit "
            "it with cerebras_pytorch.appliance.run_program().")
    backend = executor.backend
    program = {"script": _script_path(), "argv": list(sys.argv[1:]), "cwd": os.getcwd(),
               "workload": _workload(executor).as_dict(),
               "environ": appliance_environ.exported(),
               "compile_only": bool(backend.compile_only),
               "validate_only": bool(backend.validate_only)}
    programs.submit(program, executor.cs_config, backend.compile_dir, backend.compile_only,
                    backend.validate_only)
    sys.stdout.flush()
    raise SystemExit(0)


class RelayStream(io.TextIOBase):
    """A text stream whose lines go to the client, unless the session is muted."""

    def __init__(self, session, name: str):
        self.session, self.name = session, name
        self._pending = ""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self._pending += text
        if "\n" in self._pending:
            complete, _, self._pending = self._pending.rpartition("\n")
            self._send(complete + "\n")
        return len(text)

    def flush(self) -> None:
        if self._pending:
            self._send(self._pending)
            self._pending = ""

    def _send(self, text: str) -> None:
        if not self.session.muted:
            self.session.send({"type": "stdout", "stream": self.name, "text": text})


class SetupWrites:
    """While the worker re-runs the script's set-up (the session is muted until staging),
    the files that set-up writes (params_train.yaml, run.log, ...) are the client's, which
    already wrote them; the worker, running as the appliance's user, may not write the
    user's files. Until staging, a file or directory the set-up creates outside the
    worker's own directory goes to a scratch copy inside it (`scratch` + its path), and
    what it removes or renames there is left as the client left it."""

    def __init__(self, session, own_dir: str):
        self.session = session
        self.own = os.path.realpath(own_dir)
        self.scratch = os.path.join(self.own, "client-setup")
        self._open, self._mkdir = builtins.open, os.mkdir

    def _elsewhere(self, path) -> str | None:
        if not self.session.muted or isinstance(path, int):
            return None
        absolute = os.path.abspath(os.fspath(path))  # the link itself, not where it points
        full = os.path.join(os.path.realpath(os.path.dirname(absolute)),
                            os.path.basename(absolute))
        if full == self.own or full.startswith(self.own + os.sep):
            return None
        return os.path.join(self.scratch, full.lstrip(os.sep))

    def open(self, file, mode="r", *args, **kwargs):
        target = self._elsewhere(file) if set(mode) & set("wax+") else None
        if target is not None:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            file = target
        return self._open(file, mode, *args, **kwargs)

    def mkdir(self, path, mode=0o777, *args, **kwargs):
        target = self._elsewhere(path)
        if target is not None and not os.path.isdir(path):
            os.makedirs(target, exist_ok=True)
            return None
        return self._mkdir(path, mode, *args, **kwargs)

    def symlink(self, src, dst, *args, **kwargs):
        target = self._elsewhere(dst)
        if target is not None:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            if os.path.lexists(target):
                self._saved["unlink"](target)
            dst = target
        return self._saved["symlink"](src, dst, *args, **kwargs)

    def _removal(self, name):
        def remove(path, *args, **kwargs):
            if self._elsewhere(path) is None:
                return self._saved[name](path, *args, **kwargs)
            return None  # the client's set-up did it already
        return remove

    def _renaming(self, name):
        def rename(src, dst, *args, **kwargs):
            if self._elsewhere(dst) is None:
                return self._saved[name](src, dst, *args, **kwargs)
            return None  # the client's set-up did it already
        return rename

    def __enter__(self):
        self._saved = {name: getattr(os, name)
                       for name in ("symlink", "unlink", "remove", "rmdir", "rename", "replace")}
        builtins.open = io.open = self.open
        os.mkdir = self.mkdir
        os.symlink = self.symlink
        for name in ("unlink", "remove", "rmdir"):
            setattr(os, name, self._removal(name))
        for name in ("rename", "replace"):
            setattr(os, name, self._renaming(name))
        return self

    def __exit__(self, *exc):
        builtins.open = io.open = self._open
        os.mkdir = self._mkdir
        for name, function in self._saved.items():
            setattr(os, name, function)


def run_script(program: dict, session) -> None:
    """The worker's side: run the client's script under the active session."""
    from ..utils import tensorboard

    os.environ.update(program.get("environ") or {})
    own_dir = os.getcwd()
    try:
        os.chdir(program["cwd"])
    except OSError:
        pass  # the client's directory is not mounted: relative paths will not resolve
    saved = sys.argv, sys.stdout, sys.stderr
    sys.argv = [program["script"], *program.get("argv", [])]
    session.muted = True
    sys.stdout, sys.stderr = RelayStream(session, "stdout"), RelayStream(session, "stderr")
    try:
        with SetupWrites(session, own_dir):
            runpy.run_path(program["script"], run_name="__main__")
    except SystemExit as done:
        if done.code not in (None, 0):
            raise RuntimeError(f"The script exited with status {done.code}") from None
    finally:
        tensorboard.flush_all()
        sys.stdout.flush()
        sys.stderr.flush()
        sys.argv, sys.stdout, sys.stderr = saved
