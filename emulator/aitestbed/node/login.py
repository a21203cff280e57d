"""A command in a user's login shell, as root runs it on a node: the one place that
spells `runuser -l` (stdlib only; the host's CLI, job runner and classroom load build
their commands here, the node runs them).

`runuser -l USER` starts USER's login shell as a login makes it: HOME, USER, LOGNAME
and SHELL from the user's passwd entry, the home as working directory, the profile
read; `-c COMMAND` hands the shell one command line. An unknown user is runuser's own
error.

  as_login(user, command)       the argv (no command: an interactive login shell)
  as_login_line(user, command)  the same as one shell-quoted line, for a caller that
                                sends a command line (a `sh -c` or a batch script)
"""

from __future__ import annotations

import shlex


def as_login(user: str, command: str | None = None) -> list[str]:
    """argv running `command` (one shell command line) in `user`'s login shell; without
    a command, the login shell itself."""
    return ["runuser", "-l", user, *(["-c", command] if command is not None else [])]


def as_login_line(user: str, command: str | None = None) -> str:
    """as_login as one command line, each word quoted for a POSIX shell."""
    return shlex.join(as_login(user, command))
