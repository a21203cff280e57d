"""`aitestbed exercise`: list, start and check the guide's first workflows."""

from __future__ import annotations

import sys

import click

from aitestbed.exercises import catalog
from aitestbed.exercises.session import Result, Session
from aitestbed.host.errors import AitestbedError


def _session(ctx: click.Context) -> Session:
    return Session(ctx.obj["name"])


def _user_option(function):
    return click.option("--user", "-u", default=None,
                        help="The learner (default: the cluster's practice user).")(function)


@click.group()
def exercise() -> None:
    """Self-checking exercises built from the user guide.

    \b
    aitestbed exercise list
    aitestbed exercise start cerebras-setup     # what to do, step by step
    aitestbed exercise check cerebras-setup     # what is done; a hint for what is not
    """


@exercise.command("list")
@_user_option
@click.pass_context
def list_(ctx: click.Context, user: str | None) -> None:
    """The exercises this cluster offers, and the learner's progress."""
    session = _session(ctx)
    name, _ = session.learner(user)
    progress = session.progress(name)
    rows = [("NAME", "SYSTEM", "STATUS", "TITLE")]
    for ex in session.exercises:
        status = ("passed" if ex.name in progress["passed"] else
                  "started" if ex.name in progress["started"] else "-")
        rows.append((ex.name, ex.system, status, ex.title))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    for row in rows:
        click.echo("  ".join([*(c.ljust(w) for c, w in zip(row, widths, strict=False)), row[3]]))


@exercise.command()
@click.argument("name")
@_user_option
@click.pass_context
def start(ctx: click.Context, name: str, user: str | None) -> None:
    """Show NAME's steps and record that the learner started it."""
    session = _session(ctx)
    ex = session.exercise(name)
    learner, _ = session.learner(user)
    session.start(ex, learner)
    values = session.values(learner)
    click.echo(f"{ex.name}: {ex.title}   (user {learner})\n")
    for number, step in enumerate(ex.steps, 1):
        lines = catalog.fill(step, values).splitlines()
        click.echo(f"{number:>3}. {lines[0]}")
        for line in lines[1:]:
            click.echo(f"     {line}")
    click.echo(f"\nWhen done: aitestbed --name {session.state.name} exercise check {ex.name}"
               + (f" --user {learner}" if learner != session.record.user else ""))


def show(result: Result) -> None:
    click.echo(f"{result.exercise.name}: {result.exercise.title}   (user {result.user})")
    for criterion in result.criteria:
        mark = "done" if criterion.done else "todo"
        note = f"   [{criterion.evidence}]" if criterion.done and criterion.evidence else ""
        click.echo(f"  {mark}  {criterion.text}{note}")
        if not criterion.done:
            click.echo(f"        next: {criterion.hint}")
    done = sum(c.done for c in result.criteria)
    verdict = "PASSED" if result.passed else "not yet"
    click.echo(f"  {done}/{len(result.criteria)} done: {verdict}")


@exercise.command()
@click.argument("name", required=False)
@click.option("--all", "all_", is_flag=True, help="Check every exercise of the cluster.")
@_user_option
@click.pass_context
def check(ctx: click.Context, name: str | None, all_: bool, user: str | None) -> None:
    """What of NAME is done on the cluster, and the next step for what is not.

    Exits 0 when everything is done, 1 otherwise.
    """
    if bool(name) == all_:
        raise AitestbedError("give one exercise NAME or --all")
    session = _session(ctx)
    chosen = session.exercises if all_ else [session.exercise(name)]
    learner, uid = session.learner(user)
    results = []
    for ex in chosen:
        results.append(session.check(ex, learner, uid))
        show(results[-1])
        if all_:
            click.echo()
    if all_:
        passed = sum(r.passed for r in results)
        click.echo(f"{passed}/{len(results)} exercises passed")
    sys.exit(0 if all(r.passed for r in results) else 1)
