"""How a run flow reaches the Wafer-Scale Cluster: the same flow code on both sides.

A modelzoo run flow is a function `flow(params, **functions)` (e.g. model_fn,
train_data_fn, eval_data_fn) that uses the cstorch API: backend("CSX"), compile,
DataExecutor, trace... The modelzoo hands it over with

    run_program(flow, params, backend_type="CSX", cs_config=CSConfig(...),
                compile_dir=..., compile_only=False, validate_only=False,
                model_fn=..., train_data_fn=..., eval_data_fn=...)

- backend_type "CPU" (or "GPU", which the flow's cstorch.backend() refuses): the flow
  runs here, now.
- "CSX" on a client: nothing trains here. The flow and the functions are named
  "module:qualname" (they must be importable by name, from cs_config.python_paths on
  the cluster) and put in the program
      {"flow": "pkg.mod:fn", "functions": {"model_fn": "pkg.model:Model", ...},
       "params": params, "compile_only": bool, "validate_only": bool}
  which goes, inside a request (build_request), to a compile job and then to an
  execute job of the JobRunner (runner.get_runner()). Their log lines go to Python
  logging, their files are written here, and run_program returns the execute job's
  final message ({"type": "done", "samples": ..., "seconds": ...}).
- On the appliance the worker calls the flow itself, with an active session
  (session.py), and its CSX backend trains for real.

The model is described for the wafer by model_fn.aitestbed_workload(params), if the
model class defines it (a dict of aitestbed.cerebras.cs2.Workload fields at the
model's nominal size: a model too large to build can still be checked), else by
building model_fn(params) and measuring it.
"""

from __future__ import annotations

import base64
import hashlib
import importlib
import json
import logging
import os
import sys
from collections.abc import Callable

from aitestbed.cerebras.cs2 import Workload

from .._csconfig import CSConfig
from .._version import __version__
from .errors import ApplianceClientError
from .runner import get_runner

log = logging.getLogger("cerebras_pytorch.appliance")
LEVELS = {"INFO": logging.INFO, "WARNING": logging.WARNING, "ERROR": logging.ERROR}


def callable_name(fn: Callable) -> str:
    """ "module:qualname" of fn, or ApplianceClientError if it cannot be imported by name."""
    module, qualname = getattr(fn, "__module__", None), getattr(fn, "__qualname__", "")
    if not module or module == "__main__" or "<" in qualname:
        raise ApplianceClientError(
            f"{fn!r} cannot be sent to the appliance: the functions of a CSX program must be "
            "importable by name from a module on the python paths (not defined in the "
            "script that is run, nor local or lambda).")
    return f"{module}:{qualname}"


def resolve(name: str) -> Callable:
    """The object a "module:qualname" name stands for (imports the module)."""
    module_name, _, qualname = name.partition(":")
    target = importlib.import_module(module_name)
    for part in qualname.split("."):
        target = getattr(target, part)
    return target


def mode_of(params: dict) -> str:
    return str(params.get("runconfig", {}).get("mode", "train"))


def describe(model_fn: Callable, params: dict) -> Workload:
    """The workload a program runs, for the fit check and the timing."""
    training = mode_of(params) != "eval"
    batch_size = batch_size_of(params, training)
    nominal = getattr(model_fn, "aitestbed_workload", None)
    if nominal is not None:
        fields = {"batch_size": batch_size, **nominal(params), "training": training}
        micro = (params.get("train_input" if training else "eval_input") or {}).get(
            "micro_batch_size")
        if isinstance(micro, int) and not isinstance(micro, bool) and micro > 0:
            fields["micro_batch_size"] = micro
        return Workload(**fields)
    return describe_model(model_fn(params), batch_size, training)


def batch_size_of(params: dict, training: bool) -> int:
    section = params.get("train_input" if training else "eval_input") or {}
    return int(section.get("batch_size", 1) or 1)


def describe_model(model, batch_size: int, training: bool) -> Workload:
    """The workload of a built model: its parameters, largest layer and widest dimension."""
    own = [sum(p.numel() for p in module.parameters(recurse=False))
           for module in model.modules()]
    widest = max((max(p.shape) for p in model.parameters() if p.dim()), default=1)
    return Workload(parameters=max(1, sum(p.numel() for p in model.parameters())),
                    largest_layer_parameters=max([1, *own]), hidden_size=int(widest),
                    batch_size=batch_size, training=training)


