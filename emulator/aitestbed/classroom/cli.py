"""`aitestbed classroom` and `aitestbed load`: run a workshop on one testbed."""

from __future__ import annotations

import time

import click

from aitestbed.classroom import roster, sheets
from aitestbed.classroom.room import Classroom
from aitestbed.host.errors import AitestbedError
from aitestbed.host.inventory import parse_systems


def _room(ctx: click.Context) -> Classroom:
    return Classroom(ctx.obj["name"])


@click.group()
def classroom() -> None:
    """A workshop's learners on this testbed, and the instructor's page.

    \b
    aitestbed classroom create --learners 30      # accounts, tokens, a sheet each
    aitestbed classroom serve                     # the instructor's page
    aitestbed classroom begin graphcore-mnist     # everyone starts an exercise
    aitestbed classroom reset learner07 [--exercise graphcore-mnist]
    aitestbed classroom destroy                   # offboard them all (homes archived)
    """


@classroom.command()
@click.option("--learners", "count", type=int, required=True, metavar="N",
              help="How many learner accounts to make.")
@click.option("--prefix", default="learner", show_default=True,
              help="Their names: PREFIX01, PREFIX02, ...")
@click.option("--systems", default=None, metavar="LIST",
              help="The systems they may use, comma-separated (default: all of the cluster's).")
@click.option("--project", default="workshop", show_default=True,
              help="The project they all join (/projects/PROJECT).")
@click.option("--listen", default=None, metavar="ADDRESS",
              help="Publish the login nodes' ssh on this address of the machine, for the "
                   "learners' laptops (default: 127.0.0.1 only). Needs MFA on every login "
                   "node.")
@click.option("--pdf/--no-pdf", default=True, show_default=True,
              help="Also print the sheets to one PDF (with Debian's chromium).")
@click.pass_context
def create(ctx: click.Context, count: int, prefix: str, systems: str | None, project: str,
           listen: str | None, pdf: bool) -> None:
    """Make the learners' accounts (one playbook run) and a sheet for each."""
    started = time.monotonic()
    room = _room(ctx)

    def step(text: str) -> None:
        click.echo(f"aitestbed: {text} ({time.monotonic() - started:.0f} s)", err=True)

    made = room.create(count, prefix, project, parse_systems(systems) or [], listen=listen,
                       on_step=step)
    names = list(made.learners)
    click.echo(f"{len(names)} learners: {names[0]}..{names[-1]} (uids "
               f"{min(made.learners.values())}-{max(made.learners.values())}), project "
               f"{made.project}, systems {', '.join(made.systems)}; "
               f"{time.monotonic() - started:.1f} s")
    _write_sheets(room, made, pdf)
    if made.listen:
        click.echo(f"aitestbed: warning: the login nodes' ssh now listens on {made.listen}: "
                   "anyone who reaches that address can try to log in (each login asks for a "
                   "one-time passcode). `classroom destroy` puts them back on 127.0.0.1.",
                   err=True)


def _write_sheets(room: Classroom, made: roster.Room, pdf: bool) -> None:
    written = sheets.write(room.state, room.topology, made, pdf=pdf)
    click.echo(f"sheets: {written['directory']}/<learner>.html, all of them in index.html")
    if written["pdf"]:
        click.echo(f"sheets to print: {written['pdf']}")
    elif pdf:
        click.echo(f"aitestbed: {written['pdf_note']}", err=True)


@classroom.command("sheets")
@click.option("--pdf/--no-pdf", default=True, show_default=True,
              help="Also print them to one PDF (with Debian's chromium).")
@click.pass_context
def sheets_(ctx: click.Context, pdf: bool) -> None:
    """Write every learner's sheet again (after `up` changed a port, say)."""
    room = _room(ctx)
    _write_sheets(room, room.room, pdf)


@classroom.command("list")
@click.pass_context
def list_(ctx: click.Context) -> None:
    """The room: its learners, their uids, where the login nodes listen."""
    room = _room(ctx).room
    click.echo(f"project {room.project} (gid {room.project_gid}), systems "
               f"{', '.join(room.systems)}, login nodes on {room.listen or '127.0.0.1'}, "
               f"made {room.created}")
    if room.exercises:
        click.echo("begun: " + ", ".join(f"{n} ({t})" for n, t in room.exercises.items()))
    for name, uid in room.learners.items():
        click.echo(f"{name}\t{uid}")


