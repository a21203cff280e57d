"""How cszoo runs a config: read and check it, set up the logs, hand the flow over.

cerebras.pytorch's run_program runs the flow (trainer.flow) here for CPU and
submits it to the Wafer-Scale Cluster for CSX: a compile job, then an execute job
that trains (and validates), streaming its logs and checkpoints back here.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
import time
from pathlib import Path

import cerebras.pytorch as cstorch
from cerebras.appliance.errors import ApplianceError
from cerebras.modelzoo.trainer import config as trainer_config
from cerebras.modelzoo.trainer import flow

LOG_FORMAT = "%(asctime)s %(levelname)s:   %(message)s"
SRC = str(Path(__file__).resolve().parents[3])  # .../modelzoo/src: the workers import from it


def setup_logging(level: str, model_dir: str, mode: str) -> None:
    root = logging.getLogger()
    root.setLevel(str(level).upper())
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    root.addHandler(handler)
    run_dir = os.path.join(model_dir, "cerebras_logs", mode, time.strftime("%Y%m%d_%H%M%S"))
    os.makedirs(run_dir, exist_ok=True)
    latest = os.path.join(model_dir, "cerebras_logs", "latest")
    if os.path.islink(latest) or os.path.exists(latest):
        os.remove(latest)
    os.symlink(os.path.relpath(run_dir, os.path.dirname(latest)), latest)
    file_handler = logging.FileHandler(os.path.join(run_dir, "run.log"))
    file_handler.setFormatter(logging.Formatter(LOG_FORMAT))
    root.addHandler(file_handler)


def _resolve(name: str):
    module, _, attr = name.partition(":")
    return getattr(importlib.import_module(module), attr)


def cs_config(args, params: dict) -> cstorch.utils.CSConfig:
    """What the appliance mounts and imports: the user's --mount_dirs/--python_paths and,
    as cszoo adds them, this modelzoo's src, the data directories and the checkpoint's."""
    runconfig = params["runconfig"]
    mounts = [*args.mount_dirs, SRC]
    for section in ("train_input", "eval_input"):
        data_dir = (params.get(section) or {}).get("data_dir")
        for path in data_dir if isinstance(data_dir, list) else [data_dir]:
            if path:
                mounts.append(os.path.abspath(str(path)))
    if runconfig.get("checkpoint_path"):
        mounts.append(os.path.dirname(runconfig["checkpoint_path"]))
    mounts.append(runconfig["model_dir"])
    return cstorch.utils.CSConfig(
        num_csx=int(runconfig["num_csx"]), mount_dirs=list(dict.fromkeys(mounts)),
        python_paths=list(dict.fromkeys([*args.python_paths, SRC])),
        job_labels=args.job_labels, job_time_sec=runconfig.get("job_time_sec"),
        mgmt_address=args.mgmt_address, credentials_path=args.credentials_path,
        disable_version_check=args.disable_version_check, job_priority=args.job_priority)


def run(args) -> int:
    try:
        config = trainer_config.load(args.params)
        params = trainer_config.to_params(config, args)
        backend = (config["trainer"]["init"].get("backend") or {}).get("backend_type", "CSX")
        device = (args.target_device or backend).upper()
        params["runconfig"]["target_device"] = device
        params["runconfig"]["compile_dir"] = args.compile_dir
        for label in args.job_labels:
            if "=" not in label or label.startswith("="):
                raise trainer_config.ConfigError(
                    f"--job_labels {label!r}: expected key=value")
    except trainer_config.ConfigError as err:
        print(f"cszoo {args.cmd}: error: invalid config {args.params}: {err}", file=sys.stderr)
        return 1
    runconfig = params["runconfig"]
    setup_logging(args.logging, runconfig["model_dir"], "train" if args.cmd == "fit"
                  else "validate")
    model_fn = _resolve(trainer_config.MODELS[params["model"]["name"]])
    functions = {"model_fn": model_fn}
    data = "cerebras.modelzoo.data.common"
    if args.cmd == "fit":
        functions["train_data_fn"] = _resolve(f"{data}:train_input_fn")
        if params.get("eval_input"):
            functions["eval_data_fn"] = _resolve(f"{data}:eval_input_fn")
        run_flow = flow.fit
    else:
        functions["eval_data_fn"] = _resolve(f"{data}:eval_input_fn")
        run_flow = flow.evaluate
    try:
        cstorch.appliance.run_program(
            run_flow, params, backend_type=device, cs_config=cs_config(args, params),
            compile_dir=args.compile_dir, compile_only=args.compile_only,
            validate_only=args.validate_only, **functions)
    except ApplianceError as err:
        logging.error(f"Initiating shutdown sequence due to Appliance error: {err}")
        cls = type(err)
        print(f"{cls.__module__}.{cls.__name__}: {err}", file=sys.stderr)
        return 1
    except (flow.RunError, cstorch.BackendError, FileNotFoundError, ValueError) as err:
        logging.error(str(err))
        return 1
    return 0
