"""The run.py command line of Release 1.9.1: python run.py {CPU,GPU,CSX} -p PARAMS -m MODE."""

from __future__ import annotations

import argparse

DEVICES = ("CPU", "GPU", "CSX")
MODES = ("train", "eval", "train_and_eval", "eval_all")
# Options only a CSX run takes (also when they come from the params file's runconfig).
CSX_ONLY = ("compile_only", "validate_only", "num_workers_per_csx", "compile_dir",
            "job_labels", "mount_dirs", "python_paths", "debug_args_path",
            "credentials_path", "mgmt_address", "job_time_sec", "disable_version_check",
            "num_csx", "num_wgt_servers", "num_act_servers")


def _common() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("-p", "--params", required=True, help="path to the params YAML file")
    parser.add_argument("-m", "--mode", required=True, choices=MODES, help="what to run")
    parser.add_argument("-o", "--model_dir", default=None,
                        help="checkpoints and logs (default: model_dir next to run.py)")
    parser.add_argument("--checkpoint_path", default=None, help="checkpoint to start from")
    parser.add_argument("--logging", default=None, help="log level (INFO, DEBUG, ...)")
    parser.add_argument("--max_steps", type=int, default=None, help="total training steps")
    parser.add_argument("--eval_steps", type=int, default=None, help="evaluation steps")
    parser.add_argument("--num_epochs", type=int, default=None, help="training epochs")
    parser.add_argument("--num_steps", type=int, default=None, help="steps of this run")
    parser.add_argument("--is_pretrained_checkpoint", action="store_true", default=None,
                        help="the checkpoint is a pretrained model: load its weights only and "
                             "start from step 0")
    return parser


def _csx(parser: argparse.ArgumentParser) -> None:
    exclusive = parser.add_mutually_exclusive_group()
    exclusive.add_argument("--compile_only", action="store_true", default=None,
                           help="compile the model, do not run it")
    exclusive.add_argument("--validate_only", action="store_true", default=None,
                           help="check the model compiles to the wafer, do not run it")
    parser.add_argument("--num_workers_per_csx", type=int, default=None,
                        help="input workers per CS-2 (0: automatic)")
    parser.add_argument("-c", "--compile_dir", default=None,
                        help="compile directory on the cluster")
    parser.add_argument("--job_labels", nargs="+", default=None, help="labels key=value")
    parser.add_argument("--mount_dirs", nargs="+", default=None,
                        help="directories the appliance's workers mount")
    parser.add_argument("--python_paths", nargs="+", default=None,
                        help="import paths of the appliance's workers (the modelzoo root)")
    parser.add_argument("--debug_args_path", default=None, help="debug arguments file")
    parser.add_argument("--credentials_path", default=None, help="cluster TLS certificate")
    parser.add_argument("--mgmt_address", default=None, help="cluster management address")
    parser.add_argument("--job_time_sec", type=int, default=None, help="job time limit")
    parser.add_argument("--disable_version_check", action="store_true", default=None,
                        help="do not check the client and cluster versions match")
    parser.add_argument("--num_csx", type=int, default=None, help="CS-2 systems (default 1)")
    parser.add_argument("--num_wgt_servers", type=int, default=None,
                        help="MemoryX weight servers")
    parser.add_argument("--num_act_servers", type=int, default=None,
                        help="activation servers per CS-2")


def get_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description="Run a model on CPU, GPU or the Cerebras "
                                                 "Wafer-Scale Cluster (CSX).")
    devices = parser.add_subparsers(dest="target_device", required=True,
                                    metavar="{CPU,GPU,CSX}")
    common = _common()
    for device in DEVICES:
        sub = devices.add_parser(device, parents=[common], help=f"run on {device}")
        if device == "CSX":
            _csx(sub)
    return parser
