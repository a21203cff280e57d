"""What every model's run.py does: parse, merge params, set up logs, run the flow.

The flow (run_cstorch_flow) is handed to cerebras_pytorch.appliance.run_program,
which runs it here for CPU and submits it to the Wafer-Scale Cluster for CSX (the
flow then runs on the appliance, which streams its logs and checkpoints back).
train_and_eval and eval_all re-run run.py in subprocesses, one mode at a time.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
import time

import cerebras_pytorch as cstorch
import yaml
from cerebras_pytorch.appliance import ApplianceError
from modelzoo.common.pytorch import runconfig as runconfig_schema
from modelzoo.common.pytorch.cli_parser import CSX_ONLY, get_parser
from modelzoo.common.pytorch.run_cstorch_flow import RunError, run_cstorch_flow

LOG_FORMAT = "%(asctime)s %(levelname)s:   %(message)s"
DEFAULTS_ENV = "CEREBRAS_WAFER_SCALE_CLUSTER_DEFAULTS"
CONCATENATED = ("mount_dirs", "python_paths")
NOT_RUNCONFIG = ("params", "target_device")


class ParamsError(Exception):
    pass


def setup_logging(level: str | None) -> None:
    root = logging.getLogger()
    root.setLevel((level or "INFO").upper())
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    root.addHandler(handler)


def add_run_log(model_dir: str, mode: str) -> str:
    """model_dir/cerebras_logs/<mode>/<timestamp>/run.log, and cerebras_logs/latest to it."""
    logs = os.path.join(model_dir, "cerebras_logs")
    stamp = time.strftime("%Y%m%d_%H%M%S")
    run_dir = os.path.join(logs, mode, stamp)
    os.makedirs(run_dir, exist_ok=True)
    latest = os.path.join(logs, "latest")
    if os.path.islink(latest) or os.path.exists(latest):
        os.remove(latest)
    os.symlink(os.path.join(mode, stamp), latest)
    handler = logging.FileHandler(os.path.join(run_dir, "run.log"))
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    logging.getLogger().addHandler(handler)
    return run_dir


def load_params(path: str) -> dict:
    if not os.path.isfile(path):
        raise ParamsError(f"Params file {path!r} does not exist.")
    try:
        with open(path) as stream:
            params = yaml.safe_load(stream) or {}
    except yaml.YAMLError as err:
        raise ParamsError(f"Params file {path!r} is not valid YAML: {err}") from err
    if not isinstance(params, dict):
        raise ParamsError(f"Params file {path!r} must hold a mapping of sections.")
    return params


def _cluster_defaults() -> dict:
    path = os.environ.get(DEFAULTS_ENV)
    if not path or not os.path.isfile(path):
        return {}
    with open(path) as stream:
        return yaml.safe_load(stream) or {}


def merge_params(args, params: dict, run_dir: str) -> dict:
    """Command line over runconfig; mount_dirs/python_paths concatenated (CLI, YAML, defaults)."""
    runconfig = params.setdefault("runconfig", {}) or {}
    params["runconfig"] = runconfig
    device = args.target_device
    if device != "CSX":
        found = [key for key in CSX_ONLY if key in runconfig]
        if found:
            logging.warning(f"User specified a {device} run, but the following non-{device} "
                            f"configurations were found in params file: {found}. Ignoring "
                            "these arguments and continuing.")
            for key in found:
                del runconfig[key]
    defaults = _cluster_defaults() if device == "CSX" else {}
    for key, value in vars(args).items():
        if key in NOT_RUNCONFIG or value is None:
            continue
        if key in CONCATENATED:
            continue
        if key in runconfig and runconfig[key] != value:
            logging.warning("A mismatch was detected between your params.yaml file and "
                            f"specified command-line arguments: {key} is {runconfig[key]!r} "
                            f"in the params file and {value!r} on the command line. Using "
                            "the command-line value.")
        runconfig[key] = value
    if device == "CSX":
        for key in CONCATENATED:
            merged = [*(getattr(args, key) or []), *(runconfig.get(key) or []),
                      *(defaults.get(key) or [])]
            runconfig[key] = list(dict.fromkeys(merged))
    runconfig["target_device"] = device
    model_dir = runconfig.get("model_dir") or os.path.join(run_dir, "model_dir")
    runconfig["model_dir"] = os.path.abspath(model_dir)
    return params


def _cs_config(runconfig: dict) -> cstorch.utils.CSConfig:
    return cstorch.utils.CSConfig(
        num_csx=runconfig.get("num_csx", 1), mount_dirs=runconfig.get("mount_dirs", []),
        python_paths=runconfig.get("python_paths", []),
        num_workers_per_csx=runconfig.get("num_workers_per_csx", 0),
        job_labels=runconfig.get("job_labels") or [],
        job_time_sec=runconfig.get("job_time_sec"),
        mgmt_address=runconfig.get("mgmt_address"),
        credentials_path=runconfig.get("credentials_path"),
        disable_version_check=bool(runconfig.get("disable_version_check")))


def _rerun(mode: str, extra: list[str]) -> int:
    """run.py again with --mode replaced (train_and_eval, eval_all)."""
    argv, skip = [], False
    for arg in sys.argv[1:]:
        if skip:
            skip = False
        elif arg in ("-m", "--mode"):
            skip = True
        elif not arg.startswith("--mode="):
            argv.append(arg)
    return subprocess.call([sys.executable, sys.argv[0], *argv, "--mode", mode, *extra])


def _checkpoints(model_dir: str) -> list[str]:
    pattern = re.compile(r"^checkpoint_(\d+)(_\d{8}_\d{6})?\.mdl$")
    found = [(int(m.group(1)), name) for name in os.listdir(model_dir)
             if (m := pattern.match(name))] if os.path.isdir(model_dir) else []
    return [os.path.join(model_dir, name) for _, name in sorted(found)]


def run(model_fn, train_data_fn=None, eval_data_fn=None) -> None:
    args = get_parser().parse_args()
    setup_logging(args.logging)
    try:
        params = merge_params(args, load_params(args.params),
                              os.path.dirname(os.path.abspath(sys.argv[0])))
        runconfig_schema.validate(params["runconfig"])
    except ParamsError as err:
        sys.exit(f"ERROR: {err}")
    except runconfig_schema.ValidationError as err:
        logging.error(f"Invalid runconfig in params file {args.params}: {err}")
        sys.exit(1)
    try:  # before anything is submitted: the sections this mode reads
        runconfig_schema.validate(params, runconfig_schema.params_schema(args.mode))
    except runconfig_schema.ValidationError as err:
        logging.error(f"Invalid params file {args.params}: {err}")
        sys.exit(1)
    runconfig = params["runconfig"]
    if args.mode == "train_and_eval":
        sys.exit(_rerun("train", []) or _rerun("eval", []))
    if args.mode == "eval_all":
        for checkpoint in _checkpoints(runconfig["model_dir"]):
            if code := _rerun("eval", ["--checkpoint_path", checkpoint]):
                sys.exit(code)
        return
    model_dir = runconfig["model_dir"]
    os.makedirs(os.path.join(model_dir, args.mode), exist_ok=True)
    add_run_log(model_dir, args.mode)
    functions = {"model_fn": model_fn, "train_data_fn": train_data_fn,
                 "eval_data_fn": eval_data_fn}
    try:
        cstorch.appliance.run_program(
            run_cstorch_flow, params, backend_type=args.target_device,
            cs_config=_cs_config(runconfig), compile_dir=runconfig.get("compile_dir"),
            compile_only=bool(runconfig.get("compile_only")),
            validate_only=bool(runconfig.get("validate_only")),
            **{key: fn for key, fn in functions.items() if fn is not None})
    except ApplianceError as err:
        logging.error(f"Initiating shutdown sequence due to Appliance error: {err}")
        cls = type(err)
        sys.exit(f"{cls.__module__}.{cls.__name__}: {err}")
    except (RunError, cstorch.BackendError, FileNotFoundError, ValueError) as err:
        logging.error(str(err))
        sys.exit(1)
