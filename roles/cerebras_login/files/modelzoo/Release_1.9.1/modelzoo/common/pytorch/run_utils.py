"""What every model's run.py does in Release 1.9.1: parse, merge params, run, record.

The flow (pytorch_runner.run_pytorch_flow) is handed to
cerebras_pytorch.appliance.run_program, which runs it here for CPU and submits it
to the Wafer-Scale Cluster for CSX ("Monitoring returned" once the execute job is
over). model_dir gets R1.9's layout: run_<YYYYmmdd_HHMMSS>.log (this run's log),
<mode>/params_<mode>.yaml (the merged params), checkpoint_<step>.mdl,
performance/performance.json and cerebras_logs/. train_and_eval and eval_all re-run
run.py in subprocesses, one mode at a time. The params are not schema-checked (R1.9
did not validate the runconfig).
"""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
import time

import cerebras_pytorch as cstorch
import yaml
from cerebras_pytorch.appliance import ApplianceError
from modelzoo.common.pytorch.cli_parser import CSX_ONLY, get_parser
from modelzoo.common.pytorch.pytorch_runner import RunError, run_pytorch_flow

LOG_FORMAT = "%(asctime)s %(levelname)s:   %(message)s"
DEFAULTS_ENV = "CEREBRAS_WAFER_SCALE_CLUSTER_DEFAULTS"
CONCATENATED = ("mount_dirs", "python_paths")
NOT_RUNCONFIG = ("params", "target_device")
CHECKPOINT_PATTERN = re.compile(r"^checkpoint_(\d+)\.mdl$")


class ParamsError(Exception):
    pass


def setup_logging(level: str | None) -> None:
    root = logging.getLogger()
    root.setLevel((level or "INFO").upper())
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    root.addHandler(handler)


def prepare_model_dir(params: dict, mode: str) -> None:
    """model_dir/run_<timestamp>.log (added to the logging), <mode>/params_<mode>.yaml and
    cerebras_logs/."""
    model_dir = params["runconfig"]["model_dir"]
    os.makedirs(os.path.join(model_dir, mode), exist_ok=True)
    os.makedirs(os.path.join(model_dir, "cerebras_logs"), exist_ok=True)
    with open(os.path.join(model_dir, mode, f"params_{mode}.yaml"), "w") as stream:
        yaml.safe_dump(params, stream, sort_keys=False)
    handler = logging.FileHandler(
        os.path.join(model_dir, f"run_{time.strftime('%Y%m%d_%H%M%S')}.log"))
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    logging.getLogger().addHandler(handler)


def save_performance(model_dir: str, result: dict) -> None:
    """performance/performance.json: the samples, seconds and rate of the run."""
    samples, seconds = int(result["samples"]), float(result["seconds"])
    performance = {"total_samples": samples, "total_time": seconds,
                   "samples_per_sec": samples / seconds if seconds > 0 else 0.0}
    os.makedirs(os.path.join(model_dir, "performance"), exist_ok=True)
    with open(os.path.join(model_dir, "performance", "performance.json"), "w") as stream:
        json.dump(performance, stream, indent=4)
        stream.write("\n")


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


MODE_SECTIONS = {"train": ("train_input",), "eval": ("eval_input",),
                 "eval_all": ("eval_input",), "train_and_eval": ("train_input", "eval_input")}


def check_sections(params: dict, path: str, mode: str) -> None:
    """The sections a run in `mode` reads (model, the mode's input) are there, as mappings:
    a missing one is found here, not by the compile job on the appliance."""
    for section in ("model", *MODE_SECTIONS.get(mode, ())):
        if not isinstance(params.get(section), dict):
            raise ParamsError(f"Params file {path!r} has no {section!r} section: a {mode} run "
                              f"reads model and {' and '.join(MODE_SECTIONS.get(mode, ()))}.")


def _cluster_defaults() -> dict:
    path = os.environ.get(DEFAULTS_ENV)
    if not path or not os.path.isfile(path):
        return {}
    with open(path) as stream:
        return yaml.safe_load(stream) or {}


def merge_params(args, params: dict, run_dir: str) -> dict:
    """Command line over runconfig; mount_dirs/python_paths concatenated (CLI, YAML, defaults)."""
    runconfig = params.get("runconfig") or {}
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
    for key, value in vars(args).items():
        if key not in NOT_RUNCONFIG and key not in CONCATENATED and value is not None:
            runconfig[key] = value
    if device == "CSX":
        defaults = _cluster_defaults()
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
    found = [(int(m.group(1)), name) for name in os.listdir(model_dir)
             if (m := CHECKPOINT_PATTERN.match(name))] if os.path.isdir(model_dir) else []
    return [os.path.join(model_dir, name) for _, name in sorted(found)]


def run(model_fn, train_data_fn=None, eval_data_fn=None) -> None:
    args = get_parser().parse_args()
    setup_logging(args.logging)
    try:
        params = merge_params(args, load_params(args.params),
                              os.path.dirname(os.path.abspath(sys.argv[0])))
        check_sections(params, args.params, args.mode)
    except ParamsError as err:
        sys.exit(f"ERROR: {err}")
    runconfig = params["runconfig"]
    if args.mode == "train_and_eval":
        sys.exit(_rerun("train", []) or _rerun("eval", []))
    if args.mode == "eval_all":
        for checkpoint in _checkpoints(runconfig["model_dir"]):
            if code := _rerun("eval", ["--checkpoint_path", checkpoint]):
                sys.exit(code)
        return
    prepare_model_dir(params, args.mode)
    functions = {"model_fn": model_fn, "train_data_fn": train_data_fn,
                 "eval_data_fn": eval_data_fn}
    compiling = bool(runconfig.get("compile_only") or runconfig.get("validate_only"))
    try:
        result = cstorch.appliance.run_program(
            run_pytorch_flow, params, backend_type=args.target_device,
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
    if args.target_device == "CSX" and not compiling:
        logging.info("Monitoring returned")
    if not compiling:
        save_performance(runconfig["model_dir"], result)
