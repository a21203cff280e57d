"""parse_app_args: the SambaFlow apps' command line.

    usage: logreg.py [-h] {compile,run,test,measure-performance} ...

Every subcommand takes the framework's arguments (batch size, PEF name and output
folder, tiles, data parallel, ...) and the app's common ones (common_parser_fn);
`compile` adds -ws/--world-size and the app's compile_parser_fn; `run`, `test` and
`measure-performance` add -p/--pef and --reduce-on-rdu, and the app's run_parser_fn
(test: also test_parser_fn). Anything else is argparse's error, status 2.

parse_yaml_to_args(path, args) then lays a YAML file of arguments over the parsed ones
(the apps' --yaml-config).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from ..._distributed import layout
from ..._errors import SambaError

COMMANDS = ("compile", "run", "test", "measure-performance")
ParserFn = Callable[[argparse.ArgumentParser], Any] | None

# The arguments of the last parse: session.compile and trace_graph read them when the
# app does not pass config_dict (and for --inference, --data-parallel, the command).
last_args: argparse.Namespace | None = None


# Counts that must be at least 1, whether the framework or the app declares them: a
# batch of 0 samples cannot be traced, and -1 epochs would train nothing and exit 0.
AT_LEAST_ONE = ("batch_size", "num_epochs")


def add_framework_args(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("SambaFlow")
    group.add_argument("-b", "--batch-size", type=int, default=1, help="Batch size for training")
    group.add_argument("--pef-name", type=str, default=None,
                       help="Name of the PEF (default: the app's model name)")
    group.add_argument("--output-folder", type=str, default="out",
                       help="Folder the PEF and its logs go into (default: out)")
    group.add_argument("--inference", action="store_true",
                       help="Compile/run the forward graph only")
    group.add_argument("--mac-v2", action="store_true", help="Use the MAC v2 compiler")
    group.add_argument("--mac-human-decision", type=str, default=None,
                       help="A MAC human-decision (overrides) JSON file")
    group.add_argument("--compiler-configs-file", type=str, default=None,
                       help="A compiler configuration JSON file")
    group.add_argument("--n-chips", type=int, default=1,
                       help="Number of RDUs the PEF uses whole (default: 1)")
    group.add_argument("--num-tiles", type=int, default=4,
                       help="Number of tiles the PEF uses (default: 4)")
    group.add_argument("--data-parallel", action="store_true",
                       help="Data parallel: one instance per task of the Slurm step")
    group.add_argument("--grad-accumulation-steps", type=int, default=1,
                       help="Gradient accumulation steps")
    group.add_argument("--log-level", type=str, default="warning",
                       choices=["debug", "info", "warning", "error", "critical"],
                       help="Log level (default: warning)")
    group.add_argument("--mapping", type=str, default="section",
                       choices=["section", "spatial"], help="Mapping mode (default: section)")
    group.add_argument("--debug", action="store_true", help="Debug mode")
    group.add_argument("--enable-conv-tiling", action="store_true",
                       help="Tile convolutions (large images)")
    group.add_argument("--resources-scaling-factors", type=float, nargs="+", default=None,
                       metavar="FACTOR",
                       help="Scale the compiler's estimate of the on-chip resources "
                            "(PCU, PMU, ...) a kernel may use, each in (0, 1]")
    group.add_argument("--arch", type=str, default="native",
                       choices=["native", "sn10", "sn20", "sn30", "sn40"],
                       help="The RDU generation to compile for (default: this node's)")
    for level in ("o0", "o1", "o3"):
        group.add_argument(f"--{level}", action="store_true",
                           help=f"Compiler optimization level {level[1]}")


def _apply(fn: ParserFn, parser: argparse.ArgumentParser) -> None:
    if fn is not None:
        fn(parser)


def build_parser(common_parser_fn: ParserFn = None, compile_parser_fn: ParserFn = None,
                 run_parser_fn: ParserFn = None, test_parser_fn: ParserFn = None,
                 measure_perf_parser_fn: ParserFn = None,
                 prog: str | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog)
    commands = parser.add_subparsers(dest="command", required=True,
                                     help="different modes of operation")
    parser.aitestbed_commands = {}
    for command in COMMANDS:
        sub = commands.add_parser(command, conflict_handler="resolve")
        parser.aitestbed_commands[command] = sub
        add_framework_args(sub)
        if command == "compile":
            sub.add_argument("-ws", "--world-size", type=int, default=None,
                             help="Data-parallel world size the PEF is compiled for")
        else:
            sub.add_argument("-p", "--pef", type=str, default=None,
                             help="The PEF file compile created")
            sub.add_argument("--reduce-on-rdu", action="store_true",
                             help="Data parallel: reduce the gradients on the RDUs")
        _apply(common_parser_fn, sub)
        if command == "compile":
            _apply(compile_parser_fn, sub)
        elif command == "run":
            _apply(run_parser_fn, sub)
        elif command == "test":
            _apply(run_parser_fn, sub)
            _apply(test_parser_fn, sub)
        else:
            _apply(run_parser_fn, sub)
            _apply(measure_perf_parser_fn, sub)
    return parser


def _check_counts(sub: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """argparse's error (status 2) for a count below 1 (see AT_LEAST_ONE), a bad factor."""
    factors = getattr(args, "resources_scaling_factors", None)
    if isinstance(factors, list) and any(not 0 < f <= 1 for f in factors):
        sub.error("argument --resources-scaling-factors: each factor must be in (0, 1], not "
                  + " ".join(f"{f:g}" for f in factors))
    for action in sub._actions:
        value = getattr(args, action.dest, None)
        if action.dest in AT_LEAST_ONE and isinstance(value, int) and value < 1:
            sub.error(f"argument {'/'.join(action.option_strings)}: invalid value {value}: "
                      "must be at least 1")


