"""The shape of what a user types on a node: the user guides' workflows as data.

Each system's workflows live in its room (`cerebras/guide.py`, `graphcore/guide.py`,
`sambanova/guide.py`, `groq/guide.py`); this module owns what they are made of and how
they are rendered, plus the few commands no one system owns (pip, TensorBoard). The
exercises show the workflows (catalog), their checks hint at them (checks), the rehearsal
types them (rehearse), and the cluster tests and benches replay them.

A workflow is a tuple of steps; a step is the commands a learner types on one line
(joined with && when there are several). Where the page's command cannot run twice
(`mkdir DIR`), `Typed` holds the page's text and the one a script types. So:

    shown(workflow)        the steps as an exercise shows them, one a line, page text
    script(*parts)         a shell script, one command a line, script text; a part is a
                           workflow or a caller's own line (`set -e`, a clean-up, ...)
    one_line(*parts)       the same commands joined with &&

Sources: seeds 000 (Cerebras 2.1.1), 002 (the user guide) and 004 (Graphcore); for
today's testbed, ALCF's docs (reference: alcf-testbed-2026.md, groq.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Typed:
    """A command whose page text fails when run again: what a script types instead."""

    page: str
    script: str


Command = str | Typed
Step = tuple[Command, ...]
Workflow = tuple[Step, ...]

# `quiet=True` adds -q to these (the benches and some tests want no progress output).
QUIET = ("pip install", "virtualenv", "git clone", "git checkout")


def _page(command: Command) -> str:
    return command.page if isinstance(command, Typed) else command


def _script(command: Command) -> str:
    return command.script if isinstance(command, Typed) else command


def quietly(command: str) -> str:
    """The command with -q after its program where it is one of QUIET, else as it is."""
    for prefix in QUIET:
        if command.startswith(prefix + " "):
            return f"{prefix} -q {command[len(prefix) + 1:]}"
    return command


def shown(workflow: Workflow, notes: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """Each step on a line as the page gives it; `notes` adds a remark to a step."""
    steps = tuple(" && ".join(_page(c) for c in step) for step in workflow)
    notes = dict(notes or {})
    unknown = set(notes) - set(steps)
    if unknown:
        raise ValueError(f"no step {sorted(unknown)[0]!r} to annotate")
    return tuple(f"{s}   ({notes[s]})" if s in notes else s for s in steps)


def commands(*parts: Workflow | str, quiet: bool = False,
             skip: Iterable[str] = ()) -> list[str]:
    """The commands a script types, in order: a workflow's (without those in `skip`, with
    -q where `quiet`), and a caller's own lines as they are."""
    skip = set(skip)
    found: set[str] = set()
    lines: list[str] = []
    for part in parts:
        if isinstance(part, str):
            lines.append(part)
            continue
        for step in part:
            for command in step:
                text = _script(command)
                if text in skip:
                    found.add(text)
                    continue
                lines.append(quietly(text) if quiet else text)
    if skip - found:
        raise ValueError(f"no command {sorted(skip - found)[0]!r} to skip")
    return lines


def script(*parts: Workflow | str, quiet: bool = False, skip: Iterable[str] = ()) -> str:
    return "\n".join(commands(*parts, quiet=quiet, skip=skip))


def one_line(*parts: Workflow | str, quiet: bool = False, skip: Iterable[str] = ()) -> str:
    return " && ".join(commands(*parts, quiet=quiet, skip=skip))


def with_arguments(workflow: Workflow, command: str, arguments: str) -> Workflow:
    """The workflow with `arguments` added to `command` (a rehearsal's shorter training)."""
    if not any(command in map(_script, step) for step in workflow):
        raise ValueError(f"no command {command!r} in the workflow")
    return tuple(tuple(f"{_script(c)} {arguments}" if _script(c) == command else c
                       for c in step) for step in workflow)


UPGRADE_PIP = "pip install --upgrade pip"

# Port forwarding to a node (seed 002 shows it to a SambaNova node), TensorBoard on it -------
SERVER_PORT = 6006
LOCAL_PORT = 16006
# The guide's line (on the node, in a venv; TensorBoard serves even when /logs is absent).
SERVER = f"tensorboard --logdir /logs --port {SERVER_PORT}"