def compile_hash(program: dict, num_csx: int, workload: Workload) -> str:
    """cs_<digits>: the same model, batch and systems compile to the same artifacts."""
    key = json.dumps({"release": __version__, "num_csx": num_csx,
                      "workload": workload.as_dict(),
                      "flow": program.get("flow") or program.get("script"),
                      "functions": program.get("functions"),
                      "model": (program.get("params") or {}).get("model")}, sort_keys=True)
    digest = hashlib.sha256(key.encode()).digest()
    return f"cs_{int.from_bytes(digest[:8], 'big') >> 1}"


def build_request(program: dict, cs_config, compile_dir: str | None,
                  compile_hash_: str | None = None) -> dict:
    """The request a JobRunner submits: JSON only, paths absolute on the client."""
    return {
        "release": __version__,
        "num_csx": int(cs_config.num_csx),
        "mount_dirs": [os.path.abspath(d) for d in cs_config.mount_dirs],
        "python_paths": [os.path.abspath(p) for p in cs_config.python_paths],
        "compile_dir": compile_dir or "compiles",
        "job_labels": cs_config.labels(),
        "job_priority": getattr(cs_config, "job_priority", "p2"),
        "job_time_sec": None if cs_config.job_time_sec is None else int(cs_config.job_time_sec),
        "num_workers_per_csx": int(cs_config.num_workers_per_csx),
        "cwd": os.getcwd(),
        "compile_hash": compile_hash_,
        "program": program,
    }


def relay(message: dict) -> None:
    """What the client does with a message of a job: log it, or write the file."""
    kind = message.get("type")
    if kind == "log":
        log.log(LEVELS.get(message.get("level", "INFO"), logging.INFO), message.get("message", ""))
    elif kind == "file":
        path = message["path"]
        if not os.path.isabs(path):
            raise ApplianceClientError(f"the appliance sent a relative file path {path!r}")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as stream:
            stream.write(base64.b64decode(message["data"]))
    elif kind == "stdout":
        stream = sys.stderr if message.get("stream") == "stderr" else sys.stdout
        stream.write(message.get("text", ""))
        stream.flush()


def run_program(flow: Callable, params: dict, *, backend_type: str, cs_config=None,
                compile_dir: str | None = None, compile_only: bool = False,
                validate_only: bool = False, **functions: Callable):
    """Run the flow here (CPU), or compile and execute it on the cluster (CSX)."""
    if str(backend_type).upper() != "CSX":
        return flow(params, **functions)
    if compile_only and validate_only:
        raise ApplianceClientError("compile_only and validate_only are mutually exclusive.")
    if cs_config is None:
        cs_config = CSConfig()
    program = {"flow": callable_name(flow),
               "functions": {key: callable_name(fn) for key, fn in functions.items()},
               "params": params, "compile_only": compile_only, "validate_only": validate_only}
    try:
        json.dumps(program)
    except (TypeError, ValueError) as err:
        raise ApplianceClientError(f"The params cannot be sent to the appliance: {err}") from err
    return submit(program, cs_config, compile_dir, compile_only, validate_only)


def submit(program: dict, cs_config, compile_dir: str | None, compile_only: bool,
           validate_only: bool) -> dict:
    """Compile the program on the cluster, then (unless only compiling) execute it."""
    if compile_dir and os.path.isabs(compile_dir):
        log.warning("Passing an absolute path as the compile directory may lead to undesirably "
                    "long paths as the directory is used on the server side, not on the client "
                    "side. Please consider passing in a relative directory instead.")
    runner = get_runner()
    log.info("Compiling the model. This may take a few minutes.")
    compiled = runner.run("compile", build_request(program, cs_config, compile_dir), relay)
    if validate_only:
        log.info("Validation was successful!")
        return compiled
    log.info("Compile was successful!")
    if compile_only:
        return compiled
    log.info("Programming Cerebras Wafer Scale Cluster for execution. "
             "This may take a few minutes.")
    request = build_request(program, cs_config, compile_dir, compiled.get("compile_hash"))
    return runner.run("execute", request, relay)