def parse_app_args(argv: Sequence[str] | None = None, dev_mode: bool = False,
                   common_parser_fn: ParserFn = None, compile_parser_fn: ParserFn = None,
                   run_parser_fn: ParserFn = None, test_parser_fn: ParserFn = None,
                   measure_perf_parser_fn: ParserFn = None,
                   prog: str | None = None, **_ignored: Any) -> argparse.Namespace:
    """Parse the app's command line (argv: sys.argv[1:] by default)."""
    global last_args
    parser = build_parser(common_parser_fn, compile_parser_fn, run_parser_fn, test_parser_fn,
                          measure_perf_parser_fn, prog)
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    _check_counts(parser.aitestbed_commands[args.command], args)
    if getattr(args, "command", None) != "compile":
        args.world_size = getattr(args, "world_size", None)
    if not hasattr(args, "local_rank"):
        where = layout()
        args.local_rank = where.local_rank if args.data_parallel and where.world_size > 1 \
            else int(os.environ.get("LOCAL_RANK", "-1"))
    args.dev_mode = dev_mode
    last_args = args
    return args


def _yaml_key(key: Any, path: str) -> str:
    if not isinstance(key, str) or not key.strip("-"):
        raise SambaError(f"YAML config {path}: {key!r} is not an argument name")
    return key.lstrip("-").replace("-", "_")


def parse_yaml_to_args(yaml_path: str | os.PathLike[str],
                       args: argparse.Namespace | None = None) -> argparse.Namespace:
    """Lay the arguments of a YAML file over the command line's (an app's --yaml-config).

    The file is a mapping of argument names, spelt as on the command line or as
    attributes (`num-epochs`, `--num-epochs` and `num_epochs` are one argument), to
    values, which YAML types (`lr: 0.01` is a float, `bias: true` a bool, a list stays
    a list). Each value replaces the argument's in `args` (the file is the run's
    configuration: it wins over defaults and flags); names the app does not declare
    are added. `args` is updated in place and returned (a new Namespace without it).
    A missing, unreadable or malformed file is the runtime's error (exit status 1).
    """
    import yaml

    path = os.fspath(yaml_path)
    try:
        with open(path, encoding="utf-8") as handle:
            config = yaml.safe_load(handle)
    except FileNotFoundError:
        raise SambaError(f"YAML config {path} does not exist") from None
    except OSError as err:
        raise SambaError(f"cannot read the YAML config {path}: {err.strerror}") from None
    except yaml.YAMLError as err:
        where = getattr(err, "problem_mark", None)
        at = f" (line {where.line + 1}, column {where.column + 1})" if where else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise SambaError(f"YAML config {path} is not valid YAML{at}: {problem}") from None
    if config is None:
        config = {}
    if not isinstance(config, dict):
        raise SambaError(f"YAML config {path} must map argument names to values, "
                         f"not be a {type(config).__name__}")
    target = args if args is not None else argparse.Namespace()
    for key, value in config.items():
        name = _yaml_key(key, path)
        if name in AT_LEAST_ONE and (isinstance(value, bool) or not isinstance(value, int)
                                     or value < 1):
            raise SambaError(f"YAML config {path}: {key}: {value!r} is not a count of at "
                             "least 1")
        setattr(target, name, value)
    return target
