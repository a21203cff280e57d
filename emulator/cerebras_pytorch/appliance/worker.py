"""The appliance side of one wsjob: compile a program, or execute it for real.

    python -m cerebras_pytorch.appliance.worker --job-type {compile,execute}
        --request REQUEST.json --port PORT --compile-root DIR --result RESULT.json
        --client-token-sha256 HEX [--systems cer-cs2-01,cer-cs2-02]

It serves the channel on PORT (0.0.0.0) at once, to the one client that presents the
secret whose sha256 is HEX (the job's owner), then runs the job as a worker pod
of the cluster would: imports come only from the request's python_paths and this
installation (not the client's script directory, not $PYTHONPATH), and files
outside the request's mount_dirs and the system's own locations do not exist.
Everything the job logs, and every file it saves, goes to the client as messages;
the last message is {"type": "done", ...} or {"type": "error", ...}. RESULT.json
gets {"ok": bool, "message": str}; the exit status is 0 or 1. Any failure, of the
user's code or ours, is reported that way: the worker never hangs (close() waits
at most 60 s for the client).
"""

from __future__ import annotations

import argparse
import ctypes
import errno
import json
import logging
import os
import sys
import tempfile
import traceback
from pathlib import Path

import aitestbed
from aitestbed.cerebras import cs2, cs3, wsjob
from aitestbed.cerebras import timing as cs2_timing
from aitestbed.devices.base import SystemSpec
from aitestbed.devices.clock import VirtualClock

from . import program as programs
from . import script
from . import session as sessions
from .channel import ChannelServer
from .errors import ApplianceClientError, ApplianceCompilationError

COMPILE_STAGES = ("Pre-optimization transforms...", "Optimizing layouts and memory usage...",
                  "Post-layout optimizations...", "Allocating buffers...", "Code generation...",
                  "Compiling image...", "Compiling kernels", "Compiling final image")
FIT_STAGE = 1  # the wafer's memory is laid out in the second stage
VALIDATE_STAGES = 2  # --validate_only stops after the fit check
SYSTEM_ROOTS = ("/usr", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/proc",
                "/sys", "/dev")
WATCHED_EVENTS = frozenset({"open", "os.listdir", "os.scandir"})
ARTIFACTS = "artifacts.json"
CLOSE_TIMEOUT_SECONDS = 60.0

log = logging.getLogger("cerebras_pytorch.appliance")


class ChannelLogHandler(logging.Handler):
    """Python logging of the job -> {"type": "log"} messages."""

    def __init__(self, channel: ChannelServer):
        super().__init__(logging.INFO)
        self.channel = channel

    def emit(self, record: logging.LogRecord) -> None:
        session = sessions.active()
        if session is not None and session.muted:
            return
        level = ("ERROR" if record.levelno >= logging.ERROR
                 else "WARNING" if record.levelno >= logging.WARNING else "INFO")
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a bad format string must not kill the job
            message = str(record.msg)
        self.channel.send({"type": "log", "level": level, "message": message})


def _normal(path: str) -> str:
    return os.path.normpath(os.path.abspath(path))


def installation_paths() -> list[str]:
    """This worker's own import paths: sys.path without the cwd and $PYTHONPATH, plus
    the directories holding cerebras_pytorch and aitestbed."""
    excluded = {_normal(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p}
    excluded.add(_normal(os.getcwd()))
    own = [str(Path(__file__).resolve().parents[2]),
           str(Path(aitestbed.__file__).resolve().parents[1])]
    paths = [p for p in sys.path if p and _normal(p) not in excluded] + own
    return list(dict.fromkeys(_normal(p) for p in paths))


def _inside(path: str, roots: tuple[str, ...]) -> bool:
    return any(path == root or path.startswith(root.rstrip("/") + "/") for root in roots)


def confine(request: dict, extra_roots: list[str]) -> None:
    """Imports from python_paths and this installation; files only under the mounts.

    Opening or listing anything else raises FileNotFoundError, as on a worker pod that
    does not have the directory mounted (os.stat is not audited: exists() answers
    truthfully, and the first real access fails).
    """
    own = installation_paths()
    sys.path[:] = [_normal(p) for p in request.get("python_paths", [])] + own
    sys.path_importer_cache.clear()
    roots = tuple(_normal(p) for p in [
        *request.get("mount_dirs", []), *SYSTEM_ROOTS, sys.prefix, sys.base_prefix,
        sys.exec_prefix, *own, tempfile.gettempdir(), os.getcwd(), *extra_roots])

    def hook(event: str, args: tuple) -> None:
        if event not in WATCHED_EVENTS or not args:
            return
        path = args[0]
        if path is None or isinstance(path, int):
            return
        try:
            text = os.fsdecode(path)
        except TypeError:
            return
        if not _inside(_normal(text), roots):
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), text)

    sys.addaudithook(hook)


def artifact_dir(compile_root: str, compile_dir: str, compile_hash: str) -> Path:
    relative = os.path.normpath(str(compile_dir).lstrip("/")) if compile_dir else "."
    if relative == ".." or relative.startswith("../"):
        raise ApplianceClientError(f"Invalid compile directory {compile_dir!r}")
    return Path(compile_root) / relative / compile_hash


