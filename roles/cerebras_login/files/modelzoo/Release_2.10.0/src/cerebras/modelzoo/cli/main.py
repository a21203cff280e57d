"""cszoo: the Model Zoo's single entry point (Release 2.10.0).

    cszoo fit <config.yaml> [--job_labels k=v ...] [--model_dir DIR] [--num_csx N]
              [--checkpoint_path CKPT] ...
    cszoo validate <config.yaml> --checkpoint_path CKPT ...

fit trains on the config's train dataloader and validates on its val dataloader
(every eval_frequency steps); validate evaluates only.
"""

from __future__ import annotations

import argparse
import os
import sys

EPILOG = ("Use `cszoo <cmd> -h` to learn how to use individual sub-commands. "
          "See below for some basic examples.\n\n"
          "Train a model:\n"
          "  $ cszoo fit configs/Cerebras_GPT/111m.yaml --job_labels name=gpt3_111m "
          "--model_dir model_dir\n\n"
          "Validate a checkpoint:\n"
          "  $ cszoo validate configs/Cerebras_GPT/111m.yaml "
          "--checkpoint_path model_dir/checkpoint_400.mdl\n")


class _Parser(argparse.ArgumentParser):
    def parse_known_args(self, args=None, namespace=None):
        args, unknown = super().parse_known_args(args, namespace)
        if unknown:
            self.error(f"unrecognized arguments: {' '.join(unknown)}")
        return args, unknown


def add_run_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("params", help="Path to .yaml file with model parameters.")
    parser.add_argument("--target_device", choices=["CSX", "CPU"],
                        help="Target device to run on (default: the config's backend_type).")
    parser.add_argument("-o", "--model_dir", default="model_dir",
                        help="Model directory where checkpoints will be written.")
    parser.add_argument("--checkpoint_path", help="Checkpoint to initialize weights from.")
    parser.add_argument("--load_checkpoint_states",
                        help="Comma-separated states to load from the checkpoint "
                             "(model,optimizer,lr_scheduler,grad_scaler,dataloader).")
    parser.add_argument("--logging", default="INFO",
                        help="Specifies the default logging level. Defaults to INFO.")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--compile_only", action="store_true",
                       help="Enables compile only workflow.")
    group.add_argument("--validate_only", action="store_true",
                       help="Enables validate only workflow.")
    parser.add_argument("--job_labels", nargs="+", default=[],
                        help="A list of equal-sign-separated key value pairs served as job "
                             "labels.")
    parser.add_argument("--job_priority", choices=["p1", "p2", "p3"], default="p2",
                        help="Priority of the job. When launching jobs, valid priority should "
                             "be between p1 and p3, where p1 is highest priority.")
    parser.add_argument("--mount_dirs", nargs="+", default=[],
                        help="A list of paths to be mounted to the appliance containers "
                             "(the modelzoo, the data and the checkpoint are added).")
    parser.add_argument("--python_paths", nargs="+", default=[],
                        help="A list of paths to be exported into PYTHONPATH for worker "
                             "containers (the modelzoo's src is added).")
    parser.add_argument("--credentials_path", help="Credentials for cluster access.")
    parser.add_argument("--mgmt_address", help="<host>:<port> for cluster management.")
    parser.add_argument("--disable_version_check", action="store_true",
                        help="Disable version check for local experimentation and debugging")
    parser.add_argument("--num_csx", type=int, default=None,
                        help="Number of CS nodes. Defaults to 1")
    parser.add_argument("--compile_dir", help="Remote compile directory.")


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="cszoo",
        description="Cerebras ModelZoo CLI. This serves as a single entry-point to all "
                    "ModelZoo related tasks including: training and validation.",
        epilog=EPILOG, formatter_class=argparse.RawTextHelpFormatter)
    commands = top.add_subparsers(dest="cmd", required=True, parser_class=_Parser)
    fit = commands.add_parser(
        "fit", formatter_class=argparse.RawTextHelpFormatter,
        help="Run a model by calling fit. This completes a full training run on the given "
             "train and validation dataloaders.")
    add_run_args(fit)
    fit.set_defaults(mode="train_and_eval")
    validate = commands.add_parser(
        "validate", formatter_class=argparse.RawTextHelpFormatter,
        help="Run a model by calling validate. This completes a full validation run on the "
             "specified validation dataloader.")
    add_run_args(validate)
    validate.set_defaults(mode="eval")
    return top


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if not os.path.isfile(args.params):
        print(f"cszoo {args.cmd}: error: the config file {args.params!r} does not exist",
              file=sys.stderr)
        return 2
    from cerebras.modelzoo.common.run_utils import run

    return run(args)


if __name__ == "__main__":
    sys.exit(main())
