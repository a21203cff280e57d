"""Act as a user on a cluster from this machine: the one driver of the cluster tests,
the benches and the rehearsal.

- `aitestbed(cluster, *args)` runs the aitestbed CLI for a cluster;
- a `Driver` is someone at this machine's terminal: ssh over the cluster's
  generated config (logging in again when a shared connection was lost, if
  asked to), scp, a hop from a login node to a compute node, the shared
  connection's controls (-O forward, cancel, exit), and a login without one;
- `wait_for(predicate, timeout, interval)` polls until something holds;
- `node_names(topology)` gives the node lists of an inventory profile;
- `terminal_view(output)` is what a terminal shows of a command's output.

What a command line looks like is built by pure functions (`ssh_argv`,
`hop_commands`, ...), so unit tests check them without a cluster.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from aitestbed.host import sshconfig
from aitestbed.host.inventory import Topology
from aitestbed.host.inventory import load as load_inventory
from aitestbed.host.state import ClusterState

T = TypeVar("T")

AITESTBED = (sys.executable, "-m", "aitestbed.cli")
# ssh's answer when the login node asks for a passcode again: the shared connection is gone.
LOST_CONNECTION = "Permission denied (keyboard-interactive)"
HOP_MARKER = "EOF_AITESTBED_STEP"
UPLOAD_TIMEOUT = 120.0


# the aitestbed CLI ------------------------------------------------------------------------
def cli_argv(cluster: str, *args: str) -> list[str]:
    return [*AITESTBED, "--name", cluster, *args]


def aitestbed(cluster: str, *args: str, timeout: float | None = None,
              **options) -> subprocess.CompletedProcess:
    """`aitestbed --name cluster ARGS`; output captured as text unless `options` say otherwise
    (stdout=, stderr=, env=, ...). Never raises on a failure: look at returncode."""
    options = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True, **options}
    return subprocess.run(cli_argv(cluster, *args), timeout=timeout, check=False, **options)


# what a user reads ----------------------------------------------------------------------------
_CONTROL = re.compile(r"(\x1b\[[0-9;]*[A-Za-z]|\r|\n|\x08)")


def terminal_view(output: str) -> str:
    """The text a terminal shows for this output: carriage returns, backspaces, cursor-up
    (ESC[nA), erase-to-end-of-line (ESC[K) and line ends applied, other escapes dropped.
    Progress bars redraw with "\r" (tqdm draws a nested bar one line down and moves back
    up), so each bar leaves its last state, as on the user's screen. (Splitting at "\r"
    with str.splitlines(), which also breaks there, keeps every redraw as a line: a tqdm
    bar's final state, drawn by its last step and again on close, then shows twice.)"""
    rows: list[list[str]] = [[]]
    row = col = 0
    for token in _CONTROL.split(output):
        if token == "\r":
            col = 0
        elif token == "\n":
            row, col = row + 1, 0
            if row == len(rows):
                rows.append([])
        elif token == "\x08":  # backspace
            col = max(col - 1, 0)
        elif token.startswith("\x1b["):
            if token.endswith("A"):
                row = max(row - int(token[2:-1] or 1), 0)
            elif token == "\x1b[K":
                del rows[row][col:]
        elif token:
            line = rows[row]
            line.extend(" " * (col - len(line)))
            line[col:col + len(token)] = token
            col += len(token)
    return "\n".join("".join(line).rstrip() for line in rows)


# waiting ------------------------------------------------------------------------------------
class TimedOut(AssertionError):
    """What wait_for raises by default: a test fails with it, as with an assert."""


def wait_for(predicate: Callable[[], T], timeout: float, interval: float = 1.0,
             what: str = "the condition",
             error: Callable[[str], Exception] = TimedOut) -> T:
    """Call predicate every `interval` seconds until it returns something true, and return
    that; it is called at least once, and once more after the deadline. After `timeout`
    seconds, raise error("timed out after N s waiting for WHAT")."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise error(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)


# node lists from the inventory --------------------------------------------------------------
@dataclass(frozen=True)
class NodeNames:
    """A profile's nodes by name, in the inventory's order (sorted)."""

    all: tuple[str, ...]
    login: tuple[str, ...]  # login nodes (node class `login`): users ssh there from here
    systems: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def of(self, system: str) -> tuple[str, ...]:
        return self.systems.get(system, ())


def node_names(topology: Topology) -> NodeNames:
    systems: dict[str, list[str]] = {}
    for node in topology.nodes:
        systems.setdefault(node.system, []).append(node.name)
    return NodeNames(all=tuple(n.name for n in topology.nodes),
                     login=tuple(n.name for n in topology.nodes if n.node_class == "login"),
                     systems={s: tuple(names) for s, names in systems.items()})


def profile_node_names(profile: str = "mini") -> NodeNames:
    return node_names(load_inventory(profile))


# command lines ------------------------------------------------------------------------------
def ssh_argv(config: Path | str, host: str, *options: str, user: str | None = None,
             batch: bool = True) -> list[str]:
    """ssh over the cluster's config; `-l user` only when given (else the config's User)."""
    return [*ssh_base(config, *options, user=user, batch=batch), host]


def ssh_base(config: Path | str, *options: str, user: str | None = None,
             batch: bool = True) -> list[str]:
    """ssh and its options without a host (for rsync -e, or to add the host later)."""
    argv = ["ssh", "-F", str(config)]
    if batch:
        argv += ["-o", "BatchMode=yes"]
    if user:
        argv += ["-l", user]
    return [*argv, *options]


def scp_argv(config: Path | str, source: Path | str, host: str, target: str = "~/",
             user: str | None = None) -> list[str]:
    argv = ["scp", "-F", str(config), "-o", "BatchMode=yes"]
    if user:
        argv += ["-o", f"User={user}"]
    return [*argv, str(source), f"{host}:{target}"]


def control_argv(config: Path | str, host: str, action: str, user: str) -> list[str]:
    """Ask the shared connection to host to do `action` (exit, check, ...)."""
    return ["ssh", "-F", str(config), "-l", user, "-O", action, host]


def hop_commands(node: str, script: str, name: str | None = None) -> tuple[str, str]:
    """The two commands, run on a login node, that put `script` in a file in the home and
    run it in a login shell on `node` (reached with ssh as the guide does), then remove it.
    The second one exits with the script's exit code."""
    if any(line.strip() == HOP_MARKER for line in script.splitlines()):
        raise ValueError(f"a script may not contain a line {HOP_MARKER}")
    name = name or f".aitestbed-step-{uuid.uuid4().hex[:8]}.sh"
    upload = f"cat > ~/{name} <<'{HOP_MARKER}'\n{script}\n{HOP_MARKER}"
    run = f"ssh {node} bash -l ~/{name}; rc=$?; rm -f ~/{name}; exit $rc"
    return upload, run


def password_login_argv(config: Path | str, host: str, user: str, command: str,
                        *options: str) -> list[str]:
    """One login that answers the Password: prompt, on a connection of its own."""
    return ["ssh", "-F", str(config), "-o", "ControlPath=none", *options, "-l", user, host,
            command]


def askpass_env(askpass: Path | str) -> dict[str, str]:
    return {**os.environ, "SSH_ASKPASS": str(askpass), "SSH_ASKPASS_REQUIRE": "force",
            "DISPLAY": ":0"}


# the person at the terminal -----------------------------------------------------------------
@dataclass
class Driver:
    """Someone at this machine's terminal who uses one cluster.

    user: who ssh logs in as (`-l user`); None leaves it to the config (the practice user).
    login_options: given to every passcode login (e.g. ControlPersist=yes).
    relogin: when a command is refused because the shared connection is gone (a login
    node restarted), log in again with the passcode and run it once more.
    """

    cluster: str
    user: str | None = None
    login_options: tuple[str, ...] = ()
    relogin: bool = False

    @property
    def state(self) -> ClusterState:
        return ClusterState(self.cluster)

    @property
    def ssh_config(self) -> Path:
        return self.state.ssh_config_path

    def default_user(self) -> str:
        return self.user or self.state.load().user

    def cli(self, *args: str, timeout: float | None = None,
            **options) -> subprocess.CompletedProcess:
        return aitestbed(self.cluster, *args, timeout=timeout, **options)

    # logging in ---------------------------------------------------------------------------
    def log_in(self, host: str, user: str | None = None) -> subprocess.CompletedProcess:
        """Log in with the current passcode as a user types it (SSH_ASKPASS answers the
        `Password:` prompt); the config keeps the connection for later ssh and scp."""
        return sshconfig.log_in(self.state, host, user or self.default_user(),
                                *self.login_options)

    def log_out(self, host: str, user: str | None = None) -> subprocess.CompletedProcess:
        """Close the shared connection to host."""
        return subprocess.run(control_argv(self.ssh_config, host, "exit",
                                           user or self.default_user()),
                              capture_output=True, stdin=subprocess.DEVNULL, timeout=30,
                              check=False)

    def password_login(self, host: str, user: str, askpass: Path | str, *options: str,
                       command: str = "whoami",
                       timeout: float | None = None) -> subprocess.CompletedProcess:
        """One login typing what `askpass` prints at the prompt, without a shared connection."""
        return subprocess.run(password_login_argv(self.ssh_config, host, user, command,
                                                  *options),
                              capture_output=True, text=True, env=askpass_env(askpass),
                              stdin=subprocess.DEVNULL, timeout=timeout, check=False)

    # commands -----------------------------------------------------------------------------
    def ssh_argv(self, host: str, *options: str) -> list[str]:
        return ssh_argv(self.ssh_config, host, *options, user=self.user)

    def ssh_base(self, *options: str) -> list[str]:
        return ssh_base(self.ssh_config, *options, user=self.user)

    def ssh(self, host: str, command: str, *options: str, timeout: float | None = None,
            input: str | None = None) -> subprocess.CompletedProcess:
        """ssh from this machine, as a user does with the generated config (over the shared
        connection a passcode login opened, so nothing is asked). `input` is the command's
        standard input (none when not given)."""
        argv = [*self.ssh_argv(host, *options), command]

        def attempt() -> subprocess.CompletedProcess:
            stdin = {"input": input} if input is not None else {"stdin": subprocess.DEVNULL}
            return subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                                  check=False, **stdin)

        result = attempt()
        if (self.relogin and not options and result.returncode == 255
                and LOST_CONNECTION in result.stderr):
            login = self.log_in(host)
            if login.returncode:
                return login
            result = attempt()
        return result

    def run(self, host: str, command: str, timeout: float | None = None) -> tuple[int, str]:
        """(exit code, stdout and stderr) of a shell command on a login node."""
        result = self.ssh(host, command, timeout=timeout)
        return result.returncode, result.stdout + result.stderr

    def hop(self, login: str, node: str, script: str,
            timeout: float | None = None) -> subprocess.CompletedProcess:
        """Run `script` in a login shell on `node`, reached from `login` as in the guide.
        When the script cannot be written to the home, that failure is the result."""
        upload, run = hop_commands(node, script)
        written = self.ssh(login, upload, timeout=UPLOAD_TIMEOUT)
        if written.returncode:
            return written
        return self.ssh(login, run, timeout=timeout)

    def scp(self, source: Path | str, host: str, target: str = "~/",
            timeout: float | None = 120) -> subprocess.CompletedProcess:
        return subprocess.run(scp_argv(self.ssh_config, source, host, target, self.user),
                              capture_output=True, text=True, stdin=subprocess.DEVNULL,
                              timeout=timeout, check=False)

    def control(self, host: str, action: str, *options: str,
                check: bool = False) -> subprocess.CompletedProcess:
        """Ask the shared connection to host to `action` (forward, cancel) with options
        (-L ...), as `ssh -O forward -L ... host` does."""
        return subprocess.run(self.ssh_argv(host, "-O", action, *options), capture_output=True,
                              text=True, stdin=subprocess.DEVNULL, timeout=30, check=check)

