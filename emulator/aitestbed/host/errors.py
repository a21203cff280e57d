"""The one exception our code raises for bad input or an unusable environment, and
how a command-line program built on click reports it.

The CLI prints its message as one line and exits non-zero; no traceback.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import click


class AitestbedError(Exception):
    """A failure the user can act on; the message says how."""


def run_click(command: click.Command, prog: str) -> None:
    """Run a click command as the program `prog` (`aitestbed`, `rehearse`).

    Our errors and the engine's end it with one line on stderr (`prog: error: ...`) and
    status 1, click's usage errors with click's message and status, ^C with 130:
    never a traceback.
    """
    import click
    from docker.errors import DockerException

    try:
        command(standalone_mode=False)
    except click.exceptions.Abort:
        sys.exit(130)
    except click.ClickException as err:
        err.show()
        sys.exit(err.exit_code)
    except AitestbedError as err:
        click.echo(f"{prog}: error: {err}", err=True)
        sys.exit(1)
    except KeyboardInterrupt:
        sys.exit(130)
    except DockerException as err:  # engine/API failures: one line, no traceback
        click.echo(f"{prog}: error: Docker engine: {err}", err=True)
        sys.exit(1)