def compile_job(request: dict, compile_root: str, clock: VirtualClock,
                system: SystemSpec = cs2.CS2) -> dict:
    program = request["program"]
    num_csx = int(request.get("num_csx") or 1)
    if "script" in program:  # measured by the client, which traced the model
        flow_name = program["script"]
        workload = cs2.Workload(**program["workload"])
    else:
        flow_name = program["flow"]
        functions = {key: programs.resolve(name) for key, name in program["functions"].items()}
        programs.resolve(flow_name)
        if "model_fn" not in functions:
            raise ApplianceClientError("The program has no model_fn to compile.")
        workload = programs.describe(functions["model_fn"], program["params"])
    validate_only = bool(program.get("validate_only"))
    if not validate_only and wsjob.release_tuple(request.get("release")) >= (2, 10):
        digest = programs.compile_hash(program, num_csx, workload)
        cached = artifact_dir(compile_root, request.get("compile_dir", ""), digest)
        if (cached / ARTIFACTS).is_file():  # 2.10 reuses a compile of the same program
            log.info(f'Found existing cached compile with hash: "{digest}"')
            log.info("Compile artifacts successfully written to remote compile directory. "
                     f"Compile hash is: {digest}")
            return {"compile_hash": digest, "seconds": clock.device_seconds}
    seconds = cs2_timing.compile_seconds(workload, validate_only)
    stages = COMPILE_STAGES[:VALIDATE_STAGES] if validate_only else COMPILE_STAGES
    for index, stage in enumerate(stages):
        log.info(stage)
        clock.advance(seconds / len(stages))
        if index == FIT_STAGE:
            try:
                cs2.check_fit(workload, num_csx, system)
            except cs2.WaferOutOfMemoryError as err:
                raise ApplianceCompilationError(f"Compile failed: {err}") from err
    if validate_only:
        return {"compile_hash": None, "seconds": clock.device_seconds}
    digest = programs.compile_hash(program, num_csx, workload)
    target = artifact_dir(compile_root, request.get("compile_dir", ""), digest)
    target.mkdir(parents=True, exist_ok=True)
    (target / ARTIFACTS).write_text(json.dumps(
        {"compile_hash": digest, "release": request.get("release"), "num_csx": num_csx,
         "workload": workload.as_dict(), "flow": flow_name,
         "functions": program.get("functions")}, indent=2) + "\n")
    log.info("Compile artifacts successfully written to remote compile directory. "
             f"Compile hash is: {digest}")
    return {"compile_hash": digest, "seconds": clock.device_seconds}


def execute_job(request: dict, compile_root: str, clock: VirtualClock, channel: ChannelServer,
                systems: list[str], system: SystemSpec = cs2.CS2) -> dict:
    digest = request.get("compile_hash")
    compile_dir = request.get("compile_dir", "")
    artifacts = artifact_dir(compile_root, compile_dir, digest) / ARTIFACTS if digest else None
    if artifacts is None or not artifacts.is_file():
        raise ApplianceCompilationError(
            f"No compile artifacts for {digest!r} in the remote compile directory "
            f"{compile_dir!r}: the model must be compiled before it is executed.")
    compiled = json.loads(artifacts.read_text())
    program = request["program"]
    session = sessions.ApplianceSession(
        job_type="execute", request=request, workload=cs2.Workload(**compiled["workload"]),
        send=channel.send, systems=systems, clock=clock, system=system)
    if "script" in program:
        sessions.activate(session)
        try:
            script.run_script(program, session)
        finally:
            sessions.activate(None)
        return {"samples": session.samples, "seconds": session.run_seconds(),
                "systems": systems}
    flow = programs.resolve(program["flow"])
    functions = {key: programs.resolve(name) for key, name in program["functions"].items()}
    sessions.activate(session)
    try:
        flow(program["params"], **functions)
    finally:
        sessions.activate(None)
    return {"samples": session.samples, "seconds": session.run_seconds(), "systems": systems}


def error_message(err: BaseException) -> dict:
    return {"type": "error", "exception": type(err).__name__, "message": str(err),
            "traceback": "".join(traceback.format_exception(err))}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m cerebras_pytorch.appliance.worker",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--job-type", choices=("compile", "execute"), required=True)
    parser.add_argument("--request", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--compile-root", required=True)
    parser.add_argument("--result", required=True)
    parser.add_argument("--client-token-sha256", default="",
                        help="sha256 (hex) of the secret the job's client presents")
    parser.add_argument("--systems", default="")
    parser.add_argument("--system-model", default=cs2.CS2.name, choices=sorted(cs3.MODELS),
                        help="the systems' model: the wafer a compile must fit, the step time")
    return parser.parse_args(argv)


PR_SET_DUMPABLE = 4


def not_dumpable() -> None:
    """No other process of the same user may ptrace this one or read its memory
    (/proc/PID/mem): the client's token and the model live here (D03)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    not_dumpable()
    try:
        channel = ChannelServer(args.port, args.client_token_sha256)
    except OSError as err:
        Path(args.result).write_text(json.dumps(
            {"ok": False, "message": f"cannot serve port {args.port}: {err}"}) + "\n")
        return 1
    root = logging.getLogger()
    root.setLevel(logging.INFO)
    root.addHandler(ChannelLogHandler(channel))
    systems = [s for s in args.systems.split(",") if s]
    ok, text = False, ""
    try:
        request = json.loads(Path(args.request).read_text())
        confine(request, [args.compile_root, os.path.dirname(_normal(args.result)),
                          os.path.dirname(_normal(args.request))])
        clock = VirtualClock()
        system = cs3.system_spec(args.system_model)
        if args.job_type == "compile":
            result = compile_job(request, args.compile_root, clock, system)
        else:
            result = execute_job(request, args.compile_root, clock, channel, systems, system)
        channel.send({"type": "done", **result})
        ok, text = True, f"{args.job_type} job succeeded"
    except BaseException as err:  # noqa: BLE001 - every failure is reported, never hangs
        channel.send(error_message(err))
        text = f"{type(err).__name__}: {err}"
    try:
        Path(args.result).write_text(json.dumps({"ok": ok, "message": text}) + "\n")
    finally:
        channel.close(CLOSE_TIMEOUT_SECONDS)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