@classroom.command()
@click.argument("exercise")
@click.pass_context
def begin(ctx: click.Context, exercise: str) -> None:
    """Start EXERCISE for the room: keep every home as it is now (for `reset --exercise`)."""
    done = _room(ctx).begin(exercise)
    click.echo(f"{exercise}: kept the homes of {len(done['kept'])} learners as they are now; "
               f"`classroom reset LEARNER --exercise {exercise}` brings one back to this")
    for line in done["left_out"]:
        click.echo(f"aitestbed: warning: {line}: not kept (`reset --exercise {exercise}` "
                   "cannot bring it back to this)", err=True)


@classroom.command()
@click.argument("learner")
@click.option("--exercise", default=None, metavar="NAME",
              help="Back to the start of this exercise (as `classroom begin NAME` kept it) "
                   "instead of the account's creation.")
@click.pass_context
def reset(ctx: click.Context, learner: str, exercise: str | None) -> None:
    """Cancel LEARNER's jobs everywhere and give them back their home as it was."""
    done = _room(ctx).reset(learner, exercise)
    click.echo(f"{learner}: jobs cancelled ({'; '.join(done['cancelled'])}); home restored to "
               f"{'its creation' if exercise is None else 'the start of ' + exercise}; what "
               f"was there is kept in {done['archive']}")


@classroom.command()
@click.option("--host", default="127.0.0.1", show_default=True,
              help="The address to serve the page on.")
@click.option("--port", default=8700, show_default=True, type=int)
@click.option("--interval", default=5.0, show_default=True, type=float,
              help="Seconds between two readings of the cluster (the page refreshes as often).")
@click.pass_context
def serve(ctx: click.Context, host: str, port: int, interval: float) -> None:
    """Serve the instructor's page: every learner's progress and every system's queue."""
    from aitestbed.classroom import web  # noqa: PLC0415 - Flask only here

    if interval <= 0:
        raise AitestbedError("--interval must be above 0 seconds")
    web.serve(ctx.obj["name"], host=host, port=port, interval=interval)


@classroom.command()
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.pass_context
def destroy(ctx: click.Context, yes: bool) -> None:
    """Offboard every learner: jobs cancelled, homes archived, logins refused."""
    room = _room(ctx)
    learners = list(room.room.learners)
    if not yes:
        click.confirm(f"offboard {len(learners)} learners of cluster {room.state.name!r} "
                      "(their homes are archived)?", abort=True)
    started = time.monotonic()
    done = room.destroy()
    click.echo(f"offboarded {len(done['learners'])} learners in "
               f"{time.monotonic() - started:.1f} s; homes archived to {done['archives']}")
    for line in done["left_in_place"]:
        click.echo(f"aitestbed: warning: {line}", err=True)


@click.group()
def load() -> None:
    """Other users' jobs on every system, so learners meet real queues.

    \b
    aitestbed load start --level busy
    aitestbed load stop
    """


@load.command("start")
@click.option("--level", type=click.Choice(["light", "busy"]), default="light", show_default=True,
              help="light: about half of each system held and a job waiting (Resources); "
                   "busy: everything held and a queue (Resources), (Priority).")
@click.pass_context
def load_start(ctx: click.Context, level: str) -> None:
    """Start other users' jobs on every system (they resubmit until `load stop`)."""
    from aitestbed.classroom import load as background  # noqa: PLC0415

    started = time.monotonic()
    running = background.start(
        ctx.obj["name"], level,
        on_step=lambda s: click.echo(f"aitestbed: {s} ({time.monotonic() - started:.0f} s)",
                                     err=True))
    for line in background.describe(running):
        click.echo(line)


@load.command("stop")
@click.pass_context
def load_stop(ctx: click.Context) -> None:
    """Cancel every load job and wsjob and offboard the load's users."""
    from aitestbed.classroom import load as background  # noqa: PLC0415

    started = time.monotonic()
    done = background.stop(
        ctx.obj["name"],
        on_step=lambda s: click.echo(f"aitestbed: {s} ({time.monotonic() - started:.0f} s)",
                                     err=True))
    click.echo(done["message"])
