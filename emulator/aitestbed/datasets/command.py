"""The datasets' command lines (`python -m aitestbed.datasets.<name>`), one argparse shape.

Each generator states its options and what it does; this module owns the parser, the
hidden --seed of the synthetic sets, the subcommands of the tools that have them, and
how a failure ends the command (`<name>: <error>` on stderr, exit status 1).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

Option = tuple[str, dict[str, Any]]  # a flag or a positional's name, add_argument's keywords
Act = Callable[[argparse.Namespace], Iterable[object]]  # what the command prints, a line each

PATH: dict[str, Any] = {"type": Path}


def out_option(help_text: str) -> Option:
    """--out, the directory a generator writes."""
    return "--out", {"type": Path, "required": True, "help": help_text}


def seed_option(default: int) -> Option:
    """--seed, which the help does not show (the tests use it)."""
    return "--seed", {"type": int, "default": default, "help": argparse.SUPPRESS}


@dataclass(frozen=True)
class Command:
    """A subcommand: its help, its arguments and what it does."""

    help: str
    arguments: Sequence[Option]
    act: Act


def _parser(name: str, description: str) -> argparse.ArgumentParser:
    return argparse.ArgumentParser(prog=f"python -m aitestbed.datasets.{name}",
                                   description=description)


def _add(parser: argparse.ArgumentParser, options: Sequence[Option]) -> None:
    for flag, keywords in options:
        parser.add_argument(flag, **keywords)


def _act(parser: argparse.ArgumentParser, name: str, act: Act, args: argparse.Namespace,
         errors: tuple[type[BaseException], ...]) -> None:
    try:
        lines = list(act(args))
    except errors as err:
        parser.exit(1, f"{name}: {err}\n")
    for line in lines:
        print(line)


def main(argv: list[str] | None, name: str, description: str, options: Sequence[Option],
         act: Act, *, errors: tuple[type[BaseException], ...] = (OSError,)) -> None:
    """A command without subcommands: parse argv, act, print its lines."""
    parser = _parser(name, description)
    _add(parser, options)
    _act(parser, name, act, parser.parse_args(argv), errors)


def main_with_commands(argv: list[str] | None, name: str, description: str,
                       commands: Mapping[str, Command], *,
                       errors: tuple[type[BaseException], ...] = (OSError,)) -> None:
    """A command with subcommands (fetch, build, register ...): parse argv, run the one
    named, print its lines."""
    parser = _parser(name, description)
    subparsers = parser.add_subparsers(dest="command", required=True)
    for command_name, command in commands.items():
        _add(subparsers.add_parser(command_name, help=command.help), command.arguments)
    args = parser.parse_args(argv)
    _act(parser, name, commands[args.command].act, args, errors)
